"""``Trainer``: the update loop of Ray's Pong example: put the model in Ray's object store,
have the workers play the update's games, add up their gradients, apply RMSProp once. Two
changes (docs/algorithm.md says why): at most one worker per CPU, given the next game as it
finishes one, and gradients added in game order, so that a seed gives the same bytes with any
workers, nodes or resume (with the same libraries on the same kind of CPU). Which worker plays which
game is the ``Dealer``'s (``pong.core.schedule``, the last chapter), behind one call:
``Dealer.results``."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import ray

from pong.core.model import Model, zeros_like_weights
from pong.core.schedule import Dealer
from pong.core.state import State
from pong.core.worker import WORKER_MEMORY, Result, RolloutWorker

__all__ = ["NonFiniteError", "Trainer", "Update", "worker_count"]


def worker_count(batch_size: int) -> int:
    """As many workers as can play at once: one per CPU of Ray's nodes, at most the batch
    size, and no more than the memory Ray has for them holds (at least one)."""
    resources = ray.cluster_resources()
    fits = resources.get("memory", math.inf) // WORKER_MEMORY
    return int(max(1, min(batch_size, resources.get("CPU", 1), fits)))


class NonFiniteError(ArithmeticError):
    """An update was not applied: no game of it gave a finite gradient, or the games' sum did
    not stay finite, or it would make the weights NaN or infinite."""


@dataclass
class Update:
    """What one update did, game by game in game order."""

    number: int  # this update's number, from 1
    running_mean: float | None  # of the games' scores, after each game added
    scores: list[float] = field(default_factory=list)
    game_steps: list[int] = field(default_factory=list)  # each game's env steps
    notes: list[str] = field(default_factory=list)  # notes and warnings, one line each
    dropped: int = 0  # games whose gradient was not finite
    seconds: float = 0.0  # wall time of the whole update
    started: float = 0.0  # time.perf_counter() when it began
    held: dict[int, Result] = field(default_factory=dict)  # games in before an earlier one
    nodes: dict[str, int] = field(default_factory=dict)  # games played on each node, by name

    @property
    def games(self) -> int:  # games added so far: games 0 to games - 1
        return len(self.scores)

    def add(self, index: int, result: Result, grad_buffer: dict[str, np.ndarray]) -> None:
        """Add game ``index`` (from 0) once every earlier game is added. Until then it is held;
        at worst, if game 0 finishes last, every other game's ``SparseGrad`` is held at once."""
        self.held[index] = result
        while self.games in self.held:
            result = self.held.pop(self.games)
            if result.note:
                self.notes.append(f"note: {result.note}")
            if result.grad.is_finite():
                result.grad.add_to(grad_buffer)
            else:  # one bad game must not poison the weights
                self.dropped += 1
                self.notes.append(
                    "warning: a worker returned a non-finite gradient; left out of this update"
                )
            self.scores.append(result.score)
            self.game_steps.append(result.steps)
            mean = self.running_mean
            self.running_mean = result.score if mean is None else mean * 0.99 + result.score * 0.01

    @property
    def steps(self) -> int:
        return sum(self.game_steps)

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds else 0.0


class Trainer:
    """The driver's side of training: the model, RMSProp's cache, the counters, the workers.
    ``seed`` seeds the weights (unless ``state`` is given to continue from) and, by
    independent child seeds, every game. It starts ``workers`` workers (``None`` or 0:
    ``worker_count``), each calling ``make_env`` once, placed by the Ray options ``placement``
    (``None``: spread over the nodes). ``say`` and ``wait_for_workers`` go to the ``Dealer``."""

    def __init__(
        self, make_env: Callable[[], gym.Env], *, batch_size: int, seed: int,
        learning_rate: float, decay_rate: float, state: State | None = None,
        workers: int | None = None, placement: dict | None = None, say: Callable = print,
        wait_for_workers: float | None = None,
    ) -> None:  # fmt: skip
        self.batch_size, self.seed = batch_size, seed
        self.learning_rate, self.decay_rate = learning_rate, decay_rate
        if state is None:  # fresh weights, RMSProp's cache at zero, counters at 0
            (model_seed,) = np.random.SeedSequence(seed).spawn(1)  # spawn key (0,): no game's
            weights = Model(model_seed).weights
            state = State(weights, zeros_like_weights(weights), 0, 0, 0, None, None)
        self.model = Model.from_weights({k: v.copy(order="K") for k, v in state.weights.items()})
        self.rmsprop_cache = {k: v.copy(order="K") for k, v in state.rmsprop_cache.items()}
        self.updates, self.games, self.steps = state.updates, state.games, state.steps
        self.running_mean, self.best_running_mean = state.running_mean, state.best_running_mean
        self.grad_buffer = zeros_like_weights(self.model.weights)  # the update's gradient sum
        count = workers or worker_count(batch_size)
        cpus = int(ray.cluster_resources().get("CPU", 0))  # so many can start at once
        options = {"scheduling_strategy": "SPREAD"} if placement is None else placement
        started = [RolloutWorker.options(**options).remote(make_env) for _ in range(count)]
        self.dealer = Dealer(  # waits for those that can start at once
            started, seed, expect=min(count, cpus), say=say, wait_for_workers=wait_for_workers
        )

    def update(self) -> Update:
        """One update: ``play``, then ``rmsprop``."""
        update = self.play()
        self.rmsprop(update)
        return update

    def play(self) -> Update:
        """Play the update's games and sum their gradients; nothing is applied yet."""
        update = Update(self.updates + 1, self.running_mean, started=time.perf_counter())
        for g in self.grad_buffer.values():
            g.fill(0)  # here, not after the update: a stopped update leaves a partial sum
        model_ref = ray.put(self.model)  # one copy in the object store, read by every worker
        for index, result in self.dealer.results(update.number, self.batch_size, model_ref):
            update.add(index, result, self.grad_buffer)
        return update

    def rmsprop(self, update: Update) -> None:
        """RMSProp with the gradient sum ``play`` left in ``grad_buffer``, then the update
        counted (``_count``). Where no game gave a finite gradient, or their sum, the weights or
        the cache would not be finite, it raises ``NonFiniteError`` and changes nothing."""
        lr = self.learning_rate
        try:
            if update.dropped == update.games:
                raise FloatingPointError("no game of the update gave a finite gradient")
            self.model.rmsprop(self.grad_buffer, self.rmsprop_cache, lr, self.decay_rate)
        except FloatingPointError as e:
            raise NonFiniteError(
                f"update {update.number} not applied: {e} (learning rate {lr:g});"
                f" stopping with the weights of update {self.updates}"
            ) from None
        self._count(update)

    def _count(self, update: Update) -> None:
        """``update``'s time, the dealer's notes and its games into the trainer's counters."""
        update.seconds = time.perf_counter() - update.started
        update.notes[:0] = self.dealer.notes  # the dealer's notes on the workers come first
        update.nodes = dict(self.dealer.games_on)  # its games played on each node, by name
        self.updates += 1
        self.games += update.games
        self.steps += update.steps
        self.running_mean = update.running_mean
        if self.best_running_mean is None or self.running_mean > self.best_running_mean:
            self.best_running_mean = self.running_mean

    def state(self) -> State:
        """The state after the last finished update (an update in flight is not in it); the
        dicts are copied, not their arrays, which an update replaces rather than changes."""
        weights, cache = dict(self.model.weights), dict(self.rmsprop_cache)
        counters = self.updates, self.games, self.steps, self.running_mean
        return State(weights, cache, *counters, self.best_running_mean)
