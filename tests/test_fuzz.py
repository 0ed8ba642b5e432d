"""Fuzzing the readers of files others make: checkpoints, policy files, metrics CSVs.

Each case starts from a real file (a fresh checkpoint, the shipped policy, committed
metrics) and damages it one way, drawn from fixed seeds so that a failure repeats.
Reading it must give valid weights or rows, or one line of error: never another
exception, never a hang, never an allocation much larger than a real checkpoint.
FIFOs and devices are read in a child process with a time and memory limit, so a
reader that blocks or reads without end fails its test instead of stopping the suite.
"""

from __future__ import annotations

import io
import json
import os
import signal
import struct
import subprocess
import sys
import time
import tracemalloc
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from pong.checkpoint import FILENAME, CheckpointError, load, save
from pong.compare import figures
from pong.errors import UsageError
from pong.metrics import EPISODES, UPDATES, MetricsLog, read_rows, summarize
from pong.model import D, H
from pong.plot import curve
from tests.helpers import run_driver
from tests.test_checkpoint import make_checkpoint

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "results" / "pong-v5" / "policy.npz"
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


# --- building damaged .npz files --------------------------------------------------------------


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {info.filename: z.read(info) for info in z.infolist()}


def rezip(items: list[tuple[str, bytes]], method: int = zipfile.ZIP_STORED) -> bytes:
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a duplicate name is what some cases want
        with zipfile.ZipFile(out, "w", method, compresslevel=1) as z:
            for name, raw in items:
                z.writestr(name, raw)
    return out.getvalue()


def npy_parts(raw: bytes) -> tuple[dict, bytes]:
    """An .npy member's header as a dict, and its data."""
    f = io.BytesIO(raw)
    np.lib.format.read_magic(f)
    shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(f)
    descr = np.lib.format.dtype_to_descr(dtype)
    return {"descr": descr, "fortran_order": fortran_order, "shape": shape}, raw[f.tell() :]


def with_header(raw: bytes, **changes) -> bytes:
    header, data = npy_parts(raw)
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {**header, **changes})
    return out.getvalue() + data


def raw_header(text: bytes, version: bytes = b"\x01\x00", length: int | None = None) -> bytes:
    size = "<H" if version == b"\x01\x00" else "<I"
    return (
        b"\x93NUMPY" + version + struct.pack(size, len(text) if length is None else length) + text
    )


def npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array, allow_pickle=False)
    return out.getvalue()


def directory(data: bytes) -> list[int]:
    """The offsets of the zip's central directory entries."""
    count, _, offset = struct.unpack_from("<HLL", data, len(data) - 12)
    entries, at = [], offset
    for _ in range(count):
        entries.append(at)
        at += 46 + sum(struct.unpack_from("<3H", data, at + 28))
    return entries


