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

from pong.core.model import D, H
from pong.run.checkpoint import FILENAME, MAX_HEADER_BYTES, CheckpointError, load, save
from pong.run.errors import UsageError
from pong.run.metrics import GAMES, UPDATES, MetricsLog, read_rows, summarize
from pong.tools.compare import figures
from pong.tools.plot import curve
from tests.helpers import run_driver
from tests.run.test_checkpoint import make_checkpoint

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "results" / "pong-v5" / "policy.safetensors"
RUN = ROOT / "results" / "pong-v5-seed1"
MAX_PEAK = 100 * 2**20  # bytes allocated reading one file; a checkpoint's arrays are 20.5 MB
MAX_SECONDS = 2.0  # CPU time to read or refuse one file; a real checkpoint loads in about 0.05 s
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
    start = time.process_time()  # not wall time: another process may hold the CPU
    try:
        result = read()
    except Exception as e:  # what the caller judges
        result = e
    finally:
        seconds = time.process_time() - start
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


# --- building safetensors files by hand (json and struct), damaged one way each -----------------

Tensors = dict[str, tuple]  # name: (dtype, shape, data bytes), in the order of their data
BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8}
BITS |= {"F8_E5M2FNUZ": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "I16": 16, "U16": 16, "F16": 16}
BITS |= {"BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64, "C64": 64}
GONE = object()  # a header field left out


class Raw(str):
    """JSON text to put in a header as it is."""


class Pairs(list):
    """A JSON object as (name, value) pairs, so that a name can appear twice."""


def unpack(data: bytes) -> tuple[dict, Tensors]:
    """A safetensors file's metadata, and its tensors in the order of their data."""
    (length,) = struct.unpack_from("<Q", data)
    header, body = json.loads(data[8 : 8 + length]), memoryview(data)[8 + length :]
    meta = header.pop("__metadata__")
    entries = sorted(header.items(), key=lambda item: item[1]["data_offsets"])
    return meta, {k: (e["dtype"], e["shape"], body[slice(*e["data_offsets"])]) for k, e in entries}


def header_of(tensors: Tensors, meta: object) -> dict:
    """The header of ``tensors`` laid end to end, with ``meta`` as its metadata."""
    header, at = {"__metadata__": meta}, 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(raw)]}
        at += len(raw)
    return header


def text(value: object) -> str:
    """JSON for ``value``: ``Raw`` as it is, ``Pairs`` as an object, ``GONE`` fields left out."""
    if isinstance(value, Raw):
        return value
    if isinstance(value, dict | Pairs):
        pairs = value.items() if isinstance(value, dict) else value
        return "{" + ",".join(f"{json.dumps(k)}:{text(v)}" for k, v in pairs if v is not GONE) + "}"
    if isinstance(value, list):
        return "[" + ",".join(map(text, value)) + "]"
    return json.dumps(value)


def build(header: object, body: bytes, tail: bytes = b"") -> bytes:
    """A file: the 8-byte length of ``header`` (JSON, or bytes), the header, ``body``."""
    raw = header if isinstance(header, bytes) else text(header).encode()
    return struct.pack("<Q", len(raw)) + raw + body + tail


def pack(tensors: Tensors, meta: object) -> bytes:
    """A well-formed file of ``tensors`` and ``meta``: the offsets fit the data."""
    return build(header_of(tensors, meta), b"".join(raw for *_, raw in tensors.values()))


