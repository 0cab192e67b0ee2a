"""statsd / DogStatsD metrics (PRO-350, PRO-351): real UDP listeners, a real worker."""

from __future__ import annotations

import importlib
import json
import re
import socket
import sys
import threading
import time

import pytest

from tests.jobsapp.jobs import FailingJob, RecordJob
from tests.statsd.listener import UDPListener
from tests.support import StandInUnit, free_port, processor_manager, wait_for, wurk_settings
from wurk_django import Job, limiter, payload, statsd
from wurk_django.conf import problems
from wurk_django.server.run.processor import Processor
from wurk_django.statsd.client import UDPClient, format_metric

# The module, not the package's client() function of the same name.
statsd_client = importlib.import_module("wurk_django.statsd.client")

PORT = free_port()  # never a fixed port: the CI runs two suites side by side


@pytest.fixture
def listener():
    udp = UDPListener(PORT)
    yield udp
    udp.close()


@pytest.fixture(autouse=True)
def fresh_client():
    statsd.set_client(None)
    statsd.set_options(None)
    yield
    statsd.set_client(None)
    statsd.set_options(None)


def test_format_is_dogstatsd_and_tags_cannot_break_the_line():
    assert format_metric("sidekiq.jobs.count", "c", 1, ["worker:A", "queue:q"], None) == \
        "sidekiq.jobs.count:1|c|#worker:A,queue:q"
    assert format_metric("m", "d", 12.5, [], 0.5) == "m:12.5|d|@0.5"
    assert format_metric("m", "g", 3.0, ["a|b,c#d\ne"], None) == "m:3|g|#a_b_c_d_e"


def test_udp_client_sends_with_constant_tags_and_namespace(listener):
    client = UDPClient("127.0.0.1", PORT, tags=["env:test"], namespace="app")
    client.increment("sidekiq.jobs.count", tags=["queue:q"])
    client.distribution("x", 4.25)
    assert listener.wait_for("app.sidekiq.jobs.count") == ["app.sidekiq.jobs.count:1|c|#env:test,queue:q"]
    assert listener.wait_for("app.x") == ["app.x:4.25|d|#env:test"]
    client.close()


def test_udp_client_never_raises_and_counts_drops():
    # Nobody listens on this port: the kernel may refuse later sends (ICMP); none may raise.
    client = UDPClient("127.0.0.1", 7912)
    for _ in range(50):
        client.increment("nobody.listens")
    client.flush()

    class FullSocket:
        def sendto(self, data, addr):
            raise BlockingIOError("send buffer full")

        def close(self):
            pass

    client._udp = FullSocket()  # a send buffer that is always full
    before = client.dropped
    client.gauge("g", 1)
    client.gauge("g", 2)
    client.flush()
    assert client.dropped == before + 2  # one datagram of two lines, both counted
    assert client._udp is not None
    client.close()


def test_socket_is_non_blocking():
    client = UDPClient("127.0.0.1", 7912)
    sock, _addr = client._target()
    assert sock.getblocking() is False
    client.close()


def _failing_resolver(calls: list, delay: float = 0.0):
    def resolve(host, port):
        calls.append(host)
        time.sleep(delay)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return resolve


