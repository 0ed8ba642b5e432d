"""How much of ``W1``'s gradient a worker sends: the pixels that changed in its game.

Run:  python benchmarks/sent_columns.py [--games 10] [--policy results/lr-drop/1e-4]

A game's ``SparseGrad`` holds only the K columns of ``W1`` whose pixel changed
at some step of the game (``pong.core.rollout``), so it is 6400 / K times
smaller than the dense gradient. K grows with the game's length: real
ALE/Pong-v5 games, seeded as a run's are, played by freshly initialized
networks (``Model(seed)``, nearly random play) and, with ``--policy``, by a
trained agent, whose games last longer.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import machine, table  # noqa: E402
from pong.core.model import D, Model  # noqa: E402
from pong.core.rollout import game_gradient, play_game  # noqa: E402
from pong.core.worker import game_randomness  # noqa: E402
from pong.envs.make import make_env  # noqa: E402
from pong.run.checkpoint import load  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=10, help="games per policy")
    parser.add_argument("--policy", help="also a trained policy's games (run dir or file)")
    args = parser.parse_args()
    env, rows = make_env(), []
    policies = [("freshly initialized (Model(game))", None)]
    if args.policy:
        policies.append((args.policy, Model.from_weights(load(args.policy, policy=True).weights)))
    for name, model in policies:
        steps, ks = [], []
        for game in range(args.games):
            rng, reset_seed = game_randomness(game)
            played = model or Model(game)
            sparse = play_game(played, env, rng, reset_seed)
            grad, _ = game_gradient(played, sparse)
            steps.append(len(sparse.epr))
            ks.append(grad.columns.size)
        ratios = sorted(D / k for k in ks)
        rows.append([
            name, args.games, f"{statistics.median(steps):,.0f}",
            f"{min(ks):,} to {max(ks):,} (median {statistics.median(ks):,.0f})",
            f"{ratios[0]:.1f} to {ratios[-1]:.1f} (median {statistics.median(ratios):.1f})",
        ])  # fmt: skip
    print(machine())
    print(table(["policy", "games", "median steps", "K", "6400 / K"], rows))


if __name__ == "__main__":
    main()
