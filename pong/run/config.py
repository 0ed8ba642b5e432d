"""Every setting of the driver in one place: each default and its meaning, stated once.

``Config`` is what a run is, kept for its life: the flags fill it, the
``Trainer`` reads it, the checkpoint stores it and ``--resume`` restores it.
``Options`` is what one invocation does with its run, and ``Watch`` what
``--evaluate`` plays. Each field is also a flag (``batch_size`` is
``--batch-size``), parsed by the same function that checks a value read back
from a checkpoint.

Example:
    >>> Config().batch_size, Config(batch_size=2).learning_rate
    (10, 0.0001)
    >>> Config.from_dict({"batch_size": 0, "env": "ALE/Pong-v5", "seed": 1,
    ...                   "learning_rate": 1e-4, "decay_rate": 0.99})
    Traceback (most recent call last):
    ...
    ValueError: batch_size: expected a positive integer, got '0'
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Config", "Options", "Watch", "add_flags", "fill", "fresh_seed", "hyperparameters"]


def integer(text: str, least: int, what: str, most: int | None = None) -> int:
    """``text`` as an integer from ``least`` to ``most``; else an error saying ``what`` it must
    be. At most 40 digits are read (Python refuses to parse past 4,300 at all)."""
    try:
        value = int(text) if len(text.strip()) <= 40 else least - 1
    except ValueError:
        value = least - 1
    if value < least:
        raise argparse.ArgumentTypeError(f"expected {what}, got {_short(text)}")
    if most is not None and value > most:
        raise argparse.ArgumentTypeError(f"expected at most {most:,}, got {_short(text)}")
    return value


def _short(text: str) -> str:
    """``text`` quoted for a message, at most about 60 characters."""
    return repr(text) if len(text) <= 60 else f"{text[:50]!r}... ({len(text):,} characters)"


MAX_BATCH = 100_000  # games per update: 300 took Ray's example 11 nodes of 18 cores
MAX_SEED = 2**128 - 1  # NumPy's SeedSequence takes any size; 128 bits is all its entropy
positive_int = partial(integer, least=1, what="a positive integer")  # a count, such as updates
non_negative_int = partial(integer, least=0, what="a non-negative integer")
batch_count = partial(integer, least=1, what="a positive integer", most=MAX_BATCH)
seed_number = partial(integer, least=0, what="a non-negative integer", most=MAX_SEED)
CPU_FACTOR = 64  # --num-cpus above this many times the machine's CPUs is surely a slip


def local_cpus(text: str) -> int:
    """CPUs for a local Ray to claim: at least 1, at most ``CPU_FACTOR`` times this machine's."""
    value, machine = positive_int(text), os.cpu_count() or 1
    if value > CPU_FACTOR * machine:
        raise argparse.ArgumentTypeError(
            f"expected at most {CPU_FACTOR * machine} ({CPU_FACTOR} times this machine's"
            f" {machine} CPU{'s' * (machine != 1)}), got {text!r}"
        )
    return value


def _float(text: str) -> float:
    """``text`` as a number (-0 as 0); NaN if it is none."""
    try:
        return float(text) + 0.0
    except ValueError:
        return math.nan


