"""Held poison-pill suspects go back one at a time, as soon as the one before is done (issue 42 item 4)."""

from __future__ import annotations

import json

from tests.server.fetch.test_reliable import _dead_pid, _dead_slots, _job
from wurk_django import keys
from wurk_django.server import suspects
from wurk_django.server.reaper import Reaper
from wurk_django.server.state import NONCE, hostname


def _jid(name: str) -> str:
    return name.ljust(24, "x")


def _suspected_before(redis_db, *names: str) -> tuple[int, list[bytes]]:
    """A dead process whose threads each ran one of ``names``, each suspected in an
    earlier crash already (its count at 1)."""
    pid = _dead_pid()
    jobs = [_job(_jid(name)) for name in names]
    for name in names:
        redis_db.set(keys.recovered(_jid(name)), 1)
    _dead_slots(redis_db, pid, {slot: ([raw], "*") for slot, raw in enumerate(jobs)})
    return pid, jobs


def _queued_jids(redis_db) -> list[str]:
    return [json.loads(raw)["jid"] for raw in redis_db.lrange("queue:default", 0, -1)]


def test_the_next_suspect_goes_back_once_the_one_before_finished_or_crashed_again(redis_db):
    pid, _jobs = _suspected_before(redis_db, "a", "b", "c")
    held = f"queue:default|{hostname()}|{pid}|{NONCE}|{keys.HELD_SLOT}"
    reaper = Reaper(["default"], interval=60, grace=0)
    assert reaper.boot_sweep() == 1  # one at once, alone
    (first,) = _queued_jids(redis_db)
    assert redis_db.get(keys.paced("default")) == first.encode()
    assert redis_db.zrange(keys.HELD_INDEX, 0, -1) == [held.encode()]
    assert redis_db.llen(held) == 2
    assert reaper.release_held() == (0, 1)  # still queued or running: the others wait
    # It finished: its ACK deleted its count. The next goes back at the next look.
    redis_db.delete("queue:default", keys.recovered(first))
    assert reaper.release_held() == (1, 1)
    (second,) = _queued_jids(redis_db)
    assert second != first and redis_db.get(keys.recovered(second)) == b"2"
    # It crashed again: found running once more, it is held again (here, by hand). Its
    # third crash buries it when it comes back, and so the last one goes at once.
    raw = redis_db.rpop("queue:default")
    redis_db.lpush(held, raw)
    assert reaper.release_held() == (2, 0)
    assert [json.loads(d)["jid"] for d in redis_db.zrange("dead", 0, -1)] == [second]
    (third,) = _queued_jids(redis_db)
    assert {first, second, third} == {_jid("a"), _jid("b"), _jid("c")}
    assert not redis_db.exists(held) and not redis_db.exists(keys.HELD_INDEX)


def test_a_suspect_that_neither_finishes_nor_crashes_lets_the_next_go_after_the_wait(redis_db):
    _suspected_before(redis_db, "slow", "next")
    reaper = Reaper(["default"], interval=60, grace=0)
    assert reaper.boot_sweep() == 1
    assert 0 < redis_db.ttl(keys.paced("default")) <= suspects.RELEASE_WAIT
    assert reaper.release_held() == (0, 1)
    redis_db.delete(keys.paced("default"))  # RELEASE_WAIT seconds passed
    assert reaper.release_held() == (1, 0)


def test_why_a_job_is_held_and_release_now(redis_db):
    pid, (innocent, pill) = _suspected_before(redis_db, "innocent", "pill")
    redis_db.set(keys.paced("default"), "1")  # an earlier version's lock: nothing goes back meanwhile
    redis_db.set(keys.recovered(_jid("pill")), 2)
    assert Reaper(["default"], interval=60, grace=0).boot_sweep() == 0
    held = sorted(suspects.held_jobs(redis_db), key=lambda job: job.recoveries)
    assert [(job.jid, job.recoveries) for job in held] == [(_jid("innocent"), 1), (_jid("pill"), 2)]
    for job in held:
        assert job.queue == "default" and job.klass == "tests.jobsapp.jobs.RecordJob"
        assert job.process == f"{hostname()}:{pid}:{NONCE}" and job.since is not None
        assert [crash.process for crash in job.crashes] == [job.process]  # the earlier ones went unnoted
    reaper = Reaper([])
    assert reaper.release_now(held[0].held_list, _jid("innocent"), by="ops") == "released"
    assert _queued_jids(redis_db) == [_jid("innocent")]
    assert reaper.release_now(held[1].held_list, _jid("pill")) == "buried"
    assert [json.loads(d)["jid"] for d in redis_db.zrange("dead", 0, -1)] == [_jid("pill")]
    assert reaper.release_now(held[1].held_list, _jid("pill")) is None  # gone meanwhile
    assert reaper.release_now("queue:default", _jid("pill")) is None  # not a held list
    assert suspects.held_jobs(redis_db) == [] and not redis_db.exists(keys.HELD_INDEX)
