from __future__ import annotations

import csv
import os
import subprocess
import sys
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from pong.run.errors import UsageError, printable
from pong.run.metrics import (
    GAMES,
    OLD_COLUMNS,
    OLD_GAMES,
    UPDATES,
    MetricsLog,
    games_file,
    main,
    read_rows,
    summarize,
)
from tests.helpers import ROOT


def _row(update: int) -> dict[str, object]:
    return {
        "update": update,
        "games": 2 * update,
        "steps": 900 * update,
        "seconds": 1.5,
        "steps_per_s": 1200.0,
        "running_mean": -20.5,
        "score_mean": -20.0,
        "score_min": -21.0,
        "score_max": -19.0,
    }


def _games(update: int) -> list[dict[str, object]]:
    return [
        {"game": 2 * update - 1 + i, "update": update, "score": -21.0 + i, "steps": 900}
        for i in range(2)
    ]


def odd_run(tmp_path, updates: int = 3) -> Path:
    """A run directory whose name is not UTF-8 (``run-\\xff``), holding ``updates`` updates."""
    run = Path(os.fsdecode(os.fsencode(tmp_path) + b"/run-\xff"))
    try:
        run.mkdir()
    except OSError:  # a file system that only takes UTF-8 names
        pytest.skip("this file system refuses a name that is not UTF-8")
    log = MetricsLog(run)
    for update in range(1, updates + 1):
        log.write(_row(update), _games(update))
    log.close()
    return run


def run_module(module: str, *args: str | os.PathLike) -> subprocess.CompletedProcess:
    """``python -m module args`` with a strict UTF-8 output, as in a UTF-8 locale."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    command = [sys.executable, "-m", module, *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


def _read(path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _as_written_before_the_glossary(run: Path) -> None:
    """``run``'s files as earlier versions named them: episodes.csv, and the old columns."""
    old = {new: name for name, new in OLD_COLUMNS.items()}
    (run / GAMES).rename(run / OLD_GAMES)
    for name in (UPDATES, OLD_GAMES):
        header, rest = (run / name).read_text().split("\n", 1)
        (run / name).write_text(",".join(old.get(c, c) for c in header.split(",")) + "\n" + rest)
    assert "running_reward" in (run / UPDATES).read_text()  # the test can fail


def test_a_run_of_one_update_is_said_so(tmp_path) -> None:
    with closing(MetricsLog(tmp_path)) as log:
        log.write(_row(1), _games(1))
    assert summarize(tmp_path)[0].startswith("1 update, 2 games, ")  # not "1 updates"


def test_an_older_run_reads_as_today_and_resumes_into_today_s_names(tmp_path) -> None:
    log = MetricsLog(tmp_path)
    for update in (1, 2):
        log.write(_row(update), _games(update))
    log.close()
    today = {name: (tmp_path / name).read_bytes() for name in (UPDATES, GAMES)}
    _as_written_before_the_glossary(tmp_path)
    assert games_file(tmp_path) == tmp_path / OLD_GAMES
    assert read_rows(games_file(tmp_path)) == _read_bytes(today[GAMES])
    assert summarize(tmp_path)[0].startswith("2 updates, 4 games, 1,800 steps")
    MetricsLog(tmp_path, after=2).close()  # a resume: the files take today's names, rows kept
    assert not (tmp_path / OLD_GAMES).exists()
    assert {name: (tmp_path / name).read_bytes() for name in (UPDATES, GAMES)} == today


def _read_bytes(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(data.decode().splitlines()))


