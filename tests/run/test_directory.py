"""Run: a run directory's checkpoint and metrics (no Ray: a stand-in trainer)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import pong.run.checkpoint
from pong.core.model import Model, zeros_like_weights
from pong.core.state import State
from pong.run.checkpoint import FILENAME, Checkpoint, load, save
from pong.run.config import Config
from pong.run.directory import JOB_CONFIG, Run
from pong.run.errors import RunFileError, UsageError
from pong.tools import snapshot


def record(run: Run, trainer: StandInTrainer) -> str | None:
    """One made-up update recorded as the driver does: metrics, checkpoint, snapshot.
    The snapshot's warning, if any."""
    run.record(trainer.play(), trainer)
    if run.watch_due(trainer.updates):
        return run.watch(snapshot.take(trainer.model, run.config.env, trainer.updates), trainer)
    return None


class StandInTrainer:
    """What Run reads of a Trainer: counters, the running mean and ``checkpoint()``."""

    def __init__(self, config: Config) -> None:
        self.config, self.model = config, Model(seed=0)
        self.updates = self.games = self.steps = 0
        self.running_mean = self.best_running_mean = None

    def play(self) -> SimpleNamespace:
        """One made-up update of two games."""
        self.updates += 1
        self.games += 2
        self.steps += 200
        self.running_mean = -21.0
        return SimpleNamespace(
            number=self.updates, games=2, steps=200, seconds=1.0, steps_per_second=200.0,
            scores=[-21.0, -21.0], game_steps=[100, 100], nodes={"10.0.0.2": 1, "10.0.0.1": 1},
        )  # fmt: skip

    def state(self) -> State:
        cache = zeros_like_weights(self.model.weights)
        return State(
            self.model.weights, cache, self.updates, self.games, self.steps,
            self.running_mean, self.running_mean,
        )  # fmt: skip

    def checkpoint(self) -> Checkpoint:
        return Checkpoint.of(self.state(), self.config)


def test_a_new_run_gets_a_seed_and_refuses_a_directory_that_holds_a_run(tmp_path) -> None:
    run = Run.start(tmp_path / "a", Config(), checkpoint_every=10)
    assert run.config.seed is not None and run.saved is None
    save(tmp_path / FILENAME, StandInTrainer(Config(seed=1)).checkpoint())
    with pytest.raises(UsageError, match="already holds a run; continue it with --resume"):
        Run.start(tmp_path, Config(), checkpoint_every=10).open()


def test_a_run_directory_that_cannot_be_made_is_named_as_one() -> None:
    with pytest.raises(UsageError, match=r"^run directory /proc/pong-x: No such file"):
        Run.start(Path("/proc/pong-x"), Config(), checkpoint_every=10).open()  # /proc makes none


def test_checkpoints_come_after_the_first_update_every_n_updates_and_at_close(tmp_path) -> None:
    run = Run.start(tmp_path / "run", Config(seed=3), checkpoint_every=2)
    trainer = StandInTrainer(run.config)
    run.open()
    saved = []
    for _ in range(3):
        run.record(trainer.play(), trainer)
        path = run.checkpoint_path
        saved.append(load(path).updates if path.exists() else None)
    assert saved == [1, 2, 2]
    run.close(trainer)
    assert load(run.checkpoint_path).updates == 3
    assert len((run.directory / "updates.csv").read_text().splitlines()) == 1 + 3


