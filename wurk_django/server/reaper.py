"""The reaper: brings jobs back from the private lists of dead processes (PRO-136..141, RUN-142).

Every ``SUPER_FETCH_REAPER_INTERVAL`` seconds one process in the cluster (an
``NX`` lock shared with Ruby wurk) sweeps every private list it finds, whatever
queue it belongs to: in a mixed fleet the other runtime's processes serve
queues this one does not, and their orphans must not wait for the hourly full
sweep. One ``SCAN`` of every private list costs Redis the same as the scan of
a single queue's lists (a ``MATCH`` walks the whole keyspace either way).

A Ruby wurk process that wins the shared lock sweeps only its own queues, so
when the lock is held by another runtime (its value is not ours) one of our
processes takes a lock of its own and sweeps everything too. Once an hour one
process also takes the full-sweep lock Ruby shares. At boot each process sweeps
its own queues without a lock, so a killed sibling's jobs come back as soon as
a replacement starts.

An owner is dead when:

1. it ran on this host with our nonce (a fork sibling): its pid no longer exists;
2. otherwise: its identity hash has no ``info`` (heartbeats lapse after 60 s);
   a list judged dead this way must also have been idle for
   ``REAPER_ORPHAN_GRACE`` seconds, so a booting owner that fetched before its
   first heartbeat is left alone;
3. on this host with another nonce (a restarted worker) whose heartbeat names the
   same pid scope as ours (boot id and pid namespace, :mod:`.pidspace`): its pid
   no longer exists, or now belongs to a process that started at another time.
   Judged at once, with no wait for its beats to lapse (issue 43 item 7);
4. on this host with another nonce and no scope recorded (an older version, no
   /proc) or another scope (another container under our host name): its pid does
   not exist here and its last beat is older than two beat intervals — a shortcut
   over the 60 s TTL, safe because a live process beats every 10 s.

Rule 3 is also applied apart from the sweeps: at boot and at every reaper
interval each process looks, without a lock, for heartbeats of this host and
scope whose process is gone (:meth:`Reaper.sweep_here`, one ``SMEMBERS`` and one
pipelined ``HGET`` of this host's entries when nothing is), and takes back the
lists of each, of every queue, at once.

Which jobs were running: each fetch slot names its running job in Redis
(:func:`wurk_django.keys.started`), so of a dead process's jobs only those count
a crash (PRO-150..156). The jobs it fetched ahead and never started, and those
that finished with their ACK still parked, go straight back, uncounted. A job
running when the process died goes back at once the first time; a job already
suspected in an earlier crash waits in the dead process's held list
(:data:`wurk_django.keys.HELD_SLOT`) and goes back alone, the likeliest pill
first: the next one of its queue once the one before finished or crashed again
(:mod:`.suspects`, looked at every few seconds while any is held). So a pill
cannot bring the same neighbours down with it three times, even when nothing
else is queued to space them apart. A list with no marker (a Sidekiq Pro process, or a marker that
expired under a job longer than an hour) is judged as Pro judges it: each of
its jobs counts. A list whose marker says ``?`` held a batch of jobs too short to
be named one by one: none counts. After any death with jobs running, the reaper
asks every worker to name each job for a while (:data:`wurk_django.keys.EXACT_MARKS`,
fetch/slot.py), so that a pill's next deaths are named.

How long a list has been idle comes from ``OBJECT IDLETIME``. A server that
refuses it (an LFU eviction policy, Dragonfly and other look-alikes) gets the
same grace another way: the first sweep that finds the list ownerless notes
the time and the list's length in ``super_fetch:reaper:quiet``, and a later
sweep reclaims it once ``REAPER_ORPHAN_GRACE`` seconds have passed with the
length unchanged. Nothing here needs ``CONFIG``, which managed Redis services
usually disable.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time

import redis as redis_lib

from .. import keys, payload, signals
from ..client.writer import Writer
from ..conf import Config
from ..redis.connection import get_redis
from ..redis.scripts import lua
from ..results import buried
from . import pidspace, poison
from . import suspects as suspected
from .fetch import slot as fetch_slot
from .fetch.reliable import private_list
from .fetch.slot import OLDEST, QUICK_BATCH, requeue_command
from .heartbeat import BEAT_INTERVAL
from .state import NONCE, hostname
from .threads import spawn
from .timer import TimerLoop, off_the_beat

logger = logging.getLogger("wurk_django.worker")

FULL_INTERVAL = 3600
# The shared lock's value: Ruby wurk writes "1" and never reads it; ours tells our
# processes that the holder sweeps every queue.
LOCK_MARK = "wurk_django:all-queues"
STALE_BEAT = 2 * BEAT_INTERVAL


def parse_private(key: str) -> tuple[str, str, int, str | None] | None:
    """``queue:<q>|<host>|<pid>|<nonce>|<idx>`` (or the legacy form without nonce)
    -> (public key, host, pid, nonce); parsed from the right so a ``|`` inside a
    queue name survives (PRO-112)."""
    parts = key.split("|")
    if len(parts) < 4 or not parts[-1].isdigit():
        return None
    if len(parts) >= 5 and parts[-3].isdigit():
        public = "|".join(parts[:-4])
        if public.startswith(keys.QUEUE_PREFIX) and len(public) > len(keys.QUEUE_PREFIX):
            return public, parts[-4], int(parts[-3]), parts[-2]
    if parts[-2].isdigit():
        public = "|".join(parts[:-3])
        if public.startswith(keys.QUEUE_PREFIX) and len(public) > len(keys.QUEUE_PREFIX):
            return public, parts[-3], int(parts[-2]), None
    return None


_Owner = tuple[float, "str | None", "int | None"]  # last beat, pid scope, start time


def _pid_record(info: bytes | str | None) -> tuple[str | None, int | None]:
    """The pid scope and start time a heartbeat's ``info`` records (None, None: none, or unreadable)."""
    if not info:
        return None, None
    try:
        fields = payload.loads(info)
        scope, start = fields.get("pid_scope"), fields.get("pid_started")
    except Exception:
        return None, None
    if not isinstance(scope, str):
        return None, None
    return scope, start if isinstance(start, int) and not isinstance(start, bool) else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Reaper:
    def __init__(self, queue_names: list[str], interval: float = 60, grace: float = 30,
                 config: Config | None = None) -> None:
        self.queue_names = queue_names
        self.config = config
        self.interval = interval
        self.grace = grace
        self.loop = TimerLoop("wurk-reaper", self.tick, lambda: self.interval, first_wait=off_the_beat(interval))
        self.boot_thread = None
        self._no_idletime = False  # set once the server refused OBJECT IDLETIME: the fallback from then on
        # The thread giving held suspects back while some are held (started processes only:
        # a Reaper made to sweep once, as tests and tools do, starts no thread).
        self._running = False
        self._stopped = threading.Event()
        self._held_lock = threading.Lock()
        self._held_thread: threading.Thread | None = None
        self._held_wanted = False

    def start(self) -> None:
        self._running = True
        self._stopped.clear()
        self.loop.start()
        self.boot_thread = spawn("boot-reclaim", self.boot_sweep)

    def stop(self) -> None:
        self._stopped.set()
        self.loop.stop()
        if self.boot_thread is not None:
            self.boot_thread.join(5)
        held = self._held_thread
        if held is not None:
            held.join(5)

    def boot_sweep(self) -> int:
        try:
            return self.sweep_here() + self.sweep(full=False)
        except redis_lib.RedisError as exc:
            logger.warning("boot reclaim skipped, Redis unavailable: %s", exc)
            return 0

    def tick(self) -> None:
        redis = get_redis(config=self.config)
        # Every process, lock or not: a process of this host that is gone is told by its pid.
        self.sweep_here()
        ttl = max(int(self.interval), 1)
        swept = False
        if redis.set(keys.REAPER_LOCK, LOCK_MARK, nx=True, ex=ttl):
            self.sweep(full=True)
            swept = True
        elif self._held_elsewhere(redis) and redis.set(keys.REAPER_OTHERS_LOCK, 1, nx=True, ex=ttl):
            self.sweep(full=True)
            swept = True
        # Taken even after a sweep of everything, so a Ruby process skips its hourly scan too.
        if redis.set(keys.REAPER_FULL_LOCK, 1, nx=True, ex=FULL_INTERVAL) and not swept:
            self.sweep(full=True)
        if redis.exists(keys.HELD_INDEX):
            self.watch_held()  # held by a process that died since, or whose watcher stopped
        if swept:
            # The process sweeping for the cluster also marks the records of jobs a Ruby process buried.
            try:
                buried.sweep(redis)
            except redis_lib.RedisError as exc:
                logger.warning("could not read the dead set for buried jobs' result records: %s", exc)

    @staticmethod
    def _held_elsewhere(redis: redis_lib.Redis) -> bool:
        """Whether the shared lock's holder is a process that sweeps only its own queues."""
        holder = redis.get(keys.REAPER_LOCK)
        return holder is not None and holder != LOCK_MARK.encode()

    def sweep(self, full: bool) -> int:
        """Reclaim orphaned private lists, of every queue (``full``) or of this process's
        queues; returns how many jobs moved."""
        redis = get_redis(config=self.config)
        patterns = [keys.PRIVATE_ALL] if full else [keys.private_pattern(name) for name in self.queue_names]
        return self._sweep(redis, patterns, 1000 if full else 100)

    def sweep_here(self) -> int:
        """Take back the private lists, of every queue, of the processes that ran on this
        host under this process's pid scope and are gone (rule 3 above); returns how many
        jobs moved. Costs one ``SMEMBERS`` and one pipelined ``HGET`` of this host's
        entries when no such process is found; a ``SCAN`` per process found."""
        if pidspace.scope() is None:
            return 0
        redis = get_redis(config=self.config)
        gone = self._gone_here(redis)
        if not gone:
            return 0
        host = keys.glob_escape(hostname())
        patterns = [f"{keys.QUEUE_PREFIX}*|{host}|{pid}|{keys.glob_escape(nonce)}|*" for pid, nonce in gone]
        moved = self._sweep(redis, patterns, 1000)
        if moved:
            logger.info("took back %d job(s) of %d process(es) of this host that are gone (pids %s)", moved,
                        len(gone), ", ".join(str(pid) for pid, _ in gone))
        return moved

    @staticmethod
    def _gone_here(redis: redis_lib.Redis) -> list[tuple[int, str]]:
        """(pid, nonce) of the identities in ``processes`` of this host and pid scope whose
        process is gone."""
        here = f"{hostname()}:"
        members = [m.decode() if isinstance(m, bytes) else m for m in redis.smembers(keys.PROCESSES)]
        mine = [m for m in members if m.startswith(here) and m.count(":") == here.count(":") + 1]
        if not mine:
            return []
        pipe = redis.pipeline(transaction=False)
        for identity in mine:
            pipe.hget(identity, "info")
        gone = []
        for identity, info in zip(mine, pipe.execute(), strict=True):
            scope, start = _pid_record(info)
            if scope is None or scope != pidspace.scope():
                continue
            pid, _, nonce = identity[len(here):].partition(":")
            if pid.isdigit() and pidspace.gone(int(pid), start):  # our own pid: started when we did
                gone.append((int(pid), nonce))
        return gone

    def _sweep(self, redis: redis_lib.Redis, patterns: list[str], count: int) -> int:
        live = self._live_owners(redis)
        # A process keeps one private list per queue and fetching thread; the lists one
        # process held for one queue are the jobs of one crash, given back together.
        crashes: dict[tuple[str, str, int, str | None], set[str]] = {}
        kept: set[tuple[str, str, int, str | None]] = set()
        for pattern in patterns:
            for key in redis.scan_iter(match=pattern, count=count):
                name = key.decode() if isinstance(key, bytes) else key
                parsed = parse_private(name)
                if parsed is None:
                    continue
                public, host, pid, nonce = parsed
                if self._alive(redis, name, host, pid, nonce, live):
                    kept.add(parsed)  # a list still in its grace keeps its siblings for the next sweep
                    continue
                crashes.setdefault(parsed, set()).add(name)
        moved = 0
        held: dict[str, list[str]] = {}
        for owner, lists in crashes.items():
            if owner in kept:
                continue
            public, host, pid, nonce = owner
            if nonce is None:
                # The legacy name (no nonce) is no process of ours: it marks nothing, every job counts.
                moved += self.drain(self._gather(redis, lists), public)
            else:
                moved += self._recover(redis, owner, lists)
                name = keys.private_queue(public[len(keys.QUEUE_PREFIX):], host, pid, nonce, keys.HELD_SLOT)
                held.setdefault(public, []).append(name)
            if self._no_idletime:
                redis.hdel(keys.REAPER_QUIET, *lists)
        names = [name for lists in held.values() for name in lists]
        if names:
            pipe = redis.pipeline(transaction=False)
            for name in names:
                pipe.llen(name)
            suspected.note_held(redis, [name for name, length in zip(names, pipe.execute(), strict=True) if length])
            released, left = self.release_held()
            moved += released
            if left:
                self.watch_held()
        return moved

    # -- held suspects (issue 42 item 4) ------------------------------------------------

    def watch_held(self) -> None:
        """Look at the held lists every ``suspected.TICK`` seconds until none holds a job
        (in a started reaper; one thread at most)."""
        if not self._running or self._stopped.is_set():
            return
        with self._held_lock:
            self._held_wanted = True
            if self._held_thread is None:
                self._held_thread = spawn("wurk-held", self._watch_held)

    def _watch_held(self) -> None:
        while not self._stopped.wait(suspected.TICK):
            with self._held_lock:
                self._held_wanted = False
            try:
                _released, left = self.release_held()
            except redis_lib.RedisError as exc:
                logger.warning("could not look at the held suspects (%s); looking again in %ss", exc, suspected.TICK)
                continue
            except Exception:
                logger.exception("could not look at the held suspects; looking again in %ss", suspected.TICK)
                continue
            with self._held_lock:
                if not left and not self._held_wanted:
                    self._held_thread = None
                    return
        with self._held_lock:
            self._held_thread = None

    def release_held(self) -> tuple[int, int]:
        """For each queue with held suspects, give the next one back alone if its turn came
        (:meth:`_release_suspect`); one process at a time across the cluster. Returns
        (jobs moved, held lists that still hold jobs)."""
        redis = get_redis(config=self.config)
        lists = suspected.held_lists(redis)
        if not lists:
            return 0, 0
        # A pass takes milliseconds; the lock's TTL only covers a process that dies in one.
        if not redis.set(keys.HELD_LOCK, 1, nx=True, ex=10):
            return 0, len(lists)  # another process looks now
        try:
            return self._release_held(redis, lists)
        finally:
            redis.delete(keys.HELD_LOCK)

    def _release_held(self, redis: redis_lib.Redis, lists: list[tuple[str, float]]) -> tuple[int, int]:
        by_queue: dict[str, list[str]] = {}
        for name, _since in lists:
            parsed = parse_private(name)
            if parsed is None or not name.endswith(f"|{keys.HELD_SLOT}"):
                redis.zrem(keys.HELD_INDEX, name)  # not a held list: nothing to give back from it
                continue
            by_queue.setdefault(parsed[0], []).append(name)
        moved = 0
        for public, names in by_queue.items():
            moved += self._release_suspect(redis, public, names)
        left = sum(1 for names in by_queue.values() for name in names if not suspected.forget_if_empty(redis, name))
        return moved, left

    def release_now(self, held_list: str, jid: str, by: str | None = None,
                    redis: redis_lib.Redis | None = None) -> str | None:
        """The Held page's "release now": give ``jid`` back from ``held_list`` at once,
        counted as its crash is (so its third crash buries it all the same), without
        waiting for its turn. ``"released"``, ``"buried"``, or None when it is not held
        there any more."""
        parsed = parse_private(held_list)
        if parsed is None or not held_list.endswith(f"|{keys.HELD_SLOT}") or not jid:
            return None
        redis = redis or get_redis(config=self.config)
        public = parsed[0]
        outcome = None
        for raw in redis.lrange(held_list, 0, -1):
            if poison.jid_of(raw) != jid:
                continue
            result = self._give_back(redis, held_list, public, raw, 1)
            if result != -1:
                outcome = "buried" if result >= poison.RECOVERY_THRESHOLD else "released"
                logger.warning("%s (jid %s), held as a poison-pill suspect, %s now%s", _class_of(raw), jid,
                               "buried as a poison pill" if outcome == "buried" else "given back",
                               f" by {by}" if by else "")
            break
        suspected.forget_if_empty(redis, held_list)
        return outcome

    def _recover(self, redis: redis_lib.Redis, owner: tuple[str, str, int, str | None], lists: set[str]) -> int:
        """Give back the jobs of one dead process's lists for one queue, judged by what its
        slots said they were running; returns how many went back to the queue.

        The jobs no crash is blamed on go back to the fetch end in the order they were
        queued: each slot's list keeps its own jobs in fetch order, and the lists of
        different slots are merged by the jobs' ``enqueued_at`` (threads fetched from one
        queue turn by turn), so the job the dead process fetched first is fetched first
        again, whichever thread held it. A slot that fetched jobs a hand-back (fair.py)
        put in front of older ones holds them out of ``enqueued_at`` order; its order is
        kept (the order it would have run them in), and the merge takes, at each step,
        the slot whose next job was queued first."""
        public, host, pid, nonce = owner
        queue = public[len(keys.QUEUE_PREFIX):]
        held = keys.private_queue(queue, host, pid, nonce, keys.HELD_SLOT)
        slots = {name: int(name.rsplit("|", 1)[1]) for name in lists}
        fetched = sorted((name for name in lists if slots[name] != keys.HELD_SLOT), key=slots.__getitem__)
        markers = redis.mget([keys.started(host, pid, str(nonce), slots[name]) for name in fetched]) if fetched else []
        suspects: list[tuple[str, bytes, bool]] = []  # (list, job, named by its slot's marker)
        innocent: list[list[tuple[str, bytes]]] = []  # per slot, the oldest first
        unnamed = 0  # lists whose slot ran a quick batch: one of its jobs, not said which
        for name, marker in zip(fetched, markers, strict=True):
            entries = redis.lrange(name, 0, -1)  # the newest first
            running = _running(marker, queue, len(entries))
            if entries and marker in (QUICK_BATCH, QUICK_BATCH.encode()):
                unnamed += 1
            # Suspects the newest first into the held list, as the slot held them.
            suspects += [(name, raw, running is not None) for index, raw in enumerate(entries)
                         if running is None or index == running]
            mine = [(name, raw) for index, raw in enumerate(entries) if running is not None and index != running]
            if mine:
                innocent.append(mine[::-1])
        in_order = list(heapq.merge(*innocent, key=lambda entry: _enqueued_at(entry[1])))
        # Suspects first to the held list; then the others, the newest first, each onto the
        # fetch end: the oldest ends nearest it.
        commands = [requeue_command(name, held, raw) for name, raw, _ in suspects]
        commands += [requeue_command(name, public, raw) for name, raw in reversed(in_order)]
        if unnamed or suspects:
            # Before the jobs are visible again: a thread of this process fetching a quick
            # batch meanwhile (its fetchers start before this sweep) would run an uncounted
            # pill unnamed once more, and the pill could end this process before the others
            # were asked, which then ran it unnamed too.
            self._ask_exact_marks(redis, queue, pid, unnamed)
        results = Writer(self.config, redis).send(commands) if commands else []
        running: list[str] = []
        for (_name, raw, known), result in zip(suspects, results, strict=False):
            if int(result or 0) and known:
                jid = poison.jid_of(raw)
                logger.warning("%s (jid %s) was running when process %s died", _class_of(raw), jid, pid)
                if jid:
                    running.append(jid)
        suspected.note_crashes(redis, running, _identity(owner))
        given = [raw for (_name, raw), result in zip(reversed(in_order), results[len(suspects):], strict=True)
                 if int(result or 0)]
        given.reverse()  # the oldest first, as they now sit from the fetch end
        for raw in given:
            poison.recovered(raw, None, self.config)
        released = self._release_new_suspects(redis, held, public)
        moved = len(given) + len(released)
        if moved:
            logger.warning("recovered %d job(s) of queue %s from process %s:%s, which is gone: %d fetched "
                           "ahead or finished (not counted), %d running when it died", moved, queue, host, pid,
                           len(given), len(released))
            signals.send(signals.jobs_recovered, "reaper", queue=queue, count=moved,
                         classes=_classes(given + released), jobs=given + released, process=_identity(owner))
        return moved

    def _ask_exact_marks(self, redis: redis_lib.Redis, queue: str, pid: int, unnamed: int) -> None:
        """A process died running jobs: every worker names each job it starts for the next
        ``EXACT_WINDOW`` seconds (this one at once, the others at their next heartbeat),
        so that if one of those jobs is a poison pill, each of its next deaths names it,
        however short the jobs around it. When its slots ran quick batches
        (slot.QUICK_BATCH, ``unnamed`` of them), their jobs go back uncounted, since none
        is known to have run: that first crash of such a pill is the one it costs in
        addition, and only when no crash came in the window before it."""
        if unnamed:
            logger.warning("process %s died running short jobs of queue %s that its %d thread(s) had marked by "
                           "batch: none is counted; every worker names each job it starts for the next %d s",
                           pid, queue, unnamed, fetch_slot.EXACT_WINDOW)
        fetch_slot.exact_for(fetch_slot.EXACT_WINDOW)
        try:
            redis.set(keys.EXACT_MARKS, "1", ex=fetch_slot.EXACT_WINDOW)
        except redis_lib.RedisError as exc:
            logger.warning("could not ask the other workers for exact marks (%s); this one marks exactly", exc)

    def _release_new_suspects(self, redis: redis_lib.Redis, held: str, public: str) -> list[bytes]:
        """Give back, counted, the held jobs no earlier crash suspected (the others stay
        for :meth:`_release_suspect`); returns the jobs this call took from ``held``."""
        entries = redis.lrange(held, 0, -1)
        if not entries:
            return []
        jids = [poison.jid_of(raw) for raw in entries]
        counters = redis.mget([keys.recovered(jid) for jid in jids if jid])
        counts = iter(counters)
        fresh = [raw for raw, jid in zip(entries, jids, strict=True) if jid is None or not int(next(counts) or 0)]
        spacing = len(fresh) + 1
        return [raw for raw in reversed(fresh) if self._reclaim(redis, held, public, raw, spacing)]

    def _release_suspect(self, redis: redis_lib.Redis, public: str, lists: list[str]) -> int:
        """Give back one job of ``public`` suspected in more than one crash, the one with
        the most recoveries (the likeliest pill), once its turn came: it runs with none
        of its fellow suspects beside it. One it buries (its third crash) never runs, so
        the next goes at once. Returns how many jobs moved."""
        candidates: list[tuple[int, str, bytes, str | None]] = []
        for held in lists:
            for raw in reversed(redis.lrange(held, 0, -1)):  # the oldest first, among equals
                jid = poison.jid_of(raw)
                count = int(redis.get(keys.recovered(jid)) or 0) if jid else 0
                candidates.append((count, held, raw, jid))
        queue = public[len(keys.QUEUE_PREFIX):]
        moved = 0
        turn = bool(candidates) and self._turn(redis, queue, candidates)
        while candidates and turn:
            best = max(candidates, key=lambda candidate: candidate[0])
            candidates.remove(best)
            count, held, raw, jid = best
            result = self._give_back(redis, held, public, raw, 1)
            if result == -1:
                continue  # another reclaimer moved it first
            moved += 1
            if result >= poison.RECOVERY_THRESHOLD:
                continue  # buried, never to run: the next one's turn is now
            if jid:
                # Its turn ends when it finished (its ACK deletes its count) or crashed again.
                redis.set(keys.paced(queue), jid, ex=suspected.RELEASE_WAIT)
            logger.warning("gave back %s (jid %s), suspected in %d crash(es), on its own", _class_of(raw), jid,
                           count + 1)
            break
        return moved

    @staticmethod
    def _turn(redis: redis_lib.Redis, queue: str, candidates: list[tuple[int, str, bytes, str | None]]) -> bool:
        """Whether the next held suspect of ``queue`` may go back: the one given back before
        it (``keys.paced``) finished, or crashed again and is held once more, or was given
        back ``RELEASE_WAIT`` seconds ago (the key lapsed)."""
        last = redis.get(keys.paced(queue))
        if last is None:
            return True
        jid = last.decode("utf-8", "replace") if isinstance(last, bytes) else str(last)
        if jid == "1":
            return False  # an earlier version's lock: one suspect per reaper interval, until it lapses
        if any(candidate[3] == jid for candidate in candidates):
            return True
        return not redis.exists(keys.recovered(jid))

    def _reclaim(self, redis: redis_lib.Redis, private: str, public: str, raw: bytes, spacing: int) -> int:
        """Move ``raw`` from ``private`` back to ``public``, counting a recovery; bury it
        when that makes it a poison pill. 1 if this call moved it."""
        return 0 if self._give_back(redis, private, public, raw, spacing) == -1 else 1

    def _give_back(self, redis: redis_lib.Redis, private: str, public: str, raw: bytes, spacing: int) -> int:
        """:meth:`_reclaim`, returning the job's recovery count (0: not counted; at the
        threshold or over, it was buried), or -1 when another reclaimer moved it first."""
        queue = public[len(keys.QUEUE_PREFIX):]
        holding = private_list(queue, slot=keys.HELD_SLOT)
        result = int(_reclaim_counted(redis, private, public, holding, raw, spacing))
        if result == -1:
            return -1  # another reclaimer moved it first
        if result >= poison.RECOVERY_THRESHOLD:
            self._bury(poison.Pill(poison.jid_of(raw), _class_of(raw), int(result), queue, ""), raw, holding)
        else:
            poison.recovered(raw, None, self.config)
        return result

    @staticmethod
    def _gather(redis: redis_lib.Redis, lists: set[str]) -> str:
        """Move the jobs of one dead process's lists for a queue into the first of them.

        ``drain`` spaces the jobs of one list apart by how many that list holds; drained
        one list at a time, the jobs of different threads' lists would go back side by
        side, and the innocent neighbours of a job that kills its worker would be fetched
        with it again (and buried with it on its third crash). Each move is one atomic
        ``LMOVE``, so a job is in exactly one list at every step, whoever else is reaping.
        """
        target, *others = sorted(lists, key=lambda name: (int(name.rsplit("|", 1)[1]), name))
        for other in others:
            count = int(redis.llen(other) or 0)
            if count:
                pipe = redis.pipeline(transaction=False)
                for _ in range(count):
                    pipe.lmove(other, target, "RIGHT", "LEFT")
                pipe.execute()
        return target

    def _live_owners(self, redis: redis_lib.Redis) -> dict[str, _Owner]:
        """identity (and its ``host:pid`` prefix) -> (last beat, pid scope, start time), for
        identities with ``info``; the scope and start time only for this host's."""
        members = [m.decode() for m in redis.smembers(keys.PROCESSES)]
        if not members:
            return {}
        pipe = redis.pipeline(transaction=False)
        for identity in members:
            pipe.hmget(identity, "info", "beat")
        here = f"{hostname()}:"
        live: dict[str, _Owner] = {}
        for identity, (info, beat) in zip(members, pipe.execute(), strict=True):
            if info is None:
                continue
            beat_at = float(beat) if beat else time.time()
            scope, start = _pid_record(info) if identity.startswith(here) else (None, None)
            live[identity] = live[identity.rsplit(":", 1)[0]] = (beat_at, scope, start)
        return live

    def live_owners(self, redis: redis_lib.Redis) -> dict[str, _Owner]:
        """The processes with a heartbeat, for :meth:`alive` (queue limits judge slots by them)."""
        return self._live_owners(redis)

    def alive(self, redis: redis_lib.Redis, key: str, host: str, pid: int, nonce: str | None,
              live: dict[str, _Owner]) -> bool:
        """Whether the owner of private list ``key`` runs, by the rules above."""
        return self._alive(redis, key, host, pid, nonce, live)

    def _alive(self, redis: redis_lib.Redis, key: str, host: str, pid: int, nonce: str | None,
               live: dict[str, _Owner]) -> bool:
        same_host = host == hostname()
        if same_host and nonce == NONCE:
            return _pid_alive(pid)
        owner = f"{host}:{pid}:{nonce}" if nonce else f"{host}:{pid}"
        entry = live.get(owner)
        if entry is not None:
            beat, scope, start = entry
            if same_host and scope is not None and scope == pidspace.scope():
                # It saw the pids we see: its pid says at once whether it runs.
                return not pidspace.gone(pid, start)
            if same_host and not _pid_alive(pid) and time.time() - beat > STALE_BEAT:
                return False
            return True
        if self.grace > 0 and self._idle_for(redis, key) < self.grace:
            return True
        return False

    def _idle_for(self, redis: redis_lib.Redis, key: str) -> float:
        """Seconds ``key`` has gone untouched, as far as this server lets us know."""
        if not self._no_idletime:
            try:
                idle = redis.object("idletime", key)
            except redis_lib.ResponseError as exc:
                # An LFU policy keeps no access time; some Redis look-alikes lack the command.
                self._no_idletime = True
                logger.info("OBJECT IDLETIME is refused (%s); the reaper times ownerless lists itself", exc)
            else:
                return float("inf") if idle is None else float(idle)
        return self._quiet_for(redis, key)

    def _quiet_for(self, redis: redis_lib.Redis, key: str) -> float:
        """Seconds since a sweep first found ``key`` ownerless at its present length: the
        first sweep starts the clock, a change of length starts it again (someone still
        uses the list)."""
        now = time.time()
        length = int(redis.llen(key) or 0)
        seen = redis.hget(keys.REAPER_QUIET, key)
        if seen is not None:
            since, _, seen_length = (seen.decode() if isinstance(seen, bytes) else seen).partition(":")
            try:
                if int(seen_length) == length:
                    return max(now - float(since), 0.0)
            except ValueError:
                pass  # unreadable: start the clock again
        pipe = redis.pipeline(transaction=False)
        pipe.hset(keys.REAPER_QUIET, key, f"{now}:{length}")
        # Entries of lists reclaimed or emptied by their owner go with the hash.
        pipe.expire(keys.REAPER_QUIET, max(int(self.grace * 20), FULL_INTERVAL))
        pipe.execute()
        return 0.0

    def drain(self, private: str, public: str) -> int:
        """Give every job back to its queue, counting the recovery (PRO-141, RUN-142).

        Each job is moved and counted by one script (``lua/reclaim.lua``): the
        count follows only a move this call made, so several reclaimers on one
        list (swarm children or pods booting together) never count a job twice.
        The poison verdict comes *before* the job is visible on its queue: a
        poison pill goes to this process's own private list, is buried, then
        removed; at every step each job sits in exactly one list, so a crash
        mid-drain loses nothing. The jobs of one crash go back spaced apart
        (see the script), so innocent neighbours of a job that kills its worker
        do not share its fate.
        """
        redis = get_redis(config=self.config)
        queue = public[len(keys.QUEUE_PREFIX):]
        # Not slot 0, where a thread of this process fetches: a job put there would move its jobs' places.
        holding = private_list(queue, slot=keys.HELD_SLOT)
        spacing = int(redis.llen(private) or 0) + 1
        moved = 0
        taken: list[bytes] = []
        while True:
            try:
                raw = redis.lindex(private, -1)
                if raw is None:
                    break
                result = _reclaim_counted(redis, private, public, holding, raw, spacing)
                if result == -1:
                    continue  # another reclaimer moved it first
                moved += 1
                taken.append(raw)
                if result >= poison.RECOVERY_THRESHOLD:
                    self._bury(poison.Pill(poison.jid_of(raw), _class_of(raw), int(result), queue, ""), raw, holding)
                else:
                    poison.recovered(raw, None, self.config)
            except Exception:
                logger.exception("reclaim of %s stopped after %d job(s); the next sweep resumes", private, moved)
                break
        if moved:
            logger.warning("recovered %d job(s) from %s, whose process is gone", moved, private)
            parsed = parse_private(private)
            signals.send(signals.jobs_recovered, "reaper", queue=queue, count=moved, classes=_classes(taken),
                         jobs=taken, process=_identity(parsed) if parsed else None)
        return moved

    def _bury(self, pill: poison.Pill, raw: bytes, holding: str) -> None:
        try:
            poison.bury_pill(pill, raw, config=self.config)  # the recovery callback hears of it there
        except Exception:
            # Still in our own private list: recovered (and judged again) after this process ends.
            logger.exception("could not bury poison pill %s; it waits in %s", pill.jid, holding)
            return
        get_redis(config=self.config).lrem(holding, 1, raw)


