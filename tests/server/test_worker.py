"""End-to-end: a real ``manage.py wurk`` process against the test Redis.

Each test starts its worker through ``worker_factory`` (stopped by pid at
teardown) and checks the outcome in Redis.
"""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.fixtures import raw as fixture_raw
from tests.jobsapp.jobs import FailingJob, HeldJob, RecordJob, SlowJob, ZeroRetryJob, add_numbers
from tests.support import wait_for

pytestmark = pytest.mark.slow


def _ran(redis_db) -> list[str]:
    return [v.decode() for v in redis_db.lrange("test:ran", 0, -1)]


def _identity(redis_db) -> str:
    members = wait_for(lambda: redis_db.smembers("processes"), message="a heartbeat")
    return next(iter(members)).decode()


def test_runs_jobs_from_several_queues(redis_db, worker_factory):
    for i in range(30):
        RecordJob.perform_async(i)
    add_numbers.perform_async(2, 3)  # queue "functions"
    worker = worker_factory("-q", "default", "-q", "functions", "-c", "4")
    wait_for(lambda: len(_ran(redis_db)) == 30, message="30 jobs")
    assert sorted(map(int, _ran(redis_db))) == list(range(30))
    wait_for(lambda: redis_db.lrange("test:sums", 0, -1) == [b"5"], message="the function job")
    assert redis_db.llen("queue:default") == 0
    assert worker.stop() == 0
    # CORE-152: counters are flushed at the latest on shutdown.
    assert int(redis_db.get("stat:processed")) == 31
    assert int(redis_db.get("stat:failed") or 0) == 0


def test_c_n_runs_n_jobs_at_once_and_never_more_issue_48(redis_db, worker_factory):
    """``-c N``: N threads, each running one job at a time, and no other limit in the
    worker (issue 48 item 4 removed the run gate): with six jobs that wait to be let go,
    four run at once, and the other two start only as those end."""
    for _ in range(6):
        HeldJob.perform_async()
    worker_factory("-c", "4")
    wait_for(lambda: redis_db.llen("test:held:seen") == 4, message="four jobs running at once")
    assert sorted(int(v) for v in redis_db.lrange("test:held:seen", 0, -1)) == [1, 2, 3, 4]
    redis_db.rpush("test:held:release", *["go"] * 6)
    wait_for(lambda: redis_db.llen("test:held:seen") == 6, message="all six started")
    wait_for(lambda: int(redis_db.get("test:held:running")) == 0, message="all six ended")
    assert max(int(v) for v in redis_db.lrange("test:held:seen", 0, -1)) == 4


def test_failing_job_is_booked_in_retry_with_sidekiq_fields(redis_db, worker_factory):
    # CORE-053: the member is the job with its error fields, scored at the next attempt.
    jid = FailingJob.perform_async("kaboom")
    before = time.time()
    worker_factory("-c", "2")
    entries = wait_for(lambda: redis_db.zrange("retry", 0, -1, withscores=True), message="a retry entry")
    member, score = entries[0]
    job = json.loads(member)
    assert job["jid"] == jid
    assert job["retry_count"] == 0  # CORE-021
    assert job["error_class"] == "RuntimeError"  # CORE-025
    assert job["error_message"] == "kaboom"
    assert isinstance(job["failed_at"], int) and job["failed_at"] >= int(before * 1000) - 1000  # CORE-022
    assert "retried_at" not in job
    failed_at = job["failed_at"] / 1000
    # CORE-124: count**4 + 15 plus an integer jitter in [0, 10*(count+1)).
    assert failed_at + 15 - 1 <= score < failed_at + 15 + 10 + 1


