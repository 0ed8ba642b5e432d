"""Metrics of a run as CSV files in its run directory, one row per update and per episode.

``updates.csv``: update, episodes, steps, seconds, steps_per_s, running_reward,
reward_mean, reward_min, reward_max. ``episodes.csv``: episode, update, reward,
steps. Each row is flushed as it is written, so a crash loses nothing already
printed; a resumed run appends to the same files, after dropping the rows of
updates made after its checkpoint (a run killed between two checkpoints plays
those updates again, so each update keeps exactly one row).

``python -m pong.metrics RUN_DIR`` prints a run's summary: updates, episodes,
env steps, training time, and the update and episode at which the running mean
first passed each milestone. Files are read a row at a time, so none can fill memory.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from pong.run.errors import UsageError, printable
from pong.run.files import Directory, open_file

if TYPE_CHECKING:
    from pong.core.train import Trainer, Update

__all__ = [
    "EPISODES",
    "UPDATES",
    "MetricsLog",
    "Passed",
    "Summary",
    "read_rows",
    "rows",
    "summarize",
    "summary",
]

UPDATES = "updates.csv"
EPISODES = "episodes.csv"
UPDATE_FIELDS = (
    "update episodes steps seconds steps_per_s running_reward reward_mean reward_min reward_max"
).split()
EPISODE_FIELDS = ["episode", "update", "reward", "steps"]
COUNTS = {"update", "episodes", "steps", "episode"}  # the integer fields
MAX_LINE = 4096  # bytes of a line; a row has about 100
MILESTONES = (-20, -15, -10, -5, 0, 5, 10)


class MetricsFileError(UsageError, ValueError):
    """A metrics file that cannot be read; the message names it, and the line."""


class MetricsLog:
    """Appends rows to ``updates.csv`` and ``episodes.csv`` in the run directory ``run_dir``."""

    def __init__(self, run_dir: Directory | str | os.PathLike, after: int | None = None) -> None:
        """Open the files; with ``after``, first drop rows of updates later than ``after``."""
        self._files, self._writers = [], {}
        if not isinstance(run_dir, Directory):
            run_dir = Directory.open(Path(run_dir))
            self._files.append(run_dir)  # closed with the files
        for name, fields in ((UPDATES, UPDATE_FIELDS), (EPISODES, EPISODE_FIELDS)):
            if after is not None:
                _drop_rows_after(run_dir, name, after)
            f = run_dir.append(name, newline="")  # never through a planted link
            writer = csv.DictWriter(f, fieldnames=fields)
            if os.fstat(f.fileno()).st_size == 0:
                writer.writeheader()
            self._files.append(f)
            self._writers[name] = (writer, f)

    def write(self, row: dict[str, object], episodes: list[dict[str, object]]) -> None:
        """One update's row and its episodes' rows, flushed."""
        for name, rows in ((EPISODES, episodes), (UPDATES, [row])):
            writer, f = self._writers[name]
            writer.writerows(rows)
            f.flush()

    def record(self, update: Update, trainer: Trainer) -> None:
        """The rows of the update ``trainer`` just made, flushed."""
        first_episode = trainer.episodes - update.rollouts + 1
        row = {
            "update": update.iteration,
            "episodes": trainer.episodes,
            "steps": trainer.steps,
            "seconds": round(update.seconds, 4),
            "steps_per_s": round(update.steps_per_second, 1),
            "running_reward": trainer.running_reward,
            "reward_mean": sum(update.rewards) / len(update.rewards),
            "reward_min": min(update.rewards),
            "reward_max": max(update.rewards),
        }
        episodes = [
            {"episode": first_episode + i, "update": update.iteration, "reward": r, "steps": n}
            for i, (r, n) in enumerate(zip(update.rewards, update.episode_steps, strict=True))
        ]
        self.write(row, episodes)

    def close(self) -> None:
        for f in self._files:
            f.close()


def _drop_rows_after(run_dir: Directory, name: str, update: int) -> None:
    """Rewrite ``name`` (atomically) without the rows of updates later than ``update``, nor a
    last line without its newline (cut off by a kill while being written).

    Raises:
        MetricsFileError: not a regular file, or a line that is not a metrics row (the file
            was edited), named by its number.
    """
    if run_dir.lstat(name) is None:
        return
    lines = _WholeLines(run_dir.path / name, lambda: run_dir.read(name))
    kept, rows = [], 0
    for number, row in lines.rows():
        rows += 1
        try:
            if int(row["update"]) <= update:
                kept.append(row)
        except (KeyError, TypeError, ValueError):
            raise MetricsFileError(
                f"{lines.shown}, line {number}: not a metrics row; remove it and resume again"
            ) from None
    if lines.reader.fieldnames is None or (len(kept) == rows and not lines.torn):
        return
    with run_dir.write(name, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=lines.reader.fieldnames)
        writer.writeheader()
        writer.writerows(kept)


class _WholeLines:
    """The lines of a metrics file, read and decoded one at a time (an iterable for csv).

    A last line without its newline is being written by a run, or was cut off by a kill
    while it was: it is left out, and ``torn`` says so once the lines are read. Only a
    regular file is read (a FIFO is refused, never waited on), each line at most
    ``MAX_LINE`` bytes, so no file can hang the reader or fill memory.

    Raises (while iterated):
        MetricsFileError: no such file, not a regular file, a line too long or not UTF-8.
    """

    def __init__(self, path: Path, opener: Callable[[], BinaryIO] | None = None) -> None:
        self.path, self.shown = path, printable(path)
        self.torn, self.number = False, 0  # number: of the last line read
        self.opener = opener or (lambda: open_file(path))
        self.fields = UPDATE_FIELDS if path.name == UPDATES else EPISODE_FIELDS
        self.reader = csv.DictReader(self)

    def __iter__(self) -> Iterator[str]:
        try:
            f = self.opener()
        except FileNotFoundError:
            raise MetricsFileError(f"{self.shown}: no such file") from None
        except OSError as e:
            raise MetricsFileError(f"{self.shown}: not a metrics file ({e.strerror})") from None
        with f:
            while line := f.readline(MAX_LINE + 1):
                self.number += 1
                if len(line) > MAX_LINE:
                    raise MetricsFileError(
                        f"{self.shown}, line {self.number}: longer than {MAX_LINE:,} bytes;"
                        " not a metrics row"
                    )
                if not line.endswith(b"\n"):
                    self.torn = True
                    return
                try:
                    yield line.decode()
                except UnicodeDecodeError:
                    raise MetricsFileError(
                        f"{self.shown}: not a metrics file (line {self.number} is not UTF-8 text)"
                    ) from None

    def rows(self) -> Iterator[tuple[int, dict[str, str]]]:
        """The rows csv reads from the lines, each with its line number, once the header is
        checked to be the file's.

        Raises:
            MetricsFileError: a header that is not this file's, or a line csv cannot read.
        """
        try:
            header = self.reader.fieldnames
            if header is not None and (
                not set(self.fields) <= set(header) or len(set(header)) < len(header)
            ):
                raise MetricsFileError(
                    f"{self.shown}, line {self.number}: not the header of {self.path.name}"
                )
            for row in self.reader:
                yield self.number, row
        except csv.Error as e:  # a lone carriage return, a quoted field without its end
            reason = "a carriage return inside a line" if "new-line" in str(e) else str(e)
            raise MetricsFileError(
                f"{self.shown}, line {self.number}: not a metrics row ({reason})"
            ) from None


def rows(path: Path) -> Iterator[dict[str, str]]:
    """The rows of a metrics CSV, one at a time, each checked to be whole and numeric.

    A last line without its newline is left out: a run is writing it, or was killed
    while it did.

    Raises (while iterated):
        MetricsFileError: no such file, not a regular file, no rows in it yet, or a line
            that is not a metrics row (the file was edited or damaged), named by its number.
    """
    if not path.exists():
        raise MetricsFileError(
            f"{printable(path)}: no such file; is {printable(path.parent)} a run directory?"
        )
    lines, number = _WholeLines(path), 0
    for number, row in lines.rows():
        try:
            whole = all(
                math.isfinite((int if k in COUNTS else float)(row[k])) for k in lines.fields
            )
        except (TypeError, ValueError, OverflowError):  # None (a short row), text, 10**400
            whole = False
        if not whole:
            raise MetricsFileError(f"{lines.shown}, line {number}: not a metrics row")
        yield row
    if not number:
        raise MetricsFileError(f"{lines.shown}: no rows yet; the run has not finished an update")


def read_rows(path: Path) -> list[dict[str, str]]:
    """``rows(path)``, all of them (for a file known to be short)."""
    return list(rows(path))


@dataclass(frozen=True)
class Passed:
    """When a run's running mean first went above a mark."""

    update: int
    episodes: int
    hours: float  # of training, the updates' own seconds up to and including that one


