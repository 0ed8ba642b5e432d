"""Several runs side by side, as a Markdown table: ``python -m pong compare RUN_DIR ...``.

A row per run: when its running mean first passed each mark, its updates, final running mean and
steps/s; then each figure's median and range. RESULTS.md quotes it; a test regenerates it.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pong.run.config import path as nonempty_path
from pong.run.errors import OneLineParser, printable, say_error
from pong.run.metrics import Passed, summary
from pong.run.sweep import DEFINITION, runs_of

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
    steps_per_s: float  # its env steps by its seconds of training


def figures(run_dir: str | Path) -> Figures:
    """The figures of the run in ``run_dir`` (``ValueError`` if it has no metrics), named as
    given, or a sweep's trial by the trial (not its ``checkpoint_N``)."""
    run, path = summary(run_dir, MARKS), Path(run_dir)
    name = path.parent if os.path.isfile(path.parent.parent / DEFINITION) else path
    last = int(run.last["update"]), float(run.last["running_mean"])
    return Figures(str(name), tuple(map(run.passed.get, MARKS)), *last, run.steps_per_s)


def _count(x: float) -> str:
    return f"{x:,.0f}" if x == int(x) else f"{x:,.1f}"  # a median of two can end in .5


_hours, _score, _speed = "{:.2f} h".format, "{:+.2f}".format, "{:,.0f}".format
SHOWN = {"update": _count, "games": _count, "hours": _hours}  # a mark's cell, in order


def table(runs: Sequence[Figures]) -> list[str]:
    """The Markdown lines: a header, a row per run, then the median and the range."""
    header = ["run (cells: update / game / hours)", *(f"above {mark:g}" for mark in MARKS)]
    header += ["updates", "final running mean", "steps/s"]
    lines = [header, ["---"] * len(header)]
    numbers = [(_count, "updates"), (_score, "final"), (_speed, "steps_per_s")]
    for run in runs:
        name = printable(run.name).replace("|", "\\|")
        cells = [shown(getattr(run, field)) for shown, field in numbers]
        lines.append([name, *map(_passed, run.marks), *cells])
    if len(runs) > 1:  # the median and the range of each column
        spreads = [*map(_mark_spread, zip(*(run.marks for run in runs), strict=True))]
        for shown, field in numbers:
            values = [getattr(run, field) for run in runs]
            spreads.append((shown(statistics.median(values)), _range(values, shown)))
        medians, ranges = zip(*spreads, strict=True)
        lines += [["**median**", *medians], ["**range**", *ranges]]
    return ["| " + " | ".join(cells) + " |" for cells in lines]


def _passed(mark: Passed | None) -> str:
    """A mark's cell: update / games played / hours."""
    if mark is None:
        return NOT_PASSED
    return " / ".join(shown(getattr(mark, name)) for name, shown in SHOWN.items())


def _range(values: Sequence[float], shown: Callable[[float], str]) -> str:
    return f"{shown(min(values))} to {shown(max(values))}"


def _mark_spread(marks: Sequence[Passed | None]) -> tuple[str, str]:
    """A mark's median and range, each figure on its own; a run that never passed is last."""
    columns = [[math.inf if m is None else getattr(m, name) for m in marks] for name in SHOWN]
    median = [statistics.median(column) for column in columns]
    median = NOT_PASSED if math.inf in median else _passed(Passed(*median))
    if all(m is None for m in marks):
        return median, NOT_PASSED
    if None in marks:  # the most is "never"
        return median, f"{_passed(Passed(*map(min, columns)))} to {NOT_PASSED}"
    return median, " / ".join(map(_range, columns, SHOWN.values()))


def check_distinct(run_dirs: Sequence[Path]) -> None:
    """Refuse a run directory given twice (``ValueError``)."""
    resolved = [run_dir.resolve() for run_dir in run_dirs]
    for i, run_dir in enumerate(run_dirs):
        if resolved[i] in resolved[:i]:
            raise ValueError(f"{printable(run_dir)}: this run is given twice; give each run once")


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m pong compare",
        description="Compare runs: when each passed the marks, and the spread (Markdown).",
    )
    parser.add_argument(
        "run_dirs", nargs="+", type=nonempty_path, help="runs, sweeps, folders of them"
    )
    args = parser.parse_args(argv)
    args.run_dirs = runs_of(args.run_dirs)
    try:
        check_distinct(args.run_dirs)
        print("\n".join(table([figures(run_dir) for run_dir in args.run_dirs])))
    except ValueError as e:
        say_error(parser.prog, e)
        return 2
    return 0
