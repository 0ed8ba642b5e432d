"""pong.run.checkpoint: safetensors checkpoints and policy files, written whole, read warily."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
from safetensors import safe_open

from pong.core.model import D, H, Model, policy_forward, zeros_like_weights
from pong.run import checkpoint as ckpt
from pong.run.checkpoint import FILENAME, Checkpoint, CheckpointError, load, save
from pong.run.config import Config
from pong.run.errors import command

ROOT = Path(__file__).resolve().parents[2]


def make_checkpoint(seed: int = 0) -> Checkpoint:
    model = Model(seed=seed)
    cache = zeros_like_weights(model.weights)
    cache["W1"] += 0.5
    cache["W2"][3] = 2.0
    return Checkpoint(
        weights=model.weights,
        rmsprop_cache=cache,
        updates=7,
        games=70,
        steps=71234,
        running_mean=-20.4321,
        best_running_mean=-20.1,
        config=Config(seed=seed),
    )


def test_round_trip_is_exact(tmp_path) -> None:
    original = make_checkpoint()
    save(tmp_path / FILENAME, original)
    loaded = load(tmp_path)  # a run directory works too
    for k in ("W1", "W2"):
        np.testing.assert_array_equal(loaded.weights[k], original.weights[k])
        np.testing.assert_array_equal(loaded.rmsprop_cache[k], original.rmsprop_cache[k])
    assert loaded.weights["W1"].flags.f_contiguous  # the layout the fast path reads
    for field in (
        "updates",
        "games",
        "steps",
        "running_mean",
        "best_running_mean",
        "config",
    ):
        assert getattr(loaded, field) == getattr(original, field), field


def test_a_running_mean_reads_back_to_the_last_bit(tmp_path) -> None:
    """A resumed run must go on with the very float it stopped with."""
    original = make_checkpoint()
    original.running_mean = -20.123456789012345 + 1e-14
    original.best_running_mean = None
    save(tmp_path / FILENAME, original)
    loaded = load(tmp_path)
    assert loaded.running_mean.hex() == original.running_mean.hex()
    assert loaded.best_running_mean is None


def test_safetensors_reads_the_same_numbers_in_a_fresh_python(tmp_path) -> None:
    """Anyone's safetensors reader sees W1 as (H, D), row by row, whatever our memory order."""
    original = make_checkpoint(seed=4)
    assert original.weights["W1"].flags.f_contiguous  # column-major in memory
    save(tmp_path / FILENAME, original)
    ckpt.save_policy(tmp_path / "policy.safetensors", original)
    tensors = safetensors.numpy.load_file(tmp_path / FILENAME)
    assert sorted(tensors) == ["W1", "W2", "cache_W1", "cache_W2"]
    for k in ("W1", "W2"):
        np.testing.assert_array_equal(tensors[k], original.weights[k])
        np.testing.assert_array_equal(tensors[f"cache_{k}"], original.rmsprop_cache[k])
    policy = safetensors.numpy.load_file(tmp_path / "policy.safetensors")
    assert {k: (v.dtype, v.shape) for k, v in policy.items()} == {
        "W1": (np.float32, (H, D)),
        "W2": (np.float32, (H,)),
    }
    np.testing.assert_array_equal(policy["W1"], original.weights["W1"].astype(np.float32))
    with safe_open(tmp_path / "policy.safetensors", framework="numpy") as f:
        meta = f.metadata()
    assert meta["format"] == "pong-policy/2" and meta["env"] == "ALE/Pong-v5"
    assert (meta["seed"], meta["updates"], meta["games"]) == ("4", "7", "70")


def test_a_failed_save_leaves_the_old_checkpoint_intact(tmp_path, monkeypatch) -> None:
    path = tmp_path / FILENAME
    save(path, make_checkpoint(seed=1))
    good = path.read_bytes()

    def half_written(checkpoint, policy=False):
        raise OSError("No space left on device")

    monkeypatch.setattr(ckpt, "_encoded", half_written)
    with pytest.raises(OSError, match="No space"):
        save(path, make_checkpoint(seed=2))
    assert path.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILENAME]  # no temporary left


def header_of(data: bytes) -> dict:
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + length])


def with_header(data: bytes, header: dict) -> bytes:
    """``data`` (a safetensors file) with its JSON header replaced, the tensors' bytes kept."""
    (length,) = struct.unpack("<Q", data[:8])
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data[8 + length :]


