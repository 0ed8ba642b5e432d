from __future__ import annotations

import numpy as np
import pytest
import ray

from pong.checkpoint import Checkpoint
from pong.config import Config
from pong.model import H, Model, SparseGrad, zeros_like_weights
from pong.train import NonFiniteError, Trainer
from pong.worker import Result
from tests.helpers import with_workers

pytestmark = pytest.mark.ray


@ray.remote
class FixedWorker:
    """Returns the same made-up episode result every time (no env)."""

    def __init__(self, grad: SparseGrad, reward: float) -> None:
        self.result = Result(grad, reward, 100, None)

    def compute_gradient(self, model: Model, seed: np.random.SeedSequence) -> Result:
        return self.result

    def describe(self) -> dict[str, object]:
        return {"node_id": ray.get_runtime_context().get_node_id()}


def _grad(value: float) -> SparseGrad:
    return SparseGrad(np.array([3, 70]), np.full((H, 2), value), np.full(H, value))


def test_a_non_finite_gradient_is_left_out_and_the_update_goes_on(local_ray) -> None:
    trainer = Trainer(Config(batch_size=2, env="PongToy/Catch-v0", seed=0))
    workers = [FixedWorker.remote(_grad(0.5), -21.0), FixedWorker.remote(_grad(np.nan), -19.0)]
    with_workers(trainer, workers)
    before = {k: v.copy() for k, v in trainer.model.weights.items()}

    update = trainer.step()

    assert update.messages == [
        "warning: a worker returned a non-finite gradient; left out of this update"
    ]
    assert update.rollouts == 2 and trainer.iteration == 1 and trainer.episodes == 2
    # Exactly one RMSProp step with the finite gradient alone.
    expected, cache = Model.from_weights(before), zeros_like_weights(before)
    buffer = zeros_like_weights(before)
    _grad(0.5).add_to(buffer)
    expected.update(buffer, cache, 1e-4, 0.99)
    for k in before:
        np.testing.assert_array_equal(trainer.model.weights[k], expected.weights[k])
        assert np.isfinite(trainer.model.weights[k]).all()
    # Both episodes count for the running mean, in arrival order.
    assert trainer.running_reward in (-21.0 * 0.99 + -19.0 * 0.01, -19.0 * 0.99 + -21.0 * 0.01)


def test_a_resumed_trainer_starts_from_the_saved_state(local_ray) -> None:
    model = Model(seed=5)
    cache = {k: np.full_like(v, 0.25) for k, v in model.weights.items()}
    config = Config(batch_size=2, env="PongToy/Catch-v0", seed=5)
    saved = Checkpoint(model.weights, cache, 12, 120, 123_456, -19.75, -19.5, config)
    trainer = Trainer(config, resume=saved)
    state = trainer.checkpoint()
    for k in ("W1", "W2"):
        np.testing.assert_array_equal(state.weights[k], saved.weights[k])
        np.testing.assert_array_equal(state.rmsprop_cache[k], saved.rmsprop_cache[k])
    assert (state.iteration, state.episodes, state.steps) == (12, 120, 123_456)
    assert (state.running_reward, state.best_running_reward) == (-19.75, -19.5)
    assert state.config == config
    for actor in trainer.games.actors:
        ray.kill(actor)


def test_an_update_with_no_finite_gradient_stops_and_changes_nothing(local_ray) -> None:
    trainer = Trainer(Config(batch_size=2, env="PongToy/Catch-v0", seed=0))
    bad = [FixedWorker.remote(_grad(np.nan), -21.0), FixedWorker.remote(_grad(np.inf), -21.0)]
    with_workers(trainer, bad)
    before = {k: v.copy() for k, v in trainer.model.weights.items()}
    with pytest.raises(NonFiniteError, match="update 1 not applied: no game of the batch gave"):
        trainer.step()
    assert (trainer.iteration, trainer.episodes, trainer.running_reward) == (0, 0, None)
    for k in before:
        np.testing.assert_array_equal(trainer.model.weights[k], before[k])
