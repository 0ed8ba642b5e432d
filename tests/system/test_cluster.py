"""A real two-node Ray cluster, started with ``ray start`` on this machine, with token auth."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from ray import __version__ as ray_version

from pong.run.checkpoint import load
from tests.helpers import (
    BATCH_LINE,
    ROOT,
    client_server,
    descendants,
    free_port,
    free_ports,
    parents,
    processes,
    ray_status_until,
    run_driver,
    start_driver,
    stop_processes_of,
    token_env,
    wait_for,
)
from tests.hosts import cannot_make_namespaces

pytestmark = [pytest.mark.ray, pytest.mark.ale, pytest.mark.cluster]

RAY = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"


def _ray(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([RAY, *args], env=env, capture_output=True, text=True, timeout=120)


def _start_head(env: dict[str, str], temp_dir: Path, cpus: int):
    """``ray start --head`` on loopback with the job server: (address, dashboard URL, result)."""
    gcs, dashboard_port, agent = free_ports(3)  # three different ports, or Ray refuses
    address, dashboard = f"127.0.0.1:{gcs}", f"http://127.0.0.1:{dashboard_port}"
    head = _ray(
        [
            "start",
            "--head",
            f"--port={address.rpartition(':')[2]}",
            "--node-ip-address=127.0.0.1",
            f"--num-cpus={cpus}",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard.rpartition(':')[2]}",
            f"--dashboard-agent-listen-port={agent}",
            f"--temp-dir={temp_dir}",
        ],
        env,
    )
    return address, dashboard, head


def _private_temp_dir() -> Path:
    """Short, for Ray's socket paths; named "ray" so that RAY_TMPDIR=its parent makes it
    the default temp dir, where `ray start` records the cluster for --address=auto."""
    temp_dir = Path(tempfile.mkdtemp(prefix="r", dir="/tmp")) / "ray"
    temp_dir.mkdir()
    return temp_dir


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Head and one worker node, 1 CPU each; token authentication on; stopped afterwards.

    The head is started with RAY_AUTH_MODE unset and a token at hand: Ray 2.61 makes
    token authentication the default, and before that `ray start --head` turns it on
    where a token exists. Clients, the second node's `ray start` among them, are told to
    send it (RAY_AUTH_MODE=token), as docs/cluster.md says; the tests of a missing or
    wrong token show that it is on.

    Each node keeps its files in a temporary directory of its own, as separate machines
    would (one shared by both would share the virtualenv each builds for a job's
    runtime_env, and one would rebuild it under the other's job); its processes are
    found and stopped by it: no other Ray on the machine is touched.
    """
    tmp = tmp_path_factory.mktemp("cluster")
    temp_dir, node_dir = _private_temp_dir(), _private_temp_dir()
    env = token_env(tmp)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the venv's
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # a client's own
    unset = {k: v for k, v in env.items() if k != "RAY_AUTH_MODE"}
    address = ""
    try:
        address, dashboard, head = _start_head(unset, temp_dir, cpus=1)
        assert head.returncode == 0, head.stderr
        node = _ray(
            [
                "start",
                f"--address={address}",
                "--node-ip-address=127.0.0.1",
                "--num-cpus=1",
                f"--dashboard-agent-listen-port={free_port()}",
                f"--temp-dir={node_dir}",
            ],
            env,
        )
        assert node.returncode == 0, node.stderr
        ray_status_until(lambda said: len(re.findall(r"^ 1 node_", said, re.M)) == 2, address, env)
        yield address, env, base, temp_dir, dashboard, node_dir
    finally:
        stop_processes_of(node_dir, temp_dir, *([client_server(address)] if address else []))
        for directory in (node_dir, temp_dir):
            shutil.rmtree(directory.parent, ignore_errors=True)


def test_driver_trains_on_both_nodes_with_redis_address(cluster, tmp_path) -> None:
    address, env, *_ = cluster
    proc = run_driver(
        [
            f"--redis-address={address}",
            "--env=PongToy/Catch-v0",
            "--batch-size=4",
            "--updates=2",
            "--seed=0",
            f"--run-dir={tmp_path / 'run'}",
        ],
        env,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"Running on the Ray cluster at {address} (2 nodes, 2 CPUs)")
    # One worker per CPU of the cluster, each holding its CPU: one on each node, every time.
    placed = r"Started 2 of 2 RolloutWorker actors \(one CPU each\) on 2 nodes \(1 on .+, 1 on "
    assert re.match(placed, lines[2]), lines[2]
    assert sum(bool(BATCH_LINE.match(line)) for line in lines) == 2, proc.stdout
    assert f"--address={address} --resume " in lines[-1]  # the resume hint joins it again


