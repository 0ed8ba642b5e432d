"""Fuzzing the readers of files others make: checkpoints, policy files, metrics CSVs.

Checkpoints and policy files are safetensors files: an 8-byte header length, a JSON
header (each tensor's dtype, shape and data offsets, and the metadata), the data.
Each case starts from a real file (a fresh checkpoint, the shipped policy, committed
metrics) and damages it one way, drawn from fixed seeds so that a failure repeats;
the damaged headers are written here by hand, with json and struct.
Reading it must give valid weights or rows, or one line of error: never another
exception, never a hang, never an allocation much larger than a real checkpoint.
FIFOs, devices and links are read in a child process with a time and memory limit, so
a reader that blocks or reads without end fails its test instead of stopping the suite.
"""

from __future__ import annotations

import io
import json
import math
import os
import signal
import struct
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from pong.checkpoint import FILENAME, MAX_HEADER_BYTES, CheckpointError, load, save
from pong.compare import figures
from pong.errors import UsageError
from pong.metrics import EPISODES, UPDATES, MetricsLog, read_rows, summarize
from pong.model import D, H
from pong.plot import curve
from tests.helpers import run_driver
from tests.test_checkpoint import make_checkpoint

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "results" / "pong-v5" / "policy.safetensors"
RUN = ROOT / "results" / "pong-v5-seed1"
MAX_PEAK = 100 * 2**20  # bytes allocated reading one file; a checkpoint's arrays are 20.5 MB
MAX_SECONDS = 2.0  # to read or refuse one file; a real checkpoint loads in about 0.05 s
WHOLE_FUZZ = 120  # seconds for all the cases of one test: past it, the test fails as hung
Cases = list[tuple[str, Callable[[], bytes]]]  # a label, and a function making the damaged file


class Hung(BaseException):
    """A reader still reading at the deadline (no ``except Exception`` catches it)."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    def stop(signum, frame):
        raise Hung(f"still reading after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def measured(read: Callable[[], object]) -> tuple[object, int, float]:
    """``read()``'s result or exception, the peak bytes it allocated, its seconds."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        result = read()
    except Exception as e:  # what the caller judges
        result = e
    finally:
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return result, peak, seconds


def judge(result: object, peak: int, seconds: float, path: Path, error: type, valid) -> str:
    """'' if a reader behaved: ``valid(result)`` or an ``error`` of one line naming ``path``."""
    if peak > MAX_PEAK:
        return f"allocated {peak / 2**20:.0f} MiB"
    if seconds > MAX_SECONDS:
        return f"took {seconds:.1f} s"
    if isinstance(result, error):
        text = str(result)
        return "" if str(path) in text and "\n" not in text else f"message {text!r}"
    if isinstance(result, BaseException):
        return f"{type(result).__name__}: {str(result)[:150]}"
    return valid(result)


def valid_weights(loaded) -> str:
    arrays = {
        **loaded.weights,
        **{f"cache_{k}": v for k, v in (loaded.rmsprop_cache or {}).items()},
    }
    for name, array in arrays.items():
        shape = (H, D) if name.endswith("W1") else (H,)
        if array.shape != shape or array.dtype != np.float64 or not np.isfinite(array).all():
            return f"loaded {name} of {array.shape} {array.dtype}, or not finite"
    return ""


def fuzz(cases: Cases, path: Path, read, error: type, valid) -> None:
    """Write each case to ``path``, read it, and fail with every case that misbehaved."""
    failures, count = [], 0
    with deadline(WHOLE_FUZZ):
        for label, make in cases:
            path.write_bytes(make())
            problem = judge(*measured(lambda: read(path)), path, error, valid)
            count += 1
            if problem:
                failures.append(f"{label}: {problem}")
    assert count >= 100
    assert not failures, f"{len(failures)} of {count} cases:\n" + "\n".join(failures)


# --- building damaged safetensors files, by hand (json and struct, not pong.checkpoint) --------

