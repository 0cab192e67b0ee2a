#!/usr/bin/env python
"""The Python a job pays for one Redis command on each client, with no network (measurement only).

    python bench/client_cost.py [--rounds 60]

A job's round trip costs the kernel's work (the write, the read, the thread's
sleep and wake-up) plus the client's own Python. This takes the kernel's part
away: the client's connection is swapped for one end of a local socket pair
whose other end has written the replies ahead, so a read never waits and what
is timed is the client. Lines go from a hand-written round trip (hiredis on
the raw socket, the floor) up to ``redis_client().incr()`` as job code writes
it. Single thread, best of
``--rounds`` rounds of 200 commands (a socket pair holds that many unread
writes), in microseconds per command. Connects once to Redis (``BENCH_REDIS_URL``,
DB 9 by default) to build the clients; nothing is written there.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "wurk_settings")

import django  # noqa: E402

django.setup()

import hiredis  # noqa: E402
import redis  # noqa: E402

from wurk_django import redis_client  # noqa: E402
from wurk_django.redis import connection, wire  # noqa: E402
from wurk_django.redis.app import FastRedis  # noqa: E402

PER_ROUND = 200
REPLY = b":1\r\n"


def pair() -> tuple[socket.socket, socket.socket]:
    mine, theirs = socket.socketpair()
    # Room for a round of unread commands on one side and of replies on the other.
    mine.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    return mine, theirs


def timed(label: str, call, theirs: socket.socket, rounds: int, before_round=None) -> None:
    best = float("inf")
    for _ in range(rounds):
        theirs.sendall(REPLY * PER_ROUND)
        if before_round is not None:
            before_round()
        started = time.perf_counter()
        for _ in range(PER_ROUND):
            call()
        best = min(best, (time.perf_counter() - started) / PER_ROUND)
        theirs.recv(8 << 20)  # the commands written, dropped
    print(f"{best * 1e6:7.2f} us  {label}")


def on_pair(client: FastRedis) -> tuple[object, socket.socket]:
    """A connection of ``client``'s pool whose socket is one end of a socket pair,
    put where ``client``'s next single command takes it from."""
    conn = client.connection_pool.get_connection()
    mine, theirs = pair()
    conn._sock.close()
    conn._sock = mine
    connection.give_back(client, conn, client._keep, 1.0)
    return conn, theirs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()

    mine, theirs = pair()
    reader, buffer = hiredis.Reader(), bytearray(65536)

    def floor() -> None:
        mine.sendall(hiredis.pack_command(("INCRBY", "n", 1)))
        reply = reader.gets()
        while reply is False:
            reader.feed(buffer, 0, mine.recv_into(buffer))
            reply = reader.gets()

    print(f"python {sys.version.split()[0]}, redis-py {redis.__version__}, fast path {'on' if wire.enabled() else 'off'}")
    timed("hiredis on the raw socket (the floor)", floor, theirs, args.rounds)

    app = redis_client()
    conn, theirs = on_pair(app)
    command = [("INCRBY", "n", 1)]

    def recent() -> None:  # used within the last second: no readiness check before writing
        wire.state_of(conn).used_at = time.monotonic()

    if app.fast_path:
        timed("wire.exchange (the write and the read)", lambda: wire.exchange(conn, command, True), theirs,
              args.rounds, recent)
        timed("connection.send_on (+ the connection's checks)",
              lambda: connection.send_on(conn, command, raise_errors=False, hold_gil=True), theirs, args.rounds, recent)
    timed("app.execute_command('INCRBY', 'n', 1)", lambda: app.execute_command("INCRBY", "n", 1), theirs,
          args.rounds, recent)
    timed("app.incr('n') (+ redis-py's command method)", lambda: app.incr("n"), theirs, args.rounds, recent)
    timed("redis_client().incr('n'), as job code writes it", lambda: redis_client().incr("n"), theirs,
          args.rounds, recent)


if __name__ == "__main__":
    main()
