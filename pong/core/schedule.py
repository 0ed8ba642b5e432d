"""Dealing an update's games to the workers that are up, and following workers as they come
and go.

Game ``g`` of update ``u`` is seeded from (run seed, ``u``, ``g``)
(``pong.core.worker.game_seed``), so it is the same game whichever worker, on whichever node,
plays it; the trainer adds the games in game order, so a seed gives the same bytes with any
workers. Each worker holds one CPU, so Ray places at most one per CPU, and a worker it cannot
place yet waits (an autoscaling cluster grows on that demand). So:

- a worker that is not up (not placed yet, or being restarted after its process or node was
  lost) is asked to ``describe`` itself; Ray answers once it is up, and from then on it is
  dealt games;
- each worker that is up and free is dealt the update's next game;
- a game lost with its worker goes to the next worker that is free, lost games first;
- a worker Ray will not restart again is dropped; the run stops only when none is left.
"""

from __future__ import annotations

from collections import Counter, deque

import ray

from pong.core.worker import MAX_RESTARTS, Result, game_seed

__all__ = ["Dealer", "WorkerError"]

START_WAIT_S = 30.0  # at most, for the workers the cluster's CPUs can hold to start
DESCRIBE_RETRIES = 30  # a worker unreachable more often in a row while starting is dropped

Calls = dict[ray.ObjectRef, tuple[int, int | None]]  # a call -> (its worker, its game or None)


class WorkerError(RuntimeError):
    """Every worker is gone for good: Ray's restarts of each are used up."""


