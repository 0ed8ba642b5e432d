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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pong.run.errors import printable
from pong.run.metrics import Passed, summary

__all__ = ["MARKS", "Figures", "check_distinct", "figures", "table"]

MARKS = (-15, -10, -5, 0)
NOT_PASSED = "not passed"


@dataclass(frozen=True)
class Figures:
    """What the table says about one run."""

    name: str  # the run directory as given
    marks: tuple[Passed | None, ...]  # one per mark of MARKS
    updates: int
    final: float  # the running mean after the last update
    steps_per_s: float  # over the whole run: its env steps by its seconds of training


def figures(run_dir: str | Path) -> Figures:
    """The figures of the run whose metrics are in ``run_dir``.

    Raises:
        ValueError: the directory has no metrics, or they are damaged.
    """
    run = summary(run_dir, MARKS)
    return Figures(
        name=str(Path(run_dir)),
        marks=tuple(run.passed.get(mark) for mark in MARKS),
        updates=int(run.last["update"]),
        final=float(run.last["running_reward"]),
        steps_per_s=run.steps_per_s,
    )


def _count(x: float) -> str:
    return f"{x:,.0f}" if x == int(x) else f"{x:,.1f}"  # a median of two can end in .5


_hours, _score, _speed = "{:.2f} h".format, "{:+.2f}".format, "{:,.0f}".format
SHOWN = {"update": _count, "episodes": _count, "hours": _hours}  # a mark's cell, in order


def table(runs: Sequence[Figures]) -> list[str]:
    """The Markdown lines: a header, a row per run, then the median and the range."""
    header = ["run (cells: update / episode / hours)", *(f"above {mark:g}" for mark in MARKS)]
    header += ["updates", "final running mean", "steps/s"]
    lines = [_row(header), _row(["---"] * len(header))]
    for run in runs:
        cells = [_count(run.updates), _score(run.final), _speed(run.steps_per_s)]
        lines.append(
            _row([printable(run.name).replace("|", "\\|"), *map(_passed, run.marks), *cells])
        )
    if len(runs) > 1:
        marks = list(zip(*(run.marks for run in runs), strict=True))  # per mark, each run's
        numbers = [(_count, [r.updates for r in runs]), (_score, [r.final for r in runs])]
        numbers.append((_speed, [r.steps_per_s for r in runs]))
        medians = [shown(statistics.median(values)) for shown, values in numbers]
        lines.append(_row(["**median**", *map(_median_mark, marks), *medians]))
        ranges = [_range(values, shown) for shown, values in numbers]
        lines.append(_row(["**range**", *map(_range_mark, marks), *ranges]))
    return lines


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _passed(mark: Passed | None) -> str:
    """A mark's cell: update / episode / hours."""
    if mark is None:
        return NOT_PASSED
    return " / ".join(shown(getattr(mark, name)) for name, shown in SHOWN.items())


def _range(values: Sequence[float], shown: Callable[[float], str]) -> str:
    return f"{shown(min(values))} to {shown(max(values))}"


def _median_mark(marks: Sequence[Passed | None]) -> str:
    """Update, episode and hours, each the median; a run that never passed counts as last."""
    medians = [
        statistics.median(math.inf if m is None else getattr(m, name) for m in marks)
        for name in SHOWN
    ]
    return NOT_PASSED if math.inf in medians else _passed(Passed(*medians))


def _range_mark(marks: Sequence[Passed | None]) -> str:
    """From the least to the most of update, episode and hours, each on its own."""
    reached = [m for m in marks if m is not None]
    if not reached:
        return NOT_PASSED
    columns = {name: [getattr(m, name) for m in reached] for name in SHOWN}
    if len(reached) < len(marks):  # the most is "never"
        return f"{_passed(Passed(*(min(c) for c in columns.values())))} to {NOT_PASSED}"
    return " / ".join(_range(columns[name], shown) for name, shown in SHOWN.items())


def check_distinct(run_dirs: Sequence[Path]) -> None:
    """Refuse a run directory given twice: it would count twice in the median and range.

    Raises:
        ValueError: naming the directory.
    """
    seen = set()
    for run_dir in run_dirs:
        if run_dir.resolve() in seen:
            raise ValueError(f"{printable(run_dir)}: this run is given twice; give each run once")
        seen.add(run_dir.resolve())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pong.compare",
        description="Compare runs: when each passed the marks, and the spread (Markdown).",
    )
    parser.add_argument("run_dirs", nargs="+", type=Path, help="run directories (hold updates.csv)")
    args = parser.parse_args(argv)
    try:
        check_distinct(args.run_dirs)
        print("\n".join(table([figures(run_dir) for run_dir in args.run_dirs])))
    except ValueError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 2
    return 0
