"""Where one step of ours goes, inside a real game: the emulator, and each part of our work.

Run:  python benchmarks/step_parts.py [--games 4]

ALE/Pong-v5, one process, one BLAS thread. The loop is ``rollout``'s, with
``AleFrames.step`` taken apart only to put a clock between its parts: the policy
(forward pass and action), storing the step, ALE's ``act`` calls, and reading and
differencing the frame. The same forward pass is then timed alone (timeit), where
the caches hold what it needs; in the game, the emulator has just filled them with
its own work.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import timeit
from array import array

# One core, one BLAS thread: the setting every Ray worker runs in.
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = "1"

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.common import machine, table  # noqa: E402
from pong.core.model import DOWN, UP, Model  # noqa: E402
from pong.core.rollout import frames_of, policy_forward_sparse  # noqa: E402
from pong.envs.make import make_env  # noqa: E402

PARTS = ("policy", "store", "emulator", "frame")


def game(model: Model, frames, rng: np.random.Generator, seed: int, spent: dict) -> int:
    """One game as ``rollout`` plays it, each part's nanoseconds added to ``spent``; its steps."""
    clock = time.perf_counter_ns
    frames.reset(seed=seed)
    ale, atari = frames.ale, frames.atari
    changed, arrived = np.empty(0, np.intp), np.empty(0, bool)
    offsets, game_changed, game_delta = array("q", [0]), array("H"), array("b")
    on_bits = array("B")
    dlogps, rewards, steps, done = array("d"), array("d"), 0, False
    while not done:
        t0 = clock()
        delta = np.where(arrived, 1.0, -1.0)
        aprob, h = policy_forward_sparse(model, changed, delta)
        action = UP if rng.random() < aprob else DOWN
        t1 = clock()
        game_changed.frombytes(changed.astype(np.uint16).tobytes())
        game_delta.frombytes(delta.astype(np.int8).tobytes())
        offsets.append(len(game_changed))
        on_bits.frombytes(np.packbits(h > 0).tobytes())
        dlogps.append((1.0 if action == UP else 0.0) - aprob)
        t2 = clock()
        reward = 0.0
        for _ in range(atari._frameskip):  # ALE/Pong-v5: a fixed 4
            reward += ale.act(atari._action_set[action], 1.0)
        done = ale.game_over(with_truncation=False) or ale.game_truncated()
        t3 = clock()
        field = frames._read_field()
        candidates = (field != frames.field).nonzero()[0]
        now = frames._look_up(field, candidates)
        moved = now != frames.table.take(frames.field[candidates])
        frames.field = field
        changed, arrived = candidates[moved], now[moved].view(bool)
        rewards.append(reward)
        t4 = clock()
        for part, ns in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            spent[part] += ns
        steps += 1
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--games", type=int, default=4)
    args = parser.parse_args()
    model, rng = Model(seed=0), np.random.default_rng(0)
    frames = frames_of(make_env("ALE/Pong-v5"))
    game(model, frames, rng, seed=100, spent=dict.fromkeys(PARTS, 0))  # warm up
    spent = dict.fromkeys(PARTS, 0)
    steps = sum(game(model, frames, rng, seed, spent) for seed in range(args.games))
    total = sum(spent.values())
    rows = [[p, f"{spent[p] / steps / 1e3:.1f}", f"{spent[p] / total:.2f}"] for p in PARTS]
    ours = total - spent["emulator"]
    rows.append(["ours (all but the emulator)", f"{ours / steps / 1e3:.1f}", f"{ours / total:.2f}"])
    changed = np.sort(rng.choice(6400, 30, replace=False))  # a typical step: ~30 pixels changed
    delta = np.where(rng.random(30) < 0.5, 1.0, -1.0)
    alone = (
        min(timeit.repeat(lambda: policy_forward_sparse(model, changed, delta), number=2000)) / 2000
    )
    print(machine())
    print(f"ALE/Pong-v5, {args.games} games, {steps} steps, one process, one BLAS thread\n")
    print(table(["part of a step", "us a step", "share"], rows))
    print(f"\nThe forward pass (policy_forward_sparse) timed alone: {alone * 1e6:.1f} us a call.")


if __name__ == "__main__":
    main()