def test_a_resume_says_which_rows_past_its_checkpoint_it_dropped(tmp_path, capsys) -> None:
    """As after a SIGKILL: updates 2 and 3 were written, the checkpoint holds update 1."""
    from types import SimpleNamespace

    from pong.run.report import announce

    run = Run.start(tmp_path / "run", Config(seed=3), checkpoint_every=10)
    trainer = StandInTrainer(run.config)
    run.open()
    for _ in range(3):
        run.record(trainer.play(), trainer)
    run.close()  # no trainer: nothing more saved, as a kill saves nothing
    lines = []
    for _ in range(2):  # the second resume finds nothing to drop
        again = Run.resume(run.directory, {}, checkpoint_every=10)
        again.open()
        announce(again, SimpleNamespace(updates=1, until_mean=None), "a local Ray")
        again.close()
        lines.append(capsys.readouterr().out.splitlines()[-1])
    assert lines[0].endswith(
        "; resuming after update 1 (the rows of updates 2 to 3, which it stopped before saving,"
        " were dropped: those games are played again, the same)"
    )
    assert lines[1].endswith("; resuming after update 1")


def test_a_checkpoint_also_comes_once_checkpoint_seconds_have_passed(tmp_path, monkeypatch) -> None:
    run = Run.start(tmp_path / "run", Config(seed=3), checkpoint_every=100)
    run.checkpoint_seconds = 60.0
    trainer, now = StandInTrainer(run.config), [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    run.saved_time = now[0]
    run.open()
    saved = []
    for seconds in (1, 30, 29, 1, 60):  # after each update, the clock has moved on this much
        now[0] += seconds
        run.record(trainer.play(), trainer)
        saved.append(load(run.checkpoint_path).updates)
    assert saved == [1, 1, 1, 4, 5]  # the first; then each update 60 s or more after a save
    run.close(trainer)


def test_resume_keeps_the_run_s_settings_and_refuses_contradicting_flags(tmp_path) -> None:
    config = Config(batch_size=2, seed=4)
    save(tmp_path / FILENAME, StandInTrainer(config).checkpoint())
    run = Run.resume(tmp_path / FILENAME, {"batch_size": 2}, checkpoint_every=10)
    assert (run.config, run.directory, run.saved.updates) == (config, tmp_path, 0)
    with pytest.raises(UsageError, match="--batch-size=3 differs from the resumed run's 2"):
        Run.resume(tmp_path, {"batch_size": 3}, checkpoint_every=10)
    with pytest.raises(UsageError, match="--resume: .*no such checkpoint file"):
        Run.resume(tmp_path / "nowhere", {}, checkpoint_every=10)


@pytest.mark.parametrize(
    "inside", ["", "t", "t/checkpoint_000002", f"t/checkpoint_000002/{FILENAME}"]
)
def test_a_sweep_s_trial_is_not_resumed_in_its_storage_and_copying_it_out_is_said(
    inside, tmp_path
) -> None:
    """The sweep trains its trials on itself: a driver's run there would fork the trial."""
    from tests.run.test_storage import trial_checkpoint

    trial_checkpoint(tmp_path, "t", 2, 5)
    (tmp_path / "sweep.json").write_text("{}")
    what = "a sweep" if not inside else "in the sweep"
    said = rf"--resume: .* is {what} .*sweep --resume .*; .*sweep --download .* DEST\), then"
    with pytest.raises(UsageError, match=said):
        Run.resume(tmp_path / inside, {}, checkpoint_every=10)
    (tmp_path.parent / f"{tmp_path.name}-link").symlink_to(tmp_path / "t")  # through a link too
    with pytest.raises(UsageError, match="is in the sweep"):
        Run.resume(tmp_path.parent / f"{tmp_path.name}-link" / inside.removeprefix("t")[1:], {}, 1)
    new = tmp_path / inside.removesuffix(f"/{FILENAME}") / "new"  # nor is a new run made there
    with pytest.raises(UsageError, match=r"--run-dir .*/new: inside the sweep .*; choose a"):
        Run.start(new, Config(seed=1), checkpoint_every=10)


@pytest.mark.parametrize("counter", ["updates", "steps"])
def test_a_run_with_no_room_to_count_on_is_refused_before_it_saves_one(tmp_path, counter) -> None:
    """Resumed, it would save a count past what any checkpoint may hold, and then refuse it."""
    trainer = StandInTrainer(Config(batch_size=2, seed=4))
    setattr(trainer, counter, pong.run.checkpoint.MAX_COUNT)  # a count a checkpoint may hold
    save(tmp_path / FILENAME, trainer.checkpoint())
    assert getattr(load(tmp_path), counter) == 10**15  # readable: it plays, and exports
    with pytest.raises(UsageError, match=f"--resume: .*: {counter} 1,000,000,000,000,000 is pas"):
        Run.resume(tmp_path, {}, checkpoint_every=10)
    setattr(trainer, counter, pong.run.checkpoint.MAX_RESUMED)
    save(tmp_path / FILENAME, trainer.checkpoint())
    assert getattr(Run.resume(tmp_path, {}, 10).saved, counter) == 10**14


def test_a_run_moved_away_mid_run_still_says_what_it_saved(tmp_path) -> None:
    """The open directory is written, wherever it went: a link put at its name changes
    neither where the run writes nor what its last line says was kept."""
    from pong.run import report

    run = Run.start(tmp_path / "run", Config(batch_size=2, seed=4), checkpoint_every=10)
    run.open()
    trainer = StandInTrainer(run.config)
    record(run, trainer)
    (tmp_path / "run").rename(tmp_path / "moved")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "run").symlink_to(tmp_path / "elsewhere")
    record(run, trainer)
    run.close(trainer)
    assert load(tmp_path / "moved").updates == 2
    assert list((tmp_path / "elsewhere").iterdir()) == []
    done = report.farewell(run, trainer, first=0)
    assert "nothing was saved" not in done and "(continue with: " in done, done
    # Stopped after 2 of 10 updates: the command runs the other 8 (it had trained on forever)
    done = report.farewell(run, trainer, first=0, until_mean=3.0, updates=10)
    assert done.endswith(" --updates=8 --until-mean=3)"), done
    assert " --updates" not in report.farewell(run, trainer, first=0, updates=2)  # all run
    fresh = Run.start(tmp_path / "new", run.config, checkpoint_every=10)
    assert "no update finished, so nothing was saved" in report.farewell(fresh, trainer, 0)
    trainer.best_running_mean = None  # no game yet: no best to say ("best running mean -")
    assert "running mean" not in report.farewell(fresh, trainer, 0)


