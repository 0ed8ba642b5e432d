"""``pong.run.storage``: a sweep's files read as hostile, the latest checkpoint found by its
update, on a local directory (a URI is the S3 test of tests/system/test_sweep_hosts.py)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from pong.run.checkpoint import FILENAME, save
from pong.run.storage import Storage, StorageError
from tests.run.test_checkpoint import make_checkpoint


def trial_checkpoint(sweep: Path, trial: str, number: int, update: int) -> Path:
    """``sweep/trial/checkpoint_<number>`` holding a checkpoint of update ``update``."""
    directory = sweep / trial / f"checkpoint_{number:06d}"
    directory.mkdir(parents=True)
    save(directory / FILENAME, dataclasses.replace(make_checkpoint(), updates=update))
    return directory


def test_the_latest_checkpoint_is_the_latest_update_not_the_highest_number(tmp_path) -> None:
    trial_checkpoint(tmp_path, "t", 9, 3)  # an earlier launch's
    trial_checkpoint(tmp_path, "t", 0, 4)  # a resumed launch's first
    (tmp_path / "t" / "checkpoint_000005").mkdir()  # a copy cut short: no checkpoint
    damaged = tmp_path / "t" / "checkpoint_000006"
    damaged.mkdir()
    (damaged / FILENAME).write_bytes(b"\xff" * 100)
    storage = Storage(tmp_path)
    assert storage.latest("t") == "t/checkpoint_000000"  # update 4, not 3
    assert storage.latest("nothing") is None
    storage.prune("t", keep=["checkpoint_000000"])
    assert storage.directories("t") == ["checkpoint_000000"]


def test_links_are_not_followed_and_files_are_bounded(tmp_path) -> None:
    elsewhere = trial_checkpoint(tmp_path / "elsewhere", "t", 0, 8)
    (tmp_path / "sweep" / "t").mkdir(parents=True)
    os.symlink(elsewhere, tmp_path / "sweep" / "t" / "checkpoint_000001")
    storage = Storage(tmp_path / "sweep")
    assert storage.latest("t") is None
    os.symlink(elsewhere / FILENAME, tmp_path / "sweep" / "link")
    with pytest.raises(StorageError, match="symbolic link"):
        storage.read("link", 100)
    (tmp_path / "sweep" / "big").write_bytes(b"x" * 101)
    with pytest.raises(StorageError, match="more than"):
        storage.read("big", 100)
    assert storage.read("big", 10, head=True) == b"x" * 10
    with pytest.raises(FileNotFoundError):
        storage.read("absent", 100)


def test_a_write_replaces_a_planted_link_and_never_writes_through_it(tmp_path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("mine")
    (tmp_path / "sweep").mkdir()
    os.symlink(victim, tmp_path / "sweep" / "summary.csv")
    Storage(tmp_path / "sweep").write("summary.csv", b"a,b\n")
    assert victim.read_text() == "mine"
    assert (tmp_path / "sweep" / "summary.csv").read_bytes() == b"a,b\n"


def test_a_uri_pyarrow_cannot_open_is_one_line() -> None:
    with pytest.raises(StorageError, match=r"^nosuchscheme://bucket/x: pyarrow cannot open it \("):
        Storage("nosuchscheme://bucket/x")


def test_copying_down_refuses_a_link_and_copies_plain_files(tmp_path) -> None:
    run = trial_checkpoint(tmp_path / "sweep", "t", 0, 3)
    (run / "updates.csv").write_text("update\n")
    (run / "watch").mkdir()
    (run / "watch" / "a.png").write_bytes(b"png")
    storage = Storage(tmp_path / "sweep")
    storage.copy_down("t/checkpoint_000000", tmp_path / "down")
    assert sorted(
        str(p.relative_to(tmp_path / "down")) for p in (tmp_path / "down").rglob("*")
    ) == [FILENAME, "updates.csv", "watch", "watch/a.png"]
    (tmp_path / "secret").write_text("mine")
    os.symlink(tmp_path / "secret", run / "evil.txt")
    with pytest.raises(StorageError, match="evil.txt: a symbolic link; refusing to follow it"):
        storage.copy_down("t/checkpoint_000000", tmp_path / "again")


def test_pruning_removes_planted_links_and_never_follows_a_linked_trial(tmp_path) -> None:
    victim = tmp_path / "victim"
    (victim / "checkpoint_precious").mkdir(parents=True)
    keep = trial_checkpoint(tmp_path / "sweep", "t", 0, 3)
    os.symlink(victim, tmp_path / "sweep" / "t" / "checkpoint_000007")
    os.symlink(victim, tmp_path / "sweep" / "linked")
    storage = Storage(tmp_path / "sweep")
    assert storage.prune("linked", keep=[]) == [] and storage.checkpoints("linked") == []
    assert storage.prune("t", keep=[keep.name]) == ["checkpoint_000007"]
    assert (victim / "checkpoint_precious").is_dir() and keep.is_dir()
