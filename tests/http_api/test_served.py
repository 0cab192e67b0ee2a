"""The HTTP API served on its own (``manage.py wurk_http_api``), spoken to over real HTTP by
the docs' curl script and Ruby client, with real workers running what it pushed: a Python
worker, and a Ruby Sidekiq 6.4 worker for a class only Ruby defines (issue 47 item 1)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from django.conf import settings

from tests.http_api.conftest import ADMIN, ENQUEUER, TOKENS
from tests.redis_servers import free_port
from tests.support import ROOT, stop_process, wait_for, wurk_settings
from wurk_django import payload

EXTRA = {"HTTP_API_TOKENS": TOKENS,
         "HTTP_API_JOB_CLASSES": ["tests.jobsapp.jobs.RecordJob", "RubyWorker", "shop.jobs.SendReceipt"]}


def _ruby_sidekiq() -> bool:
    return bool(shutil.which("ruby") and shutil.which("sidekiq")) and subprocess.run(
        ["ruby", "-e", 'require "sidekiq"'], capture_output=True, timeout=60).returncode == 0


def _call(base: str, method: str, path: str, token: str, body=None) -> tuple[int, dict]:
    request = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _answers(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/openapi.json", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture
def served():
    """``manage.py wurk_http_api`` on a free port of WURK_TEST_PORTS; its /v1 URL. Stopped by pid."""
    port = free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "WURK_TEST_EXTRA": json.dumps(EXTRA),
           "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "wurk_http_api", "--bind", f"127.0.0.1:{port}"],
                            cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        wait_for(lambda: _answers(base) or proc.poll() is not None, timeout=60, message="the HTTP API to answer")
        assert proc.poll() is None, proc.stdout.read().decode(errors="replace")
        yield base
    finally:
        stop_process(proc, signal.SIGTERM, 10)
        proc.stdout.close()


def test_a_job_pushed_over_http_runs_on_a_worker(served, redis_db, worker_factory):
    status, answer = _call(served, "POST", "/jobs", ENQUEUER, {"class": "tests.jobsapp.jobs.RecordJob",
                                                               "args": ["over http"]})
    assert status == 201
    jid = answer["jid"]
    assert _call(served, "GET", f"/jobs/{jid}?queue=default", ADMIN)[1]["state"] == "queued"
    worker_factory("-c", "1")
    wait_for(lambda: redis_db.lrange("test:ran", 0, -1) == [b"over http"], timeout=60, message="the job to run")
    # It keeps no status record: once it left its queue and its worker's work, it is unknown.
    wait_for(lambda: _call(served, "GET", f"/jobs/{jid}?queue=default", ADMIN)[0] == 404, timeout=30,
             message="the job to leave every list")
    # Listed once its first heartbeat is written (the job may run before that).
    processes = wait_for(lambda: _call(served, "GET", "/processes", ADMIN)[1]["processes"], timeout=30,
                         message="the worker to be listed")
    assert len(processes) == 1 and "default" in processes[0]["queues"]


def test_the_server_refuses_to_start_without_tokens():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    result = subprocess.run([sys.executable, str(ROOT / "manage.py"), "wurk_http_api", "--bind", "127.0.0.1:1"],
                            cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "HTTP_API_TOKENS" in result.stderr


@pytest.mark.skipif(not shutil.which("curl"), reason="no curl")
def test_the_docs_curl_script_pushes_and_reads(served, redis_db):
    env = {"PATH": os.environ["PATH"], "WURK_URL": served, "WURK_TOKEN": ADMIN}
    result = subprocess.run(["sh", str(ROOT / "docs" / "http-api" / "push.sh")], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    (job,) = [payload.loads(raw) for raw in redis_db.zrange("schedule", 0, -1)]
    assert (job["class"], job["args"], job["queue"]) == ("shop.jobs.SendReceipt", [42], "mail")
    assert f'"jid": "{job["jid"]}", "state": "scheduled"' in result.stdout
    again = subprocess.run(["sh", str(ROOT / "docs" / "http-api" / "push.sh")], env=env, capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0 and redis_db.zcard("schedule") == 1  # the Idempotency-Key held


@pytest.mark.skipif(not shutil.which("ruby"), reason="no ruby")
def test_the_docs_ruby_client_pushes_and_reads(served, redis_db):
    env = {"PATH": os.environ["PATH"], "WURK_URL": served, "WURK_TOKEN": ADMIN}
    result = subprocess.run(["ruby", str(ROOT / "docs" / "http-api" / "client.rb")], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    (job,) = [payload.loads(raw) for raw in redis_db.lrange("queue:mail", 0, -1)]
    assert (job["class"], job["args"]) == ("shop.jobs.SendReceipt", [42])
    assert result.stdout.split() == [job["jid"], "queued"]


@pytest.mark.skipif(not _ruby_sidekiq(), reason="Ruby sidekiq not installed (apt-get install ruby-sidekiq)")
def test_a_ruby_class_pushed_over_http_runs_on_ruby_sidekiq(served, redis_db, tmp_path):
    status, answer = _call(served, "POST", "/jobs", ENQUEUER,
                           {"class": "RubyWorker", "args": ["from http", 7, {"k": [1, None]}], "queue": "ruby"})
    assert status == 201
    log = (tmp_path / "sidekiq.log").open("w")
    ruby = subprocess.Popen(["sidekiq", "-r", str(ROOT / "tests" / "http_api" / "ruby_worker.rb"), "-q", "ruby",
                             "-c", "1", "-t", "2"],
                            env={"PATH": "/usr/bin:/bin", "REDIS_URL": settings.WURK_TEST_REDIS_URL},
                            cwd=str(tmp_path), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: redis_db.llen("test:ruby-ran") == 1 or ruby.poll() is not None, timeout=90,
                 message="Ruby Sidekiq to run the job")
        assert ruby.poll() is None, (tmp_path / "sidekiq.log").read_text()
        assert json.loads(redis_db.lindex("test:ruby-ran", 0)) == ["from http", 7, {"k": [1, None]}]
        assert redis_db.zcard("retry") == 0 and redis_db.zcard("dead") == 0
    finally:
        stop_process(ruby, signal.SIGTERM, 15)
        log.close()
    assert answer["jid"]


def test_a_running_job_s_status_is_running(http_api, redis_db, worker_factory):
    with wurk_settings(HTTP_API_JOB_CLASSES=["tests.jobsapp.jobs.SlowJob"]):
        api = http_api()
        # Tracked: a job with a record is looked for in the workers' private lists too, so it
        # reads running before its worker's next heartbeat lists it.
        jid = api.post("/jobs", {"class": "tests.jobsapp.jobs.SlowJob", "args": [4, "http"], "track": True}).json()["jid"]
        worker_factory("-c", "1")
        wait_for(lambda: redis_db.lrange("test:started", 0, -1) == [b"http"], timeout=60, message="the job to start")
        status = api.get(f"/jobs/{jid}").json()
        refused = api.delete(f"/jobs/{jid}")
        if not redis_db.lrange("test:finished", 0, -1):  # still running when both were read (it sleeps 4 s)
            assert (status["state"], status["queue"], status["class"]) == ("running", "default",
                                                                            "tests.jobsapp.jobs.SlowJob")
            assert status["started_at"] is None or status["started_at"] > 0  # None: not in its work yet
            assert (refused.status_code, refused.json()["state"]) == (409, "running")
        wait_for(lambda: api.get(f"/jobs/{jid}").json()["state"] == "unknown", timeout=60, message="the job to end")
        assert redis_db.lrange("test:finished", 0, -1) == [b"http"]
