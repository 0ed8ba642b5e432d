"""Dealer: an update's games dealt to the workers as they finish (a local Ray, stand-ins and the
toy env)."""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import numpy as np
import pytest
import ray

from pong.core.model import H, Model
from pong.core.rollout import SparseGrad
from pong.core.schedule import Dealer, WorkerError
from pong.core.train import Trainer
from pong.core.worker import Result, RolloutWorker
from pong.run.checkpoint import Checkpoint
from pong.run.config import Config, hyperparameters
from tests.helpers import TOY, release, with_workers

pytestmark = pytest.mark.ray


class Sleeper:
    """Sleeps instead of playing a game, and keeps when each call ran."""

    def __init__(self, seconds: float = 0.3) -> None:
        self.seconds = seconds
        self.spans: list[tuple[float, float]] = []
        self.seeds: list[tuple[int, ...]] = []  # the spawn key of each game's seed

    def compute_gradient(self, model: Model, seed: np.random.SeedSequence, copy=None) -> Result:
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
        return {"node_id": ray.get_runtime_context().get_node_id(), "restarted": False}

    def abandon(self, copy: int) -> None:
        """A stand-in plays its game to the end (RolloutWorker stops it)."""


SleepingWorker = ray.remote(num_cpus=1)(Sleeper)  # one CPU each, as RolloutWorker


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


class _Held(Sleeper):
    """A stand-in that notes each game's start as a file in ``notes``; with ``hold``, its first
    game ends only once three games have started (or after a minute)."""

    def __init__(self, notes: str, hold: bool) -> None:
        super().__init__()
        self.notes, self.hold = Path(notes), hold

    def compute_gradient(self, model: Model, seed: np.random.SeedSequence, copy=None) -> Result:
        (self.notes / f"{os.getpid()}-{len(self.spans)}").touch()
        deadline = time.monotonic() + 300  # a bound, not a wait
        while self.hold and not self.spans and len(list(self.notes.iterdir())) < 3:
            assert time.monotonic() < deadline, "no other game started"
            time.sleep(0.01)
        return super().compute_gradient(model, seed, copy)


def test_each_worker_gets_the_next_game_as_it_finishes_its_last(joined_ray, tmp_path) -> None:
    """Worker 1's first game lasts until a third game has started: worker 0 is dealt its next
    game on finishing its first, not once both have (a sign, not a time, so a busy machine
    passes too)."""
    held = ray.remote(num_cpus=1)(_Held)
    workers = [held.remote(str(tmp_path), hold) for hold in (False, True)]
    trainer = with_workers(Trainer(**hyperparameters(TOY)), workers)
    trainer.batch_size = 5
    update = trainer.update()
    assert update.games == 5
    free, waited = (ray.get(a.get_spans.remote()) for a in workers)
    assert len(free) >= 2 and free[1][0] < waited[0][1]  # 2nd game started before the 1st ended
    assert most_at_once(free + waited) == 2
    # Every game of update 1 was seeded by its index, whichever worker played it (a backup of
    # a game is a second copy of its seed).
    seeds = {key for a in workers for key in ray.get(a.get_seeds.remote())}
    assert seeds == {(1, g) for g in range(5)}
    release(trainer)  # their CPUs, for the next test's workers


def test_no_more_workers_than_cpus_nor_than_games(joined_ray) -> None:
    small = Trainer(**hyperparameters(TOY))
    assert len(small.dealer.workers) == 1  # a batch of 1
    release(small)
    big = Trainer(**hyperparameters(Config(batch_size=60, env=TOY.env, seed=0)))
    assert len(big.dealer.workers) == 3
    # all three up, however long a busy machine takes to start them (the trainer waits 30 s)
    ray.get([worker.describe.remote() for worker in big.dealer.workers], timeout=300)
    assert big.update().games == 60
    assert list(big.dealer.up_by_node().values()) == [3]
    release(big)


def _games(trainer: Trainer) -> tuple[dict[int, tuple[float, int]], dict[str, np.ndarray]]:
    """One update's games, by index (score, steps), and their summed gradient."""
    update = trainer.play()
    scores = zip(update.scores, update.game_steps, strict=True)
    return dict(enumerate(scores)), {k: v.copy() for k, v in trainer.grad_buffer.items()}


@pytest.mark.parametrize("workers", [1, 4])
def test_a_seed_plays_the_same_games_with_any_number_of_workers(joined_ray, workers) -> None:
    config = Config(batch_size=6, env=TOY.env, seed=4)
    first = Trainer(**hyperparameters(config), workers=2)
    games, grad = _games(first)
    release(first)  # four workers on three CPUs: the fourth waits, and is not needed
    other = Trainer(**hyperparameters(config), workers=workers)
    other_games, other_grad = _games(other)
    release(other)
    assert other_games == games and sorted(games) == list(range(6))
    assert len({score for score, _ in games.values()}) > 1  # six different games, not one
    for k in grad:  # the same six gradients, summed in another order
        np.testing.assert_allclose(other_grad[k], grad[k], rtol=1e-12, atol=1e-15)


