"""The Ray loop: seconds per update and steps/s at batch sizes 1, 10 and 60.

Run:  python benchmarks/ray_loop.py [--batch-sizes 1 10 60] [--updates 2] [--rounds 3]

For each batch size, on a local Ray with all CPUs (or --num-cpus), three ways
of running the loop: our Trainer (one RolloutWorker per CPU, each given the
next game as it finishes one); our RolloutWorkers in the original example's
loop, one per game, every game started at once (batches larger than the CPUs
only); and the original example's way of computing (both in
benchmarks/baseline.py). After the timed updates, the workers' resident memory
is summed (VmRSS of each worker process, shared libraries included). This shared
machine's speed drifts by 10% within a minute, so each way runs --rounds
times, in turn, and each time from a fresh start with the same seed: one
warm-up update (actor start), then --updates timed ones. All ways play the
very same games; only their timing differs.

Efficiency = measured steps / (CPUs used x emulator-only steps/s on one
core x seconds). Each run gets a fresh local Ray; the emulator is measured
with Ray stopped before every run and after the last, and each run is
compared with the mean of the two measurements around it: within one
batch size the emulator alone has drifted by 30% here.

Where a batch uses C > 1 CPUs, the emulator is also measured as C copies
stepping at once, around every run in the same way: the most any loop of C
games could reach on this machine, since busy cores can slow each other
down. The last column compares each run with that.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ray  # noqa: E402

from benchmarks.baseline import DenseRolloutWorker, OriginalLoop  # noqa: E402
from benchmarks.common import (  # noqa: E402
    emulator_at_once,
    emulator_only,
    machine,
    start_local_ray,
    table,
)
from pong.core.train import Trainer  # noqa: E402
from pong.core.worker import RolloutWorker  # noqa: E402
from pong.run.config import Config, hyperparameters  # noqa: E402


def run(path: str, batch_size: int, env_id: str, updates: int) -> tuple[int, float, float]:
    """A fresh loop on ``path``: one warm-up update, then ``updates`` timed ones; (steps, s,
    the workers' resident MB)."""
    if path == "ours":
        trainer = Trainer(**hyperparameters(Config(batch_size=batch_size, env=env_id, seed=0)))
        trainer.update()  # warm-up
        timed = [(u.steps, u.seconds) for u in (trainer.update() for _ in range(updates))]
        actors = trainer.dealer.workers
    else:
        worker = RolloutWorker if path == "one worker per game" else DenseRolloutWorker
        loop = OriginalLoop(worker, batch_size, env_id, seed=0)
        loop.step()  # warm-up: starts the actors
        timed = [loop.step() for _ in range(updates)]
        actors = loop.actors
    pids = [info["pid"] for info in ray.get([actor.describe.remote() for actor in actors])]
    memory = sum(resident_mb(pid) for pid in pids)
    for actor in actors:
        ray.kill(actor)
    return sum(n for n, _ in timed), sum(t for _, t in timed), memory


def resident_mb(pid: int) -> float:
    """A process's resident memory (VmRSS) in MB."""
    with open(f"/proc/{pid}/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return kb / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 10, 60])
    parser.add_argument("--updates", type=int, default=2, help="timed updates per round")
    parser.add_argument("--rounds", type=int, default=3, help="times each way runs, in turn")
    parser.add_argument("--num-cpus", type=int, default=None)
    parser.add_argument("--env", default="ALE/Pong-v5")
    parser.add_argument("--no-baseline", action="store_true", help="skip the original's way")
    args = parser.parse_args()

    def emulator(seed: int) -> float:  # steps/s on one core, Ray not running
        steps, seconds = emulator_only(args.env, games=5, seed=seed)
        return steps / seconds

    def start_ray() -> int:  # a fresh local Ray for each run; its CPUs
        return start_local_ray(args.num_cpus, log_to_driver=False)

    cpus = start_ray()  # how many CPUs the runs will have, before the first emulator measurement
    ray.shutdown()
    rows, summary = [], {}

    def together(copies: int, seed: int) -> float:  # steps/s per copy, `copies` at once
        return emulator_at_once(args.env, copies, seconds=2.0, seed=seed)

    emulators = [emulator(0)]
    at_once: list[float] = []  # `used` emulators at once, per copy: all measurements
    for batch in args.batch_sizes:
        used = min(batch, cpus)
        if used > 1:  # before this batch size's first run (`used` may differ from the last's)
            at_once.append(together(used, len(at_once)))
        paths = ["ours"]
        paths += ["one worker per game"] if batch > cpus else []
        paths += [] if args.no_baseline else ["original's way"]
        # path -> [steps, seconds, emulator-core-seconds: sum of seconds x emulator steps/s,
        #          the same with `used` emulators at once]
        totals = {path: [0, 0.0, 0.0, 0.0] for path in paths}
        memory: dict[str, list[float]] = {path: [] for path in paths}  # each run's workers' MB
        for r in range(args.rounds):
            for path in paths[r % len(paths) :] + paths[: r % len(paths)]:  # rotate the order
                start_ray()
                steps, seconds, resident = run(path, batch, args.env, args.updates)
                memory[path].append(resident)
                ray.shutdown()
                emulators.append(emulator(len(emulators)))
                per_core = (emulators[-2] + emulators[-1]) / 2  # just before and after
                if used > 1:
                    at_once.append(together(used, len(at_once)))
                    per_copy = (at_once[-2] + at_once[-1]) / 2
                else:
                    per_copy = per_core  # one copy at once is the emulator alone
                totals[path][0] += steps
                totals[path][1] += seconds
                totals[path][2] += seconds * per_core
                totals[path][3] += seconds * per_copy
                print(
                    f"  batch {batch:>3} round {r + 1} {path}: {steps / seconds:.0f} steps/s,"
                    f" emulator {per_core:.0f}, {used} at once {per_copy:.0f} each",
                    file=sys.stderr,
                    flush=True,
                )
        for path in paths:
            steps, seconds, emulator_seconds, together_seconds = totals[path]
            per_core = emulator_seconds / seconds  # time-weighted mean over the path's runs
            efficiency = steps / (used * emulator_seconds)
            of_together = steps / (used * together_seconds)
            summary[(batch, path)] = (steps / seconds, efficiency, of_together)
            per_update = seconds / (args.updates * args.rounds)
            rows.append(
                [batch, path, f"{per_update:.2f}", f"{steps / seconds:.0f}", used]
                + [f"{per_core:.0f}", f"{efficiency:.2f}", f"{of_together:.2f}"]
                + [f"{max(memory[path]):,.0f}"]
            )

    print(f"Machine: {machine()}; Ray {ray.__version__}, {cpus} CPUs")
    print(
        f"Emulator only ({args.env}, one core, Ray not running), measured before every run"
        f" and after the last: {min(emulators):.0f} to {max(emulators):.0f} steps/s"
        f" ({len(emulators)} measurements)"
    )
    if at_once:
        print(
            f"Emulator only, as many copies at once as CPUs used, per copy: {min(at_once):.0f}"
            f" to {max(at_once):.0f} steps/s ({len(at_once)} measurements)"
        )
    header = ["batch", "path", "s/update", "steps/s", "CPUs used", "emulator/core", "efficiency"]
    header += ["vs that many emulators at once", "workers' MB resident"]
    print()
    print(table(header, rows))
    parts = []
    for batch in args.batch_sizes:
        ours, efficiency, of_together = summary[(batch, "ours")]
        line = f"batch {batch}: {ours:.0f} steps/s, efficiency {efficiency:.2f}"
        used = min(batch, cpus)
        notes = [f"{of_together:.2f} of {used} emulators at once"] if used > 1 else []
        if (batch, "one worker per game") in summary:
            per_game = summary[(batch, "one worker per game")][0]
            notes.append(f"{ours / per_game:.2f}x one worker per game")
        if (batch, "original's way") in summary:
            original = summary[(batch, "original's way")][0]
            notes.append(f"{ours / original:.2f}x the original's way")
        line += f" ({'; '.join(notes)})" if notes else ""
        parts.append(line)
    print("\nSummary: " + "; ".join(parts) + ".")


if __name__ == "__main__":
    main()
