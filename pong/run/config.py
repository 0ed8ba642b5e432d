"""Every setting of the driver in one place: each default and its meaning, stated once.

``Config`` is what a run is (stored in its checkpoint), ``Options`` what one invocation does
with it, ``Evaluation`` what ``--evaluate`` plays. Each field is also a flag (``batch_size`` is
``--batch-size``), parsed by the function that checks a stored value.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Config", "Options", "Evaluation", "add_flags", "fill", "fresh_seed", "hyperparameters"]


def bounded(parse: Callable[[str], Any], *bounds: tuple[Callable[[Any], bool], str]) -> Callable:
    """A flag's parser: ``parse`` of the text (-0 as 0), which must pass each (test, what) bound."""

    def check(text: str) -> Any:
        try:
            value = parse(text) + 0
        except ValueError:  # int() also refuses more than 4,300 digits
            value = math.nan
        for ok, what in bounds:
            if not ok(value):
                shown = repr(text) if len(text) <= 60 else f"{text[:50]!r}... ({len(text):,} chars)"
                raise argparse.ArgumentTypeError(f"expected {what}, got {shown}")
        return value

    return check


MAX_BATCH = 100_000  # games per update: 300 took Ray's example 11 nodes of 18 cores
MAX_SEED = 2**128 - 1  # all the entropy NumPy's SeedSequence uses
POSITIVE_INT = (lambda n: n >= 1), "a positive integer"
POSITIVE = (lambda x: 0 < x < math.inf), "a positive number"
positive_int = bounded(int, POSITIVE_INT)
non_negative_int = bounded(int, ((lambda n: n >= 0), "a non-negative integer"))
batch_count = bounded(int, POSITIVE_INT, ((lambda n: n <= MAX_BATCH), f"at most {MAX_BATCH:,}"))
seed_number = bounded(int, ((lambda n: 0 <= n <= MAX_SEED), "an integer from 0 to 2**128 - 1"))
positive_float = bounded(float, POSITIVE)
below_one = bounded(float, POSITIVE, ((lambda x: x < 1), "a number below 1"))
finite_float = bounded(float, ((lambda x: -math.inf < x < math.inf), "a finite number"))


def local_cpus(text: str) -> int:
    """CPUs for a local Ray: more than 64 times this machine's is surely a slip."""
    machine = os.cpu_count() or 1
    what = f"at most {64 * machine} (64 times this machine's {machine} CPU{'s' * (machine != 1)})"
    return bounded(int, POSITIVE_INT, ((lambda n: n <= 64 * machine), what))(text)


