"""The original example's way, for side-by-side timing (not used in training).

``OriginalLoop`` is the driver loop of Ray's 2017 Pong example: put the model,
start every game at once, add each gradient as it arrives, RMSProp. Run with
``DenseRolloutWorker`` it is the original's way of computing: dense float64
inputs and hidden states (``rollout_dense``), the dense backward pass, the full
(200 x 6400) float64 gradient sent back, ``MKL_NUM_THREADS`` set in the actor
after NumPy is loaded (too late, as the original did), a row-major ``W1``. Run
with our ``RolloutWorker`` it is the ablation "ours, every game at once": our
workers, without the trainer's keeping each node to its CPUs.
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple

import numpy as np
import ray

from pong.env import make_env
from pong.model import Model, zeros_like_weights
from pong.rollout import episode_gradient_dense, rollout_dense
from pong.worker import Result


class DenseGrad(NamedTuple):
    """A full gradient, ``{"W1": (H, D), "W2": (H,)}``, added up as the original did."""

    grad: dict[str, np.ndarray]

    def add_to(self, grad_buffer: dict[str, np.ndarray]) -> None:
        for k, g in self.grad.items():
            grad_buffer[k] += g


@ray.remote
class DenseRolloutWorker:
    def __init__(self, env_id: str, seed: np.random.SeedSequence) -> None:
        os.environ["MKL_NUM_THREADS"] = "1"  # as the original did: too late to take effect
        self.env = make_env(env_id)
        actions_seed, env_seed = seed.spawn(2)
        self.rng = np.random.default_rng(actions_seed)
        self.reset_seed = int(env_seed.generate_state(1)[0])

    def compute_gradient(self, model: Model) -> Result:
        episode = rollout_dense(model, self.env, self.rng, seed=self.reset_seed)
        self.reset_seed = None
        grad, note = episode_gradient_dense(model, episode)
        return Result(DenseGrad(grad), float(episode.epr.sum()), len(episode.epr), note)


class OriginalLoop:
    """The original example's driver loop over ``worker`` actors, seeded as ``Trainer`` seeds."""

    def __init__(self, worker: type, batch_size: int, env_id: str, seed: int) -> None:
        model_seed, *worker_seeds = np.random.SeedSequence(seed).spawn(1 + batch_size)
        self.model = Model(model_seed)
        if worker is DenseRolloutWorker:  # the original's layout
            self.model.weights["W1"] = np.ascontiguousarray(self.model.weights["W1"])
        self.grad_buffer = zeros_like_weights(self.model.weights)
        self.rmsprop_cache = zeros_like_weights(self.model.weights)
        self.actors = [worker.remote(env_id, s) for s in worker_seeds]

    def step(self) -> tuple[int, float]:
        """One update: (steps, seconds)."""
        start = time.perf_counter()
        model_ref = ray.put(self.model)
        pending = [actor.compute_gradient.remote(model_ref) for actor in self.actors]
        steps = 0
        while pending:
            [ready], pending = ray.wait(pending)
            result = ray.get(ready)
            steps += result.steps
            result.grad.add_to(self.grad_buffer)
        self.model.update(self.grad_buffer, self.rmsprop_cache, 1e-4, 0.99)
        for g in self.grad_buffer.values():
            g.fill(0)
        return steps, time.perf_counter() - start
