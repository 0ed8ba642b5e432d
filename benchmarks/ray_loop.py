"""The Ray loop: seconds per update and steps/s at batch sizes 1, 10 and 60.

Run:  python benchmarks/ray_loop.py [--batch-sizes 1 10 60] [--updates 3] [--num-cpus N]

For each batch size, on a local Ray with all CPUs (or --num-cpus): our
Trainer, and the original example's way of computing (benchmarks/baseline.py),
one after the other in the same run. Each gets one warm-up update (actor start)
and then --updates timed ones. Efficiency = measured steps/s / (CPUs used x
emulator-only steps/s on one core), the emulator measured first in this run.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ray  # noqa: E402

from benchmarks.baseline import DenseLoop  # noqa: E402
from benchmarks.common import emulator_only, machine, table  # noqa: E402
from pong.train import Trainer, UpdateStats  # noqa: E402


def run_ours(batch_size: int, env_id: str, updates: int, seed: int = 0) -> list[UpdateStats]:
    """Warm-up update, then ``updates`` timed ones with our Trainer; their stats."""
    trainer = Trainer(batch_size, env_id, seed)
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
    emulator = emu_steps / emu_seconds  # steps/s on one core
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, logging_level="ERROR")
    cpus = int(ray.cluster_resources()["CPU"])

    rows, summary = [], {}
    for batch in args.batch_sizes:
        used = min(batch, cpus)
        paths = [("ours", None)] + ([] if args.no_baseline else [("original's way", None)])
        for name, _ in paths:
            if name == "ours":
                stats = run_ours(batch, args.env, args.updates)
                steps, seconds = sum(s.steps for s in stats), sum(s.seconds for s in stats)
            else:
                steps, seconds = run_baseline(batch, args.env, args.updates)
            rate = steps / seconds
            summary[(batch, name)] = rate
            rows.append(
                [
                    batch,
                    name,
                    f"{seconds / args.updates:.2f}",
                    f"{rate:.0f}",
                    used,
                    f"{rate / (used * emulator):.2f}",
                ]
            )
            print(
                f"  batch {batch:>3} {name}: {seconds / args.updates:.2f} s/update, "
                f"{rate:.0f} steps/s",
                file=sys.stderr,
                flush=True,
            )
    ray.shutdown()

    print(f"Machine: {machine()}; Ray {ray.__version__}, {cpus} CPUs")
    print(f"Emulator only ({args.env}, one core): {emulator:.0f} steps/s\n")
    print(table(["batch", "path", "s/update", "steps/s", "CPUs used", "efficiency"], rows))
    parts = []
    for batch in args.batch_sizes:
        line = f"batch {batch}: {summary[(batch, 'ours')]:.0f} steps/s"
        if (batch, "original's way") in summary:
            ratio = summary[(batch, "ours")] / summary[(batch, "original's way")]
            line += f" ({ratio:.2f}x the original's way)"
        parts.append(line)
    print("\nSummary: " + "; ".join(parts) + ".")


if __name__ == "__main__":
    main()
