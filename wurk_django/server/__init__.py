"""The worker runtime: launcher, managers, processors, fetcher, poller, heartbeat.

Concurrency contract, in one place:

* every thread here is a daemon thread started through :func:`threads.spawn`,
  which names it and reports an uncaught exception instead of dying silently;
* shared mutable state (busy map, counters, held ACKs) lives behind a lock in
  :class:`~wurk_django.server.state.WorkerState`;
* periodic loops are :class:`~wurk_django.server.timer.TimerLoop` objects whose
  ``terminate()`` wakes a sleeper at once.
"""
