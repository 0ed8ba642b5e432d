"""Several runs side by side, as a Markdown table: ``python -m pong.compare RUN_DIR ...``.

One row per run: the update, episode and hours of training at which its
running mean first passed each mark, its updates, final running mean and env
steps per second. Then the median and the range of each figure across the
runs; a run that never passed a mark counts as later than every run that did.
RESULTS.md quotes this table, and a test regenerates it from the committed CSVs.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from pong.metrics import UPDATES, Passed, passed, read_rows

__all__ = ["MARKS", "Figures", "figures", "table"]

MARKS = (-15, -10, -5, 0)
NOT_PASSED = "not passed"


@dataclass(frozen=True)
class Figures:
    """What the table says about one run."""

    name: str
    marks: tuple[Passed | None, ...]  # one per mark of MARKS
    updates: int
    final: float  # the running mean after the last update
    steps_per_s: float  # over the whole run: its env steps by its hours of training


def figures(run_dir: str | Path) -> Figures:
    """The figures of the run whose metrics are in ``run_dir``.

    Raises:
        ValueError: the directory has no metrics.
    """
    run_dir = Path(run_dir)
    updates = read_rows(run_dir / UPDATES)
    seconds = sum(float(row["seconds"]) for row in updates)
    return Figures(
        name=run_dir.name,
        marks=tuple(passed(updates, mark) for mark in MARKS),
        updates=int(updates[-1]["update"]),
        final=float(updates[-1]["running_reward"]),
        steps_per_s=int(updates[-1]["steps"]) / seconds,
    )


def table(runs: Sequence[Figures]) -> list[str]:
    """The Markdown lines: a header, a row per run, then the median and the range."""
    header = ["run", *(f"passed {mark:+d}" for mark in MARKS)]
    header += ["updates", "final running mean", "steps/s"]
    lines = [_row(header), _row(["---"] * len(header))]
    for run in runs:
        cells = [_passed(mark) for mark in run.marks]
        cells += [f"{run.updates:,}", f"{run.final:+.2f}", f"{run.steps_per_s:,.0f}"]
        lines.append(_row([run.name, *cells]))
    if len(runs) > 1:
        for name, of_marks, of_numbers in (
            ("median", _median_mark, _median),
            ("range", _range_mark, _range),
        ):
            cells = [of_marks([run.marks[i] for run in runs]) for i in range(len(MARKS))]
            cells += [
                of_numbers([r.updates for r in runs], "{:,.0f}"),
                of_numbers([r.final for r in runs], "{:+.2f}"),
                of_numbers([r.steps_per_s for r in runs], "{:,.0f}"),
            ]
            lines.append(_row([f"**{name}**", *cells]))
    return lines


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _passed(mark: Passed | None) -> str:
    """A mark's cell: update / episode / hours."""
    if mark is None:
        return NOT_PASSED
    return f"{mark.update:,} / {mark.episodes:,} / {mark.hours:.2f} h"


def _median(values: Sequence[float], shown: str) -> str:
    return shown.format(statistics.median(values))


def _range(values: Sequence[float], shown: str) -> str:
    return f"{shown.format(min(values))} to {shown.format(max(values))}"


def _median_mark(marks: Sequence[Passed | None]) -> str:
    """Update, episode and hours, each the median; a run that never passed counts as last."""
    columns = [
        [math.inf if m is None else getattr(m, f.name) for m in marks] for f in fields(Passed)
    ]
    medians = [statistics.median(column) for column in columns]
    return NOT_PASSED if math.inf in medians else _passed(Passed(*medians))


def _range_mark(marks: Sequence[Passed | None]) -> str:
    """The least and the most of update, episode and hours, each on its own."""
    reached = [m for m in marks if m is not None]
    if not reached:
        return NOT_PASSED
    columns = [[getattr(m, f.name) for m in reached] for f in fields(Passed)]
    low, high = Passed(*map(min, columns)), Passed(*map(max, columns))
    return f"{_passed(low)} to {_passed(high) if len(reached) == len(marks) else NOT_PASSED}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pong.compare",
        description="Compare runs: when each passed the marks, and the spread (Markdown).",
    )
    parser.add_argument("run_dirs", nargs="+", type=Path, help="run directories (hold updates.csv)")
    args = parser.parse_args(argv)
    try:
        print("\n".join(table([figures(run_dir) for run_dir in args.run_dirs])))
    except ValueError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
