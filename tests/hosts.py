"""Separate network hosts on one machine, for Ray clusters whose nodes have addresses of their
own: Linux network namespaces joined by veth pairs to a bridge in the head's namespace. Used
by tests/system/test_hosts.py and benchmarks/hosts_cost.py; needs root (``ip netns``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

SUBNET = "10.77.0"  # the head .1, other hosts .2, .3, ...


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def cannot_make_namespaces() -> str | None:
    """Why namespaces cannot be made here, or ``None``."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns)"
    if shutil.which("ip") is None:
        return "no ip command (iproute2)"
    probe = f"pongprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None if made.returncode == 0 else f"ip netns add failed: {made.stderr.strip()}"


class Hosts:
    """Network namespaces of this process: ``head`` holds the bridge, others plug into it."""

    def __init__(self, prefix: str = "pong") -> None:
        self.prefix = f"{prefix}{os.getpid()}"
        self.made: list[str] = []
        self.cut_off: set[str] = set()  # the hosts whose link ``cut`` took down

    def ns(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def run(self, name: str) -> list[str]:
        """The command prefix that runs in host ``name``."""
        return ["ip", "netns", "exec", self.ns(name)]

    def add(self, name: str, host: int) -> list[str]:
        """Host ``name`` at address ``SUBNET.host`` (1: the head, made first); the command
        prefix that runs in it."""
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
        return self.run(name)

    def cut(self, name: str) -> None:
        """Take host ``name``'s link down: the network between it and the others fails."""
        _ip("-n", self.ns(name), "link", "set", "eth0", "down")
        self.cut_off.add(name)

    def shape(self, name: str, host: int, delay_ms: float = 0, rate_mbit: float = 0) -> None:
        """Shape the link between host ``name`` (at ``SUBNET.host``) and the others, on both
        of its ends: every packet delayed ``delay_ms`` each way (netem), or the link limited
        to ``rate_mbit`` each way (tbf); neither: as it was.

        Raises:
            subprocess.CalledProcessError: the kernel lacks the queueing discipline (tc:
                "Specified qdisc kind is unknown").
        """
        qdisc = (
            ["netem", "delay", f"{delay_ms}ms"]
            if delay_ms
            else ["tbf", "rate", f"{rate_mbit}mbit", "burst", "1mbit", "latency", "50ms"]
            if rate_mbit
            else []
        )
        for ns, dev in ((self.ns(name), "eth0"), (self.ns("head"), f"p{host}")):
            tc = ["ip", "netns", "exec", ns, "tc", "qdisc"]
            subprocess.run([*tc, "del", "dev", dev, "root"], capture_output=True, timeout=30)
            if qdisc:
                subprocess.run([*tc, "add", "dev", dev, "root", *qdisc],
                               check=True, capture_output=True, text=True, timeout=30)  # fmt: skip

    def processes(self) -> set[int]:
        """The processes running in these hosts: each one a test started, or what they
        started (a Ray head's Client server, which no temp dir names, among them)."""
        hosts = {os.stat(f"/run/netns/{ns}").st_ino for ns in self.made}
        found = set()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):  # gone meanwhile
                if os.stat(f"/proc/{pid}/ns/net").st_ino in hosts:
                    found.add(int(pid))
        return found

    def remove(self) -> None:
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def empty_venv(venv: Path) -> str:
    """The hosts' Python: a venv that holds no packages but sees this one's (a .pth file).
    A job's runtime_env copies the venv of its node's Python: kilobytes, not this one's 1 GB
    (about 4 s a host)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    [site] = venv.glob("lib/python*/site-packages")
    ours = sysconfig.get_path("purelib")
    (site / "this_project_venv.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return str(venv / "bin" / "python")


PORT, S3_PORT = 6379, 9000  # the head's GCS and the S3 server, on the head's address
# The S3 server in a URI's query: pyarrow reads AWS_ENDPOINT_URL too, but as a virtual host
# (the bucket's name before the address), which no host here resolves.
S3_SERVER = f"endpoint_override={SUBNET}.1:{S3_PORT}&scheme=http"
S3_KEYS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
S3_KEYS["AWS_DEFAULT_REGION"] = "us-east-1"


@contextlib.contextmanager
def sweep_hosts(tmp: Path, env: dict[str, str]) -> Iterator[tuple[Hosts, str, Path]]:
    """A head (1 CPU, an S3 server with the bucket ``sweeps``) and a worker host (1 CPU)
    whose ``disk``, a path the head has too, is a private tmpfs: hosts that share no disk.
    Yields the hosts, the head's address and ``disk``; ends every process in them."""
    ray = str(Path(sys.executable).parent / "ray")
    disk = tmp / "disk"
    disk.mkdir()
    temp_dirs = [Path(tempfile.mkdtemp(prefix="s", dir="/dev/shm")) for _ in range(2)]
    net, python = Hosts(), empty_venv(tmp / "venv")
    env = {**env, **S3_KEYS}
    start = [python, ray, "start", "--num-cpus=1", "--disable-usage-stats"]
    try:
        head = net.add("head", 1)
        subprocess.run([*head, *start, "--head", f"--port={PORT}", f"--temp-dir={temp_dirs[0]}",
                        f"--node-ip-address={SUBNET}.1", "--include-dashboard=false"],
                       env=env, check=True, capture_output=True, timeout=120)  # fmt: skip
        subprocess.Popen([*head, python, "-m", "moto.server", "-H", f"{SUBNET}.1", "-p",
                          str(S3_PORT)], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)  # fmt: skip
        worker = [*start, f"--address={SUBNET}.1:{PORT}", f"--node-ip-address={SUBNET}.2",
                  f"--temp-dir={temp_dirs[1]}"]  # fmt: skip
        subprocess.run(
            [*net.add("worker", 2), "unshare", "--mount", "--propagation", "private", "sh", "-c",
             'mount -t tmpfs disk "$0" && exec "$@"', str(disk), *worker],
            env=env, check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        make = (
            "import pyarrow.fs as f; f.FileSystem.from_uri("
            f"'s3://sweeps?{S3_SERVER}&allow_bucket_creation=true')[0].create_dir('sweeps')"
        )
        deadline = time.monotonic() + 60
        while subprocess.run([*head, python, "-c", make], env=env, capture_output=True).returncode:
            assert time.monotonic() < deadline, "the S3 server did not answer"
            time.sleep(0.5)
        yield net, f"{SUBNET}.1:{PORT}", disk
    finally:
        from tests.helpers import stop_processes

        stop_processes(net.processes())  # Ray's, and the S3 server
        net.remove()
        for temp_dir in temp_dirs:
            shutil.rmtree(temp_dir, ignore_errors=True)
