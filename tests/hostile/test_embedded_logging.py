"""Issue 12, item 14: under gunicorn with no LOGGING for wurk, embedded jobs still log their lines."""

from __future__ import annotations

import json
import signal

import pytest

from tests.support import wait_for
from tests.test_embedded import Gunicorn, embedded_boots, servers, test_redis_url  # noqa: F401 - fixtures

pytestmark = pytest.mark.slow


def test_gunicorn_without_logging_config_shows_embedded_job_lines(redis_db, servers, test_redis_url):  # noqa: F811
    server = Gunicorn(redis_url=test_redis_url, workers=1, env={"WURK_TEST_NO_LOGGING": "1"})
    servers.append(server)
    wait_for(lambda: redis_db.scard("processes") == 1, timeout=30, message="the embedded heartbeat")
    status, body = server.get("/enqueue/logged/")
    assert status == 200
    jid = json.loads(body)["jid"]
    wait_for(lambda: redis_db.lrange("test:ran", 0, -1) == [b"logged"], timeout=30, message="the job to run")
    wait_for(lambda: f"jid={jid}" in server.output() and "INFO: done" in server.output(), timeout=10,
             message="the job's log lines")
    assert server.stop(signal.SIGTERM) == 0
    output = server.output()
    assert embedded_boots(output)  # the boot line too
    assert any(f"jid={jid}" in line and "INFO: start" in line for line in output.splitlines())
