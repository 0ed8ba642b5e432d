"""pong.run.files: writes that no planted link, special file or second writer can redirect."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import pong.run.directory as directory_module
from pong.run.checkpoint import FILENAME, load, save
from pong.run.directory import LOCK, Run, lock
from pong.run.errors import PongError
from pong.run.files import Directory, atomic_write, create_new, open_regular
from tests.helpers import ROOT
from tests.run.test_checkpoint import make_checkpoint
from tests.run.test_directory import StandInTrainer, record

VICTIM = b"precious: a file the user can write, outside the run directory\n"
VICTIM_NAME = "precious.txt"


@pytest.fixture
def victim(tmp_path) -> Path:
    path = tmp_path / VICTIM_NAME
    path.write_bytes(VICTIM)
    return path


def plant(directory: Path, names: list[str], target: Path) -> None:
    """Links a stranger with write access to ``directory`` could have left there."""
    for name in names:
        (directory / name).symlink_to(target)


@pytest.mark.parametrize("replace", [True, False])
def test_atomic_write_never_writes_through_a_planted_link(tmp_path, victim, replace) -> None:
    out = tmp_path / "out"
    out.mkdir()
    plant(out, [".a.npz.tmp", ".a.npz.0.tmp"], victim)  # the old fixed name, and a guess
    with atomic_write(out / "a.npz", replace=replace) as f:
        f.write(b"new")
    assert victim.read_bytes() == VICTIM
    assert (out / "a.npz").read_bytes() == b"new" and not (out / "a.npz").is_symlink()
    assert sorted(p.name for p in out.iterdir()) == [".a.npz.0.tmp", ".a.npz.tmp", "a.npz"]


def test_a_link_at_the_target_is_replaced_not_followed(tmp_path, victim) -> None:
    (tmp_path / "a.gif").symlink_to(victim)
    with atomic_write(tmp_path / "a.gif") as f:
        f.write(b"GIF")
    assert victim.read_bytes() == VICTIM and (tmp_path / "a.gif").read_bytes() == b"GIF"


def test_never_overwrite_refuses_any_existing_name_and_leaves_nothing(tmp_path, victim) -> None:
    (tmp_path / "dangling.npz").symlink_to(tmp_path / "nothing-here")
    (tmp_path / "link.npz").symlink_to(victim)
    for name in ("dangling.npz", "link.npz", "precious.txt"):
        with pytest.raises(FileExistsError), atomic_write(tmp_path / name, replace=False) as f:
            f.write(b"new")
    assert victim.read_bytes() == VICTIM and not (tmp_path / "nothing-here").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.npz", "link.npz", VICTIM_NAME]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path) -> None:
    (tmp_path / "a").write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_write(tmp_path / "a") as f:
        f.write(b"half")
        raise RuntimeError("disk full, say")
    assert [p.name for p in tmp_path.iterdir()] == ["a"] and (tmp_path / "a").read_bytes() == b"old"


def test_a_write_below_a_file_is_refused_naming_the_path_asked_for(tmp_path) -> None:
    (tmp_path / "file").write_text("someone's")
    with pytest.raises(NotADirectoryError) as refused, atomic_write(tmp_path / "file" / "x.png"):
        pass
    assert refused.value.filename == str(tmp_path / "file" / "x.png")  # not our temporary name


def test_open_regular_refuses_links_special_files_and_hard_links(tmp_path, victim) -> None:
    (tmp_path / "link.csv").symlink_to(victim)
    os.mkfifo(tmp_path / "fifo.csv")  # opening it to write would block without O_NONBLOCK
    os.link(victim, tmp_path / "hard.csv")
    for name, reason in [
        ("link.csv", "symbolic link"),
        ("fifo.csv", "not a regular file"),
        ("hard.csv", "hard link"),
    ]:
        with pytest.raises(OSError, match=reason):
            open_regular(tmp_path / name, "a")
    assert victim.read_bytes() == VICTIM
    with open_regular(tmp_path / "new.csv", "a") as f:  # a plain file is made and appended to
        f.write("x\n")
    with open_regular(tmp_path / "new.csv", "a") as f:
        f.write("y\n")
    assert (tmp_path / "new.csv").read_text() == "x\ny\n"


def test_create_new_refuses_a_dangling_link(tmp_path) -> None:
    (tmp_path / "events").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):
        create_new(tmp_path / "events")
    assert not (tmp_path / "elsewhere").exists()


def test_a_run_never_writes_through_links_planted_in_its_directory(tmp_path, victim) -> None:
    """--resume with links planted at every name a run writes: the victim stays whole."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    trainer = StandInTrainer(Run.start(run_dir, make_checkpoint().config, 10).config)
    save(run_dir / FILENAME, trainer.checkpoint())
    plant(run_dir, [f".{FILENAME}.tmp", ".updates.csv.tmp", ".games.csv.tmp"], victim)
    run = Run.resume(run_dir, {}, checkpoint_every=1)
    run.open()
    run.record(trainer.play(), trainer)  # metrics, TensorBoard events and a checkpoint
    run.close(trainer)
    assert victim.read_bytes() == VICTIM
    assert not (run_dir / FILENAME).is_symlink() and load(run_dir).updates == 1