def shown(value: object) -> str:
    """``value`` for a case's label: its repr, cut short with its length if long."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}... ({len(text):,} long)"


def changed(header: dict, name: str, **fields) -> dict:
    return {**header, name: {**header[name], **fields}}


def flipped(data: bytes, at: int, mask: int) -> bytes:
    out = bytearray(data)
    out[at] ^= mask
    return bytes(out)


def as_floats(tensors: Tensors, name: str, dtype: str | None = None, at: int = 0, value=None):
    """``tensors`` with ``name`` converted to float ``dtype``, ``value`` put at ``at``."""
    kinds = {"F32": np.float32, "F64": np.float64}
    old, shape, raw = tensors[name]
    array = np.frombuffer(raw, kinds[old]).astype(kinds[dtype or old])
    if value is not None:
        array[at] = value
    return {**tensors, name: (dtype or old, shape, array.tobytes())}


def old_npz(meta: dict) -> bytes:
    """A file of an earlier version: an .npz of W1, W2 and the metadata as JSON."""
    out = io.BytesIO()
    np.savez(out, W1=np.zeros((H, D)), W2=np.zeros(H), meta=np.array(json.dumps(meta)))
    return out.getvalue()


def safetensors_cases(data: bytes, seed: int, edited: tuple[str, ...] = ("W1", "W2")) -> Cases:
    """Damaged forms of ``data``, a checkpoint or a policy file; the tensors of ``edited``
    get every dtype and shape (each case of a checkpoint costs 20 MB written and read)."""
    rng = np.random.default_rng(seed)
    meta, tensors = unpack(data)
    good, body = header_of(tensors, meta), data[8 + struct.unpack_from("<Q", data)[0] :]
    return [
        *length_cases(data, rng),
        *entry_cases(good, body, tensors, edited),
        *layout_cases(good, body, tensors, meta, rng, edited),
        *meta_cases(good, body, meta),
        *damage_cases(data, rng),
        ("an old .npz", partial(old_npz, meta)),
    ]


def length_cases(data: bytes, rng: np.random.Generator) -> Cases:
    """The 8-byte header length: 0, 1, off by one, past the cap or the file, random."""
    (real,) = struct.unpack_from("<Q", data)
    values = [0, 1, 2, real - 1, real + 1, MAX_HEADER_BYTES, MAX_HEADER_BYTES + 1, len(data) - 8]
    values += [len(data) - 7, len(data), 2**32, 2**63, 2**64 - 1]
    values += rng.integers(0, 2**64 - 1, 4, dtype=np.uint64, endpoint=True).tolist()
    values += rng.integers(0, 2 * real, 4).tolist() + rng.integers(0, len(data), 2).tolist()
    relength = lambda v: struct.pack("<Q", v) + data[8:]  # noqa: E731
    return [(f"header length {v}", partial(relength, int(v))) for v in values]


def entry_cases(good: dict, body: bytes, tensors: Tensors, edited: tuple[str, ...]) -> Cases:
    """Each tensor's header entry edited, its data left: data_offsets out of range,
    overlapping, reversed, with gaps, huge, not integers; every dtype, unknown ones; shapes
    transposed, empty, negative, of huge or overflowing size; fields missing or unknown."""
    cases = {}
    for name in edited:
        (dtype, shape, _), (a, b) = tensors[name], good[name]["data_offsets"]
        offsets = [[0, b - a], [b, a], [a + 8, b + 8], [a, b - 8], [a - 8, b], [a, b + 2**40]]
        offsets += [[a, 2**64 - 1], [2**63, 2**63 + b], [2**64 - 8, 2**64 + b], [-(2**63), b]]
        offsets += [[str(a), b], [a + 0.5, b], [a * 1.0, b * 1.0], [a, b, b], [a], [], [a, 1e20]]
        offsets += [None, {"start": a, "end": b}, [True, b], GONE]
        dtypes = [*BITS, "f64", "float64", "F128", "", 64, None, [dtype], GONE]
        count = math.prod(shape)
        shapes = [shape[::-1], [*shape, 1], [1, *shape], [count], [], [0], [0, *shape], [-1, D]]
        shapes += [[s + 1 for s in shape], [s // 2 for s in shape], [10**9, D], [2**62, 2**62]]
        shapes += [[2**32] * 3, [2**64 - 1], [2**64], [2**63, 2], [str(count)], [count + 0.5]]
        shapes += [[True], None, count, GONE]
        for field, claims in (("data_offsets", offsets), ("dtype", dtypes), ("shape", shapes)):
            for claim in claims:
                label = f"{name} {field} {'left out' if claim is GONE else shown(claim)}"
                cases[label] = partial(build, changed(good, name, **{field: claim}), body)
        for extra in (1, Raw("[" * 100 + "]" * 100), Raw("[" * 30_000 + "]" * 30_000)):
            header = changed(good, name, extra=extra)
            cases[f"{name} with a field {shown(extra)}"] = partial(build, header, body)
        twice = Raw(text(good[name])[:-1] + ',"dtype":"U8"}')
        cases[f"{name} dtype twice"] = partial(build, {**good, name: twice}, body)
    every = {**good, **{k: {**good[k], "data_offsets": [0, len(body)]} for k in tensors}}
    cases["every tensor over all the data"] = partial(build, every, body)
    return list(cases.items())  # a claim that is the tensor's own comes once


def layout_cases(good, body, tensors: Tensors, meta, rng: np.random.Generator, edited) -> Cases:
    """Files whose offsets fit the data: tensors missing, extra, renamed, named twice, of
    every dtype, of other shapes and networks, holding NaN or infinities; data reordered,
    with a gap or a tail."""
    put = lambda name, entry: {**tensors, name: entry}  # noqa: E731
    fits = {"the data reversed": dict(reversed(tensors.items()))}
    for name, (dtype, shape, _) in tensors.items():
        count, other = math.prod(shape), "F32" if dtype == "F64" else "F64"
        fits[f"no {name}"] = {k: v for k, v in tensors.items() if k != name}
        for new in ("w1", f"{name} ", f"../{name}", "", "W3", "\0"):
            renamed = {(new if k == name else k): v for k, v in tensors.items()}
            fits[f"{name} renamed {new!r}"] = renamed
        fits[f"{name} as {other}, values kept"] = as_floats(tensors, name, other)
        odd = [(0, math.nan), (count - 1, math.inf), (count // 2, -math.inf), (1, -0.0)]
        for at, value in [*odd, (1, 5e-324), (1, 3.4e38)]:
            fits[f"{name}[{at}] = {value}"] = as_floats(tensors, name, at=at, value=value)
    for name in edited:
        (dtype, shape, raw), count = tensors[name], math.prod(tensors[name][1])
        for claim, bits in BITS.items():
            fits[f"{name} as {claim}"] = put(name, (claim, shape, rng.bytes(count * bits // 8)))
        for claim in (shape[::-1], [count], [*shape, 1], [count // 2, 2], [2**62, 0], [0, 2**62]):
            data = raw if math.prod(claim) else b""
            fits[f"{name} of shape {claim}, its data fitting"] = put(name, (dtype, claim, data))
    dtype = tensors["W1"][0]
    for h, d in ((100, D), (201, D), (H, 3200)):
        shapes = {k: [h, d] if k.endswith("W1") else [h] for k in tensors}
        sized = {k: (dtype, s, bytes(math.prod(s) * BITS[dtype] // 8)) for k, s in shapes.items()}
        fits[f"a network of {h} x {d}"] = sized
    tiny = lambda n, shape: {f"t{i}": ("U8", shape, b"1" * sum(shape)) for i in range(n)}  # noqa: E731
    fits |= {"W1 and W2 swapped": {**put("W1", tensors["W2"]), "W2": tensors["W1"]}}
    fits |= {"an extra tensor": put("extra", ("F64", [3], bytes(24)))}
    fits |= {"an empty extra tensor": put("extra", ("U8", [0], b""))}
    fits |= {"300 tiny tensors": {**tensors, **tiny(300, [1])}, "only them": tiny(300, [1])}
    fits |= {"2,000 empty tensors": {**tensors, **tiny(2000, [0])}, "no tensors": {}}
    cases = [(label, partial(pack, fit, meta)) for label, fit in fits.items()]
    first = Pairs([("__metadata__", {"format": "x"}), *good.items()])
    twice = {
        "W1 twice": Pairs([*good.items(), ("W1", good["W2"])]),
        "__metadata__ twice": Pairs([("__metadata__", meta), *good.items()]),
        "__metadata__ twice, the first wrong": first,
        "a tensor named __metadata__": Pairs([*good.items(), ("__metadata__", good["W2"])]),
        "the header's entries reversed": dict(reversed(good.items())),
    }
    padded = header_of({"": ("U8", [8], bytes(8)), **tensors}, meta)
    moved = {k: v for k, v in padded.items() if k}  # the data 8 bytes in
    return [
        *cases,
        *((label, partial(build, header, body)) for label, header in twice.items()),
        ("8 bytes before the data", partial(build, moved, b"\0" * 8 + body)),
        ("8 bytes after the data", partial(build, good, body, b"\0" * 8)),
    ]


COUNTS = ["-1", "1e400", "9" * 4001, "nan", "", " 7", "7.0", "0x7", "1_000", "\u0667", "9" * 17]
COUNTS += [str(10**15), str(10**15 + 1)]
SETTINGS = {**dict.fromkeys(("updates", "games", "steps"), COUNTS)}
MEANS = ["nan", "NaN", "inf", "-inf", "1e300", "1000.5", "-1e400", "", "None", "1e-400", "none"]
SETTINGS |= dict.fromkeys(("running_mean", "best_running_mean"), MEANS)
SETTINGS |= {"batch_size": ["1e150", "0", "9" * 40, "9" * 41, "9" * 4001, "-1", "1.5", "nan"]}
SETTINGS |= {"learning_rate": ["nan", "inf", "-1", "1e400", "0", "1e-400", "x"]}
SETTINGS |= {"decay_rate": ["1.5", "nan", "-0", "1", "1e999"], "seed": ["-1", "9" * 40, "1e400"]}
SETTINGS |= {"env": ["evil_module:Env", "", "x" * 201, "\n", "ALE/Pong-v5\0", "../../etc/passwd"]}
SETTINGS |= {"format": ["pong-checkpoint/1", "pong-checkpoint/2", "pong-policy/2", "PONG-POLICY/2"]}


def meta_cases(good: dict, body: bytes, meta: dict) -> Cases:
    """The metadata missing, of the wrong types, huge, many, not UTF-8, not JSON, too deep;
    each setting's text out of range or not a number."""
    headers = {"metadata left out": GONE, "metadata empty": {}, "metadata null": None}
    headers |= {"metadata a list": [*meta.values()], "metadata a text": "pong-checkpoint/2"}
    headers |= {"metadata nested": {**meta, "format": meta}}
    for n, size in ((1, 60_000), (1, 70_000), (65 - len(meta), 1), (3_000, 1), (10_000, 1)):
        more = {f"k{i}": "x" * size for i in range(n)}
        headers[f"{n} more entries of {size:,}"] = {**meta, **more}
    headers |= {"a name of 201": {**meta, "k" * 201: "1"}, "\\ud800": {**meta, "env": "\ud800"}}
    headers |= {"format twice, the first wrong": Pairs([("format", "x"), *meta.items()])}
    headers |= {"format twice, the second wrong": Pairs([*meta.items(), ("format", "x")])}
    headers |= {"metadata 30,000 deep": Raw("[" * 30_000 + "]" * 30_000)}
    for key in meta:
        headers[f"no {key}"] = {**meta, key: GONE}
    for key in ("format", "updates", "env"):
        for value in (None, 7, -1.5, 10**30, True, [meta[key]], {"v": meta[key]}, Raw("9" * 5000)):
            headers[f"{key} = {shown(value)}"] = {**meta, key: value}
    for key, values in SETTINGS.items():
        headers |= {f"{key} {shown(value)}": {**meta, key: value} for value in values}
    with_meta = lambda m: {**good, "__metadata__": m}  # noqa: E731
    cases = [(label, partial(build, with_meta(m), body)) for label, m in headers.items()]
    real = text(good).encode()
    texts = {
        f"not UTF-8: {b!r}": real.replace(b"Pong", b)
        for b in (b"\xff", b"\xc0\x80", b"\xed\xa0\x80")
    }
    texts |= {"\\xff outside a text": real.replace(b"{", b"{\xff", 1), "not JSON": b"{not json"}
    texts |= {"a header cut": real[:-20], "a trailing comma": real[:-1] + b",}"}
    texts |= {"spaces": b" " * len(real), "NULs": b"\0" * len(real), "[ 60,000 deep": b"[" * 60_000}
    texts |= {'{"a": 10,000 deep': b'{"a":' * 10_000 + b"1" + b"}" * 10_000}
    texts |= {"NULs after the header": real + b"\0" * 7, "spaces after it": real + b" " * 7}
    texts |= {f"a header {t}": t.encode() for t in ("null", "[]", '"x"', "{}")}
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
    garbage = [("a NUL", b"", b"\0"), ("7 bytes", b"", b"garbage"), ("4 KiB", b"", rng.bytes(4096))]
    garbage += [("the file", b"", data), ("8 NULs", b"\0" * 8, b""), ("PK", b"PK\x03\x04", b"")]
    add = lambda before, after: before + data + after  # noqa: E731
    return cases + [
        (f"{label} {'before' if b else 'after'}", partial(add, b, a)) for label, b, a in garbage
    ]


