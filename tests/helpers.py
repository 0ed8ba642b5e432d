"""Helpers shared by the tests: running ``driver.py`` as a user would, stand-in workers."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from pong.core.schedule import Dealer
from pong.core.train import Trainer
from pong.run.config import Config

ROOT = Path(__file__).resolve().parents[1]

# The per-update line, exactly as the README shows it.
BATCH_LINE = re.compile(
    r"^Batch (\d+) computed (\d+) rollouts \((\d+) steps\) in (\d+\.\d\d) seconds"
    r" \((\d+) steps/s\), running mean is (-?\d+\.\d\d)$"
)


def free_port() -> int:
    """A loopback port nobody listens on (just now)."""
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """``n`` loopback ports nobody listens on (just now), all different: each held until all
    are found (one at a time, the kernel may give the same port twice)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(n)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def parents() -> dict[int, int]:
    """The parent of every process on this machine (pid -> parent pid), as /proc shows them."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            found[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    return found


def descendants(roots: set[int], parent_of: dict[int, int]) -> set[int]:
    """The processes ``roots`` started, those they started, and so on (``roots`` left out)."""
    found = set()
    while True:
        children = {pid for pid, parent in parent_of.items() if parent in roots | found}
        if children <= found:
            return found - roots
        found |= children


def rollout_workers(roots: set[int]) -> list[int]:
    """PIDs of the live RolloutWorker processes that descend from the processes ``roots``
    (Ray sets their titles to ray::RolloutWorker...), never anyone else's."""
    ours = descendants(roots, parents())
    return [
        pid for pid, title in processes() if pid in ours and title.startswith(b"ray::RolloutWorker")
    ]


def stop_processes_of(*temp_dirs: Path | str, seconds: float = 2) -> None:
    """End the Ray processes started with ``--temp-dir`` one of ``temp_dirs`` (or whose
    command line holds one of them), and all their children: SIGTERM, and SIGKILL for those
    still there ``seconds`` later.

    Only those: ``ray stop`` would end every Ray on the machine, someone else's too.
    """
    stop_processes({
        pid for pid, cmdline in processes() if any(str(d).encode() in cmdline for d in temp_dirs)
    }, seconds)  # fmt: skip


def stop_processes(pids: set[int], seconds: float = 2) -> None:
    """End processes ``pids`` and all their children: SIGTERM, and SIGKILL for those still
    there ``seconds`` later."""
    parent_of, ours = parents(), set(pids)
    caller = os.getpid()  # never this process or what started it, whatever they were given
    while caller in parent_of:
        ours.discard(caller)
        caller = parent_of[caller] if parent_of[caller] != caller else 0
    ours |= descendants(ours, parent_of)  # their workers, and theirs
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in ours:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in ours):
            time.sleep(0.2)


def token_env(directory: Path) -> dict[str, str]:
    """This process's environment without its RAY_ settings, plus token authentication with a
    new token of its own (written to ``directory/auth_token``), as docs/cluster.md has it, and
    no usage stats: for a cluster the tests start and the clients that join it."""
    token = directory / "auth_token"
    token.write_text(secrets.token_hex(32))
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("RAY_")},
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token),
        "RAY_USAGE_STATS_ENABLED": "0",
    }