@dataclass(frozen=True)
class Summary:
    """A run's ``updates.csv`` in a few figures, read in one pass (``summary``)."""

    updates: int  # rows
    last: dict[str, str]  # the last row
    best: dict[str, str]  # the first row of the highest running mean
    seconds: float  # the updates' own, summed: no start-ups, no time spent interrupted
    passed: dict[float, Passed]  # the first update above each mark that one went above

    @property
    def steps_per_s(self) -> float:
        """Env steps by seconds of training (NaN if the run recorded no time)."""
        return int(self.last["steps"]) / self.seconds if self.seconds > 0 else math.nan


def summary(run_dir: str | os.PathLike, marks: Iterable[float] = MILESTONES) -> Summary:
    """The figures of the run in ``run_dir``, its running mean checked against ``marks``.

    Raises:
        MetricsFileError: see ``rows``.
    """
    count, seconds, best, passed = 0, 0.0, None, {}
    for row in rows(Path(run_dir) / UPDATES):
        count += 1
        seconds += float(row["seconds"])
        running = float(row["running_reward"])
        if best is None or running > float(best["running_reward"]):
            best = row
        for mark in marks:
            if running > mark and mark not in passed:
                passed[mark] = Passed(int(row["update"]), int(row["episodes"]), seconds / 3600)
    return Summary(count, row, best, seconds, passed)


def summarize(run_dir: str | os.PathLike) -> list[str]:
    """Lines describing the run in ``run_dir`` (from its ``updates.csv``).

    Training time is the sum of the updates' own seconds: it leaves out start-ups
    and the time between an interruption and its resume.
    """
    s = summary(run_dir)
    last, best = s.last, s.best
    lines = [
        f"{s.updates} updates, {last['episodes']} episodes, {int(last['steps']):,} env steps,"
        f" {s.seconds / 3600:.2f} h of training ({s.steps_per_s:.0f} steps/s)",
        f"running mean {float(last['running_reward']):.2f} at the end, best"
        f" {float(best['running_reward']):.2f}"
        f" (update {best['update']}, episode {best['episodes']})",
    ]
    for milestone in MILESTONES:
        if mark := s.passed.get(milestone):
            lines.append(
                f"running mean above {milestone:+d} from update {mark.update},"
                f" episode {mark.episodes}, after {mark.hours:.2f} h"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pong.metrics", description="Summarize a run's metrics."
    )
    parser.add_argument("run_dir", type=Path, help="a run directory (holds updates.csv)")
    args = parser.parse_args(argv)
    try:
        print("\n".join(summarize(args.run_dir)))
    except ValueError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 2
    return 0
