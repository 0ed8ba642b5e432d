"""Watching a trained policy: play games with it, print the scores, optionally record them."""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym
import numpy as np

from pong.checkpoint import CheckpointError, atomic_open, load
from pong.config import Watch, fresh_seed
from pong.env import check_env, make_env
from pong.errors import UsageError
from pong.model import Model
from pong.rollout import rollout

__all__ = ["FrameRecorder", "play_games", "watch", "write_gif"]

FRAME_SECONDS = 4 / 60  # one ALE/Pong-v5 step: 4 frames of the 60 Hz console


class FrameRecorder(gym.Wrapper):
    """Keeps a copy of every observation the env returns, for a video."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.frames: list[np.ndarray] = []

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.frames.append(obs.copy())
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.frames.append(obs.copy())
        return obs, reward, terminated, truncated, info


def play_games(
    model: Model, env_id: str, episodes: int, seed: int, record: bool = False
) -> tuple[list[tuple[int, int, int]], list[np.ndarray]]:
    """Play ``episodes`` games with ``model``, sampling actions as in training.

    Returns:
        ``(scores, frames)``: (points won, points lost, steps) per game, and
        every frame of every game when ``record`` is set (else empty).
    """
    env: gym.Env = make_env(env_id)
    if record:
        env = FrameRecorder(env)
    rng = np.random.default_rng(seed)
    scores = []
    for game in range(episodes):
        episode = rollout(model, env, rng, seed=seed if game == 0 else None)
        scores.append(
            (int((episode.epr > 0).sum()), int((episode.epr < 0).sum()), len(episode.epr))
        )
    env.close()
    return scores, env.frames if record else []


def write_gif(path: str | os.PathLike, frames: list[np.ndarray], every: int = 1) -> Path:
    """Write ``frames`` (every ``every``-th) as an animated GIF at the game's speed.

    Pong's frames have a handful of colours, so the GIF's 256-colour palette
    keeps every pixel exact.
    """
    from PIL import Image

    path = Path(path)
    chosen = frames[::every]
    first, rest = Image.fromarray(chosen[0]), (Image.fromarray(f) for f in chosen[1:])
    with atomic_open(path, "wb") as f:  # a stop while writing leaves any old GIF whole
        first.save(
            f,
            format="GIF",
            save_all=True,
            append_images=rest,
            duration=10 * round(100 * FRAME_SECONDS * every),  # GIFs count centiseconds
            loop=0,
        )
    return path


def watch(options: Watch, env_id: str | None = None, seed: int | None = None) -> None:
    """``--evaluate``: play games with a saved policy, print each score, maybe record them.

    Raises:
        UsageError: the policy, the env or the GIF's directory cannot be used.
    """
    try:
        checkpoint = load(options.evaluate, policy=True)
    except CheckpointError as e:
        raise UsageError(f"--evaluate: {e}") from None
    env_id = env_id or checkpoint.config.env
    try:
        check_env(env_id)
    except ValueError as e:
        raise UsageError(f"--env: {e}") from None
    record = options.record
    if record is not None and not record.parent.is_dir():
        raise UsageError(f"--record: no such directory {record.parent}")
    if record is not None and (record.is_dir() or not os.access(record.parent, os.W_OK)):
        why = "is a directory" if record.is_dir() else "cannot be written here"
        raise UsageError(f"--record: {record} {why}")  # said before the games, not after
    seed = fresh_seed() if seed is None else seed
    episodes = options.episodes
    print(
        f"Playing {episodes} game{'s' * (episodes != 1)} of {env_id} with the policy of"
        f" {options.evaluate} (update {checkpoint.iteration}), seed {seed}",
        flush=True,
    )
    model = Model.from_weights(checkpoint.weights)
    scores, frames = play_games(model, env_id, episodes, seed, record=record is not None)
    for game, (won, lost, steps) in enumerate(scores, start=1):
        print(f"Game {game}: {'won' if won > lost else 'lost'} {won}-{lost} in {steps} steps")
    mean = sum(won - lost for won, lost, _ in scores) / len(scores)
    wins = sum(won > lost for won, lost, _ in scores)
    games = f"{len(scores)} game{'s' * (len(scores) != 1)}"
    print(f"Mean score {mean:+.2f} over {games}; won {wins}", flush=True)
    if record is not None:
        write_gif(record, frames)
        print(f"Recorded {len(frames)} frames to {record}", flush=True)
