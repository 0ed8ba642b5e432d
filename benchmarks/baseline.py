"""The original example's way of computing, for side-by-side timing (not used in training).

What Ray's 2017 Pong example did per update, rebuilt on this package's dense
reference functions: each actor plays with dense float64 inputs and hidden
states (``rollout_dense``), runs the dense backward pass, and returns the full
(200 x 6400) float64 gradient; the actor sets ``MKL_NUM_THREADS`` in its
constructor, after NumPy is loaded, as the original did; the model's ``W1`` is
row-major, as it was then. The driver loop is the original's: put, wait, get,
add, RMSProp.
"""

from __future__ import annotations

import os
import time

import numpy as np
import ray

from pong.env import make_env
from pong.model import Model, zeros_like_weights
from pong.rollout import episode_gradient_dense, rollout_dense


@ray.remote
class DenseRolloutWorker:
    def __init__(self, env_id: str, seed: np.random.SeedSequence) -> None:
        os.environ["MKL_NUM_THREADS"] = "1"  # as the original did: too late to take effect
        self.env = make_env(env_id)
        actions_seed, env_seed = seed.spawn(2)
        self.rng = np.random.default_rng(actions_seed)
        self.reset_seed = int(env_seed.generate_state(1)[0])

    def compute_gradient(self, model: Model) -> tuple[dict[str, np.ndarray], float, int]:
        episode = rollout_dense(model, self.env, self.rng, seed=self.reset_seed)
        self.reset_seed = None
        grad, _ = episode_gradient_dense(model, episode)
        return grad, float(episode.epr.sum()), len(episode.epr)


class DenseLoop:
    """The original driver loop over ``DenseRolloutWorker`` actors."""

    def __init__(self, batch_size: int, env_id: str, seed: int) -> None:
        model_seed, *worker_seeds = np.random.SeedSequence(seed).spawn(1 + batch_size)
        self.model = Model(model_seed)
        self.model.weights["W1"] = np.ascontiguousarray(self.model.weights["W1"])  # row-major
        self.grad_buffer = zeros_like_weights(self.model.weights)
        self.rmsprop_cache = zeros_like_weights(self.model.weights)
        self.actors = [DenseRolloutWorker.remote(env_id, s) for s in worker_seeds]

    def step(self) -> tuple[int, float]:
        """One update: (steps, seconds)."""
        start = time.perf_counter()
        model_ref = ray.put(self.model)
        pending = [actor.compute_gradient.remote(model_ref) for actor in self.actors]
        steps = 0
        while pending:
            [ready], pending = ray.wait(pending)
            grad, _, n = ray.get(ready)
            steps += n
            for k in self.model.weights:
                self.grad_buffer[k] += grad[k]
        self.model.update(self.grad_buffer, self.rmsprop_cache)
        for g in self.grad_buffer.values():
            g.fill(0)
        return steps, time.perf_counter() - start
