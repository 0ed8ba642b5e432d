"""The training loop: a trainer holding the model and its counters, and one update, as
Ray's Pong example has it.

``Trainer.step`` is one update: ``play`` puts the model in the object store
once, starts a game on every ``RolloutWorker`` that is up, takes each result
as it arrives (``ray.wait``), adds it in game order (``Update.add``) and deals
the batch's next game to the worker now free; ``apply`` applies RMSProp and
counts the update. Adding in game order (game 0, 1, 2, ...), whatever order the
games finish in, makes a seed's run the same bytes with any number of workers
or nodes and across a resume: floating-point sums depend on their order. Each
worker holds one CPU; by default there are as many as the cluster has CPUs, at
most the batch size. Which game goes where, and workers that come and go with
the cluster, are ``pong.core.schedule.Dealer``'s business.
"""

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
    """An update would make the weights NaN or infinite; it was not applied."""


@dataclass
class Update:
    """What one update did, game by game in game order (game 0, 1, 2, ...)."""

    iteration: int  # this update's number, from 1
    running_reward: float | None  # the running mean of game scores, after each game added
    rewards: list[float] = field(default_factory=list)  # each game's score
    lengths: list[int] = field(default_factory=list)  # each game's env steps
    messages: list[str] = field(default_factory=list)  # notes and warnings, one line each
    left_out: int = 0  # games whose gradient was not finite
    seconds: float = 0.0  # wall time of the whole update
    started: float = 0.0  # time.perf_counter() when it began
    held: dict[int, Result] = field(default_factory=dict)  # games in before an earlier one
    nodes: dict[str, int] = field(default_factory=dict)  # games played on each node, by name

    def add(self, game: int, result: Result, grad_buffer: dict[str, np.ndarray]) -> None:
        """Count game ``game`` (from 0) once every earlier game of the batch is counted.

        A game that finishes before an earlier one is held until that one is in,
        so the gradient sum and the running mean take the games in game order
        whatever order they finish in. At worst (game 0 finishes last) all the
        batch's other results are held at once: a ``SparseGrad`` each.
        """
        self.held[game] = result
        while self.played in self.held:  # the next game in order is in
            self._add_next(self.held.pop(self.played), grad_buffer)

    def _add_next(self, result: Result, grad_buffer: dict[str, np.ndarray]) -> None:
        """The next game's gradient into ``grad_buffer``, its score into the running mean."""
        if result.note:
            self.messages.append(f"note: {result.note}")
        if result.grad.is_finite():
            result.grad.add_to(grad_buffer)
        else:  # one bad game must not poison the weights
            self.left_out += 1
            self.messages.append(
                "warning: a worker returned a non-finite gradient; left out of this update"
            )
        self.rewards.append(result.reward)
        self.lengths.append(result.steps)
        running = self.running_reward
        self.running_reward = (
            result.reward if running is None else running * 0.99 + result.reward * 0.01
        )

    @property
    def played(self) -> int:
        """Games added so far: games 0 to ``played - 1``."""
        return len(self.rewards)

    @property
    def steps(self) -> int:
        return sum(self.lengths)

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds else 0.0


