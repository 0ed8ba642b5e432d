"""One line: the peak memory (RSS) of ``python -m pong plot`` on a long run, to compare commits.

Run from the root of the checkout to measure (an unpacked ``git archive`` of another
commit, say), with this repository's environment:

    cd ../old && /path/to/pong/.venv/bin/python /path/to/pong/benchmarks/plot_memory.py

It writes a made-up run of ``--rows`` updates of ``--games`` games each (updates.csv
and games.csv, as ``pong.run.metrics`` writes them) in a temporary directory, draws
it with the checkout's ``python -m pong plot`` in a child process, and prints the
child's peak resident memory and its seconds.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CHUNK = 100_000  # updates written at a time


def write_run(run: Path, rows: int, games: int, seed: int = 0) -> None:
    """A run of ``rows`` updates of ``games`` games each, its scores drawn at random."""
    rng = np.random.default_rng(seed)
    with open(run / "updates.csv", "w") as u, open(run / "games.csv", "w") as e:
        u.write(
            "update,games,steps,seconds,steps_per_s,running_mean,score_mean,score_min,score_max\n"
        )
        e.write("game,update,score,steps\n")
        running, steps = -21.0, 0
        for start in range(1, rows + 1, CHUNK):
            updates = range(start, min(start + CHUNK, rows + 1))
            scores = rng.integers(-21, 22, (len(updates), games))
            lengths = rng.integers(800, 9000, (len(updates), games))
            seconds = rng.uniform(1.0, 3.0, len(updates))
            lines, game_lines = [], []
            for i, update in enumerate(updates):
                for g in range(games):
                    running = 0.99 * running + 0.01 * scores[i, g]
                    number = (update - 1) * games + g + 1
                    game_lines.append(f"{number},{update},{scores[i, g]:.1f},{lengths[i, g]}")
                batch = lengths[i].sum()
                steps += int(batch)
                lines.append(
                    f"{update},{update * games},{steps},{seconds[i]:.4f},"
                    f"{batch / seconds[i]:.1f},{running},{scores[i].mean()},"
                    f"{scores[i].min():.1f},{scores[i].max():.1f}"
                )
            u.write("\n".join(lines) + "\n")
            e.write("\n".join(game_lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="updates in the run")
    parser.add_argument("--games", type=int, default=10, help="games per update")
    parser.add_argument("--write", type=Path, help=argparse.SUPPRESS)  # the child that writes
    args = parser.parse_args()
    if args.write:
        return write_run(args.write, args.rows, args.games)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        run.mkdir()
        # Written by another child: Linux counts the memory a parent has at the fork in the
        # child's peak, so this process stays small.
        writer = [sys.executable, __file__, "--write", str(run), f"--rows={args.rows}"]
        subprocess.run([*writer, f"--games={args.games}"], check=True)
        size = sum(f.stat().st_size for f in run.iterdir()) / 1e6
        start = time.perf_counter()
        with open(f"{tmp}/stderr", "w+") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-m", "pong", "plot", str(run), "--output", f"{tmp}/plot.png"],
                cwd=os.getcwd(),
                env={**os.environ, "PYTHONPATH": os.getcwd()},
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
            _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak, not the writer's
            proc.returncode = os.waitstatus_to_exitcode(status)
            seconds = time.perf_counter() - start
            if status != 0:
                stderr.seek(0)
                sys.exit(f"python -m pong plot failed:\n{stderr.read()[-2000:]}")
    peak = usage.ru_maxrss / 1024  # KiB on Linux
    print(
        f"{args.rows:,} updates, {args.rows * args.games:,} games ({size:,.0f} MB of CSV):"
        f" peak RSS {peak:,.0f} MiB, {seconds:.1f} s ({platform.node()}, {os.cpu_count()} CPUs,"
        f" Python {platform.python_version()})"
    )


if __name__ == "__main__":
    main()
