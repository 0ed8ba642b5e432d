"""Metrics of a run as CSV files in its run directory, a row per update and per game.

Rows are flushed as written, so a crash loses nothing printed; a resumed run first drops the
rows of updates after its checkpoint, so each update keeps one row. Readers take a file a line
at a time, each line bounded. ``python -m pong metrics RUN_DIR`` prints a run's summary.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, closing
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from pong.run.checkpoint import MAX_COUNT, MAX_SCORE
from pong.run.config import path as nonempty_path
from pong.run.errors import OneLineParser, UsageError, printable, say_error
from pong.run.files import Directory, open_file

if TYPE_CHECKING:
    from pong.core.train import Trainer, Update

__all__ = ["GAMES", "UPDATES", "MetricsLog", "Passed", "Summary", "games_file", "read_rows"]
__all__ += ["rows", "summarize", "summary"]

UPDATES, GAMES = "updates.csv", "games.csv"
UPDATE_FIELDS = "update games steps seconds steps_per_s running_mean score_mean".split()
UPDATE_FIELDS += ["score_min", "score_max"]
FIELDS = {UPDATES: UPDATE_FIELDS, GAMES: ["game", "update", "score", "steps"]}  # in order
# After the numbers, absent from older files: the games each node played ("10.0.0.1=6 ..."),
# and when the row was written (UTC, ISO 8601), so a run's wall clock and pauses read back
TEXT_FIELDS = {UPDATES: ["games_by_node", "time"], GAMES: []}
COUNTS = {"update", "games", "steps", "game"}  # the integer fields
SCORES = {"running_mean", "score_mean", "score_min", "score_max", "score"}  # within MAX_SCORE
# Runs written before the glossary: their file and column names, read as today's
OLD_GAMES = "episodes.csv"
OLD_COLUMNS = {"episodes": "games", "running_reward": "running_mean", "episode": "game"}
OLD_COLUMNS |= {"reward": "score", **{f"reward_{s}": f"score_{s}" for s in ("mean", "min", "max")}}
MAX_LINE = 4096  # bytes of a line; a row has about 100
MILESTONES = (-20, -15, -10, -5, 0, 5, 10)
PAUSE = 60.0  # seconds between two rows, beyond the update's own, that count as a pause


class MetricsFileError(UsageError, ValueError):
    """A metrics file that cannot be read; the message names it, and the line."""


class MetricsLog:
    """Appends rows to ``updates.csv`` and ``games.csv`` in the run directory ``run_dir``;
    with ``after``, first drops the rows of updates after it (an older run's files take
    today's names; ``dropped_to``: the last update dropped, else ``None``), once they agree with
    ``totals``, the checkpoint's (games, steps, running mean)."""

    def __init__(
        self, run_dir: Directory | str | os.PathLike, after: int | None = None, totals=None
    ) -> None:
        self._files, self._writers = ExitStack(), {}
        if not isinstance(run_dir, Directory):  # then closed with the files
            run_dir = self._files.enter_context(closing(Directory.open(Path(run_dir))))
        if run_dir.lstat(GAMES) is None and run_dir.lstat(OLD_GAMES) is not None:
            run_dir.rename(OLD_GAMES, GAMES)
        held = {}  # each file's rows kept, the last of them, and the last row's update
        for name, fields in FIELDS.items():
            header, *held[name] = _kept_header(run_dir, name, after)
            f = self._files.enter_context(run_dir.append(name, newline=""))  # never through a link
            if header is None:  # no rows yet: ours is the header
                f.truncate(0)
                header = fields + TEXT_FIELDS[name]
                csv.writer(f).writerow(header)
            self._writers[name] = (csv.DictWriter(f, header, extrasaction="ignore"), f)
        try:  # after each file's own checks, which name a line
            if totals is not None:
                _check_totals(run_dir.path, after, totals, held)
            last = held[UPDATES][2]
            self.dropped_to = last if after is not None and last > after else None
        except MetricsFileError:
            self.close()
            raise

    def write(self, row: dict[str, object], games: list[dict[str, object]]) -> None:
        """One update's row and its games' rows, flushed."""
        for name, rows in ((GAMES, games), (UPDATES, [row])):
            writer, f = self._writers[name]
            writer.writerows(rows)
            f.flush()

    def record(self, update: Update, trainer: Trainer) -> None:
        """The rows of the update ``trainer`` just made."""
        scores, first = update.scores, trainer.games - update.games + 1
        values = (update.number, trainer.games, trainer.steps, round(update.seconds, 4))
        values += (round(update.steps_per_second, 1), trainer.running_mean)
        values += (sum(scores) / len(scores), min(scores), max(scores))
        row = dict(zip(FIELDS[UPDATES], values, strict=True))
        row["games_by_node"] = " ".join(f"{node}={n}" for node, n in sorted(update.nodes.items()))
        row["time"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        games = [
            {"game": i, "update": update.number, "score": score, "steps": n}
            for i, (score, n) in enumerate(zip(scores, update.game_steps, strict=True), first)
        ]
        self.write(row, games)

    def close(self) -> None:
        self._files.close()


def _kept_header(run_dir: Directory, name: str, after: int | None) -> tuple:
    """The columns of the metrics file ``name`` if it holds rows (an older run's may lack
    some), once it is rewritten without the rows of updates after ``after`` or a torn line;
    how many rows it keeps, the last of them, and the last row's update. Each row is checked as
    the tools read it, a row at a time: memory stays bounded."""
    lines, total, kept, last, last_kept = None, 0, 0, 0, None  # last: the last row's update

    def keep(row: dict[str, str]) -> bool:
        return after is None or int(row["update"]) <= after

    if run_dir.lstat(name) is not None:
        lines = _WholeLines(run_dir.path / name, lambda: run_dir.read(name), after)
        try:
            for row in _checked(lines):
                last, total = int(row["update"]), total + 1
                if keep(row):
                    kept, last_kept = kept + 1, row
        except MetricsFileError:
            if after is None and lines.number == 1:  # not our header: a new run refused rows
                return None, 0, None, 0
            raise
    # Each update's rows are written before its save, which a failed write forgoes: rows
    # behind the checkpoint are another run's, or were removed
    if after is not None and last < after:
        held = f"ends at update {last:,}" if total else "holds no rows" if lines else "is missing"
        raise MetricsFileError(
            f"{printable(run_dir.path / name)}: {held}, but the checkpoint holds update {after:,};"
            " were rows removed, or is the checkpoint another run's? (--start-from trains its"
            " weights in a new run)"
        )
    if lines is None or lines.reader.fieldnames is None:  # not even a whole header
        return None, 0, None, last
    if kept < total or lines.torn or lines.renamed or lines.mended:
        again = _WholeLines(lines.path, lines.opener, after)  # again: the file is ours, locked
        with run_dir.write(name, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=lines.reader.fieldnames)
            writer.writeheader()
            writer.writerows(filter(keep, again.rows()))
    return (list(lines.reader.fieldnames) if kept else None), kept, last_kept, last


def _check_totals(
    path: Path, after: int, totals: tuple[int, int, float | None], held: dict
) -> None:
    """The rows kept agree with the checkpoint of update ``after`` (its games, steps and
    running mean): a hand-edited checkpoint or rows cut from the end are said now, not as a hole
    at the next resume. ``held``: each file's ``_kept_header``, past its header."""
    (_, last, _), (rows, _, _) = held[UPDATES], held[GAMES]
    if last is None:  # a checkpoint of update 0: nothing played yet
        return
    (games, steps, mean), said = totals, (int(last["games"]), int(last["steps"]))
    same_mean = mean is None or math.isclose(float(last["running_mean"]), mean, abs_tol=1e-9)
    if (*said, rows) != (games, steps, games) or not same_mean:
        raise MetricsFileError(
            f"{printable(path)}: the checkpoint holds {games:,} games, {steps:,} steps and"
            f" running mean {mean!r} at update {after:,}, but"
            f" {UPDATES} says {said[0]:,}, {said[1]:,} and {printable(last['running_mean'])},"
            f" and {GAMES} has {rows:,} rows; were the files edited, or is the checkpoint another"
            " run's? (--start-from trains its weights in a new run)"
        )


class _WholeLines:
    """A metrics file's lines for csv, read and decoded one at a time: a regular file's alone,
    each at most ``MAX_LINE`` bytes. A last line without its newline (being written, or cut
    off by a kill) is left out and sets ``torn``; unless it is a whole row of an update up to
    ``upto`` (a checkpoint's, saved after its rows were written: an editor took the newline),
    which is read with its newline and sets ``mended``."""

    def __init__(
        self, path: Path, opener: Callable[[], BinaryIO] | None = None, upto: int | None = None
    ) -> None:
        self.path, self.shown, self.torn, self.number = path, printable(path), False, 0
        self.opener, self.renamed = opener or (lambda: open_file(path)), False
        self.upto, self.mended = upto, False
        self.fields = FIELDS[UPDATES if path.name == UPDATES else GAMES]
        self.reader = csv.DictReader(self)

    def error(self, what: str) -> MetricsFileError:
        """``what`` is wrong with the line read last."""
        return MetricsFileError(f"{self.shown}, line {self.number}: {what}")

    def __iter__(self) -> Iterator[str]:
        try:
            f = self.opener()
        except FileNotFoundError:
            where = f"is {printable(self.path.parent)} a run directory?"
            raise MetricsFileError(f"{self.shown}: no such file; {where}") from None
        except NotADirectoryError:  # the run named by one of its files
            shown = printable(self.path.parent)
            raise MetricsFileError(f"{shown}: a file; give the run directory it is in") from None
        except OSError as e:
            raise MetricsFileError(f"{self.shown}: not a metrics file ({e.strerror})") from None
        with f:
            while line := f.readline(MAX_LINE + 1):
                self.number += 1
                if len(line) > MAX_LINE:
                    raise self.error(f"longer than {MAX_LINE:,} bytes; not a metrics row")
                if not line.endswith(b"\n"):
                    if not self._whole(line):
                        self.torn = True
                        return
                    line, self.mended = line + b"\n", True
                try:
                    yield line.decode()
                except UnicodeDecodeError:
                    raise MetricsFileError(
                        f"{self.shown}: not a metrics file (line {self.number} is not UTF-8 text)"
                    ) from None

    def _whole(self, line: bytes) -> bool:
        """Whether ``line``, the last and without its newline, is a whole row of an update up
        to ``upto`` (never the header: csv has not read it yet)."""
        if self.upto is None or self.number == 1:
            return False
        try:
            [values] = csv.reader([line.decode()])
            row = dict(zip(self.reader.fieldnames, values, strict=True))
            return int(row["update"]) <= self.upto
        except (ValueError, csv.Error, KeyError):  # UnicodeDecodeError is a ValueError
            return False

    def rows(self) -> Iterator[dict[str, str]]:
        """The rows csv reads from the lines, once the header is checked to be the file's."""
        try:
            header = self.reader.fieldnames  # None: an empty file
            if header is not None:
                self.reader.fieldnames = [OLD_COLUMNS.get(name, name) for name in header]
                self.renamed, header = self.reader.fieldnames != header, self.reader.fieldnames
            if header is not None and (
                not set(self.fields) <= set(header) or len(set(header)) < len(header)
            ):
                raise self.error(f"not the header of {self.path.name}")
            yield from self.reader
        except csv.Error as e:  # a lone carriage return, a quoted field without its end
            reason = "a carriage return inside a line" if "new-line" in str(e) else str(e)
            raise self.error(f"not a metrics row ({reason})") from None


def rows(path: Path, opener: Callable[[], BinaryIO] | None = None) -> Iterator[dict[str, str]]:
    """The rows of the metrics CSV ``path`` (read through ``opener``, if given), each checked
    to hold numbers a run writes; a torn last line is left out (a run is writing it)."""
    lines, count = _WholeLines(path, opener), 0
    for row in _checked(lines):
        count += 1
        yield row
    if not count:
        raise MetricsFileError(f"{lines.shown}: no rows yet; the run has not finished an update")


def _checked(lines: _WholeLines) -> Iterator[dict[str, str]]:
    """The rows of ``lines``, each checked to hold numbers a run writes, row n its update or
    game n (a resume past a hole, or an edit, would make every reader's figures wrong)."""
    counter = "update" if lines.fields is FIELDS[UPDATES] else "game"
    for number, row in enumerate(lines.rows(), 1):
        try:
            numbers = {k: (int if k in COUNTS else float)(row[k]) for k in lines.fields}
            whole = all(map(math.isfinite, numbers.values()))
        except (TypeError, ValueError, OverflowError):  # None (a short row), text, 10**400
            whole = False
        if not whole:
            raise lines.error("not a metrics row")
        for k, v in numbers.items():  # within the checkpoint's bounds (a 300-digit figure)
            if not (-MAX_SCORE <= v <= MAX_SCORE if k in SCORES else 0 <= v <= MAX_COUNT):
                raise lines.error(f"not a metrics row ({k} {row[k][:20]!r}: no run writes it)")
        if row.get("time") and written(row) is None:
            raise lines.error(f"not a metrics row (time {row['time'][:40]!r}: no run writes it)")
        if numbers[counter] != number:
            raise lines.error(f"{counter} {numbers[counter]:,} where {counter} {number:,} is due;"
                              " were rows removed or edited?")  # fmt: skip
        yield row


def written(row: dict[str, str]) -> float | None:
    """When ``row`` was written, in seconds since the epoch; None for a row without a time
    (an older run's) or one no run writes."""
    try:
        when = datetime.fromisoformat(row.get("time") or "")
    except ValueError:
        return None
    return when.timestamp() if when.tzinfo is not None else None


def games_file(run_dir: Path) -> Path:
    """A run's ``games.csv``, or an older run's ``episodes.csv`` where that is what it holds."""
    old = run_dir / OLD_GAMES
    return old if not (run_dir / GAMES).exists() and old.exists() else run_dir / GAMES


def read_rows(path: Path) -> list[dict[str, str]]:
    return list(rows(path))


@dataclass(frozen=True)
class Passed:
    """When a run's running mean first went above a mark."""

    update: int
    games: int
    hours: float  # the updates' own seconds up to and including that one
    wall_hours: float | None = None  # of wall clock since the first update began (None: untimed)


@dataclass(frozen=True)
class Summary:
    """A run's ``updates.csv`` in a few figures, read in one pass (``summary``)."""

    updates: int
    last: dict[str, str]  # the last row
    best: dict[str, str]  # the first row of the highest running mean
    seconds: float  # the updates' own, summed: no start-ups, no time spent stopped
    passed: dict[float, Passed]  # the first update above each mark it went above
    wall: float | None = None  # seconds from the first update's start to the last row
    pauses: tuple[float, ...] = ()  # each gap of over PAUSE s between rows, beyond the update's

    @property
    def steps_per_s(self) -> float:
        """Env steps by seconds of training (NaN if the run recorded no time)."""
        return int(self.last["steps"]) / self.seconds if self.seconds > 0 else math.nan


def summary(
    run_dir: str | os.PathLike,
    marks: Iterable[float] = MILESTONES,
    opener: Callable[[], BinaryIO] | None = None,
) -> Summary:
    """The run's ``updates.csv`` (read through ``opener``, if given), a row at a time."""
    count, seconds, best, passed, wall, last, pauses = 0, 0.0, None, {}, 0.0, None, []
    for row in rows(Path(run_dir) / UPDATES, opener):
        count, took = count + 1, float(row["seconds"])
        seconds += took
        if wall is None or (when := written(row)) is None:  # the wall clock: None once untimed
            wall = None
        else:  # from the first update's start to this row's writing; long gaps are pauses
            if last is None:
                start = when - took
            elif when - last - took > PAUSE:
                pauses.append(when - last - took)
            wall, last = when - start, when
        running = float(row["running_mean"])
        if best is None or running > float(best["running_mean"]):
            best = row
        for mark in marks:
            if running > mark and mark not in passed:
                hours = None if wall is None else wall / 3600
                passed[mark] = Passed(int(row["update"]), int(row["games"]), seconds / 3600, hours)
    return Summary(count, row, best, seconds, passed, wall, tuple(pauses))


def summarize(run_dir: str | os.PathLike) -> list[str]:
    """The lines ``python -m pong metrics`` prints for the run in ``run_dir``."""
    s = summary(run_dir)
    lines = [
        f"{s.updates} update{'s' * (s.updates != 1)}, {s.last['games']} games,"
        f" {int(s.last['steps']):,} steps,"
        f" {s.seconds / 3600:.2f} h of training ({s.steps_per_s:.0f} steps/s)",
    ]
    if s.wall is not None:
        n = len(s.pauses)
        lines.append(
            f"{s.wall / 3600:.2f} h of wall clock from the first update's start to the last,"
            f" {n} pause{'s' * (n != 1)} of over {PAUSE:.0f} s ({sum(s.pauses) / 3600:.2f} h)"
        )
    lines.append(
        f"running mean {float(s.last['running_mean']):.2f} at the end, best"
        f" {float(s.best['running_mean']):.2f}"
        f" (update {s.best['update']}, game {s.best['games']})"
    )
    for milestone, mark in s.passed.items():  # in the order of MILESTONES
        wall = "" if mark.wall_hours is None else f" ({mark.wall_hours:.2f} h of wall clock)"
        lines.append(
            f"running mean above {milestone:+d} from update {mark.update},"
            f" game {mark.games}, after {mark.hours:.2f} h{wall}"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser("python -m pong metrics", description="Summarize a run's metrics.")
    parser.add_argument("run_dir", type=nonempty_path, help="a run directory (holds"
                        " updates.csv), or a sweep's trial")  # fmt: skip
    args = parser.parse_args(argv)
    from pong.run.sweep import runs_of  # a sweep's trial stands for its latest run

    try:
        if not (found := runs_of([args.run_dir])):
            raise ValueError(f"{printable(args.run_dir)}: no trial has finished an update yet")
        if len(found) > 1:
            raise ValueError(f"{printable(args.run_dir)}: holds {len(found)} runs (a sweep's"
                             " trials, or a folder's); give one run's directory")  # fmt: skip
        print("\n".join(summarize(found[0])))
    except ValueError as e:
        say_error(parser.prog, e)
        return 2
    return 0
