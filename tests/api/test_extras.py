"""IterableJobQuery, ProfileSet and Deploy marks (CORE-170, CORE-171, CORE-172)."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime

from wurk_django.api import Deploy, IterableJobQuery, ProfileSet
from wurk_django.api.deploy import default_label


def test_iterable_job_query_decodes_state_and_none_when_absent(redis_db):
    # CORE-170: pipelined HGETALL it-<jid>; ex int, rt float, c decoded JSON, cancelled int/None.
    redis_db.hset("it-a", mapping={"ex": "2", "c": "17", "rt": "1.25"})
    redis_db.hset("it-b", mapping={"ex": "1", "c": '["x",3]', "rt": "0.5", "cancelled": "1700000000"})
    query = IterableJobQuery(["a", "b", "missing"])
    assert query["a"] == {"executions": 2, "runtime": 1.25, "cursor": 17, "cancelled": None}
    assert query["b"]["cursor"] == ["x", 3] and query["b"]["cancelled"] == 1700000000
    assert query["missing"] is None
    assert [jid for jid, _ in query] == ["a", "b", "missing"]
    assert IterableJobQuery([]).states() == {}


def profile(redis_db, key: str, expires: float, started: int, jid: str) -> None:
    redis_db.zadd("profiles", {key: expires})
    redis_db.hset(key, mapping={"started_at": started, "jid": jid, "type": "HardJob", "token": key.split("-")[0],
                                "size": 1234, "elapsed": "2.5", "data": b"\x1f\x8bgzip"})


def test_profile_set_prunes_expired_and_lists_newest_first(redis_db):
    # CORE-171: ZREMRANGEBYSCORE profiles -inf now; ZRANGE profiles +inf 0 BYSCORE REV; HMGET fields.
    # CORE-070: readers prune `profiles` by score.
    now = time.time()
    profile(redis_db, "tok1-j1", now + 100, 1_700_000_000, "j1")
    profile(redis_db, "tok2-j2", now + 500, 1_700_000_400, "j2")
    redis_db.zadd("profiles", {"tok0-j0": now - 1})
    records = list(ProfileSet())
    assert [r.key for r in records] == ["tok2-j2", "tok1-j1"]
    assert redis_db.zrange("profiles", 0, -1) == [b"tok1-j1", b"tok2-j2"]  # expired member pruned
    first = records[0]
    assert (first.jid, first.type, first.token, first.size, first.elapsed) == ("j2", "HardJob", "tok2", 1234, 2.5)
    assert first.started_at == datetime.fromtimestamp(1_700_000_400, tz=UTC)
    assert first.data == b"\x1f\x8bgzip"
    assert ProfileSet().size == 2
    assert ProfileSet().find("tok1-j1").jid == "j1"
    assert ProfileSet().find("nope-x") is None


def test_deploy_mark_floors_to_the_minute_once_per_label(redis_db):
    # CORE-172 / CORE-068 / CORE-069 / ENT-551: SET deploylock-<label> NX EX 60, then HSET + EXPIRE 90 d;
    # the mark's time back, None for the host that lost the lock.
    at = datetime(2025, 2, 14, 8, 43, 27, 500, tzinfo=UTC)
    deploy = Deploy()
    assert deploy.mark("abc123 Fix", at=at) == "2025-02-14T08:43:00Z"
    assert deploy.mark("abc123 Fix", at=at) is None  # another host, same release
    assert redis_db.hgetall("20250214-marks") == {b"2025-02-14T08:43:00Z": b"abc123 Fix"}
    assert 7_776_000 - 5 < redis_db.ttl("20250214-marks") <= 7_776_000
    assert 0 < redis_db.ttl("deploylock-abc123 Fix") <= 60
    assert redis_db.get("deploylock-abc123 Fix") == b"2025-02-14T08:43:00Z"
    assert deploy.fetch(date(2025, 2, 14)) == {"2025-02-14T08:43:00Z": "abc123 Fix"}
    assert deploy.fetch(date(2025, 2, 15)) == {}


def test_deploy_default_label_comes_from_git(redis_db, tmp_path, monkeypatch):
    # A repository of the test's own: the suite also runs from trees that are no checkout
    # (the installed-wheel suite, an unpacked sdist).
    import subprocess

    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q", str(tmp_path)], check=True)
    subprocess.run([*git, "-C", str(tmp_path), "commit", "-q", "--allow-empty", "-m", "Ship it"], check=True)
    monkeypatch.chdir(tmp_path)
    label = default_label()
    assert label.endswith(" Ship it") and len(label.split()[0]) >= 7, label
    assert Deploy().mark(at=datetime(2025, 1, 1, 0, 0, tzinfo=UTC)) == "2025-01-01T00:00:00Z"
    assert Deploy().fetch(date(2025, 1, 1)) == {"2025-01-01T00:00:00Z": label}


def test_deploy_without_a_label_marks_nothing(redis_db, monkeypatch):
    # ENT-551: no label given and none from git (not a checkout): None, nothing written.
    from wurk_django.api import deploy as deploy_module

    monkeypatch.setattr(deploy_module, "default_label", lambda: "")
    assert Deploy().mark(at=datetime(2025, 1, 1, 0, 0, tzinfo=UTC)) is None
    assert Deploy().mark("", at=datetime(2025, 1, 1, 0, 0, tzinfo=UTC)) is None
    assert redis_db.dbsize() == 0