@pytest.mark.parametrize("name", [LOCK, "updates.csv", "games.csv"])
def test_a_link_planted_at_a_file_a_run_appends_to_is_one_line(tmp_path, victim, name) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / name).symlink_to(victim)
    with pytest.raises(PongError, match="symbolic link; refusing to write through"):
        Run.start(run_dir, make_checkpoint().config, 10).open()
    save(run_dir / FILENAME, replace(make_checkpoint(), updates=0, games=0, steps=0))  # no rows
    run = Run.resume(run_dir, {}, checkpoint_every=10)
    trainer = StandInTrainer(run.config)
    # The lock's link is refused; a metrics file's, once read, is not a metrics file.
    with pytest.raises(PongError, match="symbolic link; refusing to write|a symbolic link, not a"):
        run.open()
        run.record(trainer.play(), trainer)
    run.close()
    assert victim.read_bytes() == VICTIM


def test_two_exports_to_one_path_one_wins_whole_the_other_says_so(tmp_path) -> None:
    """Started together, each from its own run: the file is one run's policy, whole, and
    the winner's report is what it holds."""
    for i in range(2):
        (tmp_path / f"run{i}").mkdir()
        save(tmp_path / f"run{i}" / FILENAME, replace(make_checkpoint(i), updates=10 + i))
    for attempt in range(3):
        out = tmp_path / f"shared{attempt}.safetensors"
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "pong", "export", str(tmp_path / f"run{i}"), str(out)],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(2)
        ]
        results = [(p.wait(60), *p.communicate()) for p in procs]
        codes = sorted(code for code, _, _ in results)
        assert codes in ([0, 1], [0, 2]), results
        (winner,) = [out_text for code, out_text, _ in results if code == 0]
        (loser,) = [err for code, _, err in results if code != 0]
        assert loser.count("\n") == 1 and f"{out} exists" in loser, loser
        assert f"policy of update {load(out, policy=True).updates}," in winner
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def _tree(path: Path) -> dict[str, bytes | None]:
    """Every name below ``path`` with its bytes (``None``: a directory or a link)."""
    return {
        str(p.relative_to(path)): p.read_bytes() if p.is_file() and not p.is_symlink() else None
        for p in sorted(path.rglob("*"))
    }


