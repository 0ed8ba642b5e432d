"""Sending an update's games to the workers, as many at a time per node as it has CPUs.

Every call goes out at the start of the update, but a game sent to a node
with C CPUs after C others carries a ``Turn`` and waits, inside its call,
for a CPU to come free (``pong.worker.wait_turn``): more games than cores
would only take turns on them, each turn costing a game its caches. A call
to a worker that Ray is restarting (its process or node was lost) is sent
again; a worker whose restarts are used up stops the run.
"""

from __future__ import annotations

import math
import time

import ray

from pong.errors import PongError
from pong.worker import MAX_RESTARTS, Turn

__all__ = ["Games", "WorkerError"]

UNAVAILABLE_RETRIES = 30  # calls re-sent to a worker that Ray reports temporarily unreachable
UNAVAILABLE_WAIT_S = 1.0  # pause before each, while Ray restarts it (e.g. after a lost node)


class WorkerError(PongError):
    """A worker is gone for good: Ray's restarts of it are used up."""


class Games:
    """The calls of one update to ``actors``: when each game starts, where it ran, re-sends.

    Creating it waits until every actor has started, to learn its node, so
    that even the first update keeps to each node's CPUs.
    """

    def __init__(self, actors: list[ray.actor.ActorHandle]) -> None:
        self.actors = actors
        started = ray.get([actor.describe.remote() for actor in actors])
        self.nodes = {i: info["node_id"] for i, info in enumerate(started)}  # worker -> node
        self.node_cpus: dict[str, float] = {}  # node -> its CPUs, asked once per node
        self.resent: dict[int, int] = {}  # worker -> calls sent again in this update
        self.notes: list[str] = []  # what happened in this update, one line each

    def placement(self) -> dict[str, int]:
        """How many workers run on each node (node id -> count)."""
        nodes = list(self.nodes.values())
        return {node: nodes.count(node) for node in dict.fromkeys(nodes)}

    def start(self, model_ref: ray.ObjectRef) -> dict[ray.ObjectRef, int]:
        """Send every worker its game; returns each call's result -> index of its worker."""
        self.resent, self.notes = {}, []
        pending, sent = {}, {}  # sent: node -> its calls so far, in order
        for i, actor in enumerate(self.actors):
            ahead = sent.setdefault(self.nodes[i], [])
            ref = actor.compute_gradient.remote(model_ref, self.turn(self.nodes[i], ahead))
            pending[ref] = i
            ahead.append(ref)
        return pending

    def turn(self, node: str, ahead: list[ray.ObjectRef]) -> Turn | None:
        """When the next game sent to ``node`` may start, after the games ``ahead`` of it.

        At once while the node has a CPU free; else once at most C - 1 of the
        last 2C games sent there still play. Naming only the last 2C, not every
        earlier game, keeps the driver's cost of each call constant.
        """
        cpus = self.cpus(node)
        if len(ahead) < cpus:
            return None
        window = ahead[-2 * cpus :]
        return Turn(window, len(window) - cpus + 1)

    def cpus(self, node: str) -> int | float:
        """Whole CPUs of a Ray node: at least 1; ``math.inf`` for a node that has left."""
        if node not in self.node_cpus:  # a node not seen yet: ask the cluster once
            self.node_cpus.update(
                (n["NodeID"], n["Resources"].get("CPU", 0)) for n in ray.nodes() if n["Alive"]
            )
            self.node_cpus.setdefault(node, math.inf)  # gone: its workers restart elsewhere
        cpus = self.node_cpus[node]
        return cpus if cpus == math.inf else max(1, int(cpus))

    def played_on(self, i: int, node: str | None) -> None:
        """Worker ``i``'s last game ran on ``node``: a restarted worker may have moved."""
        self.nodes[i] = node or self.nodes[i]

    def resend(self, i: int, error: Exception, model_ref: ray.ObjectRef) -> ray.ObjectRef:
        """Ask worker ``i`` again once Ray has restarted it; the new call's result.

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
        time.sleep(UNAVAILABLE_WAIT_S)
        return self.actors[i].compute_gradient.remote(model_ref)
