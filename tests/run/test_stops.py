"""pong.run.stops: the first stop signal ends the run, later ones only wait for the save."""

from __future__ import annotations

import signal

import pytest

from pong.run.stops import Stops


@pytest.fixture
def stops():
    """A ``Stops`` installed for the test, the previous handlers back afterwards. SIGHUP is
    first made default: a suite run under ``nohup`` has it ignored, which ``Stops`` keeps."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    stops = Stops()
    stops.install()
    yield stops
    for sig, handler in before.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_the_first_signal_stops_and_later_ones_are_only_counted(stops, sig) -> None:
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(sig)
    signal.raise_signal(signal.SIGINT)  # an impatient second Ctrl-C, during the save
    signal.raise_signal(signal.SIGTERM)
    assert stops.received == [sig, signal.SIGINT, signal.SIGTERM] and stops.ending


def test_a_signal_inside_a_held_block_waits_for_its_end(stops) -> None:
    done = []
    with pytest.raises(KeyboardInterrupt):
        with stops.held():
            signal.raise_signal(signal.SIGTERM)
            done.append("applied")
            signal.raise_signal(signal.SIGINT)  # a second one inside changes nothing
            done.append("recorded")
    assert done == ["applied", "recorded"] and stops.received == [signal.SIGTERM, signal.SIGINT]


def test_once_the_run_is_ending_a_signal_is_only_counted(stops) -> None:
    stops.ending = True  # the last save is running
    signal.raise_signal(signal.SIGINT)
    assert stops.received == [signal.SIGINT]


def test_a_sighup_that_nohup_ignores_stays_ignored() -> None:
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        Stops().install()
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.mark.parametrize("before_ray", [False, True])
def test_a_sigterm_that_ray_s_own_handler_took_and_lost_is_raised_again(stops, before_ray) -> None:
    """As ray.init does: a handler of its own in place while it starts, whose exception can
    be lost (raised in a fork's callback). One SIGTERM is counted once, whoever took it."""
    from pong.run.stops import no_sigterm_lost

    stops.holding = True  # as a sweep starts Ray: a stop counted, not raised
    with no_sigterm_lost():
        if before_ray:
            signal.raise_signal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, lambda signum, frame: None)  # Ray's, its SystemExit lost
        if not before_ray:
            signal.raise_signal(signal.SIGTERM)
    assert stops.received == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) == stops._handle
