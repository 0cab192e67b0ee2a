"""Fair fetching: no job fetched ahead waits behind a long one (issue 42).

A thread that fetches ahead holds the jobs after the one it runs in its private
list; they run when its current job ends. Behind a job of 2 ms that costs
nothing; behind a job of ten minutes it strands them while other threads idle.
One watcher thread per fetcher looks at every slot each ``TICK``: a slot whose
current job started more than ``BOUND`` ago, or that holds jobs of a queue paused
since, hands what it holds back to the fetch end of their queues, where an idle
thread (or this one, later) fetches them again, in the order they were in.

The hand-back is one Lua script per private list (``hand_back_ahead.lua``): a job
is in the private list or in its queue at every moment, so a kill -9 at any
point loses none. A job the thread starts meanwhile is not moved (the script moves
only what is still in the list, and the thread and the watcher each take a job
from the slot's deque with one atomic ``popleft``, so no job is both run and
handed back).

The watcher holds the slot's ``handing`` lock from taking the jobs until its script
has run, and a thread that finds its jobs ahead taken waits for it before its next
fetch: that fetch names the jobs it moves by their places from the oldest end of
the list, which the jobs still on their way back would shift.

What it costs the hot path: the thread writes one timestamp per job
(``FetchSlot.started``) and reads one flag per fetch, and nothing else; the watcher
sleeps while no slot holds a job ahead, and wakes every ``TICK`` while some do.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from ..threads import spawn
from .slot import FetchSlot

logger = logging.getLogger("wurk_django.worker")

#: Seconds a thread's current job may run before the jobs it holds ahead go back to
#: their queue. Measured with bench/run.py at 10 threads on 2 cores: noop jobs drain at
#: about 20,000/s (each thread ends one every 0.5 ms, waits for the interpreter
#: included), jobs with one Redis call at 8,500/s (1.2 ms), so a job past 5 ms is a
#: long one, and a noop drain of 3,000 jobs handed back once (15 jobs). The jobs
#: behind a long job would wait longer than another thread needs to fetch them.
BOUND = 0.005
#: Seconds between two looks while some slot holds jobs ahead.
TICK = 0.005
#: Seconds the watcher sleeps while no slot holds jobs ahead (a fetch ahead wakes it).
IDLE = 1.0


class AheadWatch:
    """The watcher of one fetcher's slots. ``hand_back(slot)`` gives back what a slot
    holds ahead; ``paused()`` is the fetcher's cached set of paused queues."""

    def __init__(self, slots: Callable[[], list[FetchSlot]], hand_back: Callable[[FetchSlot], int],
                 paused: Callable[[], frozenset[str]], done: threading.Event, config: object = None) -> None:
        self._slots = slots
        self._hand_back = hand_back
        self._paused = paused
        self._done = done
        self._config = config
        self._wanted = threading.Event()
        self._lock = threading.Lock()
        self._pid = 0  # the process whose watcher thread runs (a fork starts its own)
        self.handed_back = 0  # jobs handed back so far (a count for tests and logs)

    def holding(self) -> None:
        """A slot now holds jobs ahead: the watcher looks from now on (one flag read
        when it already does)."""
        if self._pid != os.getpid():
            self._start()
        if not self._wanted.is_set():
            self._wanted.set()

    def _start(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._wanted = threading.Event()
            spawn("fetch/fair", self._loop, self._config)

    def _loop(self) -> None:
        pid = os.getpid()
        while not self._done.is_set() and self._pid == pid:
            if not self.look():
                # Nothing held anywhere: sleep until a fetch ahead says so. Cleared
                # first, then looked again, so a fetch meanwhile is not missed.
                self._wanted.clear()
                if not self.look():
                    self._wanted.wait(IDLE)
                    continue
            self._done.wait(TICK)

    def look(self) -> bool:
        """Hand back what a slot holds behind a job past ``BOUND`` or of a paused queue.
        True while some slot still holds jobs ahead."""
        now = time.monotonic()
        held = False
        paused: frozenset[str] | None = None
        for slot in list(self._slots()):
            ahead = slot.ahead
            if not ahead:
                continue
            if now - slot.started > BOUND:
                self._give(slot, "its thread runs a long job")
                continue
            if paused is None:
                try:
                    paused = self._paused()
                except Exception:  # Redis unreachable: the fetch reports it; look again next tick
                    paused = frozenset()
            if paused and any(unit.queue in paused for unit in list(ahead)):
                self._give(slot, "their queue is paused")
                continue
            held = True
        return held

    def _give(self, slot: FetchSlot, why: str) -> None:
        moved = self._hand_back(slot)
        if moved:
            self.handed_back += moved
            logger.debug("handed back %d job(s) fetched ahead by slot %d: %s", moved, slot.number, why)
