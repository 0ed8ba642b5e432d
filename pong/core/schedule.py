"""``Dealer``, the last chapter, which a first reading can skip: an update's games dealt to the
workers as they come and go, and backups of slow games. A game's seed (``game_seed``) makes it
the same game on any worker. Its words are in docs/algorithm.md, under "Glossary".

A worker's status is ``status[worker]``, one of four. It moves when the dealer deals it a game and
when Ray replies or reports an error:

=========  ==============================================  ========================================
status     what the dealer holds for it                    moves
=========  ==============================================  ========================================
waiting    a ``describe`` call in ``calls``; one Ray       Ray replies -> free; Ray restarts it ->
           restarts is asked after a pause in ``retry``    asked again; died for good -> gone
free       its node in ``node_of``                         dealt a game -> playing
playing    a copy's call in ``calls``; its node            replies -> free; lost (its process or
                                                           node) -> waiting, its game dealt again
                                                           if the update needs it and no other
                                                           copy of it is in flight
gone       nothing                                         stays: Ray's restarts are used up
=========  ==============================================  ========================================

An autoscaler adds a node for a waiting worker Ray cannot place.

A free worker is dealt the next undealt game, games lost with a worker first. Once all are
dealt, it gets a backup: a second copy of the game in flight longest, past ``BACKUP_AFTER``
times the update's median game (MapReduce's backup tasks). The first copy to reply with a
result counts; the other is abandoned (told to stop).
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from typing import NamedTuple

import ray

from pong.core.worker import MAX_RESTARTS, Result, game_seed

__all__ = ["Dealer", "WorkerError"]

START_WAIT_S = 30.0  # at most, for the workers the cluster's CPUs can hold to start
RETRY_S = (0.5, 1.0, 2.0, 5.0, 10.0)  # pauses before asking a restarting worker again
BACKUP_AFTER = 2.0  # a game in flight this many times the update's median game gets a backup
BACKUP_MIN_S = 0.25  # and at least this long: not for a few milliseconds of network
SAY_EVERY_S = 60.0  # while no worker is up, a line this often


class WorkerError(RuntimeError):
    """No worker can play: every one is gone, or none was up for the time allowed."""


class Call(NamedTuple):
    """A call in flight: a copy of game ``index`` of update ``update``, or a ``describe``."""

    worker: int
    index: int | None  # None: a describe
    update: int  # the update's number
    since: float  # time.monotonic() when sent
    copy: int = -1  # the copy's number


def _started(describes: list[ray.ObjectRef], expect: int) -> list[ray.ObjectRef]:
    """The describes replied to once ``expect`` have replied (or ``START_WAIT_S`` passed),
    and any others replied to by then."""
    replied, rest = [], describes
    if expect > 0:
        replied, rest = ray.wait(rest, num_returns=min(expect, len(rest)), timeout=START_WAIT_S)
    if rest:
        replied += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
    return replied


class Dealer:
    """Deals each update's games to ``workers`` (``RolloutWorker`` handles), seeded from the
    run's ``seed``, once the ``expect`` that can start at once are up (``START_WAIT_S`` at most).
    While games wait and no worker is up, ``say`` prints a line every ``SAY_EVERY_S``; after
    ``wait_for_workers`` seconds (``None``: never) a ``WorkerError`` ends the wait."""

    def __init__(
        self, workers: list, seed: int, expect: int = 1, say: Callable = print,
        wait_for_workers: float | None = None,
    ) -> None:  # fmt: skip
        self.workers, self.seed, self.say = workers, seed, say
        self.wait_for_workers = wait_for_workers
        self.calls: dict[ray.ObjectRef, Call] = {}
        self.copy_numbers = itertools.count()  # each copy dealt gets the next
        self.status = dict.fromkeys(range(len(workers)), "waiting")  # the table above
        self.node_of: dict[int, str] = {}  # worker -> the id of the node it was last up on
        self.retry: dict[int, tuple[float, int]] = {}  # worker -> (when to ask again, tries)
        self.names: dict[str, str] = {}  # node id -> its name in lines and metrics
        self.update = 0  # the number of the update being dealt
        self.model_ref = None  # its model, in the object store
        self.undealt: deque[int] = deque()  # its games not dealt yet, lost ones first
        self.done: set[int] = set()  # its games whose counted copy replied (out again if lost)
        self.games_on: Counter[str] = Counter()  # node name -> the update's games played there
        self.took: list[float] = []  # seconds each done game's counted copy took
        self.notes: list[str] = []  # the update's notes on the workers, one line each
        self.none_up_since: float | None = None  # since when no worker is up
        self.said_at = 0.0  # when that was last said
        for worker in range(len(workers)):
            self._describe(worker)
        for ref in _started(list(self.calls), expect):
            self.take(ref)
        self.notes = []  # the start is the driver's "Started" line, not a note

    def results(self, update: int, batch_size: int, model_ref) -> Iterator[tuple[int, Result]]:
        """Play the ``batch_size`` games of update ``update`` with the model at ``model_ref``:
        ``(index, Result)`` for each game as it is done, in the order they finish."""
        self.start(update, batch_size, model_ref)
        while self.unfinished():
            if (ready := self.next_reply()) is not None:
                index, result = self.take(ready)
                if result is not None:
                    yield index, result

    def start(self, update: int, batch_size: int, model_ref: ray.ObjectRef) -> None:
        """Deal the first games of update ``update``. A copy of an earlier update's game still in
        flight (the slower of a game's two copies, first or backup) is abandoned and never
        counted; one of an update stopped mid-way and started again (a Ctrl-C in a notebook's
        ``Trainer.update``, say) has its number, plays the same game and counts."""
        for call in list(self.calls.values()):  # its reply will only free its worker
            if call.index is not None and call.update != update:
                self.workers[call.worker].abandon.remote(call.copy)
        self.update, self.model_ref = update, model_ref
        self.undealt, self.done, self.took = deque(range(batch_size)), set(), []
        self.games_on, self.notes = Counter(), []
        self.deal()

    def unfinished(self) -> bool:
        """Whether the update waits on a game in flight or undealt."""
        return bool(self.undealt) or any(self._current(c) for c in self.calls.values())

    def next_reply(self) -> ray.ObjectRef | None:
        """The next call replied to, or ``None`` when something else is due first (a retry, a
        backup, a line of the wait for a worker)."""
        self._say_none_up()
        now = time.monotonic()
        for worker, (when, tries) in list(self.retry.items()):
            if when <= now:  # asked once: its reply, or _lost, says what next
                self.retry[worker] = (math.inf, tries)
                self._describe(worker)
        self.deal()
        pause, ready = max(0.0, self._next_due(now) - now), []
        if self.calls:  # not fetched here (fetch_local=False): take fetches it, after dealing
            ready, _ = ray.wait(list(self.calls), num_returns=1, timeout=pause, fetch_local=False)
        else:
            time.sleep(pause)
        self._say_none_up()
        return ready[0] if ready else None

    def _next_due(self, now: float) -> float:
        """When something is due without a reply: a restarting worker's pause ends, the next
        line of a wait for a worker or the end of the wait allowed, the oldest game's backup;
        at most ``SAY_EVERY_S`` from ``now``."""
        due = [when for when, _ in self.retry.values()] + [now + SAY_EVERY_S]
        if self.none_up_since is not None:
            due += [self.said_at + SAY_EVERY_S]
            due += [self.none_up_since + (self.wait_for_workers or math.inf)]
        if self.workers_in("free") and (backups := self._backups(0.0)):  # the longest in flight
            due.append(backups[0][0] + self._backup_after())
        return min(due)

    def take(self, ref: ray.ObjectRef) -> tuple[int | None, Result | None]:
        """``(index, result)`` where ``ref``'s reply is the first result of a game of this
        update, else ``(None, None)``: a worker lost (its game dealt again), a game given up
        (dealt again), a ``describe`` (the worker is up), a slower copy or an earlier update's
        (its worker is free). The game is marked done, and backups that fell due are dealt,
        before the fetch: a slow link delays no other game. The slower copy's gradient is
        fetched too: only ``ray.get`` tells a result from a lost worker."""
        call = self.calls.pop(ref)
        first = self._current(call)  # the first copy of its game to reply, unless it was lost
        if first:  # done first: the deal backs up other games, not this one
            self.done.add(call.index)
            self.deal()
        try:
            reply = ray.get(ref)
        except ray.exceptions.RayActorError as e:  # its process or node was lost
            if first:
                self.done.discard(call.index)
            self._lost(call, e)
            return None, None
        if call.index is None:
            self._came_up(call.worker, reply)
        elif first:
            return self._counted(call, reply)
        elif self.status[call.worker] == "playing":  # a slower copy, or an earlier update's
            self.status[call.worker] = "free"
        return None, None

    def _counted(self, call: Call, reply: Result | None) -> tuple[int | None, Result | None]:
        """The first reply of a copy of game ``call.index``: its result, the other copy
        abandoned; or, if the copy gave the game up, the game dealt again."""
        worker, index = call.worker, call.index
        self.status[worker] = "free"
        # None only where this update was stopped mid-way and started again under its number:
        # the copy was abandoned as the slower one, and now counts; deal the game again
        if reply is None:
            self.done.discard(index)
            self.undealt.appendleft(index)
            return None, None
        # Not ray.cancel: a worker lost meanwhile would reply "cancelled", not "lost".
        for other in list(self.calls.values()):
            if other.index == index and other.update == call.update:
                self.workers[other.worker].abandon.remote(other.copy)
        self.node_of[worker] = reply.node or self.node_of[worker]  # restarted between games?
        self.took.append(time.monotonic() - call.since)
        self.games_on[self.name(self.node_of[worker])] += 1
        return index, reply

    def deal(self) -> None:
        """The next undealt games to the free workers; with none left, backups (see above).
        A ``WorkerError`` where games wait and every worker is gone."""
        while self.undealt and (free := self.workers_in("free")):
            self._deal_to(free[0], self.undealt.popleft())
        backups = self._backups(self._backup_after())
        for (_, index), worker in zip(backups, self.workers_in("free"), strict=False):
            self._deal_to(worker, index)
        if self.unfinished() and len(self.workers_in("gone")) == len(self.workers):
            raise WorkerError(
                f"every RolloutWorker is gone: Ray restarts a worker up to {MAX_RESTARTS} times,"
                " and has used them up for each; stopping"
            )

    def _backups(self, after: float) -> list[tuple[float, int]]:
        """(sent, index) of the update's games in flight as one copy alone for ``after``
        seconds or more, the longest first; none while games are undealt."""
        current = [] if self.undealt else [c for c in self.calls.values() if self._current(c)]
        copies, now = Counter(c.index for c in current), time.monotonic()  # each game's in flight
        return sorted(
            (c.since, c.index) for c in current if copies[c.index] == 1 and now - c.since >= after
        )

    def _backup_after(self) -> float:
        """``BACKUP_AFTER`` times the median of the update's games done, at least
        ``BACKUP_MIN_S``; never before one is done."""
        return max(BACKUP_MIN_S, BACKUP_AFTER * statistics.median(self.took or [math.inf]))

    def workers_in(self, *statuses: str) -> list[int]:
        """The workers in any of ``statuses``, in order."""
        return [worker for worker, status in self.status.items() if status in statuses]

    def up(self) -> list[int]:
        """The workers up (free or playing), in order."""
        return self.workers_in("free", "playing")

    def _current(self, call: Call) -> bool:
        """Whether ``call`` is a copy of a game of this update not yet done."""
        current = call.index is not None and call.update == self.update
        return current and call.index not in self.done

    def _deal_to(self, worker: int, index: int) -> None:
        """Deal game ``index`` to the free ``worker``, as the next copy."""
        self.status[worker] = "playing"
        seed, copy = game_seed(self.seed, self.update, index), next(self.copy_numbers)
        ref = self.workers[worker].compute_gradient.remote(self.model_ref, seed, copy)
        self.calls[ref] = Call(worker, index, self.update, time.monotonic(), copy)

    def _describe(self, worker: int) -> None:
        """Ask ``worker`` where it is: Ray replies once it is placed."""
        self.calls[self.workers[worker].describe.remote()] = Call(worker, None, 0, time.monotonic())

    def _came_up(self, worker: int, where: dict[str, object]) -> None:
        self.node_of[worker], self.status[worker] = str(where["node_id"]), "free"
        self.retry.pop(worker, None)
        how = "up again (Ray restarted it)" if where.get("restarted") else "up"
        self.notes.append(
            f"note: RolloutWorker {worker} is {how} on node {self.name(self.node_of[worker])}; it"
            f" plays from the next game dealt ({len(self.up())} of"
            f" {len(self.workers)} workers up)"
        )

    def _lost(self, call: Call, error: ray.exceptions.RayActorError) -> None:
        """Worker ``call.worker`` was lost instead of replying; its game is dealt again if
        needed (the table above). A worker that was up, or whose copy failed, is asked again
        where it is; one Ray calls unavailable (restarting), after a pause; one Ray says died
        for good is gone."""
        worker, index = call.worker, call.index
        again = self._current(call) and not any(  # the update still needs its game
            c.index == index and c.update == call.update for c in self.calls.values()
        )
        if again:
            self.undealt.appendleft(index)
        was_up, self.status[worker] = self.status[worker] in ("free", "playing"), "waiting"
        if was_up or index is not None:
            self._describe(worker)
            then = f"; game {index} goes to the next worker free" if again else ""
            self.notes.append(
                f"note: RolloutWorker {worker} was lost (its process or node){then}; it plays"
                " again once Ray restarts it, where a CPU is free"
            )
        elif isinstance(error, ray.exceptions.ActorUnavailableError):
            tries = self.retry.get(worker, (0.0, 0))[1]
            pause = RETRY_S[min(tries, len(RETRY_S) - 1)]
            self.retry[worker] = (time.monotonic() + pause, tries + 1)
        else:
            self.status[worker] = "gone"
            self.retry.pop(worker, None)
            why = (str(error).strip() or type(error).__name__).splitlines()[0]
            self.notes.append(
                f"note: RolloutWorker {worker} is gone for good ({why}); the run goes"
                f" on with the other {len(self.workers) - len(self.workers_in('gone'))}"
            )

    # The rest reports: what the run's lines and metrics say about the workers and nodes.

    def up_by_node(self) -> dict[str, int]:
        """How many workers are up on each node (node name -> count)."""
        return dict(Counter(self.name(self.node_of[worker]) for worker in self.up()))

    def waiting(self) -> int:
        """Workers neither up nor gone: not placed yet, or lost and not restarted yet."""
        return len(self.workers_in("waiting"))

    def name(self, node: str) -> str:
        """A node's name: its IP address, with its id's start where another node alive has
        that IP; a node that died and came back keeps its name."""
        if node not in self.names:
            listed = {n["NodeID"]: n for n in ray.nodes()}
            ip = listed.get(node, {}).get("NodeManagerAddress", "?")
            others = [n for n in listed.values() if n["NodeID"] != node and n["Alive"]]
            shared = any(n["NodeManagerAddress"] == ip for n in others)
            self.names[node] = f"{ip}/{node[:8]}" if shared or ip == "?" else ip
        return self.names[node]

    def _say_none_up(self) -> None:
        """While games wait and no worker is up: a line at once, then every
        ``SAY_EVERY_S``; a ``WorkerError`` past ``wait_for_workers``."""
        if self.up() or not self.unfinished():
            self.none_up_since = None
            return
        now = time.monotonic()
        if self.none_up_since is None:
            self.none_up_since = self.said_at = now
            self.say(f"note: no RolloutWorker is up ({self._why()}); waiting for Ray to place"
                     " or restart one (Ctrl-C stops the run)")  # fmt: skip
        elif now - self.said_at >= SAY_EVERY_S:
            self.said_at = now
            self.say(f"note: still no RolloutWorker up after {now - self.none_up_since:.0f} s"
                     f" ({self._why()})")  # fmt: skip
        limit = self.wait_for_workers
        if limit is not None and now - self.none_up_since >= limit:
            raise WorkerError(
                f"no RolloutWorker was up for {limit:g} s ({self._why()}); stopping, as"
                " --wait-for-workers asks"
            )

    def _why(self) -> str:
        cpus_free = ray.available_resources().get("CPU", 0)
        cpus = ray.cluster_resources().get("CPU", 0)
        gone = len(self.workers_in("gone"))
        return (
            f"{self.waiting()} waiting{f', {gone} gone for good' if gone else ''}; {cpus_free:g} of"
            f" {cpus:g} CPUs in the cluster free"
        )
