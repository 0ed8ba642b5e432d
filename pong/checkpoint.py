"""Checkpoints: everything needed to continue a run, in one ``.npz`` file.

The file holds the weights (``W1``, ``W2``), the RMSProp cache
(``cache_W1``, ``cache_W2``) and ``meta``: a JSON text with the counters,
the running reward and the run's ``Config`` (its seed, and the other fields
under ``settings``), each checked on load as its flag is. It loads with
``allow_pickle=False``, so a checkpoint can never run code. It is written with
``pong.files.atomic_write``, so a crash or a full disk in the middle of a save
never replaces a good checkpoint with half of one, and a link planted in the run
directory never redirects it.

A *policy file* (``save_policy``) is the small form for sharing a trained
agent: the weights only, as float32, compressed (about 5 MB instead of 20),
with the same metadata. ``--evaluate`` plays it; resuming needs a checkpoint.
Rounding to float32 moves a weight by at most 6e-8 of itself.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pong.config import Config
from pong.errors import UsageError
from pong.files import atomic_write
from pong.model import D, H

__all__ = ["FILENAME", "Checkpoint", "CheckpointError", "load", "save", "save_policy"]

FILENAME = "checkpoint.npz"  # inside a run directory
FORMAT = "pong-checkpoint/1"
POLICY_FORMAT = "pong-policy/1"  # weights only, float32
SHAPES = {"W1": (H, D), "W2": (H,), "cache_W1": (H, D), "cache_W2": (H,)}
POLICY_SHAPES = {"W1": (H, D), "W2": (H,)}


class CheckpointError(UsageError, ValueError):
    """A checkpoint could not be used; the message names the file and the problem."""


@dataclass
class Checkpoint:
    """A run's state between two updates.

    Attributes:
        weights: ``{"W1": (H, D), "W2": (H,)}``.
        rmsprop_cache: same shapes; ``None`` when read from a policy file.
        iteration: updates done.
        episodes: episodes played.
        steps: env steps played.
        running_reward: the running mean of episode rewards (``None`` before any).
        best_running_reward: its best value after any update so far.
        config: the run's settings, its seed included.
    """

    weights: dict[str, np.ndarray]
    rmsprop_cache: dict[str, np.ndarray] | None
    iteration: int
    episodes: int
    steps: int
    running_reward: float | None
    best_running_reward: float | None
    config: Config


def save(path: str | os.PathLike, checkpoint: Checkpoint) -> None:
    """Write ``checkpoint`` to ``path`` atomically (temporary file, fsync, rename)."""
    arrays = {
        "W1": checkpoint.weights["W1"],
        "W2": checkpoint.weights["W2"],
        "cache_W1": checkpoint.rmsprop_cache["W1"],
        "cache_W2": checkpoint.rmsprop_cache["W2"],
    }
    _write(Path(path), arrays, _meta(checkpoint, FORMAT), np.savez)


def save_policy(path: str | os.PathLike, checkpoint: Checkpoint, *, replace: bool = True) -> int:
    """Write ``checkpoint``'s weights alone, as float32, compressed, atomically; its size.

    Raises:
        FileExistsError: ``replace`` is false and ``path`` exists (the file is untouched).
    """
    arrays = {k: checkpoint.weights[k].astype(np.float32) for k in POLICY_SHAPES}
    meta = _meta(checkpoint, POLICY_FORMAT)
    return _write(Path(path), arrays, meta, np.savez_compressed, replace)


def _meta(checkpoint: Checkpoint, format: str) -> dict[str, object]:
    return {
        "format": format,
        "iteration": checkpoint.iteration,
        "episodes": checkpoint.episodes,
        "steps": checkpoint.steps,
        "running_reward": checkpoint.running_reward,
        "best_running_reward": checkpoint.best_running_reward,
        "seed": checkpoint.config.seed,
        "settings": {k: v for k, v in dataclasses.asdict(checkpoint.config).items() if k != "seed"},
    }


def _write(
    path: Path, arrays: dict[str, np.ndarray], meta: dict[str, object], savez, replace: bool = True
) -> int:
    """Write the ``.npz`` whole or not at all (``pong.files.atomic_write``); its size in bytes."""
    with atomic_write(path, "wb", replace=replace) as f:
        savez(f, **arrays, meta=np.array(json.dumps(meta)))
        return f.tell()


def load(path: str | os.PathLike, *, policy: bool = False) -> Checkpoint:
    """Read a checkpoint written by ``save``; with ``policy``, a policy file too.

    ``path`` may also be a run directory holding ``checkpoint.npz``. Weights come
    back as float64, W1 column-major, whichever file they came from.

    Raises:
        CheckpointError: missing, unreadable, truncated or corrupt file, not a
            checkpoint, a policy file where a checkpoint is needed, or weights of
            another network's shape.
    """
    path = Path(path)
    if path.is_dir():
        path = path / FILENAME
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):  # an .npy array, under this name
            raise CheckpointError(f"{path}: not a pong checkpoint (a single array)")
        with data:
            if "meta" not in data.files:
                raise CheckpointError(f"{path}: not a pong checkpoint (no meta in it)")
            meta = json.loads(str(data["meta"]))
            fmt = meta.get("format") if isinstance(meta, dict) else None
            if fmt == POLICY_FORMAT and not policy:
                raise CheckpointError(
                    f"{path}: a policy file holds no optimizer state; resume from the run's"
                    f" {FILENAME}"
                )
            shapes = POLICY_SHAPES if fmt == POLICY_FORMAT else SHAPES
            missing = [k for k in shapes if k not in data.files]
            if missing:
                raise CheckpointError(
                    f"{path}: not a pong checkpoint (no {', '.join(missing)} in it)"
                )
            arrays = {k: data[k] for k in shapes}
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        if "pickle" in reason:  # NumPy's guess for any file that is not an .npz
            reason = "not a NumPy .npz file"
        raise CheckpointError(f"{path}: unreadable or damaged checkpoint ({reason})") from None
    if fmt not in (FORMAT, POLICY_FORMAT):
        raise CheckpointError(f"{path}: not a pong checkpoint (format {fmt!r})")
    for k, shape in shapes.items():
        if arrays[k].shape != shape:
            raise CheckpointError(
                f"{path}: {k} has shape {arrays[k].shape}, this network needs {shape}"
            )
        if arrays[k].dtype.kind != "f":
            raise CheckpointError(f"{path}: {k} holds {arrays[k].dtype} values, not numbers")
        if not np.isfinite(arrays[k]).all():
            raise CheckpointError(f"{path}: {k} holds NaN or infinite values")
    cache = None
    if fmt == FORMAT:
        cache = {"W1": np.asfortranarray(arrays["cache_W1"]), "W2": arrays["cache_W2"]}
    try:
        return Checkpoint(
            weights={
                "W1": np.asfortranarray(arrays["W1"], dtype=np.float64),
                "W2": arrays["W2"].astype(np.float64),
            },
            rmsprop_cache=cache,
            iteration=_count(meta, "iteration"),
            episodes=_count(meta, "episodes"),
            steps=_count(meta, "steps"),
            running_reward=_optional_float(meta, "running_reward"),
            best_running_reward=_optional_float(meta, "best_running_reward"),
            config=Config.from_dict({**meta["settings"], "seed": meta["seed"]}),
        )
    except KeyError as e:
        raise CheckpointError(f"{path}: damaged checkpoint metadata (no {e} in it)") from None
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: damaged checkpoint metadata ({e})") from None


def _count(meta: dict, name: str) -> int:
    """A counter of ``meta``: a non-negative integer (JSON's true is not one)."""
    value = meta[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name}: expected a non-negative integer, got {value!r}")
    return value


def _optional_float(meta: dict, name: str) -> float | None:
    """A running mean of ``meta``: a finite number, or null before any game."""
    value = meta[name]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number or null, got {value!r}")
    return float(value)