Tensors = dict[str, tuple[object, object, bytes]]  # name: (dtype, shape, data), in file order
BITS = {  # every dtype safetensors knows, and its bits per element
    **dict.fromkeys(["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0"], 8),
    **dict.fromkeys(["F8_E4M3FNUZ", "F8_E5M2FNUZ"], 8),
    **dict.fromkeys(["F4"], 4),
    **dict.fromkeys(["F6_E2M3", "F6_E3M2"], 6),
    **dict.fromkeys(["I16", "U16", "F16", "BF16"], 16),
    **dict.fromkeys(["I32", "U32", "F32"], 32),
    **dict.fromkeys(["I64", "U64", "F64", "C64"], 64),
}


class Raw(str):
    """JSON text to put in a header as it is."""


class Pairs(list):
    """A JSON object as a list of (name, value) pairs, so that a name can appear twice."""


def unpack(data: bytes) -> tuple[dict, Tensors]:
    """A safetensors file's metadata and its tensors, in the order of their data."""
    (length,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8 : 8 + length])
    meta, body = header.pop("__metadata__"), memoryview(data)[8 + length :]
    order = sorted(header, key=lambda k: header[k]["data_offsets"])
    return meta, {
        k: (header[k]["dtype"], header[k]["shape"], body[slice(*header[k]["data_offsets"])])
        for k in order
    }


def header_of(tensors: Tensors, meta: object = None) -> dict:
    """The header of ``tensors`` laid end to end (``meta``: its ``__metadata__``, if any)."""
    header, at = ({} if meta is None else {"__metadata__": meta}), 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(raw)]}
        at += len(raw)
    return header


def text(value: object) -> str:
    """JSON for ``value``: ``Raw`` as it is, ``Pairs`` as an object (a name may be twice)."""
    if isinstance(value, Raw):
        return value
    if isinstance(value, dict):
        value = Pairs(value.items())
    if isinstance(value, Pairs):
        return "{" + ",".join(f"{json.dumps(k)}:{text(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(map(text, value)) + "]"
    return json.dumps(value)


def build(header: object, body, length: int | None = None, tail: bytes = b"") -> bytes:
    """A file: the 8-byte length (``length`` if given), the header (JSON, or bytes), ``body``."""
    raw = header if isinstance(header, bytes) else text(header).encode()
    return b"".join([struct.pack("<Q", len(raw) if length is None else length), raw, body, tail])


def pack(tensors: Tensors, meta: object) -> bytes:
    """``tensors`` and ``meta`` as a well-formed file: offsets agree with the data."""
    return build(header_of(tensors, meta), b"".join(raw for _, _, raw in tensors.values()))


GONE = object()  # a field left out


def changed(header: dict, name: str, **fields) -> dict:
    entry = {**header[name], **fields}
    return {**header, name: {k: v for k, v in entry.items() if v is not GONE}}


def flipped(data: bytes, at: int, mask: int) -> bytes:
    out = bytearray(data)
    out[at] ^= mask
    return bytes(out)


def with_value(tensors: Tensors, meta: dict, name: str, index: int, value: float) -> bytes:
    dtype, shape, raw = tensors[name]
    array = np.frombuffer(raw, np.float64 if dtype == "F64" else np.float32).copy()
    array[index] = value
    return pack({**tensors, name: (dtype, shape, array.tobytes())}, meta)


def as_dtype(tensors: Tensors, names, dtype: str) -> Tensors:
    """``tensors`` with those of ``names`` converted to ``dtype`` (F32 or F64), values kept."""
    kind = {"F32": np.float32, "F64": np.float64}
    out = dict(tensors)
    for name in names:
        old, shape, raw = tensors[name]
        out[name] = (dtype, shape, np.frombuffer(raw, kind[old]).astype(kind[dtype]).tobytes())
    return out


def old_npz(meta: dict) -> bytes:
    """A file of an earlier version: an .npz of W1, W2 and the metadata as JSON."""
    out = io.BytesIO()
    np.savez(out, W1=np.zeros((H, D)), W2=np.zeros(H), meta=np.array(json.dumps(meta)))
    return out.getvalue()


# --- the safetensors cases ---------------------------------------------------------------------


