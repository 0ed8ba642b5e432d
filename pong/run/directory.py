"""A run's life, with one owner: ``Run.start`` makes a new run, ``Run.resume`` continues a
saved one with its own settings, ``Run.record`` writes each update's metrics and, when due,
its checkpoint, and ``Run.close`` saves whatever the last checkpoint lacks."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import math
import os
import socket
import stat
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pong.core.model import zeros_like_weights
from pong.run import checkpoint as ckpt
from pong.run.board import EVENTS, Board
from pong.run.checkpoint import FILENAME, Checkpoint
from pong.run.config import Config, fresh_seed
from pong.run.errors import RunFileError, UsageError, command, printable, writing
from pong.run.files import Directory
from pong.run.metrics import GAMES, OLD_GAMES, UPDATES, MetricsLog

if TYPE_CHECKING:  # the trainer brings Ray, the snapshot the tools
    from pong.core.train import Trainer, Update
    from pong.tools.snapshot import Snapshot

__all__ = ["JOB_CONFIG", "JOB_RUNS", "Run", "in_ray_job", "lock"]

WATCH = "watch"  # the pictures and games of --watch-every
LOCK = ".lock"  # held by the driver that owns the run directory, for as long as it lives
JOB_RUNS = "~/ray_results/pong"  # a Ray job's runs: where Ray's own libraries keep theirs
JOB_CONFIG = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # set by Ray's job supervisor for its entrypoint


def in_ray_job() -> bool:
    """Whether this driver is a Ray job's entrypoint, whose working directory Ray deletes."""
    return JOB_CONFIG in os.environ


def kept_after_the_job(path: Path, flag: str) -> Path:
    """``path``, refused when it lies in a Ray job's working directory."""
    if in_ray_job() and not path.is_absolute():
        raise UsageError(
            f"{flag} {path}: a Ray job's working directory is deleted with the job; give an"
            f" absolute path on the head node (a new run's default is {JOB_RUNS}/)"
        )
    return path


def lock(directory: Directory, me: str = "", rule: str = "one driver per run directory") -> IO[str]:
    """An OS lock on ``directory`` while this process lives, its holder ``me`` written in the
    lock file; else a ``UsageError`` naming the holder and the ``rule``."""
    f = directory.append(LOCK, "a+")  # kept open: the lock lives with it
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise UsageError(f"{directory.path} is in use by {holder}; {rule}") from None
    f.truncate(0)
    f.write(f"{me or 'driver.py'} (pid {os.getpid()} on {socket.gethostname()})\n")
    f.flush()
    return f


def _load(flag: str, path: Path, policy: bool = False) -> Checkpoint:
    try:
        return ckpt.load(path, policy=policy)
    except ckpt.CheckpointError as e:
        raise UsageError(f"{flag}: {e}") from None