def _damaged(tmp_path, kind: str):
    path = tmp_path / FILENAME
    if kind == "missing":
        return path
    if kind == "empty directory":
        return tmp_path
    if kind == "not safetensors":
        path.write_text("hello, I am not a checkpoint\n")
        return path
    save(path, make_checkpoint())
    data = path.read_bytes()
    header = header_of(data)
    if kind == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "huge header length":
        path.write_bytes(struct.pack("<Q", 2**40) + data[8:])
    elif kind == "header past the end":
        (length,) = struct.unpack("<Q", data[:8])
        path.write_bytes(data[: 8 + length - 1])
    elif kind == "offsets overlap":
        header["W2"]["data_offsets"] = header["W1"]["data_offsets"]
        path.write_bytes(with_header(data, header))
    elif kind == "foreign tensors":
        path.write_bytes(safetensors.numpy.save({"weights": np.zeros(3)}, {"format": "x"}))
    elif kind == "other network shape":
        small = {
            k: np.zeros((100, D)) if k.endswith("W1") else np.zeros(100)
            for k in ("W1", "W2", "cache_W1", "cache_W2")
        }
        path.write_bytes(safetensors.numpy.save(small, header["__metadata__"]))
    elif kind == "nan weights":
        c = make_checkpoint()
        c.weights["W2"][0] = np.nan
        save(path, c)
    elif kind == "int weights":
        tensors = safetensors.numpy.load(data)
        tensors["W2"] = np.zeros(H, dtype=np.int64)
        path.write_bytes(safetensors.numpy.save(tensors, header["__metadata__"]))
    elif kind == "float32 checkpoint":
        tensors = safetensors.numpy.load(data)
        tensors["W1"] = tensors["W1"].astype(np.float32)
        path.write_bytes(safetensors.numpy.save(tensors, header["__metadata__"]))
    elif kind == "extra tensor":
        tensors = {**safetensors.numpy.load(data), "extra": np.zeros(3)}
        path.write_bytes(safetensors.numpy.save(tensors, header["__metadata__"]))
    elif kind == "nested metadata":
        header["__metadata__"]["env"] = {"id": "ALE/Pong-v5"}
        path.write_bytes(with_header(data, header))
    elif kind == "huge metadata":
        header["__metadata__"]["pad"] = "x" * 70_000
        path.write_bytes(with_header(data, header))
    elif kind == "long metadata value":
        header["__metadata__"]["note"] = "x" * 300
        path.write_bytes(with_header(data, header))
    elif kind == "no metadata":
        del header["__metadata__"]
        path.write_bytes(with_header(data, header))
    elif kind == "old npz":
        with open(path, "wb") as f:
            np.savez(f, W1=np.zeros((H, D)), meta=np.array("{}"))
    elif kind == "oversized":
        with open(path, "r+b") as f:
            f.truncate(33 * 2**20)  # sparse: no disk used
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("missing", "no such checkpoint file"),
        ("empty directory", "no such checkpoint file"),
        (
            "not safetensors",
            r"not a checkpoint or policy \(not a safetensors file: its first 8 bytes give a header"
            r" longer than the file\)",
        ),
        ("truncated", r"not a readable safetensors file"),
        ("empty", r"not a checkpoint or policy \(not a safetensors file: 0 bytes long\)"),
        ("huge header length", r"first 8 bytes give a header longer than the file"),
        ("header past the end", r"damaged \(its header claims [\d,]+ bytes; the file has"),
        ("offsets overlap", "not a readable safetensors file"),
        ("foreign tensors", r"not a pong checkpoint \(format 'x'\)"),
        ("other network shape", r"W1 has shape \(100, 6400\), this network needs \(200, 6400\)"),
        ("nan weights", "W2 holds NaN or infinite values"),
        ("int weights", "W2 holds int64 values, not float64"),
        ("float32 checkpoint", "W1 holds float32 values, not float64"),
        ("extra tensor", r"not a pong checkpoint \('extra' in it too\)"),
        ("nested metadata", "not a readable safetensors file"),
        ("huge metadata", r"a header of 70,\d+ bytes, more than 65,536"),
        ("long metadata value", r"metadata 'note': expected a text of at most 200 characters"),
        ("no metadata", r"not a pong checkpoint \(its header has no metadata\)"),
        ("old npz", r"not a safetensors file: its first 8 bytes give a header longer than the"),
        ("oversized", r"34,603,008 bytes, more than the 33,554,432 \(32 MiB\) such a file can"),
    ],
)
def test_bad_checkpoints_raise_one_line_naming_the_file(tmp_path, kind, message) -> None:
    path = _damaged(tmp_path, kind)
    with pytest.raises(CheckpointError, match=message) as info:
        load(path)
    text = str(info.value)
    assert str(tmp_path) in text and "\n" not in text


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"batch_size": None}, "no 'batch_size' in it"),
        ({"batch_size": "2.0"}, "batch_size: expected a positive integer, got '2.0'"),
        ({"batch_size": "0"}, "batch_size: expected a positive integer, got '0'"),
        ({"batch_size": "1e3"}, "batch_size: expected a positive integer, got '1e3'"),  # as typed
        ({"batch_size": "1e150"}, "batch_size: expected a positive integer, got '1e150'"),
        ({"batch_size": "1" + "0" * 150}, "batch_size: expected at most 100,000, got '10000"),
        ({"batch_size": "100001"}, "batch_size: expected at most 100,000, got '100001'"),
        ({"decay_rate": "1.5"}, "decay_rate: expected a number below 1"),
        ({"seed": "-1"}, "seed: expected an integer from 0 to 2**128 - 1, got '-1'"),
        ({"seed": "none"}, "seed: expected an integer from 0 to 2**128 - 1, got 'none'"),
        ({"seed": str(2**128)}, "seed: expected an integer from 0 to 2**128 - 1"),
        ({"updates": "many"}, "updates: expected an integer from 0 to 1e+15, got 'many'"),
        ({"updates": "1" + "0" * 16}, "updates: expected an integer from 0 to 1e+15"),
        ({"updates": "1" + "0" * 4000}, "metadata 'updates': expected a text of at most 200"),
        ({"updates": "-5"}, "updates: expected an integer from 0 to 1e+15, got '-5'"),
        ({"updates": "1.7"}, "updates: expected an integer from 0 to 1e+15, got '1.7'"),
        ({"games": "1e3"}, "games: expected an integer from 0 to 1e+15, got '1e3'"),
        ({"running_mean": "nan"}, "running_mean: expected a number from -1000 to 1000"),
        ({"best_running_mean": "1e400"}, "best_running_mean: expected a number from -1000"),
        ({"best_running_mean": "1e300"}, "best_running_mean: expected a number from -1000"),
        ({"format": "pong-checkpoint/9"}, "not a pong checkpoint (format 'pong-checkpoint/9')"),
    ],
)
def test_hand_edited_metadata_is_refused_naming_the_entry(tmp_path, edit, message) -> None:
    path = tmp_path / FILENAME
    save(path, make_checkpoint())
    data = path.read_bytes()
    header = header_of(data)
    for key, value in edit.items():
        if value is None:
            del header["__metadata__"][key]
        else:
            header["__metadata__"][key] = value
    path.write_bytes(with_header(data, header))
    with pytest.raises(CheckpointError, match=re.escape(message)) as info:
        load(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert len(str(info.value)) < 400


def test_a_link_or_fifo_is_refused_without_following_or_waiting(tmp_path) -> None:
    save(tmp_path / "real.safetensors", make_checkpoint())
    (tmp_path / "link.safetensors").symlink_to(tmp_path / "real.safetensors")
    import os

    os.mkfifo(tmp_path / "fifo.safetensors")
    for name, what in (("link", "a symbolic link"), ("fifo", "a FIFO")):
        with pytest.raises(CheckpointError, match=f"{what}, not a regular file"):
            load(tmp_path / f"{name}.safetensors", policy=True)


def test_policy_file_is_small_float32_weights_that_play_like_the_originals(tmp_path) -> None:
    original = make_checkpoint(seed=3)
    size = ckpt.save_policy(tmp_path / "policy.safetensors", original)
    assert size == (tmp_path / "policy.safetensors").stat().st_size < 5.2e6  # a checkpoint: 20
    policy = load(tmp_path / "policy.safetensors", policy=True)
    assert policy.rmsprop_cache is None
    assert (policy.updates, policy.games, policy.config) == (7, 70, original.config)
    for k in ("W1", "W2"):
        assert policy.weights[k].dtype == np.float64
        rounded = original.weights[k].astype(np.float32).astype(np.float64)
        np.testing.assert_array_equal(policy.weights[k], rounded)
        np.testing.assert_allclose(policy.weights[k], original.weights[k], rtol=6e-8, atol=0)
    assert policy.weights["W1"].flags.f_contiguous

    # The action probabilities move by about float32's precision, no more.
    rng = np.random.default_rng(0)
    full, small = Model.from_weights(original.weights), Model.from_weights(policy.weights)
    for _ in range(20):
        x = np.zeros(D)
        x[rng.choice(D, 40, replace=False)] = rng.choice([-1.0, 1.0], 40)
        assert policy_forward(small, x)[0] == pytest.approx(policy_forward(full, x)[0], rel=1e-6)


def test_a_checkpoint_written_before_the_glossary_reads_its_old_names(tmp_path) -> None:
    """``iteration``, ``episodes``, ``running_reward`` and ``best_running_reward``, as earlier
    versions wrote them, read as ``updates``, ``games`` and the running means."""
    path, original = tmp_path / FILENAME, make_checkpoint()
    save(path, original)
    data = path.read_bytes()
    header = header_of(data)
    meta, old = header["__metadata__"], {new: old for old, new in ckpt.OLD_NAMES.items()}
    header["__metadata__"] = {old.get(k, k): v for k, v in meta.items()}
    assert set(ckpt.OLD_NAMES) <= set(header["__metadata__"])  # the test can fail
    path.write_bytes(with_header(data, header))
    loaded = load(path)
    for field in ("updates", "games", "running_mean", "best_running_mean"):
        assert getattr(loaded, field) == getattr(original, field), field


def test_a_policy_file_cannot_be_resumed_and_says_what_can(tmp_path) -> None:
    ckpt.save_policy(tmp_path / "policy.safetensors", make_checkpoint())
    with pytest.raises(CheckpointError, match="no RMSProp cache to resume.*--start-from"):
        load(tmp_path / "policy.safetensors")


def test_a_shared_agent_s_directory_stands_for_its_policy_file_where_weights_will_do(
    tmp_path,
) -> None:
    """--evaluate results/fast-agent had said there is no checkpoint.safetensors; a run
    directory's checkpoint still comes first, and --resume still needs one."""
    ckpt.save_policy(tmp_path / "policy.safetensors", make_checkpoint(1))
    assert load(tmp_path, policy=True).config.seed == 1
    with pytest.raises(CheckpointError, match=f"{FILENAME}: no such checkpoint file") as e:
        load(tmp_path)
    again = command("--start-from", tmp_path)
    assert str(e.value).endswith(f"(it holds a policy file; to train it on: {again})")
    save(tmp_path / FILENAME, make_checkpoint(2))
    assert load(tmp_path, policy=True).config.seed == 2  # the run's own checkpoint


def test_a_folder_of_runs_is_named_as_one(tmp_path) -> None:
    """--resume runs (the parent folder) said only that it holds no checkpoint (a newcomer's
    find): it names a run in it, as a sweep's directory names its trials."""
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "updates.csv").write_text("update\n")
    with pytest.raises(CheckpointError) as e:
        load(tmp_path)
    assert str(e.value) == (
        f"{tmp_path / FILENAME}: no such checkpoint file (a folder of runs: name one, such as"
        f" {tmp_path / 'b'})"
    )


