from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

import driver
from tests.helpers import BATCH_LINE, ROOT, free_port, run_driver


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--batch-size=0"], "argument --batch-size: expected a positive integer, got '0'"),
        (["--batch-size=-3"], "argument --batch-size: expected a positive integer, got '-3'"),
        (["--batch-size=2.5"], "argument --batch-size: expected a positive integer, got '2.5'"),
        (["--batch-size=ten"], "argument --batch-size: expected a positive integer"),
        (["--iterations=0"], "argument --iterations: expected a positive integer, got '0'"),
        (["--iterations=x"], "argument --iterations: expected a positive integer"),
        (["--seed=-1"], "argument --seed: expected a non-negative integer"),
        (["--num-cpus=0"], "argument --num-cpus: expected a positive integer"),
        (["--learning-rate=nan"], "argument --learning-rate: expected a positive number"),
        (["--decay-rate=1"], "argument --decay-rate: expected a number below 1"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_flags_give_one_line_and_exit_2(argv, message, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        driver.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("driver.py: error: ")
    assert message in err


def test_unknown_env_is_one_line_and_starts_no_ray(capsys) -> None:
    assert driver.main(["--env=ALE/Pongg-v5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown env id 'ALE/Pongg-v5'" in err


def test_num_cpus_with_a_cluster_address_is_refused(capsys) -> None:
    assert driver.main(["--address=127.0.0.1:6379", "--num-cpus=2"]) == 1
    assert "--num-cpus applies to a local Ray only" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--redis-address", "--address"])
def test_address_where_nothing_answers_fails_fast_naming_it(flag, capsys) -> None:
    port = free_port()
    start = time.monotonic()
    assert driver.main([f"{flag}=127.0.0.1:{port}"]) == 1
    assert time.monotonic() - start < 30
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no Ray cluster answers at 127.0.0.1:{port}" in err


def test_ray_address_variable_is_honoured(monkeypatch, capsys) -> None:
    port = free_port()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    assert driver.main([]) == 1
    assert f"no Ray cluster answers at 127.0.0.1:{port}" in capsys.readouterr().err


def test_malformed_address_is_named(capsys) -> None:
    assert driver.main(["--address=localhost"]) == 1
    assert "cluster address must be HOST:PORT, got 'localhost'" in capsys.readouterr().err


def test_help_lists_every_flag(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        driver.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for flag in (
        "--batch-size",
        "--iterations",
        "--redis-address",
        "--address",
        "--env",
        "--seed",
        "--num-cpus",
    ):
        assert flag in out


@pytest.mark.ray
@pytest.mark.ale
def test_two_updates_on_a_local_ray() -> None:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = run_driver(["--batch-size=2", "--iterations=2", "--seed=0", "--num-cpus=2"], env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("Running on a local Ray (1 node, 2 CPUs): batch size 2")
    assert lines[1] == "Started 2 RolloutWorker actors on 1 node (2)"
    batches = [BATCH_LINE.match(line) for line in lines if line.startswith("Batch")]
    assert len(batches) == 2 and all(batches), proc.stdout
    for n, match in enumerate(batches, start=1):
        assert int(match[1]) == n and int(match[2]) == 2 and int(match[3]) > 200
        assert -21 <= float(match[6]) <= 21
    assert "Traceback" not in proc.stderr


@pytest.mark.ray
@pytest.mark.ale
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_run_cleanly(sig, code, tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = tmp_path / "out.txt"
    with open(out, "w") as stdout:
        proc = subprocess.Popen(
            [sys.executable, "driver.py", "--batch-size=1", "--seed=0", "--num-cpus=1"],
            cwd=ROOT,
            env=env,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 120
            while "Batch 1 " not in out.read_text() and time.monotonic() < deadline:
                assert proc.poll() is None, proc.stderr.read()
                time.sleep(0.2)
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == code
    assert f"Interrupted by {sig.name}; shutting down Ray." in err
    assert "Traceback" not in err
