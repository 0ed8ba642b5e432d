"""``RolloutWorker``, the Ray actor that plays games and returns their gradients; game seeds."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import ray

from pong.core.model import Model
from pong.core.rollout import SparseGrad, game_gradient, play_game

__all__ = ["MAX_RESTARTS", "WORKER_MEMORY", "Result", "RolloutWorker", "game_randomness"]
__all__ += ["game_seed"]

# Ray restarts a worker whose process dies up to this many times. Ray does not retry the game
# it was playing; the dealer (pong.core.schedule) deals that game again, to the next free worker.
MAX_RESTARTS = 3
# Just above the 66-68 MiB of its own (private; its libraries' pages are shared) a worker playing
# Pong holds (benchmarks/README.md, "Memory of a worker"): Ray places no more than memory holds.
WORKER_MEMORY = 72 * 2**20


def game_seed(seed: int, update: int, index: int) -> np.random.SeedSequence:
    """The seed of game ``index`` (from 0) of update ``update`` (from 1) of a run's ``seed``:
    spawn key ``(update, index)``, unlike every other game's and the weights' (``(0,)``, in
    ``Trainer``). Its children: ``(update, index, 0)`` draws the actions, ``(update, index,
    1)`` seeds the env's reset (``game_randomness``)."""
    return np.random.SeedSequence(seed, spawn_key=(update, index))


def game_randomness(seed: np.random.SeedSequence | int | None) -> tuple[np.random.Generator, int]:
    """A game's action draws and its env's reset seed: the two children ``seed.spawn(2)``
    would give a fresh ``seed``, built from their spawn keys, so that a seed used again (a game
    replayed) gives the same two (``spawn`` counts its calls, and would give new ones)."""
    if not isinstance(seed, np.random.SeedSequence):
        seed = np.random.SeedSequence(seed)
    action_seed, reset_seed = (
        np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, k)) for k in (0, 1)
    )
    return np.random.default_rng(action_seed), int(reset_seed.generate_state(1)[0])


class Result(NamedTuple):
    """What a worker returns for one game."""

    grad: SparseGrad
    score: float  # points won minus points lost
    steps: int  # env steps
    note: str | None  # why the gradient is zero, if it is
    node: str | None = None  # the Ray node's id


# One CPU for the worker's life: Ray places at most one per CPU, and sets OMP_NUM_THREADS=1
# before NumPy loads in it, so BLAS runs one thread, not one per core in every worker.
# ``abandon`` runs in a thread of its own ("control"), beside the game being played.
@ray.remote(num_cpus=1, memory=WORKER_MEMORY, max_restarts=MAX_RESTARTS, max_task_retries=0,
            concurrency_groups={"control": 1})  # fmt: skip
class RolloutWorker:
    """Owns one env, made once by ``make_env`` (``pong.envs.make.env_maker``); plays one
    game per ``compute_gradient`` call."""

    def __init__(self, make_env: Callable[[], gym.Env]) -> None:
        self.env = make_env()
        self.node = ray.get_runtime_context().get_node_id()
        self.abandoned: frozenset[int] = frozenset()  # the copy numbers of games to stop

    def compute_gradient(
        self, model: Model, seed: np.random.SeedSequence | int | None, copy: int | None = None
    ) -> Result | None:
        """Play the game of ``seed`` (``game_seed``: the same on any worker) with ``model``.
        ``copy`` numbers this start of the game (the dealer may start a slow game again on
        another worker, as a backup): ``None`` if ``abandon(copy)`` came by the game's last
        check (``play_game`` checks before its first step and every ``STOP_EVERY``)."""
        rng, reset_seed = game_randomness(seed)
        stop = None if copy is None else (lambda: copy in self.abandoned)
        game = play_game(model, self.env, rng, reset_seed, stop=stop)
        if game is None:
            return None
        grad, note = game_gradient(model, game)
        return Result(grad, float(game.epr.sum()), len(game.epr), note, self.node)

    @ray.method(concurrency_group="control")
    def abandon(self, copy: int) -> None:
        """Stop copy ``copy`` of a game at its next check, or once it starts: the dealer no
        longer needs it (a game past its last check ends, and its reply is dropped).
        Copies numbered 1000 or more below ``copy`` are forgotten: long over."""
        kept = {c for c in self.abandoned if c > copy - 1000}
        self.abandoned = frozenset(kept | {copy})  # one at a time: the control group runs one

    def describe(self) -> dict[str, object]:
        """Where this worker runs (node id, pid), and whether Ray restarted it."""
        with warnings.catch_warnings():  # Ray's property calls a deprecated API of its own
            warnings.simplefilter("ignore", DeprecationWarning)
            restarted = ray.get_runtime_context().was_current_actor_reconstructed
        return {"node_id": self.node, "restarted": restarted, "pid": os.getpid()}