class Trainer:
    """The driver's side of training: the model, RMSProp's cache, the counters, the workers.

    Args:
        make_env: makes a worker's env (each ``RolloutWorker`` calls it once).
        batch_size: games per update.
        seed: seeds the weights and, through independent child seeds, every
            game (``pong.core.worker.game_seed``).
        learning_rate: RMSProp's step size.
        decay_rate: RMSProp's decay of the running mean of squared gradients.
        state: a state to continue from: its weights, RMSProp cache, counters
            and running reward (``None``: fresh weights from ``seed``).
        workers: how many ``RolloutWorker`` actors to ask Ray for; by default as
            many as can play at once (``worker_count``). Those Ray cannot place yet
            wait for a CPU and join when one is free (a node joins the cluster).
        say: where the lines of a wait for a worker go, as they happen.
        wait_for_workers: seconds with no worker up before a ``WorkerError`` (``None``:
            as long as it takes).
    """

    def __init__(
        self,
        make_env: Callable[[], gym.Env],
        *,
        batch_size: int,
        seed: int,
        learning_rate: float,
        decay_rate: float,
        state: State | None = None,
        workers: int | None = None,
        say: Callable[[str], None] = print,
        wait_for_workers: float | None = None,
    ) -> None:
        self.batch_size, self.seed = batch_size, seed
        self.learning_rate, self.decay_rate = learning_rate, decay_rate
        (model_seed,) = np.random.SeedSequence(seed).spawn(1)  # games use other keys
        self.model = Model(model_seed)
        self.rmsprop_cache = zeros_like_weights(self.model.weights)  # RMSProp memory
        self.grad_buffer = zeros_like_weights(self.model.weights)  # the batch's gradient sum
        self.running_reward: float | None = None
        self.best_running_reward: float | None = None
        self.iteration = self.episodes = self.steps = 0  # updates, games and env steps done
        if state is not None:
            self._restore(state)
        workers = workers or worker_count(batch_size)
        cpus = int(ray.cluster_resources().get("CPU", 0))  # so many can start at once
        # SPREAD: where there are more free CPUs than workers, use every node's. Inside a
        # placement group (a Tune trial's) the workers go in it, which SPREAD would overrule.
        grouped = ray.util.get_current_placement_group() is not None
        worker = RolloutWorker if grouped else RolloutWorker.options(scheduling_strategy="SPREAD")
        actors = [worker.remote(make_env) for _ in range(workers)]
        self.dealer = Dealer(  # waits for those that can start at once
            actors, seed, expect=min(workers, cpus), say=say, wait_for_workers=wait_for_workers
        )

    def step(self) -> Update:
        """One update: play the batch's games (``play``), then RMSProp (``apply``)."""
        update = self.play()
        self.apply(update)
        return update

    def play(self) -> Update:
        """Play the batch's games and sum their gradients; nothing is applied yet."""
        update = Update(self.iteration + 1, self.running_reward, started=time.perf_counter())
        for g in self.grad_buffer.values():
            g.fill(0)  # here, not after the update: a stopped update leaves a partial sum
        model_ref = ray.put(self.model)  # one copy in the object store, read by every worker
        self.dealer.start(update.iteration, self.batch_size, model_ref)  # a game to each worker
        while self.dealer.playing():
            ready = self.dealer.next_answer()  # a game is done, or a worker is up (or None)
            if ready is None:
                continue
            game, result = self.dealer.take(ready)  # None: a worker up, a game lost or a copy
            if result is not None:
                update.add(game, result, self.grad_buffer)
            self.dealer.deal()  # the next games to the workers free now, while any are left
        return update

    def apply(self, update: Update) -> None:
        """Apply RMSProp with ``update``'s gradient sum and count it in the state."""
        self._apply(update)
        update.seconds = time.perf_counter() - update.started
        update.messages[:0] = self.dealer.notes  # workers lost or up, if any, come first
        update.nodes = dict(self.dealer.nodes)
        self._commit(update)

    def _apply(self, update: Update) -> None:
        """RMSProp with the batch's gradient sum, unless the weights would stop being finite.

        Raises:
            NonFiniteError: no game gave a finite gradient, or the step overflowed;
                the state stays that of the last finished update.
        """
        lr, decay = self.learning_rate, self.decay_rate
        if update.left_out == update.played:
            problem = "no game of the batch gave a finite gradient"
        else:
            try:
                self.model.update(self.grad_buffer, self.rmsprop_cache, lr, decay)
                return
            except FloatingPointError as e:
                problem = str(e)
        raise NonFiniteError(
            f"update {update.iteration} not applied: {problem} (learning rate {lr:g});"
            f" stopping with the weights of update {self.iteration}"
        )

    def _commit(self, update: Update) -> None:
        """Make a finished update part of the state (a stopped one never is)."""
        self.iteration += 1
        self.episodes += update.played
        self.steps += update.steps
        self.running_reward = update.running_reward
        if self.best_running_reward is None or self.running_reward > self.best_running_reward:
            self.best_running_reward = self.running_reward

    def _restore(self, saved: State) -> None:
        """Take the weights, RMSProp cache, counters and running reward of ``saved``."""
        self.model.weights = {k: v.copy(order="K") for k, v in saved.weights.items()}
        self.rmsprop_cache = {k: v.copy(order="K") for k, v in saved.rmsprop_cache.items()}
        self.iteration, self.episodes, self.steps = saved.iteration, saved.episodes, saved.steps
        self.running_reward = saved.running_reward
        self.best_running_reward = saved.best_running_reward

    def state(self) -> State:
        """The state after the last finished update (an update in flight is not in it)."""
        return State(
            weights=dict(self.model.weights),  # the dicts, not their arrays: an update
            rmsprop_cache=dict(self.rmsprop_cache),  # puts new arrays in the trainer's
            iteration=self.iteration,
            episodes=self.episodes,
            steps=self.steps,
            running_reward=self.running_reward,
            best_running_reward=self.best_running_reward,
        )
