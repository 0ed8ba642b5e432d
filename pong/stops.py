"""How a run stops: a signal ends it between updates, never in the middle of one.

``signals_stop`` turns the first SIGINT, SIGTERM or SIGHUP into
``KeyboardInterrupt``; later ones are only counted, so that an impatient
second Ctrl-C cannot cut short the final checkpoint or Ray's shutdown.
``held_back`` marks the steps that must happen together (apply an update,
count it, record it): a signal that arrives inside waits until they are done.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["STOPS", "held_back", "signals_stop"]

STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, kill/ray job stop, a lost terminal


class _Stops:
    """The signals received, and whether one waits for a held-back section to end."""

    def __init__(self) -> None:
        self.received: list[signal.Signals] = []
        self.holding = 0  # nested held_back sections
        self.waiting = False

    def interrupt(self, signum: int, frame: object) -> None:
        self.received.append(signal.Signals(signum))
        if len(self.received) > 1:
            return
        if self.holding:
            self.waiting = True
            return
        # KeyboardInterrupt, not an exception of our own: Ray's blocking calls
        # turn anything else raised by a signal handler into a SystemError.
        raise KeyboardInterrupt


_active: _Stops | None = None


@contextmanager
def signals_stop() -> Iterator[list[signal.Signals]]:
    """Install the handlers (explicitly: a shell starts background jobs with SIGINT
    ignored); yields the signals received. A SIGHUP ignored by ``nohup`` stays
    ignored. The previous handlers come back on exit."""
    global _active
    stops = _Stops()
    sigs = [s for s in STOPS if s != signal.SIGHUP or signal.getsignal(s) != signal.SIG_IGN]
    previous = {sig: signal.signal(sig, stops.interrupt) for sig in sigs}
    _active = stops
    try:
        yield stops.received
    finally:
        _active = None
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def held_back() -> Iterator[None]:
    """Run the block whole: a stop signal inside it takes effect when it ends."""
    stops = _active
    if stops is None:  # no handlers of ours (a library call, a test): nothing to hold
        yield
        return
    stops.holding += 1
    try:
        yield
    finally:
        stops.holding -= 1
    if stops.waiting and not stops.holding:
        stops.waiting = False
        raise KeyboardInterrupt
