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
wait up to a minute on a dead GCS) and kills what is left of that Ray
(``Watchdog.shut_down``): the processes of that Ray session, found by the
files they hold in its directory (``pong.guard.end_session``). Where Ray's own
code ends the driver first, the guard process (``pong.guard``) does that.
Linux only (``/proc``, pidfds); elsewhere nothing is watched.

A cluster's head runs in other processes, out of sight: there Ray's own code
ends the driver (README, "What survives which fault").
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import ray

from pong import guard
from pong.cluster import ClusterError
from pong.guard import ENDED, SAID, end_session, ended
from pong.stops import forget_children, stop_for, watch_children

__all__ = ["RayDiedError", "Watchdog"]

WATCHED = {"raylet": "raylet", "gcs_server": "GCS"}  # Ray's name for each -> ours
POLL_S = 0.2  # between looks, where pidfds are missing


class RayDiedError(ClusterError):
    """A process of the driver's own Ray died; training cannot go on."""


class Watchdog:
    """Watches the raylet and GCS of the local Ray this process started, with a guard
    (``pong.guard``) for when Ray's own code ends this process first.

    Args:
        watched: Ray's name for each process to watch (``raylet``,
            ``gcs_server``) -> its pid.
        session_dir: that Ray's session directory (its processes hold files in it).

    ``Watchdog.fired`` says whether a watchdog of this process saw its Ray die:
    the process should then end with ``os._exit``, since Ray's exit hooks
    would wait on the dead Ray.
    """

    fired = False
    held: list[object] = []  # see hold

    def __init__(self, watched: dict[str, int], session_dir: str) -> None:
        self.watched = watched
        self.session_dir = session_dir
        self.died: RayDiedError | None = None  # what died, once something has
        self.guard: subprocess.Popen | None = None
        self._lock = threading.RLock()  # also taken by _probe, in a signal handler
        self._off = False
        self._wake_r, self._wake_w = os.pipe()  # written by shut_down: the thread ends
        self._thread = threading.Thread(target=self._watch, name="ray-watchdog", daemon=True)

    @classmethod
    def of_local_ray(cls) -> Watchdog | None:
        """A watchdog, not yet started, for the local Ray that ``ray.init`` started in this
        process (the driver's); ``None`` off Linux or where Ray's private record of its
        processes is missing."""
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
        return cls(watched, str(session_dir))

    def start(self, checkpoint: Path) -> None:
        """Watch, and start the guard (``pong/guard.py``, ``python -I``: no Ray, no site),
        for a run that saves to ``checkpoint``."""
        watch_children(self._probe)  # the raylet and GCS are this process's children
        self._thread.start()
        orders = {
            "driver": os.getpid(),
            "session_dir": self.session_dir,
            "watched": {WATCHED[name]: pid for name, pid in self.watched.items()},
            "checkpoint": str(checkpoint),
        }
        with contextlib.suppress(OSError, ValueError, TypeError):  # no guard, then
            self.guard = subprocess.Popen(
                [sys.executable, "-I", guard.__file__],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
            )
            self.guard.stdin.write(json.dumps(orders).encode() + b"\n")
            self.guard.stdin.flush()

    def _watch(self) -> None:
        """The thread: wait until a watched process ends, or ``shut_down``."""
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
                    if ended(pid):
                        self._fire(name)
                        return
                time.sleep(POLL_S)
        finally:
            for fd in fds:
                os.close(fd)

    def _probe(self) -> None:
        """In the main thread, when a child process has ended: was it a watched one? (Its
        SIGCHLD can stop the run before the watching thread gets to run, on a busy machine.)"""
        for name, pid in self.watched.items():
            if ended(pid):
                self._fire(name)
                return

    def _fire(self, name: str, stop: bool = True) -> None:
        with self._lock:
            if self._off or self.died is not None:  # shutting Ray down on purpose, or done
                return
            _hush_ray()
            what = f"the local Ray's {WATCHED[name]} (pid {self.watched[name]}) died"
            self.died = RayDiedError(what)
            Watchdog.fired = True
            if stop:
                stop_for(self.died)

    def check(self) -> RayDiedError | None:
        """What died, looking now (Ray may have raised its own error first); no stop."""
        for name, pid in self.watched.items():
            if self.died is None and ended(pid):
                self._fire(name, stop=False)
        return self.died

    def hold(self, thing: object) -> None:
        """Once Ray has died, keep ``thing`` alive until the process ends: say, an exception
        whose traceback's frames hold arrays read from the object store. Releasing one
        writes to the dead raylet, and for that Ray's own code ends the process at once."""
        if self.check() is not None:
            Watchdog.held.append(thing)

    def shut_down(self) -> None:
        """End this Ray: ``ray.shutdown``, or once it has died (which ``ray.shutdown`` would
        wait on, up to a minute), kill what is left of it. Then dismiss the guard.

        The driver has said how it stopped: should Ray end it now, the guard only ends
        that Ray."""
        self._tell_guard(SAID)
        forget_children()
        with self._lock:
            self._off = True  # from here on, its processes end on purpose
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=5)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.died is None:
            ray.shutdown()
        else:
            end_session(self.session_dir)
        if self.guard is not None:
            self._tell_guard(ENDED)
            with contextlib.suppress(OSError):
                self.guard.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.guard.wait(timeout=5)

    def _tell_guard(self, word: bytes) -> None:
        with contextlib.suppress(OSError, AttributeError):  # a guard that is gone: nothing
            self.guard.stdin.write(word)
            self.guard.stdin.flush()


def _hush_ray() -> None:
    """Ray's own account of its death would bury the driver's one line: its C++ threads log
    each failed call on file descriptor 2, and it relays the dead raylet's last log lines
    to stdout (those may come first). From now on these go nowhere, and this program's
    own lines (``sys.stderr``) to a copy of descriptor 2."""
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
