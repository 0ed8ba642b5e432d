"""pong.guard, with stand-ins for the driver and its Ray: no Ray, a second or two."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import pong.guard
from pong.guard import ENDED, SAID, end_session
from tests.helpers import started


def sleeper(*, cwd=None, holding=None) -> subprocess.Popen:
    """A stand-in process; ``holding``: a file it keeps open, as Ray's processes hold their
    logs in the session directory."""
    code = "import sys, time; f = sys.argv[1:] and open(sys.argv[1], 'a'); time.sleep(60)"
    args = [sys.executable, "-c", code, *([str(holding)] if holding else [])]
    proc = subprocess.Popen(args, cwd=cwd)
    deadline = time.monotonic() + 10
    while holding and not holding.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return proc


def start_guard(orders: dict) -> subprocess.Popen:
    guard = subprocess.Popen(
        [sys.executable, "-I", pong.guard.__file__],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=False,
    )
    guard.stdin.write(json.dumps(orders).encode() + b"\n")
    guard.stdin.flush()
    return guard


@pytest.mark.parametrize("said", [False, True])
def test_the_guard_ends_the_session_and_says_which_process_died_before_the_driver(said, tmp_path):
    """``said``: the driver had said how it stopped, and then Ray ended it: no second line."""
    session = tmp_path / "session_1"
    (session / "logs").mkdir(parents=True)
    raylet, gcs = sleeper(holding=session / "logs" / "raylet.out"), sleeper()
    agent = sleeper(holding=session / "logs" / "dashboard_agent.log")  # the raylet's
    other = sleeper(holding=tmp_path / "session_2.log")  # another Ray's: never touched
    driver = sleeper()
    orders = {
        "driver": driver.pid,
        "session_dir": str(session),
        "watched": {"raylet": raylet.pid, "GCS": gcs.pid},
        "checkpoint": str(tmp_path / "run" / "checkpoint.safetensors"),
    }
    guard = start_guard(orders)
    try:
        time.sleep(0.5)  # the guard has its orders and waits
        raylet.kill()  # first the raylet, then (Ray's own code) the driver
        raylet.wait()
        time.sleep(0.2)
        if said:
            guard.stdin.write(SAID)
            guard.stdin.flush()
        driver.kill()
        driver.wait()
        guard.stdin.close()  # as the driver's end closes it
        err = guard.stderr.read()
        assert guard.wait(timeout=30) == 1
        line = (
            f"driver.py: error: the local Ray's raylet (pid {raylet.pid}) died and Ray's own code"
            f" ended the driver (pid {driver.pid}) at once; nothing was saved; ended the rest of"
            " that Ray\n"
        )
        assert err.decode() == ("" if said else line)
        assert agent.wait(timeout=5) == -signal.SIGKILL  # it held a file of the session
        assert other.poll() is None and gcs.poll() is None  # named nowhere in the session
    finally:
        for proc in (raylet, gcs, agent, other, driver, guard):
            proc.kill()
            proc.wait()


def test_a_driver_that_ended_its_ray_itself_dismisses_the_guard_quietly(tmp_path):
    session = tmp_path / "session_1"
    session.mkdir()
    agent = sleeper(holding=session / "held")
    guard = start_guard(
        {"driver": os.getpid(), "session_dir": str(session), "watched": {}, "checkpoint": "x"}
    )
    try:
        guard.stdin.write(ENDED)
        guard.stdin.flush()
        _, err = guard.communicate(timeout=30)
        assert guard.returncode == 0 and err == b""
        assert agent.poll() is None  # left to the driver
    finally:
        agent.kill()
        agent.wait()


def test_end_session_spares_this_process_and_its_ancestors(tmp_path):
    session = tmp_path / "session_1"
    session.mkdir()
    with open(session / "mine.log", "w"):  # this process holds a file there too
        agent = sleeper(holding=session / "held")
        try:
            killed = end_session(str(session), seconds=5)
            assert killed == [agent.pid]  # not this process
            assert started(agent.pid) is None  # ended, and reaped: end_session waited for it
        finally:
            agent.kill()
            agent.wait()