class Run:
    """A run directory and what is written into it; use ``start`` or ``resume``."""

    def __init__(self, directory: Path, config: Config, saved: Checkpoint | None, every: int):
        self.directory, self.config, self.checkpoint_every = directory, config, every
        self.saved = saved  # the checkpoint this run resumes from (None: a new run)
        self.start_from: tuple[Path, Checkpoint] | None = None  # --start-from: file, contents
        self.stamp: tuple[int, int] | None = None  # which save of the checkpoint was read
        self.saved_at = saved.updates if saved else 0  # the update the checkpoint holds
        self.recorded = self.saved_at  # the last update whose rows were written
        self.checkpoint_path = directory / FILENAME
        self.training = False  # the trainer is starting or started (a failure says what was kept)
        self.checkpoint_seconds = math.inf  # also save after an update this long after the last
        self.saved_time = time.monotonic()  # when the last save was (or the run began)
        self.watch_every = 0  # updates between snapshots (pong.tools.snapshot); 0: none
        self.metrics: MetricsLog | None = None  # opened with the first update's rows
        self.board: Board | None = None  # TensorBoard's events, opened with them too
        self.lock: IO[str] | None = None
        self.opened: Directory | None = None  # opened once: no link below it is followed
        self.made: list[Path] = []  # the directories this run made, deepest first, and
        self.made_lock = False  # its lock file: removed again where it wrote nothing else

    @classmethod
    def start(
        cls, directory, config: Config, checkpoint_every: int, start_from=None, env_given=True
    ):
        """A new run in ``directory`` (default ``runs/<start time>``, in a Ray job
        ``~/ray_results/pong/<start time>``), a random seed if none; from ``start_from``'s
        weights (see ``initial``), and their env unless ``env_given``, if given."""
        source = start_from and (start_from, _load("--start-from", start_from, policy=True))
        if source and not env_given:
            config = dataclasses.replace(config, env=source[1].config.env)
        if directory is None:
            runs = Path(JOB_RUNS).expanduser() if in_ray_job() else Path("runs")
            directory = runs / time.strftime("%Y%m%d-%H%M%S")
            if directory.exists():  # another run started this second (one per seed, say)
                directory = directory.with_name(f"{directory.name}-{os.getpid()}")
        directory = kept_after_the_job(directory, "--run-dir")
        if sweep := _sweep_of(directory):  # it would pass for one of the sweep's trials
            raise UsageError(
                f"--run-dir {printable(directory)}: inside the sweep {printable(sweep)}, which"
                " holds its trials' runs alone; choose a directory outside it"
            )
        if os.path.realpath(directory) == "/":  # it holds the system (and has no parents)
            raise UsageError(
                f"--run-dir {printable(directory)}: the file system's root; give a directory of"
                " its own"
            )
        made_in = next(p for p in directory.absolute().parents if p.exists() or p.is_symlink())
        if not made_in.is_dir():  # said now: the directory is made only once Ray has started
            raise UsageError(
                f"--run-dir {printable(directory)}: {printable(made_in)} is not a directory"
            )
        if config.seed is None:
            config = dataclasses.replace(config, seed=fresh_seed())
        run = cls(directory, config, None, checkpoint_every)
        run.start_from = source
        return run

    @property
    def initial(self) -> Checkpoint | None:
        """The state training starts from: the checkpoint resumed, or ``--start-from``'s
        weights with a fresh RMSProp cache and counters from 0 (``None``: fresh weights)."""
        if self.saved is not None or self.start_from is None:
            return self.saved
        weights = self.start_from[1].weights
        return Checkpoint(weights, zeros_like_weights(weights), 0, 0, 0, None, None, self.config)

    @classmethod
    def resume(cls, path: Path, flags: dict[str, Any], checkpoint_every: int) -> Run:
        """The run saved in ``path`` (its checkpoint or its directory), with its settings; a
        ``UsageError`` if the checkpoint cannot be used or one of ``flags`` contradicts it."""
        kept_after_the_job(path, "--resume")
        if sweep := _sweep_of(path):  # its trials' runs are the sweep's to train on
            what = "a sweep" if sweep == path else f"in the sweep {printable(sweep)}"
            again, copy = (
                command(flag, sweep, module="pong sweep") for flag in ("--resume", "--download")
            )
            raise UsageError(
                f"--resume: {printable(path)} is {what} ({again} continues its trials); to"
                f" continue one alone, copy the runs out first ({copy} DEST), then --resume"
                " DEST/NAME"
            )
        if path.is_file() and path.name != FILENAME:  # a copy: training on would rewind its run
            _load("--resume", path, policy=True)  # hint at --start-from only for weights
            raise UsageError(
                f"--resume: {path} is not a run's {FILENAME}; to start a new run from its"
                f" weights: {command('--start-from', path)}"
            )
        directory = path if path.is_dir() else path.parent
        stamp = saved_stamp(directory / FILENAME)  # before reading: a later save must show
        saved = _load("--resume", path)
        # A count this run would save past what a checkpoint holds: said now, not next resume
        if full := [n for n in ckpt.COUNTERS if getattr(saved, n) > ckpt.MAX_RESUMED]:
            raise UsageError(
                f"--resume: {path}: {full[0]} {getattr(saved, full[0]):,} is past the"
                f" {ckpt.MAX_RESUMED:,} a run resumes from; {command('--start-from', path)}"
                " trains its weights in a new run"
            )
        for name, given in flags.items():
            if given != getattr(saved.config, name):
                raise UsageError(
                    f"--{name.replace('_', '-')}={given} differs from the resumed run's"
                    f" {getattr(saved.config, name)}; a resumed run keeps its settings"
                )
        run = cls(directory, saved.config, saved, checkpoint_every)
        run.stamp = stamp
        return run

    @property
    def kept(self) -> bool:
        """Whether this run has a checkpoint, from what it did (the path may have moved)."""
        return self.saved is not None or self.saved_at > 0

    def open(self) -> None:
        """Own the directory (an OS lock) before anything is written or Ray started; a
        ``UsageError`` if it cannot, or it holds files this run must not write over."""
        if self.directory.is_symlink():
            raise UsageError(
                f"run directory {self.directory} is a symbolic link; give the directory itself"
            )
        if self.directory.exists() and not self.directory.is_dir():
            raise UsageError(f"run directory {self.directory} is a file, not a directory")
        try:
            self.made = [p for p in (self.directory, *self.directory.parents) if not p.exists()]
            self.opened = Directory.open(self.directory, create=True)
            self.made_lock = self.opened.lstat(LOCK) is None
            self.lock = lock(self.opened)
            self.opened.remove_stale_temporaries(FILENAME, UPDATES, GAMES)  # a killed driver's
        except OSError as e:
            named = e.filename not in (None, str(self.directory))  # a file in it: the lock, say
            where = e.filename if named else f"run directory {self.directory}"
            raise UsageError(f"{where}: {e.strerror or e}") from None
        watched = self.opened.lstat(WATCH)
        if self.watch_every and watched is not None and not stat.S_ISDIR(watched.st_mode):
            what = "a symbolic link" if stat.S_ISLNK(watched.st_mode) else "not a directory"
            raise UsageError(  # said now, before Ray starts, not at the first snapshot
                f"{self.directory / WATCH}: {what}; refusing to write below it (or --watch-every=0)"
            )
        if self.saved is None:
            self._check_empty()
        elif saved_stamp(self.checkpoint_path) != self.stamp:  # another driver saved meanwhile
            raise UsageError(f"{self.checkpoint_path} changed since it was read; try again")
        else:  # drops the rows of updates the checkpoint lacks, before Ray starts
            with writing(self.directory / UPDATES, "the metrics were left as they were"):
                totals = self.saved.games, self.saved.steps, self.saved.running_mean
                self.metrics = MetricsLog(self.opened, after=self.saved.updates, totals=totals)

    def _check_empty(self) -> None:
        """Refuse a new run in a directory that holds an earlier run's checkpoint or metrics."""
        names = self.opened.names()
        if FILENAME in names:
            raise UsageError(
                f"{self.directory} already holds a run; continue it with --resume {self.directory}"
                " or choose another --run-dir"
            )
        held = []
        for name in (UPDATES, GAMES, OLD_GAMES):  # written from update 1 on: said before Ray
            if (info := self.opened.lstat(name)) is None:
                continue
            if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
                odd = "a hard link to a file with other names"
                if not stat.S_ISREG(info.st_mode):
                    odd = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
                raise UsageError(
                    f"{self.directory / name}: {odd}; refusing to write through it; choose"
                    " another --run-dir"
                )
            with self.opened.read(name) as f:  # more than a header, one short line?
                held += [name] if len(f.read(64 * 1024).splitlines()) > 1 else []
        held += [f"TensorBoard events ({name})" for name in names if name.startswith(EVENTS)]
        if held:
            raise UsageError(
                f"{self.directory} already holds a run's {held[0]}, but no checkpoint to resume"
                " (it stopped before its first save, or the checkpoint was removed); choose"
                " another --run-dir"
            )

    def record(self, update: Update, trainer: Trainer) -> None:
        """The metrics of the update ``trainer`` just made; its checkpoint when one is due:
        after a new run's first update (so it can be resumed), every ``checkpoint_every``
        updates, or ``checkpoint_seconds`` after the last save."""
        with writing(self.directory / UPDATES, "the metrics stop at the update before"):
            if self.metrics is None:  # a new run's, opened with its first rows
                self.metrics = MetricsLog(self.opened)
            self.metrics.record(update, trainer)
            self.recorded = trainer.updates
        with writing(self.directory, "the TensorBoard curves stop at the update before"):
            if self.board is None:  # hides what a killed run logged past the checkpoint
                self.board = Board(self.opened, self.saved.steps if self.saved else None)
            self.board.record(update, trainer)
        due = self.saved_at == 0 or trainer.updates % self.checkpoint_every == 0
        if due or time.monotonic() - self.saved_time >= self.checkpoint_seconds:
            self.save(trainer)

    def watch_due(self, update: int) -> bool:
        """Whether ``--watch-every`` asks for a picture and a game after update ``update``."""
        return bool(self.watch_every) and update % self.watch_every == 0

    def watch(self, shot: Snapshot, trainer: Trainer) -> str | None:
        """``shot`` of ``trainer``'s policy into TensorBoard and ``watch/``; a warning line
        instead when it cannot be written (a full disk, a bad ``watch/``): the run goes on."""
        watched, n, steps = self.directory / WATCH, trainer.updates, trainer.steps
        lost = "no picture or game of this update was kept"
        files = (f"weights-{n:06d}.png", shot.weights_png), (f"game-{n:06d}.gif", shot.game_gif)
        try:
            with writing(watched, lost):
                watch_dir = self.opened.subdirectory(WATCH)  # a link planted there is refused
            with contextlib.closing(watch_dir):
                for name, data in files:
                    with writing(watched / name, lost), watch_dir.write(name) as f:
                        f.write(data)
            with writing(self.directory, lost):
                self.board.image("watch/weights", shot.weights_png, shot.weights_shape, steps)
                self.board.image("watch/game", shot.game_gif, shot.game_shape, steps)
        except RunFileError as e:
            return f"warning: {e}"
        return None

    def save(self, trainer: Trainer) -> None:
        """Save ``trainer``'s state; on failure the previous checkpoint stays as it was."""
        kept = f"the checkpoint of update {self.saved_at} is intact" if self.saved_at else ""
        with writing(self.checkpoint_path, kept or "no checkpoint was saved"):
            state = Checkpoint.of(trainer.state(), self.config)
            ckpt.save(FILENAME, state, dir_fd=self.opened.fd)
        self.saved_at, self.saved_time = trainer.updates, time.monotonic()

    def close(self, trainer: Trainer | None = None) -> None:
        """Save what the last checkpoint lacks (unless the last update's rows could not be
        written: a checkpoint never runs ahead of its rows), close the files, give the directory
        up (``_give_up``). Twice is harmless."""
        try:
            if self.metrics is not None:
                self.metrics.close()
                self.metrics = None
            if self.board is not None:
                with writing(self.directory, "the TensorBoard curves may lack the last update"):
                    self.board.close()
                self.board = None
            if trainer is not None and self.saved_at < trainer.updates == self.recorded:
                self.save(trainer)
        finally:  # however the save went
            self._give_up()

    def _give_up(self) -> None:
        """Close the files and the lock; a new run that saved no checkpoint (none to resume)
        removes what it wrote: rows, TensorBoard events, its lock, the directories it made."""
        if self.lock is not None and not self.kept:
            ours = [n for n in self.opened.names() if n in (UPDATES, GAMES) or n.startswith(EVENTS)]
            for name in ours + [LOCK] * self.made_lock:
                with contextlib.suppress(OSError):
                    self.opened.remove(name)
            # One that holds something else stays, and so do those above it
            with contextlib.suppress(OSError):
                for made in self.made:
                    made.rmdir()
        for handle in (self.lock, self.opened):
            if handle is not None:
                handle.close()
        self.lock = self.opened = None


def _sweep_of(path: Path) -> Path | None:
    """The sweep directory ``path`` lies in (a trial, a trial's checkpoint or its file), as
    written or through links, if any."""
    from pong.run.sweep import DEFINITION  # here: the sweep reads runs

    for where in (path, Path(os.path.realpath(path))):  # os.path: an unreadable one is none
        if found := [p for p in (where, *where.parents)[:4] if os.path.isfile(p / DEFINITION)]:
            return found[0]
    return None


def saved_stamp(path: Path) -> tuple[int, int] | None:
    """What tells one save of ``path`` from the next (each save is a new file, renamed in)."""
    with contextlib.suppress(FileNotFoundError):
        info = path.lstat()
        return info.st_ino, info.st_mtime_ns
    return None