def safetensors_cases(data: bytes, seed: int) -> Cases:
    """Damaged forms of ``data``, a checkpoint or a policy file."""
    rng = np.random.default_rng(seed)
    meta, tensors = unpack(data)
    good, body = header_of(tensors, meta), data[8 + struct.unpack_from("<Q", data)[0] :]
    return [
        *length_cases(data, rng),
        *offset_cases(good, body),
        *dtype_cases(good, body, tensors, meta, rng),
        *shape_cases(good, body, tensors, meta),
        *tensor_cases(good, body, tensors, meta),
        *value_cases(tensors, meta),
        *meta_cases(good, body, meta),
        *damage_cases(data, rng),
        ("an old .npz", partial(old_npz, meta)),
    ]


def length_cases(data: bytes, rng: np.random.Generator) -> Cases:
    """The 8-byte header length: 0, 1, off by one, past the cap or the file, random."""
    (real,) = struct.unpack_from("<Q", data)
    values = [0, 1, 2, real - 1, real + 1, MAX_HEADER_BYTES, MAX_HEADER_BYTES + 1]
    values += [len(data) - 8, len(data) - 7, len(data), 2**32, 2**63, 2**64 - 1]
    values += rng.integers(0, 2**64 - 1, 4, dtype=np.uint64, endpoint=True).tolist()
    values += rng.integers(0, 2 * real, 4).tolist() + rng.integers(0, len(data), 2).tolist()
    return [
        (f"header length {v}", partial(lambda v: struct.pack("<Q", v) + data[8:], int(v)))
        for v in values
    ]


def offset_cases(good: dict, body: bytes) -> Cases:
    """data_offsets out of range, overlapping, reversed, with gaps, huge, not integers."""
    cases = []
    for name in list(good)[1:]:
        a, b = good[name]["data_offsets"]
        claims = [
            [0, b - a],
            [b, a],
            [a + 8, b + 8],
            [a, b - 8],
            [a, b + 2**40],
            [a, 2**64 - 1],
            [2**63, 2**63 + b - a],
            [2**64 - 8, 2**64 + b - a - 8],
            [a - 8, b],
            [-8, b - a - 8],
            [str(a), b],
            [a + 0.5, b],
            [float(a), float(b)],
            [a, b, b],
            [a],
            [],
            None,
            {"start": a, "end": b},
            [True, b],
            [a, 1e20],
        ]
        for claim in claims:
            header = changed(good, name, data_offsets=claim)
            cases.append((f"{name} offsets {claim}", partial(build, header, body)))
        header = changed(good, name, data_offsets=GONE)
        cases.append((f"{name} without offsets", partial(build, header, body)))
    same = {
        k: {**v, "data_offsets": [0, len(body)]} if k != "__metadata__" else v
        for k, v in good.items()
    }
    return [
        *cases,
        ("every tensor over the whole body", partial(build, same, body)),
        ("8 bytes before the data", partial(build, shifted(good, 8), b"\0" * 8 + body)),
        ("8 bytes after the data", partial(build, good, body, tail=b"\0" * 8)),
        ("the header in reverse order", partial(build, dict(reversed(good.items())), body)),
    ]


def shifted(good: dict, by: int) -> dict:
    return {
        k: v if k == "__metadata__" else {**v, "data_offsets": [o + by for o in v["data_offsets"]]}
        for k, v in good.items()
    }