def test_rows_are_flushed_as_written_and_appended_on_reopen(tmp_path) -> None:
    log = MetricsLog(tmp_path)
    log.write(_row(1), _games(1))
    # Visible before close: a crash after this loses nothing.
    assert [r["update"] for r in _read(tmp_path / UPDATES)] == ["1"]
    assert [r["game"] for r in _read(tmp_path / GAMES)] == ["1", "2"]
    log.close()

    log = MetricsLog(tmp_path)  # a resumed run
    log.write(_row(2), _games(2))
    log.close()
    text = (tmp_path / UPDATES).read_text()
    assert text.count("update,games") == 1  # one header
    assert [r["update"] for r in _read(tmp_path / UPDATES)] == ["1", "2"]
    assert [r["game"] for r in _read(tmp_path / GAMES)] == ["1", "2", "3", "4"]
    assert _read(tmp_path / GAMES)[3]["score"] == "-20.0"


def test_each_update_says_how_many_games_each_node_played_also_in_an_older_run(tmp_path) -> None:
    update = SimpleNamespace(
        number=1, games=3, seconds=1.0, steps_per_second=900.0, scores=[-21.0] * 3,
        game_steps=[300] * 3, nodes={"10.0.0.2": 1, "10.0.0.1": 2},
    )  # fmt: skip
    trainer = SimpleNamespace(games=3, steps=900, running_mean=-21.0)
    (tmp_path / "new").mkdir()
    log = MetricsLog(tmp_path / "new")
    log.record(update, trainer)
    log.close()
    assert _read(tmp_path / "new" / UPDATES)[0]["games_by_node"] == "10.0.0.1=2 10.0.0.2=1"
    # A run from before the column: its rows go on under its own header.
    (tmp_path / "old").mkdir()
    log = MetricsLog(tmp_path / "old")
    log.write(_row(1), _games(1))
    log.close()
    header = (tmp_path / "old" / UPDATES).read_text().splitlines()[0]
    (tmp_path / "old" / UPDATES).write_text(
        (tmp_path / "old" / UPDATES).read_text().replace(",games_by_node,time", "")
    )
    log = MetricsLog(tmp_path / "old", after=1)
    update.number = 2
    log.record(update, trainer)
    log.close()
    rows = read_rows(tmp_path / "old" / UPDATES)
    assert [r["update"] for r in rows] == ["1", "2"] and "games_by_node" not in rows[1]
    assert None not in rows[1]  # no value without a column
    assert header.endswith(",games_by_node,time")


def test_resuming_drops_rows_of_updates_after_the_checkpoint(tmp_path) -> None:
    # A run killed after update 3 whose last checkpoint is update 2 plays update 3
    # again on resume: its first row must go, so each update keeps one row.
    log = MetricsLog(tmp_path)
    for update in (1, 2, 3):
        log.write(_row(update), _games(update))
    log.close()

    log = MetricsLog(tmp_path, after=2)
    assert [r["update"] for r in _read(tmp_path / UPDATES)] == ["1", "2"]
    assert [r["game"] for r in _read(tmp_path / GAMES)] == ["1", "2", "3", "4"]
    log.write(_row(3), _games(3))
    log.close()
    assert [r["update"] for r in _read(tmp_path / UPDATES)] == ["1", "2", "3"]
    assert [r["update"] for r in _read(tmp_path / GAMES)] == ["1", "1", "2", "2", "3", "3"]
    assert (tmp_path / UPDATES).read_text().count("update,games") == 1


def test_summary_counts_time_and_milestones_from_the_rows(tmp_path, capsys) -> None:
    log = MetricsLog(tmp_path)
    for update, running, seconds in ((1, -20.5, 1800.0), (2, -12.0, 3600.0), (3, -4.0, 1800.0)):
        row = _row(update) | {"running_mean": running, "seconds": seconds}
        log.write(row, _games(update))
    log.close()
    assert main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "3 updates, 6 games, 2,700 steps, 2.00 h of training (0 steps/s)",
        "running mean -4.00 at the end, best -4.00 (update 3, game 6)",
        "running mean above -20 from update 2, game 4, after 1.50 h",
        "running mean above -15 from update 2, game 4, after 1.50 h",
        "running mean above -10 from update 3, game 6, after 2.00 h",
        "running mean above -5 from update 3, game 6, after 2.00 h",
    ]


