"""Games: an update's games dealt to the workers as they finish (a local Ray, stand-ins and the
toy env)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import ray

from pong.core.model import H, Model, SparseGrad
from pong.core.train import Trainer
from pong.core.worker import Result
from pong.run.checkpoint import Checkpoint
from pong.run.config import Config, hyperparameters
from tests.helpers import TOY, with_workers

pytestmark = pytest.mark.ray


@ray.remote
class SleepingWorker:
    """Sleeps instead of playing a game, and keeps when each call ran."""

    def __init__(self, seconds: float = 0.3) -> None:
        self.seconds = seconds
        self.spans: list[tuple[float, float]] = []
        self.seeds: list[tuple[int, ...]] = []  # the spawn key of each game's seed

    def compute_gradient(self, model: Model, seed: np.random.SeedSequence) -> Result:
        self.seeds.append(seed.spawn_key)
        start = time.time()
        time.sleep(self.seconds)
        self.spans.append((start, time.time()))
        node = ray.get_runtime_context().get_node_id()
        return Result(_grad(0.0), -21.0, 100, None, node=node)

    def get_spans(self) -> list[tuple[float, float]]:
        return self.spans

    def get_seeds(self) -> list[tuple[int, ...]]:
        return self.seeds

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


def test_each_worker_gets_the_next_game_as_it_finishes_its_last(local_ray) -> None:
    trainer = with_workers(
        Trainer(**hyperparameters(TOY)), [SleepingWorker.remote() for _ in range(2)]
    )
    trainer.batch_size = 5
    update = trainer.step()
    assert update.rollouts == 5 and sorted(update.games) == [0, 1, 2, 3, 4]
    spans = [span for a in trainer.games.actors for span in ray.get(a.get_spans.remote())]
    assert len(spans) == 5 and most_at_once(spans) == 2 and update.seconds >= 3 * 0.3
    ends = [end for _, end in spans]
    for start, _ in sorted(spans)[2:]:  # each later game starts as an earlier one ends
        assert any(0 <= start - end < 0.15 for end in ends)
    # Every game of update 1 was seeded by its index, whichever worker played it.
    seeds = [key for a in trainer.games.actors for key in ray.get(a.get_seeds.remote())]
    assert sorted(seeds) == [(1, g) for g in range(5)]


def test_no_more_workers_than_cpus_nor_than_games(local_ray) -> None:
    assert len(Trainer(**hyperparameters(TOY)).games.actors) == 1  # a batch of 1
    big = Trainer(**hyperparameters(Config(batch_size=60, env=TOY.env, seed=0)))
    assert len(big.games.actors) == 2 and big.games.placement() == {
        ray.get_runtime_context().get_node_id(): 2
    }
    assert big.step().rollouts == 60


def _games(trainer: Trainer) -> tuple[dict[int, tuple[float, int]], dict[str, np.ndarray]]:
    """One update's games, by index (score, steps), and their summed gradient."""
    update = trainer.play()
    scores = zip(update.rewards, update.episode_steps, strict=True)
    played = dict(zip(update.games, scores, strict=True))
    return played, {k: v.copy() for k, v in trainer.grad_buffer.items()}


@pytest.mark.parametrize("workers", [1, 3])
def test_a_seed_plays_the_same_games_with_any_number_of_workers(local_ray, workers) -> None:
    config = Config(batch_size=6, env=TOY.env, seed=4)
    games, grad = _games(Trainer(**hyperparameters(config), workers=2))
    other_games, other_grad = _games(Trainer(**hyperparameters(config), workers=workers))
    assert other_games == games and sorted(games) == list(range(6))
    assert len({score for score, _ in games.values()}) > 1  # six different games, not one
    for k in grad:  # the same six gradients, summed in another order
        np.testing.assert_allclose(other_grad[k], grad[k], rtol=1e-12, atol=1e-15)


def test_a_resumed_run_plays_the_games_it_would_have_played(local_ray) -> None:
    config = Config(batch_size=3, env=TOY.env, seed=8)
    trainer = Trainer(**hyperparameters(config), workers=2)
    trainer.step()
    saved = trainer.state()
    saved = Checkpoint(
        {k: v.copy() for k, v in saved.weights.items()},
        {k: v.copy() for k, v in saved.rmsprop_cache.items()},
        saved.iteration, saved.episodes, saved.steps, saved.running_reward,
        saved.best_running_reward, config,
    )  # fmt: skip
    resumed = Trainer(**hyperparameters(config), state=saved, workers=1)
    games, grad = _games(trainer)
    resumed_games, resumed_grad = _games(resumed)
    assert resumed_games == games
    for k in grad:
        np.testing.assert_allclose(resumed_grad[k], grad[k], rtol=1e-12, atol=1e-15)


def test_a_lost_game_goes_to_the_next_worker_to_finish(local_ray) -> None:
    trainer = with_workers(
        Trainer(**hyperparameters(TOY)), [SleepingWorker.remote(0.2) for _ in range(2)]
    )
    games = trainer.games
    pending = games.start(1, 4, ray.put(trainer.model))
    lost = ray.exceptions.ActorUnavailableError("unreachable", None)
    ref, (i, game) = next(iter(pending.items()))
    assert games.resend(i, game, lost, busy=True) == {}  # another worker is playing
    assert games.notes[0].startswith(f"note: RolloutWorker {i} is unreachable")
    other = 1 - i
    assert [g for _, g in games.next(other).values()] == [game]  # the lost game comes first
    assert [g for _, g in games.next(other).values()] == [2]