@pytest.mark.parametrize("token", ["none", "wrong"])
def test_a_client_whose_token_is_missing_or_wrong_is_told_what_to_check(
    token, cluster, tmp_path
) -> None:
    """Ray says why on stderr, in its own lines, and raises a plain ConnectionError after
    about 20 s (3 here); the driver's last line names the address and what to check."""
    address, env, base, *_ = cluster
    wrong = tmp_path / "wrong_token"
    wrong.write_text(secrets.token_hex(32))
    tries = {"RAY_NUM_REDIS_GET_RETRIES": "3"}  # Ray's tries to reach the GCS, a second each
    given = {**env, **tries, "RAY_AUTH_TOKEN_PATH": str(wrong)}  # RAY_AUTH_MODE=token, wrong
    nowhere = {**base, **tries, "HOME": str(tmp_path)}  # no ~/.ray/auth_token, no RAY_AUTH_*
    proc = run_driver(
        [f"--address={address}", "--updates=1", f"--run-dir={tmp_path / 'run'}"],
        nowhere if token == "none" else given,
        timeout=120,
    )
    assert proc.returncode == 1
    last = proc.stderr.splitlines()[-1]
    assert last.startswith(f"driver.py: error: could not join the Ray cluster at {address}: ")
    check = (
        "set RAY_AUTH_MODE=token"
        if token == "none"
        else "check that this machine's token is the head"
    )
    assert f"if the cluster uses token authentication, {check}" in last
    assert "Traceback" not in proc.stderr and not (tmp_path / "run").exists()


def test_auto_joins_the_recorded_cluster_and_no_address_starts_a_ray_of_its_own(
    cluster, tmp_path
) -> None:
    address, env, _, temp_dir, *_ = cluster
    here = {**env, "RAY_TMPDIR": str(temp_dir.parent)}  # where `ray start` recorded it
    recorded = (temp_dir / "ray_current_cluster").read_text().strip()  # this machine's IP
    assert recorded.endswith(address.rpartition(":")[1:])
    toy = ["--updates=1", "--env=PongToy/Catch-v0"]
    joined = run_driver(["--address=auto", *toy, f"--run-dir={tmp_path / 'a'}"], here)
    assert joined.returncode == 0, joined.stderr
    assert joined.stdout.startswith(f"Running on the Ray cluster at {recorded} (2 nodes, 2 CPUs)")
    alone = run_driver([*toy, "--num-cpus=1", f"--run-dir={tmp_path / 'b'}"], here)
    assert alone.returncode == 0, alone.stderr
    assert alone.stdout.startswith("Running on a local Ray (1 node, 1 CPU)"), alone.stdout
    status = _ray(["status", f"--address={address}"], env).stdout  # the cluster lives on
    assert len(re.findall(r"^ 1 node_", status, re.M)) == 2, status


def _home(home: Path) -> str:
    """The runtime_env flag that gives the job's driver HOME=home."""
    return f"--runtime-env-json={json.dumps({'env_vars': {'HOME': str(home)}})}"