def dtype_cases(good, body, tensors: Tensors, meta, rng: np.random.Generator) -> Cases:
    """Each tensor claiming every dtype, with its data's size or one that fits the claim;
    unknown names; the other float width, values kept."""
    cases = []
    for name, (dtype, shape, raw) in tensors.items():
        count = math.prod(shape)
        for claim in [*BITS, "f64", "float64", "F128", "", 64, None, ["F64"]]:
            header = changed(good, name, dtype=claim)
            cases.append((f"{name} dtype {claim!r}", partial(build, header, body)))
        for claim, bits in BITS.items():
            if claim != dtype:
                fits = {**tensors, name: (claim, shape, rng.bytes(count * bits // 8))}
                cases.append(
                    (f"{name} as {count * bits // 8} bytes of {claim}", partial(pack, fits, meta))
                )
        cases.append(
            (f"{name} without dtype", partial(build, changed(good, name, dtype=GONE), body))
        )
        other = "F32" if dtype == "F64" else "F64"
        cases.append((f"{name} as {other}", partial(pack, as_dtype(tensors, [name], other), meta)))
    dtype = next(iter(tensors.values()))[0]
    other = "F32" if dtype == "F64" else "F64"
    cases.append((f"all as {other}", partial(pack, as_dtype(tensors, list(tensors), other), meta)))
    return cases


def shape_cases(good, body, tensors: Tensors, meta) -> Cases:
    """Shapes transposed, of other networks, empty, negative, of huge or overflowing size,
    with the data's size or not."""
    cases = []
    for name, (dtype, shape, raw) in tensors.items():
        count = math.prod(shape)
        claims = [
            shape[::-1],
            [*shape, 1],
            [1, *shape],
            [count],
            [],
            [0],
            [0, *shape],
            [-1, *shape[1:]],
            [-s for s in shape],
            [s + 1 for s in shape],
            [s // 2 for s in shape],
            [10**9, D],
            [2**62, 2**62],
            [2**32, 2**32, 2**32],
            [2**64 - 1],
            [2**64],
            [2**63, 2],
            [str(s) for s in shape],
            [s + 0.5 for s in shape],
            [True] * len(shape),
            None,
            count,
        ]
        for claim in claims:
            header = changed(good, name, shape=claim)
            cases.append((f"{name} shape {str(claim)[:40]}", partial(build, header, body)))
        cases.append(
            (f"{name} without shape", partial(build, changed(good, name, shape=GONE), body))
        )
        fits = [shape[::-1], [count], [*shape, 1], [count // 2, 2], [2**62, 0], [0, 2**62]]
        for claim in fits:
            data = raw if math.prod(claim) else b""
            packed = {**tensors, name: (dtype, claim, data)}
            cases.append((f"{name} of shape {claim} and its data", partial(pack, packed, meta)))
    itemsize = BITS[dtype] // 8
    for label, h, d in (("H = 100", 100, D), ("H = 201", 201, D), ("D = 3200", H, 3200)):
        other = {
            k: (
                dtype,
                [h, d] if k.endswith("W1") else [h],
                bytes(h * (d if k.endswith("W1") else 1) * itemsize),
            )
            for k, (dtype, _, _) in tensors.items()
        }
        cases.append((f"a network of {label}", partial(pack, other, meta)))
    return cases


def tensor_cases(good, body, tensors: Tensors, meta) -> Cases:
    """Tensors missing, extra, renamed, swapped, named twice, hundreds of tiny ones."""
    names = list(tensors)
    cases = [("the data in reverse order", partial(pack, dict(reversed(tensors.items())), meta))]
    for name in names:
        rest = {k: v for k, v in tensors.items() if k != name}
        cases.append((f"no {name}", partial(pack, rest, meta)))
        for new in ("w1", f"{name} ", f"../{name}", "", "W3", "\u0000"):
            renamed = {(new if k == name else k): v for k, v in tensors.items()}
            cases.append((f"{name} renamed {new!r}", partial(pack, renamed, meta)))
        twice = Pairs([*good.items(), (name, good[names[0]])])
        cases.append((f"{name} twice in the header", partial(build, twice, body)))
    w1, w2 = tensors["W1"], tensors["W2"]
    swapped = {**tensors, "W1": w2, "W2": w1}
    tiny = lambda n, shape: {f"t{i}": ("U8", shape, b"\1" * math.prod(shape)) for i in range(n)}  # noqa: E731
    metas = Pairs([("__metadata__", meta), *good.items()])
    return [
        *cases,
        ("W1 and W2 swapped", partial(pack, swapped, meta)),
        ("an extra tensor", partial(pack, {**tensors, "extra": ("F64", [3], bytes(24))}, meta)),
        ("an empty extra tensor", partial(pack, {**tensors, "extra": ("U8", [0], b"")}, meta)),
        ("300 tiny tensors", partial(pack, {**tensors, **tiny(300, [1])}, meta)),
        ("2,000 empty tensors", partial(pack, {**tensors, **tiny(2000, [0])}, meta)),
        ("5,000 empty tensors", partial(pack, {**tensors, **tiny(5000, [0])}, meta)),
        ("only 300 tiny tensors", partial(pack, tiny(300, [1]), meta)),
        ("__metadata__ twice", partial(build, metas, body)),
        (
            "__metadata__ twice, the first wrong",
            partial(build, Pairs([("__metadata__", {"format": "x"}), *good.items()]), body),
        ),
        (
            "a tensor named __metadata__",
            partial(build, Pairs([*good.items(), ("__metadata__", good["W2"])]), body),
        ),
        ("no tensors", partial(pack, {}, meta)),
    ]


def value_cases(tensors: Tensors, meta) -> Cases:
    """NaN and infinities in each tensor, as real values; odd finite ones, which load."""
    cases = []
    for name, (_, shape, _) in tensors.items():
        last = math.prod(shape) - 1
        for index, value in ((0, math.nan), (last, math.inf), (last // 2, -math.inf)):
            cases.append(
                (
                    f"{name}[{index}] = {value}",
                    partial(with_value, tensors, meta, name, index, value),
                )
            )
        for value in (-0.0, 5e-324, 1e-45, 3.4e38):
            cases.append(
                (f"{name}[1] = {value}", partial(with_value, tensors, meta, name, 1, value))
            )
    return cases


SETTINGS = {
    **dict.fromkeys(
        ("iteration", "episodes", "steps"),
        [
            "-1",
            "1e400",
            "9" * 4001,
            "nan",
            "",
            " 7",
            "7.0",
            "0x7",
            "1_000",
            "\u0667",
            str(10**15),
            str(10**15 + 1),
            "9" * 17,
        ],
    ),
    **dict.fromkeys(
        ("running_reward", "best_running_reward"),
        ["nan", "NaN", "inf", "-inf", "1e300", "1000.5", "-1e400", "", "None", "1e-400", "none"],
    ),
    "batch_size": ["1e150", "0", "9" * 40, "9" * 41, "9" * 4001, "-1", "1.5", "nan", "1e1"],
    "learning_rate": ["nan", "inf", "-1", "1e400", "0", "1e-400", "x"],
    "decay_rate": ["1.5", "nan", "-0", "1", "1e999"],
    "seed": ["-1", "9" * 40, "1e400", "none", "2**32", "1.5"],
    "env": ["evil_module:Env", "", "x" * 200, "x" * 201, "\n", "ALE/Pong-v5\0", "../../etc/passwd"],
    "format": [
        "pong-checkpoint/1",
        "pong-checkpoint/3",
        "pong-checkpoint/2",
        "pong-policy/2",
        "",
        "PONG-CHECKPOINT/2",
        "x" * 201,
    ],
}


def meta_cases(good: dict, body: bytes, meta: dict) -> Cases:
    """The metadata missing, of the wrong types, huge, many, not UTF-8, not JSON, too deep;
    each setting's text out of range or not a number."""
    tensors = {k: v for k, v in good.items() if k != "__metadata__"}
    headers = {
        "no metadata": tensors,
        "metadata null": {"__metadata__": None, **tensors},
        "metadata a list": {"__metadata__": list(meta.values()), **tensors},
        "metadata a text": {"__metadata__": "pong-checkpoint/2", **tensors},
        "metadata nested": {"__metadata__": {**meta, "format": meta}, **tensors},
        "metadata empty": {"__metadata__": {}, **tensors},
        "a value of 60,000 characters": {"__metadata__": {**meta, "env": "x" * 60_000}, **tensors},
        "a value of 70,000 characters": {"__metadata__": {**meta, "env": "x" * 70_000}, **tensors},
        "a name of 201 characters": {"__metadata__": {**meta, "y" * 201: "1"}, **tensors},
        "an extra entry": {"__metadata__": {**meta, "extra": "1"}, **tensors},
        "65 entries": {"__metadata__": {**meta, **{f"k{i}": "" for i in range(54)}}, **tensors},
        "3,000 entries": {
            "__metadata__": {**meta, **{f"k{i}": "" for i in range(3000)}},
            **tensors,
        },
        "10,000 entries": {
            "__metadata__": {**meta, **{f"k{i}": "" for i in range(10_000)}},
            **tensors,
        },
        "a lone surrogate": {"__metadata__": {**meta, "env": "\ud800"}, **tensors},
        "format twice, the first wrong": Pairs(
            [("__metadata__", Pairs([("format", "x"), *meta.items()])), *tensors.items()]
        ),
        "format twice, the second wrong": Pairs(
            [("__metadata__", Pairs([*meta.items(), ("format", "x")])), *tensors.items()]
        ),
        "metadata nested 60,000 deep": {
            "__metadata__": Raw("[" * 60_000 + "]" * 60_000),
            **tensors,
        },
        "a value nested 30,000 deep": {
            "__metadata__": {**meta, "env": Raw("[" * 30_000 + "]" * 30_000)},
            **tensors,
        },
    }
    for key, value in meta.items():
        rest = {k: v for k, v in meta.items() if k != key}
        headers[f"no {key}"] = {"__metadata__": rest, **tensors}
        for other in (None, 7, -1.5, 10**30, True, [value], {"v": value}, Raw("9" * 5000)):
            headers[f"{key} = {str(other)[:20]}"] = {
                "__metadata__": {**meta, key: other},
                **tensors,
            }
    for key, values in SETTINGS.items():
        for value in values:
            headers[f"{key} {value[:20]!r}"] = {"__metadata__": {**meta, key: value}, **tensors}
    cases = [(label, partial(build, header, body)) for label, header in headers.items()]
    real = text(good).encode()
    texts = {
        "env not UTF-8": real.replace(b"Pong", b"P\xffng"),
        "an overlong NUL": real.replace(b"Pong", b"P\xc0\x80ng"),
        "a surrogate in UTF-8": real.replace(b"Pong", b"P\xed\xa0\x80ng"),
        "a byte \\xff outside a text": real.replace(b"{", b"{\xff", 1),
        "invalid JSON": b"{not json",
        "a header cut": real[:-20],
        "a header of spaces": b" " * len(real),
        "a header of NULs": b"\0" * len(real),
        "a header null": b"null",
        "a header list": b"[]",
        "a header text": b'"x"',
        "a trailing comma": real[:-1] + b",}",
        "[ 60,000 deep": b"[" * 60_000,
        "{ 20,000 deep": b'{"a":' * 20_000 + b"1" + b"}" * 20_000,
        "a header padded with NULs": real + b"\0" * 7,
        "a header padded with spaces": real + b" " * 7,
    }
    return cases + [(label, partial(build, raw, body)) for label, raw in texts.items()]


def damage_cases(data: bytes, rng: np.random.Generator) -> Cases:
    """Cuts, flipped bytes (header length, header, anywhere), garbage before or after."""
    end = 8 + struct.unpack_from("<Q", data)[0]
    cuts = {0, 1, 7, 8, 9, end - 1, end, end + 1, len(data) - 8, len(data) - 1}
    cuts |= set(rng.integers(0, len(data), 12).tolist())
    cases = [(f"cut at {c}", partial(bytes, memoryview(data)[:c])) for c in sorted(cuts)]
    spots = [*rng.integers(0, 8, 6).tolist(), *rng.integers(8, end, 40).tolist()]
    spots += rng.integers(end, len(data), 10).tolist()
    masks = rng.integers(1, 256, len(spots)).tolist()
    for at, mask in zip(spots, masks, strict=True):
        cases.append((f"byte {at} ^ {mask:#x}", partial(flipped, data, at, mask)))
    for label, before, after in (
        ("a NUL after", b"", b"\0"),
        ("7 bytes after", b"", b"garbage"),
        ("4 KiB after", b"", rng.bytes(4096)),
        ("the file twice", b"", data),
        ("8 NULs before", b"\0" * 8, b""),
        ("PK before", b"PK\x03\x04", b""),
    ):
        cases.append((label, partial(lambda b, a: b + data + a, before, after)))
    return cases


@pytest.fixture(scope="module")
def checkpoint_bytes(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("real") / FILENAME
    save(path, make_checkpoint())
    return path.read_bytes()


def test_damaged_checkpoints_load_whole_or_fail_in_one_line(checkpoint_bytes, tmp_path) -> None:
    cases = safetensors_cases(checkpoint_bytes, seed=1)
    fuzz(cases, tmp_path / FILENAME, load, CheckpointError, valid_weights)


def test_damaged_policies_load_whole_or_fail_in_one_line(tmp_path) -> None:
    cases = safetensors_cases(POLICY.read_bytes(), seed=2)
    read = lambda path: load(path, policy=True)  # noqa: E731
    fuzz(cases, tmp_path / "policy.safetensors", read, CheckpointError, valid_weights)


def test_an_old_npz_is_refused_with_a_pointer_to_pong_convert(checkpoint_bytes, tmp_path) -> None:
    meta, _ = unpack(checkpoint_bytes)
    path = tmp_path / FILENAME
    path.write_bytes(old_npz(meta))
    for policy in (False, True):
        with pytest.raises(CheckpointError) as caught:
            load(path, policy=policy)
        assert str(caught.value) == (
            f"{path}: a .npz file of an earlier version of pong; carry it over with"
            f" python -m pong.convert {path}"
        )
    path.rename(tmp_path / "checkpoint.npz")
    with pytest.raises(CheckpointError, match=r"python -m pong\.convert .*checkpoint\.npz\)$"):
        load(tmp_path)


# --- metrics CSVs -------------------------------------------------------------------------------


def metrics_cases(data: bytes, seed: int) -> Cases:
    """Damaged forms of a metrics CSV: cut, bytes flipped or put in, lines too long."""
    rng = np.random.default_rng(seed)
    cases = [(f"cut at {c}", partial(bytes, data[:c])) for c in rng.integers(0, len(data), 30)]
    for at, mask in zip(rng.integers(0, len(data), 60), rng.integers(1, 256, 60), strict=True):
        cases.append((f"byte {at} ^ {mask:#x}", partial(flipped, data, int(at), int(mask))))
    inserts = [
        b"\0",
        b"\r",
        b'"',
        b"\xff",
        b",",
        b"\n",
        b"\x0b",
        "\u2028".encode(),
        b"\xef\xbb\xbf",
    ]
    for text in inserts:
        for at in (0, *rng.integers(0, len(data), 3).tolist()):
            cases.append(
                (f"{text!r} at {at}", partial(lambda t, a: data[:a] + t + data[a:], text, at))
            )
    header, first, *_ = data.split(b"\n")
    row = first.split(b",")
    specials = {
        "a line of 5,000 bytes": data + b"1," + b"9" * 5000 + b"\r\n",
        "a line of 10 MB": data + b"x" * 10**7,
        "a quoted field of 300 kB": data + b'"' + b"xyz\n" * 75_000,
        "a field twice in the header": data.replace(b"update,episodes", b"update,update", 1),
        "the header only": header + b"\n",
        "a header without its newline": header,
        "empty": b"",
        "a count of 400 digits": data + b"9" * 400 + b"," + b",".join(row[1:]) + b"\n",
        "inf seconds": data + b",".join(row[:3] + [b"inf"] + row[4:]) + b"\n",
        "nan running mean": data + b",".join(row[:5] + [b"nan"] + row[6:]) + b"\n",
        "blank lines": data.replace(b"\r\n", b"\r\n\r\n"),
        "LF only": data.replace(b"\r\n", b"\n"),
    }
    return cases + [(label, partial(bytes, text)) for label, text in specials.items()]


def read_run(path: Path) -> object:
    """Everything that reads a run's updates.csv: pong.metrics, pong.compare, pong.plot."""
    rows = read_rows(path)
    return rows, summarize(path.parent), figures(path.parent), curve(path.parent)


@pytest.fixture
def run_copy(tmp_path) -> Path:
    """A run directory with the first 60 lines of a committed run's metrics."""
    for name in (UPDATES, EPISODES):
        lines = (RUN / name).read_bytes().split(b"\n")[:60]
        (tmp_path / name).write_bytes(b"\n".join(lines) + b"\n")
    return tmp_path


def test_damaged_metrics_read_or_fail_in_one_line(run_copy) -> None:
    data = (run_copy / UPDATES).read_bytes()
    cases = metrics_cases(data, seed=3)
    fuzz(cases, run_copy / UPDATES, read_run, ValueError, lambda result: "")
    cases = metrics_cases((run_copy / EPISODES).read_bytes(), seed=4)
    fuzz(cases, run_copy / EPISODES, read_rows, ValueError, lambda result: "")


def test_a_resume_drops_rows_of_damaged_metrics_or_fails_in_one_line(run_copy) -> None:
    episodes = (run_copy / EPISODES).read_bytes()

    def resume(path: Path) -> None:
        (path.parent / EPISODES).write_bytes(episodes)
        MetricsLog(path.parent, after=5).close()

    cases = metrics_cases((run_copy / UPDATES).read_bytes(), seed=5)
    fuzz(cases, run_copy / UPDATES, resume, UsageError, lambda result: "")


# --- FIFOs, devices and directories, read in a child process with a deadline and a memory limit

CHILD = """
import resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (2**31, 2**31))  # a reader that reads without end fails
from pong.checkpoint import load
from pong.errors import UsageError
from pong.metrics import MetricsLog, read_rows
what, path = sys.argv[1], Path(sys.argv[2])
try:
    if what == "checkpoint":
        load(path, policy=True)
    elif what == "run":  # the run directory holding it
        load(path.parent)
    elif what == "read_rows":
        read_rows(path)
    else:
        MetricsLog(path.parent, after=1).close()
except (UsageError, ValueError) as e:
    print(e)
"""
KINDS = {
    "FIFO": "a FIFO",
    "link to /dev/zero": "a symbolic link",
    "/dev/zero": "a character device",  # given itself, not through a link
    "directory": "a directory",
}


def special(path: Path, kind: str) -> Path:
    if kind == "FIFO":
        os.mkfifo(path)
    elif kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "/dev/zero":
        return Path("/dev/zero")
    else:
        path.mkdir()
    return path


@pytest.mark.parametrize(
    ("what", "kind"),
    [
        ("checkpoint", "FIFO"),
        ("checkpoint", "link to /dev/zero"),
        ("checkpoint", "/dev/zero"),
        ("run", "FIFO"),
        ("run", "link to /dev/zero"),
        ("run", "directory"),
        ("read_rows", "FIFO"),
        ("read_rows", "link to /dev/zero"),
        ("read_rows", "/dev/zero"),
        ("read_rows", "directory"),
        ("resume", "FIFO"),  # a run directory is written in: /dev is no place to test that
        ("resume", "link to /dev/zero"),
        ("resume", "directory"),
    ],
)
def test_a_fifo_device_link_or_directory_is_refused_at_once(tmp_path, what, kind) -> None:
    path = special(tmp_path / (FILENAME if what in ("checkpoint", "run") else UPDATES), kind)
    child = [sys.executable, "-c", CHILD, what, str(path)]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run(child, capture_output=True, text=True, timeout=30, cwd=ROOT, env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]
    reason = f"{KINDS[kind]}, not a regular file"
    if what in ("checkpoint", "run"):
        assert proc.stdout == f"{path}: {reason}\n"
    else:
        assert proc.stdout == f"{path}: not a metrics file ({reason})\n"


def test_resume_with_a_fifo_for_metrics_stops_with_one_line(tmp_path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    save(run / FILENAME, make_checkpoint())
    os.mkfifo(run / UPDATES)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = run_driver(["--resume", str(run), "--iterations=1"], env, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"driver.py: error: {run / UPDATES}: not a metrics file (a FIFO, not a regular file)\n"
    )
