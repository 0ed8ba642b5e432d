"""Worker processes killed by PID during a real run (local Ray, real Pong)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pong.worker import MAX_RESTARTS
from tests.helpers import BATCH_LINE, ROOT, descendants, parents, processes

pytestmark = [pytest.mark.ray, pytest.mark.ale]


def worker_pids(driver: subprocess.Popen) -> list[int]:
    """PIDs of the live RolloutWorker processes of ``driver``'s own Ray, never anyone else's.

    Ray sets their titles to ray::RolloutWorker...; they descend from the driver
    (it started the raylet, which starts them).
    """
    ours = descendants({driver.pid}, parents())
    return [
        pid for pid, title in processes() if pid in ours and title.startswith(b"ray::RolloutWorker")
    ]


def start_driver(args: list[str], out: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``driver.py --seed=0 ARGS`` in the background (a local Ray of 2 CPUs unless ``env``)."""
    local = env is None
    if local:
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        args = ["--num-cpus=2", *args]
    return subprocess.Popen(
        [sys.executable, "driver.py", "--seed=0", *args],
        cwd=ROOT,
        env=env,
        stdout=open(out, "w"),
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(predicate, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.1)


def test_a_killed_worker_is_restarted_and_every_batch_is_full(tmp_path) -> None:
    out = tmp_path / "out.txt"
    proc = start_driver(["--batch-size=2", "--iterations=3", f"--run-dir={tmp_path}/run"], out)
    try:
        wait_for(lambda: "Batch 1 " in out.read_text(), proc)
        wait_for(lambda: len(worker_pids(proc)) == 2, proc)
        os.kill(worker_pids(proc)[0], signal.SIGKILL)  # mid-rollout of update 2
        _, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
    text = out.read_text()
    assert proc.returncode == 0, err
    batches = [m for m in map(BATCH_LINE.match, text.splitlines()) if m]
    assert [m[1] for m in batches] == ["1", "2", "3"]
    assert all(m[2] == "2" for m in batches)  # full batches
    assert (
        "note: a worker's process had died; Ray restarted it and its game was played again" in text
    )


def test_a_worker_that_keeps_dying_stops_the_run_with_one_line(tmp_path) -> None:
    out = tmp_path / "out.txt"
    proc = start_driver(["--batch-size=1", f"--run-dir={tmp_path}/run"], out)
    try:
        wait_for(lambda: "Batch 1 " in out.read_text(), proc)
        kills, deadline = 0, time.monotonic() + 150
        while proc.poll() is None and time.monotonic() < deadline:
            pids = worker_pids(proc)
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                kills += 1
                time.sleep(1.0)  # let Ray notice and start the next one
            else:
                time.sleep(0.1)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert kills >= MAX_RESTARTS + 1
    [line] = [line for line in err.splitlines() if line.startswith("driver.py: error:")]
    assert "is gone and Ray can no longer restart it" in line
    assert f"up to {MAX_RESTARTS} times" in line
    assert "Traceback" not in err
    assert (tmp_path / "run" / "checkpoint.npz").exists()  # the last finished update is kept
