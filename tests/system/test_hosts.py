"""A Ray cluster of separate network hosts: Linux network namespaces, each node with its own
address, joined by veth pairs to a bridge in the head's namespace. The documented job runs on
it; the driver, on the head, joins with ``--address`` as on a real cluster while the worker
node is cut off, and while a node joins. Needs root (``ip netns``); skipped otherwise."""

from __future__ import annotations

import csv
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers import (
    BATCH_LINE,
    HEALTH,
    ROOT,
    processes,
    ray_status_until,
    rollout_workers,
    run_driver,
    start_driver,
    stop_processes,
    token_env,
    wait_for,
)
from tests.hosts import SUBNET, Hosts, cannot_make_namespaces, empty_venv

pytestmark = [pytest.mark.ray, pytest.mark.cluster]

RAY = str(Path(sys.executable).parent / "ray")
SHM = "/dev/shm" if os.path.isdir("/dev/shm") else None  # the hosts' temp dirs, in memory
PORT = 6379  # the head's GCS; each namespace has ports of its own
# The toy; each run here has these flags (--seed=3 after start_driver's --seed=0, so it wins),
# and its checkpoint is compared with that of a run on one machine. 60 updates are enough to
# go on after a cut.
TOY = ["--env=PongToy/Catch-v0", "--batch-size=2", "--seed=3", "--updates=60"]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory, shared_ray):
    """Head (1 CPU, the job server) and a worker node (1 CPU) on separate hosts, each with a
    temp dir of its own, as on separate machines; the checkpoint of a run on one machine (the
    shared Ray), to compare with. Every process in the hosts is ended, and the namespaces
    removed."""
    reason = cannot_make_namespaces()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("hosts")
    temp_dirs = {n: Path(tempfile.mkdtemp(prefix="h", dir=SHM)) for n in ("head", "worker")}
    env = {**token_env(tmp), **HEALTH}
    net, python = Hosts(), empty_venv(tmp / "venv")

    def start(name: str, host: int, *flags: str) -> Path:
        """``ray start`` on a new host ``name`` at ``SUBNET.host``; its own temp dir."""
        return _start(net, python, env, temp_dirs, name, host, *flags)

    (address, one), run = shared_ray, tmp / "alone"  # on one machine, while the cluster starts
    proc = start_driver([*TOY, f"--address={address}", f"--run-dir={run}"], tmp / "out.txt", one)
    try:
        start("head", 1, "--head", f"--port={PORT}", "--include-dashboard=true",
              f"--dashboard-host={SUBNET}.1")  # fmt: skip
        start("worker", 2, f"--address={SUBNET}.1:{PORT}")
        assert proc.wait(timeout=240) == 0, proc.communicate()[1]
        alone = (run / "checkpoint.safetensors").read_bytes()
        yield net, f"{SUBNET}.1:{PORT}", env, alone, start
    finally:
        proc.kill()
        stop_processes(net.processes())  # all: the head's Ray Client server names no temp dir
        net.remove()
        for temp_dir in temp_dirs.values():
            shutil.rmtree(temp_dir, ignore_errors=True)


