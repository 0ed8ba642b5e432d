"""Dealing an update's games to the workers: one each to start, then the next to whoever is free.

There are as many workers as can play at once (one per CPU, at most the batch
size), so no game waits for a core: a worker that finishes a game gets the
batch's next one. Game ``g`` of update ``u`` is seeded from (run seed, ``u``,
``g``) (``pong.core.worker.game_seed``), so it is the same game whichever worker, on
whichever node, plays it. A game whose worker Ray is restarting (its process or
node was lost) goes to the next worker to finish, or back to its own once Ray
has restarted it; a worker whose restarts are used up stops the run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import ray

from pong.core.worker import MAX_RESTARTS, game_seed

__all__ = ["Games", "WorkerError"]

UNAVAILABLE_RETRIES = 30  # calls re-sent to a worker that Ray reports temporarily unreachable
UNAVAILABLE_WAIT_S = 1.0  # pause before each, while Ray restarts it (e.g. after a lost node)

Calls = dict[ray.ObjectRef, tuple[int, int]]  # a call's result -> (its worker, its game)


class WorkerError(RuntimeError):
    """A worker is gone for good: Ray's restarts of it are used up."""


class Games:
    """The games of one update at a time, dealt to ``actors``; where each ran; re-sends.

    Args:
        actors: the ``RolloutWorker`` handles; creating ``Games`` waits until each
            has started, to learn its node.
        seed: the run's seed, from which every game's seed derives.
    """

    def __init__(self, actors: list[ray.actor.ActorHandle], seed: int) -> None:
        self.actors, self.seed = actors, seed
        started = ray.get([actor.describe.remote() for actor in actors])
        self.nodes = {i: info["node_id"] for i, info in enumerate(started)}  # worker -> node
        self.iteration, self.model_ref = 0, None  # the update being dealt, and its model
        self.left: Iterator[int] = iter(())  # the update's games not yet sent
        self.again: list[int] = []  # games whose worker was lost, to send before those left
        self.resent: dict[int, int] = {}  # worker -> calls sent again in this update
        self.notes: list[str] = []  # what happened in this update, one line each

    def placement(self) -> dict[str, int]:
        """How many workers run on each node (node id -> count)."""
        nodes = list(self.nodes.values())
        return {node: nodes.count(node) for node in dict.fromkeys(nodes)}

    def start(self, iteration: int, batch_size: int, model_ref: ray.ObjectRef) -> Calls:
        """Deal update ``iteration``'s first games, one to each worker (at most ``batch_size``)."""
        self.iteration, self.model_ref = iteration, model_ref
        self.left, self.again, self.resent, self.notes = iter(range(batch_size)), [], {}, []
        pending: Calls = {}
        for i in range(len(self.actors)):
            pending.update(self.next(i))
        return pending

    def next(self, i: int) -> Calls:
        """Worker ``i``'s next game, while the update has games left (else nothing)."""
        game = self.again.pop(0) if self.again else next(self.left, None)
        return {} if game is None else {self._send(i, game): (i, game)}

    def played_on(self, i: int, node: str | None) -> None:
        """Worker ``i``'s last game ran on ``node``: a restarted worker may have moved."""
        self.nodes[i] = node or self.nodes[i]

    def resend(self, i: int, game: int, error: Exception, busy: bool) -> Calls:
        """Play ``game``, lost with worker ``i``, again: on the next worker to finish if
        others are ``busy`` playing, else on worker ``i`` once Ray has restarted it.

        Raises:
            WorkerError: the worker is gone and Ray will not restart it again.
        """
        unavailable = isinstance(error, ray.exceptions.ActorUnavailableError)
        if not unavailable or self.resent.get(i, 0) >= UNAVAILABLE_RETRIES:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else "no reason"
            raise WorkerError(
                f"RolloutWorker {i} is gone and Ray can no longer restart it (it restarts"
                f" a worker up to {MAX_RESTARTS} times); stopping ({reason})"
            ) from None
        if not self.resent:
            self.notes.append(
                f"note: RolloutWorker {i} is unreachable (its process or node was lost);"
                " waiting for Ray to restart it"
            )
        self.resent[i] = self.resent.get(i, 0) + 1
        if busy:
            self.again.append(game)
            return {}
        time.sleep(UNAVAILABLE_WAIT_S)
        return {self._send(i, game): (i, game)}

    def _send(self, i: int, game: int) -> ray.ObjectRef:
        seed = game_seed(self.seed, self.iteration, game)
        return self.actors[i].compute_gradient.remote(self.model_ref, seed)
