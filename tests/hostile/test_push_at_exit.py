"""Issue 12, item 10: a short-lived process never loses a push silently while Redis is down."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import redis

from tests.support import ROOT, RedisServer, free_port
from wurk_django.client import reliable_push

pytestmark = pytest.mark.slow

PORT = free_port()  # nothing listens here unless a test starts it (never a fixed port: the CI runs two suites side by side)
SCRIPT = """
import django
django.setup()
from tests.jobsapp.jobs import RecordJob
print("PUSHED", RecordJob.perform_async("from a cron script"), flush=True)
"""


def _script(script: str = SCRIPT, **wurk) -> subprocess.Popen:
    extra = {"REDIS_URL": f"redis://127.0.0.1:{PORT}/0", **wurk}
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "WURK_TEST_EXTRA": json.dumps(extra)}
    return subprocess.Popen([sys.executable, "-c", script], cwd=str(ROOT), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_undelivered_jobs_are_reported_by_jid_at_exit():
    proc = _script(RELIABLE_PUSH_EXIT_WAIT=1)
    out, err = proc.communicate(timeout=60)
    jid = out.split()[-1]
    assert len(jid) == 24
    assert f"job {jid} (tests.jobsapp.jobs.RecordJob, queue default) was NOT delivered" in err
    assert "1 pushed job(s) lost at exit" in err
    assert proc.returncode == reliable_push.EXIT_PUSHES_LOST  # issue 28 item 11: a cron script can tell


def test_a_loss_at_exit_overrides_a_clean_exit_status():
    """issue 28 item 11: even a script that ends with ``sys.exit(0)`` exits non-zero when
    its pushes were lost."""
    proc = _script(SCRIPT + "import sys\nsys.exit(0)\n", RELIABLE_PUSH_EXIT_WAIT=0.5)
    out, err = proc.communicate(timeout=60)
    assert "PUSHED" in out and "lost at exit" in err
    assert proc.returncode == reliable_push.EXIT_PUSHES_LOST == 75


def test_the_report_is_at_error_level(caplog, monkeypatch):
    from wurk_django.conf import Config

    class DownWriter:
        config = Config({"RELIABLE_PUSH_EXIT_WAIT": 0, "RELIABLE_PUSH_SPOOL": False})

        def write(self, *args, **kwargs):
            raise redis.ConnectionError("down")

    buffer = reliable_push.PushBuffer()
    monkeypatch.setattr(reliable_push, "_buffers", {"test": buffer})  # one buffer per Redis
    monkeypatch.setattr(reliable_push.PushBuffer, "_run", lambda self, writer: None)  # no background flusher
    buffer.add(DownWriter(), ([{"jid": "j1", "class": "C", "queue": "q"}], [], False), redis.ConnectionError("down"))
    assert reliable_push._at_exit() == 1
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any("job j1 (C, queue q) was NOT delivered" in m for m in errors)


def test_with_a_spool_the_jobs_are_saved_and_the_report_names_the_file(caplog, monkeypatch, tmp_path):
    """Issue 43 item 2: what the exit could not deliver goes to the spool folder; one
    ERROR says how many and where, and nothing counts as lost."""
    from wurk_django.client import push_spool
    from wurk_django.conf import Config

    class DownWriter:
        config = Config({"REDIS_URL": "redis://127.0.0.1:1/0", "RELIABLE_PUSH_EXIT_WAIT": 0,
                         "RELIABLE_PUSH_SPOOL": str(tmp_path)})

        def write(self, *args, **kwargs):
            raise redis.ConnectionError("down")

    buffer = reliable_push.PushBuffer()
    monkeypatch.setattr(reliable_push, "_buffers", {"test": buffer})
    monkeypatch.setattr(reliable_push.PushBuffer, "_run", lambda self, writer: None)
    group = ([{"jid": "j1", "class": "C", "queue": "q"}, {"jid": "j2", "class": "C", "queue": "q"}], [], False)
    buffer.add(DownWriter(), group, redis.ConnectionError("down"))
    assert reliable_push._at_exit() == 0
    [saved] = tmp_path.glob("push-*.spool")
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [f"2 job(s) not delivered before exit were saved to {saved}: Redis redis://127.0.0.1:1/0 stayed "
                      "unreachable. The next process that pushes to it, or the next worker booting, with the same "
                      "WURK['RELIABLE_PUSH_SPOOL'], pushes them"]
    _header, groups, done = push_spool.parse(saved.read_bytes())
    assert [[job["jid"] for job in jobs] for jobs, _extra, _front in groups] == [["j1", "j2"]] and not done


def test_buffered_jobs_are_delivered_if_redis_returns_before_the_wait_ends():
    proc = _script(RELIABLE_PUSH_EXIT_WAIT=20)
    server = RedisServer()
    server.port, server.url = PORT, f"redis://127.0.0.1:{PORT}/0"
    try:
        jid = proc.stdout.readline().split()[-1]
        server.start()  # while the exiting process is still retrying
        _out, err = proc.communicate(timeout=60)
        client = redis.Redis(port=PORT)
        queued = [json.loads(raw)["jid"] for raw in client.lrange("queue:default", 0, -1)]
        client.close()
        assert queued == [jid]
        assert "NOT delivered" not in err
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        server.stop()


def test_reliable_push_off_raises_at_the_call_site():
    proc = _script(RELIABLE_PUSH=False)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "PUSHED" not in out and "ConnectionError" in err
