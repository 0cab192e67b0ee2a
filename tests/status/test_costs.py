"""What tracking costs, counted at the client (not with INFO commandstats, which other
clients of the shared server disturb): nothing for a job that does not opt in; one round
trip per push and one command per progress report for one that does; and a Redis that
does not answer a report never fails the job."""

from __future__ import annotations

import logging

import pytest
import redis as redis_lib

from tests.status import jobs
from tests.support import StandInUnit, processor_manager
from wurk_django import features, payload, status
from wurk_django.job import Job
from wurk_django.results import record, store
from wurk_django.server.run.processor import Processor

pytestmark = pytest.mark.django_db


def _count_round_trips(monkeypatch) -> list[list[tuple]]:
    """Every round trip this thread sends from now on, as lists of commands (name and first
    arguments); another thread of the test process (a leftover from another test) is not
    counted."""
    import threading

    from redis.connection import Connection

    from wurk_django.redis import wire

    sent: list[list[tuple]] = []
    me = threading.get_ident()

    def note(commands) -> None:
        if threading.get_ident() == me:
            sent.append([tuple(map(str, c[:4])) for c in commands])

    single, many = Connection.send_command, Connection.pack_commands
    monkeypatch.setattr(Connection, "send_command",
                        lambda self, *args, **kw: note([args]) or single(self, *args, **kw))
    monkeypatch.setattr(Connection, "pack_commands", lambda self, cmds: note(cmds) or many(self, cmds))
    exchange = wire.exchange
    monkeypatch.setattr(wire, "exchange", lambda conn, cmds, *rest: note(cmds) or exchange(conn, cmds, *rest))
    return sent


class Quiet(Job):
    """Touches no Redis itself: whatever the run sends is the engine's."""

    def perform(self, n):
        return n


class QuietTracked(Job):
    track = True

    def perform(self, n):
        self.progress(50, "half")
        return n


def _run_here(job_class: type[Job]) -> str:
    job = {"class": job_class.job_name, "args": [1], "jid": payload.new_jid(), "queue": "default",
           "retry": True, "created_at": 1.0, "enqueued_at": 1.0, **job_class.get_options()}
    if "track" in job:
        job["track"] = 600
    Processor(processor_manager()).process(StandInUnit(job))
    return job["jid"]


def test_an_untracked_run_sends_no_command_and_a_tracked_one_writes_its_record(redis_db, monkeypatch):
    features.install()  # the results observer is registered, as on a worker
    _run_here(Quiet)  # warm up: connections
    _run_here(QuietTracked)  # and the progress script, loaded once
    sent = _count_round_trips(monkeypatch)
    _run_here(Quiet)
    assert sent == []  # the processor's own parts are stand-ins here: a command would be tracking's
    jid = _run_here(QuietTracked)
    data = [command for trip in sent for command in trip
            if command[0] not in ("CLIENT", "SELECT", "MULTI", "EXEC", "SCRIPT")]
    touched = {command[3] if command[0] == "EVALSHA" else command[1] for command in data}
    assert touched == {store.key(jid)}  # its record, and nothing else
    assert [command[0] for command in data].count("EVALSHA") == 1  # the one progress report
    assert status.get(jid).state == "complete" and status.get(jid).result == 1


def test_a_push_is_one_round_trip_tracked_or_not_and_untracked_writes_no_status(redis_db, monkeypatch):
    jobs.Untracked.perform_async("warm")
    jobs.Steps.perform_async("warm")  # its first push also reads which queues Ruby serves (fleet, cached)
    sent = _count_round_trips(monkeypatch)
    jobs.Untracked.perform_async("k")
    assert len(sent) == 1 and not any("status:" in " ".join(command) for command in sent[0])
    sent.clear()
    jid = jobs.Steps.perform_async("k")
    assert len(sent) == 1
    names = [command[0].upper() for command in sent[0]]
    assert ("HSET", "EXPIRE") == tuple(names[names.index("HSET"):names.index("HSET") + 2])
    assert any(command[1] == store.key(jid) for command in sent[0] if len(command) > 1)


def test_a_progress_report_is_one_command(redis_db, monkeypatch):
    job = {"class": "X", "jid": payload.new_jid(), "track": 60, "args": []}
    attempt = record.Attempt(job, 60, redis_db)
    attempt.start()
    record._live[attempt.jid] = attempt
    try:
        sent = _count_round_trips(monkeypatch)
        assert status.progress(25, "a quarter", jid=attempt.jid) is True
        assert [[command[0] for command in trip] for trip in sent] == [["EVALSHA"]]
    finally:
        record._live.pop(attempt.jid, None)
    assert status.get(attempt.jid).progress == 25 and 0 < redis_db.ttl(store.key(attempt.jid)) <= 60


class _Down:
    """A Redis client whose every command fails as an unreachable server's does."""

    def __getattr__(self, name):
        def fail(*args, **kwargs):
            raise redis_lib.ConnectionError("Connection refused (a test's Redis that is down)")

        return fail


def test_redis_down_during_a_report_is_logged_and_the_job_goes_on(redis_db, caplog):
    job = {"class": "X", "jid": payload.new_jid(), "track": 60, "args": []}
    attempt = record.Attempt(job, 60, _Down())
    record._live[attempt.jid] = attempt
    try:
        with caplog.at_level(logging.WARNING, logger="wurk_django.worker"):
            assert status.progress(40, "resizing", jid=attempt.jid) is False
    finally:
        record._live.pop(attempt.jid, None)
    assert "was not updated (ConnectionError" in caplog.text


def test_a_report_never_reopens_a_finished_record_nor_makes_an_expired_one(redis_db):
    job = {"class": "X", "jid": payload.new_jid(), "track": 60, "args": []}
    attempt = record.Attempt(job, 60, redis_db)
    record._live[attempt.jid] = attempt
    try:
        assert status.progress(10, jid=attempt.jid) is False  # no record (expired): not made again
        assert not redis_db.exists(store.key(attempt.jid))
        store.write(redis_db, attempt.jid, {"state": "complete", "progress": 100}, 60)
        assert status.progress(10, jid=attempt.jid) is False
        assert status.get(attempt.jid).progress == 100
    finally:
        record._live.pop(attempt.jid, None)


def test_outside_a_tracked_run_a_report_writes_nothing(redis_db, monkeypatch):
    sent = _count_round_trips(monkeypatch)
    assert status.progress(50) is False and Quiet().progress(50, "x") is False
    assert sent == []