def test_a_second_owner_of_a_run_directory_is_refused_naming_the_first(tmp_path) -> None:
    first = Run.start(tmp_path / "run", Config(seed=1), checkpoint_every=10)
    first.open()
    second = Run.start(tmp_path / "run", Config(seed=2), checkpoint_every=10)
    with pytest.raises(UsageError, match=f"in use by driver.py \\(pid {os.getpid()} on "):
        second.open()
    first.lock.close()  # the first driver ends: the directory is free again
    second.open()


def test_a_new_run_refuses_an_earlier_run_s_metrics_but_not_bare_headers(tmp_path) -> None:
    for name in ("updates.csv", "games.csv"):  # a run stopped before its first row
        (tmp_path / name).write_text("update,games\n")
    again = Run.start(tmp_path, Config(seed=1), checkpoint_every=10)
    again.open()  # allowed: nothing of a run is lost
    trainer = StandInTrainer(again.config)
    again.record(trainer.play(), trainer)
    again.close()
    (tmp_path / FILENAME).unlink()  # as a run killed before its first save leaves it
    with pytest.raises(UsageError, match="already holds a run's updates.csv, but no checkpoint"):
        Run.start(tmp_path, Config(seed=1), checkpoint_every=10).open()


@pytest.mark.parametrize(
    ("plant", "what"),
    [
        (lambda path, other: path.symlink_to(other), "a symbolic link"),
        (lambda path, other: path.symlink_to(other.parent / "nowhere"), "a symbolic link"),
        (lambda path, other: os.link(other, path), "a hard link to a file with other names"),
        (lambda path, other: os.mkfifo(path), "not a regular file"),
        (lambda path, other: path.mkdir(), "not a regular file"),
    ],
    ids=["symlink", "dangling symlink", "hard link", "fifo", "directory"],
)
@pytest.mark.parametrize("name", ["updates.csv", "games.csv"])
def test_a_link_at_a_metrics_name_is_refused_as_what_it_is_when_the_run_opens(
    tmp_path, name, plant, what
) -> None:
    """Said when the run opens, before Ray starts: not after update 1, with a checkpoint and
    no rows."""
    other = tmp_path / "someone-elses.csv"
    other.write_text("theirs\n")
    (tmp_path / "run").mkdir()
    plant(tmp_path / "run" / name, other)
    run = Run.start(tmp_path / "run", Config(seed=1), checkpoint_every=10)
    with pytest.raises(UsageError, match=f"run/{name}: {what}; refusing to write through it"):
        run.open()
    run.close()
    assert other.read_text() == "theirs\n"


