"""Checkpoints and policy files: a run's state, or a trained policy, as safetensors.

A checkpoint (``FILENAME`` in a run directory) holds float64 ``W1`` (H, D), ``W2`` (H,) and
their RMSProp caches ``cache_W1``, ``cache_W2``; a policy file (``save_policy``) the weights
alone as float32 (5 MB, not 20). Text metadata holds the format, counters, running means and
settings. Every file read is hostile: bounded, no link followed, every tensor and setting
checked; each refusal is a one-line ``CheckpointError`` naming the file.
"""

from __future__ import annotations

import dataclasses
import json
import re
from contextlib import suppress
from dataclasses import dataclass
from os.path import exists, isdir, isfile
from pathlib import Path

import numpy as np
import safetensors.numpy
from safetensors import SafetensorError

from pong.core.model import D, H
from pong.core.state import State
from pong.run.config import Config, stored
from pong.run.errors import UsageError, command, first_line, printable
from pong.run.files import NotRegularError, PathLike, atomic_write, open_file

__all__ = ["FILENAME", "Checkpoint", "CheckpointError", "decode", "encode", "load", "save"]
__all__ += ["MAX_RESUMED", "save_policy"]

FILENAME = "checkpoint.safetensors"  # inside a run directory
POLICY_FILENAME = "policy.safetensors"  # a shared agent's policy file, as in results/
FORMAT = "pong-checkpoint/2"
POLICY_FORMAT = "pong-policy/2"  # weights only, float32
SHAPES = {"W1": (H, D), "W2": (H,), "cache_W1": (H, D), "cache_W2": (H,)}
POLICY_SHAPES = {"W1": (H, D), "W2": (H,)}
MAX_BYTES = 32 * 2**20  # a checkpoint is 20.5 MB, a policy file 5.1
MAX_HEADER_BYTES = 2**16  # the JSON header; ours is under 1 KB
MAX_TEXT = 200  # characters of a metadata value, such as the env id
MAX_ENTRIES = 64  # metadata entries; ours are 11
MAX_COUNT = 10**15  # updates, games or env steps: far past any run
MAX_RESUMED = MAX_COUNT // 10  # what a run resumes from: room left to count, and save, on
MAX_WEIGHT = float(np.finfo(np.float32).max)  # a weight a policy file (float32) can hold
MAX_SCORE = 1000.0  # a running mean of scores; Pong's lie in -21..21
COUNTERS = ("updates", "games", "steps")
MEANS = ("running_mean", "best_running_mean")
OLD_NAMES = {"iteration": "updates", "episodes": "games", "running_reward": "running_mean"}
OLD_NAMES["best_running_reward"] = "best_running_mean"  # files written before the glossary
NONE = "none"  # a running mean before any game


class CheckpointError(UsageError, ValueError):
    """A checkpoint could not be used; the message names the file and the problem."""


@dataclass
class Checkpoint(State):
    """A run's state with its settings; ``rmsprop_cache`` is ``None`` from a policy file."""

    rmsprop_cache: dict[str, np.ndarray] | None
    config: Config

    @classmethod
    def of(cls, state: State, config: Config) -> Checkpoint:
        return cls(**vars(state), config=config)


def encode(checkpoint: Checkpoint, *, policy: bool = False) -> bytes:
    """``checkpoint`` as a safetensors file's bytes; with ``policy``, the float32 weights alone."""
    return b"".join(_encoded(checkpoint, policy))


def _encoded(checkpoint: Checkpoint, policy: bool) -> tuple[bytes, memoryview]:
    """``encode``'s bytes in two pieces: the header, and the tensors' data (not copied)."""
    tensors = {k: checkpoint.weights[k] for k in POLICY_SHAPES}
    if not policy:
        tensors |= {f"cache_{k}": v for k, v in checkpoint.rmsprop_cache.items()}
    # safetensors writes an array's memory as it lies: W1 is column-major here
    dtype = np.float32 if policy else np.float64
    tensors = {k: np.ascontiguousarray(v, dtype=dtype) for k, v in tensors.items()}
    meta = {"format": POLICY_FORMAT if policy else FORMAT, **dataclasses.asdict(checkpoint.config)}
    meta |= {name: getattr(checkpoint, name) for name in (*COUNTERS, *MEANS)}
    data = safetensors.numpy.save(tensors, {k: as_text(v) for k, v in meta.items()})
    # The metadata comes in a hash map's order, which changes per process: sorted, one state
    # is one file. The same entries, as compact, are never longer.
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + length])
    ordered = {"__metadata__": dict(sorted(header.pop("__metadata__").items()))}
    ordered.update(sorted(header.items(), key=lambda item: item[1]["data_offsets"]))
    text = json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode()
    return data[:8] + text.ljust(length), memoryview(data)[8 + length :]


