"""How a run stops: ``Stops`` turns the first SIGINT, SIGTERM or SIGHUP into
``KeyboardInterrupt`` (what Ray's blocking calls let through), at the end of a ``held``
block if inside one, and only counts later ones: a second Ctrl-C cannot cut a save short."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["STOPS", "Stops", "interrupted", "no_sigterm_lost", "stop_while_loading"]

STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, kill/ray job stop, a lost terminal


class Stops:
    """The stop signals received; ``install`` puts the handler in place for them."""

    def __init__(self) -> None:
        self.received: list[signal.Signals] = []
        self.ending = False  # the run is ending anyway: a signal is only counted
        self.holding = False  # in a ``held`` block: a first stop waits for its end
        self.last_line: str | None = None  # the Done line: driver.py's last on a stop

    def install(self) -> None:
        """Handle ``STOPS`` explicitly (a shell starts background jobs with SIGINT ignored),
        except a SIGHUP that ``nohup`` ignores."""
        for sig in STOPS:
            if sig != signal.SIGHUP or signal.getsignal(sig) != signal.SIG_IGN:
                signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        self.received.append(signal.Signals(signum))
        if len(self.received) == 1 and not (self.ending or self.holding):
            self.ending = True
            raise KeyboardInterrupt

    @contextmanager
    def held(self) -> Iterator[None]:
        """Run the block whole: a first stop inside it takes effect when it ends."""
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
        if self.received and not self.ending:
            self.ending = True
            raise KeyboardInterrupt


def interrupted(received: list[signal.Signals], ending: str = "") -> int:
    """``Interrupted by SIGINT{ending}.`` for the first stop ``received``; the shell's exit
    code for it (130 for SIGINT, 143 for SIGTERM)."""
    stop = received[0] if received else signal.SIGINT
    print(f"Interrupted by {stop.name}{ending}.", file=sys.stderr, flush=True)
    return 128 + stop.value


def stop_while_loading() -> None:
    """Until ``Stops.install`` (Ray takes ~0.5 s to import), SIGINT or SIGTERM ends the
    program at once with one line, no traceback: nothing has started yet."""

    def stop(signum: int, frame: object) -> None:
        os._exit(interrupted([signal.Signals(signum)]))

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


@contextmanager
def no_sigterm_lost() -> Iterator[None]:
    """Around ``ray.init``, whose own SIGTERM handler (``sys.exit``) is in place while Ray
    starts: a SIGTERM it took whose ``SystemExit`` was lost (raised in a fork's callback,
    "Exception ignored") is raised again for the caller's handler once the block ends."""
    ours, seen = signal.getsignal(signal.SIGTERM), []
    if not callable(ours) or threading.current_thread() is not threading.main_thread():
        yield
        return

    def counted(signum: int, frame: object) -> None:
        seen.append(signum)
        ours(signum, frame)

    read, write = os.pipe()  # each signal Python handles writes its number here
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    before = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, counted)
    try:
        yield
    finally:
        signal.set_wakeup_fd(before)
        signal.signal(signal.SIGTERM, ours)
        try:
            delivered = os.read(read, 4096).count(signal.SIGTERM)
        except BlockingIOError:  # no signal at all
            delivered = 0
        os.close(read)
        os.close(write)
    if delivered > len(seen):  # the block ended normally, yet a SIGTERM went to Ray's handler
        signal.raise_signal(signal.SIGTERM)