def test_resuming_from_a_copy_of_a_checkpoint_is_refused_as_it_would_rewind(tmp_path) -> None:
    save(tmp_path / "old.safetensors", StandInTrainer(Config(seed=4)).checkpoint())
    with pytest.raises(
        UsageError, match="is not a run's checkpoint.safetensors; to start a new run"
    ):
        Run.resume(tmp_path / "old.safetensors", {}, checkpoint_every=10)


def test_a_file_where_the_run_directory_belongs_is_one_line(tmp_path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="is a file, not a directory"):
        Run.start(tmp_path / "file", Config(seed=1), checkpoint_every=10).open()


def test_a_full_disk_during_a_save_is_one_line_and_keeps_the_last_checkpoint(
    tmp_path, monkeypatch
) -> None:
    run = Run.start(tmp_path, Config(seed=1), checkpoint_every=1)
    trainer = StandInTrainer(run.config)
    run.open()
    run.record(trainer.play(), trainer)  # update 1 saved

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pong.run.checkpoint, "_encoded", full)  # as a full disk fails the write
    with pytest.raises(RunFileError, match="No space left on device; the checkpoint of update 1"):
        run.record(trainer.play(), trainer)
    assert load(run.checkpoint_path).updates == 1


def test_a_new_run_whose_first_save_fails_leaves_nothing_a_run_there_would_refuse(
    tmp_path, monkeypatch
) -> None:
    """A full disk at the first save left update 1's rows and events but no checkpoint: no
    resume could take the directory, and a new run there was refused (a tester's find)."""

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pong.run.checkpoint, "_encoded", full)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("the user's")  # never removed
    for where in (tmp_path / "new" / "run", tmp_path / "mine"):
        run = Run.start(where, Config(seed=1), checkpoint_every=1)
        trainer = StandInTrainer(run.config)
        run.open()
        with pytest.raises(RunFileError, match="no checkpoint was saved"):
            run.record(trainer.play(), trainer)  # its rows and events written, then the save
        assert (where / "updates.csv").exists()
        with pytest.raises(RunFileError, match="no checkpoint was saved"):
            run.close(trainer)  # the save tried again, as the training loop's end does
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["mine", "notes.txt"]


def test_the_directories_and_lock_a_run_made_and_left_empty_are_removed_on_close(
    tmp_path,
) -> None:
    run = Run.start(tmp_path / "new" / "sub" / "run", Config(seed=1), checkpoint_every=10)
    run.open()
    run.close()
    run.close()  # twice: harmless
    assert list(tmp_path.iterdir()) == []  # new/ and new/sub/ too, not only run/
    kept = Run.start(tmp_path, Config(seed=1), checkpoint_every=10)  # it existed before
    kept.open()
    kept.close()
    assert tmp_path.is_dir() and list(tmp_path.iterdir()) == []  # kept, without our lock
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / ".lock").write_text("")  # a lock this run did not make stays
    other = Run.start(tmp_path / "theirs", Config(seed=1), checkpoint_every=10)
    other.open()
    other.close()
    assert [p.name for p in (tmp_path / "theirs").iterdir()] == [".lock"]


