"""Issue 12, item 12: a Redis outage gives one WARNING per component and one line on recovery."""

from __future__ import annotations

import json
import re
import time
from collections import Counter

import pytest
import redis

from tests.jobsapp.jobs import TraceJob
from tests.support import RedisServer, free_port, wait_for

pytestmark = pytest.mark.slow

PORT = free_port()  # never a fixed port: the CI runs two suites side by side


def test_ten_second_outage_logs_one_line_per_component_and_no_traceback(redis_db, worker_factory, capsys):
    """CORE-108: fetch errors: report once per outage, retry, log recovery; RUN-605: behaviour of each component during
    an outage."""
    server = RedisServer()
    server.port, server.url = PORT, f"redis://127.0.0.1:{PORT}/0"
    server.start()
    try:
        client = redis.Redis.from_url(server.url, socket_connect_timeout=0.5, socket_timeout=2)
        from wurk_django.client.push import Client

        pusher = Client(redis=client)
        jids = [pusher.push({"class": TraceJob, "args": [0.01]}) for _ in range(20)]
        extra = {"REDIS_URL": server.url, "SUPER_FETCH_REAPER_INTERVAL": 1, "POLL_INTERVAL_AVERAGE": 1}
        worker = worker_factory("-c", "3", env={"WURK_TEST_EXTRA": json.dumps(extra)})
        wait_for(lambda: client.llen("test:runs") == 20, timeout=30, message="the first jobs")
        wait_for(lambda: client.scard("processes") == 1, timeout=15, message="a heartbeat")
        time.sleep(1)
        before = len(worker.output().splitlines())
        server.stop()
        time.sleep(10)
        server.start()
        later = [pusher.push({"class": TraceJob, "args": [0.01]}) for _ in range(5)]
        wait_for(lambda: client.llen("test:runs") == 25, timeout=30, message="jobs after the outage")
        time.sleep(11)  # one more heartbeat and stat flush after Redis is back
        assert worker.alive()
        assert worker.stop() == 0
        lines = worker.output().splitlines()[before:]
        during = [line for line in lines if "WARNING" in line or "ERROR" in line]
        failed = Counter(m.group(1) for line in during if (m := re.search(r"(?:WARNING|ERROR): (.+?) failed", line)))
        recovered = [line for line in during if "recovered after" in line]
        with capsys.disabled():
            print(f"\n[outage log] outage_s=10 warning_or_error_lines={len(during)} "
                  f"components={dict(failed)} recovery_lines={len(recovered)}")
            if any(n > 1 for n in failed.values()) or "Traceback" in "\n".join(lines):
                print("\n".join(lines))
        assert "Traceback" not in "\n".join(lines)
        assert failed and all(n == 1 for n in failed.values())
        assert len(recovered) <= len(failed)
        assert len(during) <= 2 * len(failed) + 2
        assert set(jids) | set(later) <= {r.decode() for r in client.lrange("test:runs", 0, -1)}
        client.close()
    finally:
        server.stop()