def positive_float(text: str) -> float:
    """A step size: a finite number above 0."""
    value = _float(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {_short(text)}")
    return value


def score(text: str) -> float:
    """A running mean to pass: a number below 21, the most points a game can give."""
    value = _float(text)
    if not -math.inf < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a number, got {_short(text)}")
    if value >= 21:
        raise argparse.ArgumentTypeError(
            f"a game scores at most 21, so no running mean is above {text}"
        )
    return value


def below_one(text: str) -> float:
    """A decay factor: a number above 0 and below 1."""
    value = positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a number below 1, got {_short(text)}")
    return value


def path(text: str) -> Path:
    """A file or directory: not empty (``Path("")`` would be the current directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got ''")
    return Path(text)


def setting(parse: Callable, help: str, default: Any = None, metavar: str = "N", flags=()) -> Any:
    """A field that is also a flag: how its text is parsed, what it means, its default."""
    meta = {"parse": parse, "metavar": metavar, "help": help, "flags": flags}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Config:
    """What a run is: fixed for its life, stored in its checkpoint."""

    batch_size: int = setting(
        batch_count,
        "games per update; the RolloutWorker actors are one per CPU, at most this many",
        default=10,
    )
    env: str = setting(
        str,
        "Gymnasium env id; Pong-v0 is the 2016 program's, PongToy/Catch-v0 a toy that is learned"
        " in seconds",
        default="ALE/Pong-v5",
        metavar="ID",
    )
    seed: int | None = setting(
        seed_number,
        "seeds the weights, every env reset and every action draw (default: random, printed at"
        " start)",
    )
    learning_rate: float = setting(positive_float, "RMSProp step size", 1e-4, "LR")
    decay_rate: float = setting(
        below_one, "RMSProp decay of the running mean of squared gradients", 0.99, "RATE"
    )

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Config:
        """The config stored as ``dataclasses.asdict``, each value checked as its flag is; a
        ``ValueError`` for a missing setting or a value of the wrong type or range."""
        if not isinstance(values, dict):
            raise ValueError(f"settings must be a mapping, got {values!r}")
        checked = {}
        for f in dataclasses.fields(cls):
            if f.name not in values:
                raise ValueError(f"{f.name}: missing")
            value = values[f.name]
            try:
                checked[f.name] = f.metadata["parse"](str(value))
            except argparse.ArgumentTypeError as e:
                raise ValueError(f"{f.name}: {e}") from None
            if checked[f.name] != value or isinstance(value, bool):  # "2" is not 2
                kind = type(checked[f.name]).__name__
                raise ValueError(f"{f.name}: expected {kind}, got {value!r}")
        return cls(**checked)


@dataclass(frozen=True)
class Options:
    """What one invocation of the driver does with its run; not stored."""

    iterations: int | None = setting(
        positive_int, "updates to run (default: until Ctrl-C or SIGTERM)"
    )
    until_mean: float | None = setting(
        score,
        "also stop once the running mean is above SCORE, such as 0 for beating the built-in"
        " opponent on average (default: no such stop)",
        metavar="SCORE",
    )
    address: str | None = setting(
        str,
        "join the Ray cluster whose head is at HOST:PORT (RAY_ADDRESS is honoured too; default:"
        " start a local Ray)",
        metavar="HOST:PORT",
        flags=("--redis-address", "--address"),
    )
    num_cpus: int | None = setting(
        local_cpus,
        f"CPUs of the local Ray (default: all; at most {CPU_FACTOR} times this machine's);"
        " not with a cluster address",
    )
    run_dir: Path | None = setting(
        path,
        "where the checkpoint and metrics go (default: runs/ and the start time; in a Ray job,"
        " ~/ray_results/pong/ and the start time)",
        metavar="DIR",
    )
    checkpoint_every: int = setting(
        positive_int, "save a checkpoint every N updates (and always at the end)", 10
    )
    checkpoint_seconds: float = setting(
        positive_float,
        "also save one after the first update that ends S seconds or more after the last save,"
        " so that even a run killed outright loses little",
        60.0,
        "S",
    )
    watch_every: int = setting(
        non_negative_int,
        "every N updates, draw the weights and play a game of the current policy, into"
        " TensorBoard's Images and RUN_DIR/watch/ (0: never)",
        100,
    )
    resume: Path | None = setting(
        path,
        "continue the run saved in PATH (its checkpoint.safetensors or its directory) with its"
        " settings",
        metavar="PATH",
    )
    start_from: Path | None = setting(
        path,
        "start a new run from the weights in PATH (a policy file such as"
        " results/pong-v5/policy.safetensors, a checkpoint or a run directory), with a fresh"
        " RMSProp cache and counters from 0; its env unless --env is given",
        metavar="PATH",
    )


@dataclass(frozen=True)
class Watch:
    """``--evaluate``: play games with a saved policy, in this process, without Ray."""

    evaluate: Path | None = setting(
        path,
        "play games with the policy saved in CHECKPOINT (a checkpoint.safetensors, its run"
        " directory, or a policy file such as results/pong-v5/policy.safetensors) and print each"
        " score",
        metavar="CHECKPOINT",
    )
    episodes: int = setting(
        positive_int,
        "games to play; the first is seeded with --seed, the next with --seed + 1, and so on",
        1,
    )
    record: Path | None = setting(
        path, "also write the games as an animated GIF", metavar="FILE.gif"
    )


def add_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type) -> None:
    """A flag for each field of ``cls``; an absent flag parses as ``None`` (see ``fill``)."""
    for f in dataclasses.fields(cls):
        help = f.metadata["help"]
        if "(default:" not in help and f.default is not None:
            help += f" (default: {f.default})"
        parser.add_argument(
            *(f.metadata["flags"] or ["--" + f.name.replace("_", "-")]),
            dest=f.name,
            type=f.metadata["parse"],
            metavar=f.metadata["metavar"],
            default=None,
            help=help,
        )


def given(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The flags of ``cls``'s fields that were given on the command line."""
    names = [f.name for f in dataclasses.fields(cls)]
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def fill(args: argparse.Namespace, cls: type) -> Any:
    """``cls`` from the given flags, with its defaults for the rest."""
    return cls(**given(args, cls))


def fresh_seed() -> int:
    """A random seed for a run that was given none (printed, so the run can be repeated)."""
    return int(np.random.SeedSequence().generate_state(1)[0])


def hyperparameters(config: Config) -> dict[str, Any]:
    """``pong.core.train.Trainer``'s arguments for a run of ``config``: its env as the
    function that makes it, the rest as they are.

    Example:
        >>> sorted(hyperparameters(Config(seed=0)))
        ['batch_size', 'decay_rate', 'learning_rate', 'make_env', 'seed']
    """
    from pong.envs.make import env_maker  # here: reading settings needs no Gymnasium

    values = dataclasses.asdict(config)
    return {"make_env": env_maker(values.pop("env")), **values}
