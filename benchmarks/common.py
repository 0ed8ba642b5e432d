"""Shared pieces of the benchmark scripts: the emulator-only baseline, a local Ray, tables."""

from __future__ import annotations

import multiprocessing
import os
import platform
import queue
import time

import gymnasium as gym
import numpy as np
import ray

from pong.core.model import DOWN, UP
from pong.envs.make import make_env
from pong.run.cluster import local_ray_settings


def emulator_game(env: gym.Env, rng: np.random.Generator, seed: int | None = None) -> int:
    """One game of random paddle moves and nothing else (reset included); its steps."""
    env.reset(seed=seed)
    steps, done = 0, False
    while not done:
        _, _, terminated, truncated, _ = env.step(UP if rng.random() < 0.5 else DOWN)
        done = terminated or truncated
        steps += 1
    return steps


def ale_game(env: gym.Env, rng: np.random.Generator, seed: int | None = None) -> int:
    """``emulator_game`` with ALE's ``act`` calls only: no frame read, no Gymnasium step.

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


def emulator_only(env_id: str, games: int, seed: int) -> tuple[int, float]:
    """Emulator-only steps and seconds over ``games`` games on one env.

    The env is seeded on its first reset only; the later resets are unseeded, a
    few ms, as a worker's seeded ones are once ``pong.envs.seeded_reset`` has checked
    its quick way (ale-py's own seeded reset reloads the ROM).
    """
    env = make_env(env_id)
    emulator_game(env, np.random.default_rng(seed), seed)  # the seeded first reset
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    steps = sum(emulator_game(env, rng) for _ in range(games))
    seconds = time.perf_counter() - start
    env.close()
    return steps, seconds


COPY_START_S = 60.0  # an emulator copy's start (imports, env, seeded reset), at most


def _emulator_copy(env_id: str, seed: int, seconds: float, barrier, results) -> None:
    """One of ``emulator_at_once``'s processes: ready an env, wait for the others, step."""
    env = make_env(env_id)
    rng = np.random.default_rng(seed)
    emulator_game(env, rng, seed)  # the seeded first reset, before the clock
    env.reset()
    barrier.wait()  # every copy starts stepping at the same moment
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, terminated, truncated, _ = env.step(UP if rng.random() < 0.5 else DOWN)
        steps += 1
        if terminated or truncated:
            env.reset()
    results.put(steps / (time.perf_counter() - start))


def emulator_at_once(env_id: str, copies: int, seconds: float, seed: int) -> float:
    """Emulator-only steps/s per copy when ``copies`` processes step at once (mean).

    What the emulator itself reaches with every CPU busy: on a machine whose
    cores slow each other down (shared caches, a hypervisor's neighbours) it
    is less than ``emulator_only``'s one-core figure, and no loop of
    ``copies`` games can beat it.
    """
    context = multiprocessing.get_context("spawn")
    # A copy that dies breaks the barrier for the others (timeout) instead of
    # leaving them, and this process, waiting for ever.
    barrier, results = context.Barrier(copies, timeout=COPY_START_S), context.Queue()
    workers = [
        context.Process(target=_emulator_copy, args=(env_id, seed + i, seconds, barrier, results))
        for i in range(copies)
    ]
    for w in workers:
        w.start()
    try:
        rates = [results.get(timeout=COPY_START_S + seconds + 10) for _ in workers]
    except queue.Empty:
        codes = [w.exitcode for w in workers]
        raise RuntimeError(
            f"{copies} emulators at once: not every copy reported (exit codes {codes})"
        ) from None
    finally:
        for w in workers:
            w.join(timeout=10)
            if w.is_alive():
                w.kill()
    return sum(rates) / copies


def start_local_ray(num_cpus: int | None, log_to_driver: bool = True) -> int:
    """A fresh local Ray with the settings driver.py gives one, logging errors only; its CPUs."""
    local_ray_settings()
    ray.init(
        address="local",  # a Ray of its own, never a cluster running on this machine
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
