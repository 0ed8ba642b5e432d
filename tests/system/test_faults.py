"""Processes killed by PID during a real run (local Ray, real Pong): its workers, and the
raylet and GCS of the driver's own Ray."""

from __future__ import annotations

import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pong.core.worker import MAX_RESTARTS
from pong.run.checkpoint import load
from tests.helpers import (
    BATCH_LINE,
    ROOT,
    descendants,
    parents,
    processes,
    started,
    stop_processes_of,
)

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
    assert (
        tmp_path / "run" / "checkpoint.safetensors"
    ).exists()  # the last finished update is kept


FUTEX = {"x86_64": "202", "aarch64": "98"}.get(platform.machine())  # its system call number


def waits_on_games(driver: subprocess.Popen) -> bool:
    """Whether every worker of ``driver`` is playing its game and the driver's main thread is
    blocked (on a futex, as in ``ray.wait``), not inside an object-store call: a raylet that
    dies during one (a few milliseconds of an update) has Ray's own code end the driver at
    once, as README says."""
    titles = [title for pid, title in processes() if pid in worker_pids(driver)]
    if not titles or not all(t.startswith(b"ray::RolloutWorker.compute_gradient") for t in titles):
        return False
    try:
        return FUTEX is None or Path(f"/proc/{driver.pid}/syscall").read_text().split()[0] == FUTEX
    except (OSError, IndexError):
        return True  # cannot tell


@pytest.mark.parametrize(("process", "name"), [("raylet", "raylet"), ("gcs_server", "GCS")])
def test_when_its_own_ray_dies_the_driver_stops_saved_with_one_line_and_ends_that_ray(
    process, name, tmp_path
) -> None:
    """Without a watchdog Ray ends the driver itself, about 15 s after its raylet died or 60 s
    after its GCS did, with exit status 1, Ray's lines, nothing saved and agents left running."""
    private = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # this Ray's files, and only its
    env = {
        **{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
        "RAY_TMPDIR": str(private),
    }
    out, run = tmp_path / "out.txt", tmp_path / "run"
    args = ["--num-cpus=2", "--batch-size=2", "--checkpoint-every=100", f"--run-dir={run}"]
    proc = start_driver(args, out, env=env)  # so only the stop can save the run
    try:
        wait_for(lambda: "Batch 2 " in out.read_text(), proc)
        ours = {pid: started(pid) for pid in descendants({proc.pid}, parents())}
        [target] = [
            pid
            for pid, cmd in processes()
            if pid in ours and cmd.split(b"\0")[0].endswith(f"/{process}".encode())
        ]
        deadline = time.monotonic() + 60
        while not waits_on_games(proc) and time.monotonic() < deadline:
            time.sleep(0.001)
        os.kill(target, signal.SIGKILL)
        killed = time.monotonic()
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - killed
        left = [pid for pid, start in ours.items() if start is not None and started(pid) == start]
        left += [pid for pid, cmd in processes() if str(private).encode() in cmd and started(pid)]
    finally:
        proc.kill()
        stop_processes_of(private)
        shutil.rmtree(private, ignore_errors=True)
    assert proc.returncode == 1, err
    assert took < 10, took  # Ray's own end comes after 15 s (a raylet) or 60 s (a GCS)
    printed = [int(m[1]) for m in map(BATCH_LINE.match, out.read_text().splitlines()) if m]
    [line] = err.splitlines()  # and no traceback
    assert line == (
        f"driver.py: error: the local Ray's {name} (pid {target}) died; the last finished update"
        f" ({printed[-1]}) is saved in {run}/checkpoint.safetensors"
    )
    assert load(run).iteration == printed[-1]  # every update it printed, none it did not
    assert out.read_text().splitlines()[-1].startswith(f"Done: {printed[-1]} updates")
    assert left == [], "processes of the driver's Ray outlived it"


@pytest.mark.ray
def test_a_driver_killed_outright_leaves_nothing_of_its_ray_running(tmp_path) -> None:
    """``kill -9`` (or Ray's own code ending the driver at once) leaves no line and no save,
    and before pong.guard it left that Ray's two agents running for good."""
    out, run = tmp_path / "out.txt", tmp_path / "run"
    args = ["--env=PongToy/Catch-v0", "--batch-size=2", f"--run-dir={run}"]
    proc, ours = start_driver(args, out), {}
    try:
        wait_for(lambda: "Batch 2 " in out.read_text(), proc)
        ours = {pid: started(pid) for pid in descendants({proc.pid}, parents())}
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)  # its stderr is closed once the guard is done too
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            left = [pid for pid, start in ours.items() if start and started(pid) == start]
            if not left:
                break
            time.sleep(0.2)
    finally:
        proc.kill()
        for pid, start in ours.items():  # only those the driver had started
            if start and started(pid) == start:
                os.kill(pid, signal.SIGKILL)
    assert len(ours) >= 5  # the GCS, the raylet, its agents and workers, the guard
    assert left == [], "processes of the killed driver's Ray outlived it"
