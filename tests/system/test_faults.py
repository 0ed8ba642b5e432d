"""Processes killed by PID during a real run (local Ray, real Pong): its workers, and the
raylet and GCS of the driver's own Ray."""

from __future__ import annotations

import os
import platform
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from pong.core.worker import MAX_RESTARTS
from pong.run.checkpoint import load
from tests.helpers import (
    BATCH_LINE,
    HEALTH,
    descendants,
    parents,
    processes,
    rollout_workers,
    start_driver,
    started,
    stop_processes_of,
    wait_for,
)

pytestmark = [pytest.mark.ray, pytest.mark.ale]


def worker_pids(driver: subprocess.Popen) -> list[int]:
    """PIDs of the live RolloutWorker processes of ``driver``'s own Ray: they descend from the
    driver (it started the raylet, which starts them)."""
    return rollout_workers({driver.pid})


def test_a_killed_worker_is_restarted_and_every_batch_is_full(tmp_path) -> None:
    """Six updates: the four after the kill (each one worker's two games, about 2 s) leave
    Ray time to restart the worker, which then plays again."""
    out = tmp_path / "out.txt"
    proc = start_driver(["--batch-size=2", "--updates=6", f"--run-dir={tmp_path}/run"], out)
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
    assert [m[1] for m in batches] == ["1", "2", "3", "4", "5", "6"]
    assert all(m[2] == "2" for m in batches)  # full batches
    # Its game went to the worker free: dealt again, or a backup that finished first (the
    # loss then shows once its call's reply comes in).
    assert "RolloutWorker 0 was lost (its process or node)" in text or (
        "RolloutWorker 1 was lost (its process or node)" in text
    ), text
    assert "is up again (Ray restarted it) on node " in text


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
                gone = time.monotonic() + 30  # until Ray has reaped it: each kill a new worker
                while pids[0] in worker_pids(proc) and time.monotonic() < gone:
                    time.sleep(0.1)
            else:
                time.sleep(0.1)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert kills >= MAX_RESTARTS + 1
    [line] = [line for line in err.splitlines() if line.startswith("driver.py: error:")]
    assert "every RolloutWorker is gone: Ray restarts a worker up to 3 times" in line
    assert f"up to {MAX_RESTARTS} times" in line
    assert "Traceback" not in err
    assert (
        tmp_path / "run" / "checkpoint.safetensors"
    ).exists()  # the last finished update is kept


FUTEX = {"x86_64": "202", "aarch64": "98"}.get(platform.machine())  # its system call number


def waits_on_games(driver: subprocess.Popen) -> bool:
    """Whether every worker of ``driver`` is playing its game and the driver's main thread is
    blocked (on a futex, as in ``ray.wait``): the kill lands mid-update, not mid-save."""
    titles = [title for pid, title in processes() if pid in worker_pids(driver)]
    if not titles or not all(t.startswith(b"ray::RolloutWorker.compute_gradient") for t in titles):
        return False
    try:
        return FUTEX is None or Path(f"/proc/{driver.pid}/syscall").read_text().split()[0] == FUTEX
    except (OSError, IndexError):
        return True  # cannot tell


AGENTS = (b"ray::DashboardAgent", b"ray::RuntimeEnvAgent")  # Ray ends them itself, in ~65 s


def lingering(ours: dict[int, int | None], private: Path, seconds: float = 20) -> list[bytes]:
    """The titles of that Ray's processes, other than its two agents, still running after up to
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        left = {pid for pid, start in ours.items() if start is not None and started(pid) == start}
        left |= {pid for pid, cmd in processes() if str(private).encode() in cmd and started(pid)}
        titles = [title for pid, title in processes() if pid in left]
        titles = [title for title in titles if not title.startswith(AGENTS)]
        if not titles or time.monotonic() > deadline:
            return titles
        time.sleep(0.5)


@pytest.mark.parametrize("process", ["raylet", "gcs_server"])
def test_when_its_own_ray_dies_the_run_keeps_every_update_it_printed(process, tmp_path) -> None:
    """Ray ends the driver itself: once the GCS declares its node dead after the raylet died
    (about 15 s by default; 3 s here, by Ray's health-check settings), or once it gives up on
    its GCS (60 s by default; 5 s here, by Ray's own setting). What that costs is bounded by
    the checkpoints: here every update's, so the run resumes from the last one printed."""
    private = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # this Ray's files, and only its
    env = {
        **{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
        "RAY_TMPDIR": str(private),
        "RAY_gcs_rpc_server_reconnect_timeout_s": "5",
        **HEALTH,
    }
    out, run = tmp_path / "out.txt", tmp_path / "run"
    args = ["--num-cpus=2", "--batch-size=2", "--checkpoint-every=1", f"--run-dir={run}"]
    proc = start_driver(args, out, env=env)
    try:
        wait_for(lambda: "Batch 1 " in out.read_text(), proc)
        ours = {pid: started(pid) for pid in descendants({proc.pid}, parents())}
        [target] = [
            pid
            for pid, cmd in processes()
            if pid in ours and cmd.split(b"\0")[0].endswith(f"/{process}".encode())
        ]
        deadline = time.monotonic() + 300  # a bound, not a wait
        while not waits_on_games(proc) and time.monotonic() < deadline:
            time.sleep(0.001)
        os.kill(target, signal.SIGKILL)
        killed = time.monotonic()
        _, err = proc.communicate(timeout=90)
        took = time.monotonic() - killed
        left = lingering(ours, private)
    finally:
        proc.kill()
        stop_processes_of(private)
        shutil.rmtree(private, ignore_errors=True)
    assert proc.returncode != 0 and took < 30, (proc.returncode, took, err)
    assert "Traceback" not in err
    printed = [int(m[1]) for m in map(BATCH_LINE.match, out.read_text().splitlines()) if m]
    assert load(run).updates in (printed[-1], printed[-1] + 1)  # saved before it is printed
    assert left == [], "processes of the driver's Ray outlived it"


@pytest.mark.ray
def test_a_driver_killed_outright_loses_at_most_the_updates_since_its_last_save(tmp_path) -> None:
    """``kill -9`` leaves no line; the checkpoint holds an update at most
    ``--checkpoint-every`` old, and Ray's own processes end by themselves (its two agents
    about 65 s later; docs/faults.md)."""
    out, run = tmp_path / "out.txt", tmp_path / "run"
    args = ["--env=PongToy/Catch-v0", "--batch-size=2", "--checkpoint-every=3", f"--run-dir={run}"]
    proc, ours = start_driver(args, out), {}
    try:
        wait_for(lambda: "Batch 4 " in out.read_text(), proc)
        ours = {pid: started(pid) for pid in descendants({proc.pid}, parents())}
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
        printed = [int(m[1]) for m in map(BATCH_LINE.match, out.read_text().splitlines()) if m]
        left = lingering(ours, Path("/nonexistent"))
    finally:
        proc.kill()
        for pid, start in ours.items():  # only those the driver had started
            if start and started(pid) == start:
                os.kill(pid, signal.SIGKILL)
    assert len(ours) >= 4  # the GCS, the raylet, its agents and workers
    assert printed[-1] - 3 < load(run).updates <= printed[-1] + 1
    assert left == [], "processes of the killed driver's Ray outlived it"
