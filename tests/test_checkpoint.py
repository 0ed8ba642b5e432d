from __future__ import annotations

import io
import json
import re
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

from pong import checkpoint as ckpt
from pong.checkpoint import FILENAME, Checkpoint, CheckpointError, load, save
from pong.config import Config
from pong.model import D, H, Model, zeros_like_weights


def make_checkpoint(seed: int = 0) -> Checkpoint:
    model = Model(seed=seed)
    cache = zeros_like_weights(model.weights)
    cache["W1"] += 0.5
    cache["W2"][3] = 2.0
    return Checkpoint(
        weights=model.weights,
        rmsprop_cache=cache,
        iteration=7,
        episodes=70,
        steps=71234,
        running_reward=-20.4321,
        best_running_reward=-20.1,
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
        "iteration",
        "episodes",
        "steps",
        "running_reward",
        "best_running_reward",
        "config",
    ):
        assert getattr(loaded, field) == getattr(original, field), field


def test_file_loads_without_pickle(tmp_path) -> None:
    save(tmp_path / FILENAME, make_checkpoint())
    with np.load(tmp_path / FILENAME, allow_pickle=False) as data:
        assert json.loads(str(data["meta"]))["format"] == "pong-checkpoint/1"


def test_a_failed_save_leaves_the_old_checkpoint_intact(tmp_path, monkeypatch) -> None:
    path = tmp_path / FILENAME
    save(path, make_checkpoint(seed=1))
    good = path.read_bytes()

    def half_written(f, **arrays):
        f.write(b"PK\x03\x04 half a file")
        raise OSError("No space left on device")

    monkeypatch.setattr(ckpt.np, "savez", half_written)
    with pytest.raises(OSError, match="No space"):
        save(path, make_checkpoint(seed=2))
    assert path.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILENAME]  # no temporary left


def _write_npz(path, **arrays) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _damaged(tmp_path, kind: str):
    path = tmp_path / FILENAME
    if kind == "missing":
        return path
    if kind == "empty directory":
        return tmp_path
    if kind == "not a zip":
        path.write_text("hello, I am not a checkpoint\n")
        return path
    save(path, make_checkpoint())
    data = path.read_bytes()
    if kind == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "corrupt":
        with zipfile.ZipFile(path) as z:
            member = z.getinfo("W2.npy")
        corrupted = bytearray(data)
        start = member.header_offset + 30 + len(member.filename) + 200
        corrupted[start : start + 64] = b"\xff" * 64
        path.write_bytes(bytes(corrupted))
    elif kind == "foreign npz":
        _write_npz(path, weights=np.zeros(3))
    elif kind == "other network shape":
        small = {
            k: np.zeros((100, D)) if k.endswith("W1") else np.zeros(100)
            for k in ("W1", "W2", "cache_W1", "cache_W2")
        }
        _write_npz(path, **small, meta=np.array(json.dumps({"format": "pong-checkpoint/1"})))
    elif kind == "nan weights":
        c = make_checkpoint()
        c.weights["W2"][0] = np.nan
        save(path, c)
    elif kind == "pickled object":
        _write_npz(
            path,
            W1=np.array([{"x": 1}], dtype=object),
            W2=np.zeros(H),
            cache_W1=np.zeros((H, D)),
            cache_W2=np.zeros(H),
            meta=np.array(json.dumps({"format": "pong-checkpoint/1"})),
        )
    elif kind == "bad metadata":
        c = make_checkpoint()
        _write_npz(
            path,
            W1=c.weights["W1"],
            W2=c.weights["W2"],
            cache_W1=c.rmsprop_cache["W1"],
            cache_W2=c.rmsprop_cache["W2"],
            meta=np.array("{not json"),
        )
    elif kind == "npy array":
        with open(path, "wb") as f:
            np.save(f, np.zeros(3))
    elif kind == "text weights":
        _write_npz(path, **{**_arrays(path), "W2": np.full(H, "abc")})
    elif kind == "oversized":
        with open(path, "r+b") as f:
            f.truncate(65 * 2**20)  # sparse: no disk used
    elif kind in ("huge metadata", "deep metadata"):
        arrays = _arrays(path)
        meta = json.loads(str(arrays.pop("meta")))
        text = "[" * 60_000  # deep
        if kind == "huge metadata":
            text = json.dumps({**meta, "pad": "x" * 70_000})
        _write_npz(path, **arrays, meta=np.array(text))
    elif kind == "float32 checkpoint":
        arrays = _arrays(path)
        _write_npz(path, **{**arrays, "W1": arrays["W1"].astype(np.float32)})
    elif kind == "extra member":
        _write_npz(path, **_arrays(path), extra=np.zeros(3))
    elif kind in ("huge shape", "member twice"):
        with zipfile.ZipFile(path) as z:
            members = [(name, z.read(name)) for name in z.namelist()]
        if kind == "huge shape":  # a header claiming 51 GB before 64 bytes of data
            header = io.BytesIO()
            claim = {"descr": "<f8", "fortran_order": True, "shape": (10**9, D)}
            np.lib.format.write_array_header_1_0(header, claim)
            members[0] = ("W1.npy", header.getvalue() + bytes(64))
        else:
            members.append(members[0])
        with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as z:
            warnings.simplefilter("ignore")  # zipfile warns of the duplicate name
            for name, raw in members:
                z.writestr(name, raw)
    return path


