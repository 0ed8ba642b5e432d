"""pong.tools.snapshot: a run's weights and a game of its policy, every --watch-every updates."""

from __future__ import annotations

import io
import shutil

import numpy as np
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from pong.core.model import Model
from pong.run.checkpoint import load
from pong.run.config import Config
from pong.run.directory import WATCH, Run
from pong.tools.evaluate import play_games
from pong.tools.snapshot import take
from pong.tools.weights import picture
from tests.helpers import TOY
from tests.run.test_directory import StandInTrainer, record


def test_a_snapshot_is_the_weights_picture_and_the_game_of_that_seed() -> None:
    model = Model(seed=4)
    shot = take(model, TOY.env, seed=7)
    weights = np.asarray(Image.open(io.BytesIO(shot.weights_png)))
    np.testing.assert_array_equal(weights, picture(model.weights["W1"]))
    [(won, lost, steps)] = play_games(model, TOY.env, 1, seed=7)  # the same game, unrecorded
    assert (shot.won, shot.lost, shot.steps) == (won, lost, steps)
    gif = Image.open(io.BytesIO(shot.game_gif))
    assert gif.format == "GIF" and gif.size == (80, 105) == shot.game_shape[::-1]
    assert gif.n_frames > 10  # the game's frames (GifWriter merges frames that repeat)


def test_every_n_updates_the_run_keeps_a_snapshot_in_tensorboard_and_watch(tmp_path) -> None:
    run = Run.start(tmp_path / "run", Config(batch_size=2, env=TOY.env, seed=1), 10)
    run.watch_every = 2
    trainer = StandInTrainer(run.config)
    run.open()
    for _ in range(5):
        assert record(run, trainer) is None
    run.close(trainer)
    kept = sorted(p.name for p in (run.directory / WATCH).iterdir())
    assert kept == [
        "game-000002.gif", "game-000004.gif", "weights-000002.png", "weights-000004.png"
    ]  # fmt: skip
    board = EventAccumulator(str(run.directory), size_guidance={"images": 0})
    board.Reload()
    games = board.Images("watch/game")
    assert [e.step for e in games] == [400, 800]  # env steps, as every curve's
    assert games[0].encoded_image_string == (run.directory / WATCH / "game-000002.gif").read_bytes()
    weights = board.Images("watch/weights")
    assert (weights[1].width, weights[1].height) == (1619, 809)


def test_a_snapshot_that_cannot_be_written_is_a_warning_and_the_run_goes_on(tmp_path) -> None:
    run = Run.start(tmp_path / "run", Config(batch_size=2, env=TOY.env, seed=1), 10)
    run.watch_every = 1
    trainer = StandInTrainer(run.config)
    run.open()
    assert record(run, trainer) is None
    shutil.rmtree(run.directory / WATCH)
    (run.directory / WATCH).write_text("a file where the pictures go")
    said = record(run, trainer)
    assert said.startswith("warning: could not write") and str(run.directory / WATCH) in said
    assert "no picture or game of this update was kept" in said and "\n" not in said
    assert record(run, trainer) is not None  # each later one is skipped the same way
    run.close(trainer)
    assert load(run.directory).updates == 3  # the run went on and saved its last update
