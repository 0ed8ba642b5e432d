from __future__ import annotations

import csv
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import driver
from pong.run import report
from pong.run.checkpoint import FILENAME, load, save, save_policy
from pong.run.config import Config
from tests.helpers import (
    BATCH_LINE,
    NOBODY,
    ROOT,
    TOY,
    catches,
    free_port,
    nobody_s_folder,
    processes,
    rows_of,
    run_driver,
    spawn_driver,
    stop_processes_of,
    wait_for,
)
from tests.run.test_checkpoint import make_checkpoint


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--batch-size=0"], "argument --batch-size: expected a positive integer, got '0'"),
        (["--batch-size=-3"], "argument --batch-size: expected a positive integer, got '-3'"),
        (["--batch-size=2.5"], "argument --batch-size: expected a positive integer, got '2.5'"),
        (["--batch-size=ten"], "argument --batch-size: expected a positive integer"),
        (["--updates=0"], "argument --updates/--iterations: expected a positive integer, got '0'"),
        (["--updates=x"], "argument --updates/--iterations: expected a positive integer"),
        (["--seed=-1"], "argument --seed: expected an integer from 0 to 2**128 - 1"),
        (["--seed=" + "9" * 41], "argument --seed: expected an integer from 0 to 2**128 - 1"),
        (["--num-cpus=0"], "argument --num-cpus: expected a positive integer"),
        (["--num-cpus=100000"], f"--num-cpus: expected at most {64 * (os.cpu_count() or 1)} (64"),
        ([f"--num-cpus={10**18}"], f"got '{10**18}'"),  # Ray's limit is 10**14
        (["--learning-rate=nan"], "argument --learning-rate: expected a positive number"),
        (["--checkpoint-seconds=0"], "argument --checkpoint-seconds: expected a positive number"),
        (["--checkpoint-seconds=inf"], "argument --checkpoint-seconds: expected a positive num"),
        (["--decay-rate=1"], "argument --decay-rate: expected a number below 1"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--run-dir="], "argument --run-dir: expected a path, got ''"),
        (["--until-mean=nan"], "argument --until-mean: expected a finite number, got 'nan'"),
        (["--until-mean=-inf"], "argument --until-mean: expected a finite number, got '-inf'"),
        (["--evaluate=x", "--updates=3"], "argument --updates: not with --evaluate"),
        (["--evaluate=x", "--until-mean=0"], "argument --until-mean: not with --evaluate"),
        (["--evaluate=x", "--batch-size=3"], "argument --batch-size: not with --evaluate"),
        (["--evaluate=x", "--resume=y"], "argument --resume: not with --evaluate"),
    ],
)
def test_bad_flags_give_one_line_and_exit_2(argv, message, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        driver.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("driver.py: error: ")
    assert message in err


@pytest.mark.parametrize(("env", "most"), [("PongToy/Catch-v0", 5), ("ALE/Pong-v5", 21)])
def test_a_running_mean_the_env_never_reaches_is_one_line_and_starts_no_ray(
    env, most, capsys
) -> None:
    """The toy's game scores at most 5 (--until-mean=10 had trained until Ctrl-C), Pong's 21;
    and at least -5 and -21 (--until-mean=-30 stopped after one update)."""
    assert driver.main([f"--env={env}", f"--until-mean={most}"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"driver.py: error: --until-mean: a game of {env} scores at most {most}, so no"
        f" running mean is above {most}\n"
    )
    assert driver.main([f"--env={env}", f"--until-mean={-most - 0.5}"]) == 2
    assert capsys.readouterr().err == (
        f"driver.py: error: --until-mean: a game of {env} scores at least {-most}, so every"
        f" running mean is above {-most - 0.5:g}\n"
    )


def test_unknown_env_is_one_line_and_starts_no_ray(capsys) -> None:
    assert driver.main(["--env=ALE/Pongg-v5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown env id 'ALE/Pongg-v5'" in err


def test_num_cpus_with_a_cluster_address_is_refused(capsys) -> None:
    assert driver.main(["--address=127.0.0.1:6379", "--num-cpus=2"]) == 2
    assert "--num-cpus applies to a local Ray only" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--redis-address", "--address"])
def test_address_where_nothing_answers_fails_fast_naming_it(flag, capsys) -> None:
    port = free_port()
    start = time.monotonic()
    assert driver.main([f"{flag}=127.0.0.1:{port}"]) == 1
    assert time.monotonic() - start < 30
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no Ray cluster answers at 127.0.0.1:{port}" in err


def test_an_address_with_a_newline_is_said_in_one_line(capsys) -> None:
    assert driver.main(["--address", "a\nb:1"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no Ray cluster answers at $'a\\x0ab:1': " in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--evaluate", "bad\nname"], "driver.py: error: --evaluate: bad\\nname: no such"),
        (
            ["--evaluate", str(ROOT / "results/fast-agent/policy.safetensors"), "--record",
             "no\ndir/x.gif"],
            "--record: no such directory no\\ndir",
        ),
    ],
)  # fmt: skip
def test_a_path_with_a_newline_is_said_in_one_line(argv, said, capsys) -> None:
    """The error's newline is shown escaped (a tester's find: it split the line in two)."""
    assert driver.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("flags", [["--evaluate", "POLICY", "--games", "1"], ["--help"]])
def test_an_output_that_cannot_be_written_is_named_as_the_output(flags) -> None:
    """``--evaluate > /dev/full`` said 'No space left on device', a disk's words (a tester's
    find); as the tools say it. ``--help``'s was lost, with exit code 0 (argparse's way)."""
    policy = str(ROOT / "results/fast-agent/policy.safetensors")
    flags = [policy if f == "POLICY" else f for f in flags]
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, str(ROOT / "driver.py"), *flags],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == "driver.py: error: could not write the output: No space left on device\n"


def test_ray_address_variable_is_honoured(monkeypatch, capsys) -> None:
    port = free_port()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    assert driver.main([]) == 1
    assert f"no Ray cluster answers at 127.0.0.1:{port}" in capsys.readouterr().err


def test_malformed_address_is_named(capsys) -> None:
    assert driver.main(["--address=localhost"]) == 2
    assert "cluster address must be HOST:PORT, got 'localhost'" in capsys.readouterr().err


def test_help_lists_every_flag(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        driver.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for flag in (
        "--batch-size",
        "--updates",
        "--redis-address",
        "--address",
        "--env",
        "--seed",
        "--until-mean",
        "--num-cpus",
        "--run-dir",
        "--checkpoint-every",
        "--resume",
        "--evaluate",
        "--games",
        "--record",
    ):
        assert flag in out


def _local_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}


def _csv(path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.ray
@pytest.mark.ale
def test_one_update_then_resume_one_more(tmp_path, shared_ray) -> None:
    address, env = shared_ray
    run = tmp_path / "run"
    first = ["--batch-size=2", "--updates=1", "--seed=0", f"--address={address}"]
    proc = run_driver([*first, f"--run-dir={run}", "--checkpoint-every=1"], env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()  # (a local Ray's first line: test_cluster's)
    assert lines[0].startswith(f"Running on the Ray cluster at {address} (1 node, 3 CPUs): batch")
    assert lines[1].startswith(f"Run directory: {run} (checkpoint every 1 updates")
    assert lines[2].startswith("Started 2 of 2 RolloutWorker actors (one CPU each) on 1 node (2 o")
    batches = [BATCH_LINE.match(line) for line in lines if line.startswith("Batch")]
    assert len(batches) == 1 and all(batches), proc.stdout
    for n, match in enumerate(batches, start=1):
        assert int(match[1]) == n and int(match[2]) == 2 and int(match[3]) > 200
        assert -21 <= float(match[6]) <= 21
    assert lines[-1].startswith("Done: 1 update (1 in this run), 2 games")
    assert "Traceback" not in proc.stderr
    saved = load(run)
    assert (saved.updates, saved.games, saved.config.batch_size) == (1, 2, 2)

    # A run killed after an update it never checkpointed leaves that update's rows behind.
    with open(run / "updates.csv", "a") as f:
        f.write("2,4,999,1.0,999.0,-20.0,-21.0,-21.0,-21.0\n")
    with open(run / "games.csv", "a") as f:
        f.write("3,2,-21.0,999\n4,2,-21.0,999\n")

    proc = run_driver(["--resume", str(run), "--updates=1", f"--address={address}"], env)
    assert proc.returncode == 0, proc.stderr
    assert "resuming after update 1" in proc.stdout
    [batch2] = [BATCH_LINE.match(line) for line in proc.stdout.splitlines() if line[:5] == "Batch"]
    assert batch2 and batch2[1] == "2"

    updates, games = _csv(run / "updates.csv"), _csv(run / "games.csv")
    assert [row["update"] for row in updates] == ["1", "2"]
    assert [row["game"] for row in games] == [str(i) for i in range(1, 5)]
    # The running mean went on from the saved one, game by game in game order.
    running = saved.running_mean
    for row in games[2:]:
        running = running * 0.99 + float(row["score"]) * 0.01
    assert float(updates[1]["running_mean"]) == pytest.approx(running, abs=1e-12)
    resumed = load(run)
    assert (resumed.updates, resumed.games) == (2, 4)
    assert resumed.steps == saved.steps + int(batch2[3])
    assert not np.array_equal(resumed.weights["W2"], saved.weights["W2"])  # it trained on
    # TensorBoard's curves: the CSV's, each update once (two event files, one per driver).
    board = EventAccumulator(str(run))
    board.Reload()
    running_curve = [(e.step, e.value) for e in board.Scalars("charts/running_mean")]
    assert running_curve == [
        (int(row["steps"]), pytest.approx(float(row["running_mean"]))) for row in updates
    ]
    assert len(board.Scalars("charts/episodic_return")) == 4

    # The same seed on one worker, never stopped: the same bytes, the same rows but for the times.
    alone = tmp_path / "alone"
    proc = run_driver(
        [*first[:1], "--updates=2", "--seed=0", "--workers=1", f"--run-dir={alone}"]
        + [f"--address={address}"],
        env,
    )
    assert proc.returncode == 0, proc.stderr
    assert (alone / FILENAME).read_bytes() == (run / FILENAME).read_bytes()
    clocks = ("seconds", "steps_per_s", "time")
    timeless = [{k: v for k, v in row.items() if k not in clocks} for row in updates]
    assert timeless == [
        {k: v for k, v in row.items() if k not in clocks} for row in _csv(alone / "updates.csv")
    ]
    assert (alone / "games.csv").read_bytes() == (run / "games.csv").read_bytes()


@pytest.mark.ray
def test_until_mean_stops_at_the_first_update_above_it_and_a_resume_past_it_is_refused(
    tmp_path, capsys, shared_ray
) -> None:
    address, env = shared_ray
    run = tmp_path / "run"
    toy = ["--env=PongToy/Catch-v0", "--batch-size=4", "--learning-rate=1e-2", "--seed=10"]
    argv = [*toy, f"--address={address}", "--updates=2", "--until-mean=-2.5", f"--run-dir={run}"]
    proc = run_driver(argv, env)  # stopped before the mark: the hint keeps it
    assert proc.returncode == 0, proc.stderr
    first_line, *_, done = proc.stdout.splitlines()
    assert first_line.endswith(", 2 updates or until the running mean is above -2.5")
    assert done.endswith(f" --resume {run} --until-mean=-2.5)")
    again = shlex.split(done.rpartition("continue with: ")[2][:-1])  # with the --address
    proc = run_driver([*again[2:], "--updates=300"], env)
    assert proc.returncode == 0, proc.stderr
    running = [float(row["running_mean"]) for row in _csv(run / "updates.csv")]
    assert len(running) > 3, running  # it had to learn first: the toy starts near -3.4
    assert running[-1] > -2.5 and all(x <= -2.5 for x in running[:-1])
    assert load(run).updates == len(running)  # saved where it stopped
    assert proc.stdout.splitlines()[-1] == (
        f"Done: {len(running)} updates ({len(running) - 2} in this run), {4 * len(running)}"
        f" games, best running mean {running[-1]:.2f}; the running mean is above -2.5;"
        f" checkpoint: {run}/checkpoint.safetensors"
    )

    assert driver.main(["--resume", str(run), "--until-mean=-2.5"]) == 2
    err = capsys.readouterr().err
    already = f"the run's running mean is already {running[-1]:.2f}"
    assert err == f"driver.py: error: --until-mean -2.5: {already}\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--resume", "{tmp}/nowhere"], "--resume: {tmp}/nowhere/checkpoint.safetensors: no such"),
        (
            ["--resume", "{tmp}/junk"],
            "--resume: {tmp}/junk/checkpoint.safetensors: not a checkpoint or policy (not a"
            " safetensors file: 7 bytes long)",
        ),
        (
            ["--resume", "{tmp}/copy.safetensors"],
            "--resume: {tmp}/copy.safetensors is not a run's checkpoint.safetensors; to start a"
            " new run from its weights: ",
        ),
        (  # no hint at --start-from, which would refuse it too
            ["--resume", "{tmp}/old.safetensors"],
            "--resume: {tmp}/old.safetensors: not a readable safetensors file",
        ),
        (["--resume", "{tmp}", "--run-dir", "{tmp}/x"], "a resumed run stays in its own"),
    ],
)
def test_bad_resume_is_one_line_and_writes_nothing(argv, message, tmp_path, capsys) -> None:
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "checkpoint.safetensors").write_bytes(b"\x00" * 7)
    (tmp_path / "old.safetensors").write_bytes(b"\x00" * 100)
    save(tmp_path / "copy.safetensors", make_checkpoint())
    (tmp_path / "nowhere").mkdir()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    try:
        code = driver.main(argv)
    except SystemExit as e:  # argparse's own checks exit
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message.replace("{tmp}", str(tmp_path)) in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