def test_exhausted_retries_land_in_dead(redis_db, worker_factory):
    ZeroRetryJob.perform_async()  # retry: 0 -> straight to the morgue (CORE-125)
    # A job already at its last retry: retry_count 2 with retry 3 becomes 3 >= 3.
    redis_db.lpush("queue:default", json.dumps({
        "retry": 3, "queue": "default", "class": "tests.jobsapp.jobs.FailingJob", "args": ["last"],
        "jid": "a" * 24, "created_at": 1, "enqueued_at": 1, "retry_count": 2, "failed_at": 1,
        "error_message": "earlier", "error_class": "RuntimeError",
    }, separators=(",", ":")))
    worker_factory("-c", "2")
    dead = wait_for(lambda: len(redis_db.zrange("dead", 0, -1)) == 2 and redis_db.zrange("dead", 0, -1),
                    message="two dead jobs")
    jobs = {j["class"]: j for j in map(json.loads, dead)}
    zero = jobs["tests.jobsapp.jobs.ZeroRetryJob"]
    assert zero["error_class"] == "KeyError" and zero["retry_count"] == 0
    assert zero["error_backtrace"]  # backtrace = True on the class (CORE-027)
    last = jobs["tests.jobsapp.jobs.FailingJob"]
    assert last["retry_count"] == 3 and last["error_message"] == "last" and "retried_at" in last
    assert redis_db.zcard("retry") == 0


def test_term_during_a_long_job_puts_it_back_on_its_queue(redis_db, worker_factory):
    # CORE-158: the job goes back as it was pushed, so it restarts from scratch.
    jid = SlowJob.perform_async(60, "long")
    worker = worker_factory("-c", "1", "-t", "2")
    wait_for(lambda: redis_db.lrange("test:started", 0, -1) == [b"long"], message="the slow job to start")
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=15) == 0
    queued = [json.loads(j) for j in redis_db.lrange("queue:default", 0, -1)]
    assert [j["jid"] for j in queued] == [jid]  # CORE-157: requeued, unrun, unchanged
    assert "retry_count" not in queued[0]  # CORE-131: not a retry
    assert redis_db.llen("test:finished") == 0
    # A clean stop leaves nothing of the process behind.
    assert redis_db.scard("processes") == 0
    assert not redis_db.keys("*:work")


def test_clean_stop_leaves_nothing_in_redis(redis_db, worker_factory):
    worker = worker_factory("-c", "2")
    identity = _identity(redis_db)
    fields = redis_db.hgetall(identity)
    assert {b"info", b"concurrency", b"busy", b"beat", b"quiet", b"rss", b"rtt_us"} <= set(fields)  # CORE-076
    info = json.loads(fields[b"info"])
    assert info["identity"] == identity and info["concurrency"] == 2 and info["queues"] == ["default"]
    assert 0 < redis_db.ttl(identity) <= 60
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=15) == 0
    assert redis_db.scard("processes") == 0
    assert not redis_db.exists(identity, f"{identity}:work")


def test_tstp_stops_new_fetches(redis_db, worker_factory):
    # CORE-156: a worker told TSTP fetches nothing more and keeps beating.
    worker = worker_factory("-c", "2")
    identity = _identity(redis_db)
    worker.signal(signal.SIGTSTP)
    time.sleep(3)  # longer than one BRPOP block, so no fetch is still pending
    RecordJob.perform_async("after-quiet")
    time.sleep(3)
    assert redis_db.llen("queue:default") == 1
    assert _ran(redis_db) == []
    assert worker.alive()
    assert redis_db.sismember("processes", identity)  # quiet processes keep beating


def test_scheduled_job_runs_within_the_poll_interval(redis_db, worker_factory):
    RecordJob.perform_in(1, "scheduled")
    assert redis_db.zcard("schedule") == 1
    worker_factory("-c", "2", env={"WURK_TEST_EXTRA": json.dumps({"POLL_INTERVAL_AVERAGE": 1})})
    # First poll within random()*5 s of boot (CORE-147), then about every second.
    wait_for(lambda: _ran(redis_db) == ["scheduled"], timeout=12, message="the scheduled job")
    assert redis_db.zcard("schedule") == 0


