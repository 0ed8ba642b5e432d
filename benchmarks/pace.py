"""The driver's pace against two emulators at once, and against an earlier commit's driver.

Run:  python benchmarks/pace.py [--against d150f31] [--rounds 4] [--batch-size 60]

Each round runs ``driver.py --batch-size=60 --iterations=3 --seed=1`` twice, this
checkout's and the ``--against`` commit's (checked out into a temporary git worktree,
run with this checkout's Python and libraries), in alternating order, and takes the
steps/s of updates 2-3 (update 1 pays for the workers' start). Around every driver
run, two copies of the emulator alone step at once (``benchmarks.common``): the
most two games at a time could reach on this machine in that minute. The figures
are each run's steps/s against those two emulators, and the two commits' ratio in
the same round.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import emulator_at_once, machine, table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BATCH = re.compile(r"^Batch (\d+) computed \d+ rollouts \((\d+) steps\) in (\d+\.\d+) seconds")


def pace(checkout: Path, batch_size: int, run_dir: Path) -> float:
    """Steps/s of updates 2 and 3 of a fresh run of ``checkout``'s driver."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    done = subprocess.run(
        [sys.executable, "driver.py", f"--batch-size={batch_size}", "--iterations=3",
         "--seed=1", f"--run-dir={run_dir}", "--watch-every=0"],
        cwd=checkout, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    batches = [BATCH.match(line) for line in done.stdout.splitlines()]
    later = [m for m in batches if m and int(m[1]) > 1]
    return sum(int(m[2]) for m in later) / sum(float(m[3]) for m in later)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="d150f31", help="the earlier commit")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=60)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="pace-"))
    old = scratch / "old"
    subprocess.run(["git", "worktree", "add", "--detach", str(old), args.against], cwd=ROOT,
                   check=True, capture_output=True)  # fmt: skip
    try:
        rows, ratios, fractions = [], [], {"this": [], args.against: []}
        for n in range(args.rounds):
            ways = [("this", ROOT), (args.against, old)]
            for name, checkout in ways if n % 2 == 0 else ways[::-1]:
                before = 2 * emulator_at_once("ALE/Pong-v5", 2, seconds=2.0, seed=n)
                steps = pace(checkout, args.batch_size, scratch / f"{name}-{n}")
                after = 2 * emulator_at_once("ALE/Pong-v5", 2, seconds=2.0, seed=n + 100)
                fraction = steps / statistics.fmean([before, after])
                fractions[name].append(fraction)
                rows.append([n + 1, name, f"{steps:,.0f}", f"{(before + after) / 2:,.0f}",
                             f"{fraction:.2f}"])  # fmt: skip
            ratios.append(fractions["this"][-1] / fractions[args.against][-1])
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT,
                       capture_output=True)  # fmt: skip
    print(f"Machine: {machine()}")
    print(f"driver.py --batch-size={args.batch_size} --iterations=3 --seed=1, updates 2-3\n")
    print(table(["round", "commit", "steps/s", "two emulators steps/s", "of the two"], rows))
    for name, values in fractions.items():
        print(f"\n{name}: {min(values):.2f}-{max(values):.2f} of two emulators"
              f" (mean {statistics.fmean(values):.2f})", end="")  # fmt: skip
    shown = ", ".join(f"{r:.2f}" for r in ratios)
    print(f"\nthis / {args.against}, round by round: {shown} (mean {statistics.fmean(ratios):.2f})")


if __name__ == "__main__":
    main()
