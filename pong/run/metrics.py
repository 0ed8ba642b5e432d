"""Metrics of a run as CSV files in its run directory, one row per update and per episode.

Rows are flushed as written, so a crash loses nothing printed; a resumed run first drops the rows
of updates made after its checkpoint, so each update keeps one row. Files are read a row at a
time, so none can fill memory. ``python -m pong metrics RUN_DIR`` prints a run's summary.
"""

from __future__ import annotations

import csv
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from pong.run.checkpoint import MAX_SCORE
from pong.run.errors import OneLineParser, UsageError, printable
from pong.run.files import Directory, open_file

if TYPE_CHECKING:
    from pong.core.train import Trainer, Update

__all__ = ["EPISODES", "UPDATES", "MetricsLog", "Passed", "Summary", "read_rows", "rows"]
__all__ += ["summarize", "summary"]

UPDATES, EPISODES = "updates.csv", "episodes.csv"
UPDATE_FIELDS = "update episodes steps seconds steps_per_s running_reward reward_mean".split()
UPDATE_FIELDS += ["reward_min", "reward_max"]
FIELDS = {UPDATES: UPDATE_FIELDS, EPISODES: ["episode", "update", "reward", "steps"]}  # in order
# After the numbers (and absent from files older than it): how many of the update's games each
# node played, such as "10.0.0.1=6 10.0.0.2=4", so an idle node shows.
TEXT_FIELDS = {UPDATES: ["games_by_node"], EPISODES: []}
COUNTS = {"update", "episodes", "steps", "episode"}  # the integer fields
MAX_LINE = 4096  # bytes of a line; a row has about 100
MILESTONES = (-20, -15, -10, -5, 0, 5, 10)


class MetricsFileError(UsageError, ValueError):
    """A metrics file that cannot be read; the message names it, and the line."""


class MetricsLog:
    """Appends rows to ``updates.csv`` and ``episodes.csv`` in the run directory ``run_dir``."""

    def __init__(self, run_dir: Directory | str | os.PathLike, after: int | None = None) -> None:
        """Open the files; with ``after``, first drop rows of updates later than ``after``."""
        self._files, self._writers = ExitStack(), {}
        if not isinstance(run_dir, Directory):  # then closed with the files
            run_dir = self._files.enter_context(closing(Directory.open(Path(run_dir))))
        for name, fields in FIELDS.items():
            if after is not None:
                _drop_rows_after(run_dir, name, after)
            f = self._files.enter_context(run_dir.append(name, newline=""))  # never through a link
            header = _header(run_dir, name) if os.fstat(f.fileno()).st_size else None
            if header is None:  # no rows yet: ours is the header
                f.truncate(0)
                header = fields + TEXT_FIELDS[name]
                csv.writer(f).writerow(header)
            self._writers[name] = (csv.DictWriter(f, header, extrasaction="ignore"), f)

    def write(self, row: dict[str, object], episodes: list[dict[str, object]]) -> None:
        """One update's row and its episodes' rows, flushed."""
        for name, rows in ((EPISODES, episodes), (UPDATES, [row])):
            writer, f = self._writers[name]
            writer.writerows(rows)
            f.flush()

    def record(self, update: Update, trainer: Trainer) -> None:
        """The rows of the update ``trainer`` just made, flushed."""
        rewards, first = update.scores, trainer.episodes - update.played + 1
        values = (update.iteration, trainer.episodes, trainer.steps, round(update.seconds, 4))
        values += (round(update.steps_per_second, 1), trainer.running_reward)
        values += (sum(rewards) / len(rewards), min(rewards), max(rewards))
        row = dict(zip(FIELDS[UPDATES], values, strict=True))  # in the order of FIELDS
        row["games_by_node"] = " ".join(f"{node}={n}" for node, n in sorted(update.nodes.items()))
        episodes = [
            {"episode": i, "update": update.iteration, "reward": r, "steps": n}
            for i, (r, n) in enumerate(zip(rewards, update.lengths, strict=True), first)
        ]
        self.write(row, episodes)

    def close(self) -> None:
        self._files.close()


def _header(run_dir: Directory, name: str) -> list[str] | None:
    """The columns of the metrics file ``name`` as it is (an older run's may lack some), or
    ``None`` where it holds no row yet."""
    lines = _WholeLines(run_dir.path / name, lambda: run_dir.read(name))
    try:
        return list(lines.reader.fieldnames) if next(lines.rows(), None) else None
    except MetricsFileError:
        if lines.number <= 1:  # a header alone, which need not be ours: nothing is lost
            return None
        raise


