"""``WURK["WIRE_FORMAT"] = 7``: what we write reads right in Sidekiq 6.4 (issue 26 item 6, CORE-040).

Sidekiq <= 7 reads every payload timestamp as float epoch seconds and the busy
jobs of a process from ``<identity>:workers``; Sidekiq 8's integer milliseconds
are a date in the year 58886 there. Skipped without Ruby's sidekiq (Debian's
ruby-sidekiq 6.4), which CI installs.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.jobsapp.jobs import FailingJob, RecordJob, SlowJob
from tests.support import wait_for
from tests.test_ruby_interop import pytestmark as ruby_marks
from tests.test_ruby_interop import ruby
from wurk_django import payload

pytestmark = ruby_marks

SIDEKIQ7 = json.dumps({"WIRE_FORMAT": 7})


@pytest.fixture
def sidekiq7(settings):
    from wurk_django.conf import reset_config

    settings.WURK = {**settings.WURK, "WIRE_FORMAT": "sidekiq7"}
    reset_config()
    yield
    reset_config()


def _job_times_in_ruby(queue: str) -> tuple[float, float, float]:
    out = ruby(f'q = Sidekiq::Queue.new("{queue}"); j = q.first; '
               'puts [q.latency, j.enqueued_at.to_f, j.created_at.to_f].join("|")')
    latency, enqueued, created = (float(v) for v in out.split("|"))
    return latency, enqueued, created


def test_sidekiq6_reads_latency_and_dates_of_a_python_push(redis_db, sidekiq7):
    before = time.time()
    RecordJob.set(queue="mail").perform_async("hi")
    raw = payload.loads(redis_db.lindex("queue:mail", 0))
    assert isinstance(raw["enqueued_at"], float) and isinstance(raw["created_at"], float)
    latency, enqueued, created = _job_times_in_ruby("mail")
    assert 0 <= latency < 120
    assert before - 1 <= enqueued <= time.time() + 1
    assert before - 1 <= created <= enqueued + 1


def test_without_the_setting_sidekiq6_misreads_milliseconds(redis_db):
    # The failure the setting exists for: Sidekiq 8's milliseconds read as seconds.
    RecordJob.set(queue="mail").perform_async("hi")
    latency, enqueued, _created = _job_times_in_ruby("mail")
    assert latency < -1e11 and enqueued > 1e12


def test_scheduled_job_promoted_in_seconds(redis_db, sidekiq7):
    from wurk_django.conf import get_config
    from wurk_django.server.scheduler import Scheduler

    RecordJob.perform_in(1, "later")
    Scheduler(get_config()).enqueue_due(now=time.time() + 5)
    raw = payload.loads(redis_db.lindex("queue:default", 0))
    assert isinstance(raw["enqueued_at"], float)
    latency, enqueued, _created = _job_times_in_ruby("default")
    assert -30 < latency < 120 and abs(enqueued - time.time()) < 120


def test_sidekiq6_reads_a_python_retry_and_the_busy_table(redis_db, worker_factory):
    env = {"WURK_TEST_EXTRA": SIDEKIQ7}
    jid = FailingJob.perform_async("once")
    worker = worker_factory("-c", "2", env=env)
    wait_for(lambda: redis_db.zcard("retry") == 1, message="the retry entry", timeout=60)
    out = ruby('e = Sidekiq::RetrySet.new.first; puts [e.jid, Time.at(e["failed_at"]).to_f, e.at.to_f].join("|")')
    seen_jid, failed_at, retry_at = out.split("|")
    assert seen_jid == jid and abs(float(failed_at) - time.time()) < 120 and float(retry_at) > float(failed_at)

    slow = SlowJob.perform_async(60, "busy")
    wait_for(lambda: redis_db.lrange("test:started", 0, -1), message="the slow job to start", timeout=60)
    # The next beat (every 10 s) writes the busy table.
    script = ('w = Sidekiq::Workers.new.to_a; puts w.map { |pid, tid, h| '
              '[h["queue"], h["payload"]["jid"], Time.now.to_i - h["run_at"], pid].join(",") }.join(";")')
    # The failed job's first retry (15-25 s later) may be running beside it: find the slow one.
    rows = wait_for(lambda: [row.split(",") for row in ruby(script).split(";") if f",{slow}," in row],
                    message="the slow job in Sidekiq 6's Busy table", timeout=40, interval=1)
    queue, seen, age, identity = rows[0]
    assert (queue, seen) == ("default", slow) and 0 <= int(age) < 120
    assert redis_db.exists(f"{identity}:work") and redis_db.exists(f"{identity}:workers")
    started = float(ruby('puts Sidekiq::ProcessSet.new.first["started_at"]'))
    assert abs(started - time.time()) < 300
    worker.kill()


def test_python_reads_a_sidekiq6_busy_table(redis_db):
    from wurk_django.api import WorkSet

    identity = "rails.1:99:abc"
    job = {"class": "HardJob", "args": [1], "jid": payload.new_jid(), "queue": "default", "enqueued_at": time.time()}
    redis_db.sadd("processes", identity)
    redis_db.hset(identity, mapping={"info": "{}", "busy": 1, "beat": time.time()})
    # Sidekiq 6.4's processor: the payload is the job's JSON text, run_at integer seconds.
    redis_db.hset(f"{identity}:workers", "tid1",
                  payload.dumps({"queue": "default", "payload": payload.dumps(job).decode(), "run_at": int(time.time())}))
    ((seen, tid, work),) = list(WorkSet())
    assert (seen, tid, work.queue, work.job.jid) == (identity, "tid1", "default", job["jid"])
    assert abs(work.job.enqueued_at.timestamp() - job["enqueued_at"]) < 1
