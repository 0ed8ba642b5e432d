"""How a run stops: a signal ends it between updates, never in the middle of one.

``signals_stop`` turns the first SIGINT, SIGTERM or SIGHUP into
``KeyboardInterrupt``; later ones are only counted, so that an impatient
second Ctrl-C cannot cut short the final checkpoint or Ray's shutdown.
``stop_for`` lets another thread, or a probe that ``on_child_exit`` runs when
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
    "on_child_exit",
    "signals_stop",
    "stop_for",
    "stopped_for",
]

STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, kill/ray job stop, a lost terminal
# What ``stop_for`` raises in the main thread (as a flag, not sent to the process): a
# signal whose default is to do nothing, so one that comes late or from elsewhere is harmless.
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
        self.probes: list[Callable[[], object]] = []  # see on_child_exit

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
    previous[WAKE] = signal.signal(WAKE, stops.wake)
    signal.siginterrupt(WAKE, False)  # a child that ends interrupts no system call
    _active = stops
    try:
        yield stops.received
    finally:
        _active = None
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def stop_for(cause: Exception) -> None:
    """From any thread: stop the run as a first signal would, because of ``cause``.

    The main thread gets ``KeyboardInterrupt`` (after a held-back section, if in
    one) and finds ``cause`` in ``stopped_for()``. Nothing happens when a stop
    was already taken or no handlers of ours are installed.
    """
    stops = _active
    if stops is None or stops.stopping or stops.cause is not None:
        return
    stops.cause = cause
    _thread.interrupt_main(WAKE)  # runs stops.wake in the main thread, as a signal would


def on_child_exit(probe: Callable[[], object]) -> None:
    """Call ``probe`` in the main thread whenever a child process of this one ends (SIGCHLD),
    while the handlers are installed; it may call ``stop_for``. Sooner than a thread that
    waits for the child: no other thread need run first."""
    if _active is not None:
        _active.probes.append(probe)


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