def patched(data: bytes, at: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def flipped(data: bytes, at: int, mask: int) -> bytes:
    out = bytearray(data)
    out[at] ^= mask
    return bytes(out)


def bomb_stream(size: int) -> bytes:
    """A raw deflate stream of ``size`` zero bytes, made from one compressed MiB repeated."""
    squeeze = zlib.compressobj(1, zlib.DEFLATED, -15)
    block = squeeze.compress(bytes(2**20)) + squeeze.flush(zlib.Z_FULL_FLUSH)
    return block * (size // 2**20) + b"\x03\x00"  # an empty final block


# --- the .npz cases ----------------------------------------------------------------------------


def npz_cases(data: bytes, kind: str, seed: int) -> Cases:
    """Damaged forms of ``data``, a checkpoint or a policy file (``kind``)."""
    rng = np.random.default_rng(seed)
    original = members(data)
    return [
        *cut_cases(data, rng),
        *flip_cases(data, rng),
        *zip_cases(data, original),
        *header_cases(original, kind),
        *meta_cases(original),
        *member_cases(original),
    ]


def replaced(original: dict[str, bytes], name: str, raw: bytes) -> Callable[[], bytes]:
    return partial(rezip, list({**original, name: raw}.items()))


def cut_cases(data: bytes, rng: np.random.Generator) -> Cases:
    """Truncations: at the start, around each member and directory entry, at the end."""
    entries = directory(data)
    starts = [struct.unpack_from("<L", data, e + 42)[0] for e in entries] + entries
    cuts = {0, 1, 4, 21, 22, 30, len(data) - 1, len(data) - 21, len(data) - 22, len(data) - 23}
    cuts |= {at + k for at in starts for k in (0, 30, 40, 150)}
    cuts |= set(rng.integers(0, len(data), 12).tolist())
    return [(f"cut at {c}", partial(bytes, memoryview(data)[:c])) for c in sorted(cuts)]


def flip_cases(data: bytes, rng: np.random.Generator) -> Cases:
    """Flipped bytes: every byte of the directory's end, others in the directory, in the
    local headers and the start of each member (its .npy header, or the deflate stream
    holding it), and anywhere."""
    entries = directory(data)
    spots = list(range(len(data) - 22, len(data)))
    spots += rng.integers(entries[0], len(data) - 22, 20).tolist()
    spots += [struct.unpack_from("<L", data, e + 42)[0] + k for e in entries for k in (8, 14, 26)]
    spots += [
        struct.unpack_from("<L", data, e + 42)[0] + int(rng.integers(30, 180)) for e in entries
    ]
    spots += rng.integers(0, len(data), 10).tolist()
    masks = rng.integers(1, 256, len(spots)).tolist()
    pairs = zip(spots, masks, strict=True)
    return [(f"byte {at} ^ {m:#x}", partial(flipped, data, at, m)) for at, m in pairs]


def zip_cases(data: bytes, original: dict[str, bytes]) -> Cases:
    """Sizes, methods, flags and offsets edited in the zip's directory."""
    cases, end = [], len(data) - 22
    for name, entry in zip(original, directory(data), strict=True):
        size = struct.unpack_from("<L", data, entry + 24)[0]
        for value in (0, size - 1, size + 1, 2**32 - 1, 4_000_000_128):
            cases.append((f"{name} size {value}", partial(patched, data, entry + 24, "<L", value)))
            cases.append(
                (f"{name} packed {value}", partial(patched, data, entry + 20, "<L", value))
            )
        for method in (1, 12, 14, 99):
            cases.append(
                (f"{name} method {method}", partial(patched, data, entry + 10, "<H", method))
            )
        cases.append((f"{name} encrypted", partial(patched, data, entry + 8, "<H", 1)))
        cases.append((f"{name} at 0", partial(patched, data, entry + 42, "<L", 0)))
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, 0, 1)
    return [
        *cases,
        ("65535 entries", partial(patched, data, end + 10, "<H", 65535)),
        ("directory of 2**31 bytes", partial(patched, data, end + 12, "<L", 2**31)),
        ("directory at 0", partial(patched, data, end + 16, "<L", 0)),
        ("a comment", lambda: patched(data, end + 20, "<H", 5) + b"hello"),
        ("junk after", lambda: data + b"junk"),
        ("junk before", lambda: b"junk" + data),
        ("a zip64 locator", lambda: data[:end] + locator + data[end:]),
    ]


def header_cases(original: dict[str, bytes], kind: str) -> Cases:
    """.npy headers of W1 and meta claiming other shapes and dtypes, or no header at all."""
    float_type, other_type = ("<f4", "<f8") if kind == "policy" else ("<f8", "<f4")
    w1, meta = original["W1.npy"], original["meta.npy"]
    claims = [
        {"shape": (10**9, D)},
        {"shape": (4_000_000_000 // (4 * D), D)},
        {"shape": (2**62, 2**62)},
        {"shape": (-1, D)},
        {"shape": ()},
        {"shape": (D, H)},
        {"shape": (H, D, 1)},
        {"fortran_order": not npy_parts(w1)[0]["fortran_order"]},
        {"descr": other_type},
        {"descr": ">" + float_type[1:]},
        {"descr": "<i8"},
        {"descr": "|O"},
        {"descr": "<U10"},
        {"descr": [("a", float_type)]},
        {"descr": "|V8"},
    ]
    cases = []
    for claim in claims:
        cases.append((f"W1 header {claim}", replaced(original, "W1.npy", with_header(w1, **claim))))
        meta_npy = with_header(meta, **claim)
        cases.append((f"meta header {claim}", replaced(original, "meta.npy", meta_npy)))
    texts = [
        b"{}",
        b"[1, 2]",
        b"{'descr': 'x', 'fortran_order': False, 'shape': (200, 6400), }",
        b"{'descr': '<f8', 'fortran_order': False, 'shape': (200, 6400.0), }",
        b"(" * 150,
        b"1" * 4000,
        b"\xff\xfe" * 40,
        b"__import__('os').system('echo pwned')",
    ]
    body = npy_parts(w1)[1]
    for text in texts:
        raw = raw_header(text + b"\n") + body
        cases.append((f"W1 header text {text[:30]!r}", replaced(original, "W1.npy", raw)))
    for version, length in ((2, 2**31), (2, 10**6), (3, 100), (9, 100), (1, 65535)):
        raw = raw_header(b"{}", bytes([version, 0]), length) + b" " * 200
        cases.append((f"W1 header v{version} of {length}", replaced(original, "W1.npy", raw)))
    cases.append(("W1 not .npy", replaced(original, "W1.npy", b"PK\x03\x04 not an array")))
    return cases


def meta_cases(original: dict[str, bytes]) -> Cases:
    """The metadata huge, deeply nested, of the wrong types, not JSON, not text."""
    good = json.loads(str(np.load(io.BytesIO(original["meta.npy"]), allow_pickle=False)))
    texts = [
        json.dumps({**good, "pad": "x" * 60_000}),
        json.dumps({**good, "pad": "x" * 70_000}),
        "[" * 100_000,
        "[" * 500 + "]" * 500,
        json.dumps({**good, "pad": json.loads("[" * 900 + "]" * 900)}),
        "{not json",
        "",
        "null",
        '"pong-policy/1"',
        json.dumps(good).replace("1", "1" * 5000, 1),
        json.dumps(good).replace("-", "\0", 1),
        json.dumps(good).replace('"env": "', '"env": "\\n', 1),
    ]
    for key in (*good, "settings.batch_size", "settings.env", "settings.decay_rate"):
        for value in (None, True, -1, 1.5, "x", [], {}, 10**30, 1e300, "y" * 50_000, [[[[]]]]):
            edited = json.loads(json.dumps(good))
            where, _, field = key.rpartition(".")
            (edited[where] if where else edited)[field] = value
            texts.append(json.dumps(edited))
    deep = json.dumps({**good, "settings": {**good["settings"], "env": "@"}})
    texts.append(deep.replace('"@"', "[" * 900 + "]" * 900))
    cases = [(f"meta {t[:40]!r}", replaced(original, "meta.npy", npy(np.array(t)))) for t in texts]
    for array in (np.array(json.dumps(good).encode()), np.array([json.dumps(good)]), np.zeros(3)):
        raw = npy(array)
        cases.append((f"meta as {array.dtype} {array.shape}", replaced(original, "meta.npy", raw)))
    beyond = raw_header(b"{'descr': '<U4', 'fortran_order': False, 'shape': (), }\n") + b"\xff" * 16
    return [*cases, ("meta beyond Unicode", replaced(original, "meta.npy", beyond))]


def member_cases(original: dict[str, bytes]) -> Cases:
    """Members swapped, duplicated, renamed, missing and added."""
    w1 = original["W1.npy"]
    cases = [
        ("W1 and W2 swapped", replaced({**original, "W2.npy": w1}, "W1.npy", original["W2.npy"])),
        ("W1 twice", partial(rezip, [*original.items(), ("W1.npy", w1)])),
        ("meta twice", partial(rezip, [*original.items(), ("meta.npy", npy(np.array("{}")))])),
        ("an extra array", replaced(original, "extra.npy", npy(np.zeros(3)))),
        ("a pickle", replaced(original, "x.pkl", b"cos\nsystem\n(S'echo pwned'\ntR.")),
        (
            "20 members",
            partial(rezip, [*original.items(), *((f"{i}.npy", w1[:200]) for i in range(17))]),
        ),
        ("an .npy array", lambda: npy(np.zeros(3))),
        ("empty", lambda: b""),
    ]
    if "cache_W1.npy" in original:
        cache = original["cache_W1.npy"]
        swapped = replaced({**original, "cache_W1.npy": w1}, "W1.npy", cache)
        cases.append(("W1 and cache_W1 swapped", swapped))
    for name in ("W3.npy", "W1", "W1.npy/", "../W1.npy", "w1.npy", "W1.NPY", "W1.npy\n"):
        renamed = [(name if n == "W1.npy" else n, raw) for n, raw in original.items()]
        cases.append((f"W1 renamed {name!r}", partial(rezip, renamed)))
    for gone in original:
        rest = [(n, raw) for n, raw in original.items() if n != gone]
        cases.append((f"no {gone}", partial(rezip, rest)))
    return cases


def bomb_case(data: bytes) -> bytes:
    """A policy whose W1 inflates to 256 MiB and claims 4 GB (156,250 x 6,400 float32)."""
    original = members(data)
    claimed = (4_000_000_000 // (4 * D), D)
    header = with_header(original["W1.npy"], shape=claimed)[:128]
    squeeze = zlib.compressobj(1, zlib.DEFLATED, -15)
    stream = squeeze.compress(header) + squeeze.flush(zlib.Z_FULL_FLUSH) + bomb_stream(2**28)
    placeholder = b"\0" * len(stream)  # stored, so the stream can be put in its place
    data = rezip(
        [
            ("W1.npy", placeholder),
            ("W2.npy", original["W2.npy"]),
            ("meta.npy", original["meta.npy"]),
        ]
    )
    entry = directory(data)[0]
    start = 30 + len("W1.npy")
    data = data[:start] + stream + data[start + len(stream) :]
    data = patched(data, 8, "<H", zipfile.ZIP_DEFLATED)  # local header: deflated
    data = patched(data, 22, "<L", len(header) + 4_000_000_000)
    data = patched(data, entry + 10, "<H", zipfile.ZIP_DEFLATED)
    return patched(data, entry + 24, "<L", len(header) + 4_000_000_000)


@pytest.fixture(scope="module")
def checkpoint_bytes(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("real") / FILENAME
    save(path, make_checkpoint())
    return path.read_bytes()


def test_damaged_checkpoints_load_whole_or_fail_in_one_line(checkpoint_bytes, tmp_path) -> None:
    cases = npz_cases(checkpoint_bytes, "checkpoint", seed=1)
    picked = np.random.default_rng(1).choice(len(cases), 150, replace=False)
    cases = [cases[i] for i in sorted(picked)]  # 20 MB a case: a fixed third of them
    fuzz(cases, tmp_path / FILENAME, load, CheckpointError, valid_weights)


def test_damaged_policies_load_whole_or_fail_in_one_line(tmp_path) -> None:
    data = POLICY.read_bytes()
    cases = [*npz_cases(data, "policy", seed=2), ("a 4 GB bomb", partial(bomb_case, data))]
    read = lambda path: load(path, policy=True)  # noqa: E731
    fuzz(cases, tmp_path / "policy.npz", read, CheckpointError, valid_weights)


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


# --- FIFOs and devices, read in a child process with a deadline and a memory limit -------------

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
    elif what == "read_rows":
        read_rows(path)
    else:
        MetricsLog(path.parent, after=1).close()
except (UsageError, ValueError) as e:
    print(e)
"""


def special(path: Path, kind: str) -> Path:
    if kind == "FIFO":
        os.mkfifo(path)
    elif kind == "/dev/zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    return path


@pytest.mark.parametrize(
    ("what", "kind"),
    [
        ("checkpoint", "FIFO"),
        ("checkpoint", "/dev/zero"),  # a directory is a run directory: tested elsewhere
        *(
            (what, kind)
            for what in ("read_rows", "resume")
            for kind in ("FIFO", "/dev/zero", "directory")
        ),
    ],
)
def test_a_fifo_device_or_directory_is_refused_at_once(tmp_path, what, kind) -> None:
    path = special(tmp_path / (FILENAME if what == "checkpoint" else UPDATES), kind)
    child = [sys.executable, "-c", CHILD, what, str(path)]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run(child, capture_output=True, text=True, timeout=30, cwd=ROOT, env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]
    expected = f"({'a character device' if kind == '/dev/zero' else 'a ' + kind}, not a regular"
    assert proc.stdout.count("\n") == 1 and str(path) in proc.stdout
    assert expected.lower() in proc.stdout.lower(), proc.stdout


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