def _arrays(path) -> dict[str, np.ndarray]:
    """The arrays of a real checkpoint saved at ``path``, read by NumPy."""
    save(path, make_checkpoint())
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("missing", "no such checkpoint file"),
        ("empty directory", "no such checkpoint file"),
        ("not a zip", "unreadable or damaged checkpoint"),
        ("truncated", "unreadable or damaged checkpoint"),
        ("corrupt", "unreadable or damaged checkpoint"),
        ("foreign npz", "not a pong checkpoint"),
        ("other network shape", r"W1 has shape \(100, 6400\), this network needs \(200, 6400\)"),
        ("nan weights", "W2 holds NaN or infinite values"),
        ("pickled object", "unreadable or damaged checkpoint"),
        ("bad metadata", "unreadable or damaged checkpoint"),
        ("npy array", r"not a pong checkpoint \(a single array\)"),
        ("text weights", "W2 holds <U3 values, not numbers"),
        (
            "oversized",
            r"68,157,440 bytes, more than the 67,108,864 \(64 MiB\) such a file can have",
        ),
        ("huge metadata", r"\(meta: 70,\d+ characters, more than 65,536\)"),
        ("deep metadata", r"damaged checkpoint \(meta: maximum recursion depth exceeded"),
        ("float32 checkpoint", "W1 holds <f4 values, not <f8"),
        ("extra member", r"not a pong checkpoint \('extra' in it too\)"),
        ("huge shape", r"W1 has shape \(1000000000, 6400\), this network needs \(200, 6400\)"),
        ("member twice", r"damaged checkpoint \(member 'W1.npy' is twice\)"),
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
        ({"settings": {}}, "batch_size: missing"),
        ({"settings": {"batch_size": "2"}}, "batch_size: expected int, got '2'"),
        ({"settings": {"batch_size": 0}}, "batch_size: expected a positive integer, got '0'"),
        ({"settings": {"batch_size": 2.5}}, "batch_size: expected a positive integer"),
        ({"settings": {"decay_rate": 1.5}}, "decay_rate: expected a number below 1"),
        ({"seed": -1}, "seed: expected a non-negative integer, got '-1'"),
        ({"seed": None}, "seed: expected a non-negative integer, got 'None'"),
        ({"settings": {"env": 5}}, "env: expected str, got 5"),
        ({"settings": [1]}, "'list' object is not a mapping"),
        ({"iteration": "many"}, "iteration: expected a non-negative integer, got 'many'"),
        ({"iteration": -5}, "iteration: expected a non-negative integer, got -5"),
        ({"iteration": 1.7}, "iteration: expected a non-negative integer, got 1.7"),
        ({"iteration": True}, "iteration: expected a non-negative integer, got True"),
        ({"episodes": -1}, "episodes: expected a non-negative integer, got -1"),
        ({"running_reward": "nan"}, "running_reward: expected a finite number or null"),
        ({"best_running_reward": 1e400}, "best_running_reward: expected a finite number"),
    ],
)
def test_hand_edited_settings_are_refused_naming_the_setting(tmp_path, edit, message) -> None:
    path = tmp_path / FILENAME
    save(path, make_checkpoint())
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(str(arrays.pop("meta")))
    for key, value in edit.items():
        if isinstance(value, dict) and value:
            meta[key] = {**meta[key], **value}
        else:
            meta[key] = value
    _write_npz(path, **arrays, meta=np.array(json.dumps(meta)))
    with pytest.raises(CheckpointError, match=re.escape(message)) as info:
        load(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_policy_file_is_small_float32_weights_that_play_like_the_originals(tmp_path) -> None:
    original = make_checkpoint(seed=3)
    ckpt.save_policy(tmp_path / "policy.npz", original)
    assert (tmp_path / "policy.npz").stat().st_size < 10e6  # a checkpoint is ~20 MB
    with np.load(tmp_path / "policy.npz", allow_pickle=False) as data:
        assert sorted(data.files) == ["W1", "W2", "meta"]
        assert data["W1"].dtype == np.float32
    policy = load(tmp_path / "policy.npz", policy=True)
    assert policy.rmsprop_cache is None
    assert (policy.iteration, policy.episodes, policy.config) == (7, 70, original.config)
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
        assert small.policy_forward(x)[0] == pytest.approx(full.policy_forward(x)[0], rel=1e-6)


def test_policy_file_cannot_be_resumed_from(tmp_path) -> None:
    ckpt.save_policy(tmp_path / "policy.npz", make_checkpoint())
    with pytest.raises(CheckpointError, match="policy file holds no optimizer state"):
        load(tmp_path / "policy.npz")


@pytest.mark.parametrize(
    "path", [*sorted((Path(__file__).parents[1] / "results").glob("*/policy.npz")), "fresh"]
)
def test_policies_and_checkpoints_load_as_numpy_reads_them(tmp_path, path) -> None:
    # The checked reader must give what np.load gives: the shipped policy, one written now
    # (deflated float32) and a checkpoint (stored float64).
    paths = [Path(path)]
    if path == "fresh":
        paths = [tmp_path / "policy.npz", tmp_path / FILENAME]
        ckpt.save_policy(paths[0], make_checkpoint(seed=5))
        save(paths[1], make_checkpoint(seed=5))
    for file in paths:
        loaded = load(file, policy=True)
        with np.load(file, allow_pickle=False) as data:
            for k in ("W1", "W2"):
                np.testing.assert_array_equal(loaded.weights[k], data[k].astype(np.float64))
                assert loaded.weights[k].dtype == np.float64
            if "cache_W1" in data.files:
                for k in ("W1", "W2"):
                    np.testing.assert_array_equal(loaded.rmsprop_cache[k], data[f"cache_{k}"])
            assert json.loads(str(data["meta"]))["iteration"] == loaded.iteration
        assert loaded.weights["W1"].flags.f_contiguous
