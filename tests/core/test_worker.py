from __future__ import annotations

import os

import numpy as np
import pytest
import ray

from pong.core.model import D, H, Model
from pong.core.worker import THREAD_ENV_VARS, RolloutWorker, game_seed
from pong.envs.make import env_maker

pytestmark = [pytest.mark.ray, pytest.mark.ale]

PONG = env_maker("ALE/Pong-v5")  # what each worker calls to make its env


def test_a_game_is_its_seed_s_whichever_worker_plays_it_after_whatever(local_ray) -> None:
    model_ref = ray.put(Model(seed=0))
    a, b = RolloutWorker.remote(PONG), RolloutWorker.remote(PONG)
    ray.get(b.compute_gradient.remote(model_ref, game_seed(11, 1, 0)))  # b has played another
    seed = game_seed(11, 1, 1)
    ra, rb = ray.get(
        [a.compute_gradient.remote(model_ref, seed), b.compute_gradient.remote(model_ref, seed)]
    )
    assert ra.grad.dense()["W1"].shape == (H, D) and ra.grad.W2.shape == (H,)
    assert ra.grad.is_finite()
    assert np.any(ra.grad.W1_columns) and ra.note is None
    assert -21 <= ra.reward <= 21 and ra.steps > 100
    assert ra.reward == rb.reward and ra.steps == rb.steps
    for k in ("W1", "W2"):
        np.testing.assert_array_equal(ra.grad.dense()[k], rb.grad.dense()[k])


def test_workers_run_numpy_single_threaded_in_their_own_process(local_ray) -> None:
    info = ray.get(RolloutWorker.remote(PONG).describe.remote())
    assert info["pid"] != os.getpid()
    assert info["thread_env"] == THREAD_ENV_VARS