class Dealer:
    """An update's games dealt to ``actors`` as each is up and free; where they ran.

    Args:
        actors: the ``RolloutWorker`` handles (started or still waiting for a CPU).
        seed: the run's seed, from which every game's seed derives.
        expect: how many of ``actors`` can start at once (the cluster's CPUs): creating
            ``Dealer`` waits up to ``START_WAIT_S`` for them; the rest join when Ray
            places them.
    """

    def __init__(self, actors: list[ray.actor.ActorHandle], seed: int, expect: int = 1) -> None:
        self.actors, self.seed = actors, seed
        self.calls: Calls = {}  # in flight: games (worker, game), and describes (worker, None)
        self.up: dict[int, str] = {}  # worker -> its node's id, for the workers up
        self.free: set[int] = set()  # the workers up and not playing
        self.gone: set[int] = set()  # workers Ray will not restart again
        self.unreachable: Counter[int] = Counter()  # worker -> describes lost in a row
        self.names: dict[str, str] = {}  # node id -> its name in lines and metrics
        self.iteration, self.model_ref = 0, None  # the update being dealt, and its model
        self.left: deque[int] = deque()  # the update's games not dealt yet, lost ones first
        self.nodes: Counter[str] = Counter()  # node name -> games of this update taken
        self.notes: list[str] = []  # what happened to the workers, one line each
        for i in range(len(actors)):
            self._describe(i)
        for ref in _started(list(self.calls), expect):
            self.take(ref)
        self.notes = []  # the start is the driver's "Started" line, not a note

    def placement(self) -> dict[str, int]:
        """How many workers are up on each node (node name -> count)."""
        return dict(Counter(self.name(node) for node in self.up.values()))

    def waiting(self) -> int:
        """Workers that are neither up nor gone: Ray has not placed (or restarted) them yet."""
        return len(self.actors) - len(self.up) - len(self.gone)

    def start(self, iteration: int, batch_size: int, model_ref: ray.ObjectRef) -> None:
        """Deal update ``iteration``'s first games, one to each worker that is up."""
        self.iteration, self.model_ref = iteration, model_ref
        self.left, self.nodes, self.notes = deque(range(batch_size)), Counter(), []
        self.deal()

    def playing(self) -> bool:
        """Whether the update waits on a game, or has games left for a worker to come up."""
        return any(game is not None for _, game in self.calls.values()) or bool(self.left)

    def take(self, ref: ray.ObjectRef) -> tuple[int | None, Result | None]:
        """The answer of the call ``ref``: (its game, its result) for a finished game; (None,
        None) for a worker that came up, or for a game lost with its worker (dealt again)."""
        i, game = self.calls.pop(ref)
        try:
            answer = ray.get(ref)
        except ray.exceptions.RayActorError as e:  # its process or node was lost
            self._lost(i, game, e)
            return None, None
        if game is None:
            self._came_up(i, answer)
            return None, None
        self.free.add(i)
        self.up[i] = answer.node or self.up[i]  # a worker Ray restarted while idle may have moved
        self.nodes[self.name(self.up[i])] += 1
        return game, answer

    def deal(self) -> None:
        """The update's next games to the workers that are free, while it has games left.

        Raises:
            WorkerError: games are left and every worker is gone for good.
        """
        while self.left and self.free:
            i, game = min(self.free), self.left.popleft()
            self.free.remove(i)
            seed = game_seed(self.seed, self.iteration, game)
            self.calls[self.actors[i].compute_gradient.remote(self.model_ref, seed)] = (i, game)
        if self.left and len(self.gone) == len(self.actors):
            raise WorkerError(
                f"every RolloutWorker is gone and Ray can no longer restart them (it restarts"
                f" a worker up to {MAX_RESTARTS} times); stopping"
            )

    def name(self, node: str) -> str:
        """A node's name: its IP address, and its id's start where another node has that IP
        (several nodes on one machine)."""
        if node not in self.names:
            listed = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
            ip = listed.get(node, "?")
            shared = sum(address == ip for address in listed.values()) > 1
            self.names[node] = f"{ip}/{node[:8]}" if shared or ip == "?" else ip
        return self.names[node]

    def _describe(self, i: int) -> None:
        """Ask worker ``i`` where it is: Ray answers once the worker is up."""
        self.calls[self.actors[i].describe.remote()] = (i, None)

    def _came_up(self, i: int, where: dict[str, object]) -> None:
        self.up[i], self.unreachable[i] = str(where["node_id"]), 0
        self.free.add(i)
        how = "up again (Ray restarted it)" if where.get("restarted") else "up"
        self.notes.append(
            f"note: RolloutWorker {i} is {how} on node {self.name(self.up[i])}; it plays from"
            f" the next game dealt ({len(self.up)} of {len(self.actors)} workers up)"
        )

    def _lost(self, i: int, game: int | None, error: ray.exceptions.RayActorError) -> None:
        """Worker ``i`` was lost: its game goes to another worker, and it is asked where it is
        (answered once Ray restarted it, or failing if Ray will not). Where that ask is what
        failed, it is asked again only while Ray calls the worker unavailable, at most
        ``DESCRIBE_RETRIES`` times; otherwise it is gone."""
        if game is not None:
            self.left.appendleft(game)
        was_up = self.up.pop(i, None) is not None
        self.free.discard(i)
        if game is None:
            self.unreachable[i] += 1
        restarting = isinstance(error, ray.exceptions.ActorUnavailableError) or was_up
        if not restarting or self.unreachable[i] > DESCRIBE_RETRIES:
            self.gone.add(i)
            self.notes.append(
                f"note: RolloutWorker {i} is gone for good ({_first_line(error)}); the run goes"
                f" on with the {len(self.actors) - len(self.gone)} left"
            )
            return
        self._describe(i)
        if was_up:
            again = f"; game {game} goes to the next worker free" if game is not None else ""
            self.notes.append(
                f"note: RolloutWorker {i} was lost (its process or node){again}; it plays again"
                " once Ray restarts it"
            )


def _started(describes: list[ray.ObjectRef], expect: int) -> list[ray.ObjectRef]:
    """The describe calls answered once ``expect`` of them are (or ``START_WAIT_S`` passed),
    with any others answered by then."""
    done, rest = [], describes
    if expect > 0:
        done, rest = ray.wait(rest, num_returns=min(expect, len(rest)), timeout=START_WAIT_S)
    if rest:
        done += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
    return done


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
