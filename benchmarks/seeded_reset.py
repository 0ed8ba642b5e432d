"""What a game's start costs: ale-py's seeded reset, ours (``pong.envs.seeded_reset``), unseeded.

Run:  python benchmarks/seeded_reset.py [--resets 20]

Every game of a run is seeded, so a worker resets its env with a seed before
each game. Three ways, interleaved reset by reset so that drift hits them
alike, each on an env of its own that has just played 200 steps (as a
worker's env has; a fresh env would flatter the reset): ale-py's
``reset(seed=s)``, which reloads the ROM; ``make_env``'s ``SeededReset`` once
it has checked itself, which restores a state instead; and ``reset()``
without a seed, the floor. Milliseconds per reset.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import machine, table  # noqa: E402
from pong.envs.make import DEFAULT_ENV, make_env  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resets", type=int, default=20, help="resets timed per way")
    args = parser.parse_args()

    ways = {
        "ale-py's reset(seed=s)": (make_env(DEFAULT_ENV).env.env, True),  # under our wrappers
        "SeededReset (ours)": (make_env(DEFAULT_ENV).env, True),  # under FastFrames
        "reset() without a seed": (make_env(DEFAULT_ENV), False),
    }
    for env, _ in ways.values():
        env.reset(seed=10**6)  # SeededReset's template and its check: two of ale-py's own
    assert ways["SeededReset (ours)"][0].quick
    times: dict[str, list[float]] = {way: [] for way in ways}
    for s in range(args.resets):
        for way, (env, seeded) in ways.items():
            for _ in range(200):  # somewhere into a game, as a worker's env is
                env.step(env.action_space.sample())
            start = time.perf_counter()
            env.reset(seed=s if seeded else None)
            times[way].append(1000 * (time.perf_counter() - start))
    print(f"Machine: {machine()}")
    rows = [
        [way, f"{statistics.median(t):.1f}", f"{min(t):.1f}", f"{max(t):.1f}"]
        for way, t in times.items()
    ]
    print(f"{DEFAULT_ENV}, {args.resets} resets each, interleaved\n")
    print(table(["reset", "median ms", "min ms", "max ms"], rows))
    ale, ours = (statistics.median(times[w]) for w in list(ways)[:2])
    print(f"\nSummary: ours {ours:.1f} ms, ale-py's seeded reset {ale:.1f} ms ({ale / ours:.0f}x).")


if __name__ == "__main__":
    main()
