"""wurk_stats, wurk_quiet, wurk_stop (DJ-046) against real worker processes."""

from __future__ import annotations

import json
import socket
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.jobsapp.jobs import RecordJob
from tests.support import wait_for
from wurk_django.api import ProcessSet


def _stats(*args: str) -> str:
    out = StringIO()
    call_command("wurk_stats", *args, stdout=out)
    return out.getvalue()


def test_stats_text_and_json_show_the_dashboard_numbers(redis_db):
    for i in range(3):
        RecordJob.perform_async(i)
    redis_db.set("stat:processed", 41)
    redis_db.set("stat:failed", 2)
    redis_db.sadd("paused", "default")
    data = json.loads(_stats("--json"))
    assert data["sidekiq"]["processed"] == 41 and data["sidekiq"]["failed"] == 2
    assert data["sidekiq"]["enqueued"] == 3
    assert data["queues"] == [{"name": "default", "size": 3, "latency": data["queues"][0]["latency"],
                               "paused": True, "unserved": True}]
    assert data["processes"] == []
    text = _stats()
    assert "Processed             41" in text
    assert "Enqueued               3" in text
    assert "default         3" in text and "paused" in text
    # No live process serves "default" (issue 29 item 1): the line says so.
    assert "no live process serves it" in text


def test_stats_interval_repeats(redis_db):
    out = _stats("--json", "--interval", "0.01", "--count", "3")
    assert len(out.strip().splitlines()) == 3
    with pytest.raises(CommandError, match="--interval"):
        _stats("--interval", "0")


def test_quiet_and_stop_need_a_target(redis_db):
    with pytest.raises(CommandError, match="--all"):
        call_command("wurk_quiet", stdout=StringIO())
    with pytest.raises(CommandError, match="no process"):
        call_command("wurk_stop", "--all", stdout=StringIO(), stderr=StringIO())
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("wurk_stop", "nobody:1:abc", stdout=StringIO(), stderr=err)
    assert "no live process 'nobody:1:abc'" in err.getvalue()


def test_embedded_processes_are_refused(redis_db):
    redis_db.sadd("processes", "web:1:abc")
    redis_db.hset("web:1:abc", mapping={"info": json.dumps({"identity": "web:1:abc", "hostname": "web",
                                                              "embedded": True}), "busy": 0})
    err = StringIO()
    with pytest.raises(CommandError, match="no process was asked"):
        call_command("wurk_quiet", "--all", stdout=StringIO(), stderr=err)
    assert "embedded" in err.getvalue()
    assert redis_db.llen("web:1:abc-signals") == 0


@pytest.mark.slow
def test_quiet_one_by_identity_then_stop_by_host(redis_db, worker_factory):
    first = worker_factory("-c", "1", "-g", "first")
    second = worker_factory("-c", "1", "-g", "second")
    wait_for(lambda: len(list(ProcessSet())) == 2, message="two heartbeats")
    by_tag = {p.tag: p for p in ProcessSet()}
    out = StringIO()
    call_command("wurk_quiet", by_tag["first"].identity, "--wait", "25", stdout=out)
    assert f"quiet: {by_tag['first'].identity}" in out.getvalue()
    states = {p.tag: p.stopping for p in ProcessSet()}
    assert states == {"first": True, "second": False}
    # The quiet one runs nothing more; the other still does.
    RecordJob.perform_async("after-quiet")
    wait_for(lambda: redis_db.lrange("test:ran", 0, -1) == [b"after-quiet"], message="the job")
    out = StringIO()
    call_command("wurk_stop", "--host", socket.gethostname(), "--wait", "40", stdout=out)
    assert "all 2 process(es) stopped" in out.getvalue()
    assert first.wait(15) == 0 and second.wait(15) == 0
    assert redis_db.scard("processes") == 0