def _start(net: Hosts, python: str, env, temp_dirs: dict, name: str, host: int, *flags: str):
    """``ray start`` (1 CPU unless ``flags`` say) on a new host ``name`` of ``net`` at
    ``SUBNET.host``, with a temp dir of its own (kept in ``temp_dirs``), which it returns."""
    temp_dirs.setdefault(name, Path(tempfile.mkdtemp(prefix="h", dir=SHM)))
    cpus = [] if any(f.startswith("--num-cpus") for f in flags) else ["--num-cpus=1"]
    node = subprocess.run(
        [*net.add(name, host), python, RAY, "start", *cpus, "--disable-usage-stats",
         f"--node-ip-address={SUBNET}.{host}", f"--temp-dir={temp_dirs[name]}", *flags],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert node.returncode == 0, node.stdout + node.stderr
    return temp_dirs[name]


def _batches(text: str) -> list[tuple[str, str]]:
    """(update, games) of each update's line."""
    return [(m[1], m[2]) for m in map(BATCH_LINE.match, text.splitlines()) if m]


def test_the_documented_job_places_one_worker_per_host_with_the_bytes_of_one_machine(
    hosts, tmp_path
) -> None:
    """docs/cluster.md's job, with runtime_env.yaml: each host builds the job's virtualenv
    (from what this machine's venv has: the hosts have no network beyond each other)."""
    net, address, env, alone, _ = hosts
    run = tmp_path / "run"
    job = subprocess.run(
        [*net.run("head"), RAY, "job", "submit", f"--address=http://{SUBNET}.1:8265",
         "--working-dir", ".", "--runtime-env", "runtime_env.yaml", "--", "python", "driver.py",
         *TOY, f"--run-dir={run}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert job.returncode == 0 and "succeeded" in job.stdout, job.stdout + job.stderr
    assert f"Running on the Ray cluster at {address} (2 nodes, 2 CPUs)" in job.stdout
    [started] = re.findall(r"^Started .*", job.stdout, re.M)
    assert started.startswith(
        "Started 2 of 2 RolloutWorker actors (one CPU each) on 2 nodes (1 on "
    ) and {f"{SUBNET}.1", f"{SUBNET}.2"} == set(re.findall(rf"{SUBNET}\.\d", started)), started
    assert len(_batches(job.stdout)) == 60 and "Traceback" not in job.stdout
    assert (run / "checkpoint.safetensors").read_bytes() == alone
    last = list(csv.DictReader((run / "updates.csv").read_text().splitlines()))[-1]
    assert last["games_by_node"] == f"{SUBNET}.1=1 {SUBNET}.2=1", last  # each host played one


def test_a_slow_host_never_holds_the_update_back(hosts, tmp_path) -> None:
    """The worker host's link limited to 10 Mbit/s: the 10.2 MB model takes it about 8 s.
    The head's worker plays a backup of each game the slow host holds, and the run has the
    bytes of one machine."""
    net, address, env, alone, _ = hosts
    run = tmp_path / "run"
    net.shape("worker", 2, rate_mbit=10)
    try:
        done = run_driver([*TOY, "--workers=2", f"--address={address}", f"--run-dir={run}"],
                          env, prefix=net.run("head"))  # fmt: skip
    finally:
        net.shape("worker", 2)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert _batches(done.stdout) == [(str(n), "2") for n in range(1, 61)]
    rows = list(csv.DictReader((run / "updates.csv").read_text().splitlines()))
    assert any(row["games_by_node"] == f"{SUBNET}.1=2" for row in rows)  # both on the head
    assert (run / "checkpoint.safetensors").read_bytes() == alone


def test_a_host_cut_off_mid_run_leaves_every_update_full(hosts, tmp_path) -> None:
    """It cuts the worker node off for good."""
    net, address, env, alone, _ = hosts
    run = tmp_path / "run"
    out, args = tmp_path / "out.txt", [*TOY, f"--address={address}", f"--run-dir={run}"]
    proc = start_driver(args, out, env, net.run("head"))
    try:
        wait_for(lambda: "Batch 3 " in out.read_text(), proc)
        net.cut("worker")
        _, err = proc.communicate(timeout=150)
    finally:
        proc.kill()
    text = out.read_text()
    assert proc.returncode == 0, err
    assert _batches(text) == [(str(n), "2") for n in range(1, 61)]  # every update full
    assert "Traceback" not in err and "Traceback" not in text
    # No note needs to say so: the head's worker plays every game while the cut host's is
    # busy with its last one, and 60 toy updates can end before Ray calls that host lost.
    assert (run / "checkpoint.safetensors").read_bytes() == alone


def test_a_host_that_joins_mid_run_gets_a_worker_that_plays(hosts, tmp_path) -> None:
    """Two workers asked for, one CPU on the cluster (the worker node cut off, by the test
    before or here): the second waits, and plays once a new host joins. The driver is paused
    (SIGSTOP) while the host starts, so that a run of 60 updates spans it."""
    net, address, env, alone, start = hosts
    if "worker" not in net.cut_off:  # run alone: the worker node seen, then gone
        ray_status_until(lambda said: "/2.0 CPU\n" in said, address, env, net.run("head"))
        net.cut("worker")
    ray_status_until(lambda said: "/1.0 CPU\n" in said, address, env, net.run("head"))
    run = tmp_path / "run"
    out, args = tmp_path / "out.txt", [*TOY, "--workers=2", f"--address={address}"]
    proc = start_driver([*args, f"--run-dir={run}"], out, env, net.run("head"))
    try:
        wait_for(lambda: "Batch 1 " in out.read_text(), proc)
        assert "Started 1 of 2 RolloutWorker actors" in out.read_text()
        proc.send_signal(signal.SIGSTOP)
        try:
            joiner = start("joiner", 3, f"--address={address}")
            wait_for(lambda: _runs_a_worker(joiner), proc)
        finally:
            proc.send_signal(signal.SIGCONT)
        _, err = proc.communicate(timeout=150)
    finally:
        proc.kill()
    text = out.read_text()
    assert proc.returncode == 0, err
    assert re.search(rf"note: RolloutWorker \d is up on node {SUBNET}\.3; it plays from", text)
    played = (run / "updates.csv").read_text()
    assert f"{SUBNET}.3=" in played  # the new host played games
    assert (run / "checkpoint.safetensors").read_bytes() == alone


def _runs_a_worker(temp_dir: Path) -> bool:
    """Whether a RolloutWorker process runs on the node started with ``temp_dir``."""
    return bool(
        rollout_workers({p for p, cmdline in processes() if str(temp_dir).encode() in cmdline})
    )


def test_a_0_cpu_head_whose_only_worker_host_is_cut_waits_for_a_new_host(hosts, tmp_path) -> None:
    """The usual production layout, a head that plays nothing, on hosts of its own. Its only
    worker host is cut off: the run says it waits; then a new host joins, Ray restarts the
    lost worker there, and the run ends with the bytes of one machine. (That the wait is said
    each minute, and a worker restarting for minutes never given up, is test_schedule's, on
    a clock of its own.)"""
    _, _, env, alone, _ = hosts
    net, temp_dirs = Hosts(prefix="pongz"), {}
    python = empty_venv(tmp_path / "venv")
    address = f"{SUBNET}.1:{PORT}"
    run, out = tmp_path / "run", tmp_path / "out.txt"
    try:
        _start(net, python, env, temp_dirs, "head", 1, "--head", f"--port={PORT}",
               "--num-cpus=0", "--include-dashboard=false")  # fmt: skip
        _start(net, python, env, temp_dirs, "worker", 2, f"--address={address}")
        args = [*TOY, "--workers=1", f"--address={address}", f"--run-dir={run}"]
        proc = start_driver(args, out, env, net.run("head"))
        try:
            wait_for(lambda: "Batch 3 " in out.read_text(), proc)
            net.cut("worker")
            wait_for(lambda: "note: no RolloutWorker is up (" in out.read_text(), proc)
            _start(net, python, env, temp_dirs, "joiner", 3, f"--address={address}")
            _, err = proc.communicate(timeout=150)
        finally:
            proc.kill()
    finally:
        stop_processes(net.processes())
        net.remove()
        for temp_dir in temp_dirs.values():
            shutil.rmtree(temp_dir, ignore_errors=True)
    text = out.read_text()
    assert proc.returncode == 0, text + err
    assert "Traceback" not in text + err and "gone for good" not in text, text
    assert "note: no RolloutWorker is up (1 waiting; " in text, text
    assert re.search(rf"RolloutWorker 0 is up again \(Ray restarted it\) on node {SUBNET}\.3", text)
    assert _batches(text) == [(str(n), "2") for n in range(1, 61)]
    assert (run / "checkpoint.safetensors").read_bytes() == alone
