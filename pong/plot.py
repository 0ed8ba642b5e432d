"""Learning curves of a run, as a PNG: ``python -m pong.plot RUN_DIR``.

Top: each episode's score and the running mean against episodes. Bottom:
steps/s of each update against wall time. Reads the run directory's
``updates.csv`` and ``episodes.csv``; needs matplotlib (``pip install -e '.[plot]'``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pong.metrics import EPISODES, UPDATES, read_rows

__all__ = ["plot_run"]


def plot_run(run_dir: str | Path, output: str | Path | None = None) -> Path:
    """Draw the run's curves into ``output`` (default ``RUN_DIR/learning_curve.png``).

    Raises:
        ValueError: the directory has no metrics.
        ImportError: matplotlib is not installed.
    """
    run_dir = Path(run_dir)
    updates, episodes = read_rows(run_dir / UPDATES), read_rows(run_dir / EPISODES)
    import matplotlib

    matplotlib.use("Agg")  # files only, no screen needed
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), layout="constrained")
    scores = [float(r["reward"]) for r in episodes]
    top.scatter(
        [int(r["episode"]) for r in episodes],
        scores,
        s=4,
        alpha=0.3,
        color="tab:gray",
        label="episode score",
    )
    top.plot(
        [int(r["episodes"]) for r in updates],
        [float(r["running_reward"]) for r in updates],
        color="tab:blue",
        label="running mean",
    )
    limit = max(1.0, max(abs(x) for x in scores)) + 0.5  # Pong: +-21.5
    top.set(xlabel="episodes", ylabel="score (points won - lost)", ylim=(-limit, limit))
    top.axhline(0, color="black", linewidth=0.5)
    top.legend(loc="upper left")
    top.set_title(f"{run_dir.name}: {len(updates)} updates, {len(episodes)} episodes")

    elapsed, total = [], 0.0
    for r in updates:
        total += float(r["seconds"])
        elapsed.append(total)
    unit, scale = ("hours", 3600) if total > 3 * 3600 else ("minutes", 60)
    bottom.plot(
        [t / scale for t in elapsed],
        [float(r["steps_per_s"]) for r in updates],
        color="tab:orange",
    )
    bottom.set(xlabel=f"training time ({unit})", ylabel="env steps/s", ylim=(0, None))

    output = Path(output) if output else run_dir / "learning_curve.png"
    fig.savefig(output, dpi=100)
    plt.close(fig)
    return output


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pong.plot", description="Draw a run's learning curves as a PNG."
    )
    parser.add_argument("run_dir", type=Path, help="a run directory (holds updates.csv)")
    parser.add_argument(
        "--output", type=Path, help="PNG to write (default: RUN_DIR/learning_curve.png)"
    )
    args = parser.parse_args(argv)
    try:
        print(plot_run(args.run_dir, args.output))
    except ValueError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the PNG could not be written there
        print(
            f"{parser.prog}: error: {e.filename or args.output}: {e.strerror or e}", file=sys.stderr
        )
        return 1
    except ImportError:
        print(
            f"{parser.prog}: error: matplotlib is not installed: pip install -e '.[plot]'",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
