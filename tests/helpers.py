"""Helpers shared by the tests: running ``driver.py`` as a user would, stand-in workers."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import ray

from pong.config import Config
from pong.schedule import Games
from pong.train import Trainer

ROOT = Path(__file__).resolve().parents[1]

# The per-update line, exactly as the README shows it.
BATCH_LINE = re.compile(
    r"^Batch (\d+) computed (\d+) rollouts \((\d+) steps\) in (\d+\.\d\d) seconds"
    r" \((\d+) steps/s\), running mean is (-?\d+\.\d\d)$"
)


def free_port() -> int:
    """A loopback port nobody listens on (just now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_driver(args: list[str], env: dict[str, str], timeout: float = 240):
    """``python driver.py ARGS`` from the repository root; the finished process."""
    return subprocess.run(
        [sys.executable, "driver.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# A one-game trainer on the toy env, quick to start.
TOY = Config(batch_size=1, env="PongToy/Catch-v0", seed=0)


def with_workers(trainer: Trainer, workers: list) -> Trainer:
    """``trainer`` with its RolloutWorkers swapped for stand-ins."""
    for actor in trainer.games.actors:
        ray.kill(actor)
    trainer.games = Games(workers)
    return trainer