def test_each_row_says_when_it_was_written_and_the_summary_reads_the_wall_clock_back(
    tmp_path, capsys
) -> None:
    update = SimpleNamespace(
        number=1, games=2, seconds=1.0, steps_per_second=900.0, scores=[-21.0] * 2,
        game_steps=[450] * 2, nodes={"10.0.0.1": 2},
    )  # fmt: skip
    before = datetime.now(timezone.utc).replace(microsecond=0)
    (tmp_path / "new").mkdir()
    (tmp_path / "timed").mkdir()
    log = MetricsLog(tmp_path / "new")
    log.record(update, SimpleNamespace(games=2, steps=900, running_mean=-21.0))
    log.close()
    written = datetime.fromisoformat(_read(tmp_path / "new" / UPDATES)[0]["time"])
    assert before <= written <= datetime.now(timezone.utc)
    # Update 2 ends 10 s after update 1's row (not a pause); the run then stops for 2 hours.
    start = datetime(2026, 11, 28, 3, 0, tzinfo=timezone.utc).timestamp()
    ends = [start + 1800, start + 1800 + 10 + 3600, start + 1800 + 10 + 3600 + 7200 + 1800]
    log = MetricsLog(tmp_path / "timed")
    for n, (running, seconds) in enumerate(((-20.5, 1800.0), (-12.0, 3600.0), (-4.0, 1800.0))):
        when = datetime.fromtimestamp(ends[n], timezone.utc).isoformat()
        log.write(_row(n + 1) | {"running_mean": running, "seconds": seconds, "time": when}, [])
    log.close()
    assert main([str(tmp_path / "timed")]) == 0
    lines = capsys.readouterr().out.splitlines()
    wall = (ends[2] - start) / 3600  # 4.00 h: training 2.00, the pause 2.00, the gap 10 s
    assert lines[1] == (
        f"{wall:.2f} h of wall clock from the first update's start to the last,"
        f" 1 pause of over 60 s ({7200 / 3600:.2f} h)"
    )
    assert lines[3] == (
        f"running mean above -20 from update 2, game 4, after 1.50 h"
        f" ({(ends[1] - start) / 3600:.2f} h of wall clock)"
    )
    assert lines[-1].endswith(f"after 2.00 h ({wall:.2f} h of wall clock)")


