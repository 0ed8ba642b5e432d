from __future__ import annotations

import numpy as np
import pytest
import ray

from pong.core.model import D, H, Model, zeros_like_weights
from pong.core.rollout import SparseGrad
from pong.core.train import NonFiniteError, Trainer, Update
from pong.core.worker import Result
from pong.run.checkpoint import Checkpoint, decode, encode
from pong.run.config import Config, hyperparameters
from tests.helpers import release, with_workers

TOY = Config(batch_size=7, env="PongToy/Catch-v0", seed=11, learning_rate=1e-2)


def _results(games: int) -> list[Result]:
    """Made-up results whose sums depend on their order: values of wildly different sizes."""
    rng = np.random.default_rng(3)
    results = []
    for g in range(games):
        columns = np.sort(rng.choice(D, 5, replace=False))
        scale = 10.0 ** rng.integers(-12, 12, size=(H, 1))
        W1 = rng.standard_normal((H, 5)) * scale
        W2 = rng.standard_normal(H) * scale[:, 0]
        results.append(
            Result(SparseGrad(columns, W1, W2), float(rng.integers(-21, 22)), 100 + g, None)
        )
    return results


def test_results_are_added_in_game_order_whatever_order_they_arrive_in() -> None:
    results = _results(12)
    # The independent computation: a plain loop over the games in order.
    expected = zeros_like_weights(Model(seed=0).weights)
    running = -20.0
    for result in results:
        result.grad.add_to(expected)
        running = running * 0.99 + result.score * 0.01
    rng = np.random.default_rng(0)
    differs = False
    for _ in range(6):
        order = rng.permutation(12)
        update, buffer = Update(1, -20.0), zeros_like_weights(expected)
        arrival = zeros_like_weights(expected)
        for g in order:
            update.add(int(g), results[g], buffer)
            results[g].grad.add_to(arrival)  # what adding as they arrive would give
        for k in expected:
            assert buffer[k].tobytes() == expected[k].tobytes()
            differs |= arrival[k].tobytes() != expected[k].tobytes()
        assert update.running_mean == running and not update.held
        assert update.scores == [r.score for r in results]
        assert update.game_steps == [r.steps for r in results]
        assert update.games == 12
    assert differs  # the order matters to these numbers, so the test can fail


def _train(updates: int, workers: int, resume: Checkpoint | None = None):
    """What ``updates`` updates of the toy leave: the checkpoint's bytes and each game."""
    trainer = Trainer(**hyperparameters(TOY), state=resume, workers=workers)
    games = []
    for _ in range(updates):
        update = trainer.update()
        games.append((update.number, update.scores, update.game_steps))
        games.append(update.running_mean)
    release(trainer)
    return encode(Checkpoint.of(trainer.state(), TOY)), games


@pytest.mark.ray
def test_one_two_or_three_workers_and_a_resume_give_the_same_bytes(joined_ray) -> None:
    """On the shared Ray's 3 CPUs, so that each worker has one."""
    state, games = _train(2, workers=1)
    for workers in (2, 3):
        assert _train(2, workers) == (state, games), f"{workers} workers"
    first, first_games = _train(1, workers=2)
    resumed, resumed_games = _train(1, workers=3, resume=decode(first, "update 1"))
    assert resumed == state and first_games + resumed_games == games


@ray.remote(num_cpus=1)  # as RolloutWorker
class FixedWorker:
    """Returns the same made-up game result every time (no env)."""

    def __init__(self, grad: SparseGrad, score: float) -> None:
        self.result = Result(grad, score, 100, None)

    def compute_gradient(self, model: Model, seed: np.random.SeedSequence, copy=None) -> Result:
        return self.result

    def describe(self) -> dict[str, object]:
        return {"node_id": ray.get_runtime_context().get_node_id(), "restarted": False}


def _grad(value: float) -> SparseGrad:
    return SparseGrad(np.array([3, 70]), np.full((H, 2), value), np.full(H, value))


@pytest.mark.ray
def test_a_non_finite_gradient_is_left_out_and_the_update_goes_on(joined_ray) -> None:
    trainer = Trainer(**hyperparameters(Config(batch_size=2, env="PongToy/Catch-v0", seed=0)))
    workers = [FixedWorker.remote(_grad(0.5), -21.0), FixedWorker.remote(_grad(np.nan), -19.0)]
    with_workers(trainer, workers)
    before = {k: v.copy() for k, v in trainer.model.weights.items()}

    update = trainer.update()

    assert update.notes == [
        "warning: a worker returned a non-finite gradient; left out of this update"
    ]
    assert update.games == 2 and trainer.updates == 1 and trainer.games == 2
    # Exactly one RMSProp step with the finite gradient alone.
    expected, cache = Model.from_weights(before), zeros_like_weights(before)
    buffer = zeros_like_weights(before)
    _grad(0.5).add_to(buffer)
    expected.rmsprop(buffer, cache, 1e-4, 0.99)
    for k in before:
        np.testing.assert_array_equal(trainer.model.weights[k], expected.weights[k])
        assert np.isfinite(trainer.model.weights[k]).all()
    # Both games count for the running mean, in game order.
    assert trainer.running_mean == -21.0 * 0.99 + -19.0 * 0.01
    release(trainer)


@pytest.mark.ray
def test_a_resumed_trainer_starts_from_the_saved_state(joined_ray) -> None:
    model = Model(seed=5)
    cache = {k: np.full_like(v, 0.25) for k, v in model.weights.items()}
    config = Config(batch_size=2, env="PongToy/Catch-v0", seed=5)
    saved = Checkpoint(model.weights, cache, 12, 120, 123_456, -19.75, -19.5, config)
    trainer = Trainer(**hyperparameters(config), state=saved)
    state = trainer.state()
    for k in ("W1", "W2"):
        np.testing.assert_array_equal(state.weights[k], saved.weights[k])
        np.testing.assert_array_equal(state.rmsprop_cache[k], saved.rmsprop_cache[k])
    assert (state.updates, state.games, state.steps) == (12, 120, 123_456)
    assert (state.running_mean, state.best_running_mean) == (-19.75, -19.5)
    trainer.update()  # a state taken before an update still holds that update's weights
    for k in ("W1", "W2"):
        np.testing.assert_array_equal(state.weights[k], saved.weights[k])
        np.testing.assert_array_equal(state.rmsprop_cache[k], saved.rmsprop_cache[k])
    assert not np.array_equal(trainer.state().weights["W2"], saved.weights["W2"])
    release(trainer)


@pytest.mark.ray
def test_an_update_with_no_finite_gradient_stops_and_changes_nothing(joined_ray) -> None:
    trainer = Trainer(**hyperparameters(Config(batch_size=2, env="PongToy/Catch-v0", seed=0)))
    bad = [FixedWorker.remote(_grad(np.nan), -21.0), FixedWorker.remote(_grad(np.inf), -21.0)]
    with_workers(trainer, bad)
    before = {k: v.copy() for k, v in trainer.model.weights.items()}
    with pytest.raises(NonFiniteError, match="update 1 not applied: no game of the update gave"):
        trainer.update()
    assert (trainer.updates, trainer.games, trainer.running_mean) == (0, 0, None)
    for k in before:
        np.testing.assert_array_equal(trainer.model.weights[k], before[k])
    release(trainer)
