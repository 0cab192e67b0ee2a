"""Client-side Redis command and round-trip counter for the wurk_django worker (measurement only).

Loaded when ``BENCH_COUNT=1``. Wraps ``redis.Redis.execute_command`` (one
command, one round trip), ``Pipeline.execute`` (its stacked commands, one
round trip; MULTI/EXEC added for transactions) and
``wurk_django.redis.connection.send_on`` (the fetch path's packed batch, one
round trip), counting per command name.
Calls made by the recorder thread are not counted. Totals are written to
``HSET bench:cmds:<pid>`` by the recorder's flusher.
"""

from __future__ import annotations

import threading
from collections import Counter

import redis
from redis.client import Pipeline

from .recorder import THREAD_NAME

_lock = threading.Lock()
commands: Counter = Counter()
round_trips = Counter()
_installed = False


def _skip() -> bool:
    return threading.current_thread().name == THREAD_NAME


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    single = redis.Redis.execute_command
    execute = Pipeline.execute

    def execute_command(self, *args, **options):
        if not isinstance(self, Pipeline) and not _skip():
            name = str(args[0]).lower() if args else "?"
            with _lock:
                commands[name] += 1
                round_trips["single:" + name] += 1
        return single(self, *args, **options)

    def pipeline_execute(self, raise_on_error=True):
        if not _skip() and self.command_stack:
            names = [str(c[0][0]).lower() for c in self.command_stack]
            if self.transaction:
                names += ["multi", "exec"]
            with _lock:
                commands.update(names)
                round_trips["pipeline:" + "+".join(sorted(set(names)))] += 1
        return execute(self, raise_on_error)

    import wurk_django.redis.connection as wurk_connection
    import wurk_django.server.fetch.reliable as wurk_fetch

    batch = wurk_connection.send_on

    def send_on(conn, cmds, **options):
        if not _skip() and cmds:
            names = [str(c[0]).lower() for c in cmds]
            with _lock:
                commands.update(names)
                round_trips["batch:" + "+".join(sorted(set(names)))] += 1
        return batch(conn, cmds, **options)

    redis.Redis.execute_command = execute_command
    Pipeline.execute = pipeline_execute
    wurk_connection.send_on = send_on  # send_commands calls it through the module
    wurk_fetch.send_on = send_on  # imported by name there


def flush(client: redis.Redis, pid: int) -> None:
    with _lock:
        data = {f"cmd:{k}": v for k, v in commands.items()}
        data.update({f"rt:{k}": v for k, v in round_trips.items()})
    if data:
        client.hset(f"bench:cmds:{pid}", mapping=data)
