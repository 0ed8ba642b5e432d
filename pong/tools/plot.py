"""Learning curves as a PNG: ``python -m pong plot RUN_DIR``, or several runs overlaid.

One run: its scores and running mean against games, and steps/s against training time; several:
their running means against games and hours. Needs matplotlib (``pip install -e '.[plot]'``).
``--weights PATH`` draws what the network learned instead (``pong.tools.weights``).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from operator import add
from pathlib import Path
from typing import BinaryIO

import numpy as np

from pong.run.checkpoint import load
from pong.run.config import GAMES_FLAGS, positive_int
from pong.run.config import path as nonempty_path
from pong.run.errors import OneLineParser, install, printable, say_error
from pong.run.files import Directory, atomic_write
from pong.run.metrics import UPDATES, games_file, rows
from pong.run.sweep import runs_of
from pong.tools.compare import check_distinct
from pong.tools.weights import save_png

__all__ = ["POINTS", "Buckets", "curve", "plot_run", "plot_runs", "plot_weights"]

POINTS = 2000  # buckets of a curve, at least, once it has more rows than 2 * POINTS
MAX_LEGEND = 12  # runs a legend names; more would crowd the curves out of the figure


class Buckets:
    """Rows of numbers added one at a time into at most ``2 * POINTS`` buckets of consecutive
    rows, each keeping the least, greatest and sum of each column; when all are full, pairs
    merge. A long run takes the memory of its drawing, not of its files."""

    def __init__(self) -> None:
        self.size, self.rows, self.buckets = 1, 0, []  # size: rows per bucket

    def add(self, *values: float) -> None:
        if self.rows % self.size:
            self.buckets[-1] = self._merged(self.buckets[-1], (values, values, values))
        else:
            if len(self.buckets) == 2 * POINTS:
                self.size *= 2
                self.buckets = list(map(self._merged, self.buckets[::2], self.buckets[1::2]))
            self.buckets.append((values, values, values))
        self.rows += 1

    @staticmethod
    def _merged(a: tuple, b: tuple) -> tuple:
        return tuple(map(min, a[0], b[0])), tuple(map(max, a[1], b[1])), tuple(map(add, a[2], b[2]))

    def result(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each bucket's least, mean and greatest of each column, as (buckets, columns)."""
        lo, hi, total = np.array(self.buckets, dtype=float).transpose(1, 0, 2)
        counts = np.minimum(self.size, self.rows - self.size * np.arange(len(lo)))
        return lo, total / counts[:, None], hi


def _updates(run_dir: Path) -> Buckets:
    """Games, hours of training, running mean and steps/s after each update of a run."""
    buckets, seconds = Buckets(), 0.0
    for row in rows(run_dir / UPDATES):
        seconds += float(row["seconds"])
        running, speed = float(row["running_mean"]), float(row["steps_per_s"])
        buckets.add(int(row["games"]), seconds / 3600, running, speed)
    return buckets


def curve(run_dir: str | Path, games: int | None = None) -> tuple[list[float], ...]:
    """Games, training hours and running mean by update (or bucket), up to ``games`` games."""
    points = _updates(Path(run_dir)).result()[1][:, :3]  # the means' first columns
    if games is not None:
        points = points[points[:, 0] <= games]
    return tuple(points.T.tolist())


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no screen needed
    import matplotlib.pyplot as plt

    return plt


def _draw(axes, buckets: Buckets, x: int, y: int, scale: float = 1.0, **style) -> None:
    """Column ``y`` against column ``x`` (times ``scale``): the means, and a band of their range."""
    lo, mean, hi = buckets.result()
    axes.plot(mean[:, x] * scale, mean[:, y], **style)
    if buckets.size > 1:
        band = mean[:, x] * scale, lo[:, y], hi[:, y]
        axes.fill_between(*band, color=style["color"], alpha=0.3, linewidth=0)


def plot_run(run_dir: str | Path, output: str | Path | None = None) -> Path:
    """Draw the run's curves into ``output`` (default ``RUN_DIR/learning_curve.png``)."""
    run_dir = Path(run_dir)
    updates, games = _updates(run_dir), Buckets()
    for row in rows(games_file(run_dir)):
        games.add(int(row["game"]), float(row["score"]))
    lo, mean, hi = games.result()
    fig, (top, bottom) = _pyplot().subplots(2, 1, figsize=(8, 6.5), layout="constrained")
    if games.size == 1:
        top.scatter(*mean.T, s=4, alpha=0.3, color="tab:gray", label="game score")
    else:
        label = f"game scores, least to most of each {games.size:,} games"
        top.fill_between(mean[:, 0], lo[:, 1], hi[:, 1], color="tab:gray", alpha=0.3, label=label)
    _draw(top, updates, 0, 2, color="tab:blue", label="running mean")
    limit = max(1.0, -lo[:, 1].min(), hi[:, 1].max()) + 0.5  # Pong: +-21.5
    top.set(xlabel="games", ylabel="score (points won - lost)", ylim=(-limit, limit))
    top.axhline(0, color="black", linewidth=0.5)
    top.legend(loc="upper left")
    top.set_title(f"{printable(run_dir.name)}: {updates.rows} updates, {games.rows} games")
    unit, scale = ("hours", 1) if updates.result()[2][-1, 1] > 3 else ("minutes", 60)
    _draw(bottom, updates, 1, 3, scale, color="tab:orange")
    bottom.set(xlabel=f"training time ({unit})", ylabel="env steps/s", ylim=(0, None))
    if output is not None:
        return _save(fig, Path(output))
    return _save(fig, run_dir / "learning_curve.png", below=run_dir)


