"""The guard of a local Ray: ends that Ray when the driver itself could not.

Ray's own code can end the driver at once, without a line of Python run: when
the raylet dies while the driver is inside an object-store call (putting the
model, reading a gradient: a few milliseconds of an update, more of a short
one, where ``pong.watchdog`` cannot get in first), and when the driver is
killed (``kill -9``, the out-of-memory killer). That Ray's two agents are then
left running for good.

So a driver that starts a local Ray also starts this script, standard library
only (``python -I pong/guard.py``: it starts in milliseconds, without Ray),
which lives as long as the driver. It reads on its stdin one JSON line (the
driver's pid, that Ray's session directory, the raylet's and GCS's pids and
the run's checkpoint) and waits. A driver that has ended its Ray itself says
``ended`` before it exits, and the guard goes quietly. Otherwise, when the
driver's end closes its stdin, the guard kills what is left of that Ray
(``end_session``) and, if the raylet or GCS died while the driver still ran
and the driver had not yet said how it stopped (``said``), says so in one
line. It ignores SIGINT and SIGHUP, which a terminal sends the driver's whole
process group: stopping on those is the driver's business. Linux only
(``/proc``, pidfds).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path

__all__ = ["ENDED", "SAID", "descendants", "end_session", "guard"]

SAID = b"said\n"  # the driver has said how it stopped; it goes on to end its Ray
ENDED = b"ended\n"  # the driver's last word: it has ended its Ray itself


def guard(stdin: int = 0) -> int:
    """The guard's life, reading its orders from file descriptor ``stdin``; its exit code."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    reader = os.fdopen(stdin, "rb", buffering=0)
    try:
        orders = json.loads(reader.readline())
        driver, session_dir = int(orders["driver"]), str(orders["session_dir"])
        watched = {str(name): int(pid) for name, pid in orders["watched"].items()}
        checkpoint = str(orders["checkpoint"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return 2  # no orders (the driver ended before it gave them): nothing to guard
    died_first, said = _wait(reader.fileno(), driver, watched)
    if said.endswith(ENDED):
        return 0
    end_session(session_dir)
    if died_first is not None and SAID not in said:
        kept = (
            f"the updates after its last checkpoint ({checkpoint}) are lost"
            if os.path.exists(checkpoint)
            else "nothing was saved"
        )
        print(
            f"driver.py: error: the local Ray's {died_first} (pid {watched[died_first]}) died and"
            f" Ray's own code ended the driver (pid {driver}) at once; {kept}; ended the rest"
            " of that Ray",
            file=sys.stderr,
            flush=True,
        )
    return 1


def _wait(stdin: int, driver: int, watched: dict[str, int]) -> tuple[str | None, bytes]:
    """Read ``stdin`` to its end; meanwhile note which watched process, if any, ended while
    ``driver`` still ran. Returns that process's name and what was read."""
    fds: dict[int, str] = {}
    driver_fd = None
    with contextlib.suppress(AttributeError, OSError):
        driver_fd = os.pidfd_open(driver)
        for name, pid in watched.items():
            fds[os.pidfd_open(pid)] = name
    poller = select.poll()
    for fd in [stdin, *fds]:
        poller.register(fd, select.POLLIN | select.POLLHUP)
    died_first, said = None, b""
    while True:
        ready = {fd for fd, _ in poller.poll()}
        for fd in ready & set(fds):
            poller.unregister(fd)
            if died_first is None and not _readable(driver_fd):
                died_first = fds[fd]
        if stdin in ready:
            chunk = os.read(stdin, 4096)
            said += chunk
            if not chunk or said.endswith(ENDED):
                break
    for fd in [*fds, driver_fd]:
        if fd is not None:
            os.close(fd)
    return died_first, said


def _readable(fd: int | None) -> bool:
    """Whether pidfd ``fd``'s process has ended (``None``: not known, so taken as ended)."""
    if fd is None:
        return True
    return bool(select.select([fd], [], [], 0)[0])


def end_session(session_dir: str, seconds: float = 5.0) -> list[int]:
    """Kill the processes of the Ray session in ``session_dir`` and wait until they are gone
    (at most ``seconds``); the pids killed.

    Its processes name the directory on their command lines (the GCS, the raylet and
    the other processes ``ray.init`` starts) or hold files open in it (every one,
    agents and workers too, whose command lines Ray rewrites, and which outlive a
    raylet that dies); and what they started. Never this process or one it runs
    under, never another Ray's.
    """
    marks = {session_dir.rstrip("/"), os.path.realpath(session_dir)}
    spared = _ancestors() | {os.getpid()}
    named = {pid for pid in _pids() if any(_uses(pid, mark) for mark in marks)} - spared
    ours = (named | set(descendants(named))) - spared
    for pid in ours:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    left, deadline = set(ours), time.monotonic() + seconds
    while left and time.monotonic() < deadline:
        for pid in list(left):
            with contextlib.suppress(OSError):
                os.waitpid(pid, os.WNOHANG)  # a child of this process: reaped, not a zombie
            if ended(pid):
                left.discard(pid)
        if left:
            time.sleep(0.02)
    return sorted(ours)


def descendants(roots: Iterable[int]) -> list[int]:
    """The processes ``roots`` started, those they started, and so on (``roots`` left out).

    Linux only (``/proc``); elsewhere none.
    """
    children: dict[int, list[int]] = {}
    for pid in _pids():
        stat = _read(Path(f"/proc/{pid}/stat"))
        if stat:
            parent = int(stat.rpartition(b")")[2].split()[1])  # the field after the state
            children.setdefault(parent, []).append(pid)
    ours, todo = [], [child for root in roots for child in children.get(root, [])]
    while todo:
        pid = todo.pop()
        ours.append(pid)
        todo.extend(children.get(pid, []))
    return ours


def ended(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie has)."""
    stat = _read(Path(f"/proc/{pid}/stat"))
    return not stat or stat.rpartition(b")")[2].split()[0] in (b"Z", b"X")


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").glob("[0-9]*")]


def _uses(pid: int, session_dir: str) -> bool:
    """Whether process ``pid`` names ``session_dir`` on its command line or has a file in it
    open (only this user's processes can be seen so)."""
    cmdline = _read(Path(f"/proc/{pid}/cmdline")) + b"\0"
    if any(f"{session_dir}{end}".encode() in cmdline for end in ("/", "\0")):
        return True
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(session_dir + "/"):
                return True
    return False


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _ancestors() -> set[int]:
    """This process's parent, its parent, and so on."""
    found, pid = set(), os.getpid()
    while pid > 1:
        stat = _read(Path(f"/proc/{pid}/stat"))
        if not stat:
            break
        pid = int(stat.rpartition(b")")[2].split()[1])
        found.add(pid)
    return found


if __name__ == "__main__":
    sys.exit(guard())
