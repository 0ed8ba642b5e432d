"""Shared pieces of the benchmark scripts: the emulator-only baseline, a local Ray, tables."""

from __future__ import annotations

import os
import platform
import time

import gymnasium as gym
import numpy as np
import ray

from pong.cluster import local_ray_settings
from pong.env import DOWN, UP, make_env


def emulator_episode(env: gym.Env, rng: np.random.Generator, seed: int | None = None) -> int:
    """One episode of random paddle moves and nothing else (reset included); its steps."""
    env.reset(seed=seed)
    steps, done = 0, False
    while not done:
        _, _, terminated, truncated, _ = env.step(UP if rng.random() < 0.5 else DOWN)
        done = terminated or truncated
        steps += 1
    return steps


def ale_episode(env: gym.Env, rng: np.random.Generator, seed: int | None = None) -> int:
    """``emulator_episode`` with ALE's ``act`` calls only: no frame read, no Gymnasium step.

    The floor under any rollout: what ``AtariEnv.step`` does before it builds
    the RGB observation. Needs a fixed frameskip (``ALE/Pong-v5``: 4).
    """
    env.reset(seed=seed)
    atari = env.unwrapped
    ale, skip, action_set = atari.ale, atari._frameskip, atari._action_set
    steps = 0
    while not (ale.game_over(with_truncation=False) or ale.game_truncated()):
        action = action_set[UP if rng.random() < 0.5 else DOWN]
        for _ in range(skip):
            ale.act(action, 1.0)
        steps += 1
    return steps


def emulator_only(env_id: str, episodes: int, seed: int) -> tuple[int, float]:
    """Emulator-only steps and seconds over ``episodes`` episodes on one env.

    Like a worker, the env is seeded on its first reset only: a seeded reset
    reloads the ROM (~0.1 s), which a worker pays once, not per episode.
    """
    env = make_env(env_id)
    emulator_episode(env, np.random.default_rng(seed), seed)  # the seeded first reset
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    steps = sum(emulator_episode(env, rng) for _ in range(episodes))
    seconds = time.perf_counter() - start
    env.close()
    return steps, seconds


def start_local_ray(num_cpus: int | None, log_to_driver: bool = True) -> int:
    """A fresh local Ray with the settings driver.py gives one, logging errors only; its CPUs."""
    local_ray_settings()
    ray.init(
        num_cpus=num_cpus,
        include_dashboard=False,
        logging_level="ERROR",
        log_to_driver=log_to_driver,
    )
    return int(ray.cluster_resources()["CPU"])


def machine() -> str:
    """One line naming the machine the figures come from."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (
        f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, NumPy {np.__version__}"
    )


def table(header: list[str], rows: list[list[object]]) -> str:
    """A Markdown table, so the output can be pasted into the README as it is."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
