"""Wire compatibility with a real Ruby Sidekiq (Debian's ruby-sidekiq 6.4) on the same Redis (CORE-000, CORE-270).

Skipped when Ruby's sidekiq library is not installed; CI installs it.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from django.conf import settings

from tests.jobsapp.jobs import FailingJob, RecordJob
from tests.support import wait_for


def _ruby_sidekiq_available() -> bool:
    if not shutil.which("ruby"):
        return False
    probe = subprocess.run(["ruby", "-e", 'require "sidekiq/api"'], capture_output=True, timeout=60)
    return probe.returncode == 0


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _ruby_sidekiq_available(), reason="Ruby sidekiq not installed (apt-get install ruby-sidekiq)"),
]


def ruby(script: str) -> str:
    """Run ``script`` with Sidekiq's client API pointed at the test database."""
    result = subprocess.run(
        ["ruby", "-e", 'require "sidekiq"; require "sidekiq/api"; ' + script],
        capture_output=True, text=True, timeout=60,
        env={"REDIS_URL": settings.WURK_TEST_REDIS_URL, "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_ruby_push_runs_on_a_python_worker(redis_db, worker_factory):
    ruby('Sidekiq::Client.push("class" => "HardJob", "args" => ["from ruby", 7])')
    worker_factory("-c", "1")
    # HardJob is tests.jobsapp.jobs.RubyNamedJob's Ruby-style name (CORE-042).
    wait_for(lambda: redis_db.lrange("test:ruby", 0, -1) == [b"['from ruby', 7]"], message="the Ruby job")


@pytest.mark.parametrize("queues", [("-q", "a", "-q", "b", "-q", "c"), ("-q", "a,3", "-q", "b,2", "-q", "c,1")],
                         ids=["strict", "weighted"])
def test_a_ruby_push_wakes_an_idle_worker_on_several_queues(redis_db, worker_factory, queues):
    """Issue 25 item 4: Ruby's client writes no wake-up token, yet an idle worker serving
    several queues starts its job without waiting for a poll: the poll interval here (60 s,
    so 15 minutes between an idle thread's own looks) is far beyond the wait below."""
    worker_factory("-c", "2", *queues, env={"WURK_TEST_EXTRA": json.dumps({"FETCH_POLL_INTERVAL": 60})})
    db = int(redis_db.connection_pool.connection_kwargs.get("db", 0))
    wait_for(lambda: [c for c in redis_db.client_list()
                      if "t" in c["flags"] and int(c["db"]) == db and c["cmd"] == "evalsha"],
             timeout=60, message="the worker's push watch to arm")
    ruby('Sidekiq::Client.push("class" => "tests.jobsapp.jobs.RecordJob", "queue" => "c", "args" => ["rb"])')
    wait_for(lambda: redis_db.lrange("test:ran", 0, -1) == [b"rb"], timeout=30, message="the Ruby job")


def test_python_push_reads_in_ruby(redis_db):
    jid = RecordJob.set(queue="mail").perform_async("hi", {"n": 1})
    out = ruby('q = Sidekiq::Queue.new("mail"); j = q.first; '
               'puts [Sidekiq::Queue.all.map(&:name).join(","), q.size, j.klass, j.args.to_json, j.jid].join("|")')
    assert out == f'mail|1|tests.jobsapp.jobs.RecordJob|["hi",{{"n":1}}]|{jid}'


def test_ruby_sees_the_python_process_and_its_counters(redis_db, worker_factory):
    for i in range(5):
        RecordJob.perform_async(i)
    worker = worker_factory("-c", "3", "-q", "default", "-q", "mail")
    wait_for(lambda: redis_db.llen("test:ran") == 5, message="5 jobs")
    identity = wait_for(lambda: redis_db.smembers("processes"), message="a heartbeat").pop().decode()
    out = ruby('p = Sidekiq::ProcessSet.new.first; '
               'puts [Sidekiq::ProcessSet.new.size, p["identity"], p["concurrency"], p["queues"].join(","), '
               'p["busy"], p.stopping?].join("|")')
    size, seen, concurrency, queues, busy, stopping = out.split("|")
    assert (size, seen, concurrency, queues, stopping) == ("1", identity, "3", "default,mail", "false")
    assert 0 <= int(busy) <= 3  # as of the last beat
    worker.signal(15)
    assert worker.wait(timeout=20) == 0
    assert ruby("s = Sidekiq::Stats.new; puts [s.processed, s.failed].join('|')") == "5|0"


def test_python_retries_are_read_and_retried_by_ruby(redis_db, worker_factory):
    jid = FailingJob.perform_async("once")
    worker = worker_factory("-c", "1")
    wait_for(lambda: redis_db.zcard("retry") == 1, message="the retry entry")
    worker.stop()
    out = ruby('e = Sidekiq::RetrySet.new.first; puts [e.jid, e["retry_count"], e["error_class"], e["error_message"]].join("|")')
    assert out == f"{jid}|0|RuntimeError|once"
    # Ruby's "Retry now" moves it back onto the queue (decrementing retry_count, as we do).
    ruby("Sidekiq::RetrySet.new.first.retry")
    queued = json.loads(redis_db.lindex("queue:default", 0))
    assert queued["jid"] == jid and queued["retry_count"] == -1  # the next failure books count 0 again


def test_ruby_dead_set_and_scheduled_entries_are_ours_to_handle(redis_db):
    from wurk_django.api import DeadSet, ScheduledSet

    ruby('Sidekiq::Client.push("class" => "HardJob", "args" => [1], "at" => Time.now.to_f + 3600)')
    (entry,) = list(ScheduledSet())
    assert entry.klass == "HardJob" and entry.args == [1]
    assert entry.at.timestamp() == pytest.approx(__import__("time").time() + 3600, abs=30)
    entry.kill()
    out = ruby('d = Sidekiq::DeadSet.new; puts [d.size, d.first.klass].join("|")')
    assert out == "1|HardJob"
    assert DeadSet().size == 1