@contextlib.contextmanager
def ray_cluster(cpus: int = 2) -> Iterator[tuple[str, dict[str, str]]]:
    """A Ray of ``cpus`` CPUs started with ``ray start``, for driver runs to join with
    ``--address`` and tests to join with ``ray.init`` (each then starts no Ray of its own:
    about 5 CPU-seconds less).

    Yields ``(address, env)``: the env its clients run with. Token authentication is off
    (``ray start --head`` would turn it on wherever a token exists), so that this process
    can join it too: Ray reads the token settings once, when it is imported. The clusters of
    tests/system/test_cluster.py and test_hosts.py have it on. Its files are in a temp dir
    of its own, by which it is stopped: no other Ray is touched.
    """
    temp_dir = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # short: Ray's socket paths
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    # As driver.py's local Ray (pong.run.cluster.local_ray_settings): it may idle through a
    # whole test session, and every process of it that wakes takes time from the tests.
    env.update(RAY_prestart_worker_first_driver="0", RAY_enable_metrics_collection="0")
    address = f"127.0.0.1:{free_port()}"
    try:
        head = subprocess.run(
            [str(Path(sys.executable).parent / "ray"), "start", "--head",
             f"--port={address.rpartition(':')[2]}", "--node-ip-address=127.0.0.1",
             f"--num-cpus={cpus}", "--include-dashboard=false", f"--temp-dir={temp_dir / 'ray'}"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert head.returncode == 0, head.stdout + head.stderr
        yield address, env
    finally:
        stop_processes_of(temp_dir, client_server(address))
        shutil.rmtree(temp_dir, ignore_errors=True)


def client_server(address: str) -> str:
    """What the command line of the Ray Client server of the head at ``address`` holds: its
    GCS port (free when chosen, so this head's alone). ``ray start`` leaves that process with
    no link to its temp dir, and it ends itself only a minute or two after its GCS."""
    return f":{address.rpartition(':')[2]}\0--host="


# Ray's documented health-check settings: a node that stops answering is declared dead in
# about 3 s instead of 15 to 30 (Ray 2.60 defaults: every 3 s, 10 s to answer, 5 misses).
HEALTH = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


def start_driver(
    args: list[str], out: Path, env: dict[str, str] | None = None, prefix=()
) -> subprocess.Popen:
    """``driver.py --seed=0 ARGS`` in the background (a local Ray of 2 CPUs unless ``env``),
    after the command ``prefix`` (such as ``ip netns exec NS``); its output in ``out``."""
    local = env is None
    if local:
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        args = ["--num-cpus=2", *args]
    return subprocess.Popen(
        [*prefix, sys.executable, "driver.py", "--seed=0", *args],
        cwd=ROOT,
        env=env,
        stdout=open(out, "w"),
        stderr=subprocess.PIPE,
        text=True,
    )


def ray_status_until(holds, address: str, env: dict[str, str], prefix=(), seconds=60) -> None:
    """Wait until ``holds(text)`` for what ``ray status`` says of the cluster at ``address``
    (run after ``prefix``, such as a network namespace's); fail with its last text."""
    command = [*prefix, str(Path(sys.executable).parent / "ray"), "status", f"--address={address}"]
    deadline = time.monotonic() + seconds
    while True:
        said = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60).stdout
        if holds(said):
            return
        assert time.monotonic() < deadline, said
        time.sleep(0.5)


def wait_for(predicate, proc: subprocess.Popen, seconds: float = 120) -> None:
    """Wait until ``predicate()`` holds; fail (with ``proc``'s stderr) if ``proc`` ends first or
    ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.1)


def catches(pid: int, sig: signal.Signals) -> bool:
    """Whether process ``pid`` has a handler of its own for ``sig`` (its SigCgt mask): the sign
    that a program is past Python's start and into its own code."""
    with open(f"/proc/{pid}/status") as f:
        [mask] = [line.split()[1] for line in f if line.startswith("SigCgt:")]
    return bool(int(mask, 16) >> (sig - 1) & 1)


def spawn_driver(args: list[str], env: dict[str, str], text: bool = True) -> subprocess.Popen:
    """``python driver.py ARGS`` from the repository root, started; stdout and stderr piped."""
    return subprocess.Popen(
        [sys.executable, "driver.py", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=text,
    )


def run_driver(args: list[str], env: dict[str, str], timeout: float = 240, prefix=()):
    """``python driver.py ARGS`` from the repository root, after the command ``prefix`` (such
    as ``ip netns exec NS``); the finished process."""
    return subprocess.run(
        [*prefix, sys.executable, "driver.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# A one-game trainer on the toy env, quick to start.
TOY = Config(batch_size=1, env="PongToy/Catch-v0", seed=0)


def release(trainer: Trainer) -> None:
    """End ``trainer``'s workers, and wait until Ray says each is dead: each holds a CPU
    (stand-ins too), which a later trainer's workers may be waiting for."""
    for actor in trainer.dealer.workers:
        ray.kill(actor)
    for actor in trainer.dealer.workers:
        with contextlib.suppress(ray.exceptions.RayActorError):
            ray.get(actor.describe.remote(), timeout=30)


def with_workers(trainer: Trainer, workers: list) -> Trainer:
    """``trainer`` with its RolloutWorkers swapped for stand-ins."""
    release(trainer)
    trainer.dealer = Dealer(workers, trainer.seed, expect=len(workers))
    return trainer


def processes():
    """(pid, command line) of every process on this machine, as /proc shows them."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                yield int(entry.name), (entry / "cmdline").read_bytes()
            except OSError:
                continue


def started(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot), or ``None`` once it has ended.

    A zombie has ended; a pid used again by a later process has another start time.
    """
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def rows_of(run_dir: Path, checkpoint) -> None:
    """The metrics of a run that saved ``checkpoint``, for a test that makes one alone: a row
    per update, the last with its games, steps and running mean, and a row per game."""
    from pong.run.metrics import MetricsLog

    log, updates, done = MetricsLog(run_dir), checkpoint.updates, 0
    for n in range(1, updates + 1):
        games, steps = checkpoint.games * n // updates, checkpoint.steps * n // updates
        row = dict(update=n, games=games, steps=steps, seconds=1.0, steps_per_s=1.0)
        row |= dict.fromkeys(("running_mean", "score_mean", "score_min", "score_max"), -21.0)
        if n == updates and checkpoint.running_mean is not None:
            row["running_mean"] = checkpoint.running_mean
        played = [dict(game=g, update=n, score=-21.0, steps=1) for g in range(done + 1, games + 1)]
        log.write(row, played)
        done = games
    log.close()


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]


@contextlib.contextmanager
def nobody_s_folder() -> Iterator[Path]:
    """A new folder under /tmp that any user may enter (tmp_path's parents are root's alone),
    for commands run as nobody with ``NOBODY`` (root reads anything); a skip where that cannot
    be (not root, no setpriv, or this Python unreadable to nobody)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("runs a command as another user (setpriv): needs root")
    if subprocess.run([*NOBODY, "-c", "import pong"], cwd=ROOT, capture_output=True).returncode:
        pytest.skip("this Python or checkout is not readable by another user")
    folder = Path(tempfile.mkdtemp(prefix="pong-nobody-"))
    try:
        folder.chmod(0o777)
        yield folder
    finally:
        shutil.rmtree(folder)
