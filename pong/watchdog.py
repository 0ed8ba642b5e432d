"""When the driver's own Ray dies under it: stop at once, saved, and leave nothing of it behind.

A local Ray (``ray.init`` without an address) lives in processes the driver
started: the GCS, the raylet (which starts the workers and two agents), a log
monitor, a dashboard and an autoscaler monitor. When the raylet or the GCS
dies, Ray's own code ends the driver with exit status 1 and no line of ours:
about 15 seconds after a raylet, 60 after a GCS (training goes on slowly
meanwhile), at once if the driver is inside an object-store call. Nothing is
saved, and the agents of that Ray may be left running for good.

``Watchdog`` waits on the raylet and the GCS (a pidfd each; without pidfds it
looks 5 times a second). When one dies it stops the run as a first signal
would (``pong.stops.stop_for``: between updates, never inside one; Ray's
blocking calls let it in within 0.1 s), and the driver saves the last
finished update, says which process died, skips ``ray.shutdown`` (it would
wait up to a minute on a dead GCS) and kills what is left of that Ray with
``end_ray``: the processes of that Ray session, found by the files they hold
in its directory. Linux only (``/proc``); elsewhere nothing is watched.

A cluster's head runs in other processes, out of sight: there Ray's own code
ends the driver (README, "What survives which fault").
"""

from __future__ import annotations

import contextlib
import io
import os
import select
import signal
import sys
import threading
import time
from pathlib import Path

from pong.cluster import ClusterError, descendants
from pong.stops import stop_for

__all__ = ["RayDiedError", "Watchdog", "end_session"]

WATCHED = {"raylet": "raylet", "gcs_server": "GCS"}  # Ray's name for each -> ours
POLL_S = 0.2  # between looks, where pidfds are missing


class RayDiedError(ClusterError):
    """A process of the driver's own Ray died; training cannot go on."""


class Watchdog:
    """Watches the raylet and GCS of the local Ray this process started.

    Args:
        watched: Ray's name for each process to watch (``raylet``,
            ``gcs_server``) -> its pid.
        session_dir: that Ray's session directory (its processes name it on
            their command lines).

    ``Watchdog.fired`` says whether a watchdog of this process saw its Ray die:
    the process should then end with ``os._exit``, since Ray's exit hooks
    would wait on the dead Ray.
    """

    fired = False

    def __init__(self, watched: dict[str, int], session_dir: str) -> None:
        self.watched = watched
        self.session_dir = session_dir
        self.died: RayDiedError | None = None  # what died, once something has
        self._lock = threading.Lock()
        self._off = False
        self._wake_r, self._wake_w = os.pipe()  # written by stop: the thread ends
        self._thread = threading.Thread(target=self._watch, name="ray-watchdog", daemon=True)

    @classmethod
    def start_local(cls) -> Watchdog | None:
        """Watch the local Ray that ``ray.init`` started in this process (the driver's);
        ``None`` off Linux or where Ray's private record of its processes is missing."""
        try:
            from ray._private import worker  # private: the node this process started
        except ImportError:
            return None
        node = getattr(worker, "_global_node", None)
        processes = getattr(node, "all_processes", None)
        session_dir = getattr(node, "get_session_dir_path", lambda: None)()
        if not isinstance(processes, dict) or not session_dir or not Path("/proc/self").exists():
            return None
        watched = {}
        for name in WATCHED:
            for info in processes.get(name, []):
                pid = getattr(getattr(info, "process", None), "pid", None)
                if isinstance(pid, int):
                    watched[name] = pid
        if not watched:
            return None
        watchdog = cls(watched, str(session_dir))
        watchdog._thread.start()
        return watchdog

    def _watch(self) -> None:
        """The thread: wait until a watched process ends, or ``stop``."""
        fds: dict[int, str] = {}
        try:
            for name, pid in self.watched.items():
                try:
                    fds[os.pidfd_open(pid)] = name
                except ProcessLookupError:  # gone already
                    self._fire(name)
                    return
            poller = select.poll()
            for fd in [*fds, self._wake_r]:
                poller.register(fd, select.POLLIN)
            ready = [fd for fd, _ in poller.poll() if fd in fds]
            if ready:
                self._fire(fds[ready[0]])
        except (AttributeError, OSError):  # no pidfds here (Linux < 5.3): look now and then
            while not self._off:
                for name, pid in self.watched.items():
                    if _ended(pid):
                        self._fire(name)
                        return
                time.sleep(POLL_S)
        finally:
            for fd in fds:
                os.close(fd)

    def _fire(self, name: str) -> None:
        with self._lock:
            if self._off:  # stopped: the driver is shutting Ray down itself
                return
            _hush_ray()
            what = f"the local Ray's {WATCHED[name]} (pid {self.watched[name]}) died"
            self.died = RayDiedError(what)
            Watchdog.fired = True
            stop_for(self.died)

    def stop(self) -> RayDiedError | None:
        """Stop watching (before ``ray.shutdown`` ends the processes on purpose); what died."""
        with self._lock:
            self._off = True
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        self._thread.join(timeout=5)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        return self.died

    def end_ray(self, seconds: float = 5.0) -> list[int]:
        """Kill what is left of this Ray, instead of ``ray.shutdown``; the pids killed."""
        return end_session(self.session_dir, seconds)


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
    named = {pid for pid in _pids() if any(_uses(pid, mark) for mark in marks)}
    ours = (named | set(descendants(named))) - _ancestors() - {os.getpid()}
    for pid in ours:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    left, deadline = set(ours), time.monotonic() + seconds
    while left and time.monotonic() < deadline:
        for pid in list(left):
            with contextlib.suppress(OSError):
                os.waitpid(pid, os.WNOHANG)  # a child of this process: reaped, not a zombie
            if _ended(pid):
                left.discard(pid)
        if left:
            time.sleep(0.02)
    return sorted(ours)


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


def _hush_ray() -> None:
    """Ray's own account of its death would bury the driver's one line: its C++ threads log
    each failed call on file descriptor 2, and it relays the dead raylet's last log lines.
    From now on these go nowhere, and this program's own lines (``sys.stderr``) to a
    copy of descriptor 2."""
    with contextlib.suppress(AttributeError, ImportError):
        from ray._private import worker  # private: its log and error relay

        worker.print_to_stdstream = lambda *args, **kwargs: None
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.flush()
        kept = os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
        stream = sys.stderr
        sys.stderr = io.TextIOWrapper(
            io.FileIO(kept, "w"),
            encoding=getattr(stream, "encoding", None),
            errors=getattr(stream, "errors", None),
            line_buffering=True,
        )


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _ended(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie has)."""
    stat = _read(Path(f"/proc/{pid}/stat"))
    return not stat or stat.rpartition(b")")[2].split()[0] in (b"Z", b"X")


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