def _drop_rows_after(run_dir: Directory, name: str, update: int) -> None:
    """Rewrite ``name`` atomically without the rows of updates after ``update``, nor a torn line."""
    if run_dir.lstat(name) is None:
        return
    lines, kept, count = _WholeLines(run_dir.path / name, lambda: run_dir.read(name)), [], 0
    for row in lines.rows():
        count += 1
        try:
            if int(row["update"]) <= update:
                kept.append(row)
        except (KeyError, TypeError, ValueError):  # the file was edited
            raise lines.error("not a metrics row; remove it and resume again") from None
    if lines.reader.fieldnames is None or (len(kept) == count and not lines.torn):
        return
    with run_dir.write(name, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=lines.reader.fieldnames)
        writer.writeheader()
        writer.writerows(kept)


class _WholeLines:
    """A metrics file's lines, read and decoded one at a time (an iterable for csv): a regular
    file's alone, each at most ``MAX_LINE`` bytes, so none can hang or fill memory. A last line
    without its newline (being written, or cut off by a kill) is left out and sets ``torn``."""

    def __init__(self, path: Path, opener: Callable[[], BinaryIO] | None = None) -> None:
        self.path, self.shown, self.torn, self.number = path, printable(path), False, 0
        self.opener = opener or (lambda: open_file(path))
        self.fields = FIELDS[UPDATES if path.name == UPDATES else EPISODES]
        self.reader = csv.DictReader(self)

    def error(self, what: str) -> MetricsFileError:
        """``what`` is wrong with the line read last (that of the row read last)."""
        return MetricsFileError(f"{self.shown}, line {self.number}: {what}")

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
                    raise self.error(f"longer than {MAX_LINE:,} bytes; not a metrics row")
                if not line.endswith(b"\n"):
                    self.torn = True
                    return
                try:
                    yield line.decode()
                except UnicodeDecodeError:
                    raise MetricsFileError(
                        f"{self.shown}: not a metrics file (line {self.number} is not UTF-8 text)"
                    ) from None

    def rows(self) -> Iterator[dict[str, str]]:
        """The rows csv reads from the lines, once the header is checked to be the file's."""
        try:
            header = self.reader.fieldnames  # None: an empty file
            if header is not None and (
                not set(self.fields) <= set(header) or len(set(header)) < len(header)
            ):
                raise self.error(f"not the header of {self.path.name}")
            yield from self.reader
        except csv.Error as e:  # a lone carriage return, a quoted field without its end
            reason = "a carriage return inside a line" if "new-line" in str(e) else str(e)
            raise self.error(f"not a metrics row ({reason})") from None


def rows(path: Path) -> Iterator[dict[str, str]]:
    """The rows of a metrics CSV, one at a time, each checked to be whole and numeric; a last
    line without its newline is left out (a run is writing it, or was killed while it did)."""
    if not path.exists():
        raise MetricsFileError(
            f"{printable(path)}: no such file; is {printable(path.parent)} a run directory?"
        )
    lines, row = _WholeLines(path), None
    for row in lines.rows():
        try:
            numbers = {k: (int if k in COUNTS else float)(row[k]) for k in lines.fields}
            whole = all(map(math.isfinite, numbers.values()))
        except (TypeError, ValueError, OverflowError):  # None (a short row), text, 10**400
            whole = False
        if not whole:
            raise lines.error("not a metrics row")
        if wrong := [k for k, v in numbers.items() if not _possible(k, v)]:
            raise lines.error(
                f"not a metrics row ({wrong[0]} {row[wrong[0]][:20]!r}: no run writes it)"
            )
        yield row
    if row is None:
        raise MetricsFileError(f"{lines.shown}: no rows yet; the run has not finished an update")


def _possible(name: str, value: float) -> bool:
    """Whether a run can write ``value`` in the column ``name``: a score or a mean of scores
    within the checkpoint's bounds, and counts and times of at least 0."""
    return -MAX_SCORE <= value <= MAX_SCORE if "reward" in name else value >= 0


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
    """The figures of the run in ``run_dir``, its running mean checked against ``marks``."""
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
    """Lines describing the run in ``run_dir``, as ``python -m pong metrics`` prints them."""
    s = summary(run_dir)
    return [
        f"{s.updates} updates, {s.last['episodes']} episodes, {int(s.last['steps']):,} env steps,"
        f" {s.seconds / 3600:.2f} h of training ({s.steps_per_s:.0f} steps/s)",
        f"running mean {float(s.last['running_reward']):.2f} at the end, best"
        f" {float(s.best['running_reward']):.2f}"
        f" (update {s.best['update']}, episode {s.best['episodes']})",
        *(
            f"running mean above {milestone:+d} from update {mark.update},"
            f" episode {mark.episodes}, after {mark.hours:.2f} h"
            for milestone, mark in s.passed.items()  # in the order of MILESTONES: higher is later
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser("python -m pong metrics", description="Summarize a run's metrics.")
    parser.add_argument("run_dir", type=Path, help="a run directory (holds updates.csv)")
    args = parser.parse_args(argv)
    try:
        print("\n".join(summarize(args.run_dir)))
    except ValueError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 2
    return 0
