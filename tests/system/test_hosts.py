"""A Ray cluster of separate network hosts: Linux network namespaces, each node with its own
address, joined by veth pairs to a bridge in the head's namespace. The driver runs on the head
and joins with ``--address``, as on a real cluster; the worker node is cut off mid-run, and a
node joins mid-run. Needs root (``ip netns``); skipped otherwise."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers import BATCH_LINE, run_driver, stop_processes_of
from tests.system.test_faults import start_driver, wait_for

pytestmark = [pytest.mark.ray, pytest.mark.cluster]

RAY = str(Path(sys.executable).parent / "ray")
PORT = 6379  # the head's GCS; each namespace has ports of its own
SUBNET = "10.77.0"  # head .1, worker node .2, the node that joins .3
# The toy, long enough for a node to join mid-run (about 20 s); every run here has these flags
# (--seed=3 after start_driver's --seed=0, so it wins), so each checkpoint is compared with one
# run on one machine.
TOY = ["--env=PongToy/Catch-v0", "--batch-size=2", "--iterations=300", "--seed=3"]
# Ray's documented health-check settings: a node that stops answering is declared dead in
# about 3 s instead of 30.
HEALTH = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Hosts:
    """Network namespaces of this test run: ``head`` holds the bridge, others plug into it."""

    def __init__(self) -> None:
        self.prefix = f"pong{os.getpid()}"
        self.made: list[str] = []

    def ns(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def add(self, name: str, host: int) -> list[str]:
        """Namespace ``name`` at address ``SUBNET.host``; the command prefix that runs in it."""
        ns = self.ns(name)
        _ip("netns", "add", ns)
        self.made.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        if host == 1:
            _ip("-n", ns, "link", "add", "br0", "type", "bridge")
            _ip("-n", ns, "addr", "add", f"{SUBNET}.1/24", "dev", "br0")
            _ip("-n", ns, "link", "set", "br0", "up")
        else:
            head = self.ns("head")
            _ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", f"p{host}",
                "netns", head)  # fmt: skip
            _ip("-n", ns, "addr", "add", f"{SUBNET}.{host}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", head, "link", "set", f"p{host}", "master", "br0")
            _ip("-n", head, "link", "set", f"p{host}", "up")
        # A default route, so that Ray finds this host's address (it asks which one would be
        # used to reach the outside); nothing is sent there.
        _ip("-n", ns, "route", "add", "default", "via" if host > 1 else "dev",
            f"{SUBNET}.1" if host > 1 else "br0")  # fmt: skip
        return ["ip", "netns", "exec", ns]

    def cut(self, name: str) -> None:
        """Take host ``name``'s link down: the network between it and the others fails."""
        _ip("-n", self.ns(name), "link", "set", "eth0", "down")

    def remove(self) -> None:
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def _can_make_namespaces() -> str | None:
    """Why namespaces cannot be made here, or ``None``."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns)"
    if shutil.which("ip") is None:
        return "no ip command (iproute2)"
    probe = f"pongprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None if made.returncode == 0 else f"ip netns add failed: {made.stderr.strip()}"


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    """Head (1 CPU) and a worker node (1 CPU) on separate hosts; a one-machine run to compare
    with. Everything started is ended by its temp dir, and the namespaces removed."""
    reason = _can_make_namespaces()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("hosts")
    temp_dir = Path(tempfile.mkdtemp(prefix="h", dir="/tmp"))  # short: Ray's socket paths
    token = tmp / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RAY_")},
        "RAY_AUTH_MODE": "token",  # as docs/cluster.md has it
        "RAY_AUTH_TOKEN_PATH": str(token),
        "RAY_USAGE_STATS_ENABLED": "0",
        **HEALTH,
    }
    net = Hosts()
    try:
        in_head, in_worker = net.add("head", 1), net.add("worker", 2)
        start = [RAY, "start", "--num-cpus=1", "--disable-usage-stats", f"--temp-dir={temp_dir}"]
        head = subprocess.run(
            [*in_head, *start, "--head", f"--port={PORT}", f"--node-ip-address={SUBNET}.1",
             "--include-dashboard=false"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert head.returncode == 0, head.stdout + head.stderr
        address = f"{SUBNET}.1:{PORT}"
        node = subprocess.run(
            [*in_worker, *start, f"--address={address}", f"--node-ip-address={SUBNET}.2"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert node.returncode == 0, node.stdout + node.stderr
        alone = run_driver([*TOY, "--num-cpus=1", f"--run-dir={tmp / 'alone'}"], env)
        assert alone.returncode == 0, alone.stderr
        alone = (tmp / "alone" / "checkpoint.safetensors").read_bytes()
        yield net, in_head, address, env, alone, start
    finally:
        stop_processes_of(temp_dir)
        net.remove()
        shutil.rmtree(temp_dir, ignore_errors=True)


def _batches(text: str) -> list[tuple[str, str]]:
    """(update, games) of each update's line."""
    return [(m[1], m[2]) for m in map(BATCH_LINE.match, text.splitlines()) if m]