def test_the_shipped_policy_loads_as_safetensors_reads_it() -> None:
    path = ROOT / "results" / "pong-v5" / "policy.safetensors"
    loaded = load(path, policy=True)
    tensors = safetensors.numpy.load_file(path)
    for k in ("W1", "W2"):
        np.testing.assert_array_equal(loaded.weights[k], tensors[k].astype(np.float64))
    assert (loaded.updates, loaded.games, loaded.config.seed) == (2000, 20000, 2016)
    assert loaded.config.env == "ALE/Pong-v5"
    # In the very form this version writes: one state, one file.
    assert ckpt.encode(loaded, policy=True) == path.read_bytes()


def test_one_state_is_one_file_in_any_process() -> None:
    """safetensors writes its metadata in a hash map's order, which changes per process."""
    import subprocess
    import sys

    code = (
        "import hashlib, sys; from tests.run.test_checkpoint import make_checkpoint;"
        " from pong.run.checkpoint import encode;"
        " sys.stdout.write(hashlib.sha256(encode(make_checkpoint())).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    }
    assert len(digests) == 1


def test_a_negative_rmsprop_cache_is_refused_on_load(tmp_path) -> None:
    """A cache is a running mean of squares; RMSProp takes its square root."""
    bad = make_checkpoint()
    bad.rmsprop_cache["W2"][5] = -1.0
    save(tmp_path / FILENAME, bad)
    with pytest.raises(CheckpointError, match="cache_W2 holds negative values"):
        load(tmp_path)


def test_a_link_to_a_run_directory_is_followed_to_its_checkpoint(tmp_path) -> None:
    """A link the user made to a run (runs/latest, say) is theirs; below it, none is."""
    (tmp_path / "run").mkdir()
    save(tmp_path / "run" / FILENAME, make_checkpoint())
    (tmp_path / "latest").symlink_to(tmp_path / "run")
    assert load(tmp_path / "latest").updates == 7


@pytest.mark.parametrize("value", [1e308, -3.5e38])
def test_a_weight_no_policy_file_can_hold_is_refused_as_a_policy(tmp_path, value) -> None:
    """Finite as float64, infinite as float32: an export would write a policy every reader
    refuses, after NumPy's overflow warning. A resume takes it: its run made it (a sweep's
    trial at a huge learning rate was refused its own checkpoint)."""
    bad = make_checkpoint()
    bad.weights["W1"][3, 5] = value
    save(tmp_path / FILENAME, bad)
    with pytest.raises(CheckpointError, match=r"W1 holds values beyond 3\.4e\+38"):
        load(tmp_path, policy=True)
    assert load(tmp_path).weights["W1"][3, 5] == value
    bad.weights["W1"][3, 5] = float(np.finfo(np.float32).max)  # the largest it can hold
    save(tmp_path / FILENAME, bad)
    assert load(tmp_path, policy=True).weights["W1"][3, 5] == np.finfo(np.float32).max
