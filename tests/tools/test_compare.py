from __future__ import annotations

import os
import subprocess
import sys

from pong.run.errors import printable
from pong.run.metrics import UPDATES, MetricsLog
from pong.tools.compare import MARKS, figures, main, table
from tests.helpers import NOBODY, ROOT, nobody_s_folder
from tests.run.test_metrics import _row, odd_run, run_module


def _run(directory, running_means: list[float], seconds: float, steps: int = 1000):
    """A run of batch 10 whose running mean after update i is ``running_means[i - 1]``."""
    directory.mkdir()
    log = MetricsLog(directory)
    for i, running in enumerate(running_means, start=1):
        row = {"update": i, "games": 10 * i, "steps": steps * i, "seconds": seconds}
        log.write(_row(i) | row | {"running_mean": running}, [])
    log.close()
    return directory


def test_each_run_passes_each_mark_at_its_first_update_above_it(tmp_path) -> None:
    means = [-21.0, -16.0, -15.0, -14.9, -12.0, -10.0, -4.0, -5.5, 0.0, 0.25]
    run = figures(_run(tmp_path / "a", means, seconds=360.0))  # 0.1 h per update
    expected = {-15: 4, -10: 7, -5: 7, 0: 10}  # "above": -15.0 and 0.0 themselves are not
    for mark, passed in zip(MARKS, run.marks, strict=True):
        assert (passed.update, passed.games) == (expected[mark], 10 * expected[mark])
        assert abs(passed.hours - 0.1 * expected[mark]) < 1e-12
    assert (run.updates, run.final, run.steps_per_s) == (10, 0.25, 1000 / 360)