def path(text: str) -> Path:
    """A file or directory: not empty (``Path("")`` would be the current directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got ''")
    return Path(text)


def setting(parse: Callable, help: str, default: Any = None, metavar: str = "N", flags=()) -> Any:
    """A field that is also a flag: how its text is parsed, what it means, its default."""
    if default is not None and "(default:" not in help:
        shown = f"{default:g}" if isinstance(default, float) else default  # 60, not 60.0
        help += f" (default: {shown})"
    meta = dict(flags=flags, type=parse, metavar=metavar, help=help)  # add_argument's, but flags
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Config:
    """What a run is: fixed for its life, stored in its checkpoint."""

    batch_size: int = setting(batch_count, "games per update; one worker per CPU, at most this", 10)
    env: str = setting(
        str, "Gymnasium env id; PongToy/Catch-v0 is a toy learned in seconds", "ALE/Pong-v5", "ID"
    )
    seed: int | None = setting(
        seed_number, "seeds the weights, env resets and actions (default: random, printed)"
    )
    learning_rate: float = setting(positive_float, "RMSProp learning rate", 1e-4, "LR")
    decay_rate: float = setting(below_one, "RMSProp decay of its mean of squares", 0.99, "RATE")

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Config:
        """The config stored as ``dataclasses.asdict``, each value checked as its flag is; a
        ``ValueError`` for a missing setting or a value of the wrong type or range."""
        if not isinstance(values, dict):
            raise ValueError(f"settings must be a mapping, got {values!r}")
        if missing := [f.name for f in dataclasses.fields(cls) if f.name not in values]:
            raise ValueError(f"{missing[0]}: missing")
        return cls(**{f.name: stored(f, values[f.name]) for f in dataclasses.fields(cls)})


def stored(f: dataclasses.Field, value: Any, exact: bool = True) -> Any:
    """A stored setting parsed as its flag is, from its text; a ``ValueError`` naming ``f``.
    ``exact``: ``value`` must be what its text parses to ("2" is not 2, True not 1)."""
    try:
        parsed = f.metadata["type"](str(value))
    except argparse.ArgumentTypeError as e:
        raise ValueError(f"{f.name}: {e}") from None
    if exact and (parsed != value or isinstance(value, bool)):
        raise ValueError(f"{f.name}: expected {type(parsed).__name__}, got {value!r}")
    return parsed


@dataclass(frozen=True)
class Options:
    """What one invocation of the driver does with its run; not stored."""

    updates: int | None = setting(
        positive_int,
        "updates to run (default: until Ctrl-C/SIGTERM); --iterations is Ray's example's name",
        flags=("--updates", "--iterations"),
    )
    until_mean: float | None = setting(
        finite_float,  # below a game's most points: pong.envs.make.check_goal, for the env
        "also stop once the running mean is above SCORE (0: beating the built-in opponent on"
        " average)",
        metavar="SCORE",
    )
    address: str | None = setting(
        str,
        "join the Ray cluster whose head is at HOST:PORT, or auto: the one `ray start` started"
        " here (default: RAY_ADDRESS, else a local Ray)",
        metavar="HOST:PORT",
        flags=("--redis-address", "--address"),
    )
    workers: int | None = setting(
        batch_count,
        "workers to ask Ray for, one CPU each; those not placed yet join when a CPU is free"
        " (default: the cluster's CPUs, at most --batch-size)",
    )
    wait_for_workers: float | None = setting(
        positive_float, "stop if no worker is up for S seconds (default: wait)", None, "S"
    )
    num_cpus: int | None = setting(local_cpus, "CPUs of a local Ray (default: all)")
    run_dir: Path | None = setting(
        path,
        "where the checkpoint and metrics go (default: runs/ and the start time; in a Ray job,"
        " ~/ray_results/pong/ and the start time)",
        metavar="DIR",
    )
    checkpoint_every: int = setting(positive_int, "save every N updates and at the end", 10)
    checkpoint_seconds: float = setting(
        positive_float, "also save after an update if the last save is S seconds old", 60.0, "S"
    )
    watch_every: int = setting(
        non_negative_int,
        "every N updates, the weights picture and a game into TensorBoard and RUN_DIR/watch/"
        " (0: none)",
        100,
    )
    resume: Path | None = setting(
        path, "continue the run saved in PATH (a checkpoint or its directory)", None, "PATH"
    )
    start_from: Path | None = setting(
        path,
        "start a new run from the weights in PATH (a policy file, checkpoint or run directory),"
        " with a fresh RMSProp cache and counters from 0; its env unless --env is given",
        metavar="PATH",
    )


GAMES_FLAGS = ("--games", "--episodes")  # --episodes: Gymnasium's word, and earlier versions'


@dataclass(frozen=True)
class Evaluation:
    """``--evaluate``: play games with a saved policy, in this process, without Ray."""

    evaluate: Path | None = setting(
        path,
        "play games with the policy in PATH (a checkpoint, policy file, or a directory that"
        " holds one) and print each score",
        metavar="PATH",
    )
    games: int = setting(
        positive_int,
        "games to play, seeded --seed, --seed + 1, ...",
        1,
        flags=GAMES_FLAGS,
    )
    record: Path | None = setting(
        path,
        "also write the games as a GIF (replacing FILE.gif, once written whole)",
        None,
        "FILE.gif",
    )


def add_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type) -> None:
    """A flag for each field of ``cls``; an absent flag parses as ``None`` (see ``fill``)."""
    for f in dataclasses.fields(cls):
        options = {k: v for k, v in f.metadata.items() if k != "flags"}
        flags = f.metadata["flags"] or ["--" + f.name.replace("_", "-")]
        parser.add_argument(*flags, dest=f.name, default=None, **options)


def given(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The flags of ``cls``'s fields that were given on the command line."""
    return {f.name: v for f in dataclasses.fields(cls) if (v := getattr(args, f.name)) is not None}


def fill(args: argparse.Namespace, cls: type) -> Any:
    """``cls`` from the given flags, with its defaults for the rest."""
    return cls(**given(args, cls))


def fresh_seed() -> int:
    """A random seed for a run given none (printed, so the run can be repeated)."""
    return int(np.random.SeedSequence().generate_state(1)[0])


def hyperparameters(config: Config) -> dict[str, Any]:
    """``pong.core.train.Trainer``'s arguments for ``config``, its env as ``make_env``."""
    from pong.envs.make import env_maker  # here: reading settings needs no Gymnasium

    values = dataclasses.asdict(config)
    return {"make_env": env_maker(values.pop("env")), **values}