def test_in_a_ray_job_runs_go_where_the_job_cannot_take_them(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(JOB_CONFIG, "{}")  # as Ray's job supervisor sets it
    monkeypatch.setenv("HOME", str(tmp_path))
    run = Run.start(None, Config(seed=1), checkpoint_every=10)
    assert run.directory.parent == tmp_path / "ray_results" / "pong"
    for start in (
        lambda: Run.start(Path("runs/x"), Config(seed=1), checkpoint_every=10),
        lambda: Run.resume(Path("runs/x"), {}, checkpoint_every=10),
    ):
        with pytest.raises(UsageError, match="a Ray job's working directory is deleted with"):
            start()
    monkeypatch.delenv(JOB_CONFIG)
    assert Run.start(None, Config(seed=1), checkpoint_every=10).directory.parent == Path("runs")


def test_two_new_runs_started_in_one_second_get_a_directory_each(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    first = Run.start(None, Config(seed=1), checkpoint_every=10)
    first.open()
    second = Run.start(None, Config(seed=2), checkpoint_every=10)
    second.open()  # the same second: a name of its own, not "in use by" the first
    assert first.directory != second.directory
    first.close()
    second.close()


@pytest.mark.parametrize("below", ["file", "link"])
def test_a_run_dir_below_a_file_is_refused_before_ray_starts(below, tmp_path) -> None:
    """Run.start comes before Ray starts; the directory itself is made only after."""
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")  # a link to nothing is no directory
    with pytest.raises(UsageError, match=f"{below} is not a directory$"):
        Run.start(tmp_path / below / "a" / "run", Config(), checkpoint_every=10)


@pytest.mark.parametrize("root", ["/", "//.", "/tmp/.."])
def test_the_file_system_s_root_is_no_run_dir(root) -> None:
    """Refused before Ray starts (it had raised StopIteration, or, for /tmp/.., trained in /)."""
    with pytest.raises(UsageError, match="the file system's root; give a directory of its own"):
        Run.start(Path(root), Config(), checkpoint_every=10)


def _three_updates(tmp_path: Path) -> tuple[Run, StandInTrainer]:
    """A run of three updates, saved, in ``tmp_path / "run"``."""
    run = Run.start(tmp_path / "run", Config(seed=3), checkpoint_every=10)
    trainer = StandInTrainer(run.config)
    run.open()
    for _ in range(3):
        run.record(trainer.play(), trainer)
    run.close(trainer)
    return run, trainer


@pytest.mark.parametrize("ahead", [1, 2])
def test_a_checkpoint_ahead_of_the_run_s_rows_is_refused_as_another_run_s(ahead, tmp_path) -> None:
    """Rows are written before each save, and no save follows rows that could not be written:
    a checkpoint ahead of them is another run's (a copy), or their end was removed."""
    run, trainer = _three_updates(tmp_path)
    trainer.updates += ahead  # another run's, further on
    save(run.checkpoint_path, trainer.checkpoint())
    again = Run.resume(tmp_path / "run", {}, checkpoint_every=10)
    with pytest.raises(UsageError, match=r"updates.csv: ends at update 3, but the checkpoint"):
        again.open()
    again.close()


def test_rows_that_cannot_be_written_end_the_run_with_its_checkpoint_behind_them(
    tmp_path, monkeypatch, capsys
) -> None:
    """Update 5's rows fail (a full disk): the run ends with the checkpoint of update 3, not
    one of update 5 ahead of its rows (a tester's find: that resumed once, left a hole, and
    the resume after it was refused), and resumes from it, twice, without a hole."""
    from pong.run import report
    from pong.run.metrics import GAMES, UPDATES, read_rows

    run = Run.start(tmp_path / "run", Config(seed=3), checkpoint_every=3)
    trainer = StandInTrainer(run.config)
    run.open()
    for _ in range(4):  # saved after updates 1 and 3
        run.record(trainer.play(), trainer)

    def full(*args) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run.metrics, "write", full)
    with pytest.raises(RunFileError, match="No space left on device; the metrics stop") as e:
        run.record(trainer.play(), trainer)
    run.training = True
    run.close(trainer)
    assert load(run.checkpoint_path).updates == 3
    report.failed("driver.py", e.value, run)
    kept = f"; the checkpoint of update 3 in {run.checkpoint_path} is kept\n"
    assert capsys.readouterr().err.endswith(kept)
    for more in (2, 1):
        again = Run.resume(tmp_path / "run", {}, checkpoint_every=3)
        again.open()
        trainer = StandInTrainer(again.config)
        trainer.updates, trainer.games, trainer.steps = (
            again.saved.updates,
            again.saved.games,
            again.saved.steps,
        )
        for _ in range(more):
            again.record(trainer.play(), trainer)
        again.close(trainer)
    rows = read_rows(tmp_path / "run" / UPDATES), read_rows(tmp_path / "run" / GAMES)
    assert [int(r["update"]) for r in rows[0]] == [1, 2, 3, 4, 5, 6]
    assert [int(r["game"]) for r in rows[1]] == list(range(1, 13))


@pytest.mark.parametrize(
    ("left", "said"),
    [(None, "is missing"), (b"update,ga", "holds no rows"), (b"", "holds no rows")],
)
def test_a_run_whose_rows_were_removed_is_not_resumed_with_its_metrics_started_over(
    left, said, tmp_path
) -> None:
    """updates.csv removed, or cut inside its header: the resume had gone on and written the
    next update's row alone, as if the run began there (a fresh tester's find)."""
    _three_updates(tmp_path)
    updates = tmp_path / "run" / "updates.csv"
    updates.unlink() if left is None else updates.write_bytes(left)
    again = Run.resume(tmp_path / "run", {}, checkpoint_every=10)
    with pytest.raises(
        UsageError, match=f"updates.csv: {said}, but the checkpoint holds update 3;"
    ):
        again.open()
    again.close()
    assert (updates.exists(), updates.read_bytes() if left is not None else None) == (
        left is not None,
        left,
    )  # left as it was


def test_a_failed_first_save_says_once_that_nothing_was_saved(tmp_path, capsys) -> None:
    """A full disk at the first save: 'no checkpoint was saved; no update had finished, so
    nothing was saved' said it twice, the second wrongly (update 1 had finished)."""
    from pong.run import report

    run = Run.start(tmp_path / "run", Config(seed=3), checkpoint_every=10)
    run.training = True
    error = RunFileError("could not write x: No space left on device; no checkpoint was saved")
    assert report.failed("driver.py", error, run) == 1
    assert capsys.readouterr().err == f"driver.py: error: {error}\n"
    report.failed("driver.py", RunFileError("could not write y"), run)
    assert capsys.readouterr().err.endswith("; no update had finished, so nothing was saved\n")


@pytest.mark.parametrize(
    ("name", "edit", "said"),
    [
        ("games.csv", lambda lines: lines[:3] + lines[4:], "game 4 where game 3 is due"),
        ("updates.csv", lambda lines: [lines[0], lines[1].replace("1,", "5,", 1), *lines[2:]],
         "update 5 where update 1 is due"),
    ],
)  # fmt: skip
def test_a_resume_past_a_hole_in_the_rows_is_refused(name, edit, said, tmp_path) -> None:
    """A game's row removed from the middle: the resume had gone on, the hole kept for good
    (a second fresh tester's find); a renumbered update, the same."""
    _three_updates(tmp_path)
    path = tmp_path / "run" / name
    path.write_text("".join(edit(path.read_text().splitlines(keepends=True))))
    again = Run.resume(tmp_path / "run", {}, checkpoint_every=10)
    with pytest.raises(UsageError, match=f"{name}, line .*: {said}; were rows removed"):
        again.open()
    again.close()