@pytest.mark.ray
@pytest.mark.parametrize(
    ("sig", "code", "times", "local"),
    [
        (signal.SIGINT, 130, 1, False),
        (signal.SIGTERM, 143, 1, False),
        (signal.SIGINT, 130, 20, True),
    ],
)
def test_a_signal_stops_the_run_cleanly_and_saves_it(
    sig, code, times, local, tmp_path, shared_ray
) -> None:
    """On the shared Ray, and on a local Ray of its own, which a stop must also shut down."""
    address, env = shared_ray
    where, env = (["--num-cpus=1"], _local_env()) if local else ([f"--address={address}"], env)
    out = tmp_path / "out.txt"
    run = tmp_path / "run"
    with open(out, "w") as stdout:
        proc = subprocess.Popen(
            [
                sys.executable,
                "driver.py",
                "--env=PongToy/Catch-v0",
                "--batch-size=1",
                "--seed=0",
                *where,
                f"--run-dir={run}",
                "--checkpoint-every=1000",
            ],
            cwd=ROOT,
            env=env,
            stdout=stdout,
            stderr=subprocess.STDOUT,  # one stream: the resume hint must be its last line
            text=True,
        )
        try:
            deadline = time.monotonic() + 120
            while "Batch 1 " not in out.read_text() and time.monotonic() < deadline:
                assert proc.poll() is None, out.read_text()
                time.sleep(0.2)
            for _ in range(times):  # an impatient user: Ctrl-C again and again
                proc.send_signal(sig)
                time.sleep(0.05)
            proc.wait(timeout=60)
        finally:
            proc.kill()
    lines = out.read_text().splitlines()
    assert proc.returncode == code
    assert f"Interrupted by {sig.name}; shutting down Ray." in lines
    assert "Traceback" not in out.read_text()
    printed = [BATCH_LINE.match(line) for line in lines]
    done = max(int(m[1]) for m in printed if m)
    assert lines[-1].startswith("Done: ") and f" --resume {run})" in lines[-1], lines[-3:]
    saved = load(run)  # saved on the way out, though 1000 updates were not reached
    assert saved.updates == done and saved.games == done
    assert len(_csv(run / "updates.csv")) == done


