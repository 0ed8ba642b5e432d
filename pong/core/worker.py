"""The Ray actor that plays Pong: it owns one env and returns one episode's gradient."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import ray

from pong.core.model import Model, SparseGrad
from pong.core.rollout import episode_gradient, rollout

__all__ = [
    "MAX_RESTARTS",
    "WORKER_MEMORY",
    "Result",
    "RolloutWorker",
    "game_randomness",
    "game_seed",
]

# A worker whose process dies (killed, out of memory, node lost) is started again
# by Ray up to this many times, and its game dealt to another worker (Ray does
# not retry it: pong.core.schedule deals it); after that the worker is gone.
MAX_RESTARTS = 3

# What Ray reserves for a RolloutWorker: 72 MiB, just above the 66-68 MiB of its own (private)
# that one playing Pong was measured to hold (benchmarks/README.md, "Memory of a worker").
WORKER_MEMORY = 72 * 2**20


class Result(NamedTuple):
    """What a worker returns for one episode.

    Attributes:
        grad: the episode's policy gradient, ``W1`` as its non-zero columns.
        reward: the episode's total reward (points won minus points lost).
        steps: number of env steps.
        note: ``None``, or one line on what was done about a degenerate episode.
        node: id of the Ray node the game was played on (``None``: unknown).
    """

    grad: SparseGrad
    reward: float
    steps: int
    note: str | None
    node: str | None = None


# One CPU held for the worker's life, so Ray places at most one per CPU: a worker
# that finds no free CPU waits for one rather than crowding a busy node. Ray also sets
# OMP_NUM_THREADS to it before this module (and NumPy's BLAS) loads in the worker, so the
# small matrix products run single-threaded, not one thread per core in every worker.
# ``abandon`` runs in a thread of its own ("control"), beside the game being played.
@ray.remote(
    num_cpus=1,
    memory=WORKER_MEMORY,
    max_restarts=MAX_RESTARTS,
    max_task_retries=0,
    concurrency_groups={"control": 1},
)
class RolloutWorker:
    """Owns one env, created once; plays one episode per ``compute_gradient`` call.

    Args:
        make_env: makes the env, as Gymnasium's vector envs take env functions
            (``pong.envs.make.env_maker`` makes one for an env id).
    """

    def __init__(self, make_env: Callable[[], gym.Env]) -> None:
        self.env = make_env()
        self.node = ray.get_runtime_context().get_node_id()
        self.abandoned: frozenset[int] = frozenset()  # the copies of games to stop

    def compute_gradient(
        self, model: Model, seed: np.random.SeedSequence | int | None, copy: int | None = None
    ) -> Result | None:
        """Play the game of ``seed`` with ``model``; its gradient and reward (``None``: this
        ``copy`` of the game was abandoned, another worker having answered it first).

        ``seed`` (see ``game_seed``) seeds the env's reset and the action draws,
        so a game is the same whichever worker plays it (``None``: fresh entropy).
        """
        rng, reset_seed = game_randomness(seed)
        stop = None if copy is None else (lambda: copy in self.abandoned)
        episode = rollout(model, self.env, rng, seed=reset_seed, stop=stop)
        if episode is None:
            return None
        grad, note = episode_gradient(model, episode)
        return Result(grad, float(episode.epr.sum()), len(episode.epr), note, self.node)

    @ray.method(concurrency_group="control")
    def abandon(self, copy: int) -> None:
        """Stop the game dealt as ``copy`` (a number the dealer gives each game it deals) if
        it is being played, or once it starts: another worker answered it first. Only the
        last thousand numbers are kept."""
        kept = {c for c in self.abandoned if c > copy - 1000}
        self.abandoned = frozenset(kept | {copy})  # one assignment: thread-safe

    def describe(self) -> dict[str, object]:
        """Where this worker runs (node id, pid), and whether Ray restarted it."""
        with warnings.catch_warnings():  # Ray's property calls a deprecated API of its own
            warnings.simplefilter("ignore", DeprecationWarning)
            restarted = ray.get_runtime_context().was_current_actor_reconstructed
        return {
            "node_id": self.node,
            "restarted": restarted,
            "pid": os.getpid(),
        }


def game_seed(seed: int, iteration: int, game: int) -> np.random.SeedSequence:
    """The seed of game ``game`` (from 0) of update ``iteration`` (from 1) of a run's ``seed``.

    Independent of the weights' seed (spawn key ``(0,)``) and of every other game.
    """
    return np.random.SeedSequence(seed, spawn_key=(iteration, game))


def game_randomness(
    seed: np.random.SeedSequence | int | None,
) -> tuple[np.random.Generator, int]:
    """A game's action draws and its env's reset seed, from the game's ``seed``.

    They are the two children ``seed.spawn(2)`` gives, made here by their spawn keys, so
    that each call gives the same two (``spawn`` counts its calls on one object).
    """
    if not isinstance(seed, np.random.SeedSequence):
        seed = np.random.SeedSequence(seed)
    actions, reset = (
        np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, k)) for k in (0, 1)
    )
    return np.random.default_rng(actions), int(reset.generate_state(1)[0])