def test_the_median_and_range_span_the_runs_and_never_passed_counts_as_last(
    tmp_path, capsys
) -> None:
    climb = [-21.0, -14.0, -9.0, -4.0, 1.0]  # passes a mark at each update
    runs = [
        _run(tmp_path / "fast", climb, seconds=3600.0, steps=100_000),
        _run(tmp_path / "slow", [-21.0, -20.0, *climb[1:]], seconds=1800.0, steps=300_000),
        _run(tmp_path / "stuck", [-21.0, -20.0, -16.0, -12.0], seconds=900.0, steps=100_000),
    ]
    assert main([str(run) for run in runs]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == table([figures(run) for run in runs])
    header, _, fast, slow, stuck, median, spread = (line[2:-2].split(" | ") for line in lines)
    assert header[1:5] == ["above -15", "above -10", "above -5", "above 0"]
    assert fast[1:5] == ["2 / 20 / 2.00 h", "3 / 30 / 3.00 h", "4 / 40 / 4.00 h", "5 / 50 / 5.00 h"]
    assert slow[1:5] == ["3 / 30 / 1.50 h", "4 / 40 / 2.00 h", "5 / 50 / 2.50 h", "6 / 60 / 3.00 h"]
    assert stuck[1:5] == ["4 / 40 / 1.00 h", "not passed", "not passed", "not passed"]
    # Each figure on its own: the middle of the three, a run that never passed counting last.
    assert median[1] == "3 / 30 / 1.50 h" and spread[1] == "2 to 4 / 20 to 40 / 1.00 h to 2.00 h"
    assert median[4] == "6 / 60 / 5.00 h" and spread[4] == "5 / 50 / 3.00 h to not passed"
    assert (median[5], spread[5]) == ("5", "4 to 6")  # updates
    assert (median[6], spread[6]) == ("+1.00", "-12.00 to +1.00")  # final running means
    speeds = sorted([100_000 / 3600, 300_000 / 1800, 100_000 / 900])
    assert median[7] == f"{speeds[1]:,.0f}" and spread[7] == f"{speeds[0]:,.0f} to {speeds[2]:,.0f}"
    assert [fast[0], slow[0], stuck[0], median[0]] == [*map(str, runs), "**median**"]


def test_an_even_number_of_runs_has_a_median_between_two(tmp_path, capsys) -> None:
    runs = [_run(tmp_path / n, [-21.0] * (k - 1) + [-14.0], 60.0) for n, k in (("a", 2), ("b", 5))]
    assert main([str(run) for run in runs]) == 0
    median = capsys.readouterr().out.splitlines()[-2]
    assert median.startswith("| **median** | 3.5 / 35 / 0.06 h | not passed |"), median


def test_a_run_given_twice_or_with_a_bar_in_its_name(tmp_path, capsys) -> None:
    run = _run(tmp_path / "a|b", [-21.0, -14.0], 60.0)
    assert main([str(run), f"{run}/"]) == 2
    assert capsys.readouterr().err == (
        f"python -m pong compare: error: {run}: this run is given twice; give each run once\n"
    )
    assert main([str(run)]) == 0
    row = capsys.readouterr().out.splitlines()[2]
    assert row.startswith(f"| {tmp_path}/a\\|b | 2 / 20 / 0.03 h |")  # one cell, not two


def test_a_directory_without_metrics_is_one_line(tmp_path, capsys) -> None:
    assert main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(
        f"python -m pong compare: error: {tmp_path / UPDATES}"
    )


def test_a_reader_that_closed_the_pipe_ends_it_quietly(tmp_path) -> None:
    run = _run(tmp_path / "a", [-21.0, -14.0], 60.0)
    read, write = os.pipe()
    os.close(read)  # `| head` that has already gone
    proc = subprocess.run(
        [sys.executable, "-m", "pong", "compare", str(run)],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    os.close(write)
    assert (proc.returncode, proc.stderr) == (141, "")


def test_a_run_whose_name_is_not_utf8_is_named_printably(tmp_path) -> None:
    run = odd_run(tmp_path)
    proc = run_module("pong", "compare", run)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.splitlines()[2].startswith(f"| {printable(run)} | not passed |")
    proc = run_module("pong", "compare", run, f"{run}/")
    assert proc.returncode == 2
    assert proc.stderr == (
        f"python -m pong compare: error: {printable(run)}: this run is given twice;"
        " give each run once\n"
    )


def test_a_sweep_stands_for_its_trials_latest_runs_and_its_own_files_are_no_run(
    tmp_path,
) -> None:
    from pong.run.sweep import runs_of
    from tests.run.test_storage import trial_checkpoint

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text("{}")
    for name in ("summary.csv", "tuner.pkl", "experiment_state-1.json"):
        (sweep / name).write_text("Tune's or ours\n")
    newest = [trial_checkpoint(sweep, "a-seed1", 0, 5), trial_checkpoint(sweep, "b-seed2", 3, 4)]
    trial_checkpoint(sweep, "a-seed1", 7, 4)  # an earlier launch's, numbered higher
    (sweep / "c-seed3").mkdir()  # a trial that never reported
    assert runs_of([sweep]) == newest
    shell = sorted(p for p in sweep.iterdir() if p.name[0] != ".")  # DIR/*, as bash expands it
    assert runs_of(shell) == newest
    assert runs_of([tmp_path / "x"]) == [tmp_path / "x"]  # anything else as it is
    (tmp_path / "summary.csv").write_text("not a sweep's\n")
    assert runs_of([tmp_path / "summary.csv"]) == [tmp_path / "summary.csv"]
    assert runs_of([tmp_path]) == newest  # a folder of sweeps and runs (results/)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "updates.csv").write_text("update\n")
    (tmp_path / "not-a-run").mkdir()
    assert runs_of([tmp_path]) == [tmp_path / "run", *newest]
    (tmp_path / "lr" / "1e-4").mkdir(parents=True)  # a folder of runs in the folder
    (tmp_path / "lr" / "1e-4" / "updates.csv").write_text("update\n")
    (tmp_path / "lr" / "notes").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "lr")  # not followed: once is enough
    assert runs_of([tmp_path]) == [tmp_path / "lr" / "1e-4", tmp_path / "run", *newest]
    assert runs_of([tmp_path / "not-a-run"]) == [tmp_path / "not-a-run"]  # its own error, later


def test_an_unreadable_folder_beside_runs_is_passed_over_not_a_traceback() -> None:
    """As a user who may not look into a folder of ``runs/`` (root reads everything, so the
    tool runs as nobody): a PermissionError traceback, before the runs were read with
    ``os.path``'s tests."""
    with nobody_s_folder() as folder:
        (folder / "run").mkdir(mode=0o755)
        log = MetricsLog(folder / "run")
        log.write(_row(1), [])
        log.close()
        for name in os.listdir(folder / "run"):
            (folder / "run" / name).chmod(0o644)
        (folder / "locked").mkdir(mode=0o000)
        done = subprocess.run(
            [*NOBODY, "-m", "pong", "compare", str(folder)],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert f"| {folder / 'run'} |" in done.stdout, done.stdout


def test_a_sweep_s_trial_is_named_by_the_trial_not_its_checkpoint(tmp_path, capsys) -> None:
    """Its rows said ``SWEEP/TRIAL/checkpoint_000003`` (a newcomer's find)."""
    from tests.run.test_storage import trial_checkpoint

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text("{}")
    log = MetricsLog(trial_checkpoint(sweep, "a-seed1", 3, 1))
    log.write(_row(1), [])
    log.close()
    assert main([str(sweep)]) == 0
    out = capsys.readouterr().out
    assert f"| {sweep / 'a-seed1'} |" in out and "checkpoint_" not in out, out
