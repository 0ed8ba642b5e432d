"""Driver overhead per update: the driver's own CPU time, as a share of the update.

Run:  python benchmarks/driver_overhead.py [--batch-size 10] [--updates 5]

Measured from outside ``Trainer.update``: the CPU time of this process (the
driver's Python thread and Ray's threads in it) and of its main thread alone,
against each update's wall time. The rest of an update the driver is blocked
in ``ray.wait`` while the workers play. RMSProp, the one step that is the
driver's alone, is also timed by itself, on the trainer's own arrays.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import ray  # noqa: E402

from benchmarks.common import machine, start_local_ray, table  # noqa: E402
from pong.core.model import Model, zeros_like_weights  # noqa: E402
from pong.core.train import Trainer  # noqa: E402
from pong.run.config import Config, hyperparameters  # noqa: E402


def rmsprop_seconds(trainer: Trainer, repeats: int = 5) -> float:
    """Seconds of one ``Model.rmsprop`` on copies of the trainer's weights, cache and a
    gradient."""
    model = Model.from_weights(trainer.model.weights)
    cache = {k: v.copy(order="K") for k, v in trainer.rmsprop_cache.items()}
    grad = zeros_like_weights(model.weights)
    grad["W1"][:, :700] = 1e-3  # about the columns a batch of games touches
    grad["W2"] += 1e-3
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.rmsprop(grad, cache, trainer.learning_rate, trainer.decay_rate)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--num-cpus", type=int, default=None)
    parser.add_argument("--env", default="ALE/Pong-v5")
    args = parser.parse_args()

    cpus = start_local_ray(args.num_cpus)
    trainer = Trainer(**hyperparameters(Config(batch_size=args.batch_size, env=args.env, seed=0)))
    trainer.update()  # warm-up
    wall = process = thread = 0.0
    for _ in range(args.updates):
        p0, t0 = time.process_time(), time.thread_time()
        update = trainer.update()
        process += time.process_time() - p0
        thread += time.thread_time() - t0
        wall += update.seconds
    rmsprop = rmsprop_seconds(trainer)
    ray.shutdown()

    n = args.updates
    rows = [
        [name, f"{1000 * t / n:.1f}", f"{100 * t / wall:.2f}%"]
        for name, t in (
            ("driver process CPU (all threads, Ray's included)", process),
            ("driver main thread CPU", thread),
            ("of which RMSProp (timed alone)", rmsprop * n),
            ("update wall time", wall),
        )
    ]
    print(f"Machine: {machine()}; Ray {ray.__version__}, {cpus} CPUs")
    print(f"Batch size {args.batch_size}, {n} timed updates of {wall / n:.2f} s on average\n")
    print(table(["what", "ms per update", "share of update"], rows))
    print(
        f"\nSummary: the driver process uses {100 * process / wall:.1f}% of an update's wall time"
        f" in CPU at batch {args.batch_size} ({1000 * process / n:.0f} ms of {wall / n:.2f} s;"
        f" its main thread {1000 * thread / n:.0f} ms)."
    )


if __name__ == "__main__":
    main()
