"""Carry a checkpoint or policy file of an earlier version (``.npz``) over to safetensors.

``python -m pong convert OLD.npz [NEW.safetensors]`` reads it with NumPy (no pickles; its size
and members bounded first), checks it as any checkpoint, and writes the same numbers beside it
(``checkpoint.npz`` becomes the ``checkpoint.safetensors`` that ``--resume`` reads)."""

import json
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pong.envs.make import check_id
from pong.run import checkpoint as ckpt
from pong.run.config import path as nonempty_path
from pong.run.errors import OneLineParser, first_line
from pong.run.files import NotRegularError, atomic_write, open_file

__all__ = ["main", "read_npz"]

MAX_NPZ_BYTES = 64 * 2**20  # an old checkpoint is about 20.5 MB, an old policy file 4.8
MEMBERS = {"W1.npy", "W2.npy", "cache_W1.npy", "cache_W2.npy", "meta.npy"}
OLD_FORMATS = {"pong-checkpoint/1": ckpt.FORMAT, "pong-policy/1": ckpt.POLICY_FORMAT}


def read_npz(path: Path) -> tuple[ckpt.Checkpoint, bytes]:
    """The checkpoint or policy in an earlier version's ``.npz`` file, checked, and the bytes
    of this version's file of it, which must load as any file and name an env the driver plays."""
    try:
        with open_file(path, MAX_NPZ_BYTES) as f:
            infos = zipfile.ZipFile(f).infolist()  # named and sized before NumPy reads one
            names = [i.filename for i in infos]
            if not set(names) <= MEMBERS or len(set(names)) < len(names):
                raise ValueError(f"members {', '.join(sorted(set(names) - MEMBERS))[:100]}")
            if sum(i.file_size for i in infos) > MAX_NPZ_BYTES:
                raise ValueError("members larger than a pong .npz file's")
            f.seek(0)
            arrays = dict(np.load(f, allow_pickle=False))
            metadata = _metadata(json.loads(str(arrays.pop("meta")), object_pairs_hook=ckpt.unique))
    except FileNotFoundError:
        raise ckpt.CheckpointError(f"{path}: no such file") from None
    except NotRegularError as e:
        raise ckpt.CheckpointError(f"{path}: {e.strerror}") from None
    except KeyError as e:
        raise ckpt.CheckpointError(f"{path}: not a pong .npz file (no {e} in it)") from None
    except Exception as e:  # whatever zipfile, NumPy or json make of a damaged file
        reason = first_line(e)[:200]
        raise ckpt.CheckpointError(f"{path}: not a pong .npz file ({reason})") from None
    checkpoint = ckpt.checked(path, arrays, metadata, policy=True)
    data = ckpt.encode(checkpoint, policy=checkpoint.rmsprop_cache is None)
    ckpt.decode(data, path, policy=True)
    try:  # the env id is known to be short by now
        check_id(checkpoint.config.env)
    except ValueError as e:
        raise ckpt.CheckpointError(f"{path}: env: {e}") from None
    return checkpoint, data


def _metadata(meta: dict) -> dict[str, str]:
    """The old JSON metadata as this version's texts (checked afterwards as any file's)."""
    if meta.get("format") not in OLD_FORMATS:
        raise ValueError(f"format {str(meta.get('format'))[:80]!r}")
    values = {new: meta[old] for old, new in ckpt.OLD_NAMES.items()}  # as it named them
    values |= {name: meta[name] for name in ("steps", "seed")}
    settings, taken = meta["settings"], {"format", *values, *ckpt.OLD_NAMES}
    if not isinstance(settings, dict) or set(settings) & taken:  # a count, posing as a setting
        raise ValueError("settings that are not a dict of settings alone")
    values = {"format": OLD_FORMATS[meta["format"]], **values, **settings}
    return {k: ckpt.as_text(v) for k, v in values.items()}


def main(argv: Sequence[str] | None = None) -> int:
    about = "Convert a checkpoint or policy file of an earlier version (.npz) to safetensors."
    parser = OneLineParser(prog="python -m pong convert", description=about)
    parser.add_argument("old", type=nonempty_path, help="the .npz file: checkpoint or policy")
    default = "(default: OLD with .safetensors)"
    parser.add_argument("new", type=nonempty_path, nargs="?", help=f"the file to write {default}")
    args = parser.parse_args(argv)
    new = args.new or args.old.with_suffix(".safetensors")
    if new.suffix != ".safetensors":
        parser.error(f"argument new: must end in .safetensors, got {str(new)!r}")
    try:
        old, data = read_npz(args.old)
    except ckpt.CheckpointError as e:
        parser.refuse(str(e))
    try:
        with atomic_write(new, "wb", replace=False) as f:
            f.write(data)
    except FileExistsError:
        parser.refuse(f"{new} exists; choose a new name")
    except OSError as e:
        parser.refuse(f"could not write {new}: {e.strerror or e}", status=1)
    kind = "policy file" if old.rmsprop_cache is None else "checkpoint"
    print(f"Wrote {new}: the {kind} of update {old.updates}, the same numbers as {args.old}")
    return 0