@pytest.fixture(scope="module")
def checkpoint_bytes(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("real") / FILENAME
    save(path, make_checkpoint())
    return path.read_bytes()


def test_damaged_checkpoints_load_whole_or_fail_in_one_line(checkpoint_bytes, tmp_path) -> None:
    # Every kind of damage runs on the 5 MB policy below; here, 20 MB a case, a fixed sample.
    cases = safetensors_cases(checkpoint_bytes, seed=1, edited=("cache_W1", "cache_W2"))
    picked = np.random.default_rng(1).choice(len(cases), 160, replace=False)
    cases = [cases[i] for i in sorted(picked)]
    fuzz(cases, tmp_path / FILENAME, load, CheckpointError, valid_weights)


def test_damaged_policies_load_whole_or_fail_in_one_line(tmp_path) -> None:
    cases = safetensors_cases(POLICY.read_bytes(), seed=2)
    read = lambda path: load(path, policy=True)  # noqa: E731
    fuzz(cases, tmp_path / "policy.safetensors", read, CheckpointError, valid_weights)


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
        "a field twice in the header": data.replace(b"update,games", b"update,update", 1),
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
    """Everything that reads a run's updates.csv: python -m pong metrics, compare and plot."""
    rows = read_rows(path)
    return rows, summarize(path.parent), figures(path.parent), curve(path.parent)


@pytest.fixture
def run_copy(tmp_path) -> Path:
    """A run directory with the first 60 lines of a committed run's metrics."""
    for name in (UPDATES, GAMES):
        lines = (RUN / name).read_bytes().split(b"\n")[:60]
        (tmp_path / name).write_bytes(b"\n".join(lines) + b"\n")
    return tmp_path


def test_damaged_metrics_read_or_fail_in_one_line(run_copy) -> None:
    data = (run_copy / UPDATES).read_bytes()
    cases = metrics_cases(data, seed=3)
    fuzz(cases, run_copy / UPDATES, read_run, ValueError, lambda result: "")
    cases = metrics_cases((run_copy / GAMES).read_bytes(), seed=4)
    fuzz(cases, run_copy / GAMES, read_rows, ValueError, lambda result: "")


def test_a_resume_drops_rows_of_damaged_metrics_or_fails_in_one_line(run_copy) -> None:
    games = (run_copy / GAMES).read_bytes()

    def resume(path: Path) -> None:
        (path.parent / GAMES).write_bytes(games)
        MetricsLog(path.parent, after=5).close()

    cases = metrics_cases((run_copy / UPDATES).read_bytes(), seed=5)
    fuzz(cases, run_copy / UPDATES, resume, UsageError, lambda result: "")


# --- FIFOs, devices and directories, read in a child process with a deadline and a memory limit

CHILD = """
import resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (2**31, 2**31))  # a reader that reads without end fails
from pong.run.checkpoint import load
from pong.run.errors import UsageError
from pong.run.metrics import MetricsLog, read_rows
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
KINDS = {"FIFO": "a FIFO", "link to /dev/zero": "a symbolic link", "directory": "a directory"}
KINDS["/dev/zero"] = "a character device"  # given itself, not through a link
READERS = {  # each reader, and the kinds of file it is given
    "checkpoint": ("FIFO", "link to /dev/zero", "/dev/zero"),  # a directory: a run directory
    "run": ("FIFO", "link to /dev/zero", "directory"),  # its checkpoint.safetensors
    "read_rows": ("FIFO", "link to /dev/zero", "/dev/zero", "directory"),
    "resume": ("FIFO", "link to /dev/zero", "directory"),  # it writes in the run: not in /dev
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


@pytest.mark.parametrize(("what", "kind"), [(w, k) for w, kinds in READERS.items() for k in kinds])
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
    proc = run_driver(["--resume", str(run), "--updates=1"], env, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"driver.py: error: {run / UPDATES}: not a metrics file (a FIFO, not a regular file)\n"
    )