def test_a_sweep_s_trial_is_summarized_as_its_latest_run_and_a_whole_sweep_is_refused(
    tmp_path, capsys
) -> None:
    from tests.run.test_storage import trial_checkpoint

    (tmp_path / "sweep.json").write_text("{}")
    (tmp_path / "b-seed2").mkdir()  # a trial that never reported
    assert main([str(tmp_path / "b-seed2")]) == 2
    assert "b-seed2: no trial has finished an update yet\n" in capsys.readouterr().err
    old, latest = (
        trial_checkpoint(tmp_path, "a-seed1", 3, 1),
        trial_checkpoint(tmp_path, "a-seed1", 0, 2),
    )
    for run, updates in ((old, 1), (latest, 2)):
        log = MetricsLog(run)
        for update in range(1, updates + 1):
            log.write(_row(update), _games(update))
        log.close()
    assert main([str(tmp_path / "a-seed1")]) == 0
    assert capsys.readouterr().out == "\n".join(summarize(latest)) + "\n"
    trial_checkpoint(tmp_path, "b-seed2", 0, 1)
    assert main([str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"python -m pong metrics: error: {tmp_path}: holds 2 runs (a sweep's trials, or a"
        " folder's); give one run's directory\n"
    )


def test_summary_of_a_directory_without_metrics_is_one_line(tmp_path, capsys) -> None:
    assert main([str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"python -m pong metrics: error: {tmp_path / UPDATES}: no such file;"
        f" is {tmp_path} a run directory?\n"
    )
    with pytest.raises(SystemExit):  # '' is no path (it read as the current directory)
        main([""])
    assert "argument run_dir: expected a path, got ''" in capsys.readouterr().err
    (tmp_path / UPDATES).write_text("")  # a run's file given for the run: named as given
    assert main([str(tmp_path / UPDATES)]) == 2
    assert capsys.readouterr().err == (
        f"python -m pong metrics: error: {tmp_path / UPDATES}: a file; give the run directory it"
        " is in\n"
    )


def test_a_resume_drops_a_torn_last_line_and_names_an_edited_one(tmp_path) -> None:
    log = MetricsLog(tmp_path)
    for update in (1, 2):
        log.write(_row(update), _games(update))
    log.close()
    with open(tmp_path / UPDATES, "a") as f:
        f.write("3,3,3")  # a kill while this row was being written
    MetricsLog(tmp_path, after=2).close()
    assert [row["update"] for row in read_rows(tmp_path / UPDATES)] == ["1", "2"]
    whole = (tmp_path / UPDATES).read_text()
    (tmp_path / UPDATES).write_text(whole.removesuffix("\n"))  # as an editor may save it
    MetricsLog(tmp_path, after=2).close()  # update 2 is in the checkpoint: a whole row, kept
    assert (tmp_path / UPDATES).read_text() == whole
    with open(tmp_path / UPDATES, "a") as f:
        f.write("garbage line\n")
    with pytest.raises(UsageError, match=r"updates.csv, line 4: not a metrics row"):
        MetricsLog(tmp_path, after=2)
    updates = (tmp_path / UPDATES).read_text().replace("garbage line\n", "")
    (tmp_path / UPDATES).write_text(updates.replace("\n2,", "\n2,two", 1))  # what tools refuse
    with pytest.raises(UsageError, match=r"updates.csv, line 3: not a metrics row"):
        MetricsLog(tmp_path, after=2)
    (tmp_path / UPDATES).write_text(updates)
    (tmp_path / GAMES).write_bytes(b"game,update,score,steps\n\xff\xfe\n")
    with pytest.raises(UsageError, match="games.csv: not a metrics file"):
        MetricsLog(tmp_path, after=2)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda lines: [*lines, lines[-1]], "line 5: update 3 where update 4"),
        (lambda lines: [lines[0], lines[2], lines[1], lines[3]], "line 2: update 2 where update 1"),
    ],
)
def test_a_summary_of_rows_duplicated_or_swapped_is_one_line(edit, said, tmp_path, capsys) -> None:
    """metrics, compare and plot had summed them as they stood (a tester's find)."""
    log = MetricsLog(tmp_path)
    for update in (1, 2, 3):
        log.write(_row(update), _games(update))
    log.close()
    lines = (tmp_path / UPDATES).read_text().splitlines(keepends=True)
    (tmp_path / UPDATES).write_text("".join(edit(lines)))
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1 and f"updates.csv, {said} is due; were rows removed or edited?" in err
    )


