"""Metrics of a run as CSV files in its run directory, one row per update and per episode.

``updates.csv``: update, episodes, steps, seconds, steps_per_s, running_reward,
reward_mean, reward_min, reward_max. ``episodes.csv``: episode, update, reward,
steps. Each row is flushed as it is written, so a crash loses nothing already
printed; a resumed run appends to the same files, after dropping the rows of
updates made after its checkpoint (a run killed between two checkpoints plays
those updates again, so each update keeps exactly one row).

``python -m pong.metrics RUN_DIR`` prints a run's summary: updates, episodes,
env steps, training time, and the update and episode at which the running mean
first passed each milestone.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pong.errors import UsageError, quiet_when_piped
from pong.files import atomic_write, open_regular

if TYPE_CHECKING:
    from pong.train import Trainer, Update

__all__ = [
    "EPISODES",
    "UPDATES",
    "MetricsLog",
    "Passed",
    "passed",
    "read_rows",
    "steps_per_second",
    "summarize",
]

UPDATES = "updates.csv"
EPISODES = "episodes.csv"
UPDATE_FIELDS = [
    "update",
    "episodes",
    "steps",
    "seconds",
    "steps_per_s",
    "running_reward",
    "reward_mean",
    "reward_min",
    "reward_max",
]
EPISODE_FIELDS = ["episode", "update", "reward", "steps"]
COUNTS = {"update", "episodes", "steps", "episode"}  # the integer fields


class MetricsLog:
    """Appends rows to ``updates.csv`` and ``episodes.csv`` in ``run_dir``."""

    def __init__(self, run_dir: str | os.PathLike, after: int | None = None) -> None:
        """Open the files; with ``after``, first drop rows of updates later than ``after``."""
        run_dir = Path(run_dir)
        self._files, self._writers = [], {}
        for name, fields in ((UPDATES, UPDATE_FIELDS), (EPISODES, EPISODE_FIELDS)):
            path = run_dir / name
            if after is not None:
                _drop_rows_after(path, after)
            new = not path.exists() or path.stat().st_size == 0
            f = open_regular(path, "a", newline="")  # never through a planted link
            writer = csv.DictWriter(f, fieldnames=fields)
            if new:
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


def _drop_rows_after(path: Path, update: int) -> None:
    """Rewrite ``path`` (atomically) without the rows whose update is later than ``update``.

    A last line without its newline was cut off by a kill while being written,
    and goes too.

    Raises:
        UsageError: a line that is not a metrics row (the file was edited).
    """
    if not path.exists():
        return
    try:
        lines, torn = _whole_lines(path)
    except ValueError as e:
        raise UsageError(str(e)) from None
    reader = csv.DictReader(lines)
    kept, rows = [], 0
    for row in reader:
        rows += 1
        try:
            if int(row["update"]) <= update:
                kept.append(row)
        except (KeyError, TypeError, ValueError):
            raise UsageError(
                f"{path}, line {reader.line_num}: not a metrics row; remove it and resume again"
            ) from None
    if reader.fieldnames is None or (len(kept) == rows and not torn):
        return
    with atomic_write(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=reader.fieldnames)
        writer.writeheader()
        writer.writerows(kept)


def _whole_lines(path: Path) -> tuple[list[str], bool]:
    """The lines of a metrics file, and whether a torn last one was left out.

    A last line without its newline is being written by a run, or was cut off
    by a kill while it was.

    Raises:
        ValueError: the file is not UTF-8 text.
    """
    try:
        lines = path.read_text().splitlines(keepends=True)
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a metrics file (not UTF-8 text)") from None
    torn = bool(lines) and not lines[-1].endswith("\n")
    return (lines[:-1] if torn else lines), torn


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a metrics CSV, each checked to be whole and numeric.

    A last line without its newline is left out: a run is writing it, or was
    killed while it did.

    Raises:
        ValueError: no such file, no rows in it yet, or a line that is not a
            metrics row (the file was edited or damaged), named by its number.
    """
    if not path.is_file():
        raise ValueError(f"{path}: no such file; is {path.parent} a run directory?")
    lines, _ = _whole_lines(path)
    reader = csv.DictReader(lines)
    fields = UPDATE_FIELDS if path.name == UPDATES else EPISODE_FIELDS
    if reader.fieldnames is not None and not set(fields) <= set(reader.fieldnames):
        raise ValueError(f"{path}, line 1: not the header of {path.name}")
    rows = []
    for row in reader:
        try:
            for name in fields:  # None (a short row) or text fail here
                (int if name in COUNTS else float)(row[name])
        except (TypeError, ValueError):
            raise ValueError(f"{path}, line {reader.line_num}: not a metrics row") from None
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no rows yet; the run has not finished an update")
    return rows


MILESTONES = (-20, -15, -10, -5, 0, 5, 10)


def summarize(run_dir: str | os.PathLike) -> list[str]:
    """Lines describing the run in ``run_dir`` (from its ``updates.csv``).

    Training time is the sum of the updates' own seconds: it leaves out start-ups
    and the time between an interruption and its resume.
    """
    updates = read_rows(Path(run_dir) / UPDATES)
    last = updates[-1]
    hours = training_seconds(updates) / 3600
    speed = steps_per_second(updates)
    running = [float(r["running_reward"]) for r in updates]
    best = max(range(len(updates)), key=running.__getitem__)
    lines = [
        f"{len(updates)} updates, {last['episodes']} episodes, {int(last['steps']):,} env steps,"
        f" {hours:.2f} h of training ({speed:.0f} steps/s)",
        f"running mean {running[-1]:.2f} at the end, best {running[best]:.2f}"
        f" (update {updates[best]['update']}, episode {updates[best]['episodes']})",
    ]
    for milestone in MILESTONES:
        if mark := passed(updates, milestone):
            lines.append(
                f"running mean above {milestone:+d} from update {mark.update},"
                f" episode {mark.episodes}, after {mark.hours:.2f} h"
            )
    return lines


def training_seconds(updates: list[dict[str, str]]) -> float:
    """The updates' own seconds, summed: no start-ups, no time spent interrupted."""
    return sum(float(row["seconds"]) for row in updates)


def steps_per_second(updates: list[dict[str, str]]) -> float:
    """A run's env steps by its seconds of training (NaN if it recorded no time)."""
    seconds = training_seconds(updates)
    return int(updates[-1]["steps"]) / seconds if seconds > 0 else float("nan")


@dataclass(frozen=True)
class Passed:
    """When a run's running mean first went above a mark."""

    update: int
    episodes: int
    hours: float  # of training, the updates' own seconds up to and including that one


def passed(updates: list[dict[str, str]], mark: float) -> Passed | None:
    """The first update whose running mean is above ``mark`` (``None``: none is)."""
    seconds = 0.0
    for row in updates:
        seconds += float(row["seconds"])
        if float(row["running_reward"]) > mark:
            return Passed(int(row["update"]), int(row["episodes"]), seconds / 3600)
    return None


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


if __name__ == "__main__":
    sys.exit(quiet_when_piped(main, "python -m pong.metrics"))
