"""How a run stops: ``Stops`` turns the first SIGINT, SIGTERM or SIGHUP into
``KeyboardInterrupt`` (what Ray's blocking calls let through), at the end of a ``held``
block if inside one, and only counts later ones: a second Ctrl-C cannot cut a save short."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["STOPS", "Stops", "stop_while_loading"]

STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, kill/ray job stop, a lost terminal


class Stops:
    """The stop signals received; ``install`` puts the handler in place for them."""

    def __init__(self) -> None:
        self.received: list[signal.Signals] = []
        self.ending = False  # the run is ending anyway: a signal is only counted
        self.holding = False  # in a ``held`` block: a first stop waits for its end
        self.last_line: str | None = None  # the Done line, held back on a stop (driver.py)

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


def stop_while_loading() -> None:
    """Until ``Stops.install`` (Ray takes ~0.5 s to import), SIGINT or SIGTERM ends the
    program at once with one line, no traceback: nothing has started yet."""

    def stop(signum: int, frame: object) -> None:
        print(f"Interrupted by {signal.Signals(signum).name}.", file=sys.stderr, flush=True)
        os._exit(128 + signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