def plot_runs(run_dirs: Sequence[str | Path], output: str | Path, games: int | None = None):
    """Overlay several runs' running means, against games and hours; with ``games``, each
    run's first that many games only (runs of unlike lengths, side by side)."""
    curves = [(printable(Path(run_dir)), curve(run_dir, games)) for run_dir in run_dirs]
    longest = max(max(hours, default=0) for _, (_, hours, _) in curves)
    unit, scale = ("hours", 1) if longest > 1 else ("minutes", 60)
    fig, (top, bottom) = _pyplot().subplots(2, 1, figsize=(8, 7), layout="constrained")
    for name, (games, hours, running) in curves:
        label = f"./{name}" if name.startswith("_") else name  # "_x" would hide from the legend
        top.plot(games, running, label=label)
        bottom.plot([t * scale for t in hours], running, label=label)
    top.set(xlabel="games", ylabel="running mean of the score")
    bottom.set(xlabel=f"{unit} of training", ylabel="running mean of the score")
    for axes in (top, bottom):
        axes.axhline(0, color="black", linewidth=0.5)
        if len(curves) <= MAX_LEGEND:
            axes.legend(loc="best")
    beyond = f" (no legend: more than {MAX_LEGEND})" if len(curves) > MAX_LEGEND else ""
    top.set_title(f"{len(curves)} runs{beyond}")
    return _save(fig, Path(output))


def _save(fig, output: Path, below: Path | None = None) -> Path:
    with _written(output, below) as f:
        fig.savefig(f, format="png", dpi=100)
    _pyplot().close(fig)
    return output


@contextmanager
def _written(output: Path, below: Path | None) -> Iterator[BinaryIO]:
    """``atomic_write(output)``; in the run directory ``below`` through its descriptor, so a
    link planted at its name, or in the directory's place, is refused."""
    if below is None:
        with atomic_write(output) as f:
            yield f
    else:
        with closing(Directory.open(below)) as directory, directory.write(output.name) as f:
            yield f


def plot_weights(path: str | Path, output: str | Path | None = None) -> Path:
    """Draw the ``W1`` rows of the policy in ``path`` as 80 x 80 images into ``output``."""
    path = Path(path)
    W1 = load(path, policy=True).weights["W1"]
    below = path if output is None and path.is_dir() else None
    if output is None:
        output = path / "weights.png" if below else path.with_name(f"{path.stem}-weights.png")
    with _written(Path(output), below) as f:
        save_png(W1, f)
    return Path(output)


def png(text: str) -> Path:
    """``--output``: a path ending in .png (matplotlib would add .png, or write another format)."""
    if not text.lower().endswith(".png"):
        raise argparse.ArgumentTypeError(f"only .png files are written, got {text!r}")
    return Path(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m pong plot",
        description="Draw a run's learning curves as a PNG, or overlay several runs' curves.",
    )
    add = parser.add_argument
    add("run_dirs", nargs="*", type=nonempty_path, help="runs, sweeps, folders of them")
    add(
        "--weights",
        type=nonempty_path,
        metavar="PATH",
        help="draw instead the W1 rows of a run directory's checkpoint, a checkpoint or a policy"
        " file as 80 x 80 images (into RUN_DIR/weights.png, or NAME-weights.png beside a file)",
    )
    out = "replaced if it exists (default for one run: RUN_DIR/learning_curve.png; needed for"
    out += " several)"
    add("--output", type=png, metavar="FILE.png", help=out)
    add(*GAMES_FLAGS, type=positive_int, metavar="N", help="of several runs, the first N games")
    args = parser.parse_args(argv)
    args.run_dirs = runs_of(args.run_dirs)
    if bool(args.run_dirs) == (args.weights is not None):
        parser.error("give either run directories or --weights PATH")
    if len(args.run_dirs) > 1 and args.output is None:
        parser.refuse("several runs need --output FILE.png")
    try:
        check_distinct(args.run_dirs)
        if args.weights is not None:
            drawn = plot_weights(args.weights, args.output)
        elif len(args.run_dirs) == 1:
            drawn = plot_run(args.run_dirs[0], args.output)
        else:
            drawn = plot_runs(args.run_dirs, args.output, args.games)
    except ValueError as e:
        error, code = e, 2
    except OSError as e:  # the PNG could not be written there
        error, code = f"{printable(e.filename or args.output)}: {e.strerror or e}", 1
    except ImportError:
        error, code = f"matplotlib is not installed: {install('plot')}", 2
    else:
        print(printable(drawn))  # outside the try: an error here is the output's, not the PNG's
        return 0
    say_error(parser.prog, error)
    return code
