"""How a stop reaches the main thread from elsewhere: pong.stops.stop_for and on_child_exit,
the routes pong.watchdog takes when the local Ray dies. No Ray."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest

from pong.errors import PongError
from pong.stops import finishing, held_back, on_child_exit, signals_stop, stop_for, stopped_for
from pong.watchdog import RayDiedError


def settle() -> None:
    """Give a pending handler its chance in the main thread."""
    for _ in range(100):
        time.sleep(0.01)


def test_stop_for_from_a_thread_stops_the_main_thread_with_its_cause() -> None:
    cause = RayDiedError("the local Ray's raylet (pid 1) died")
    with pytest.raises(KeyboardInterrupt), signals_stop() as received:
        try:
            threading.Thread(target=stop_for, args=(cause,)).start()
            settle()
        finally:
            assert stopped_for() is cause and received == []
    assert isinstance(cause, PongError) and cause.exit_code == 1


def test_stop_for_inside_a_held_back_block_waits_for_its_end() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), signals_stop():
        with held_back():
            threading.Thread(target=stop_for, args=(RayDiedError("x"),)).start()
            settle()
            done.append("applied and recorded")
        done.append("after")  # never
    assert done == ["applied and recorded"]


def test_a_signal_before_stop_for_is_what_stopped_the_run() -> None:
    with pytest.raises(KeyboardInterrupt), signals_stop() as received:
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
            on_child_exit(probe)
            try:
                child.kill()  # its SIGCHLD runs the probe in this thread
                settle()
            finally:
                assert stopped_for() is cause
        assert probed and probed[-1] is not None
    finally:
        child.kill()
        child.wait()


def test_a_child_that_ends_without_a_cause_does_not_stop_the_run() -> None:
    with signals_stop() as received:
        on_child_exit(lambda: None)
        subprocess.run([sys.executable, "-c", "pass"], check=True)  # a SIGCHLD
        settle()
    assert received == []


def test_a_stop_for_once_the_run_is_finishing_does_nothing() -> None:
    with signals_stop():
        finishing()
        threading.Thread(target=stop_for, args=(RayDiedError("x"),)).start()
        settle()
        assert stopped_for() is None
