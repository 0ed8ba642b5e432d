"""Watching a trained policy: play games with it, print the scores, maybe record them."""

import os
from collections.abc import Callable, Iterator
from functools import partial

import gymnasium as gym
import numpy as np

from pong.core.model import Model
from pong.core.rollout import play_game
from pong.envs.make import check_env, make_env
from pong.run.checkpoint import CheckpointError, load
from pong.run.config import Evaluation, fresh_seed
from pong.run.errors import UsageError, writing
from pong.run.files import atomic_write
from pong.tools.gif import GifWriter

__all__ = ["evaluate", "play_games", "report"]

FRAME_SECONDS = 4 / 60  # one ALE/Pong-v5 step: 4 frames of the 60 Hz console
Score = tuple[int, int, int]  # points won, points lost, steps
say = partial(print, flush=True)  # each line as it happens, even into a pipe


def play_games(
    model: Model, env_id: str, games: int, seed: int, on_frame: Callable | None = None
) -> Iterator[Score]:
    """Play ``games`` games, sampling actions as in training; yield each ``Score`` as it ends.
    Game ``i`` is seeded with ``seed + i``, env reset and action draws alike, so two policies
    meet the same games, and ``seed=seed + i, games=1`` plays game ``i`` again. ``on_frame`` is
    handed every frame, by a wrapper (so ``play_game`` reads the frames through Gymnasium)."""
    env = make_env(env_id)
    if on_frame is not None:  # (on_frame returns None)
        env = gym.wrappers.TransformObservation(env, lambda frame: on_frame(frame) or frame, None)
    with env:  # closed however the games end
        for game_seed in range(seed, seed + games):
            rewards = play_game(model, env, np.random.default_rng(game_seed), game_seed).epr
            yield int((rewards > 0).sum()), int((rewards < 0).sum()), len(rewards)


def evaluate(options: Evaluation, env_id: str | None = None, seed: int | None = None) -> None:
    """``--evaluate``: play games with a saved policy, print each score, maybe record them."""
    try:
        checkpoint = load(options.evaluate, policy=True)
        check_env(env_id or checkpoint.config.env)
    except CheckpointError as e:
        raise UsageError(f"--evaluate: {e}") from None
    except ValueError as e:  # the policy's own env may have been edited into its file
        flag = "--env" if env_id else f"--evaluate: {options.evaluate}: env"
        raise UsageError(f"{flag}: {e}") from None
    trained_on, record, games = checkpoint.config.env, options.record, options.games
    env_id, seed = env_id or trained_on, fresh_seed() if seed is None else seed
    if record is not None and not record.parent.is_dir():  # said before the games, not after
        raise UsageError(f"--record: no such directory {record.parent}")
    if record is not None and (record.is_dir() or not os.access(record.parent, os.W_OK)):
        why = "is a directory" if record.is_dir() else "cannot be written here"
        raise UsageError(f"--record: {record} {why}")
    say(
        f"Playing {games} game{'s' * (games != 1)} of {env_id} with the policy of"
        f" {options.evaluate} (update {checkpoint.updates}), seed {seed}"
    )
    if env_id != trained_on:  # a policy may play another Pong env, but a user should know
        say(f"note: this policy was trained on {trained_on!r}, not {env_id}")
    model, scores = Model.from_weights(checkpoint.weights), []
    try:
        if record is None:
            report(play_games(model, env_id, games, seed), seed, scores)
        else:  # written as played; a stop or a full disk leaves any old GIF whole
            with writing(record, "it is as it was"), atomic_write(record) as f:
                gif = GifWriter(f, FRAME_SECONDS)
                report(play_games(model, env_id, games, seed, gif.add), seed, scores)
                gif.close()
    except KeyboardInterrupt:  # the games played are said, and that the GIF was not written
        kept = "" if record is None else f"; nothing was written to {record} (it is as it was)"
        say(f"Stopped after {len(scores)} of {games} game{'s' * (games != 1)}{kept}")
        if scores:
            _mean(scores)
        raise
    _mean(scores)
    if record is not None:
        say(f"Recorded {gif.frames} frames to {record}")


def _mean(scores: list[Score]) -> None:
    points = np.array([won - lost for won, lost, _ in scores])
    say(
        f"Mean score {points.mean():+.2f} (standard deviation {points.std():.2f}) over"
        f" {len(scores)} game{'s' * (len(scores) != 1)}; won {(points > 0).sum()}"
    )


def report(games: Iterator[Score], seed: int, scores: list[Score] | None = None) -> list[Score]:
    """Print each game's score, and its seed, as it ends; all of them, in order, appended to
    ``scores`` as they end (so a stop keeps those played)."""
    scores = [] if scores is None else scores
    for game, (won, lost, steps) in enumerate(games):
        outcome = "won" if won > lost else "lost"
        scores.append((won, lost, steps))  # before the line: a stop after it counts the game
        say(f"Game {game + 1} (seed {seed + game}): {outcome} {won}-{lost} in {steps} steps")
    return scores
