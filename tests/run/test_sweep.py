"""``python -m pong sweep``: a Tune trial is a driver run, byte for byte; bad grids are one line."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pong.run.checkpoint import load
from pong.run.config import Config
from pong.run.errors import UsageError, command
from pong.run.sweep import DEFINITION, MAX_TRIALS, OWNER, PASSED, Sweep, main, owned, trial_name
from tests.helpers import ROOT, free_port, processes, run_driver, stop_processes_of, wait_for

TOY_UPDATES = 30  # toy updates: long enough to be stopped in the middle (at update 5 or so)
TOY = ["--env=PongToy/Catch-v0", "--batch-size=2", f"--updates={TOY_UPDATES}", "--watch-every=0"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seeds", *map(str, range(MAX_TRIALS + 1))], "more than 1,000"),
        (["--scheduler", "asha"], "--scheduler asha: needs --updates"),
        (["--resume", "{tmp}/x", "--seeds", "1"], "argument --seeds: not with --resume"),
        (["--resume", "{tmp}/x", "--seed=1"], "argument --seed: not with --resume"),
        (["--resume", "{tmp}"], "no sweep there"),
        (["--resume", "{tmp}/file"], "file: a file, not a sweep's directory"),
        (["--resume", "{tmp}", "--iterations", "3"], "--iterations: not with --resume"),
        (["--seeds", "2", "1", "2"], "argument --seeds: 2 given twice"),  # not 2 trials
        (["--seed", "0", "0"], "argument --seed: 0 given twice"),
        (["--learning-rate", "1e-3", "0.001"], "argument --learning-rate: 0.001 given twice"),
        (["--sweep-dir", "s3://?region=x"], "s3://?region=x: names no bucket"),
        (["--resume", "{tmp}", "--scheduler", "asha"], "--scheduler: not with --resume"),
        (["--sweep-dir", "{tmp}/file/sub"], "is not a directory"),
        (["--sweep-dir", "{tmp}"], "holds files already"),
        (["--sweep-dir", "{tmp}/run"], "holds files already; choose a new one; it is a run's (dr"),
        (["--sweep-dir", "{tmp}/sw"], "holds files already; choose a new one; to finish that swe"),
        (["--resume", "{tmp}/nope"], "nope: no such directory"),
        (["--sweep-dir", "{tmp}/file"], "not a directory"),
        (["--seeds"], "expected at least one argument"),
        (["--env", "NoSuchEnv-v9"], "--env: "),
        (["--env", ""], "--env: "),
        (
            ["--env", "PongToy/Catch-v0", "--stop-at", "5"],
            "--stop-at: a game of PongToy/Catch-v0 scores at most 5, so no running mean is above 5",
        ),  # fmt: skip
        (["--until-mean", "21"], "--until-mean: a game of ALE/Pong-v5 scores at most 21, so no"),
        (
            ["--batch-size", "2", "4", "--workers", "3"],
            "--workers 3: at most the smallest --batch-size",
        ),
        (["--checkpoint-every", "3"], "unrecognized arguments: --checkpoint-every"),
    ],
)
def test_a_bad_sweep_is_one_line_before_ray_starts(argv, message, tmp_path, capsys) -> None:
    (tmp_path / "file").write_text("someone's")
    for held in ("run/updates.csv", f"sw/{DEFINITION}"):  # a run's directory, a sweep's
        (tmp_path / held).parent.mkdir()
        (tmp_path / held).write_text("")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) as stopped:
        code = main(argv)
        raise SystemExit(code)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert err.startswith("python -m pong sweep: error: ")


def test_a_sweep_whose_cluster_does_not_answer_leaves_no_directory(tmp_path, capsys) -> None:
    sweep = tmp_path / "sweep"
    assert main(["--sweep-dir", str(sweep), f"--address=127.0.0.1:{free_port()}"]) == 1
    assert "no Ray cluster answers at 127.0.0.1:" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # it never began: nothing to --resume


def test_trial_names_say_their_settings_at_full_precision() -> None:
    config = Config(batch_size=10, learning_rate=3e-4, decay_rate=0.99, seed=2)
    assert trial_name(config) == "batch10-lr0.0003-decay0.99-seed2"
    close = Config(batch_size=10, learning_rate=0.0010000001, decay_rate=0.99, seed=2)
    assert trial_name(close) != trial_name(Config(batch_size=10, learning_rate=1e-3, seed=2))


@pytest.mark.ray
def test_each_trial_is_the_driver_run_of_its_settings_also_after_ctrl_c(
    tmp_path, shared_ray
) -> None:
    """2 seeds on the toy, both at once on a local Ray, stopped with SIGTERM mid-way (each
    trial keeps its last update) and resumed on a cluster, after pickles were planted in every
    state file Tune wrote and in added ones (none is read): a trial's checkpoint is the bytes
    that driver.py writes with its flags. (The other test sweeps a grid of two values of two
    flags.)"""
    address, env = shared_ray
    sweep = tmp_path / "sweep"
    grid = ["--seeds", "1", "2", "--learning-rate", "3e-3", "--decay-rate", "0.9"]
    out = tmp_path / "out.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pong", "sweep", *TOY, *grid, f"--sweep-dir={sweep}",
         "--num-cpus=2"],
        cwd=ROOT, stdout=open(out, "w"), stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(lambda: ": update 5," in out.read_text(), proc)
        proc.send_signal(signal.SIGTERM)  # as `ray job stop`, Kubernetes and batch systems
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    text = out.read_text()
    assert proc.returncode == 143, text + err
    last = text.splitlines()[-1]
    assert last.startswith("Stopped with ") and last.endswith(f"--resume {sweep}"), last
    for run in _runs():  # each kept its last update: the checkpoint holds updates.csv's last row
        directory = _latest(sweep / run)
        update = (directory / "updates.csv").read_text().splitlines()[-1].split(",")[0]
        assert load(directory).updates == int(update) >= 1
    payload = plant_pickles(sweep, tmp_path / "pwned")
    again = subprocess.run(
        [sys.executable, "-m", "pong", "sweep", "--resume", str(sweep), f"--address={address}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.splitlines()[-1].startswith("Done: 2 trials in ")
    assert "Traceback" not in text + err + again.stdout + again.stderr
    assert payload.planted >= 5 and not (tmp_path / "pwned").exists()
    runs = _runs()
    assert sorted(p.name for p in sweep.iterdir() if p.is_dir()) == runs
    for run in runs:
        assert (_latest(sweep / run) / "updates.csv").read_text().count("\n") == 1 + TOY_UPDATES
    alone = tmp_path / "alone"
    flags = [*TOY, "--seed=2", "--learning-rate=3e-3", "--decay-rate=0.9", f"--run-dir={alone}"]
    driver = run_driver([*flags, f"--address={address}", "--workers=1"], env)
    assert driver.returncode == 0, driver.stderr
    ours = [(_latest(sweep / run) / "checkpoint.safetensors").read_bytes() for run in runs]
    assert ours[1] == (alone / "checkpoint.safetensors").read_bytes() != ours[0]
    with open(sweep / "summary.csv", newline="") as f:
        summary = list(csv.DictReader(f))
    assert [(r["learning_rate"], r["decay_rate"], r["seeds"]) for r in summary] == [
        ("0.003", "0.9", "1 2")
    ]


@pytest.mark.ray
def test_a_failed_trial_is_one_line_and_asha_stops_a_hopeless_one(tmp_path, shared_ray) -> None:
    """One trial at a time (two workers each on three CPUs), in grid order. Seed 3's first update
    ends at a running mean of -1.00 on the toy, seed 1's at -4.96: ASHA stops seed 1 at its
    first rung. A learning rate of 1e300 makes seed 3's weights non-finite: that trial
    fails, and the sweep goes on."""
    sweep = tmp_path / "sweep"
    grid = ["--seeds", "3", "1", "--learning-rate", "1e-2", "1e300", "--scheduler", "asha"]
    done = subprocess.run(
        [sys.executable, "-m", "pong", "sweep", *TOY[:2], "--updates=6", "--watch-every=0",
         *grid, f"--sweep-dir={sweep}", "--workers=2"],
        cwd=ROOT, env={**shared_ray[1], "RAY_ADDRESS": shared_ray[0]},  # as driver.py, Ray's own
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = done.stdout.splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"on the Ray cluster at {shared_ray[0]} (" in out[0], out[0]
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    [failed] = [line for line in out if line.startswith("note: trial ")]
    assert failed.startswith("note: trial batch2-lr1e+300-decay0.99-seed3 failed: update ")
    assert "not applied" in failed and "(learning rate 1e+300)" in failed
    assert out[-1].startswith("Done: 4 trials in ") and "(1 failed, 2 stopped-early)" in out[-1]
    with open(sweep / "summary.csv", newline="") as f:
        ended = [(r["learning_rate"], r["seeds"], r["ended"]) for r in csv.DictReader(f)]
    assert ended == [
        ("0.01", "1 3", "stopped-early done"),
        ("1e+300", "1 3", "stopped-early failed"),
    ]
    updates = (_latest(sweep / "batch2-lr0.01-decay0.99-seed1") / "updates.csv").read_text()
    assert updates.count("\n") == 2  # the header and its first update: stopped at the rung
    assert not [p for p in sweep.rglob("*") if p.name.endswith(".tmp")]  # no file left half-made
    again = f"; to run the failed again: {command('--resume', module='pong sweep')} {sweep}"
    assert out[-1].endswith(again)
    done = subprocess.run(  # the failed trial alone, from its checkpoint: the same update fails
        [sys.executable, "-m", "pong", "sweep", "--resume", str(sweep)], cwd=ROOT,
        env={**shared_ray[1], "RAY_ADDRESS": shared_ray[0]}, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    out = done.stdout.splitlines()
    assert done.returncode == 1 and out[0].startswith("Sweeping 1 of 4 trials"), done.stdout
    assert [line for line in out if line.startswith("note: trial ")] == [failed]
    assert "(1 failed, 2 stopped-early)" in out[-1] and out[-1].endswith(again)


def _runs() -> list[str]:
    return [f"batch2-lr0.003-decay0.9-seed{s}" for s in (1, 2)]


def _latest(trial: Path) -> Path:
    """The trial's checkpoint directory of the latest update (Tune keeps one, two where a
    stop came between its saving a new one and deleting the one before)."""
    directories = [p for p in trial.iterdir() if p.name.startswith("checkpoint_")]
    assert 1 <= len(directories) <= 2, directories
    return max(directories, key=lambda d: load(d).updates)


class _Payload:
    """What a planted pickle runs when unpickled: it makes a file."""

    def __init__(self, path: Path) -> None:
        self.path, self.planted = path, 0

    def __reduce__(self):
        return (Path.touch, (self.path,))


def plant_pickles(sweep: Path, made: Path) -> _Payload:
    """A pickle that makes ``made`` in every file of ``sweep`` that is not a run's or ours
    (Tune's state: tuner.pkl, basic-variant-state-*.json, a CLOUDPICKLE_FALLBACK value in
    experiment_state-*.json), and in files Tune would read if they were there."""
    payload = _Payload(made)
    data = pickle.dumps(payload)
    planted = [p for p in sweep.iterdir() if p.is_file() and p.name not in OURS]
    planted += [sweep / n for n in ("trainable.pkl", "searcher-state-2099.pkl", "params.pkl")]
    for trial in (p for p in sweep.iterdir() if p.is_dir()):
        planted += [trial / "params.pkl", trial / "error.pkl", trial / "result.json"]
    for path in planted:
        if path.name.startswith("experiment_state"):
            fallback = {"_type": "CLOUDPICKLE_FALLBACK", "value": data.hex()}
            path.write_text(json.dumps({"trial_data": [[fallback, fallback]], "runner_data": {}}))
        else:
            path.write_bytes(data)
        payload.planted += 1
    return payload


OURS = {"sweep.json", "summary.csv", ".lock"}


@pytest.mark.ray
def test_more_workers_than_a_local_ray_s_cpus_are_refused_not_waited_for(shared_ray) -> None:
    """Tune starts a trial's workers together: 5 on a local Ray of 2 CPUs waited for ever (a
    tester's find). Checked against the shared Ray (3 CPUs), as a local one would be."""
    from types import SimpleNamespace

    import ray

    from pong.run.sweep import check_cpus

    new, resumed = (SimpleNamespace(address=None, resume=r) for r in (None, "DIR"))
    said = r"^--workers 4: more than this local Ray's 3 CPUs, and a trial's workers start together"
    ray.init(address=shared_ray[0], logging_level="ERROR")
    try:
        check_cpus(new, 3)  # as many as there are CPUs: no refusal
        with pytest.raises(
            UsageError, match=said + "; give --workers 3 or fewer, or --num-cpus 4$"
        ):
            check_cpus(new, 4)
        with pytest.raises(UsageError, match="^the sweep's --workers 4: .*; give --resume with"):
            check_cpus(resumed, 4)
        check_cpus(SimpleNamespace(address="auto", resume=None), 4)  # an autoscaler may add some
    finally:
        ray.shutdown()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (b"\x80\x04K\x01.", "damaged ('utf-8' codec can't decode"),  # a pickle
        (b'{"format": "pong-sweep/1", "trials": [', "damaged (Expecting value"),  # cut short
        (b'{"format": "other"}', "not a pong sweep"),
        (b"[]", "not a pong sweep"),
        (None, "learning_rate: expected a positive number, got '-1'"),
        (None, "settings: scheduler"),
        (None, "ended: expected trial names"),
        (None, "--env: "),
        (None, "--workers 11: at most the smallest --batch-size (10)"),
        (None, "damaged (int too large to convert to float)"),  # 10**400 seconds
    ],
)
def test_a_damaged_sweep_json_is_one_line_before_ray_starts(
    damage, message, tmp_path, capsys
) -> None:
    body = {
        "format": "pong-sweep/1",
        "trials": [dataclasses.asdict(Config(seed=1))],
        "settings": dict.fromkeys(PASSED, None) | {"scheduler": "fifo", "watch_every": 0},
        "ended": {},
        "seconds": 0,
    }
    if "learning_rate" in message:
        body["trials"][0]["learning_rate"] = -1
    elif "scheduler" in message:
        body["settings"]["scheduler"] = "asha"  # without updates
    elif "ended" in message:
        body["ended"] = {"someone-else": "done"}
    elif "env" in message:
        body["trials"][0]["env"] = "NoSuchEnv-v9"
    elif "workers" in message:
        body["settings"]["workers"] = 11
    elif "too large" in message:
        body["seconds"] = 10**400
    (tmp_path / "sweep.json").write_bytes(damage or json.dumps(body).encode())
    assert main(["--resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert err.startswith(f"python -m pong sweep: error: {tmp_path}/sweep.json: ")


def test_a_sweep_directory_has_one_owner(tmp_path) -> None:
    from pong.run.storage import Storage
    from pong.run.sweep import owned

    with owned(Storage(tmp_path / "sweep"), creating=True):
        with pytest.raises(UsageError, match=r"in use by python -m pong sweep \(pid \d+ on "):
            with owned(Storage(tmp_path / "sweep"), creating=False):
                pass
    with owned(Storage(tmp_path / "sweep"), creating=False):  # given up: another may own it
        pass
    with pytest.raises(UsageError, match="refused"), owned(Storage(tmp_path / "new"), True):
        raise UsageError("refused")  # as a check after Ray starts refuses: nothing is left
    assert not (tmp_path / "new").exists()
    os.symlink(tmp_path / "sweep", tmp_path / "link")
    for creating, flag in ((True, "--sweep-dir"), (False, "--resume")):  # as the user gave it
        with pytest.raises(UsageError, match=f"^{flag} {tmp_path}/link: a symbolic link"):
            with owned(Storage(tmp_path / "link"), creating=creating):
                pass


@pytest.mark.ray
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stop_before_the_trials_start_ends_the_sweep_as_one_later(sig, code, tmp_path) -> None:
    """SIGINT as soon as the sweep owns its directory (Ray not yet up); SIGTERM once Ray's
    first process is up, while ``ray.init`` has its own SIGTERM handler in place (it had
    ended the sweep with code 15 and no line). Either way: the summary of trials not
    started, and the command that finishes it as the last line."""
    sweep, private = tmp_path / "sweep", tempfile.mkdtemp(prefix="r", dir="/tmp")  # short
    proc = subprocess.Popen(
        [sys.executable, "-m", "pong", "sweep", *TOY, "--seeds", "1", "2", f"--sweep-dir={sweep}",
         "--num-cpus=1"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "RAY_TMPDIR": private},  # this sweep's Ray, found by its files
    )  # fmt: skip
    try:
        if sig == signal.SIGINT:
            wait_for(lambda: (sweep / ".lock").exists(), proc)  # owned; Ray not yet up
        else:  # Ray is starting
            wait_for(lambda: any(private.encode() in cmd for _, cmd in processes()), proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        stop_processes_of(private)
        shutil.rmtree(private, ignore_errors=True)
    assert proc.returncode == code, out + err
    assert "Traceback" not in out + err, err
    assert "| not-started not-started |" in out
    assert out.splitlines()[-1] == (
        "Stopped with 2 of 2 trials unfinished (2 not-started); continue with:"
        f" {command('--resume', module='pong sweep')} {sweep}"
    )


def test_the_summary_counts_every_trial_marks_the_best_and_notes_bad_files(
    tmp_path, capsys
) -> None:
    """Four trials of two settings: seed 1 of 1e-3 ran (its updates.csv reaches a running
    mean above 0 at 40 games), seed 2's updates.csv is a planted link (one note, never
    followed), 3e-4's trials never started."""
    from pong.run.storage import Storage
    from pong.run.sweep import Sweep, summarize
    from tests.run.test_storage import trial_checkpoint

    configs = [Config(learning_rate=lr, seed=s) for lr in (1e-3, 3e-4) for s in (1, 2)]
    settings = dict.fromkeys(PASSED) | {"scheduler": "fifo"}
    sweep = Sweep(configs, settings, ended={trial_name(configs[0]): "done"})
    ran = trial_checkpoint(tmp_path, trial_name(configs[0]), 0, 2)
    header = "update,episodes,steps,seconds,steps_per_s,running_mean,score_mean,score_min,"
    header += "score_max,games_by_node\n"
    rows = ["1,10,1000,2.5,400,-0.5,-1,-2,0,a=10\n", "2,40,2000,3.5,570,0.25,1,0,2,a=10\n"]
    (ran / "updates.csv").write_text(header + "".join(rows))
    linked = trial_checkpoint(tmp_path, trial_name(configs[1]), 0, 2)
    (tmp_path / "secret").write_text(header + rows[0])
    (linked / "updates.csv").symlink_to(tmp_path / "secret")
    table = summarize(Storage(tmp_path), sweep)
    [note] = capsys.readouterr().out.splitlines()
    assert note.startswith(f"note: {trial_name(configs[1])}: ") and "symbolic link" in note
    assert [(r["learning_rate"], r["seeds"], r["ended"], r["best"]) for r in table] == [
        ("0.0003", "1 2", "not-started not-started", "-"),
        ("0.001", "1 2", "done not-started", "final"),
    ]
    assert table[1]["final_running_mean"] == "0.25" and table[1]["training_seconds"] == "6"
    assert table[1]["games_to_running_mean_0"] == "40 -"


def test_a_trial_directory_is_read_as_its_latest_run_and_a_sweep_s_is_named(tmp_path) -> None:
    """export, --evaluate and plot --weights load what ``load`` finds: a trial's latest run."""
    from pong.run.checkpoint import CheckpointError
    from tests.run.test_storage import trial_checkpoint

    trial_checkpoint(tmp_path, "t", 3, 5)
    trial_checkpoint(tmp_path, "t", 4, 6)
    (tmp_path / DEFINITION).write_text("{}")
    assert load(tmp_path / "t").updates == 6
    with pytest.raises(CheckpointError, match=r"no such checkpoint file \(a sweep: name one of"):
        load(tmp_path)
    (tmp_path / DEFINITION).unlink()  # no sweep: a directory of directories is no run
    with pytest.raises(CheckpointError, match=r"t/checkpoint.safetensors: no such [a-z ]+$"):
        load(tmp_path / "t")


def test_a_finished_sweep_says_the_seconds_of_all_its_launches(tmp_path, capsys) -> None:
    from pong.run.storage import Storage
    from pong.run.sweep import report

    config = Config(seed=1)
    ended = {trial_name(config): "done"}
    sweep = Sweep([config], dict.fromkeys(PASSED) | {"scheduler": "fifo"}, ended, seconds=100.0)
    assert report(Storage(tmp_path), sweep, 2.0) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("Done: 1 trial in 102 s;")


@pytest.mark.parametrize("said_by_tune", [False, True])
def test_a_summary_that_cannot_be_written_is_one_line_and_a_failure(
    said_by_tune, tmp_path, capsys
) -> None:
    """As on a full disk: sweep.json cannot be written (a directory is in its place). Said
    once, also where Tune's stop already said it; the table and the resume command follow."""
    from pong.run.storage import Storage
    from pong.run.sweep import report

    (tmp_path / DEFINITION).mkdir()
    sweep = Sweep([Config(seed=1)], dict.fromkeys(PASSED) | {"scheduler": "fifo"})
    said = f"Tune stopped: could not write {tmp_path / DEFINITION}: Is a directory"
    assert report(Storage(tmp_path), sweep, 1.0, error=said if said_by_tune else "") == 1
    out, err = capsys.readouterr()
    assert err == ("" if said_by_tune else f"python -m pong sweep: error: {said[14:]}\n"), err
    again = command("--resume", module="pong sweep")
    assert out.splitlines()[-1].endswith(f"continue with: {again} {tmp_path}")


def test_a_trial_resumes_from_the_latest_checkpoint_that_can_be_resumed(tmp_path, capsys) -> None:
    """Its latest checkpoint's tensors are damaged (its header is whole): the trial goes on
    from the one before, and says why; with none left that can, one line names the file."""
    from pong.run.checkpoint import FILENAME, save
    from pong.run.storage import Storage
    from pong.run.sweep import _trial_run
    from tests.helpers import rows_of
    from tests.run.test_checkpoint import make_checkpoint

    config = Config(seed=0)
    name = trial_name(config)
    for number, update in ((0, 1), (1, 2)):
        (tmp_path / name / f"checkpoint_{number:06d}").mkdir(parents=True)
        path = tmp_path / name / f"checkpoint_{number:06d}" / FILENAME
        saved = dataclasses.replace(make_checkpoint(), updates=update, config=config)
        save(path, saved)
        rows_of(path.parent, saved)
    newest = tmp_path / name / "checkpoint_000001" / FILENAME
    newest.write_bytes(newest.read_bytes()[:-8] + b"\xff" * 8)  # NaN in cache_W2
    run = _trial_run(config, Storage(tmp_path), tmp_path / "local")
    run.close()
    assert run.saved_at == 1
    [note] = capsys.readouterr().out.splitlines()
    assert note.startswith(f"note: {tmp_path / name / 'checkpoint_000001'}: ") and "NaN" in note
    (tmp_path / name / "checkpoint_000000" / FILENAME).write_bytes(newest.read_bytes())
    with pytest.raises(UsageError, match=r"checkpoint_000001: .*NaN or infinite"):
        _trial_run(config, Storage(tmp_path), tmp_path / "again")
    notes = capsys.readouterr().out.splitlines()  # each names its own checkpoint
    named = [re.findall(r"checkpoint_\d+", n) for n in notes]  # a sweep's note named the first
    assert [set(n) for n in named] == [{"checkpoint_000001"}, {"checkpoint_000000"}], notes


def test_a_trial_directory_that_is_a_link_is_refused_and_planted_links_are_removed(
    tmp_path, capsys
) -> None:
    from pong.run.storage import Storage
    from pong.run.sweep import check_trial_directory

    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "sweep" / "a").mkdir(parents=True)
    os.symlink(victim, tmp_path / "sweep" / "a" / "checkpoint_000003")
    os.symlink(victim, tmp_path / "sweep" / "b")
    storage = Storage(tmp_path / "sweep")
    check_trial_directory(storage, "a")
    assert not os.path.lexists(tmp_path / "sweep" / "a" / "checkpoint_000003") and victim.is_dir()
    assert "checkpoint_000003 was a symbolic link; removed" in capsys.readouterr().out
    with pytest.raises(UsageError, match="b: a symbolic link; refusing to write through it"):
        check_trial_directory(storage, "b")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        ("plain", "no sweep there (no sweep.json)"),
        ("inside", "inside the sweep it copies"),
    ],
)
def test_download_refuses_what_it_cannot_copy_in_one_line(make, message, tmp_path, capsys):
    source = tmp_path / "src"
    source.mkdir()
    if make == "inside":
        (source / "sweep.json").write_text("{}")
    dest = source / "copy" if make == "inside" else tmp_path / "copy"
    assert main(["--download", str(source), str(dest)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_a_sweep_json_written_before_the_glossary_reads_iterations_as_updates(tmp_path) -> None:
    from pong.run.storage import Storage
    from pong.run.sweep import read_definition

    configs = [Config(env="PongToy/Catch-v0", seed=s) for s in (1, 2)]
    settings = dict.fromkeys(PASSED) | {"scheduler": "asha", "updates": 6, "watch_every": 0}
    body = json.loads(Sweep(configs, settings).to_json())
    body["settings"]["iterations"] = body["settings"].pop("updates")  # as written before
    (tmp_path / DEFINITION).write_text(json.dumps(body))
    read = read_definition(Storage(tmp_path))
    assert read.settings == settings and read.configs == configs


def test_download_passes_over_a_checkpoint_still_being_written(tmp_path, capsys) -> None:
    """A running sweep's latest checkpoint, cut short (its header whole): the one before is
    copied, with a note; a trial with none whole is not copied."""
    from pong.run.checkpoint import FILENAME
    from tests.run.test_storage import trial_checkpoint

    configs = [Config(seed=s) for s in (1, 2)]
    settings = dict.fromkeys(PASSED) | {"scheduler": "fifo", "watch_every": 0}
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / DEFINITION).write_bytes(Sweep(configs, settings).to_json())
    first, second = (trial_name(c) for c in configs)
    trial_checkpoint(tmp_path / "sweep", first, 0, 3)
    newest = trial_checkpoint(tmp_path / "sweep", first, 1, 4) / FILENAME
    newest.write_bytes(newest.read_bytes()[:-1000])  # as a copy in progress leaves it
    only = trial_checkpoint(tmp_path / "sweep", second, 0, 2) / FILENAME
    only.write_bytes(only.read_bytes()[:-1000])
    assert main(["--download", str(tmp_path / "sweep"), str(tmp_path / "copy")]) == 0
    out = capsys.readouterr().out
    assert out.count("/checkpoint_000001/checkpoint.safetensors: not a readable") == 1
    assert out.count("/checkpoint_000000/checkpoint.safetensors: not a readable") == 1
    assert f"Copied 1 of 2 trial runs into {tmp_path / 'copy'};" in out, out
    assert load(tmp_path / "copy" / first).updates == 3
    assert not (tmp_path / "copy" / second).exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (unshare -m): needs root")
def test_a_download_onto_a_full_disk_is_one_line_and_leaves_nothing_half_copied(tmp_path) -> None:
    """A 100 KB tmpfs, in a mount namespace of its own, for a 20 MB checkpoint."""
    from tests.run.test_storage import trial_checkpoint

    configs = [Config(seed=1)]
    settings = dict.fromkeys(PASSED) | {"scheduler": "fifo", "watch_every": 0}
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / DEFINITION).write_bytes(Sweep(configs, settings).to_json())
    trial_checkpoint(tmp_path / "sweep", trial_name(configs[0]), 0, 3)
    (disk := tmp_path / "disk").mkdir()
    script = 'mount -t tmpfs -o size=100k tmpfs "$0" && "$@"; echo "rc=$?"; ls -A "$0"'
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, str(disk), sys.executable, "-m", "pong", "sweep",
         "--download", str(tmp_path / "sweep"), str(disk / "copy")],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.stdout == "rc=1\n", done.stdout + done.stderr  # as a full disk is, and no copy/
    assert done.stderr == (
        f"python -m pong sweep: error: --download: {disk / 'copy'}: No space left on device\n"
    )


def test_a_traceback_is_said_by_its_last_exception_s_message() -> None:
    from pong.run.sweep import raised

    text = (
        'Traceback (most recent call last):\n  File "x.py", line 1, in f\n    g()\n'
        "OSError: [Errno 28] No space left on device\n\nThe above exception was the direct"
        " cause of the following exception:\n\nTraceback (most recent call last):\n"
        "ray.tune.error.TuneError: could not write s/sweep.json: No space left on device\n"
    )
    assert raised(text) == "could not write s/sweep.json: No space left on device"
    assert raised("Traceback (most recent call last):\n") is None


def test_a_file_uri_to_a_new_directory_is_made_as_a_path_is(tmp_path) -> None:
    """``--sweep-dir file:///new/dir`` failed writing its owner file (a tester's find)."""
    from pong.run.storage import Storage

    where = tmp_path / "new" / "sweep"
    with owned(Storage(f"file://{where}"), creating=True):
        assert (where / OWNER).is_file()
    assert not (where / OWNER).exists()