def test_a_resumed_run_plays_the_games_it_would_have_played(joined_ray) -> None:
    config = Config(batch_size=3, env=TOY.env, seed=8)
    trainer = Trainer(**hyperparameters(config), workers=2)
    trainer.update()
    saved = trainer.state()
    saved = Checkpoint(
        {k: v.copy() for k, v in saved.weights.items()},
        {k: v.copy() for k, v in saved.rmsprop_cache.items()},
        saved.updates, saved.games, saved.steps, saved.running_mean,
        saved.best_running_mean, config,
    )  # fmt: skip
    games, grad = _games(trainer)
    release(trainer)
    resumed = Trainer(**hyperparameters(config), state=saved, workers=1)
    resumed_games, resumed_grad = _games(resumed)
    release(resumed)
    assert resumed_games == games
    for k in grad:
        np.testing.assert_allclose(resumed_grad[k], grad[k], rtol=1e-12, atol=1e-15)


@ray.remote(num_cpus=1, max_restarts=1, max_task_retries=0)
class CrashingWorker(Sleeper):
    """Its process dies the first time any of its kind plays game ``crash`` of update 1."""

    def __init__(self, marker: str, crash: int) -> None:
        super().__init__(1.0)  # the crash is seen well before game 1 would get a backup
        self.marker, self.crash = Path(marker), crash

    def compute_gradient(self, model: Model, seed: np.random.SeedSequence, copy=None) -> Result:
        if seed.spawn_key == (1, self.crash) and not self.marker.exists():
            self.marker.touch()
            os._exit(1)
        return super().compute_gradient(model, seed, copy)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "restarted": self.marker.exists()}


def test_a_lost_game_goes_to_the_next_worker_free_and_its_worker_comes_back(
    joined_ray, tmp_path
) -> None:
    marker = tmp_path / "crashed"
    trainer = Trainer(**hyperparameters(TOY))
    workers = [CrashingWorker.remote(str(marker), crash=1) for _ in range(2)]
    with_workers(trainer, workers)
    trainer.batch_size = 4
    updates, deadline = [trainer.update()], time.monotonic() + 300  # a bound, not a wait
    assert marker.exists()  # a worker died mid-game
    back = " is up again (Ray restarted it) on node "
    while not any(back in n for u in updates for n in u.notes) and time.monotonic() < deadline:
        updates.append(trainer.update())  # the restart takes what it takes on a busy machine
    assert all(u.games == 4 for u in updates)  # yet every game was added
    notes = [n for u in updates for n in u.notes]
    assert any(" was lost (its process or node); game 1 goes to the next" in n for n in notes), (
        notes
    )
    assert any(back in n for n in notes), notes
    last = trainer.update()
    assert sum(last.nodes.values()) == 4 and len(trainer.dealer.up()) == 2
    release(trainer)


def test_a_worker_gone_for_good_leaves_its_games_to_the_others(joined_ray) -> None:
    trainer = Trainer(**hyperparameters(TOY))
    workers = [SleepingWorker.options(max_restarts=0).remote(0.05) for _ in range(2)]
    with_workers(trainer, workers)
    trainer.batch_size = 3
    trainer.update()
    ray.kill(workers[0], no_restart=True)
    update = trainer.update()
    assert update.games == 3
    assert any("RolloutWorker 0 is gone for good" in n for n in update.notes), update.notes
    ray.kill(workers[1], no_restart=True)
    with pytest.raises(WorkerError, match="every RolloutWorker is gone"):
        trainer.update()
    assert trainer.updates == 2  # the failed update is not counted


def test_workers_ray_cannot_place_yet_wait_and_join_with_the_same_bytes(joined_ray) -> None:
    """Four workers on three CPUs: the fourth waits, and plays once a CPU is free."""
    config = Config(batch_size=4, env=TOY.env, seed=5)
    trainer = Trainer(**hyperparameters(config), workers=4)
    dealer = trainer.dealer
    assert len(dealer.up()) == 3 and dealer.waiting() == 1
    trainer.update()
    [waiting] = dealer.workers_in("waiting")  # Ray chose which waits
    killed = dealer.up()[0]
    ray.kill(dealer.workers[killed], no_restart=True)  # its CPU goes to the one waiting
    notes, deadline = [], time.monotonic() + 300
    while dealer.status[waiting] == "waiting" and time.monotonic() < deadline:  # in a second
        notes += trainer.update().notes
    notes += trainer.update().notes  # and then plays
    release(trainer)
    assert any(f"RolloutWorker {waiting} is up on node" in n for n in notes), notes
    assert any(f"RolloutWorker {killed} is gone for good" in n for n in notes), notes
    alone = Trainer(**hyperparameters(config), workers=1)
    for _ in range(trainer.updates):
        alone.update()
    release(alone)
    for k, v in alone.model.weights.items():
        assert v.tobytes() == trainer.model.weights[k].tobytes()


