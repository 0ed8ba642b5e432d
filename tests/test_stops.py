from __future__ import annotations

import os
import signal

import pytest

from pong.stops import held_back, signals_stop


def deliver(sig: signal.Signals) -> None:
    os.kill(os.getpid(), sig)
    signal.sigtimedwait([], 0)  # give the handler its chance in the main thread


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_signals_stop_raises_keyboard_interrupt_and_restores_the_handlers(sig) -> None:
    outer = signal.signal(sig, signal.default_int_handler)  # not ignored, even under nohup
    try:
        with pytest.raises(KeyboardInterrupt), signals_stop() as received:
            deliver(sig)
        assert received == [sig]
        assert signal.getsignal(sig) is signal.default_int_handler
    finally:
        signal.signal(sig, outer)


def test_a_second_signal_is_counted_but_does_not_interrupt_again() -> None:
    with pytest.raises(KeyboardInterrupt), signals_stop() as received:
        try:
            deliver(signal.SIGTERM)
        finally:  # the stopping run's last work: a second signal must not cut it short
            deliver(signal.SIGINT)
            saved = True
    assert saved and received == [signal.SIGTERM, signal.SIGINT]


def test_a_signal_inside_a_held_back_block_waits_for_its_end() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), signals_stop() as received:
        with held_back():
            done.append("apply")
            deliver(signal.SIGINT)  # between two steps that belong together
            with held_back():  # nested: still held until the outer block ends
                done.append("count")
            done.append("record")
        done.append("after")  # never: the stop takes effect as the block ends
    assert done == ["apply", "count", "record"] and received == [signal.SIGINT]


def test_held_back_without_handlers_is_a_plain_block() -> None:
    with held_back():
        ran = True
    assert ran


def test_a_sighup_that_nohup_ignores_stays_ignored() -> None:
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with signals_stop() as received:
            deliver(signal.SIGHUP)
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert received == []
    finally:
        signal.signal(signal.SIGHUP, previous)
