"""The Ray actor that plays Pong: it owns one env and returns one episode's gradient."""

from __future__ import annotations

import os
import socket
import warnings
from typing import NamedTuple

import numpy as np
import ray

from pong.env import DEFAULT_ENV, make_env
from pong.model import Model, SparseGrad
from pong.rollout import episode_gradient, rollout

__all__ = ["MAX_RESTARTS", "THREAD_ENV_VARS", "Result", "RolloutWorker", "Turn", "wait_turn"]

# A worker whose process dies (killed, out of memory, node lost) is started
# again by Ray and its unfinished game replayed, up to this many times; after
# that the driver stops with an error rather than retrying forever.
MAX_RESTARTS = 3

# Each worker runs its small matrix products single-threaded: ten workers with a
# BLAS thread pool per core would fight over the cores. The variables must be in
# the process's environment before NumPy loads its BLAS, so they travel in Ray's
# runtime_env rather than being set inside the actor (too late: NumPy is loaded).
THREAD_ENV_VARS = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}


class Turn(NamedTuple):
    """When a game may start: once ``count`` of the calls ``ahead`` have finished."""

    ahead: list[ray.ObjectRef]  # results of other workers' calls, not fetched
    count: int


def wait_turn(turn: Turn | None) -> None:
    """Block until ``turn`` comes (at once for ``None``); the results stay where they are.

    Waiting inside the call, not idle between calls: an idle actor wakes often
    to check for signals, taking a running game off its core each time.
    """
    if turn is not None:
        ray.wait(turn.ahead, num_returns=turn.count, fetch_local=False)


class Result(NamedTuple):
    """What a worker returns for one episode.

    Attributes:
        grad: the episode's policy gradient, ``W1`` as its non-zero columns.
        reward: the episode's total reward (points won minus points lost).
        steps: number of env steps.
        note: ``None``, or one line on what was done about a degenerate episode.
        restarted: this worker's process had died and Ray started it again
            since its last result (the game was replayed from the start).
        node: id of the Ray node the game was played on (``None``: unknown).
    """

    grad: SparseGrad
    reward: float
    steps: int
    note: str | None
    restarted: bool = False
    node: str | None = None


@ray.remote(
    runtime_env={"env_vars": THREAD_ENV_VARS},
    max_restarts=MAX_RESTARTS,
    max_task_retries=MAX_RESTARTS,
)
class RolloutWorker:
    """Owns one env, created once; plays one episode per ``compute_gradient`` call.

    Args:
        env_id: Gymnasium id of the env.
        seed: seeds this worker's action draws and the env's first reset
            (``None``: fresh entropy).
    """

    def __init__(
        self, env_id: str = DEFAULT_ENV, seed: int | np.random.SeedSequence | None = None
    ) -> None:
        self.env = make_env(env_id)
        if not isinstance(seed, np.random.SeedSequence):
            seed = np.random.SeedSequence(seed)
        actions_seed, env_seed = seed.spawn(2)
        self.rng = np.random.default_rng(actions_seed)
        self.reset_seed: int | None = int(env_seed.generate_state(1)[0])  # first reset only
        self.node = ray.get_runtime_context().get_node_id()
        with warnings.catch_warnings():  # Ray's property calls a deprecated API of its own
            warnings.simplefilter("ignore", DeprecationWarning)
            self.restarted = ray.get_runtime_context().was_current_actor_reconstructed

    def compute_gradient(self, model: Model, turn: Turn | None = None) -> Result:
        """Play one episode with ``model`` once ``turn`` comes; its gradient and reward."""
        wait_turn(turn)
        episode = rollout(model, self.env, self.rng, seed=self.reset_seed)
        self.reset_seed = None  # later resets continue the env's seeded stream
        grad, note = episode_gradient(model, episode)
        restarted, self.restarted = self.restarted, False
        return Result(grad, float(episode.epr.sum()), len(episode.epr), note, restarted, self.node)

    def describe(self) -> dict[str, object]:
        """Where this worker runs: node id, host name, pid and thread variables."""
        return {
            "node_id": self.node,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "thread_env": {k: os.environ.get(k) for k in THREAD_ENV_VARS},
        }
