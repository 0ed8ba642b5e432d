"""Games: an update's calls, at most a node's CPUs at a time (a local Ray, stand-in workers)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import ray

from pong.model import H, Model, SparseGrad
from pong.train import Trainer
from pong.worker import Result, Turn, wait_turn
from tests.helpers import TOY, with_workers

pytestmark = pytest.mark.ray


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


def test_a_node_runs_only_as_many_games_at_once_as_it_has_cpus(local_ray) -> None:
    trainer = with_workers(Trainer(TOY), [SleepingWorker.remote() for _ in range(5)])
    update = trainer.step()  # the first update too: Games learned each worker's node
    assert update.rollouts == 5 and update.seconds >= 3 * 0.3  # 2 at a time: three rounds
    spans = [s for [s] in ray.get([a.get_spans.remote() for a in trainer.games.actors])]
    assert most_at_once(spans) == 2
    # Each later game starts as an earlier one ends (a CPU comes free), not after a pause.
    ends = [end for _, end in spans]
    for start, _ in sorted(spans)[2:]:
        assert any(0 <= start - end < 0.15 for end in ends)


def test_a_game_waits_on_at_most_2c_earlier_games_and_still_keeps_to_the_cpus(local_ray) -> None:
    trainer = with_workers(Trainer(TOY), [SleepingWorker.remote(0.15) for _ in range(8)])
    assert list(trainer.games.placement().values()) == [8]
    assert trainer.step().rollouts == 8
    actors = trainer.games.actors
    turns = [t for [t] in ray.get([actor.get_turns.remote() for actor in actors])]
    # Games 3 to 8 on 2 CPUs: wait for 1, 2, 3 of the 2, 3, 4 before them, then 3 of the last 4.
    assert turns == [None, None, (2, 1), (3, 2), (4, 3), (4, 3), (4, 3), (4, 3)]
    spans = [s for [s] in ray.get([actor.get_spans.remote() for actor in actors])]
    assert most_at_once(spans) == 2
    ends = [end for _, end in spans]
    for start, _ in sorted(spans)[2:]:  # each later game starts as an earlier one ends
        assert any(0 <= start - end < 0.15 for end in ends)


def test_cpus_of_nodes_are_looked_up_once_each(local_ray, monkeypatch) -> None:
    games = Trainer(TOY).games
    lookups = []
    nodes = ray.nodes
    monkeypatch.setattr(ray, "nodes", lambda: lookups.append(1) or nodes())
    here = ray.get_runtime_context().get_node_id()
    assert [games.cpus(here) for _ in range(3)] == [2, 2, 2]
    assert [games.cpus("a node that left") for _ in range(3)] == [math.inf] * 3
    assert len(lookups) == 2  # once for each node not seen before
    ray.kill(games.actors[0])