def test_bad_payloads_go_to_dead_and_the_worker_keeps_running(redis_db, worker_factory):
    redis_db.lpush("queue:default", b"{not json", b'{"class":"tests.jobsapp.jobs.RecordJob"}', b"[1,2]")
    RecordJob.perform_async("fine")
    worker = worker_factory("-c", "1")
    wait_for(lambda: _ran(redis_db) == ["fine"], message="the good job")
    dead = wait_for(lambda: redis_db.zcard("dead") == 3 and redis_db.zrange("dead", 0, -1), message="3 dead")
    # CORE-110: what is not a JSON object is kept as the text received, with the reason; an
    # object gets its error.
    entries = [json.loads(d) for d in dead]
    kept = sorted(e["args"][0] for e in entries if e["class"] == "<unparseable>")
    assert kept == ["[1,2]", "{not json"]
    assert all(e["error_message"] for e in entries)
    (invalid,) = [e for e in entries if e["class"] != "<unparseable>"]
    assert "lacks" in invalid["error_message"]
    assert worker.alive()


def test_unknown_class_retries_with_a_clear_error(redis_db, worker_factory):
    redis_db.lpush("queue:default", b'{"retry":true,"queue":"default","class":"Nowhere::Job","args":[],"jid":"'
                   + b"b" * 24 + b'","created_at":1,"enqueued_at":1}')
    worker_factory("-c", "1")
    entries = wait_for(lambda: redis_db.zrange("retry", 0, -1), message="the retry entry")
    job = json.loads(entries[0])
    assert job["error_class"] == "wurk_django.errors.UnknownJobClass"  # CORE-045
    assert "Nowhere::Job" in job["error_message"]


def test_ruby_sidekiq_7_and_8_payloads_are_processed(redis_db, worker_factory):
    # HardJob is the Ruby-style name of tests.jobsapp.jobs.RubyNamedJob (CORE-042).
    redis_db.lpush("queue:default", fixture_raw("sidekiq7_perform_async"), fixture_raw("sidekiq8_unknown_keys"))
    worker_factory("-c", "1")
    ran = wait_for(lambda: redis_db.llen("test:ruby") == 2 and redis_db.lrange("test:ruby", 0, -1), message="2 jobs")
    assert ran == [b"['bob', 5]", b"['bob', 5]"]


def test_unknown_keys_survive_a_retry(redis_db, worker_factory):
    # CORE-037: `locale`, `cattr` and any other key pass through untouched.
    job = json.loads(fixture_raw("sidekiq8_unknown_keys"))
    job["class"] = "tests.jobsapp.jobs.FailingJob"
    redis_db.lpush("queue:default", json.dumps(job, separators=(",", ":")))
    worker_factory("-c", "1")
    entries = wait_for(lambda: redis_db.zrange("retry", 0, -1), message="the retry entry")
    booked = json.loads(entries[0])
    for key in ("bid", "tags", "locale", "cattr", "custom"):  # CORE-010
        assert booked[key] == job[key]


def test_dashboard_term_signal_stops_the_process(redis_db, worker_factory):
    """RUN-304: a standalone worker re-delivers a dashboard TERM to itself: the normal stop."""
    worker = worker_factory("-c", "1")
    identity = _identity(redis_db)
    redis_db.lpush(f"{identity}-signals", "TERM")  # what the API's Process.stop() writes (CORE-168)
    assert worker.wait(timeout=25) == 0  # acted on at the next beat (<= 10 s), then drained
    assert redis_db.scard("processes") == 0


def test_ttin_writes_every_threads_stack_to_the_log(redis_db, worker_factory, tmp_path):
    logfile = tmp_path / "worker.log"  # a file handler on wurk_django: what the log sees, not stderr
    worker = worker_factory("-c", "2", settings="tests.server.settings_ops", env={"WURK_TEST_LOGFILE": str(logfile)})
    _identity(redis_db)
    worker.signal(signal.SIGTTIN)  # RUN-821, CORE-159
    # The dump is written a thread at a time: wait for the threads it must name, not for its
    # first lines (a read in between found one processor of two).
    wait_for(lambda: logfile.exists() and "thread heartbeat (" in logfile.read_text()
             and logfile.read_text().count("thread default/processor (") >= 2, message="the dump in the log")
    text = logfile.read_text()
    assert text.count("thread default/processor (") == 2
    assert 'File "' in text and "in run" in text  # the stacks themselves, not only the names
    assert worker.alive()


