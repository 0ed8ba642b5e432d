"""How a run stops: a signal ends it between updates, never in the middle of one.

``signals_stop`` turns the first SIGINT, SIGTERM or SIGHUP into
``KeyboardInterrupt``; later ones are only counted, so that an impatient
second Ctrl-C cannot cut short the final checkpoint or Ray's shutdown.
``stop_for`` lets another thread, or a probe that ``watch_children`` runs when
a child process ends, stop the run the same way, for a reason the main thread
then reads with ``stopped_for`` (``pong.watchdog``: the local Ray died).
``held_back`` marks the steps that must happen together (apply an update,
count it, record it): a stop that arrives inside waits until they are done.
``finishing`` says the run is ending anyway: later stops are only counted.
"""

from __future__ import annotations

import _thread
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = [
    "STOPS",
    "finishing",
    "held_back",
    "forget_children",
    "signals_stop",
    "stop_for",
    "stopped_for",
    "watch_children",
]

STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, kill/ray job stop, a lost terminal
# A child process ended (watch_children); also what stop_for raises in the main thread (as a
# flag, not sent): its default is to do nothing, so one that comes late is harmless.
WAKE = signal.SIGCHLD


class _Stops:
    """The signals received, why another thread stopped the run, and whether a stop waits
    for a held-back section to end."""

    def __init__(self) -> None:
        self.received: list[signal.Signals] = []
        self.cause: Exception | None = None  # stop_for's reason
        self.first: signal.Signals | Exception | None = None  # what stopped the run
        self.stopping = False  # a stop was taken (or the run is ending): later ones are counted
        self.holding = 0  # nested held_back sections
        self.waiting = False
        self.probes: list[Callable[[], object]] = []  # see watch_children
        self.unwatched: object = None  # WAKE's handler before watch_children

    def interrupt(self, signum: int, frame: object) -> None:
        self.received.append(signal.Signals(signum))
        self.stop(self.received[-1])

    def wake(self, signum: int, frame: object) -> None:
        if self.cause is None:  # a child process of ours ended: one that stops the run?
            for probe in self.probes:
                probe()  # may call stop_for
        if self.cause is not None:
            self.stop(self.cause)

    def stop(self, reason: signal.Signals | Exception) -> None:
        if self.stopping:
            return
        self.stopping, self.first = True, reason
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
        forget_children()
        _active = None
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def stop_for(cause: Exception) -> None:
    """From any thread: stop the run as a first signal would, because of ``cause``.

    The main thread gets ``KeyboardInterrupt`` (after a held-back section, if in
    one) and finds ``cause`` in ``stopped_for()``. Nothing happens when a stop
    was already taken, or unless ``watch_children`` is in force.
    """
    stops = _active
    if stops is None or stops.stopping or stops.cause is not None:
        return
    stops.cause = cause
    _thread.interrupt_main(WAKE)  # runs stops.wake in the main thread, as a signal would


def watch_children(probe: Callable[[], object]) -> None:
    """From the main thread: until ``forget_children`` (or the handlers' end), call ``probe``
    in the main thread whenever a child process of this one ends (SIGCHLD), and let
    ``stop_for`` stop the run; ``probe`` may call ``stop_for``. Sooner than a thread that
    waits for the child: no other thread need run first.

    Only for as long as it matters: while a SIGCHLD handler is in place, a child's end can
    interrupt system calls of every thread, Ray's too (those that restart, restart).
    """
    stops = _active
    if stops is None:
        return
    if not stops.probes:
        stops.unwatched = signal.signal(WAKE, stops.wake)
        signal.siginterrupt(WAKE, False)
    stops.probes.append(probe)


def forget_children() -> None:
    """From the main thread: end ``watch_children`` (before children end on purpose)."""
    stops = _active
    if stops is not None and stops.probes:
        signal.signal(WAKE, stops.unwatched)
        stops.probes.clear()


def stopped_for() -> Exception | None:
    """The cause ``stop_for`` stopped the run for, if that was the first stop."""
    first = _active.first if _active is not None else None
    return first if isinstance(first, Exception) else None


def finishing() -> None:
    """The run is ending anyway (its last steps, Ray's shutdown): a later stop is only counted."""
    if _active is not None:
        _active.stopping = True


@contextmanager
def held_back() -> Iterator[None]:
    """Run the block whole: a stop inside it takes effect when it ends."""
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