def _submit(dashboard: str, env: dict[str, str], args: list[str], *flags: str):
    """``ray job submit --working-dir .`` from the repository root, as docs/cluster.md has it."""
    return subprocess.run(
        [
            RAY,
            "job",
            "submit",
            f"--address={dashboard}",
            "--working-dir=.",
            *flags,
            "--",
            "python",
            "driver.py",
            "--env=PongToy/Catch-v0",
            *args,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_ray_job_trains_and_ray_job_stop_keeps_its_last_update_outside_the_job(
    cluster, tmp_path
) -> None:
    """docs/cluster.md's job, stopped: the run is in the user's HOME, not the job's copy of
    the working dir, and its last line continues it as a job. The documented
    ``--runtime-env runtime_env.yaml`` (each node builds the job a virtualenv: about 45 s)
    is tested on the namespace hosts where they can be made, and here otherwise."""
    address, env, _, temp_dir, dashboard, _ = cluster
    pip = ("--runtime-env=runtime_env.yaml",) if cannot_make_namespaces() else ()
    toy = ["--env=PongToy/Catch-v0", "--batch-size=2"]  # its first update at once
    job = _submit(dashboard, env, toy, _home(tmp_path), "--no-wait", *pip)
    assert job.returncode == 0, job.stderr
    [job_id] = re.findall(r"raysubmit_\w+", job.stdout)[:1]
    runs, deadline = tmp_path / "ray_results" / "pong", time.monotonic() + 150
    while not list(runs.glob("*/updates.csv")) and time.monotonic() < deadline:
        time.sleep(0.5)
    stop = _ray(["job", "stop", f"--address={dashboard}", job_id], env)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    logs = _ray(["job", "logs", f"--address={dashboard}", job_id], env).stdout
    assert "Interrupted by SIGTERM; shutting down Ray." in logs and "Traceback" not in logs, logs
    assert any(map(BATCH_LINE.match, logs.splitlines())), logs
    assert re.search(r"on 2 nodes \(1 on [^,]+, 1 on [^)]+\)", logs), logs  # one on each
    [run] = runs.iterdir()
    assert f"Run directory: {run} (" in logs and str(temp_dir) not in str(run)
    [done] = [line for line in logs.splitlines() if line.startswith("Done: ")]
    # The command that continues it names the same cluster (Ray's CLI takes the GCS address).
    again = re.search(r"ray job submit --address (\S+) --working-dir \. (.*)-- python", done)
    assert again and again[1].endswith(address.rpartition(":")[1:]), done
    assert again[2] == (f"{pip[0].replace('=', ' ')} " if pip else ""), done
    assert done.endswith(f"python driver.py --resume {run})")
    saved = load(run)  # saved on the way out, within Ray's 3 s before SIGKILL
    assert saved.updates >= 1
    assert len((run / "updates.csv").read_text().splitlines()) == saved.updates + 1


@pytest.mark.skipif(
    tuple(int(p) for p in ray_version.split(".")[:2]) < (2, 60),
    reason="Ray 2.52 recovered from a lost node in 2 of 6 runs here; in the others the driver"
    " stopped instead (mostly: one line, lost contact with Ray, last update saved)",
)
def test_a_lost_node_s_games_are_played_elsewhere_and_training_goes_on(cluster, tmp_path) -> None:
    """Last in this module: it takes the second node down for good."""
    address, env, *_, node_dir = cluster
    [raylet] = [
        pid
        for pid, cmd in processes()
        if b"raylet" in cmd.split(b"\0")[0] and str(node_dir).encode() in cmd  # the second node
    ]
    out = tmp_path / "out.txt"
    args = ["--batch-size=4", "--updates=3", f"--run-dir={tmp_path / 'run'}"]
    proc = start_driver([f"--redis-address={address}", *args], out, env=env)
    try:
        wait_for(lambda: "Batch 1 " in out.read_text(), proc)
        on_node = descendants({raylet}, parents())  # one worker each node holds its CPU
        assert any(
            pid in on_node and cmd.startswith(b"ray::RolloutWorker") for pid, cmd in processes()
        ), out.read_text()
    except BaseException:
        proc.kill()
        raise
    try:
        # The second node is gone, with its workers: a worker outlives its raylet for a while
        # and can go on answering, so the node's processes die together, as with a lost host.
        for pid in on_node | {raylet}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    text = out.read_text()
    assert proc.returncode == 0, err
    batches = [m for m in map(BATCH_LINE.match, text.splitlines()) if m]
    assert [m[1] for m in batches] == ["1", "2", "3"] and all(m[2] == "4" for m in batches)
    # Its game went to the worker that remained; Ray cannot restart it without a free CPU.
    assert re.search(r"note: RolloutWorker \d was lost \(its process or node\)", text), text


def test_a_local_ray_skips_idle_workers_and_metrics_unless_the_user_says(monkeypatch) -> None:
    from pong.run.cluster import local_ray_settings

    monkeypatch.delenv("RAY_prestart_worker_first_driver", raising=False)
    monkeypatch.delenv("RAY_enable_metrics_collection", raising=False)
    local_ray_settings()
    assert os.environ["RAY_prestart_worker_first_driver"] == "0"
    assert os.environ["RAY_enable_metrics_collection"] == "0"
    monkeypatch.setenv("RAY_prestart_worker_first_driver", "1")
    monkeypatch.setenv("RAY_enable_metrics_collection", "1")
    local_ray_settings()
    assert os.environ["RAY_prestart_worker_first_driver"] == "1"
    assert os.environ["RAY_enable_metrics_collection"] == "1"