class _Slow(RolloutWorker.__ray_actor_class__):
    """A RolloutWorker that waits ``delay`` seconds before each game, as one on a slow node
    waits for the model; it counts the games it was told to stop."""

    def __init__(self, make_env, delay: float) -> None:
        super().__init__(make_env)
        self.delay, self.stops = delay, 0

    def compute_gradient(self, model, seed, copy=None):
        time.sleep(self.delay)
        return super().compute_gradient(model, seed, copy)

    @ray.method(concurrency_group="control")
    def abandon(self, copy: int) -> None:
        self.stops += 1
        super().abandon(copy)

    @ray.method(concurrency_group="control")
    def told_to_stop(self) -> int:
        return self.stops


SlowWorker = ray.remote(num_cpus=1, concurrency_groups={"control": 1})(_Slow)


def test_a_slow_worker_never_holds_the_update_back_and_the_bytes_stay(joined_ray) -> None:
    """Worker 0 takes 3 s more for every game, worker 1 none: worker 1 plays a backup of each
    game worker 0 holds, its answer is added, and worker 0's copy is given up. The weights are
    those of one worker alone."""
    config = Config(batch_size=3, env=TOY.env, seed=6)
    make_env = hyperparameters(config)["make_env"]
    trainer = Trainer(**hyperparameters(config), workers=1)
    with_workers(trainer, [SlowWorker.remote(make_env, d) for d in (3.0, 0.0)])
    updates = [trainer.update() for _ in range(3)]
    slow = trainer.dealer.workers[0]
    assert all(u.seconds < 3.0 for u in updates), [u.seconds for u in updates]
    assert sum(sum(u.nodes.values()) for u in updates) == 9
    stops = ray.get(slow.told_to_stop.remote(), timeout=30)
    release(trainer)
    alone = Trainer(**hyperparameters(config), workers=1)
    for _ in range(3):
        alone.update()
    release(alone)
    assert stops >= 2  # its copies were told to stop (the toy's games end before they check)
    for k, v in alone.model.weights.items():
        assert v.tobytes() == trainer.model.weights[k].tobytes()


def test_with_no_worker_up_the_wait_is_said_and_bounded(joined_ray) -> None:
    """A worker that needs more CPUs than the cluster has is never placed: the wait is said at
    once, and ``wait_for_workers`` ends it."""
    said: list[str] = []
    trainer = Trainer(**hyperparameters(TOY))
    release(trainer)
    trainer.dealer = Dealer([SleepingWorker.options(num_cpus=64).remote()], 0, expect=0,
                            say=said.append, wait_for_workers=1.0)  # fmt: skip
    started = time.monotonic()
    with pytest.raises(WorkerError, match=r"no RolloutWorker was up for 1 s \(1 waiting; "):
        trainer.update()
    assert 1.0 <= time.monotonic() - started < 10
    assert (
        said == [f"note: no RolloutWorker is up (1 waiting; {said[0].split('waiting; ')[1]}"]
        and "CPUs in the cluster free); waiting for Ray to place or restart one" in said[0]
    ), said
    ray.kill(trainer.dealer.workers[0])


def test_a_stale_game_is_never_counted_in_the_next_update(joined_ray) -> None:
    """An update stopped mid-way (a Ctrl-C in a notebook) leaves a game in flight: the next
    update drops its answer and plays its own games, as a trainer that never stopped."""
    config = Config(batch_size=2, env=TOY.env, seed=9)
    trainer = Trainer(**hyperparameters(config), workers=1)
    trainer.dealer.start(1, 2, ray.put(trainer.model))  # a game dealt, never taken
    assert len(trainer.dealer.calls) == 1
    update = trainer.update()
    assert update.games == 2 and trainer.updates == 1
    release(trainer)
    alone = Trainer(**hyperparameters(config), workers=1)
    alone.update()
    release(alone)
    for k, v in alone.model.weights.items():
        assert v.tobytes() == trainer.model.weights[k].tobytes()


class _Asked:
    """Stands in for a worker's handle: counts the describe calls sent to it."""

    def __init__(self) -> None:
        self.asked = 0
        self.describe = self  # handle.describe.remote()

    def remote(self) -> object:
        self.asked += 1
        return object()


