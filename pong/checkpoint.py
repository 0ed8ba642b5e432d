"""Checkpoints: everything needed to continue a run, in one ``.npz`` file.

The file holds the weights (``W1``, ``W2``), the RMSProp cache
(``cache_W1``, ``cache_W2``) and ``meta``: a JSON text with the counters,
the running reward and the run's ``Config`` (its seed, and the other fields
under ``settings``), each checked on load as its flag is. It is read with
``pong.reading``, which checks every size and array header before it reads any
data and never unpickles, so a file, a shared policy file included, can never
run code or cost much more memory than a real checkpoint. It is written with
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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pong import reading
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
MAX_META_CHARS = 2**16  # of the JSON metadata; a checkpoint's has about 300
MAX_TEXT = 200  # characters of a setting, such as the env id


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
    back as float64, W1 column-major, whichever file they came from. The file is
    read with ``pong.reading``: every size and header is checked before any data
    is read, so no file costs much more memory than a real checkpoint.

    Raises:
        CheckpointError: missing, unreadable, truncated or corrupt file, not a
            checkpoint, a policy file where a checkpoint is needed, or weights of
            another network's shape.
    """
    path = Path(path)
    path = path / FILENAME if path.is_dir() else path
    try:
        with reading.open_npz(path) as archive:
            meta = _read_meta(path, archive)
            fmt = _format(path, meta, policy)
            arrays = _read_arrays(path, archive, fmt)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such checkpoint file") from None
    except reading.NpyFileError:
        raise CheckpointError(f"{path}: not a pong checkpoint (a single array)") from None
    except reading.ReadError as e:
        raise CheckpointError(f"{path}: unreadable or damaged checkpoint ({e})") from None
    return _checkpoint(path, meta, fmt, arrays)


def _read_meta(path: Path, archive: reading.Archive) -> object:
    """The metadata: JSON text of at most ``MAX_META_CHARS`` characters, parsed."""
    if "meta" not in archive.names:
        raise CheckpointError(f"{path}: not a pong checkpoint (no meta in it)")

    def check(header: reading.Header) -> None:
        if header.shape != () or header.dtype.str[:2] != "<U":
            raise CheckpointError(f"{path}: not a pong checkpoint (its meta is not a text)")
        if header.dtype.itemsize > 4 * MAX_META_CHARS:
            chars = header.dtype.itemsize // 4
            raise reading.ReadError(f"meta: {chars:,} characters, more than {MAX_META_CHARS:,}")

    text = archive.read("meta", check).tobytes()
    try:  # UTF-32 as NumPy stores it, padded with NULs; deep nesting is a RecursionError
        return json.loads(text.decode("utf-32-le").rstrip("\0"))
    except (ValueError, RecursionError) as e:
        raise reading.ReadError(f"meta: {str(e).splitlines()[0]}") from None


def _format(path: Path, meta: object, policy: bool) -> str:
    """The file's format, refused if it is no checkpoint, or a policy file and not ``policy``."""
    fmt = meta.get("format") if isinstance(meta, dict) else None
    if fmt == POLICY_FORMAT and not policy:
        raise CheckpointError(
            f"{path}: a policy file holds no optimizer state; resume from the run's {FILENAME}"
        )
    if fmt not in (FORMAT, POLICY_FORMAT):
        raise CheckpointError(f"{path}: not a pong checkpoint (format {_shown(fmt)})")
    return fmt


def _read_arrays(path: Path, archive: reading.Archive, fmt: str) -> dict[str, np.ndarray]:
    """The arrays of a file of format ``fmt``, each header checked before its data is read."""
    shapes, dtype = (POLICY_SHAPES, "<f4") if fmt == POLICY_FORMAT else (SHAPES, "<f8")
    missing = [k for k in shapes if k not in archive.names]
    if missing:
        raise CheckpointError(f"{path}: not a pong checkpoint (no {', '.join(missing)} in it)")
    extra = sorted(archive.names - {*shapes, "meta"})
    if extra:
        shown = ", ".join(map(repr, extra))
        raise CheckpointError(f"{path}: not a pong checkpoint ({shown} in it too)")
    return {
        k: archive.read(k, _expect(path, k, shape, np.dtype(dtype))) for k, shape in shapes.items()
    }


def _expect(path: Path, name: str, shape: tuple[int, ...], dtype: np.dtype):
    """A check of array ``name``'s header: this network's ``shape``, the file's ``dtype``."""

    def check(header: reading.Header) -> None:
        if header.shape != shape:
            raise CheckpointError(
                f"{path}: {name} has shape {header.shape}, this network needs {shape}"
            )
        if header.dtype.kind != "f":
            raise CheckpointError(f"{path}: {name} holds {header.dtype} values, not numbers")
        if header.dtype != dtype:
            raise CheckpointError(
                f"{path}: {name} holds {header.dtype.str} values, not {dtype.str}"
            )

    return check


def _checkpoint(path: Path, meta: dict, fmt: str, arrays: dict[str, np.ndarray]) -> Checkpoint:
    """The checkpoint the arrays and metadata read make, every value checked."""
    for k, array in arrays.items():
        if not np.isfinite(array).all():
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
            config=_config(meta),
        )
    except KeyError as e:
        raise CheckpointError(f"{path}: damaged checkpoint metadata (no {e} in it)") from None
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: damaged checkpoint metadata ({e})") from None


def _config(meta: dict) -> Config:
    """The run's settings and seed: numbers or short texts, each checked as its flag is."""
    values = {**meta["settings"], "seed": meta["seed"]}  # TypeError: settings not an object
    for field in dataclasses.fields(Config):
        value = values.get(field.name)
        if not isinstance(value, str | int | float | None) or len(str(value)) > MAX_TEXT:
            raise ValueError(
                f"{field.name}: expected a number or a short text, got {_shown(value)}"
            )
    return Config.from_dict(values)


def _count(meta: dict, name: str) -> int:
    """A counter of ``meta``: a non-negative integer (JSON's true is not one)."""
    value = meta[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name}: expected a non-negative integer, got {_shown(value)}")
    return value


def _optional_float(meta: dict, name: str) -> float | None:
    """A running mean of ``meta``: a finite number, or null before any game."""
    value = meta[name]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number or null, got {_shown(value)}")
    return float(value)


def _shown(value: object) -> str:
    """A JSON value as a message shows it: a scalar's repr, short; else what it is."""
    if isinstance(value, dict | list):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."