def test_a_resume_checks_the_rows_of_its_update_against_the_checkpoint_s_totals(tmp_path) -> None:
    """A hand-edited checkpoint count, or a game's row cut from the end, is said at the
    resume, before a row is written."""
    log = MetricsLog(tmp_path)
    for update in (1, 2, 3):
        log.write(_row(update), _games(update))
    log.close()
    MetricsLog(tmp_path, after=2, totals=(4, 1800, -20.5)).close()  # its own: update 3 dropped
    for totals in ((5, 1800, -20.5), (4, 1801, -20.5), (4, 1800, -5.0)):  # a running mean too
        with pytest.raises(UsageError, match=r"the checkpoint holds [45] games, 1,80[01] steps"
                           r" and running mean -(20.5|5.0) at update 2, but updates.csv says 4,"
                           r" 1,800 and -20.5, and games.csv has 4 rows; were the files"
                           r" edited"):  # fmt: skip
            MetricsLog(tmp_path, after=2, totals=totals)
    games = (tmp_path / GAMES).read_text().splitlines(keepends=True)
    (tmp_path / GAMES).write_text("".join(games[:-1]))  # game 4, update 2's last, cut off
    files = {name: (tmp_path / name).read_text() for name in (UPDATES, GAMES)}
    with pytest.raises(
        UsageError, match=r"updates.csv says 4, 1,800 and -20.5, and games.csv has 3"
    ):
        MetricsLog(tmp_path, after=2, totals=(4, 1800, -20.5))
    assert {name: (tmp_path / name).read_text() for name in files} == files  # none written
    (tmp_path / UPDATES).write_text("".join(files[UPDATES].splitlines(keepends=True)[:2]))
    with pytest.raises(UsageError, match="updates.csv: ends at update 1, but the checkpoint"):
        MetricsLog(tmp_path, after=2, totals=(4, 1800, -20.5))  # no save follows rows not written


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda text: text + "3,6,2700", None),  # a row being written: left out
        (lambda text: text + "3,6\n", "line 4: not a metrics row"),
        (lambda text: text + "3,6,abc,1,1,1,1,1,1\n", "line 4: not a metrics row"),
        (lambda text: text + "3.5,6,2700,1,1,1,1,1,1\n", "line 4: not a metrics row"),
        (lambda text: text.replace("seconds", "secs"), "line 1: not the header of updates.csv"),
        (
            lambda text: text.replace("score_max", "score_max,score_max", 1),
            "line 1: not the header of updates.csv",
        ),
        (lambda text: text + "3,6,2700,inf,1,1,1,1,1\n", "line 4: not a metrics row"),
        (  # values no run writes: a negative update, a mean of scores of 1e308
            lambda text: text + "-5,6,2700,1,1,1,1,1,1\n",
            "line 4: not a metrics row (update '-5': no run writes it)",
        ),
        (
            lambda text: text + "3,6,2700,1,1,1e308,1,1,1\n",
            "line 4: not a metrics row (running_mean '1e308': no run writes it)",
        ),
        (  # an update of 1e308 seconds: a 300-digit figure of hours (a tester's find)
            lambda text: text + "3,6,2700,1e308,1,1,1,1,1\n",
            "line 4: not a metrics row (seconds '1e308': no run writes it)",
        ),
        (
            lambda text: text + "3,6," + "9" * 5000 + "\n",
            "line 4: longer than 4,096 bytes; not a metrics row",
        ),
        (
            lambda text: text + '3,"' + "x\n" * 70_000,
            "line 65540: not a metrics row (field larger than field limit (131072))",
        ),
        (
            lambda text: text + "3,6,2700,1,1,1,1,1,1,,2026-11-28T03:26:17\n",  # no time zone
            "line 4: not a metrics row (time '2026-11-28T03:26:17': no run writes it)",
        ),
        (
            lambda text: text + "3,6,2700,1,1,1,1,1,1,,yesterday\n",
            "line 4: not a metrics row (time 'yesterday': no run writes it)",
        ),
        (
            lambda text: text + "3,6,2700\r1,1,1,1,1,1\n",
            "line 4: not a metrics row (a carriage return inside a line)",
        ),
    ],
)
def test_a_damaged_metrics_file_is_one_line_naming_the_line(
    damage, message, tmp_path, capsys
) -> None:
    log = MetricsLog(tmp_path)
    for update in (1, 2):
        log.write(_row(update), _games(update))
    log.close()
    path = tmp_path / UPDATES
    path.write_text(damage(path.read_text()))
    if message is None:
        assert [row["update"] for row in read_rows(path)] == ["1", "2"]
        return
    assert main([str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"python -m pong metrics: error: {path}, {message}\n"


def test_a_run_whose_name_is_not_utf8_is_summarized_or_named_printably(tmp_path) -> None:
    run = odd_run(tmp_path)
    proc = run_module("pong", "metrics", run)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.startswith("3 updates, 6 games, 2,700 steps")
    (run / UPDATES).unlink()
    proc = run_module("pong", "metrics", run)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"python -m pong metrics: error: {printable(run / UPDATES)}: no such file;"
        f" is {printable(run)} a run directory?\n"
    )