_RECLAIM = lua("reclaim")


def _reclaim_counted(redis: redis_lib.Redis, private: str, public: str, holding: str, raw: bytes,
                     spacing: int) -> int:
    """One ``reclaim.lua`` call: move ``raw`` back from ``private``, counting a recovery
    (a job suspected again goes to ``holding``); -1 if another reclaimer moved it first."""
    jid = poison.jid_of(raw)
    if jid is None:  # nothing to count: the processor will refuse it with its reason
        return _RECLAIM(redis, [private, public], [raw, 0, 0, spacing])
    return _RECLAIM(redis, [private, public, keys.recovered(jid), holding],
                    [raw, poison.RECOVERY_THRESHOLD, poison.RECOVERY_TTL, spacing])


def _running(marker: bytes | None, queue: str, length: int) -> int | None:
    """Which entry of a slot's list of ``queue`` (``length`` entries, the newest at 0)
    was running, by the slot's marker: None when there is no marker (then any may
    have been), -1 when none was or none is known (a quick batch's ``?``). The marker counts from the oldest end (``-1|q``, as
    ``LINDEX`` does); a process of an earlier version counted from the newest (``0|q``)."""
    if marker is None:
        return None
    text = marker.decode("utf-8", "replace") if isinstance(marker, bytes) else str(marker)
    if text == OLDEST:
        return length - 1
    if text == QUICK_BATCH:
        return -1  # one of a quick batch, not said which: none is counted (_ask_exact_marks)
    index, _, name = text.partition("|")
    from_oldest = index.startswith("-")
    digits = index[1:] if from_oldest else index
    if name != queue or not digits.isdigit():
        return -1
    place = length - int(digits) if from_oldest else int(digits)
    return place if 0 <= place < length else -1


def _enqueued_at(raw: bytes) -> float:
    """When ``raw`` was last queued, in epoch seconds (either wire format); 0 when it does
    not say, which keeps such a job where its own list put it."""
    try:
        return payload.epoch_seconds(payload.loads(raw)["enqueued_at"]) or 0.0
    except Exception:
        return 0.0


def _classes(jobs: list[bytes]) -> dict[str, int]:
    """Jobs per class, for the metrics."""
    counts: dict[str, int] = {}
    for raw in jobs:
        klass = _class_of(raw) or "unknown"
        counts[klass] = counts.get(klass, 0) + 1
    return counts


def _identity(owner: tuple[str, str, int, str | None]) -> str:
    """The dead process as its heartbeat named it: ``host:pid:nonce`` (``host:pid`` for a legacy list)."""
    _public, host, pid, nonce = owner
    return f"{host}:{pid}:{nonce}" if nonce else f"{host}:{pid}"


def _class_of(raw: bytes) -> str | None:
    try:
        return payload.loads(raw).get("class")
    except Exception:
        return None
