"""One racing process for the push-policy race test: ``python -m tests.policies.racer <threads>``.

Waits for the test to set ``test:race:go``, then its threads push the same debounced job
and the same throttled job at the same instant; prints the jids (or nulls) it got as JSON.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import django


def main() -> None:
    django.setup()
    from tests.jobsapp.policy_jobs import Ping, SlowBurst
    from wurk_django.redis.connection import get_redis

    threads = int(sys.argv[1])
    redis = get_redis()
    redis.ping()
    redis.rpush("test:race:ready", "1")
    barrier = threading.Barrier(threads)
    results: dict[str, list] = {"debounced": [None] * threads, "throttled": [None] * threads}

    def push(i: int) -> None:
        barrier.wait()
        results["debounced"][i] = SlowBurst.perform_async(i)
        results["throttled"][i] = Ping.perform_async(i)

    workers = [threading.Thread(target=push, args=(i,)) for i in range(threads)]
    deadline = time.monotonic() + 30
    while not redis.exists("test:race:go"):
        if time.monotonic() > deadline:
            raise SystemExit("no start signal")
        time.sleep(0.005)
    for t in workers:
        t.start()
    for t in workers:
        t.join(30)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