def as_text(value: object) -> str:
    """A metadata value as its text: a float as ``repr`` (exact), ``None`` as ``NONE``."""
    return NONE if value is None else repr(value) if isinstance(value, float) else str(value)


def save(path: PathLike, checkpoint: Checkpoint, *, policy=False, replace=True, dir_fd=None) -> int:
    """Write ``encode(checkpoint, policy=policy)`` with ``atomic_write``; its size in bytes."""
    header, tensors = _encoded(checkpoint, policy)  # written as two pieces: no 20 MB join
    with atomic_write(path, "wb", replace=replace, dir_fd=dir_fd) as f:
        f.write(header)
        f.write(tensors)
    return len(header) + len(tensors)


def save_policy(path: PathLike, checkpoint: Checkpoint, *, replace: bool = True) -> int:
    """``save`` of ``checkpoint``'s weights alone, as float32."""
    return save(path, checkpoint, policy=True, replace=replace)


def load(path: PathLike, *, policy: bool = False) -> Checkpoint:
    """The checkpoint in ``path`` (or its run directory, or a sweep trial's latest run); with
    ``policy``, a policy file too, and a directory's ``POLICY_FILENAME`` where it holds no
    checkpoint (a shared agent's). Weights come back as float64, W1 column-major."""
    path, why = Path(path), ""  # os.path's tests: an unreadable path is read, and said so
    if isdir(path) and not exists(path / FILENAME):
        from pong.run.sweep import DEFINITION, runs_of  # here: the sweep reads checkpoints

        if isfile(path.parent / DEFINITION):  # a sweep's trial: its latest run
            path = next(iter(runs_of([path])), path)
        if isfile(path / DEFINITION):
            why = " (a sweep: name one of its trials)"
        elif not policy and isfile(path / POLICY_FILENAME):  # a shared agent's
            why = f" (it holds a policy file; to train it on: {command('--start-from', path)})"
        elif (inside := runs_of([path])) != [path]:  # runs/, say
            why = f" (a folder of runs: name one, such as {printable(inside[0])})"
    if isdir(path):  # a run directory, or a link to one
        shared = policy and not exists(path / FILENAME) and exists(path / POLICY_FILENAME)
        path = path / (POLICY_FILENAME if shared else FILENAME)
    try:
        with open_file(path, MAX_BYTES) as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such checkpoint file{why}") from None
    except NotRegularError as e:
        raise CheckpointError(f"{path}: {e.strerror}") from None
    except OSError as e:
        raise CheckpointError(f"{path}: cannot be read ({e.strerror or e})") from None
    return decode(data, path, policy=policy)


def decode(data: bytes, path: PathLike, *, policy: bool = False) -> Checkpoint:
    """The checkpoint in ``data``, a safetensors file's bytes (``path`` names it in errors)."""
    length = int.from_bytes(data[:8], "little")
    if len(data) < 8:
        problem = f"not a checkpoint or policy (not a safetensors file: {len(data)} bytes long)"
    elif 8 + length > len(data) and length > MAX_HEADER_BYTES:  # text, say: no length at its start
        problem = (
            "not a checkpoint or policy (not a safetensors file: its first 8 bytes give a header"
            " longer than the file)"
        )
    elif 8 + length > len(data):
        problem = f"damaged (its header claims {length:,} bytes; the file has {len(data):,})"
    elif length > MAX_HEADER_BYTES:  # of the JSON header: none of ours is so long
        problem = (
            f"not a pong checkpoint (a header of {length:,} bytes, more than {MAX_HEADER_BYTES:,})"
        )
    else:
        try:
            tensors = safetensors.numpy.load(data)
        except KeyError as e:  # a dtype safetensors knows and NumPy has not (BF16, F8_*)
            problem = f"not a pong checkpoint (a tensor of dtype {e})"
        except (SafetensorError, ValueError, TypeError) as e:  # and numpy's, for odd shapes
            problem = f"not a readable safetensors file ({first_line(e)})"
        else:
            return checked(path, tensors, _metadata(path, data[8 : 8 + length]), policy)
    raise CheckpointError(f"{path}: {problem}")


def unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object whose names are each given once (json's ``object_pairs_hook``)."""
    if len({k for k, _ in pairs}) != len(pairs):
        raise ValueError("a name appears twice in a JSON object")
    return dict(pairs)


def _metadata(path: PathLike, header: bytes) -> dict[str, str]:
    """The header's ``__metadata__``: at most ``MAX_ENTRIES`` texts of ``MAX_TEXT`` characters,
    by today's names."""
    try:
        meta = json.loads(header, object_pairs_hook=unique).get("__metadata__")
    except (ValueError, RecursionError, AttributeError) as e:
        raise CheckpointError(f"{path}: not a readable safetensors file ({e})") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: not a pong checkpoint (its header has no metadata)")
    if len(meta) > MAX_ENTRIES:
        raise CheckpointError(f"{path}: {len(meta):,} metadata entries, more than {MAX_ENTRIES}")
    for key, value in meta.items():
        if not isinstance(value, str) or len(key) > MAX_TEXT or len(value) > MAX_TEXT:
            raise CheckpointError(
                f"{path}: metadata {_shown(key)}: expected a text of at most {MAX_TEXT}"
                f" characters, got {_shown(value)}"
            )
    return {OLD_NAMES.get(k, k): v for k, v in meta.items()}  # an older file's names too


def header_update(path: PathLike, header: bytes) -> int:
    """The update a checkpoint's JSON header says it holds: read without its tensors."""
    return _count(_metadata(path, header), "updates")


def checked(path, tensors: dict[str, np.ndarray], meta: dict[str, str], policy: bool):
    """The checkpoint the tensors and metadata make, every one checked."""
    fmt = meta.get("format")
    if fmt == POLICY_FORMAT and not policy:
        raise CheckpointError(
            f"{path}: a policy file holds no RMSProp cache to resume; to train it further,"
            f" start a new run from its weights: {command('--start-from', path)}"
        )
    if fmt not in (FORMAT, POLICY_FORMAT):
        raise CheckpointError(f"{path}: not a pong checkpoint (format {_shown(fmt)})")
    shapes, dtype = (POLICY_SHAPES, np.float32) if fmt == POLICY_FORMAT else (SHAPES, np.float64)
    _check_tensors(path, tensors, shapes, np.dtype(dtype), policy)
    cache = {k: np.asfortranarray(tensors[f"cache_{k}"]) for k in POLICY_SHAPES if fmt == FORMAT}
    try:
        settings = {
            f.name: stored(f, meta[f.name], exact=False) for f in dataclasses.fields(Config)
        }
        return Checkpoint(
            weights={k: np.asfortranarray(tensors[k], dtype=np.float64) for k in POLICY_SHAPES},
            rmsprop_cache=cache or None,
            **{name: _count(meta, name) for name in COUNTERS},
            **{name: _mean(meta, name) for name in MEANS},
            config=Config.from_dict(settings),  # each checked as its flag is
        )
    except KeyError as e:
        raise CheckpointError(f"{path}: damaged metadata (no {e} in it)") from None
    except ValueError as e:
        raise CheckpointError(f"{path}: damaged metadata ({e})") from None


def _check_tensors(path, tensors: dict, shapes: dict, dtype: np.dtype, policy: bool) -> None:
    """Exactly the tensors of ``shapes``, each of ``dtype``, every value finite; with
    ``policy``, weights a policy file can hold (a run resumes the huge ones it made)."""
    if missing := [k for k in shapes if k not in tensors]:
        raise CheckpointError(f"{path}: not a pong checkpoint (no {', '.join(missing)} in it)")
    if extra := sorted(tensors.keys() - shapes.keys()):
        shown = ", ".join(_shown(k) for k in extra[:3])
        raise CheckpointError(f"{path}: not a pong checkpoint ({shown} in it too)")
    for name, shape in shapes.items():
        array, problem = tensors[name], None
        if array.shape != shape:
            problem = f"has shape {array.shape}, this network needs {shape}"
        elif array.dtype != dtype:
            problem = f"holds {array.dtype} values, not {dtype}"
        elif not np.isfinite(array).all():
            problem = "holds NaN or infinite values"
        elif policy and name in POLICY_SHAPES and (np.abs(array) > MAX_WEIGHT).any():  # inf
            problem = f"holds values beyond {MAX_WEIGHT:.1e}"
        elif name.startswith("cache_") and (array < 0).any():  # RMSProp takes its root
            problem = "holds negative values"
        if problem:
            raise CheckpointError(f"{path}: {name} {problem}")


def _count(meta: dict[str, str], name: str) -> int:
    """A counter: a non-negative integer of at most ``MAX_COUNT``."""
    if not re.fullmatch(r"[0-9]{1,16}", text := meta[name]) or int(text) > MAX_COUNT:
        raise ValueError(
            f"{name}: expected an integer from 0 to {MAX_COUNT:.0e}, got {_shown(text)}"
        )
    return int(text)


def _mean(meta: dict[str, str], name: str) -> float | None:
    """A running mean: a number of at most ``MAX_SCORE`` either way, or none before any game."""
    if (text := meta[name]) == NONE:
        return None
    with suppress(ValueError):
        if -MAX_SCORE <= (value := float(text)) <= MAX_SCORE:
            return value
    raise ValueError(
        f"{name}: expected a number from {-MAX_SCORE:g} to {MAX_SCORE:g} or {NONE!r},"
        f" got {_shown(text)}"
    )


def _shown(value: object) -> str:
    """A value as a message shows it: its repr, at most 80 characters."""
    return text if len(text := repr(value)) <= 80 else f"{text[:77]}..."
