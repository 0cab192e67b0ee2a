"""A fetch slot: one processor thread's share of reliable fetch (PRO-110, PRO-131).

A slot owns what a thread touches on every job: its private lists
(``queue:<q>|<host>|<pid>|<nonce>|<slot>``, one per queue), the connection its
fetch batches go out on, the jobs it fetched ahead and the ACKs it parked until
its next fetch. Only the thread holding the slot fetches into its lists or sends
on its connection, so none of this needs a lock.

Two things can reach into a held slot from another thread, and both go through
``deque`` operations that are atomic on their own: a hard shutdown takes the
parked ACKs and the jobs fetched ahead of every slot (each unit is taken by
exactly one side, so none is sent twice or dropped), and a job may be
acknowledged from whatever thread ran it (an append). A free slot (its thread
exited) is worked on by one thread at a time, taken out of the free ones meanwhile.

The slot also keeps its prefetch streak: how far ahead a thread fetches follows
the time its own recent jobs took.

And it tells Redis which of its jobs is running (``super_fetch:started:...``, see
:func:`wurk_django.keys.started`), so that when the process dies the reaper counts
a crash against that job only: not against the jobs fetched ahead behind it, which
never started, nor against those that finished with their ACK still parked. Each
fetch says "the oldest job in my lists" for nothing extra (one more command in its
round trip); starting a job fetched ahead says where it sits, counted from the oldest
end of its list, in a write whose reply is read with the next fetch's, so it costs no
wait. Only the thread holding the slot writes its marker.

That write is one ``send`` per job, which cost a noop job a fifth of its CPU (issue
48 item 5). So a batch of jobs that used less processor time than ``QUICK`` each is
marked as a whole, in its fetch: "one of these is running" (``?``). A crash in such a batch counts none of its
jobs. After any death with jobs running, the reaper that finds it sets
``super_fetch:exact_marks`` for ``EXACT_WINDOW`` seconds, during which every worker
(told by its heartbeat) names each job again: a poison pill among short jobs costs
one unnamed crash more at most (when no crash came in the window before it), and
no innocent is ever counted. A process names every job until its first heartbeat
has read that key.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from typing import Any

import redis as redis_lib

from ... import keys
from ...client.writer import Writer
from ...conf import Config
from ...redis.connection import (
    get_redis,
    packed,
    send_commands,
    send_on,
    send_packed_unanswered,
    send_unanswered,
    set_aside,
    settle,
    taken_back,
)
from ...redis.scripts import lua
from ..state import NONCE, hostname

logger = logging.getLogger("wurk_django.worker")

#: Most jobs one fetch moves when the queue is deep and the jobs are short (the
#: ``FETCH_SIZE`` setting's default).
PREFETCH = 16
#: Consecutive fetches that all hit before a thread fetches ahead.
PREFETCH_AFTER = 2
#: A thread fetches ahead only while its jobs take less than this (seconds, fetch to
#: fetch): a job fetched ahead waits for the ones before it on the same thread.
PREFETCH_MAX_GAP = 0.05
#: How much work a thread fetches ahead of itself, in seconds of its recent jobs: 16
#: jobs of 1 ms, 4 of 5 ms, 2 of 20 ms. It bounds how long a job fetched ahead can
#: wait behind the others while another thread might be free.
PREFETCH_AHEAD = 0.02
#: Seconds a slot's "running" marker lives unrefreshed. A job that outlives it and then
#: takes its process down is judged as Sidekiq Pro would judge it: every job in the
#: slot's lists counts as running. A slot that runs long jobs fetches one at a time.
MARK_TTL = 3600
#: The marker meaning "the oldest job in this slot's lists is the one running".
OLDEST = "*"
#: The marker meaning "one of the jobs of this slot's last fetch is running, not said
#: which": the jobs before it finished, those after it never started, and a crash
#: names none of them (the reaper counts none; exact marks follow, EXACT_WINDOW).
QUICK_BATCH = "?"
#: A fetch of jobs that used less processor time than this on average (seconds of the
#: thread's CPU, fetch to fetch) marks its batch with QUICK_BATCH instead of naming each
#: job as it starts. That write, one ``send`` per job, was a fifth of a noop job's CPU
#: and a quarter of that of a job making one call to a local Redis; it is under 1 % of
#: a job using 1 ms of processor. Processor time, not the clock: ten threads sharing the
#: GIL stretch a 0.1 ms job to more than 1 ms between fetches, and a job waiting on I/O
#: is long on the clock, but neither costs more than its processor time.
QUICK = 0.001
#: Seconds every worker names each job it starts after a process died running jobs (the
#: TTL of :data:`wurk_django.keys.EXACT_MARKS`): a poison pill among short jobs crashes
#: once without a name at most, then is named, counted and buried as any other.
EXACT_WINDOW = 600

# Until this moment (monotonic) this process names each job it starts. It starts at
# infinity: a process names every job until its first heartbeat has read EXACT_MARKS,
# so a worker restarted after a crash never runs a pill unnamed before it has heard.
_exact_until = float("inf")


def exact_for(seconds: float) -> None:
    """Name each job started in this process for the next ``seconds`` at least (the reaper
    found a crash that named none)."""
    global _exact_until
    until = time.monotonic() + seconds
    if _exact_until == float("inf") or until > _exact_until:
        _exact_until = until


def heard_exact_window(ttl_ms: object) -> None:
    """The heartbeat read ``PTTL`` of :data:`wurk_django.keys.EXACT_MARKS`: name each job
    started while it lives; with none, batches of short jobs go unnamed again. A key
    without a TTL (``-1``, set by hand) keeps every worker naming each job until it is
    deleted."""
    global _exact_until
    now = time.monotonic()
    if ttl_ms == -1:
        until = now + EXACT_WINDOW
    else:
        until = now + int(ttl_ms) / 1000 if isinstance(ttl_ms, int) and ttl_ms > 0 else now
    if _exact_until == float("inf") or until > _exact_until:
        _exact_until = until


def tail_mark(place: int, queue: str) -> str:
    """The marker naming the job at ``place`` from the oldest end of this slot's list of
    ``queue`` (0: the oldest), as ``LINDEX`` counts from that end: ``-1|q``, ``-2|q``...
    Counted from that end because a fetch pushes onto the other one, and the jobs the
    fair watcher hands back (fair.py) all sit on that other side of the running job:
    neither moves it, and no other thread ever has to rewrite the marker."""
    return f"-{place + 1}|{queue}"


class ReliableUnit:
    __slots__ = ("queue", "queue_key", "private", "job", "slot", "jid", "mark", "cap")

    def __init__(self, queue: str, queue_key: str, private: str, job: bytes, slot: FetchSlot) -> None:
        self.queue = queue
        self.queue_key = queue_key
        self.private = private
        self.job = job  # the exact bytes LMOVE returned: the ACK removes these (PRO-002)
        self.slot = slot
        self.jid: str | None = None
        # For a job fetched ahead: where it sits in its list, from the oldest end, when it
        # starts (the marker value, see tail_mark); None for the first job of a fetch,
        # which the fetch itself marked.
        self.mark: str | None = None
        # The slot of a capped queue this job took (its field: the private list), None
        # when its queue has no limit or the slot was freed (wurk_django/queue_limits/).
        self.cap: str | None = None

    def acknowledge(self) -> None:
        """Park the ACK in the slot that fetched the job; it rides that slot's next
        fetch, so it costs no round trip of its own (PRO-131)."""
        self.slot.parked.append(self)

    def requeue(self) -> None:
        """Back to the fetch end of its queue, only if still ours (PRO-135)."""
        Writer(self.slot.config).send([requeue_command(self.private, self.queue_key, self.job)])

    def leave(self) -> None:
        """Leave the job in its private list, for the slot's next reconcile to give back
        (the job is neither fetched ahead nor parked, so the reconcile finds it): for a
        job that cannot go back now because Redis is full. The slot reconciles once
        Redis accepts moves again; if the process ends first, the reaper moves it."""
        self.slot.reconciled = -1


def requeue_command(private: str, public: str, raw: bytes) -> tuple[Any, ...]:
    """Move ``raw`` from ``private`` back to the fetch end of ``public``, only if it is
    still there. Putting a fetched job back is not an enqueue: it goes through the
    write policy (:meth:`Writer.send`) but write hooks never see it, so a feature does
    not count the same job twice."""
    return lua("reliable_requeue").command(keys=[private, public], args=[raw])


def ack_commands(units: list[ReliableUnit]) -> list[tuple[Any, ...]]:
    """LREM each job from its private list, then one DEL of their poison counters: a job
    that finished is no longer a suspect in a crash (PRO-130, PRO-155)."""
    commands: list[tuple[Any, ...]] = []
    counters: list[str] = []
    for unit in units:
        # Searched from the tail: the fetch pushes onto the head, so the job finishing now is
        # among the oldest entries of its thread's list (at its tail when the thread ACKs in
        # the order it fetched).
        commands.append(("LREM", unit.private, -1, unit.job))
        if isinstance(unit.jid, str) and unit.jid:  # a DEL of the bare prefix would hit nothing useful
            counters.append(keys.recovered(unit.jid))
    if counters:
        # One command for every counter: Redis pays its per-command cost once, not per job.
        commands.append(("DEL", *counters))
    return commands


def _take_all(items: deque) -> list:
    """Everything in ``items``, oldest first. One ``popleft`` at a time: another thread
    taking from the same deque meanwhile gets the rest, and no item goes to both."""
    taken: list = []
    keep = taken.append
    try:
        for _ in range(len(items)):
            keep(items.popleft())
    except IndexError:
        pass
    return taken


class FetchSlot:
    """What one processor thread fetches with: slot ``number`` of process ``pid``."""

    __slots__ = ("number", "pid", "config", "parked", "ahead", "reconciled", "conn", "pool",
                 "marker", "marked", "free", "started", "most", "quick", "handing", "_marked_at", "_packed_marks",
                 "_keys", "_streak", "_last", "_brought", "_handed_back", "_cpu_at")

    def __init__(self, number: int, pid: int, config: Config, reconciled: int = 0) -> None:
        self.number = number
        self.pid = pid
        self.config = config
        self.parked: deque[ReliableUnit] = deque()  # finished jobs whose ACK rides the next fetch
        self.ahead: deque[ReliableUnit] = deque()  # fetched, not started, in queue order
        # The fetcher's reconcile generation this slot's lists were last checked at.
        self.reconciled = reconciled
        self.conn: Any = None
        self.pool: Any = None
        # How the thread holding the slot frees it (weakref.finalize of its holder), so an
        # abandonment can take the slot back from a thread that may never come back.
        self.free: Any = None
        # When the thread's current job started (monotonic): written before it takes a
        # job fetched ahead, or fetches ahead, so the fair watcher (fair.py) can tell a
        # job that outlives its bound while others wait behind it.
        self.started = 0.0
        # The most jobs one fetch moves: FETCH_SIZE (0 and 1 both mean one at a time).
        self.most = max(1, int(getattr(config, "fetch_size", PREFETCH)))
        # Whether the fetch being made is of quick jobs, named as a batch (fetch_count).
        self.quick = False
        # Held by the fair watcher from taking this slot's jobs ahead until its script that
        # hands them back has run (ReliableFetch.hand_back); see wait_for_hand_back.
        self.handing = threading.Lock()
        self._keys: dict[str, tuple[str, str]] = {}
        self.marker = keys.started(hostname(), pid, NONCE, number)
        self.marked: str | None = None  # the marker's value as last written, None when unknown
        self._marked_at = 0.0
        self._packed_marks: dict[str, bytes | None] = {}  # mark -> its SET, packed
        self._streak = 0  # fetches in a row that brought all they asked for, of short jobs
        self._last = 0.0  # monotonic time of the last fetch
        self._brought = 1  # jobs the last fetch brought
        self._handed_back = False  # some of them were handed back unrun since (take_ahead)
        self._cpu_at: float | None = None  # the thread's processor time at its last quick decision

    # -- keys and connection ------------------------------------------------

    def keys(self, name: str) -> tuple[str, str]:
        """(public, private) of queue ``name`` for this slot. The private list names its
        owner (host, pid, nonce), so the reaper can tell a dead owner's list from a live
        one's, and the slot, so an ACK searches one thread's jobs only (PRO-110)."""
        found = self._keys.get(name)
        if found is None:
            private = keys.private_queue(name, hostname(), self.pid, NONCE, self.number)
            found = self._keys[name] = (keys.queue(name), private)
        return found

    def connection(self) -> Any:
        """The connection this slot's fetch batches go out on, kept across jobs (a pool
        checkout per job cost a fifth of the hot path). It comes from a pool of its own
        (concurrency + 2), so jobs' own Redis calls never wait for one a fetcher holds."""
        conn = self.conn
        if conn is None:
            self.pool = get_redis("ack", config=self.config).connection_pool
            conn = self.conn = taken_back(self.pool.get_connection())
        return conn

    def release_connection(self) -> None:
        if self.conn is not None:
            settle(self.conn)  # the replies to its markers, read before anyone else uses it
            # Noted: an idle worker on one queue never takes it again (its thread blocks on
            # the fetch pool), and the heartbeat closes it after a minute.
            set_aside(self.pool, self.conn)
            self.conn = None

    # -- which job is running ----------------------------------------------

    def marks_oldest(self) -> bool:
        """True when the marker says "the oldest job in my lists is running" and is fresh:
        a job moved into empty lists needs no other mark."""
        return self.marked == OLDEST and time.monotonic() - self._marked_at < MARK_TTL / 2

    def batch_mark(self) -> list[tuple[Any, ...]]:
        """The command a fetch carries to say its first job (the oldest in this slot's
        lists once its ACKs ran) is the one running, or, for a quick batch
        (:meth:`fetch_count`), that one of its jobs is; none when the marker already says
        so and is fresh. The caller calls :meth:`mark_unknown` if the fetch fails."""
        now = time.monotonic()
        wanted = QUICK_BATCH if self.quick else OLDEST
        if self.marked == wanted and now - self._marked_at < MARK_TTL / 2:
            return []
        self.marked, self._marked_at = wanted, now
        return [("SET", self.marker, wanted, "EX", MARK_TTL)]

    def mark_unknown(self) -> None:
        self.marked = None

    def clear_mark(self) -> None:
        """The thread holding this slot is leaving: its marker goes, so a clean stop
        leaves no key behind (the next holder's first fetch writes one again)."""
        if self.marked is None and self.conn is None:
            return
        try:
            send_on(self.connection(), [("DEL", self.marker)], raise_errors=False)
        except redis_lib.RedisError:
            logger.debug("could not delete the marker %s; it lapses within %ss", self.marker, MARK_TTL)
        self.marked = None

    def mark_started(self, unit: ReliableUnit) -> None:
        """``unit``, fetched ahead, starts now: say where it sits before it runs. The
        bytes are in the kernel when this returns, so a job that kills the process
        next is still named. A failed write leaves the marker stale, which only
        blurs the count of a crash; the job runs either way.

        This runs before every job fetched ahead, so it is one ``send`` and little
        else: the command is packed once per place (the places repeat from fetch to
        fetch), and on the connection this slot's fetch has just used it skips the
        connect and timeout checks (issue 48 item 5). The time of the write is not
        kept: only the "oldest" mark is refreshed by age (:meth:`marks_oldest`)."""
        mark = unit.mark
        if mark is None:
            return
        data = self._packed_marks.get(mark)
        if data is None:
            data = self._pack_mark(mark)
        conn = self.conn
        try:
            if conn is None or data is None or not send_packed_unanswered(conn, data):
                send_unanswered(self.connection(), [("SET", self.marker, mark, "EX", MARK_TTL)], more=True)
        except redis_lib.RedisError:
            self.marked = None
            return
        self.marked = mark

    def _pack_mark(self, mark: str) -> bytes | None:
        cache = self._packed_marks
        if len(cache) >= 256:  # places times queues: bounded all the same
            cache.clear()
        data = cache[mark] = packed(("SET", self.marker, mark, "EX", MARK_TTL))
        return data

    # -- parked ACKs -----------------------------------------------------

    def take_parked(self) -> list[ReliableUnit]:
        return _take_all(self.parked) if self.parked else []

    def put_back(self, units: list[ReliableUnit]) -> None:
        """ACKs that could not be sent: parked again, before any parked since."""
        self.parked.extendleft(reversed(units))

    # -- jobs fetched ahead ------------------------------------------------

    def next_ahead(self) -> ReliableUnit | None:
        try:
            return self.ahead.popleft()
        except IndexError:  # a hard shutdown handed them back meanwhile
            return None

    def take_ahead(self) -> list[ReliableUnit]:
        if not self.ahead:
            return []
        # Set before the take: a thread that finds its jobs ahead gone sees it (wait_for_hand_back).
        # Also read by fetch_count: this batch was no quick one.
        self._handed_back = True
        return _take_all(self.ahead)

    def wait_for_hand_back(self) -> None:
        """Before a fetch: if jobs were taken from this slot's jobs ahead since its last
        fetch, wait until the script handing them back has run. They still sit in the
        private list, on the oldest side of whatever this fetch moves: its ``LLEN`` would
        count them, and the jobs it fetches ahead would be named by places the hand-back
        then shifts (a poison pill named by a place past the list's end went uncounted).
        One attribute read per fetch; a lock only after a hand-back."""
        if self._handed_back:
            with self.handing:
                pass

    def fetch_count(self) -> int:
        """How many jobs this slot's next fetch moves: once its last ``PREFETCH_AFTER``
        fetches all hit, with short jobs in between, about ``PREFETCH_AHEAD`` seconds
        of its jobs (at least 2, at most ``FETCH_SIZE``); else one.

        Also decides whether the batch is quick (:attr:`quick`): jobs that used under
        ``QUICK`` seconds of the thread's processor time each, outside an exact window,
        whose starts are not marked one by one. A batch whose jobs' processor time is
        not known (the thread's streak was broken by long jobs) is not quick."""
        self.quick = False
        if self._streak < PREFETCH_AFTER or self.most == 1:
            # The fetch that may complete a streak is where the next decision's processor
            # time starts; any other leaves it none (its first batch is then not quick).
            warming = self._streak == PREFETCH_AFTER - 1 and self.most != 1
            self._cpu_at = time.thread_time() if warming else None
            return 1
        # The jobs of the last fetch have all run since: their time, per job.
        now = time.monotonic()
        per_job = (now - self._last) / self._brought
        if per_job >= PREFETCH_MAX_GAP:
            self._cpu_at = None
            return 1
        # The thread's processor time since its last decision, which came just before the
        # last fetch: what the jobs that fetch brought used (a system call, once a batch).
        cpu = time.thread_time()
        cpu_per_job = QUICK if self._cpu_at is None else (cpu - self._cpu_at) / self._brought
        self._cpu_at = cpu
        # Not after a hand-back (fair.py): the jobs handed back never ran here, so the time
        # per job above reads too short, and a job that outlived its bound is no quick one.
        self.quick = cpu_per_job < QUICK and not self._handed_back and now >= _exact_until
        return min(self.most, max(2, round(PREFETCH_AHEAD / max(per_job, 1e-6))))

    def fetched(self, wanted: int, got: int) -> None:
        now = time.monotonic()
        # Short jobs: the time since the last fetch, per job that fetch brought, is under the limit.
        full = got == wanted and (now - self._last) / self._brought < PREFETCH_MAX_GAP
        self._streak = self._streak + 1 if full else 0
        self._last = now
        self._brought = max(got, 1)
        self._handed_back = False

    def forget_pace(self) -> None:
        """The next thread to hold this slot starts its own streak."""
        self._streak, self._last, self._brought, self._handed_back = 0, 0.0, 1, False
        self._cpu_at = None

    # -- reconcile -------------------------------------------------------

    def reconcile(self, names: list[str], given: dict[tuple[str, str], int] | None = None) -> int:
        """Give back every job in this slot's lists that the slot does not hold.

        Only this slot's own commands move jobs into its lists, so a job there that is
        neither fetched ahead nor parked for its ACK was moved by a command whose reply
        never arrived (or was fetched ahead and could not be handed back), and no
        thread will ever run or acknowledge it; its owner being alive, the reaper
        would never look at it either (RUN-604). The caller holds the slot, or took
        it from the free ones, and the slot's previous job is finished. ``given``, when
        passed, counts the jobs given back per (queue, private list).
        """
        known = Counter(unit.job for unit in list(self.ahead))
        known.update(unit.job for unit in list(self.parked))
        pairs = [self.keys(name) for name in names]
        client = get_redis(config=self.config)
        contents = send_commands(client, [("LRANGE", private, 0, -1) for _, private in pairs])
        commands = []
        owners: list[tuple[str, str]] = []  # (queue, private) of each command
        kept: dict[str, list[bytes]] = {}  # private -> the jobs that stay, the newest first
        for name, (public, private), jobs in zip(names, pairs, contents, strict=True):
            for raw in jobs:
                if known[raw] > 0:
                    known[raw] -= 1
                    kept.setdefault(private, []).append(raw)
                else:
                    commands.append(requeue_command(private, public, raw))
                    owners.append((name, private))
        if not commands:
            return 0
        replies = Writer(self.config, client).send(commands)
        moved = sum(int(r or 0) for r in replies)
        if given is not None:
            for owner, reply in zip(owners, replies, strict=True):
                if int(reply or 0):
                    given[owner] = given.get(owner, 0) + 1
        if moved:
            self._place_ahead(kept)
        return moved

    def _place_ahead(self, kept: dict[str, list[bytes]]) -> None:
        """A reconcile took jobs out from under the jobs fetched ahead (a stray job sits on
        the oldest side of them): name each by its new place from the oldest end. A copy
        of the same bytes that went back too leaves the place one off, which can only
        blur a crash's count."""
        for private, jobs in kept.items():
            oldest_first = jobs[::-1]
            used: set[int] = set()
            for unit in list(self.ahead):
                if unit.private != private or unit.mark is None:
                    continue
                place = next((i for i, raw in enumerate(oldest_first) if raw == unit.job and i not in used), None)
                if place is not None:
                    used.add(place)
                    unit.mark = tail_mark(place, unit.queue)
