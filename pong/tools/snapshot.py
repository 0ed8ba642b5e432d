"""Watching a run improve: every ``--watch-every`` updates, the weights and a game of the policy,
which the run keeps in TensorBoard and ``RUN_DIR/watch/`` (as CleanRL's ``--capture-video``)."""

import io
from typing import NamedTuple

from pong.core.model import Model
from pong.tools.evaluate import FRAME_SECONDS, play_games
from pong.tools.gif import GifWriter
from pong.tools.weights import save_png

__all__ = ["Snapshot", "take"]


class Snapshot(NamedTuple):
    """What the policy of one update looks like and plays like; the images' (height, width)."""

    weights_png: bytes  # pong.tools.weights.picture
    weights_shape: tuple[int, int]
    game_gif: bytes  # one game, every frame at half size
    game_shape: tuple[int, int]
    won: int
    lost: int
    steps: int


def take(model: Model, env_id: str, seed: int) -> Snapshot:
    """Draw ``model``'s weights and play one game of ``env_id`` (game seed ``seed``)."""
    png, game = io.BytesIO(), io.BytesIO()
    shape = save_png(model.weights["W1"], png)
    gif = GifWriter(game, FRAME_SECONDS)
    [(won, lost, steps)] = play_games(model, env_id, 1, seed, lambda f: gif.add(f[::2, ::2]))
    gif.close()
    return Snapshot(png.getvalue(), shape, game.getvalue(), gif.shown.shape, won, lost, steps)