def test_a_name_that_does_not_resolve_is_looked_up_once(monkeypatch):
    """issue 28 item 2: 1,000 metrics from 8 threads cost one lookup, made off the job
    threads; the failure is remembered, and every metric is dropped and counted."""
    calls: list[str] = []
    monkeypatch.setattr(statsd_client, "resolve", _failing_resolver(calls, delay=0.2))
    client = UDPClient("statsd.invalid", 8125)

    def job_thread():
        for _ in range(125):
            statsd.emit("increment", "jobs.count", 1, ["queue:q"], to=client)

    threads = [threading.Thread(target=job_thread) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wait_for(lambda: client.dropped == 1000, message="every metric dropped and counted")
    client.flush()
    assert calls == ["statsd.invalid"]
    assert client.lookups == 1
    client.close()


def test_a_failed_lookup_is_tried_again_after_a_while(monkeypatch, listener):
    calls: list[str] = []
    monkeypatch.setattr(statsd_client, "resolve", _failing_resolver(calls))
    client = UDPClient("127.0.0.1", PORT)
    client._sender = threading.current_thread()  # no sender thread: this test flushes by hand
    client.increment("lost")
    client.flush()
    client.increment("lost")
    client.flush()
    assert calls == ["127.0.0.1"] and client.dropped == 2
    monkeypatch.undo()
    client._lookup_failed_at -= statsd_client.RETRY_LOOKUP  # the retry interval has passed
    client.increment("found")
    client.flush()
    assert listener.wait_for("found") == ["found:1|c"]
    assert client.lookups == 2


def test_a_full_queue_drops_and_counts_instead_of_waiting(monkeypatch):
    monkeypatch.setattr(statsd_client, "MAX_QUEUED", 5)
    client = UDPClient("127.0.0.1", 7912)
    client._sender = threading.current_thread()  # a sender that never comes round
    for _ in range(12):
        client.increment("pile.up")
    assert len(client._lines) == 5 and client.dropped == 7
    client.close()


def test_lines_are_packed_into_datagrams_the_agent_splits(listener):
    client = UDPClient("127.0.0.1", PORT)
    for i in range(300):
        client.gauge("packed", i, tags=["queue:q"])
    assert listener.wait_for("packed:", 300)[-1] == "packed:299|g|#queue:q"
    client.close()


def test_bad_settings_are_reported():
    assert not problems({"STATSD": {"HOST": "127.0.0.1", "PORT": 8125, "TAGS": ["a:b"]}})
    assert not problems({"STATSD": "tests.statsd.test_statsd.make_client"})
    for bad in ({"PORT": 0}, {"PORT": "8125"}, {"TAGS": "env:prod"}, {"HOST": 1}, {"BOGUS": 1}, 42):
        found = problems({"STATSD": bad})
        assert found and found[0].key == "STATSD", bad


def test_invalid_client_setting_turns_metrics_off_without_raising(caplog):
    with wurk_settings(STATSD={"CLIENT": "no.such.factory"}):
        assert statsd.client() is None
        statsd.emit("increment", "jobs.count")  # a no-op, no exception
    assert "could not be built" in caplog.text


class _Recorder:
    def __init__(self):
        self.calls = []

    def increment(self, metric, value=1, tags=None, sample_rate=None):
        self.calls.append(("increment", metric, value, tags, sample_rate))

    def histogram(self, metric, value, tags=None, sample_rate=None):
        self.calls.append(("histogram", metric, value, tags, sample_rate))


RECORDER = _Recorder()


def make_client():
    return RECORDER


def test_client_factory_setting_and_histogram_fallback():
    RECORDER.calls.clear()
    with wurk_settings(STATSD={"CLIENT": "tests.statsd.test_statsd.make_client"}):
        assert statsd.client() is RECORDER
        statsd.emit("distribution", "jobs.perform_dist", 5, ["queue:q"])
    assert RECORDER.calls == [("histogram", "sidekiq.jobs.perform_dist", 5, ["queue:q"], None)]


def test_options_and_dd_rate_override_tags_and_sample_rate():
    statsd.set_options(lambda klass, job, queue: {"tags": [f"cls:{klass}"], "sample_rate": 0.5})
    tags, rate = statsd.job_tags("A", {"dd_rate": 0.25}, "q")
    assert tags == ["cls:A"] and rate == 0.25
    statsd.set_options(None)
    assert statsd.job_tags("A", {}, "q") == (["worker:A", "queue:q"], None)


def test_client_is_rebuilt_after_fork_and_on_reassignment(monkeypatch):
    statsd.set_client(lambda: _Recorder())
    first = statsd.client()
    assert statsd.client() is first
    statsd._forked()  # what a forked child runs first
    assert statsd.client() is not first


def test_a_failing_client_never_raises():
    class Broken:
        def increment(self, *a, **k):
            raise OSError("boom")

    statsd.set_client(Broken())
    statsd.emit("increment", "jobs.count")


def test_recovered_fetch_and_poison_from_the_reaper(redis_db, listener):
    from wurk_django.server.reaper import Reaper

    healthy = payload.dumps({"class": "tests.jobsapp.jobs.RecordJob", "args": [1], "jid": "a" * 24,
                             "queue": "default"})
    pill = payload.dumps({"class": "tests.jobsapp.jobs.RecordJob", "args": [2], "jid": "b" * 24,
                          "queue": "default"})
    redis_db.set("super_fetch:recovered:" + "b" * 24, 2)  # the third recovery makes it poison
    redis_db.rpush("queue:default_private", healthy, pill)
    with wurk_settings(STATSD={"HOST": "127.0.0.1", "PORT": PORT}):
        assert Reaper(["default"]).drain("queue:default_private", "queue:default") == 2
    # Issue 26 item 5: per class, with Ruby wurk's class: tag beside Pro's worker:.
    assert listener.wait_for("sidekiq.jobs.recovered.fetch") == [
        "sidekiq.jobs.recovered.fetch:2|c|#queue:default,worker:tests.jobsapp.jobs.RecordJob,"
        "class:tests.jobsapp.jobs.RecordJob"]
    assert listener.wait_for("sidekiq.jobs.poison") == [
        "sidekiq.jobs.poison:1|c|#worker:tests.jobsapp.jobs.RecordJob,queue:default,"
        "class:tests.jobsapp.jobs.RecordJob"]


def test_recovered_push_after_an_outage(redis_db, listener):
    from wurk_django.client import reliable_push
    from wurk_django.client.writer import Writer
    from wurk_django.conf import get_config

    with wurk_settings(STATSD={"HOST": "127.0.0.1", "PORT": PORT}):
        writer = Writer(get_config())
        buffer = reliable_push.PushBuffer()
        jobs = [{"class": "X", "args": [], "jid": payload.new_jid(), "queue": "low",
                 "created_at": payload.now_ms()} for _ in range(3)]
        buffer._groups.append((jobs, [], False))
        buffer._count = 3
        assert buffer.drain(writer)
    assert redis_db.llen("queue:low") == 3
    assert listener.wait_for("sidekiq.jobs.recovered.push") == ["sidekiq.jobs.recovered.push:3|c|#queue:low"]


@pytest.mark.slow
def test_worker_process_emits_pro_metrics(redis_db, worker_factory, listener):
    RecordJob.perform_async("ok")
    FailingJob.perform_async("bad")
    expired = payload.dumps({"class": "tests.jobsapp.jobs.RecordJob", "args": ["late"], "jid": "c" * 24,
                             "queue": "default", "created_at": 1, "enqueued_at": 1, "expiry": 2})
    redis_db.lpush("queue:default", expired)
    extra = {"STATSD": {"HOST": "127.0.0.1", "PORT": PORT, "TAGS": ["env:test"]}}
    worker = worker_factory("-c", "2", env={"WURK_TEST_EXTRA": json.dumps(extra)})
    record = "worker:tests.jobsapp.jobs.RecordJob,queue:default"
    failing = "worker:tests.jobsapp.jobs.FailingJob,queue:default"
    # Every job the worker starts is counted, the expired one too (it counts in processed and,
    # skipped as if it returned, as a success; jobs.expired says which).
    counts = listener.wait_for("sidekiq.jobs.count", 2)
    assert sorted(counts) == sorted([f"sidekiq.jobs.count:2|c|#env:test,{record}",
                                     f"sidekiq.jobs.count:1|c|#env:test,{failing}"])
    assert listener.wait_for("sidekiq.jobs.success") == [f"sidekiq.jobs.success:2|c|#env:test,{record}"]
    assert listener.wait_for("sidekiq.jobs.failure") == [f"sidekiq.jobs.failure:1|c|#env:test,{failing}"]
    assert len(listener.wait_for("sidekiq.jobs.perform:", 2)) == 2
    dist = listener.wait_for("sidekiq.jobs.perform_dist", 2)
    assert all("|d|#env:test,worker:" in line for line in dist)
    # Issue 26 item 5: Ruby wurk's class: tag beside Pro's worker: and queue:.
    assert listener.wait_for("sidekiq.jobs.expired") == [
        f"sidekiq.jobs.expired:1|c|#env:test,{record},class:tests.jobsapp.jobs.RecordJob"]
    assert listener.wait_for("sidekiq.jobs.retried") == [f"sidekiq.jobs.retried:1|c|#env:test,{failing}"]
    wait_for(lambda: redis_db.zcard("retry") == 1, message="the failure in retry")
    # The per-process gauges Ruby wurk sends with each heartbeat.
    [identity] = [m.decode() for m in redis_db.smembers("processes")]
    busy = listener.wait_for("sidekiq.busy:", timeout=60)[0]
    assert re.fullmatch(rf"sidekiq\.busy:\d+\|g\|#env:test,process:{re.escape(identity)}", busy), busy
    sizes = listener.wait_for("sidekiq.queue.size:", timeout=60)
    assert f"sidekiq.queue.size:0|g|#env:test,queue:default,process:{identity}" in sizes
    # Redis's evicted_keys as the heartbeat read it, server-wide: untagged (issue 43 item 3).
    evicted = listener.wait_for("sidekiq.redis.evicted_keys:", timeout=60)[0]
    assert re.fullmatch(r"sidekiq\.redis\.evicted_keys:\d+\|g\|#env:test", evicted), evicted
    assert worker.stop() == 0
    assert b"late" not in redis_db.lrange("test:ran", 0, -1)
    # The expired job is counted where Ruby wurk counts it, and in processed as well.
    day = time.strftime("%Y-%m-%d", time.gmtime())
    assert redis_db.mget("stat:expired", f"stat:expired:{day}") == [b"1", b"1"]
    assert int(redis_db.get("stat:processed")) == 3


@pytest.mark.slow
def test_a_hanging_name_lookup_never_holds_a_job_up(redis_db, worker_factory):
    """issue 28 item 2, in a worker: the one lookup of a statsd host that does not
    resolve hangs until every job has run; no second lookup is made."""
    from tests.statsd import slow_dns

    for i in range(slow_dns.JOBS):
        RecordJob.perform_async(i)
    extra = {"STATSD": {"CLIENT": "tests.statsd.slow_dns.make_client"}}
    worker = worker_factory("-c", "5", env={"WURK_TEST_EXTRA": json.dumps(extra)})
    wait_for(lambda: redis_db.llen(slow_dns.RAN_WHEN_LOOKUP_ENDED) >= 1, timeout=60,
             message="the statsd lookup to end")
    assert int(redis_db.lindex(slow_dns.RAN_WHEN_LOOKUP_ENDED, 0)) == slow_dns.JOBS
    assert worker.stop() == 0
    assert int(redis_db.get(slow_dns.LOOKUPS)) == 1


class A(Job):
    def perform(self):
        return 1


class OverTheLimit(Job):
    retry = 3

    def perform(self, name, reschedule=None):
        options = {} if reschedule is None else {"reschedule": reschedule}
        raise limiter.OverLimit(limiter.concurrent(name, 1, **options))


A_NAME = f"{__name__}.A"
LIMITED_NAME = f"{__name__}.OverTheLimit"
A_TAGS = f"#worker:{A_NAME},queue:q"


def run_jobs(*jobs: dict) -> None:
    """Each job through the worker's real processor, in this process (queue ``q``)."""
    manager = processor_manager()
    for job in jobs:
        full = {"args": [], "queue": "q", "jid": payload.new_jid(), "retry": True, "created_at": payload.now_ms(),
                "enqueued_at": payload.now_ms(), **job}
        Processor(manager).process(StandInUnit(full, "q"))


@pytest.mark.django_db
def test_statsd_off_sends_nothing(redis_db, listener):
    run_jobs({"class": A_NAME})
    with wurk_settings(STATSD={"HOST": "127.0.0.1", "PORT": PORT}):
        # The same run once statsd is on: the datagram proves the listener would have seen one.
        run_jobs({"class": A_NAME})
    assert [line.split(":")[0] for line in listener.wait_for("sidekiq.jobs", 4)] == [
        "sidekiq.jobs.count", "sidekiq.jobs.success", "sidekiq.jobs.perform", "sidekiq.jobs.perform_dist"]


@pytest.mark.django_db
def test_a_jobs_metrics_are_aggregated_between_sends(redis_db, listener, monkeypatch):
    """Counters are summed and distributions keep every value; a sampled job's lines
    carry its rate (issue 28 item 2: two short calls per job)."""
    with wurk_settings(STATSD={"HOST": "127.0.0.1", "PORT": PORT}):
        udp = statsd.client()
        udp._sender = threading.current_thread()  # no sender thread: the test sends by hand
        run_jobs(*[{"class": A_NAME}] * 50)
        monkeypatch.setattr("random.random", lambda: 0.0)  # sampled in
        run_jobs({"class": A_NAME, "dd_rate": 0.5})
        udp.flush()
    assert listener.wait_for("sidekiq.jobs.count", 2) == [f"sidekiq.jobs.count:50|c|{A_TAGS}",
                                                         f"sidekiq.jobs.count:1|c|@0.5|{A_TAGS}"]
    assert listener.wait_for("sidekiq.jobs.success", 2)[0] == f"sidekiq.jobs.success:50|c|{A_TAGS}"
    assert len(listener.wait_for("sidekiq.jobs.perform:", 2)) == 2  # the last value per tag set
    assert len(listener.wait_for("sidekiq.jobs.perform_dist", 51)) == 51


def test_statsd_observes_jobs_without_wrapping_them():
    """Issue 28 item 2: statsd is a job observer, not a server middleware (no layer on the
    job's stack), and says nothing about a job while it is off."""
    from wurk_django import features
    from wurk_django.conf import get_config
    from wurk_django.middleware import server_chain
    from wurk_django.server.run import observers
    from wurk_django.statsd.observer import observe

    features.install("server")
    assert observe in observers.active
    assert not any("statsd" in entry.__module__ for entry in server_chain(get_config()).entries)
    assert observe({"class": "A", "args": []}, "q") is None
    with wurk_settings(STATSD={"HOST": "127.0.0.1", "PORT": PORT}):
        assert callable(observe({"class": "A", "args": []}, "q"))


@pytest.mark.django_db
def test_an_observer_that_raises_never_changes_a_jobs_outcome(redis_db, caplog):
    from wurk_django.server.run import observers

    def broken(job, queue):
        raise RuntimeError("observer broke")

    observers.register("broken", broken)
    try:
        unit = StandInUnit({"class": A_NAME, "args": [], "queue": "q", "jid": payload.new_jid()}, "q")
        Processor(processor_manager()).process(unit)
    finally:
        observers.unregister("broken")
    assert unit.acked == 1 and not redis_db.zcard("retry")
    assert "observer broke" in caplog.text


def test_names_ruby_wurk_sends_are_sent_here_too(redis_db, listener):
    """Issue 26 item 5: jobs.enqueued (after a push), jobs.rate_limited (a reschedule) and
    jobs.encryption_error (a job that cannot be decrypted), named and tagged as Ruby wurk
    sends them."""
    from wurk_django import context, features
    from wurk_django.conf import get_config
    from wurk_django.encryption.errors import DecryptionError
    from wurk_django.limiter import OverLimit
    from wurk_django.limiter.middleware import LimiterMiddleware
    from wurk_django.server import death

    features.install("server")  # a worker's receivers, as its first job would install them
    record = "worker:tests.jobsapp.jobs.RecordJob,queue:default"
    with wurk_settings(STATSD={"HOST": "127.0.0.1", "PORT": PORT}):
        # A process with statsd in its settings builds the client when its client part is
        # installed (at its first push); here the setting arrives later, so build it now.
        assert statsd.client() is not None
        RecordJob.perform_async("pushed")
        assert listener.wait_for("sidekiq.jobs.enqueued") == [f"sidekiq.jobs.enqueued:1|c|#{record}"]
        raw = redis_db.lindex("queue:default", 0)
        job = payload.loads(raw)
        where = context.JobContext(get_config(), redis_db, raw, queue="default", job=job)
        with context.scope(where):
            LimiterMiddleware().handle(OverLimit(None, message="erp is full"), job, "default", where)
        assert listener.wait_for("sidekiq.jobs.rate_limited") == [f"sidekiq.jobs.rate_limited:1|c|#{record}"]
        with context.scope(context.JobContext(get_config(), redis_db, raw, queue="default", job=job)):
            death.die_as_fetched(context.current(), DecryptionError("bad tag"), reason=death.INVALID, job=job)
        assert listener.wait_for("sidekiq.jobs.encryption_error") == [
            "sidekiq.jobs.encryption_error:1|c|#worker:tests.jobsapp.jobs.RecordJob"]


@pytest.mark.django_db
def test_a_rate_limited_run_counts_as_rate_limited_only(redis_db, listener):
    """Issue 28 item 9: a run the limiter reschedules is ``jobs.rate_limited``, neither a
    success nor a failure, and not timed; one the limiter lets through as an ordinary
    failure (``reschedule=0``) is a failure."""
    with wurk_settings(STATSD={"HOST": "127.0.0.1", "PORT": PORT}):
        run_jobs({"class": LIMITED_NAME, "args": ["statsd-limited"]},  # rescheduled
                 {"class": LIMITED_NAME, "args": ["statsd-plain", 0]})  # failed, retried
        statsd.client().flush()
    tags = f"#worker:{LIMITED_NAME},queue:q"
    assert len(listener.wait_for("sidekiq.jobs.rate_limited")) == 1
    assert listener.wait_for("sidekiq.jobs.failure") == [f"sidekiq.jobs.failure:1|c|{tags}"]
    assert listener.wait_for("sidekiq.jobs.count") == [f"sidekiq.jobs.count:2|c|{tags}"]
    assert not listener.matching("sidekiq.jobs.success")
    assert len(listener.matching("sidekiq.jobs.perform_dist")) == 1  # the failure's only
    assert redis_db.zcard("schedule") == 1 and redis_db.zcard("retry") == 1


def test_a_tally_loses_no_count_while_the_sender_reads_it():
    """Issue 28 item 2: the job path takes no lock; counters are read by the sender while
    eight job threads update them, and every start, outcome and value arrives once."""
    udp = UDPClient("127.0.0.1", PORT)
    udp._sender = threading.current_thread()  # no sender thread: this test reads by hand
    tally = udp.job_tally(("c", "s", "f", "g", "d"), udp.tail(["queue:q"]))
    per_thread, threads = 2_000, 8  # 16,000 values: under MAX_QUEUED, so none may be dropped
    totals = [0, 0, 0, 0]
    done = threading.Event()

    def job_thread(i):
        for n in range(per_thread):
            tally.started()
            tally.finished(n % 4 != 0, 1.0)

    def read():
        count, success, failure, _last, values = tally.take()
        for i, got in enumerate((count, success, failure, len(values))):
            totals[i] += got

    def sender():
        while not done.is_set():
            read()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can: races show
    try:
        reader = threading.Thread(target=sender)
        reader.start()
        workers = [threading.Thread(target=job_thread, args=(i,)) for i in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        done.set()
        reader.join()
    finally:
        sys.setswitchinterval(interval)
    read()
    jobs = per_thread * threads
    assert totals == [jobs, jobs * 3 // 4, jobs // 4, jobs] and udp.dropped == 0
    assert tally.take()[:3] == (0, 0, 0)