def test_ttin_logs_thread_stacks(redis_db, worker_factory):
    worker = worker_factory("-c", "2")
    _identity(redis_db)
    worker.signal(signal.SIGTTIN)
    wait_for(lambda: "default/processor" in worker.output() and "Thread" in worker.output(),
             message="a thread dump")
    assert worker.alive()


def test_bad_flag_and_unknown_setting_exit_1(redis_db, worker_factory):
    bad_flag = worker_factory("-c", "zero")
    assert bad_flag.wait(timeout=30) == 1
    assert "'zero' is not a whole number" in bad_flag.output()
    bad_setting = worker_factory(env={"WURK_TEST_EXTRA": json.dumps({"CONCURENCY": 3})})
    assert bad_setting.wait(timeout=30) == 1
    assert "CONCURENCY" in bad_setting.output() and "CONCURRENCY" in bad_setting.output()


def test_unreachable_redis_is_retried_not_a_traceback(redis_db, worker_factory):
    worker = worker_factory(env={"WURK_TEST_EXTRA": json.dumps({"REDIS_URL": "redis://127.0.0.1:1/15"})})
    wait_for(lambda: "unreachable" in worker.output(), message="the retry message")
    assert worker.alive()
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=10) == 0
    assert "Traceback" not in worker.output()


def test_expired_job_is_skipped_and_acknowledged(redis_db, worker_factory):
    """CORE-257: extra `stat:expired` counters."""
    from tests.jobsapp.jobs import ExpiringJob

    ExpiringJob.perform_async("late")  # expires_in = 1 s (PRO-310)
    RecordJob.perform_async("fresh")
    time.sleep(1.2)
    worker = worker_factory("-c", "1")
    wait_for(lambda: _ran(redis_db) == ["fresh"], message="the fresh job")
    wait_for(lambda: "skipping expired job" in worker.output(), message="the skip log line")  # PRO-311
    assert redis_db.llen("queue:default") == 0
    assert redis_db.zcard("retry") == 0 and redis_db.zcard("dead") == 0
    assert worker.stop() == 0
    assert not [k for k in redis_db.scan_iter(match="queue:*|*") if redis_db.llen(k)]  # acknowledged
    # Counted at the final flush (RUN-704): expired on its own key, and processed as a run.
    day = time.strftime("%Y-%m-%d", time.gmtime())
    assert redis_db.get("stat:expired") == b"1" and redis_db.get(f"stat:expired:{day}") == b"1"
    assert redis_db.ttl(f"stat:expired:{day}") > 0
    assert redis_db.get("stat:processed") == b"2" and redis_db.get("stat:failed") == b"0"


LINE = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z pid=\d+ tid=[0-9a-z]+ "


def test_job_log_has_a_start_and_a_done_line_per_job_in_order(redis_db, worker_factory):
    """CORE-228 through the batching writer (RUN-706): lines appear while the worker runs,
    one start before one done per jid, and nothing queued is lost at a TERM."""
    import re

    jids = [RecordJob.perform_async(i) for i in range(40)]
    worker = worker_factory("-c", "4")
    # Written by the background writer within its interval, long before the worker stops.
    wait_for(lambda: worker.output().count("INFO: done") == 40, message="40 done lines while running")
    assert worker.alive()
    RecordJob.perform_async("last")
    wait_for(lambda: "last" in _ran(redis_db), message="the last job")
    assert worker.stop() == 0
    lines = worker.output().splitlines()
    for jid in jids:
        mine = [line for line in lines if f"jid={jid}" in line]
        assert len(mine) == 2, mine
        assert re.fullmatch(LINE + rf"jid={jid} class=tests\.jobsapp\.jobs\.RecordJob INFO: start", mine[0])
        assert re.fullmatch(LINE + rf"jid={jid} class=tests\.jobsapp\.jobs\.RecordJob elapsed=\d+\.\d+ INFO: done",
                            mine[1])
    assert sum("INFO: done" in line for line in lines) == 41


