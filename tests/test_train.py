from __future__ import annotations

import math
import time

import numpy as np
import pytest
import ray

from pong.checkpoint import Checkpoint
from pong.model import H, Model, SparseGrad, zeros_like_weights
from pong.train import Trainer
from pong.worker import Result, Turn, wait_turn

pytestmark = pytest.mark.ray


@ray.remote
class FixedWorker:
    """Returns the same made-up episode result every time (no env)."""

    def __init__(self, grad: SparseGrad, reward: float) -> None:
        self.result = Result(grad, reward, 100, None)

    def compute_gradient(self, model: Model, turn: Turn | None = None) -> Result:
        wait_turn(turn)
        return self.result


@ray.remote
class SleepingWorker:
    """Sleeps instead of playing a game, and keeps when each call ran."""

    def __init__(self, seconds: float = 0.3) -> None:
        self.seconds = seconds
        self.spans: list[tuple[float, float]] = []
        self.turns: list[tuple[int, int] | None] = []  # (games waited on, how many to finish)

    def compute_gradient(self, model: Model, turn: Turn | None = None) -> Result:
        self.turns.append(None if turn is None else (len(turn.ahead), turn.count))
        wait_turn(turn)  # as RolloutWorker does
        start = time.time()
        time.sleep(self.seconds)
        self.spans.append((start, time.time()))
        node = ray.get_runtime_context().get_node_id()
        return Result(_grad(0.0), -21.0, 100, None, node=node)

    def get_spans(self) -> list[tuple[float, float]]:
        return self.spans

    def get_turns(self) -> list[tuple[int, int] | None]:
        return self.turns

    def describe(self) -> dict[str, object]:
        return {"node_id": ray.get_runtime_context().get_node_id()}


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The largest number of (start, end) spans that overlap at one instant."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    count = best = 0
    for _, change in events:
        count += change
        best = max(best, count)
    return best


def _grad(value: float) -> SparseGrad:
    return SparseGrad(np.array([3, 70]), np.full((H, 2), value), np.full(H, value))


def test_a_non_finite_gradient_is_left_out_and_the_update_goes_on(local_ray) -> None:
    trainer = Trainer(2, "ALE/Pong-v5", seed=0)
    for actor in trainer.actors:
        ray.kill(actor)
    trainer.actors = [
        FixedWorker.remote(_grad(0.5), -21.0),
        FixedWorker.remote(_grad(np.nan), -19.0),
    ]
    before = {k: v.copy() for k, v in trainer.model.weights.items()}

    stats = trainer.step()

    assert stats.messages == [
        "warning: a worker returned a non-finite gradient; left out of this update"
    ]
    assert stats.rollouts == 2 and trainer.iteration == 1 and trainer.episodes == 2
    # Exactly one RMSProp step with the finite gradient alone.
    expected, cache = Model.from_weights(before), zeros_like_weights(before)
    buffer = zeros_like_weights(before)
    _grad(0.5).add_to(buffer)
    expected.update(buffer, cache)
    for k in before:
        np.testing.assert_array_equal(trainer.model.weights[k], expected.weights[k])
        assert np.isfinite(trainer.model.weights[k]).all()
    # Both episodes count for the running mean, in arrival order.
    assert trainer.running_reward in (-21.0 * 0.99 + -19.0 * 0.01, -19.0 * 0.99 + -21.0 * 0.01)


def test_a_node_runs_only_as_many_games_at_once_as_it_has_cpus(local_ray) -> None:
    trainer = Trainer(1, "PongToy/Catch-v0", seed=0)
    ray.kill(trainer.actors[0])
    trainer.actors = [SleepingWorker.remote() for _ in range(5)]
    ray.get([actor.get_spans.remote() for actor in trainer.actors])  # all five started
    first = trainer.step()  # where each worker runs is not known yet: all five at once
    second = trainer.step()  # now it is: two at a time on this 2-CPU node
    assert first.rollouts == second.rollouts == 5
    spans = ray.get([actor.get_spans.remote() for actor in trainer.actors])
    assert most_at_once([s[0] for s in spans]) == 5
    second_spans = [s[1] for s in spans]
    assert most_at_once(second_spans) == 2
    # Each later game starts as an earlier one ends (a CPU comes free), not after a pause.
    ends = [end for _, end in second_spans]
    for start, _ in sorted(second_spans)[2:]:
        assert any(0 <= start - end < 0.15 for end in ends)
    assert second.seconds >= 3 * 0.3  # 5 games, 2 at a time: three rounds
    assert second.wait + second.overhead <= second.seconds  # no phase is counted twice


