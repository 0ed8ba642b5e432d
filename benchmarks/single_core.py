"""One core: emulator alone vs. our rollout + gradient vs. the dense 2016 path.

Run:  python benchmarks/single_core.py [--games 4] [--long-steps 10000]

Prints steps/s of each (same env settings, one process, interleaved so drift
hits all of them alike), the ratios between them, the game bytes stored per
step, and the peak memory (tracemalloc: Python and NumPy allocations) of
playing and differentiating one long game. "Emulator only" is random
paddle moves through ``env.step``, as a user of Gymnasium steps the env; "ALE
core only" is the same moves with ALE's ``act`` calls alone (no frame, no
Gymnasium), the floor that reading the frame straight from ALE approaches.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc

# One core, one BLAS thread: the setting every Ray worker runs in.
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = "1"

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.common import ale_game, emulator_game, machine, table  # noqa: E402
from pong.core.model import Model  # noqa: E402
from pong.core.reference import game_gradient_dense, play_game_dense  # noqa: E402
from pong.core.rollout import game_gradient, play_game  # noqa: E402
from pong.envs.make import make_env  # noqa: E402


class Endless(gym.Wrapper):
    """Joins games into one long game of ``steps`` steps (for the memory figure)."""

    def __init__(self, env: gym.Env, steps: int) -> None:
        super().__init__(env)
        self.steps, self.t = steps, 0

    def reset(self, **kwargs):
        self.t = 0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.t += 1
        if terminated or truncated:
            obs, info = self.env.reset()
        return obs, reward, False, self.t >= self.steps, info


def play(path: str, env: gym.Env, model: Model, rng: np.random.Generator, seed=None):
    """One game and its gradient on ``path``: the game, or the steps (emulator)."""
    if path == "emulator":
        return emulator_game(env, rng, seed)
    if path == "ale":
        return ale_game(env, rng, seed)
    if path == "ours":
        game = play_game(model, env, rng, reset_seed=seed)
        game_gradient(model, game)
    else:
        game = play_game_dense(model, env, rng, reset_seed=seed)
        game_gradient_dense(model, game)
    return game


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="ALE/Pong-v5")
    parser.add_argument("--games", type=int, default=4, help="games per path")
    parser.add_argument("--long-steps", type=int, default=10_000, help="steps of the long game")
    args = parser.parse_args()

    model = Model(seed=0)
    paths = ("emulator", "ale", "ours", "dense")
    # One env and one random stream per path, seeded once, as in a worker.
    envs = {path: make_env(args.env) for path in paths}
    rngs = {path: np.random.default_rng(0) for path in paths}
    for path in paths:
        play(path, envs[path], model, rngs[path], seed=0)  # warm-up: the seeded reset
    totals = {path: [0, 0.0] for path in paths}
    stored = {}
    for _ in range(args.games):
        for path in paths:  # interleaved, so drift hits all of them alike
            start = time.perf_counter()
            game = play(path, envs[path], model, rngs[path])
            totals[path][1] += time.perf_counter() - start
            if path in ("emulator", "ale"):
                totals[path][0] += game
            else:
                totals[path][0] += len(game.epr)
                stored[path] = sum(a.nbytes for a in game) / len(game.epr)
    rate = {name: steps / seconds for name, (steps, seconds) in totals.items()}

    peak = {}
    for path in ("ours", "dense"):
        long_env = Endless(make_env(args.env), args.long_steps)
        tracemalloc.start()
        play(path, long_env, model, np.random.default_rng(0), seed=0)
        peak[path] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        long_env.close()

    print(f"Machine: {machine()}")
    print(f"Env {args.env}, {args.games} games per path, one process, one BLAS thread\n")
    print(
        table(
            [
                "path",
                "steps",
                "steps/s",
                "vs emulator",
                "bytes stored/step",
                f"peak MB, {args.long_steps}-step game",
            ],
            [
                [
                    "emulator only (random actions)",
                    totals["emulator"][0],
                    f"{rate['emulator']:.0f}",
                    "1.00",
                    "-",
                    "-",
                ],
                [
                    "ALE core only (act calls, no frame)",
                    totals["ale"][0],
                    f"{rate['ale']:.0f}",
                    f"{rate['ale'] / rate['emulator']:.2f}",
                    "-",
                    "-",
                ],
                [
                    "ours: rollout + gradient",
                    totals["ours"][0],
                    f"{rate['ours']:.0f}",
                    f"{rate['ours'] / rate['emulator']:.2f}",
                    f"{stored['ours']:.0f}",
                    f"{peak['ours'] / 1e6:.1f}",
                ],
                [
                    "dense 2016 path",
                    totals["dense"][0],
                    f"{rate['dense']:.0f}",
                    f"{rate['dense'] / rate['emulator']:.2f}",
                    f"{stored['dense']:.0f}",
                    f"{peak['dense'] / 1e6:.1f}",
                ],
            ],
        )
    )
    print(
        f"\nSummary: ours runs at {rate['ours'] / rate['emulator']:.2f}x the emulator alone"
        f" ({rate['ours'] / rate['ale']:.2f}x ALE's core alone) and"
        f" {rate['ours'] / rate['dense']:.2f}x the dense path, storing"
        f" {stored['ours']:.0f} bytes a step ({stored['dense'] / stored['ours']:.0f}x less) and"
        f" peaking at {peak['ours'] / 1e6:.1f} MB vs {peak['dense'] / 1e6:.0f} MB on a"
        f" {args.long_steps}-step game."
    )


if __name__ == "__main__":
    main()
