"""The original example's way, for side-by-side timing (not used in training).

``OriginalLoop`` is the driver loop of Ray's 2017 Pong example: put the model,
start every game at once, add each gradient as it arrives, RMSProp. Run with
``DenseRolloutWorker`` it is the original's way of computing: dense float64
inputs and hidden states (``play_game_dense``), the dense backward pass, the full
(200 x 6400) float64 gradient sent back, ``MKL_NUM_THREADS`` set in the actor
after NumPy is loaded (too late, as the original did), a row-major ``W1``. Run
with our ``RolloutWorker`` it is the ablation "one worker per game": our
workers, one per batch slot as in Ray's example, instead of one per CPU with the
games dealt as they finish. Every way plays the games ``Trainer`` plays: game
``g`` of update ``u`` is seeded by ``pong.core.worker.game_seed(seed, u, g)``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import ray

from pong.core.model import Model, zeros_like_weights
from pong.core.reference import game_gradient_dense, play_game_dense
from pong.core.worker import Result, game_randomness, game_seed
from pong.envs.make import env_maker


class DenseGrad(NamedTuple):
    """A full gradient, ``{"W1": (H, D), "W2": (H,)}``, added up as the original did."""

    grad: dict[str, np.ndarray]

    def add_to(self, grad_buffer: dict[str, np.ndarray]) -> None:
        for k, g in self.grad.items():
            grad_buffer[k] += g


@ray.remote
class DenseRolloutWorker:
    def __init__(self, make_env: Callable[[], gym.Env]) -> None:
        os.environ["MKL_NUM_THREADS"] = "1"  # as the original did: too late to take effect
        self.env = make_env()

    def compute_gradient(self, model: Model, seed: np.random.SeedSequence) -> Result:
        rng, reset_seed = game_randomness(seed)  # as RolloutWorker seeds a game
        game = play_game_dense(model, self.env, rng, reset_seed)
        grad, note = game_gradient_dense(model, game)
        return Result(DenseGrad(grad), float(game.epr.sum()), len(game.epr), note)

    def describe(self) -> dict[str, object]:
        return {"pid": os.getpid()}


class OriginalLoop:
    """The original example's driver loop over ``worker`` actors, seeded as ``Trainer`` seeds."""

    def __init__(self, worker: type, batch_size: int, env_id: str, seed: int) -> None:
        (model_seed,) = np.random.SeedSequence(seed).spawn(1)
        self.model, self.seed, self.updates = Model(model_seed), seed, 0
        if worker is DenseRolloutWorker:  # the original's layout
            self.model.weights["W1"] = np.ascontiguousarray(self.model.weights["W1"])
        self.grad_buffer = zeros_like_weights(self.model.weights)
        self.rmsprop_cache = zeros_like_weights(self.model.weights)
        # Holding no CPU, as the original's actors did while they ran (they declared none,
        # which Ray counts as 1 CPU to place and 0 to run): one per game, all at once.
        self.actors = [
            worker.options(num_cpus=0).remote(env_maker(env_id)) for _ in range(batch_size)
        ]

    def step(self) -> tuple[int, float]:
        """One update: (steps, seconds)."""
        start = time.perf_counter()
        model_ref = ray.put(self.model)
        self.updates += 1
        pending = [
            actor.compute_gradient.remote(model_ref, game_seed(self.seed, self.updates, g))
            for g, actor in enumerate(self.actors)
        ]
        steps = 0
        while pending:
            [ready], pending = ray.wait(pending)
            result = ray.get(ready)
            steps += result.steps
            result.grad.add_to(self.grad_buffer)
        self.model.rmsprop(self.grad_buffer, self.rmsprop_cache, 1e-4, 0.99)
        for g in self.grad_buffer.values():
            g.fill(0)
        return steps, time.perf_counter() - start
