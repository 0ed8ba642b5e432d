"""Driver overhead per update: where the driver's own time goes, as a share of the update.

Run:  python benchmarks/driver_overhead.py [--batch-size 10] [--updates 5]

Phases timed by ``pong.train.Trainer.step``: clearing the buffer, ray.put of the model and
starting the games, ray.get of each result (deserialisation), adding the
gradients to the batch buffer, and RMSProp. The rest of an update is the driver
blocked in ray.wait while the workers play.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ray  # noqa: E402

from benchmarks.common import machine, start_local_ray, table  # noqa: E402
from pong.train import Trainer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--num-cpus", type=int, default=None)
    parser.add_argument("--env", default="ALE/Pong-v5")
    args = parser.parse_args()

    cpus = start_local_ray(args.num_cpus)
    trainer = Trainer(args.batch_size, args.env, seed=0)
    trainer.step()  # warm-up: starts the actors, learns where they run
    stats = [trainer.step() for _ in range(args.updates)]
    ray.shutdown()

    total = sum(s.seconds for s in stats)
    phases = {
        "ray.put + starting games": sum(s.put for s in stats),
        "ray.get (results)": sum(s.get for s in stats),
        "accumulate gradients": sum(s.accumulate for s in stats),
        "RMSProp update": sum(s.update for s in stats),
    }
    overhead = sum(phases.values())
    rows = [
        [name, f"{1000 * t / len(stats):.1f}", f"{100 * t / total:.2f}%"]
        for name, t in phases.items()
    ]
    rows.append(
        ["driver total", f"{1000 * overhead / len(stats):.1f}", f"{100 * overhead / total:.2f}%"]
    )
    rows.append(
        [
            "waiting for workers (ray.wait)",
            f"{1000 * sum(s.wait for s in stats) / len(stats):.1f}",
            f"{100 * sum(s.wait for s in stats) / total:.2f}%",
        ]
    )
    print(f"Machine: {machine()}; Ray {ray.__version__}, {cpus} CPUs")
    print(
        f"Batch size {args.batch_size}, {len(stats)} timed updates of"
        f" {total / len(stats):.2f} s on average\n"
    )
    print(table(["phase", "ms per update", "share of update"], rows))
    print(
        f"\nSummary: the driver is busy {100 * overhead / total:.1f}% of an update at batch"
        f" {args.batch_size} ({1000 * overhead / len(stats):.0f} ms of"
        f" {total / len(stats):.2f} s)."
    )


if __name__ == "__main__":
    main()
