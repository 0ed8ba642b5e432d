"""The Ray loop: seconds per update and steps/s at batch sizes 1, 10 and 60.

Run:  python benchmarks/ray_loop.py [--batch-sizes 1 10 60] [--updates 3] [--num-cpus N]

For each batch size, on a local Ray with all CPUs (or --num-cpus): our
Trainer; our Trainer starting every game at once instead of as many as there
are CPUs (batches larger than the CPUs only); and the original example's way
of computing (benchmarks/baseline.py), one after the other in the same run.
Each gets one warm-up update (actor start) and then --updates timed ones.
Efficiency = measured steps/s / (CPUs used x emulator-only steps/s on one
core); the emulator is measured at the start and at the end of the run, and
the mean of the two is used (this shared machine's speed drifts).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ray  # noqa: E402

from benchmarks.baseline import DenseLoop  # noqa: E402
from benchmarks.common import emulator_only, machine, table  # noqa: E402
from pong.train import Trainer, UpdateStats  # noqa: E402


def run_ours(
    batch_size: int, env_id: str, updates: int, seed: int = 0, all_at_once: bool = False
) -> list[UpdateStats]:
    """Warm-up update, then ``updates`` timed ones with our Trainer; their stats."""
    trainer = Trainer(batch_size, env_id, seed)
    if all_at_once:  # the ablation: no node is ever full, so every game starts at once
        trainer._cpus = lambda node: math.inf
    trainer.step()  # starts the actors
    stats = [trainer.step() for _ in range(updates)]
    for actor in trainer.actors:
        ray.kill(actor)
    return stats


def run_baseline(batch_size: int, env_id: str, updates: int, seed: int = 0) -> tuple[int, float]:
    loop = DenseLoop(batch_size, env_id, seed)
    loop.step()
    steps = seconds = 0
    for _ in range(updates):
        n, s = loop.step()
        steps, seconds = steps + n, seconds + s
    for actor in loop.actors:
        ray.kill(actor)
    return steps, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 10, 60])
    parser.add_argument("--updates", type=int, default=3, help="timed updates per batch size")
    parser.add_argument("--num-cpus", type=int, default=None)
    parser.add_argument("--env", default="ALE/Pong-v5")
    parser.add_argument("--no-baseline", action="store_true", help="skip the original's way")
    args = parser.parse_args()

    emu_steps, emu_seconds = emulator_only(args.env, episodes=3, seed=0)
    emulator_start = emu_steps / emu_seconds  # steps/s on one core
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, logging_level="ERROR")
    cpus = int(ray.cluster_resources()["CPU"])

    rows, summary = [], {}
    for batch in args.batch_sizes:
        used = min(batch, cpus)
        paths = ["ours"]
        paths += ["ours, every game at once"] if batch > cpus else []
        paths += [] if args.no_baseline else ["original's way"]
        for name in paths:
            if name == "original's way":
                steps, seconds = run_baseline(batch, args.env, args.updates)
            else:
                stats = run_ours(batch, args.env, args.updates, all_at_once=name != "ours")
                steps, seconds = sum(s.steps for s in stats), sum(s.seconds for s in stats)
            rate = steps / seconds
            summary[(batch, name)] = rate
            rows.append([batch, name, f"{seconds / args.updates:.2f}", f"{rate:.0f}", used])
            print(
                f"  batch {batch:>3} {name}: {seconds / args.updates:.2f} s/update, "
                f"{rate:.0f} steps/s",
                file=sys.stderr,
                flush=True,
            )
    ray.shutdown()
    emu_steps, emu_seconds = emulator_only(args.env, episodes=3, seed=1)
    emulator_end = emu_steps / emu_seconds
    emulator = (emulator_start + emulator_end) / 2
    for row in rows:
        row.append(f"{float(row[3]) / (row[4] * emulator):.2f}")

    print(f"Machine: {machine()}; Ray {ray.__version__}, {cpus} CPUs")
    print(
        f"Emulator only ({args.env}, one core): {emulator:.0f} steps/s"
        f" ({emulator_start:.0f} at the start of the run, {emulator_end:.0f} at the end)\n"
    )
    print(table(["batch", "path", "s/update", "steps/s", "CPUs used", "efficiency"], rows))
    parts = []
    for batch in args.batch_sizes:
        ours = summary[(batch, "ours")]
        efficiency = ours / (min(batch, cpus) * emulator)
        line = f"batch {batch}: {ours:.0f} steps/s, efficiency {efficiency:.2f}"
        if (batch, "original's way") in summary:
            ratio = ours / summary[(batch, "original's way")]
            line += f" ({ratio:.2f}x the original's way)"
        parts.append(line)
    print("\nSummary: " + "; ".join(parts) + ".")


if __name__ == "__main__":
    main()
