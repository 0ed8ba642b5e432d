"""One line: steps/s of a checkout's ``Trainer`` at one batch size, to compare commits.

Run, from the root of the checkout to time (a ``git worktree`` of another
commit, say), with this repository's environment:

    cd ../old && /path/to/pong/.venv/bin/python /path/to/pong/benchmarks/trainer_speed.py 60

A fresh local Ray with all CPUs, seed 0: one warm-up update (the workers
start), then ``--updates`` timed ones. The same seed plays the same games in
every commit that seeds each game (equal step counts confirm it). Run the
commits in turn, several rounds: this machine's speed drifts. Where the
checkout adds the games in game order (``Update.held``), the line also gives
the most bytes of gradients held back at once, waiting for an earlier game.
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.getcwd()  # the checkout to time, not necessarily this file's
sys.path.insert(0, ROOT)
os.environ["PYTHONPATH"] = ROOT  # its workers import the same checkout's pong

import ray  # noqa: E402

from benchmarks.common import start_local_ray  # noqa: E402
from pong.core.train import Trainer, Update  # noqa: E402
from pong.run.config import Config, hyperparameters  # noqa: E402

held_bytes = [0]  # the most bytes of results held back at once, over the timed updates


def measure_held() -> None:
    """Wrap ``Update.add`` from outside to record what it holds after each game."""
    add = Update.add

    def recording(self, game, result, grad_buffer):
        add(self, game, result, grad_buffer)
        held = sum(sum(a.nbytes for a in r.grad) for r in self.held.values())
        held_bytes[0] = max(held_bytes[0], held)

    Update.add = recording


@ray.remote
def imported_from() -> str:
    import pong

    return pong.__file__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("batch_size", type=int)
    parser.add_argument("--updates", type=int, default=2, help="timed updates")
    args = parser.parse_args()
    start_local_ray(None, log_to_driver=False)
    where = ray.get(imported_from.remote())
    if not where.startswith(ROOT):
        sys.exit(f"the workers imported {where}, not the checkout in {ROOT}")
    trainer = Trainer(
        **hyperparameters(Config(batch_size=args.batch_size, env="ALE/Pong-v5", seed=0))
    )
    trainer.update()  # warm-up
    ordered = "held" in Update.__dataclass_fields__
    if ordered:
        measure_held()
    updates = [trainer.update() for _ in range(args.updates)]
    steps, seconds = sum(u.steps for u in updates), sum(u.seconds for u in updates)
    rate = steps / seconds
    held = f"; at most {held_bytes[0] / 1e6:.2f} MB held back" if ordered else ""
    print(
        f"{ROOT} batch {args.batch_size}: {steps} steps in {seconds:.2f} s = {rate:.0f} steps/s"
        f"{held}"
    )
    ray.shutdown()


if __name__ == "__main__":
    main()
