"""pong convert: an earlier version's .npz checkpoint or policy, carried over to safetensors."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from pong.run.checkpoint import FILENAME, load
from pong.tools.convert import main
from tests.helpers import ROOT
from tests.run.test_checkpoint import make_checkpoint


def write_old(path, checkpoint, policy: bool = False) -> None:
    """A file as the earlier version wrote it: NumPy's .npz, JSON metadata in ``meta``."""
    meta = {
        "format": "pong-policy/1" if policy else "pong-checkpoint/1",
        "iteration": checkpoint.updates,
        "episodes": checkpoint.games,
        "steps": checkpoint.steps,
        "running_reward": checkpoint.running_mean,
        "best_running_reward": checkpoint.best_running_mean,
        "seed": checkpoint.config.seed,
        "settings": {k: v for k, v in dataclasses.asdict(checkpoint.config).items() if k != "seed"},
    }
    if policy:
        arrays = {k: v.astype(np.float32) for k, v in checkpoint.weights.items()}
        np.savez_compressed(path, **arrays, meta=np.array(json.dumps(meta)))
    else:
        cache = {f"cache_{k}": v for k, v in checkpoint.rmsprop_cache.items()}
        np.savez(path, **checkpoint.weights, **cache, meta=np.array(json.dumps(meta)))


def test_an_old_run_directory_is_carried_over_and_resumes_with_the_same_numbers(
    tmp_path, capsys
) -> None:
    original = make_checkpoint(seed=6)
    write_old(tmp_path / "checkpoint.npz", original)
    assert main([str(tmp_path / "checkpoint.npz")]) == 0
    assert capsys.readouterr().out == (
        f"Wrote {tmp_path / FILENAME}: the checkpoint of update 7, the same numbers as"
        f" {tmp_path / 'checkpoint.npz'}\n"
    )
    loaded = load(tmp_path)  # the run directory's checkpoint, as --resume reads it
    for k in ("W1", "W2"):
        assert loaded.weights[k].tobytes() == original.weights[k].tobytes()
        assert loaded.rmsprop_cache[k].tobytes() == original.rmsprop_cache[k].tobytes()
    assert (loaded.updates, loaded.games, loaded.steps) == (7, 70, 71234)
    assert (loaded.running_mean, loaded.config) == (original.running_mean, original.config)


def test_an_old_policy_is_carried_over_as_the_same_float32_numbers(tmp_path) -> None:
    original = make_checkpoint(seed=2)
    write_old(tmp_path / "policy.npz", original, policy=True)
    assert main([str(tmp_path / "policy.npz"), str(tmp_path / "new.safetensors")]) == 0
    loaded = load(tmp_path / "new.safetensors", policy=True)
    assert loaded.rmsprop_cache is None
    for k in ("W1", "W2"):
        assert np.array_equal(loaded.weights[k], original.weights[k].astype(np.float32))


def test_an_old_file_given_to_evaluate_or_resume_says_how_to_carry_it_over(tmp_path) -> None:
    write_old(tmp_path / "checkpoint.npz", make_checkpoint())
    for argv, where in (
        (["--evaluate", str(tmp_path / "checkpoint.npz")], tmp_path / "checkpoint.npz"),
        (["--resume", str(tmp_path)], tmp_path / FILENAME),
    ):
        done = subprocess.run(
            [sys.executable, "driver.py", *argv], cwd=ROOT, capture_output=True, text=True
        )
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and str(where) in done.stderr
        assert f"python -m pong convert {tmp_path / 'checkpoint.npz'}" in done.stderr


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_bytes(b"PK\x03\x04 not really"), "not a pong .npz file"),
        (lambda p: np.savez(p, W1=np.zeros(3)), "not a pong .npz file (no 'meta' in it)"),
        (
            lambda p: np.savez(p, meta=np.array([{"a": 1}], dtype=object)),
            "Object arrays cannot be loaded when allow_pickle=False",
        ),
        (lambda p: p.mkdir(), "a directory, not a regular file"),
    ],
)
def test_a_damaged_old_file_is_one_line_and_writes_nothing(tmp_path, make, message) -> None:
    old = tmp_path / "old.npz"
    make(old)
    done = subprocess.run(
        [sys.executable, "-m", "pong", "convert", str(old)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr and str(old) in done.stderr
    assert not (tmp_path / "old.safetensors").exists()


def test_an_existing_output_is_never_replaced(tmp_path, capsys) -> None:
    write_old(tmp_path / "checkpoint.npz", make_checkpoint())
    (tmp_path / FILENAME).write_bytes(b"mine")
    with pytest.raises(SystemExit) as info:
        main([str(tmp_path / "checkpoint.npz")])
    assert info.value.code == 2 and "exists; choose a new name" in capsys.readouterr().err
    assert (tmp_path / FILENAME).read_bytes() == b"mine"


def test_values_this_version_refuses_are_refused_when_converting(tmp_path) -> None:
    """A converted file must open again, and play: an env of a million characters or one this
    program does not play, a JSON name given twice, or a setting posing as a counter, are
    refused."""
    write_old(tmp_path / "checkpoint.npz", make_checkpoint())
    with np.load(tmp_path / "checkpoint.npz") as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(str(arrays.pop("meta")))
    for label, text, message in (
        ("long", json.dumps({**meta, "settings": {**meta["settings"], "env": "x" * 10**6}}),
         "metadata 'env': expected a text of at most 200 characters"),
        ("twice", json.dumps(meta)[:-1] + ', "seed": 5}', "a name appears twice"),
        ("v2", json.dumps({**meta, "format": "pong-checkpoint/2"}), "format 'pong-checkpoint/2'"),
        ("cartpole", json.dumps({**meta, "settings": {**meta["settings"], "env": "CartPole-v1"}}),
         "env: unknown env id 'CartPole-v1'"),  # a file the driver would refuse to play
        ("dict", json.dumps({**meta, "settings": {**meta["settings"], "env": {"a": 1}}}),
         "env: env id \"{'a': 1}\" names a Python module"),
        ("posing", json.dumps({**meta, "settings": {**meta["settings"], "iteration": 999}}),
         "settings that are not a dict of settings alone"),  # not the update it was
    ):  # fmt: skip
        old = tmp_path / f"{label}.npz"
        np.savez(old, **arrays, meta=np.array(text))
        done = subprocess.run(
            [sys.executable, "-m", "pong", "convert", str(old)], cwd=ROOT, capture_output=True,
            text=True,
        )  # fmt: skip
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert message in done.stderr and not old.with_suffix(".safetensors").exists()