# Each name a run writes below its directory, and the line a link planted there gets.
PLANTED = {
    LOCK: "symbolic link; refusing to write through it",
    FILENAME: "a symbolic link, not a regular file",
    "updates.csv": "a symbolic link, not a regular file",
    "games.csv": "a symbolic link, not a regular file",
    "watch": "watch: a symbolic link; refusing to write below it",
    "watch/weights-000001.png": "weights-000001.png: a symbolic link; refusing to write",
    "watch/game-000001.gif": "game-000001.gif: a symbolic link; refusing to write",
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_link_planted_at_any_name_below_a_run_is_one_line_and_changes_nothing_outside(
    tmp_path, name
) -> None:
    """As a stranger with write access to a shared run directory could: a link to a
    directory of the user's, or to a file in it, at each name a resumed run writes."""
    outside = tmp_path / "outside"  # the user's own files, which no run may touch
    outside.mkdir()
    (outside / "weights-000001.png").write_bytes(VICTIM)
    (outside / "game-000001.gif").write_bytes(VICTIM)
    (outside / VICTIM_NAME).write_bytes(VICTIM)
    run_dir = tmp_path / "run"
    run = Run.start(run_dir, replace(make_checkpoint().config, env="PongToy/Catch-v0"), 1)
    trainer = StandInTrainer(run.config)
    run.open()
    run.record(trainer.play(), trainer)
    run.close(trainer)
    (run_dir / "watch").mkdir()
    target = outside if name == "watch" else outside / VICTIM_NAME
    if name == "watch":
        (run_dir / name).rmdir()
    (run_dir / name).unlink(missing_ok=True)
    (run_dir / name).symlink_to(target)
    before = _tree(outside)

    def resume() -> str | None:
        nonlocal run
        run = Run.resume(run_dir, {}, checkpoint_every=1)
        run.watch_every = 1
        run.open()
        trainer.updates = 0  # the snapshot of update 1 again, over its planted names
        return record(run, trainer)

    if name.startswith("watch/"):  # a picture not kept is a warning; the run goes on
        said = resume()
    else:
        with pytest.raises(PongError) as info:
            resume()
        said = str(info.value)
    run.close()
    assert PLANTED[name] in said and str(run_dir) in said and "\n" not in said
    assert _tree(outside) == before


def test_a_run_directory_swapped_for_a_link_while_it_runs_is_still_the_one_written(
    tmp_path,
) -> None:
    """The directory is opened once: renaming it away and planting a link at its name
    sends nothing to the link's target."""
    outside = tmp_path / "outside"
    outside.mkdir()
    run = Run.start(tmp_path / "run", make_checkpoint().config, checkpoint_every=1)
    trainer = StandInTrainer(run.config)
    run.open()
    run.record(trainer.play(), trainer)
    (tmp_path / "run").rename(tmp_path / "moved")
    (tmp_path / "run").symlink_to(outside)
    run.record(trainer.play(), trainer)
    run.close(trainer)
    assert list(outside.iterdir()) == []
    assert load(tmp_path / "moved").updates == 2


def test_a_run_directory_that_is_a_link_is_refused(tmp_path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "run").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PongError, match="is a symbolic link; give the directory itself"):
        Run.start(tmp_path / "run", make_checkpoint().config, 10).open()
    assert list((tmp_path / "elsewhere").iterdir()) == []