def test_a_game_waits_on_at_most_2c_earlier_games_and_still_keeps_to_the_cpus(local_ray) -> None:
    trainer = Trainer(1, "PongToy/Catch-v0", seed=0)
    ray.kill(trainer.actors[0])
    trainer.actors = [SleepingWorker.remote(0.15) for _ in range(8)]
    trainer.placement()
    assert trainer.step().rollouts == 8
    turns = [t for [t] in ray.get([actor.get_turns.remote() for actor in trainer.actors])]
    # Games 3 to 8 on 2 CPUs: wait for 1, 2, 3 of the 2, 3, 4 before them, then 3 of the last 4.
    assert turns == [None, None, (2, 1), (3, 2), (4, 3), (4, 3), (4, 3), (4, 3)]
    spans = [s for [s] in ray.get([actor.get_spans.remote() for actor in trainer.actors])]
    assert most_at_once(spans) == 2
    ends = [end for _, end in spans]
    for start, _ in sorted(spans)[2:]:  # each later game starts as an earlier one ends
        assert any(0 <= start - end < 0.15 for end in ends)


def test_after_placement_even_the_first_update_keeps_to_the_cpus(local_ray) -> None:
    trainer = Trainer(1, "PongToy/Catch-v0", seed=0)
    ray.kill(trainer.actors[0])
    trainer.actors = [SleepingWorker.remote() for _ in range(4)]
    assert list(trainer.placement().values()) == [4]  # waits for all four to start
    assert trainer.step().rollouts == 4
    spans = ray.get([actor.get_spans.remote() for actor in trainer.actors])
    assert most_at_once([s[0] for s in spans]) == 2


def test_cpus_of_nodes_are_looked_up_once_each(local_ray, monkeypatch) -> None:
    trainer = Trainer(1, "PongToy/Catch-v0", seed=0)
    lookups = []
    nodes = ray.nodes
    monkeypatch.setattr(ray, "nodes", lambda: lookups.append(1) or nodes())
    here = ray.get_runtime_context().get_node_id()
    assert [trainer._cpus(here) for _ in range(3)] == [2, 2, 2]
    assert [trainer._cpus("a node that left") for _ in range(3)] == [math.inf] * 3
    assert len(lookups) == 2  # once for each node not seen before
    ray.kill(trainer.actors[0])


def test_a_resumed_trainer_starts_from_the_saved_state(local_ray) -> None:
    model = Model(seed=5)
    cache = {k: np.full_like(v, 0.25) for k, v in model.weights.items()}
    saved = Checkpoint(
        model.weights,
        cache,
        12,
        120,
        123_456,
        -19.75,
        -19.5,
        5,
        {"batch_size": 2, "env": "ALE/Pong-v5", "learning_rate": 1e-4, "decay_rate": 0.99},
    )
    trainer = Trainer(2, "ALE/Pong-v5", seed=5, resume=saved)
    state = trainer.checkpoint()
    for k in ("W1", "W2"):
        np.testing.assert_array_equal(state.weights[k], saved.weights[k])
        np.testing.assert_array_equal(state.rmsprop_cache[k], saved.rmsprop_cache[k])
    assert (state.iteration, state.episodes, state.steps) == (12, 120, 123_456)
    assert (state.running_reward, state.best_running_reward) == (-19.75, -19.5)
    assert state.settings == saved.settings
    for actor in trainer.actors:
        ray.kill(actor)
