"""Dealing an update's games to the workers that are up, and following workers as they come
and go.

Game ``g`` of update ``u`` is seeded from (run seed, ``u``, ``g``)
(``pong.core.worker.game_seed``), so it is the same game whichever worker, on whichever node,
plays it, and the trainer adds the games in game order: a seed gives the same bytes with any
workers. So a game can be dealt again, to another worker, with nothing changed but who
answers first. Each worker holds one CPU, so Ray places at most one per CPU, and a worker it
cannot place yet waits (an autoscaling cluster grows on that demand).

A worker is in one of four states; what moves it is Ray's word, never a count:

| state   | where it is kept                 | it moves on when                              |
|---------|----------------------------------|-----------------------------------------------|
| waiting | a ``describe`` call in ``calls``, | Ray answers (it is placed, or restarted): up |
|         | or ``retry`` (asked again later) | Ray says it died for good: gone               |
| free    | ``free`` (and ``up``)            | it is dealt a game: playing                   |
| playing | a game call in ``calls`` (and    | it answers: free; it is lost: waiting         |
|         | ``up``)                          |                                               |
| gone    | ``gone``                         | never (Ray's restarts of it are used up)      |

- Each free worker is dealt the update's next game; a game lost with its worker goes to the
  next worker free, lost games first.
- Once every game is dealt, a free worker takes a backup of the game in flight longest
  (MapReduce's backup tasks), once it has been in flight twice the update's median game
  and at least ``BACKUP_MIN_S``: the first answer for a game is added, and the other copy is
  told to stop (``RolloutWorker.abandon``) and never counted. A worker still busy with a game
  of an earlier update is dealt nothing until it answers: a slow node never holds an
  update back while another worker is free.
- Ray restarting a worker (``ActorUnavailableError``) is waited for, however long, asked
  again after a pause; while no worker is up the wait is said once and then every minute.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections import Counter, deque
from collections.abc import Callable
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
    """No worker can play: every one is gone for good, or none was up for the time allowed."""


class Call(NamedTuple):
    """A call in flight to worker ``worker``: a game of update ``iteration`` (``game`` None:
    a ``describe``), sent at ``since`` (``time.monotonic``), dealt as ``copy`` (a number of
    its own, which ``RolloutWorker.abandon`` names)."""

    worker: int
    game: int | None
    iteration: int
    since: float
    copy: int = -1


class Dealer:
    """An update's games dealt to ``actors`` as each is up and free; where they ran.

    Args:
        actors: the ``RolloutWorker`` handles (started or still waiting for a CPU).
        seed: the run's seed, from which every game's seed derives.
        expect: how many of ``actors`` can start at once (the cluster's CPUs): creating
            ``Dealer`` waits up to ``START_WAIT_S`` for them; the rest join when Ray
            places them.
        say: where a line goes at once (the wait for a worker); other notes are kept in
            ``notes`` for the update's end.
        wait_for_workers: seconds with no worker up after which a ``WorkerError`` stops the
            run (``None``: wait for as long as it takes).
    """

    def __init__(
        self,
        actors: list[ray.actor.ActorHandle],
        seed: int,
        expect: int = 1,
        say: Callable[[str], None] = print,
        wait_for_workers: float | None = None,
    ) -> None:
        self.actors, self.seed, self.say, self.limit = actors, seed, say, wait_for_workers
        self.calls: dict[ray.ObjectRef, Call] = {}  # in flight: games and describes
        self.dealt = itertools.count()  # each game dealt is a copy of its own
        self.up: dict[int, str] = {}  # worker -> its node's id, for the workers up
        self.free: set[int] = set()  # the workers up and not playing
        self.gone: set[int] = set()  # workers Ray will not restart again
        self.retry: dict[int, tuple[float, int]] = {}  # worker -> (when to ask again, tries)
        self.names: dict[str, str] = {}  # node id -> its name in lines and metrics
        self.iteration, self.model_ref = 0, None  # the update being dealt, and its model
        self.todo: deque[int] = deque()  # the update's games not dealt yet, lost ones first
        self.done: set[int] = set()  # the update's games answered
        self.nodes: Counter[str] = Counter()  # node name -> games of this update taken
        self.took: list[float] = []  # seconds of this update's games answered first
        self.notes: list[str] = []  # what happened to the workers, one line each
        self.idle_since: float | None = None  # since when no worker is up, while games wait
        self.said_at = 0.0  # when that wait was last said
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
        """Deal update ``iteration``'s first games, one to each worker that is up. A game of
        an earlier update still in flight (a backup, or an update stopped mid-way) is told
        to stop and never counted; its worker plays again once it answers."""
        for ref, call in list(self.calls.items()):
            if call.game is not None and call.iteration != iteration:
                self._abandon(ref, call)
        self.iteration, self.model_ref = iteration, model_ref
        self.todo, self.done, self.took = deque(range(batch_size)), set(), []
        self.nodes, self.notes = Counter(), []
        self.deal()

    def playing(self) -> bool:
        """Whether the update waits on a game, or has games left for a worker to come up."""
        return bool(self.todo) or any(self._current(c) for c in self.calls.values())

    def next_answer(self) -> ray.ObjectRef | None:
        """The next call answered (``None``: none yet), asking again the workers whose pause
        is over, and saying so while no worker is up.

        Raises:
            WorkerError: no worker was up for ``wait_for_workers`` seconds.
        """
        self._say_waiting()  # the first line at once
        now = time.monotonic()
        for i, (when, _) in list(self.retry.items()):
            if when <= now:
                self._describe(i)
        self.deal()  # the backups due by now
        due = [w for w, _ in self.retry.values()] + [now + SAY_EVERY_S]
        if self.idle_since is not None:  # the next line, or the end of the wait allowed
            due += [self.said_at + SAY_EVERY_S, self.idle_since + (self.limit or math.inf)]
        if self.free and (backups := self._backups(0.0)):  # the oldest is due for a backup then
            due.append(backups[0][0] + self._backup_after())
        pause = min(due) - now
        if self.calls:
            ready, _ = ray.wait(  # an answer is fetched only once it is known to count
                list(self.calls), num_returns=1, timeout=max(0.0, pause), fetch_local=False
            )
        else:
            time.sleep(max(0.0, pause))
            ready = []
        self._say_waiting()
        return ready[0] if ready else None

    def take(self, ref: ray.ObjectRef) -> tuple[int | None, Result | None]:
        """The answer of the call ``ref``: (its game, its result) for a game of this update
        answered first; (None, None) for anything else (a worker up, a game lost and dealt
        again, a copy of a game answered already, a game of an earlier update).

        A counted answer is fetched only once the other workers free are dealt their next
        games, so a gradient crossing a slow link holds no one up; one not counted is
        fetched to learn whether its worker was lost (an abandoned copy answers ``None``)."""
        call = self.calls.pop(ref)
        i, game = call.worker, call.game
        if game is not None and not self._current(call):  # stale, or a second copy
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError as e:
                self._lost(call, e)
                return None, None
            if i in self.up:
                self.free.add(i)
            return None, None
        if game is not None:  # counted as answered while it travels here
            self.done.add(game)
            self.deal()  # the other workers free play on meanwhile
        try:
            answer = ray.get(ref)
        except ray.exceptions.RayActorError as e:  # its process or node was lost
            self.done.discard(game)
            self._lost(call, e)
            return None, None
        if game is None:
            self._came_up(i, answer)
            return None, None
        self.free.add(i)
        if answer is None:  # it gave the game up (a copy abandoned, then needed after all)
            self.done.discard(game)
            self.todo.appendleft(game)
            return None, None
        for other, copy in list(self.calls.items()):  # the other copy of this game: stop
            if copy.game == game and copy.iteration == call.iteration:
                self._abandon(other, copy)
        self.up[i] = answer.node or self.up[i]  # a worker Ray restarted while idle may move
        self.took.append(time.monotonic() - call.since)
        self.nodes[self.name(self.up[i])] += 1
        return game, answer

    def deal(self) -> None:
        """The update's next games to the workers that are free; once every game is dealt,
        to each worker still free a backup of the game in flight longest, among those in
        flight ``BACKUP_AFTER`` times as long as the median game.

        Raises:
            WorkerError: games are left and every worker is gone for good.
        """
        while self.todo and self.free:
            self._play(min(self.free), self.todo.popleft())
        for (_, game), i in zip(
            self._backups(self._backup_after()), sorted(self.free), strict=False
        ):
            self._play(i, game)
        if self.playing() and len(self.gone) == len(self.actors):
            raise WorkerError(
                f"every RolloutWorker is gone: Ray restarts a worker up to {MAX_RESTARTS} times,"
                " and has used them up for each; stopping"
            )

    def name(self, node: str) -> str:
        """A node's name: its IP address, and its id's start where another live node has
        that IP (several nodes on one machine); a host's node that died and came back keeps
        its name."""
        if node not in self.names:
            listed = {n["NodeID"]: n for n in ray.nodes()}
            ip = listed.get(node, {}).get("NodeManagerAddress", "?")
            shared = sum(n["NodeManagerAddress"] == ip and n["Alive"] for n in listed.values())
            self.names[node] = f"{ip}/{node[:8]}" if shared > 1 or ip == "?" else ip
        return self.names[node]

    def _backups(self, after: float) -> list[tuple[float, int]]:
        """(sent, game) of the update's games played by one worker alone and in flight for
        ``after`` seconds or more, the longest first (none while games are left to deal)."""
        if self.todo:
            return []
        copies = Counter(c.game for c in self.calls.values() if self._current(c))
        now = time.monotonic()
        return sorted(
            (c.since, c.game)
            for c in self.calls.values()
            if self._current(c) and copies[c.game] == 1 and now - c.since >= after
        )

    def _backup_after(self) -> float:
        """Seconds in flight after which a game gets a backup: ``BACKUP_AFTER`` times the
        median of this update's games answered (a slow host's, given up, never count); none
        before one is."""
        if not self.took:
            return math.inf
        return max(BACKUP_MIN_S, BACKUP_AFTER * statistics.median(self.took))

    def _current(self, call: Call) -> bool:
        """Whether ``call`` is a game of this update not yet answered."""
        return (
            call.game is not None
            and call.iteration == self.iteration
            and (call.game not in self.done)
        )

    def _play(self, i: int, game: int) -> None:
        self.free.remove(i)
        seed = game_seed(self.seed, self.iteration, game)
        copy = next(self.dealt)
        ref = self.actors[i].compute_gradient.remote(self.model_ref, seed, copy)
        self.calls[ref] = Call(i, game, self.iteration, time.monotonic(), copy)

    def _abandon(self, ref: ray.ObjectRef, call: Call) -> None:
        """Tell worker ``call.worker`` to stop game ``call.game`` (at once, or as soon as it
        starts); its answer, whenever it comes, frees the worker and is not counted. (Not
        ``ray.cancel``: a worker lost meanwhile would answer "cancelled", not "lost".)"""
        self.actors[call.worker].abandon.remote(call.copy)

    def _describe(self, i: int) -> None:
        """Ask worker ``i`` where it is: Ray answers once the worker is up."""
        self.calls[self.actors[i].describe.remote()] = Call(i, None, 0, time.monotonic())

    def _came_up(self, i: int, where: dict[str, object]) -> None:
        self.up[i] = str(where["node_id"])
        self.retry.pop(i, None)
        self.free.add(i)
        how = "up again (Ray restarted it)" if where.get("restarted") else "up"
        self.notes.append(
            f"note: RolloutWorker {i} is {how} on node {self.name(self.up[i])}; it plays from"
            f" the next game dealt ({len(self.up)} of {len(self.actors)} workers up)"
        )

    def _lost(self, call: Call, error: ray.exceptions.RayActorError) -> None:
        """Worker ``call.worker`` did not answer: its game goes to another worker. Ray
        restarting it (its game's call failed, or Ray calls it unavailable) means it is
        asked again where it is, after a pause if it was the asking that failed; Ray saying
        it died for good means it is gone."""
        i, game = call.worker, call.game
        if self._current(call) and not any(
            c.game == game and c.iteration == call.iteration for c in self.calls.values()
        ):
            self.todo.appendleft(game)
        was_up = self.up.pop(i, None) is not None
        self.free.discard(i)
        if was_up or game is not None:  # a game's call lost with its process or node
            self._describe(i)
            again = f"; game {game} goes to the next worker free" if self._current(call) else ""
            self.notes.append(
                f"note: RolloutWorker {i} was lost (its process or node){again}; it plays"
                " again once Ray restarts it, where a CPU is free"
            )
        elif isinstance(error, ray.exceptions.ActorUnavailableError):  # restarting: ask later
            tries = self.retry.get(i, (0.0, 0))[1]
            self.retry[i] = (time.monotonic() + RETRY_S[min(tries, len(RETRY_S) - 1)], tries + 1)
        else:
            self.gone.add(i)
            self.retry.pop(i, None)
            self.notes.append(
                f"note: RolloutWorker {i} is gone for good ({_first_line(error)}); the run goes"
                f" on with the {len(self.actors) - len(self.gone)} left"
            )

    def _say_waiting(self) -> None:
        """While games wait and no worker is up: a line at once, then every minute; a
        ``WorkerError`` past ``wait_for_workers``."""
        if self.up or not self.playing():
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
        """What is true of the workers and the cluster's CPUs now."""
        free = ray.available_resources().get("CPU", 0)
        total = ray.cluster_resources().get("CPU", 0)
        gone = f", {len(self.gone)} gone for good" if self.gone else ""
        return (
            f"0 of {len(self.actors)} placed{gone}; {free:g} of {total:g} CPUs in the cluster free"
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
