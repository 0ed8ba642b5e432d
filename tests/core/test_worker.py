from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import ray

from pong.core.model import D, H, Model
from pong.core.worker import RolloutWorker, game_seed
from pong.envs.make import env_maker

pytestmark = [pytest.mark.ray, pytest.mark.ale]

PONG = env_maker("ALE/Pong-v5")  # what each worker calls to make its env


def test_a_game_is_its_seed_s_whichever_worker_plays_it_after_whatever(joined_ray) -> None:
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
    assert -21 <= ra.score <= 21 and ra.steps > 100
    assert ra.score == rb.score and ra.steps == rb.steps
    for k in ("W1", "W2"):
        np.testing.assert_array_equal(ra.grad.dense()[k], rb.grad.dense()[k])


def pools_into(path: Path):
    """An env function that writes the BLAS thread pools of the process it runs in (the
    worker's, NumPy long loaded) to ``path``, then makes the toy."""

    def make():
        from threadpoolctl import threadpool_info

        path.write_text(json.dumps(threadpool_info()))
        return env_maker("PongToy/Catch-v0")()

    return make


def test_workers_run_numpy_s_blas_single_threaded_in_their_own_process(joined_ray, tmp_path):
    """The pool itself, as threadpoolctl reads it: one thread, by the OMP_NUM_THREADS that Ray
    sets before the worker loads NumPy. Set after NumPy loaded its BLAS (the 2016 program's
    way), a variable would be there and the pool as large as ever. A process told 2 threads
    shows 2, so the check sees what the variables do."""
    info = ray.get(RolloutWorker.remote(pools_into(tmp_path / "pools.json")).describe.remote())
    assert info["pid"] != os.getpid()
    pools = json.loads((tmp_path / "pools.json").read_text())
    assert blas_threads(pools) == [1], pools
    two = {"env_vars": {"OPENBLAS_NUM_THREADS": "2"}}  # as a user's shell might say
    assert blas_threads(ray.get(blas_pools.options(runtime_env=two).remote())) == [2]


def blas_threads(pools: list[dict]) -> list[int]:
    return [p["num_threads"] for p in pools if p["user_api"] == "blas"]


@ray.remote(num_cpus=0)
def blas_pools() -> list[dict]:
    """threadpoolctl's view of this process's pools, NumPy loaded."""
    import numpy  # noqa: F401  (its BLAS, with the pool the environment asked for)
    from threadpoolctl import threadpool_info

    return threadpool_info()