def test_json_job_log_is_one_object_per_line(redis_db, worker_factory):
    jid = FailingJob.perform_async("json please")
    worker = worker_factory("-c", "2", "--log-format", "json")
    wait_for(lambda: redis_db.zcard("retry") == 1, message="the retry entry")
    assert worker.stop() == 0
    records = [json.loads(line) for line in worker.output().splitlines() if line.startswith("{")]
    mine = [r for r in records if r.get("ctx", {}).get("jid") == jid]
    assert [r["msg"] for r in mine] == ["start", "fail"]
    assert mine[1]["ctx"]["class"] == "tests.jobsapp.jobs.FailingJob" and mine[1]["ctx"]["elapsed"] >= 0
    assert all({"ts", "pid", "tid", "lvl", "logger"} <= set(r) for r in records)


@pytest.mark.parametrize("autodiscover", [None, []], ids=["default", "off"])
def test_dj_045_the_worker_imports_each_apps_jobs_module_at_start(redis_db, worker_factory, autodiscover):
    """DJ-045: a worker imports every installed app's ``jobs`` and ``tasks`` modules
    (``WURK["AUTODISCOVER"]``) before it fetches, so a job pushed under a registered name
    (``HardJob``, declared in tests/jobsapp/jobs.py and imported by nothing else) runs;
    with ``AUTODISCOVER: []`` the name is unknown and the job goes to the retry set."""
    extra = {} if autodiscover is None else {"AUTODISCOVER": autodiscover}
    raw = {"class": "HardJob", "args": ["found"], "queue": "default", "jid": "a" * 24, "retry": True,
           "created_at": time.time() * 1000}
    redis_db.lpush("queue:default", json.dumps(raw))
    worker_factory("-c", "1", env={"WURK_TEST_EXTRA": json.dumps(extra)})
    if autodiscover is None:
        wait_for(lambda: redis_db.lrange("test:ruby", 0, -1) == [b"['found']"], timeout=30, message="HardJob to run")
    else:
        wait_for(lambda: redis_db.zcard("retry") == 1, timeout=30, message="the unknown class to be retried")
        assert redis_db.lrange("test:ruby", 0, -1) == []


def test_dj_041_one_command_fetches_polls_the_schedule_leads_cron_and_beats(redis_db, worker_factory):
    """DJ-041: a single ``manage.py wurk`` runs everything: its fetchers run a pushed job,
    its poller a scheduled one, it takes the lead and its cron fires a periodic job, and
    it beats. No other process runs here."""
    from tests.periodic.test_processes import EVERY_MINUTE, LEADER

    env = {"WURK_TEST_EXTRA": json.dumps({"LEADER": LEADER, "PERIODIC": [EVERY_MINUTE]}),
           "WURK_TEST_CLOCK": f"{time.time():.3f},12"}  # a cron minute in 5 s
    worker = worker_factory("-c", "2", env=env)
    identity = _identity(redis_db)
    RecordJob.perform_async("pushed")
    RecordJob.perform_in(1, "scheduled")
    wait_for(lambda: sorted(_ran(redis_db)) == ["pushed", "scheduled"], timeout=30, message="both jobs")
    assert f":{worker.pid}:" in wait_for(lambda: redis_db.get("dear-leader"), timeout=30, message="the lead").decode()
    wait_for(lambda: redis_db.llen("test:cron"), timeout=30, message="the cron job to fire and run")
    assert redis_db.sismember("processes", identity) and redis_db.hget(identity, "beat")
