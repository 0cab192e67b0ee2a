#!/usr/bin/env python
"""The cost of ``within_limit`` on an uncontended limiter (measurement only).

    BENCH_REDIS_URL=redis://127.0.0.1:6379/9 python bench/limiter.py

For each limiter type: Redis round trips and commands per call, counted on the
client's connections, and microseconds per call (single thread, best of 3).
Every limiter has room to spare, so this is the price of the bookkeeping alone;
a bare ``PING`` gives the loopback round trip it is made of. Deletes only its
own ``bench-*`` limiter keys; flushes nothing.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "wurk_settings")

import django  # noqa: E402

django.setup()

from redis.connection import AbstractConnection  # noqa: E402

from wurk_django import limiter  # noqa: E402
from wurk_django.redis import wire  # noqa: E402
from wurk_django.redis.connection import get_redis  # noqa: E402

N = int(os.environ.get("LIMITER_N", "5000"))
counts = {"round_trips": 0, "commands": 0}


def count_traffic() -> None:
    """A request leaves either through redis-py's ``send_packed_command`` or through
    :func:`wurk_django.redis.wire.exchange`: one call, one round trip."""
    send_packed = AbstractConnection.send_packed_command
    send_command = AbstractConnection.send_command
    pack_commands = AbstractConnection.pack_commands

    def counted_send_packed(self, command, check_health=True):
        counts["round_trips"] += 1
        return send_packed(self, command, check_health)

    def counted_send_command(self, *args, **kwargs):
        counts["commands"] += 1  # its round trip is counted in send_packed_command
        return send_command(self, *args, **kwargs)

    def counted_pack_commands(self, commands):
        commands = list(commands)
        counts["commands"] += len(commands)
        return pack_commands(self, commands)

    def counted_exchange(conn, commands, *rest):
        counts["round_trips"] += 1
        counts["commands"] += len(commands)
        return exchange(conn, commands, *rest)

    exchange = wire.exchange
    wire.exchange = counted_exchange  # the packed path (connection.send_on) bypasses redis-py's writer
    AbstractConnection.send_packed_command = counted_send_packed
    AbstractConnection.send_command = counted_send_command
    AbstractConnection.pack_commands = counted_pack_commands


def noop() -> None:
    return None


def measure(label: str, call) -> None:
    for _ in range(200):
        call()
    before = dict(counts)
    call()
    rts, cmds = counts["round_trips"] - before["round_trips"], counts["commands"] - before["commands"]
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(N):
            call()
        best = min(best, (time.perf_counter() - started) / N)
    print(f"| {label} | {rts} | {cmds} | {best * 1e6:.0f} |")


def main() -> None:
    count_traffic()
    r = get_redis()
    big = 10**9
    cases = [
        ("bare `PING` (one loopback round trip)", r.ping),
        ("`unlimited()`", lambda u=limiter.unlimited(): u.within_limit(noop)),
        ("`concurrent(n, 1000)`", lambda c=limiter.concurrent("bench-c", 1000): c.within_limit(noop)),
        ("`window(n, 1e9, \"second\")`", lambda w=limiter.window("bench-w", big, "second"): w.within_limit(noop)),
        ("`bucket(n, 1e9, \"second\")`", lambda b=limiter.bucket("bench-b", big, "second"): b.within_limit(noop)),
        ("`leaky(n, 1e9, \"second\")`", lambda lk=limiter.leaky("bench-l", big, "second"): lk.within_limit(noop)),
        ("`points(n, 1e12, 1e9)`, estimate=1",
         lambda p=limiter.points("bench-p", 10**12, big): p.within_limit(noop, estimate=1)),
    ]
    print(f"{N} calls per pass, best of 3, one thread\n")
    print("| call | round trips | commands | us per call |")
    print("|---|---|---|---|")
    try:
        for label, call in cases:
            measure(label, call)
    finally:
        for key in r.scan_iter(match="lmtr*bench-*"):
            r.delete(key)
        r.srem("lmtr-list", "bench-c", "bench-w", "bench-b", "bench-l", "bench-p")


if __name__ == "__main__":
    main()