def test_a_restarting_worker_is_asked_once_per_pause(monkeypatch) -> None:
    """Once a restarting worker's pause is over it is asked where it is once, not on every
    pass of the loop until Ray replies (no Ray: ``ray.wait`` returns nothing at once)."""
    monkeypatch.setattr(ray, "wait", lambda refs, **_: ([], list(refs)))
    worker = _Asked()
    dealer = Dealer([worker], seed=0, expect=0)
    dealer.calls.clear()  # its first describe failed: Ray said the worker is restarting
    dealer.retry[0] = (time.monotonic() - 1.0, 1)  # and its pause is over
    for _ in range(3):
        assert dealer.next_reply() is None
    assert worker.asked == 2  # at the start, and once after the pause


def test_a_node_is_named_by_its_ip_with_its_id_where_another_node_alive_has_that_ip(
    monkeypatch,
) -> None:
    """As ``ray.nodes`` lists them (no Ray): a dead node whose IP a live one took is told apart
    from it; the live one, alone at its IP among the living, keeps the bare IP."""
    listed = [("a", "10.0.0.1", True), ("b", "10.0.0.2", True), ("c", "10.0.0.2", True)]
    listed += [("d", "10.0.0.3", False), ("e", "10.0.0.3", True)]
    nodes = [{"NodeID": i * 16, "NodeManagerAddress": ip, "Alive": up} for i, ip, up in listed]
    monkeypatch.setattr(ray, "nodes", lambda: nodes)
    dealer = Dealer([], seed=0, expect=0)
    names = [dealer.name(i * 16) for i in "abcdez"]
    assert names == [
        "10.0.0.1", "10.0.0.2/bbbbbbbb", "10.0.0.2/cccccccc", "10.0.0.3/dddddddd", "10.0.0.3",
        "?/zzzzzzzz",
    ]  # fmt: skip


class _Restarting(_Asked):
    """A worker's handle whose every ``describe`` Ray answers "unavailable" (restarting: its
    node is gone and no CPU is free for it) until ``back``; its games' calls in ``games``."""

    def __init__(self) -> None:
        super().__init__()
        self.back, self.games = False, set()
        self.compute_gradient = self.abandon = self

    def remote(self, *args) -> object:
        ref = super().remote()
        if args:  # a game (or an abandon, never fetched)
            self.asked -= 1
            self.games.add(ref)
        return ref


def test_a_worker_restarting_for_minutes_is_asked_again_and_the_wait_said_each_minute(
    monkeypatch,
) -> None:
    """No Ray, and a clock that runs only while the dealer waits: a worker that stays
    unavailable for 5 minutes (past the 45-70 s after which a count of retries used to give
    it up) is asked again at most every 10 s and never given up; the wait is said at once
    and each minute; once Ray restarts the worker it plays the update's games."""
    clock, worker = [0.0], _Restarting()

    def wait(refs, num_returns=1, **_):  # Ray answers at once
        return list(refs)[:num_returns], list(refs)[num_returns:]

    def get(ref):
        if ref in worker.games:
            return Result(_grad(1.0), 1.0, 1, None, "n1")
        if not worker.back:
            raise ray.exceptions.ActorUnavailableError("restarting", None)
        return {"node_id": "n1", "restarted": True}

    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    for name, value in [("wait", wait), ("get", get), ("nodes", lambda: []),
                        ("available_resources", dict), ("cluster_resources", dict)]:  # fmt: skip
        monkeypatch.setattr(ray, name, value)
    said: list[str] = []
    dealer = Dealer([worker], seed=0, expect=0, say=said.append)
    dealer.start(1, 2, model_ref=None)
    asked_at = [0.0]
    while clock[0] < 300:
        asked = worker.asked
        if (ref := dealer.next_reply()) is not None:
            dealer.take(ref)
        if worker.asked > asked:
            asked_at.append(clock[0])
    assert dealer.status == {0: "waiting"} and len(asked_at) > 30
    assert max(b - a for a, b in itertools.pairwise(asked_at)) <= 10.0
    assert said[0].startswith("note: no RolloutWorker is up (1 waiting; 0 of 0 CPUs"), said
    assert [line.split(" (")[0] for line in said[1:]] == [
        f"note: still no RolloutWorker up after {s} s" for s in (60, 120, 180, 240, 300)
    ][: len(said) - 1] and len(said) >= 5, said
    worker.back = True
    assert sorted(index for index, _ in dealer.results(1, 2, None)) == [0, 1]
    assert dealer.status == {0: "free"} and dealer.node_of == {0: "n1"}
