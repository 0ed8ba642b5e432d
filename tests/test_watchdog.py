"""How a stop reaches the main thread from elsewhere: pong.stops.stop_for and watch_children,
the routes pong.watchdog takes when the local Ray dies. No Ray."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest

from pong.errors import PongError
from pong.stops import (
    finishing,
    forget_children,
    held_back,
    signals_stop,
    stop_for,
    stopped_for,
    watch_children,
)
from pong.watchdog import RayDiedError


def settle() -> None:
    """Give a pending handler its chance in the main thread."""
    for _ in range(50):
        time.sleep(0.01)


def no_probe() -> None:
    pass


def test_stop_for_from_a_thread_stops_the_main_thread_with_its_cause() -> None:
    cause = RayDiedError("the local Ray's raylet (pid 1) died")
    with pytest.raises(KeyboardInterrupt), signals_stop() as received:
        watch_children(no_probe)
        try:
            threading.Thread(target=stop_for, args=(cause,)).start()
            settle()
        finally:
            assert stopped_for() is cause and received == []
    assert isinstance(cause, PongError) and cause.exit_code == 1


def test_stop_for_inside_a_held_back_block_waits_for_its_end() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), signals_stop():
        watch_children(no_probe)
        with held_back():
            threading.Thread(target=stop_for, args=(RayDiedError("x"),)).start()
            settle()
            done.append("applied and recorded")
        done.append("after")  # never
    assert done == ["applied and recorded"]


def test_a_signal_before_stop_for_is_what_stopped_the_run() -> None:
    with pytest.raises(KeyboardInterrupt), signals_stop() as received:
        watch_children(no_probe)
        try:
            signal.raise_signal(signal.SIGTERM)
        finally:
            stop_for(RayDiedError("x"))  # too late: the signal stopped the run
            settle()
            assert received == [signal.SIGTERM] and stopped_for() is None


def test_a_child_that_ends_stops_the_run_when_its_probe_says_so() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    cause = RayDiedError("the local Ray's GCS died")
    probed = []

    def probe() -> None:
        probed.append(child.poll())  # this test's stand-in for watchdog._probe
        if child.returncode is not None:
            stop_for(cause)

    try:
        with pytest.raises(KeyboardInterrupt), signals_stop():
            watch_children(probe)
            try:
                child.kill()  # its SIGCHLD runs the probe in this thread
                settle()
            finally:
                assert stopped_for() is cause
        assert probed and probed[-1] is not None
    finally:
        child.kill()
        child.wait()


def test_children_are_watched_only_between_watch_and_forget() -> None:
    assert signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL
    with signals_stop() as received:
        assert signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL  # no EINTR for Ray to meet
        watch_children(no_probe)
        assert signal.getsignal(signal.SIGCHLD) != signal.SIG_DFL
        subprocess.run([sys.executable, "-c", "pass"], check=True)  # a SIGCHLD, no cause
        settle()
        forget_children()  # as before Ray's shutdown ends the children on purpose
        assert signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL
        stop_for(RayDiedError("x"))  # nothing to wake the main thread with
        settle()
    assert received == []
    assert signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL


def test_a_stop_for_once_the_run_is_finishing_does_nothing() -> None:
    with signals_stop():
        watch_children(no_probe)
        finishing()
        threading.Thread(target=stop_for, args=(RayDiedError("x"),)).start()
        settle()
        assert stopped_for() is None