def test_the_resume_hint_is_a_command_that_works_from_here(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert report.pasteable(tmp_path / "runs" / "a b") == "'runs/a b'"  # quoted, relative
    assert report.pasteable(driver.__file__) == os.path.abspath(driver.__file__)  # outside: whole


AWKWARD = [
    "-x",  # read as a flag after --resume, unless written ./-x
    "--resume",
    "a b",
    "it's",
    'say "hi"',
    "$HOME and `date` and $(date)",
    "back\\slash",
    "line\nbreak",
    "tab\tand\rreturn",
    "bell\x07 and escape\x1b[31m",
    "ünï cödé ✓",
    "next line\x85 and separator\u2028",
    "-\n'$\"",
    "*?[a]{b,c}~!#;&|<>",
]


def farewell_of(directory: Path) -> str:
    """``farewell`` for a saved run in ``directory``, stand-ins for the run and the trainer."""
    from types import SimpleNamespace

    path = directory / "checkpoint.safetensors"
    run = SimpleNamespace(directory=directory, checkpoint_path=path, kept=True)
    trainer = SimpleNamespace(updates=3, best_running_mean=-20.5, games=6, running_mean=-20.5)
    return report.farewell(run, trainer, first=0, script=driver.__file__)


@pytest.mark.parametrize("name", AWKWARD)
def test_the_first_lines_name_any_run_directory_on_one_printable_line(name, capsys) -> None:
    from types import SimpleNamespace

    from pong.run.config import Config

    directory = Path("/tmp") / name
    run = SimpleNamespace(
        config=Config(), directory=directory, checkpoint_every=10, checkpoint_seconds=60.0,
        saved=None, metrics=None, start_from=(directory / "policy.safetensors", SimpleNamespace(
            running_mean=None, updates=1)),
    )  # fmt: skip
    report.announce(run, SimpleNamespace(updates=1, until_mean=None), "a local Ray")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all(line.isprintable() for line in lines), lines
    assert lines[2].startswith(f"Run directory: {report.printable(directory)} (")


def resume_command(done: str) -> str:
    """The command of a ``Done:`` line's ``(continue with: ...)``."""
    assert done.endswith(")") and "(continue with: " in done, done
    return done.rpartition("(continue with: ")[2][:-1]


@pytest.mark.parametrize("name", AWKWARD)
def test_the_printed_resume_command_works_as_pasted_in_bash(name, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR", raising=False)
    (tmp_path / name).mkdir()
    done = farewell_of(Path(name))
    assert "\n" not in done and done.isprintable()  # one line, whatever the name
    command = resume_command(done)
    python = report.pasteable(sys.executable)
    assert command.startswith(f"{python} ")
    # The same command, with printf in place of Python: the words bash hands the program.
    stub = "printf '%s\\0'" + command[len(python) :]
    pasted = subprocess.run(["bash", "-c", stub], cwd=tmp_path, capture_output=True, check=True)
    script, *argv = [os.fsdecode(word) for word in pasted.stdout.split(b"\0")[:-1]]
    assert Path(script).resolve() == Path(driver.__file__).resolve()
    args = driver.parse_args(argv)
    assert args.resume == Path(name) and (tmp_path / args.resume).is_dir()


@pytest.mark.ray
def test_a_run_in_a_directory_with_an_awkward_name_goes_on_with_the_printed_command(
    tmp_path, shared_ray
) -> None:
    address, env = shared_ray
    name = "-a b$c'd\"\ne"
    toy = ["--env=PongToy/Catch-v0", "--batch-size=2", f"--address={address}", "--updates=1"]
    first = subprocess.run(
        [sys.executable, str(ROOT / "driver.py"), *toy, "--seed=0", f"--run-dir={name}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert first.returncode == 0, first.stderr
    command = resume_command(first.stdout.splitlines()[-1])
    again = subprocess.run(
        ["bash", "-c", f"{command} --updates=1"],  # the command names the cluster
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert again.returncode == 0, again.stderr
    assert "resuming after update 1" in again.stdout
    assert load(tmp_path / name).updates == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--address="], "the cluster address is empty"),
        (["--address=http://127.0.0.1:8265"], "looks like the dashboard's (Ray Jobs) address"),
        (["--env=ALE/Breakout-v5"], "unknown env id 'ALE/Breakout-v5': this program plays"),
    ],
)
def test_addresses_and_envs_a_user_might_paste_are_one_line(argv, message, capsys) -> None:
    assert driver.main(argv) == 2  # bad input, as the shell's convention has it
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_a_file_that_is_no_checkpoint_is_not_said_to_be_loadable_unsafely(tmp_path, capsys) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    assert driver.main(["--evaluate", str(tmp_path / "notes.txt")]) == 2
    err = capsys.readouterr().err
    assert "not a safetensors file: 5 bytes long" in err and "unsafely" not in err


@pytest.mark.ray
def test_a_batch_far_larger_than_the_cpus_plays_on_one_worker_per_cpu_without_warnings(
    tmp_path, shared_ray
) -> None:
    address, env = shared_ray  # 3 CPUs
    args = ["--env=PongToy/Catch-v0", "--batch-size=200", f"--address={address}", "--updates=1"]
    proc = run_driver([*args, f"--run-dir={tmp_path / 'run'}"], env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[2].startswith("Started 3 of 3 RolloutWorker actors (one CPU")
    assert "Batch 1 computed 200 rollouts" in proc.stdout
    assert "WARNING" not in proc.stdout + proc.stderr and proc.stderr == "", proc.stderr


def test_an_argument_that_is_not_utf8_is_one_line_before_ray_starts(tmp_path, capsys) -> None:
    bad = os.fsdecode(bytes(tmp_path) + b"/bad\xffdir")
    assert driver.main(["--env=PongToy/Catch-v0", f"--run-dir={bad}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not UTF-8 text, which Ray cannot carry" in err
    assert not os.path.exists(bad)  # refused before anything was made


def test_a_run_whose_ray_never_started_leaves_no_directory_behind(tmp_path, capsys) -> None:
    run = tmp_path / "run"
    assert driver.main([f"--address=127.0.0.1:{free_port()}", f"--run-dir={run}"]) == 1
    assert "no Ray cluster answers" in capsys.readouterr().err
    assert not run.exists()


def test_auto_with_a_recorded_cluster_that_is_gone_says_so_within_30_s(tmp_path) -> None:
    port = free_port()
    (tmp_path / "ray").mkdir()  # RAY_TMPDIR/ray: where `ray start` records its cluster
    (tmp_path / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{port}\n")
    start = time.monotonic()
    proc = run_driver(
        ["--address=auto", f"--run-dir={tmp_path / 'run'}"],
        {**_local_env(), "RAY_TMPDIR": str(tmp_path)},
        timeout=60,
    )
    assert time.monotonic() - start < 30
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert re.search(rf"no Ray cluster answers at [\d.]+:{port}: ", proc.stderr)  # as Ray names it
    assert "--address=auto: the cluster last started here with `ray start`" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_auto_without_a_recorded_cluster_says_so(tmp_path) -> None:
    proc = run_driver(
        ["--address=auto", f"--run-dir={tmp_path / 'run'}"],
        {**_local_env(), "RAY_TMPDIR": str(tmp_path)},  # nothing recorded here
        timeout=60,
    )
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert "--address=auto: no Ray cluster was started on this machine" in proc.stderr


@pytest.mark.parametrize("program", [["driver.py"], ["-m", "pong", "plot"]])
def test_a_python_without_the_install_is_one_line_naming_it(program) -> None:
    """``python3 driver.py`` (not the venv's Python) was a ModuleNotFoundError traceback. Here
    ``-S`` leaves out site-packages, as such a Python lacks them."""
    done = subprocess.run(
        [sys.executable, "-S", *program, "--help"], cwd=ROOT, capture_output=True, text=True
    )
    prog = "driver.py" if program == ["driver.py"] else "python -m pong"
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr == (
        f"{prog}: error: {sys.executable} has no 'numpy' module; run it with the Python of the"
        " README's install (.venv/bin/python)\n"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["driver.py", "--resume", "{p}"],
        ["driver.py", "--run-dir", "{p}/new", "--env", "PongToy/Catch-v0"],
        ["driver.py", "--evaluate", "{p}"],
        ["-m", "pong", "export", "{p}", "{tmp}/out.safetensors"],
    ],
)
def test_a_path_its_user_may_not_read_is_one_line(argv) -> None:
    """pathlib's tests raise PermissionError where os.path's say False: export was a traceback,
    and --resume named a sweep.json it had looked for. Run as nobody (root reads anything)."""
    with nobody_s_folder() as tmp:
        (tmp / "private").mkdir(mode=0o700)  # root's: nobody may look in
        argv = [a.format(p=tmp / "private", tmp=tmp) for a in argv]
        done = subprocess.run([*NOBODY, *argv], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode in (1, 2) and done.stderr.count("\n") == 1, done.stderr
    assert "Permission denied" in done.stderr and "sweep.json" not in done.stderr, done.stderr


@pytest.mark.parametrize("after", [0, 0.1, 0.25])
def test_a_ctrl_c_while_the_libraries_load_is_no_traceback(after, tmp_path) -> None:
    proc = spawn_driver([f"--run-dir={tmp_path / 'run'}"], _local_env())
    # Python's own start is not ours to make quiet: wait for the driver's first line of code,
    # which catches SIGTERM (Python does not), then signal while the libraries load.
    wait_for(lambda: catches(proc.pid, signal.SIGTERM), proc, seconds=60)
    time.sleep(after)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()


@pytest.mark.ray
def test_a_first_update_that_cannot_be_applied_is_one_line(tmp_path, shared_ray) -> None:
    """No finite gradient at a learning rate of 1e308: the error's line says nothing was
    saved, and no Done line says it again."""
    address, env = shared_ray
    args = ["--env=PongToy/Catch-v0", "--learning-rate=1e308", "--updates=3", "--seed=1"]
    proc = run_driver([*args, f"--address={address}", f"--run-dir={tmp_path / 'run'}"], env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Done:" not in proc.stdout and "Batch " not in proc.stdout, proc.stdout
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(
        "driver.py: error: update 1 not applied: "
    ), proc.stderr
    assert proc.stderr.endswith("; no update had finished, so nothing was saved\n"), proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.ray
def test_a_closed_output_pipe_stops_the_run_and_keeps_it(tmp_path, shared_ray) -> None:
    """``driver.py | head -1``: the run stops when nobody reads, saved, without a traceback;
    the ``Done:`` line, with its resume command, goes to stderr."""
    address, env = shared_ray
    run = tmp_path / "run"
    args = ["--env=PongToy/Catch-v0", f"--address={address}", f"--run-dir={run}"]
    proc = spawn_driver(args, env, text=False)
    for line in iter(proc.stdout.readline, b""):  # the start lines, then the first update's
        if line.startswith(b"Batch 1 "):
            break
    proc.stdout.close()  # as `head` does when it has its lines
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err  # 128 + SIGPIPE, as a shell reports it
    assert "Traceback" not in err and "Exception ignored" not in err, err
    saved = load(run)
    assert saved.updates >= 1 and len(_csv(run / "updates.csv")) == saved.updates
    stopped, done = err.splitlines()[-2:]
    assert stopped == "driver.py: stopped: its output was closed", err
    assert done.startswith(f"Done: {saved.updates} update") and "--resume" in done, err


@pytest.mark.ray
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stop_while_ray_starts_is_one_line_and_leaves_no_ray_behind(sig, code, tmp_path) -> None:
    # This run's Ray keeps its files here (short: socket paths), found by it, and only it.
    private = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))
    run = tmp_path / "run"
    args = ["--env=PongToy/Catch-v0", f"--run-dir={run}"]
    proc = spawn_driver(args, {**_local_env(), "RAY_TMPDIR": str(private)})
    try:
        wait_for(run.exists, proc, seconds=60)  # made once Ray is up: the workers start
        time.sleep(0.5)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
        deadline = time.monotonic() + 30  # Ray's processes end after the driver: a sign, not a time
        while (left := [pid for pid, cmd in processes() if str(private).encode() in cmd]) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.2)
    finally:
        proc.kill()
        stop_processes_of(private)
        shutil.rmtree(private, ignore_errors=True)
    assert proc.returncode == code, (out, err)
    assert f"Interrupted by {sig.name}" in err and "Traceback" not in err, err
    assert left == [], "Ray processes outlived the driver"
    assert not run.exists()  # nothing was trained, so nothing was kept


def test_a_resume_stopped_while_ray_starts_ends_with_its_resume_command(
    tmp_path, monkeypatch, capsys
) -> None:
    """A Ctrl-C inside ``ray.init`` printed only 'Interrupted' (a break-it tester's find)."""
    config = Config(env=TOY.env, seed=1)
    saved = replace(make_checkpoint(), config=config)
    save(tmp_path / FILENAME, saved)
    rows_of(tmp_path, saved)

    def stopped_while_ray_starts(*_, **__):
        raise KeyboardInterrupt

    monkeypatch.setattr(driver, "connect", stopped_while_ray_starts)
    assert driver.main(["--resume", str(tmp_path), "--updates=5"]) == 130
    out, err = capsys.readouterr()
    assert err == "Interrupted by SIGINT.\n"
    assert out.startswith(f"Done: {saved.updates} updates (0 in this run)"), out
    assert out.endswith(f" --resume {shlex.quote(str(tmp_path))} --updates=5)\n"), out


@pytest.mark.parametrize("stop", [KeyboardInterrupt, BrokenPipeError])
def test_a_stop_while_the_workers_start_ends_with_the_done_line(
    stop, tmp_path, monkeypatch
) -> None:
    """A Ctrl-C after the run directory's line but before the workers were up said only
    'Interrupted' (a newcomer's find): the last line says what was kept, as after an update.
    So does an output closed then (``| head -1``), on stderr."""
    from pong.run import training
    from pong.run.config import Options
    from pong.run.directory import Run
    from pong.run.stops import Stops

    def stopped_while_starting(**_):
        raise stop

    monkeypatch.setattr(training, "Trainer", stopped_while_starting)
    config, lines = Config(env=TOY.env, seed=1), []
    for saved in (None, replace(make_checkpoint(), config=config)):
        run_dir = tmp_path / f"run{len(lines)}"
        if saved is None:
            run = Run.start(run_dir, config, 1)
        else:  # a resumed run, stopped as it starts again
            run_dir.mkdir()
            save(run_dir / FILENAME, saved)
            rows_of(run_dir, saved)
            run = Run.resume(run_dir, {}, 1)
        run.open()
        stops = Stops()
        with pytest.raises(stop):
            training.train(run, Options(), stops)
        lines.append(stops.last_line)
    assert (
        lines[0]
        == "Done: 0 updates (0 in this run), 0 games; no update finished, so nothing was saved"
    )
    assert lines[1].startswith("Done: 7 updates (0 in this run), 70 games, best running mean")
    assert f"--resume {shlex.quote(str(tmp_path / 'run1'))}" in lines[1], lines[1]
    assert not (tmp_path / "run0").exists()  # nothing was kept


@pytest.mark.ray
def test_a_policy_given_to_resume_leads_to_a_command_that_trains_it_on(
    tmp_path, capsys, monkeypatch, shared_ray
) -> None:
    """A shared agent people can keep training: the hint --resume gives, pasted into bash."""
    trained = replace(make_checkpoint(seed=9), config=Config(batch_size=3, env=TOY.env, seed=9))
    policy = tmp_path / "a shared.safetensors"  # a space, as a user's file may have
    save_policy(policy, trained)
    monkeypatch.chdir(ROOT)
    assert driver.main(["--resume", str(policy)]) == 2
    hint = capsys.readouterr().err.strip().rpartition("start a new run from its weights: ")[2]
    assert hint.endswith(f"driver.py --start-from {shlex.quote(str(policy))}")
    run = tmp_path / "run"
    address, env = shared_ray
    more = f" --updates=1 --seed=1 --run-dir={run} --address={address} --checkpoint-every=1"
    proc = subprocess.run(
        ["bash", "-c", hint + more], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first == (
        f"Starting a new run from the weights of {policy} (update 7 of its run, running mean"
        " -20.43), with a fresh RMSProp cache"
    )
    assert f"env {TOY.env}" in proc.stdout  # the policy's env; its batch size is not a setting
    saved = load(run)
    assert (saved.updates, saved.games, saved.config.seed) == (1, 10, 1)
    # One RMSProp step from the policy's float32 weights and a zero cache: the cache is the
    # step's 0.01 * g**2, and the weights moved by 1e-4 * g / (sqrt(cache) + 1e-5).
    start = load(policy, policy=True).weights
    for k in ("W1", "W2"):
        cache, step = saved.rmsprop_cache[k], saved.weights[k] - start[k]
        g = np.sign(step) * np.sqrt(cache / 0.01)
        np.testing.assert_allclose(step, 1e-4 * g / (np.sqrt(cache) + 1e-5), rtol=1e-6, atol=1e-12)
    assert np.abs(saved.weights["W2"] - start["W2"]).max() > 0


def test_start_from_is_refused_with_resume_and_for_a_bad_file(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        driver.main(["--resume", str(tmp_path), "--start-from", str(tmp_path)])
    assert "--start-from: not with --resume" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("hello")
    assert driver.main(["--start-from", str(tmp_path / "notes.txt")]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"driver.py: error: --start-from: {tmp_path / 'notes.txt'}: not a checkpoint or policy"
        " (not a safetensors file: 5 bytes long)\n"
    )
