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

    def __init__(self) -> None:
        self.prefix = f"pong{os.getpid()}"
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
