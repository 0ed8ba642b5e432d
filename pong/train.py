"""The training loop's state and one update: actors, gradients, RMSProp.

``Trainer.step`` is what one line of the driver's output reports: put the
model in the object store once, have every ``RolloutWorker`` play one game
with it, add the gradients up as they arrive (``ray.wait``), apply RMSProp.
It also times the driver's own share of the work, for the benchmarks.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import ray

from pong.checkpoint import Checkpoint
from pong.model import Model, decay_rate, learning_rate, zeros_like_weights
from pong.worker import MAX_RESTARTS, RolloutWorker, Turn

__all__ = ["Trainer", "UpdateStats", "WorkerError"]

# Spawn-key prefix of the worker seeds of a resumed run: (RESUMED, update) never
# collides with the keys (0,), (1,), ... that a fresh run's seeds use.
RESUMED = 0xFFFF_FFFF


UNAVAILABLE_RETRIES = 30  # calls re-sent to a worker that Ray reports temporarily unreachable
UNAVAILABLE_WAIT_S = 1.0  # pause before each, while Ray restarts it (e.g. after a lost node)


class WorkerError(RuntimeError):
    """A worker is gone for good (Ray's restarts are used up); the message is one line."""


@dataclass
class UpdateStats:
    """What one update did and where the driver's time went (seconds)."""

    iteration: int
    rollouts: int = 0
    steps: int = 0
    rewards: list[float] = field(default_factory=list)  # per episode, in arrival order
    episode_steps: list[int] = field(default_factory=list)  # per episode, same order
    messages: list[str] = field(default_factory=list)
    seconds: float = 0.0  # the whole update, wall time
    put: float = 0.0  # clearing the buffer, ray.put of the model, starting the games
    wait: float = 0.0  # blocked in ray.wait: the workers are playing
    get: float = 0.0  # ray.get of the results (deserialisation)
    accumulate: float = 0.0  # adding gradients to the batch buffer
    update: float = 0.0  # RMSProp

    @property
    def overhead(self) -> float:
        """Seconds the driver itself was busy (not waiting for workers)."""
        return self.put + self.get + self.accumulate + self.update

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds else 0.0


class Trainer:
    """The driver's state: model, optimiser, running reward and the actors.

    Args:
        batch_size: episodes per update; one ``RolloutWorker`` actor each.
        env_id: Gymnasium id the workers play.
        seed: seeds the weights and, through independent child seeds, every
            worker's env resets and action draws.
        learning_rate, decay_rate: RMSProp settings.
        resume: a checkpoint to continue from: its weights, RMSProp cache,
            counters and running reward. The workers of a resumed run get seeds
            derived from (seed, update resumed at), not the first run's again.
    """

    def __init__(
        self,
        batch_size: int,
        env_id: str,
        seed: int,
        learning_rate: float = learning_rate,
        decay_rate: float = decay_rate,
        resume: Checkpoint | None = None,
    ) -> None:
        model_seed, *worker_seeds = np.random.SeedSequence(seed).spawn(1 + batch_size)
        self.model = Model(model_seed)
        self.rmsprop_cache = zeros_like_weights(self.model.weights)  # RMSProp memory
        self.seed = seed
        self.batch_size = batch_size
        self.env_id = env_id
        self.learning_rate = learning_rate
        self.decay_rate = decay_rate
        self.running_reward: float | None = None
        self.best_running_reward: float | None = None
        self.iteration = 0  # updates done
        self.episodes = 0
        self.steps = 0
        if resume is not None:
            self.model.weights = {k: v.copy(order="K") for k, v in resume.weights.items()}
            self.rmsprop_cache = {k: v.copy(order="K") for k, v in resume.rmsprop_cache.items()}
            self.running_reward = resume.running_reward
            self.best_running_reward = resume.best_running_reward
            self.iteration, self.episodes, self.steps = (
                resume.iteration,
                resume.episodes,
                resume.steps,
            )
            key = (RESUMED, resume.iteration)
            worker_seeds = np.random.SeedSequence(seed, spawn_key=key).spawn(batch_size)
        self.grad_buffer = zeros_like_weights(self.model.weights)  # sum of the batch's gradients
        self.nodes: dict[int, str] = {}  # worker index -> its node (placement, last result)
        self.node_cpus: dict[str, float] = {}  # node -> CPUs, from ray.nodes()
        self.actors = [
            # SPREAD: on a cluster, the games go to every node, not just the head.
            RolloutWorker.options(scheduling_strategy="SPREAD").remote(env_id, s)
            for s in worker_seeds
        ]

    def placement(self) -> dict[str, int]:
        """How many actors run on each node (node id -> count); waits until all have started."""
        nodes = [info["node_id"] for info in ray.get([a.describe.remote() for a in self.actors])]
        self.nodes.update(enumerate(nodes))  # so even the first update keeps to the CPUs
        return {node: nodes.count(node) for node in dict.fromkeys(nodes)}

    def step(self) -> UpdateStats:
        """Play one game per worker and apply one RMSProp update of their summed gradients.

        On each node, only as many games run at once as the node has CPUs. Games
        beyond that would only take turns on the cores, and each turn costs a
        game its caches: on 2 cores, 10 games at once gave up to 5% fewer
        steps/s than 2 at a time (one run of seven of benchmarks/ray_loop.py
        gave 3% more), and 60 games 1-11% fewer. Every call is sent at once
        all the same, each with its ``Turn``: a game sent to a node with C
        CPUs after C others waits, inside its call, until at most C - 1
        of the 2C games sent there just before it still play. That starts each
        game as soon as a CPU is free, unless a game more than 2C places
        earlier is still playing: then one more game plays for a while. The
        whole list of earlier games would rule that out, but each reference
        passed costs the driver work (it owns them all): with all of them, its
        CPU time per update was 465 ms instead of 241 at batch 60 on 2 cores. A
        worker's node is learned from ``placement`` or from its results; until
        then, its game starts at once.
        """
        stats = UpdateStats(self.iteration + 1)
        start = time.perf_counter()
        for g in self.grad_buffer.values():
            g.fill(0)  # here, not after the update: an interrupted batch leaves a partial sum
        model_ref = ray.put(self.model)  # one copy in the object store, read by every worker
        owner: dict[ray.ObjectRef, int] = {}  # call -> index of its worker
        started: dict[str, list[ray.ObjectRef]] = {}  # node -> its calls so far, in order
        for i, actor in enumerate(self.actors):
            node = self.nodes.get(i)  # None until placement() or the worker's first result
            if node is None:  # where it runs is not known: its game starts at once
                owner[actor.compute_gradient.remote(model_ref)] = i
                continue
            ahead = started.setdefault(node, [])
            cpus = self._cpus(node)
            turn = None
            if len(ahead) >= cpus:  # no CPU left: wait until C - 1 of the last 2C still play
                window = ahead[-2 * cpus :]
                turn = Turn(window, len(window) - cpus + 1)
            ref = actor.compute_gradient.remote(model_ref, turn)
            owner[ref] = i
            ahead.append(ref)
        resent: dict[int, int] = {}  # actor index -> calls re-sent in this update
        stats.put = time.perf_counter() - start
        # Updated per episode as it arrives, kept by the trainer only when the
        # update completes: an interrupted batch leaves no trace in the state.
        running_reward = self.running_reward
        while owner:
            t0 = time.perf_counter()
            [ready], _ = ray.wait(list(owner))  # take each result as soon as it is done
            t1 = time.perf_counter()
            i = owner.pop(ready)
            try:
                result = ray.get(ready)
            except ray.exceptions.RayActorError as e:
                unavailable = isinstance(e, ray.exceptions.ActorUnavailableError)
                if not unavailable or resent.get(i, 0) >= UNAVAILABLE_RETRIES:
                    reason = str(e).strip().splitlines()[0] if str(e).strip() else "no reason"
                    raise WorkerError(
                        f"RolloutWorker {i} is gone and Ray can no longer restart it (it restarts"
                        f" a worker up to {MAX_RESTARTS} times); stopping ({reason})"
                    ) from None
                # Its node or process is being replaced: ask again once Ray has restarted it.
                if not resent:
                    stats.messages.append(
                        f"note: RolloutWorker {i} is unreachable (its process or node was lost);"
                        " waiting for Ray to restart it"
                    )
                resent[i] = resent.get(i, 0) + 1
                time.sleep(UNAVAILABLE_WAIT_S)
                owner[self.actors[i].compute_gradient.remote(model_ref)] = i
                stats.wait += time.perf_counter() - t0
                continue
            t2 = time.perf_counter()
            if result.node is not None:
                self.nodes[i] = result.node
            if result.restarted:
                stats.messages.append(
                    "note: a worker's process had died; Ray restarted it and its game was"
                    " played again"
                )
            if result.note:
                stats.messages.append(f"note: {result.note}")
            if result.grad.is_finite():
                result.grad.add_to(self.grad_buffer)
            else:
                stats.messages.append(
                    "warning: a worker returned a non-finite gradient; left out of this update"
                )
            stats.rollouts += 1
            stats.steps += result.steps
            stats.rewards.append(result.reward)
            stats.episode_steps.append(result.steps)
            running_reward = (
                result.reward
                if running_reward is None
                else running_reward * 0.99 + result.reward * 0.01
            )
            t3 = time.perf_counter()
            stats.wait += t1 - t0
            stats.get += t2 - t1
            stats.accumulate += t3 - t2
        t0 = time.perf_counter()
        self.model.update(self.grad_buffer, self.rmsprop_cache, self.learning_rate, self.decay_rate)
        end = time.perf_counter()
        stats.update = end - t0
        stats.seconds = end - start
        self.iteration += 1
        self.running_reward = running_reward
        self.episodes += stats.rollouts
        self.steps += stats.steps
        if self.best_running_reward is None or self.running_reward > self.best_running_reward:
            self.best_running_reward = self.running_reward
        return stats

    def _cpus(self, node: str) -> int | float:
        """Whole CPUs of a Ray node: at least 1; ``math.inf`` for a node that has left."""
        if node not in self.node_cpus:  # a node not seen yet: ask the cluster once
            self.node_cpus.update(
                (n["NodeID"], n["Resources"].get("CPU", 0)) for n in ray.nodes() if n["Alive"]
            )
            self.node_cpus.setdefault(node, math.inf)  # gone: its workers restart elsewhere
        cpus = self.node_cpus[node]
        return cpus if cpus == math.inf else max(1, int(cpus))

    def checkpoint(self) -> Checkpoint:
        """The state after the last completed update (a batch in flight is not in it)."""
        return Checkpoint(
            weights=self.model.weights,
            rmsprop_cache=self.rmsprop_cache,
            iteration=self.iteration,
            episodes=self.episodes,
            steps=self.steps,
            running_reward=self.running_reward,
            best_running_reward=self.best_running_reward,
            seed=self.seed,
            settings={
                "batch_size": self.batch_size,
                "env": self.env_id,
                "learning_rate": self.learning_rate,
                "decay_rate": self.decay_rate,
            },
        )