MID_WRITE = """
import sys, time
from pathlib import Path
from pong.run.directory import lock
from pong.run.files import Directory
directory = Directory.open(Path(sys.argv[1]))
held = lock(directory) if sys.argv[3] == "lock" else None
with directory.write(sys.argv[2]) as f:
    f.write(b"half a checkpoint")
    f.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


def writing_child(run_dir: Path, name: str, hold_lock: bool = False) -> subprocess.Popen:
    """A child in the middle of ``atomic_write`` of ``name`` in ``run_dir``, as a driver
    saving its checkpoint is (holding the run directory's lock, if ``hold_lock``)."""
    child = subprocess.Popen(
        [sys.executable, "-c", MID_WRITE, str(run_dir), name, "lock" if hold_lock else ""],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline() == "writing\n"
    return child


def killed_mid_write(run_dir: Path, name: str) -> str:
    """The temporary file a child killed by ``kill -9`` in ``atomic_write`` of ``name`` left."""
    child = writing_child(run_dir, name)
    child.kill()  # SIGKILL: no finally runs
    child.wait(10)
    (left,) = [p.name for p in run_dir.iterdir() if p.name.endswith(".tmp")]
    assert re.fullmatch(rf"\.{re.escape(name)}\.[0-9a-f]{{16}}\.tmp", left)
    return left


def test_the_temporary_of_a_killed_write_is_removed_by_the_next_owner_alone(tmp_path, victim):
    """Only regular files named as ``atomic_write``'s temporaries of the names given go: no
    link, no other name, nothing of another file, nothing below."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    left = killed_mid_write(run_dir, FILENAME)
    kept = [
        f".{FILENAME}.0123456789abcdeF.tmp",  # not hex as token_hex writes it
        f".{FILENAME}.0123456789abcde.tmp",  # 15 digits
        f"{FILENAME}.0123456789abcdef.tmp",  # no dot first
        f".{FILENAME}.0123456789abcdef.tmp.x",
        ".plot.png.0123456789abcdef.tmp",  # another file's
    ]
    for name in kept:
        (run_dir / name).write_bytes(b"someone's")
    plant(run_dir, [".updates.csv.0123456789abcdef.tmp"], victim)
    below = run_dir / ".games.csv.fedcba9876543210.tmp"  # a directory
    below.mkdir()
    (below / left).write_bytes(b"below")
    os.mkfifo(run_dir / f".{FILENAME}.00000000000000ff.tmp")
    stale = ".updates.csv.aaaaaaaaaaaaaaaa.tmp"
    (run_dir / stale).write_bytes(b"half a CSV")
    before = sorted(p.name for p in run_dir.iterdir())
    directory = Directory.open(run_dir)
    held = lock(directory)  # as Run.open does, before anything is removed
    removed = directory.remove_stale_temporaries(FILENAME, "updates.csv", "games.csv")
    held.close()
    directory.close()
    assert removed == sorted([left, stale])
    assert sorted(p.name for p in run_dir.iterdir()) == sorted({*before, LOCK} - {left, stale})
    assert victim.read_bytes() == VICTIM and (run_dir / kept[0]).read_bytes() == b"someone's"
    assert (below / left).read_bytes() == b"below"


@pytest.mark.skipif(
    "remove_stale_temporaries" not in Path(directory_module.__file__).read_text(),
    reason="Run.open does not call Directory.remove_stale_temporaries yet",
)
def test_a_run_removes_what_a_killed_driver_left_never_a_live_drivers_temporary(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    save(run_dir / FILENAME, replace(make_checkpoint(), updates=0, games=0, steps=0))  # no rows
    killed_mid_write(run_dir, FILENAME)
    run = Run.resume(run_dir, {}, checkpoint_every=10)
    run.open()
    assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith(".")) == [LOCK]
    run.close()
    live = writing_child(run_dir, FILENAME, hold_lock=True)  # a live driver, saving
    try:
        in_flight = sorted(p.name for p in run_dir.iterdir())
        with pytest.raises(PongError, match="in use by"):
            Run.resume(run_dir, {}, checkpoint_every=10).open()
        assert sorted(p.name for p in run_dir.iterdir()) == in_flight  # its temporary kept
        assert len([name for name in in_flight if name.endswith(".tmp")]) == 1
    finally:
        live.kill()
        live.wait(10)


def test_a_directory_where_a_file_is_written_is_named_as_asked_for(tmp_path) -> None:
    """``plot --output DIR.png`` had named the temporary file it could not rename."""
    (tmp_path / "curves.png").mkdir()
    with pytest.raises(IsADirectoryError) as raised, atomic_write(tmp_path / "curves.png") as f:
        f.write(b"a picture")
    assert raised.value.filename == str(tmp_path / "curves.png")
    assert [p.name for p in tmp_path.iterdir()] == ["curves.png"]  # no temporary left