def test_one_worker_per_host_with_the_bytes_of_one_machine(hosts, tmp_path) -> None:
    _, in_head, address, env, alone, _ = hosts
    run = tmp_path / "run"
    proc = run_driver([*TOY, f"--address={address}", f"--run-dir={run}"], env, prefix=in_head)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"Running on the Ray cluster at {address} (2 nodes, 2 CPUs)")
    assert lines[2].startswith(
        f"Started 2 of 2 RolloutWorker actors (one CPU each) on 2 nodes (1 + 1: {SUBNET}.1,"
        f" {SUBNET}.2)"
    ) or lines[2].startswith(
        f"Started 2 of 2 RolloutWorker actors (one CPU each) on 2 nodes (1 + 1: {SUBNET}.2,"
        f" {SUBNET}.1)"
    ), lines[2]
    assert len(_batches(proc.stdout)) == 300 and "Traceback" not in proc.stderr
    assert (run / "checkpoint.safetensors").read_bytes() == alone
    last = (run / "updates.csv").read_text().splitlines()[-1]
    assert last.endswith(f"{SUBNET}.1=1 {SUBNET}.2=1"), last  # each host played a game


def test_a_host_cut_off_mid_run_leaves_every_update_full(hosts, tmp_path) -> None:
    """Last but one: it cuts the worker node off for good."""
    net, in_head, address, env, alone, _ = hosts
    run = tmp_path / "run"
    out = tmp_path / "out.txt"
    proc = start_driver([*TOY, f"--address={address}", f"--run-dir={run}"], out, env, in_head)
    try:
        wait_for(lambda: "Batch 3 " in out.read_text(), proc)
        net.cut("worker")
        _, err = proc.communicate(timeout=150)
    finally:
        proc.kill()
    text = out.read_text()
    assert proc.returncode == 0, err
    assert _batches(text) == [(str(n), "2") for n in range(1, 301)]  # every update full
    assert "Traceback" not in err and "Traceback" not in text
    assert re.search(r"note: RolloutWorker \d was lost \(its process or node\)", text), text
    assert (run / "checkpoint.safetensors").read_bytes() == alone


def test_a_host_that_joins_mid_run_gets_a_worker_that_plays(hosts, tmp_path) -> None:
    """Two workers asked for, one CPU on the cluster (the cut-off node is gone): the second
    waits, and plays once a new host joins."""
    net, in_head, address, env, alone, start = hosts
    run = tmp_path / "run"
    out, args = tmp_path / "out.txt", [*TOY, "--workers=2", f"--address={address}"]
    proc = start_driver([*args, f"--run-dir={run}"], out, env, in_head)
    try:
        wait_for(lambda: "Batch 1 " in out.read_text(), proc)
        assert "Started 1 of 2 RolloutWorker actors" in out.read_text()
        joined = subprocess.run(
            [*net.add("joiner", 3), *start, f"--address={address}",
             f"--node-ip-address={SUBNET}.3"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert joined.returncode == 0, joined.stdout + joined.stderr
        _, err = proc.communicate(timeout=150)
    finally:
        proc.kill()
    text = out.read_text()
    assert proc.returncode == 0, err
    assert re.search(rf"note: RolloutWorker \d is up on node {SUBNET}\.3; it plays from", text)
    played = (run / "updates.csv").read_text()
    assert f"{SUBNET}.3=" in played  # the new host played games
    assert (run / "checkpoint.safetensors").read_bytes() == alone
