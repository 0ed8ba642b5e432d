"""Watching a trained policy: play games with it, print the scores, optionally record them."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import gymnasium as gym
import numpy as np

from pong.core.model import Model
from pong.core.rollout import rollout
from pong.envs.make import check_env, make_env
from pong.run.checkpoint import CheckpointError, load
from pong.run.config import Watch, fresh_seed
from pong.run.errors import UsageError, writing
from pong.run.files import atomic_write
from pong.tools.gif import GifWriter

__all__ = ["FrameRecorder", "play_games", "report", "watch"]

FRAME_SECONDS = 4 / 60  # one ALE/Pong-v5 step: 4 frames of the 60 Hz console


class FrameRecorder(gym.Wrapper):
    """Hands every observation the env returns to ``on_frame``, for a video."""

    def __init__(self, env: gym.Env, on_frame: Callable[[np.ndarray], None]) -> None:
        super().__init__(env)
        self.on_frame = on_frame

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.on_frame(obs)
        return obs, info

    def step(self, action):
        obs, *rest = self.env.step(action)
        self.on_frame(obs)
        return obs, *rest


def play_games(
    model: Model,
    env_id: str,
    episodes: int,
    seed: int,
    on_frame: Callable[[np.ndarray], None] | None = None,
) -> Iterator[tuple[int, int, int]]:
    """Play ``episodes`` games with ``model``, sampling actions as in training; yield (points
    won, points lost, steps) as each ends, and hand ``on_frame`` every frame played.

    Game ``i`` (from 0) is seeded with ``seed + i``, its env reset and its action draws
    alike, so two policies meet the same game seeds, and ``seed=seed + i, episodes=1``
    plays game ``i`` again.
    """
    env: gym.Env = make_env(env_id)
    if on_frame is not None:
        env = FrameRecorder(env, on_frame)
    try:
        for game in range(episodes):
            episode = rollout(model, env, np.random.default_rng(seed + game), seed=seed + game)
            yield int((episode.epr > 0).sum()), int((episode.epr < 0).sum()), len(episode.epr)
    finally:
        env.close()


def watch(options: Watch, env_id: str | None = None, seed: int | None = None) -> None:
    """``--evaluate``: play games with a saved policy, print each score, maybe record them.

    Raises:
        UsageError: the policy, the env or the GIF's directory cannot be used.
    """
    try:
        checkpoint = load(options.evaluate, policy=True)
    except CheckpointError as e:
        raise UsageError(f"--evaluate: {e}") from None
    trained_on, given = checkpoint.config.env, env_id
    env_id = env_id or trained_on
    try:
        check_env(env_id)
    except ValueError as e:  # the policy's own env may have been edited into its file
        flag = "--env" if given else f"--evaluate: {options.evaluate}: env"
        raise UsageError(f"{flag}: {e}") from None
    record, episodes = options.record, options.episodes
    _check_record(record)  # said before the games, not after
    seed = fresh_seed() if seed is None else seed
    print(
        f"Playing {episodes} game{'s' * (episodes != 1)} of {env_id} with the policy of"
        f" {options.evaluate} (update {checkpoint.iteration}), seed {seed}",
        flush=True,
    )
    if env_id != trained_on:  # a policy may play another Pong env, but a user should know
        print(f"note: this policy was trained on {trained_on!r}, not {env_id}", flush=True)
    model = Model.from_weights(checkpoint.weights)
    if record is None:
        scores = report(play_games(model, env_id, episodes, seed), seed)
    else:  # written as played; a stop or a full disk leaves any old GIF whole
        with writing(record, "no recording was kept"), atomic_write(record) as f:
            gif = GifWriter(f, FRAME_SECONDS)
            scores = report(play_games(model, env_id, episodes, seed, on_frame=gif.add), seed)
            gif.close()
    points = np.array([won - lost for won, lost, _ in scores])
    print(
        f"Mean score {points.mean():+.2f} (standard deviation {points.std():.2f}) over"
        f" {len(scores)} game{'s' * (len(scores) != 1)}; won {(points > 0).sum()}",
        flush=True,
    )
    if record is not None:
        print(f"Recorded {gif.frames} frames to {record}", flush=True)


def _check_record(record: Path | None) -> None:
    """Refuse a ``--record`` path that cannot be written (``UsageError``)."""
    if record is not None and not record.parent.is_dir():
        raise UsageError(f"--record: no such directory {record.parent}")
    if record is not None and (record.is_dir() or not os.access(record.parent, os.W_OK)):
        why = "is a directory" if record.is_dir() else "cannot be written here"
        raise UsageError(f"--record: {record} {why}")


def report(games: Iterator[tuple[int, int, int]], seed: int) -> list[tuple[int, int, int]]:
    """Print each game's score, and its seed, as it ends; all of them, in order."""
    scores = []
    for game, (won, lost, steps) in enumerate(games):
        outcome = "won" if won > lost else "lost"
        print(
            f"Game {game + 1} (seed {seed + game}): {outcome} {won}-{lost} in {steps} steps",
            flush=True,
        )
        scores.append((won, lost, steps))
    return scores
