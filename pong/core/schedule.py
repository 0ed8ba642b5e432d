"""``Dealer``: an update's games dealt to the workers, as workers come and go. A game is
seeded by its number (``game_seed``): the same on any worker, so it can be dealt again.

A worker's state is this table alone; what moves it is Ray's word, never a count. A worker
is *live* while free or playing; one Ray cannot place yet waits (an autoscaler grows on it).

| state   | kept in                                   | moves when                                |
|---------|-------------------------------------------|-------------------------------------------|
| waiting | a ``describe`` call in ``calls``, or      | Ray answers: free. Ray says it died for   |
|         | ``retry`` (asked again after a pause)     | good: gone                                |
| free    | ``free`` and ``live``                     | it is dealt a game: playing               |
| playing | a game's call in ``calls``; ``live``      | it answers: free. It is lost (its process |
|         |                                           | or node): waiting, its game dealt again   |
| gone    | ``gone``                                  | never: Ray's restarts of it are used up   |

A free worker is dealt the next undealt game, games lost with a worker first; once all are
dealt, a backup of the game in flight longest, past ``BACKUP_AFTER`` times the update's
median game (MapReduce's backup tasks): the first answer counts, the other copy is stopped.
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
SAY_EVERY_S = 60.0  # while no worker is live, a line this often


class WorkerError(RuntimeError):
    """No worker can play: every one is gone, or none was live for the time allowed."""


class Call(NamedTuple):
    """A call in flight: a game of an update (``game`` None: a describe), dealt as ``copy``."""

    worker: int
    game: int | None
    update: int
    since: float  # time.monotonic() when sent
    copy: int = -1


def _started(describes: list[ray.ObjectRef], expect: int) -> list[ray.ObjectRef]:
    """The describes answered once ``expect`` are (or ``START_WAIT_S`` passed), and any
    others answered by then."""
    done, rest = [], describes
    if expect > 0:
        done, rest = ray.wait(rest, num_returns=min(expect, len(rest)), timeout=START_WAIT_S)
    if rest:
        done += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
    return done


def _first_line(error: BaseException) -> str:
    return (str(error).strip() or type(error).__name__).splitlines()[0]


class Dealer:
    """Deals each update's games to ``actors`` (``RolloutWorker`` handles), seeded from the
    run's ``seed``. It waits up to ``START_WAIT_S`` for the ``expect`` that can start at once
    (the cluster's CPUs). ``say`` takes the lines of a wait for a live worker, which ends in
    a ``WorkerError`` after ``wait_for_workers`` seconds (``None``: never)."""

    def __init__(
        self, actors: list, seed: int, expect: int = 1, say: Callable = print, wait_for_workers=None
    ) -> None:
        self.actors, self.seed, self.say, self.limit = actors, seed, say, wait_for_workers
        self.calls: dict[ray.ObjectRef, Call] = {}
        self.dealt = itertools.count()  # each game dealt is a copy with a number of its own
        self.live: dict[int, str] = {}  # worker -> its node's id
        self.free, self.gone = set(), set()  # worker numbers, as in the table
        self.retry: dict[int, tuple[float, int]] = {}  # worker -> (when to ask again, tries)
        self.names: dict[str, str] = {}  # node id -> its name in lines and metrics
        self.update, self.model_ref = 0, None  # the update being dealt, and its model
        self.undealt, self.done = deque(), set()  # the update's games not dealt; answered
        self.nodes: Counter[str] = Counter()  # node name -> the update's games played there
        self.took: list[float] = []  # seconds of the update's games answered first
        self.notes: list[str] = []  # the update's news of the workers, one line each
        self.idle_since, self.said_at = None, 0.0  # since when no worker is live; last said
        for i in range(len(actors)):
            self._describe(i)
        for ref in _started(list(self.calls), expect):
            self.take(ref)
        self.notes = []  # the start is the driver's "Started" line, not a note

    def placement(self) -> dict[str, int]:
        """How many workers are live on each node (node name -> count)."""
        return dict(Counter(self.name(node) for node in self.live.values()))

    def waiting(self) -> int:
        """Workers neither live nor gone: not placed yet, or lost and not restarted yet."""
        return len(self.actors) - len(self.live) - len(self.gone)

    def games(
        self, update: int, batch_size: int, model_ref: ray.ObjectRef
    ) -> Iterator[tuple[int, Result]]:
        """Play update ``update``'s ``batch_size`` games with the model at ``model_ref``:
        ``(game, Result)`` for each as it is answered first, in the order they finish."""
        self.start(update, batch_size, model_ref)
        while self.playing():
            if (ready := self.next_answer()) is not None:
                game, result = self.take(ready)
                if result is not None:
                    yield game, result

    def news(self) -> tuple[list[str], dict[str, int]]:
        """The update's notes on the workers, and its games played on each node, by name."""
        return list(self.notes), dict(self.nodes)

    def start(self, update: int, batch_size: int, model_ref: ray.ObjectRef) -> None:
        """Deal update ``update``'s first games; an earlier update's game still in flight (a
        backup, or an update stopped mid-way) is told to stop and never counted."""
        for call in list(self.calls.values()):  # told to stop; its answer only frees the worker
            if call.game is not None and call.update != update:
                self.actors[call.worker].abandon.remote(call.copy)
        self.update, self.model_ref = update, model_ref
        self.undealt, self.done, self.took = deque(range(batch_size)), set(), []
        self.nodes, self.notes = Counter(), []
        self.deal()

    def playing(self) -> bool:
        """Whether the update waits on a game in flight or undealt."""
        return bool(self.undealt) or any(self._current(c) for c in self.calls.values())

    def next_answer(self) -> ray.ObjectRef | None:
        """The next call answered, or ``None`` when something else is due first (a retry, a
        backup, a line of the wait for a worker)."""
        self._say_waiting()
        now = time.monotonic()
        for i, (when, tries) in list(self.retry.items()):
            if when <= now:  # asked once: its answer, or _lost, says what next
                self.retry[i] = (math.inf, tries)
                self._describe(i)
        self.deal()
        due = [w for w, _ in self.retry.values()] + [now + SAY_EVERY_S]
        if self.idle_since is not None:  # the next line, or the end of the wait allowed
            due += [self.said_at + SAY_EVERY_S, self.idle_since + (self.limit or math.inf)]
        if self.free and (backups := self._backups(0.0)):  # when the oldest is due a backup
            due.append(backups[0][0] + self._backup_after())
        pause, ready = max(0.0, min(due) - now), []
        if self.calls:  # an answer is fetched only once it is known to count
            ready, _ = ray.wait(list(self.calls), num_returns=1, timeout=pause, fetch_local=False)
        else:
            time.sleep(pause)
        self._say_waiting()
        return ready[0] if ready else None

    def take(self, ref: ray.ObjectRef) -> tuple[int | None, Result | None]:
        """``(game, result)`` for a game of this update answered first, else ``(None, None)``.
        It is fetched after the free workers are dealt: a slow link holds no one up."""
        call = self.calls.pop(ref)
        i, game = call.worker, call.game
        counted = self._current(call)
        if counted:
            self.done.add(game)
            self.deal()
        try:
            answer = ray.get(ref)
        except ray.exceptions.RayActorError as e:  # its process or node was lost
            if counted:
                self.done.discard(game)
            self._lost(call, e)
            return None, None
        if game is None:
            self._came_up(i, answer)
            return None, None
        if not counted:  # a game of an earlier update, or a second copy
            if i in self.live:
                self.free.add(i)
            return None, None
        self.free.add(i)
        if answer is None:  # it gave the game up (a copy abandoned, then needed after all)
            self.done.discard(game)
            self.undealt.appendleft(game)
            return None, None
        # The other copy of this game is told to stop. (Not ray.cancel: a worker lost
        # meanwhile would answer "cancelled", not "lost".)
        for copy in list(self.calls.values()):
            if copy.game == game and copy.update == call.update:
                self.actors[copy.worker].abandon.remote(copy.copy)
        self.live[i] = answer.node or self.live[i]  # restarted while idle, it may have moved
        self.took.append(time.monotonic() - call.since)
        self.nodes[self.name(self.live[i])] += 1
        return game, answer

    def deal(self) -> None:
        """The next undealt games to the free workers; with none left, backups (see above).
        A ``WorkerError`` where games wait and every worker is gone."""
        while self.undealt and self.free:
            self._play(min(self.free), self.undealt.popleft())
        backups = self._backups(self._backup_after())
        for (_, game), i in zip(backups, sorted(self.free), strict=False):
            self._play(i, game)
        if self.playing() and len(self.gone) == len(self.actors):
            raise WorkerError(
                f"every RolloutWorker is gone: Ray restarts a worker up to {MAX_RESTARTS} times,"
                " and has used them up for each; stopping"
            )

    def name(self, node: str) -> str:
        """A node's name: its IP address, with its id's start where another live node has
        that IP; a node that died and came back keeps its name."""
        if node not in self.names:
            listed = {n["NodeID"]: n for n in ray.nodes()}
            ip = listed.get(node, {}).get("NodeManagerAddress", "?")
            shared = sum(n["NodeManagerAddress"] == ip and n["Alive"] for n in listed.values())
            self.names[node] = f"{ip}/{node[:8]}" if shared > 1 or ip == "?" else ip
        return self.names[node]

    def _backups(self, after: float) -> list[tuple[float, int]]:
        """(sent, game) of the update's games in flight on one worker alone for ``after``
        seconds or more, the longest first; none while games are undealt."""
        current = [] if self.undealt else [c for c in self.calls.values() if self._current(c)]
        copies, now = Counter(c.game for c in current), time.monotonic()
        return sorted(
            (c.since, c.game) for c in current if copies[c.game] == 1 and now - c.since >= after
        )

    def _backup_after(self) -> float:
        """``BACKUP_AFTER`` times the median of the update's games answered, at least
        ``BACKUP_MIN_S``; never before one is."""
        return max(BACKUP_MIN_S, BACKUP_AFTER * statistics.median(self.took or [math.inf]))

    def _current(self, call: Call) -> bool:
        """Whether ``call`` is a game of this update not yet answered."""
        return call.game is not None and call.update == self.update and call.game not in self.done

    def _play(self, i: int, game: int) -> None:
        self.free.remove(i)
        seed, copy = game_seed(self.seed, self.update, game), next(self.dealt)
        ref = self.actors[i].compute_gradient.remote(self.model_ref, seed, copy)
        self.calls[ref] = Call(i, game, self.update, time.monotonic(), copy)

    def _describe(self, i: int) -> None:
        """Ask worker ``i`` where it is: Ray answers once it is placed."""
        self.calls[self.actors[i].describe.remote()] = Call(i, None, 0, time.monotonic())

    def _came_up(self, i: int, where: dict[str, object]) -> None:
        self.live[i] = str(where["node_id"])
        self.retry.pop(i, None)
        self.free.add(i)
        how = "up again (Ray restarted it)" if where.get("restarted") else "up"
        self.notes.append(
            f"note: RolloutWorker {i} is {how} on node {self.name(self.live[i])}; it plays from"
            f" the next game dealt ({len(self.live)} of {len(self.actors)} workers up)"
        )

    def _lost(self, call: Call, error: ray.exceptions.RayActorError) -> None:
        """Worker ``call.worker`` did not answer: its game goes back to be dealt. A live
        worker, or one whose game's call failed, is asked again where it is; one Ray calls
        unavailable (restarting), after a pause; one Ray says died for good is gone."""
        i, game = call.worker, call.game
        if self._current(call) and not any(
            c.game == game and c.update == call.update for c in self.calls.values()
        ):
            self.undealt.appendleft(game)
        self.free.discard(i)
        if self.live.pop(i, None) is not None or game is not None:
            self._describe(i)
            again = f"; game {game} goes to the next worker free" if self._current(call) else ""
            self.notes.append(
                f"note: RolloutWorker {i} was lost (its process or node){again}; it plays"
                " again once Ray restarts it, where a CPU is free"
            )
        elif isinstance(error, ray.exceptions.ActorUnavailableError):
            tries = self.retry.get(i, (0.0, 0))[1]
            self.retry[i] = (time.monotonic() + RETRY_S[min(tries, len(RETRY_S) - 1)], tries + 1)
        else:
            self.gone.add(i)
            self.retry.pop(i, None)
            self.notes.append(
                f"note: RolloutWorker {i} is gone for good ({_first_line(error)}); the run goes"
                f" on with the other {len(self.actors) - len(self.gone)}"
            )

    def _say_waiting(self) -> None:
        """While games wait and no worker is live: a line at once, then every
        ``SAY_EVERY_S``; a ``WorkerError`` past ``wait_for_workers``."""
        if self.live or not self.playing():
            self.idle_since = None
            return
        now = time.monotonic()
        if self.idle_since is None:
            self.idle_since = self.said_at = now
            self.say(f"note: no RolloutWorker is up ({self._why()}); waiting for Ray to place"
                     " or restart one (Ctrl-C stops the run)")  # fmt: skip
        elif now - self.said_at >= SAY_EVERY_S:
            self.said_at = now
            self.say(f"note: still no RolloutWorker up after {now - self.idle_since:.0f} s"
                     f" ({self._why()})")  # fmt: skip
        if self.limit is not None and now - self.idle_since >= self.limit:
            raise WorkerError(
                f"no RolloutWorker was up for {self.limit:g} s ({self._why()}); stopping, as"
                " --wait-for-workers asks"
            )

    def _why(self) -> str:
        free = ray.available_resources().get("CPU", 0)
        total = ray.cluster_resources().get("CPU", 0)
        gone = f", {len(self.gone)} gone for good" if self.gone else ""
        return (
            f"0 of {len(self.actors)} placed{gone}; {free:g} of {total:g} CPUs in the cluster free"
        )
