"""Promotion of due scheduled/retry jobs (CORE-145..148, PRO-330: the reliable scheduler)."""

from __future__ import annotations

import json
import threading
import time

from wurk_django.conf import Config
from wurk_django.server.scheduler import BATCH, Scheduler


def scheduler() -> Scheduler:
    return Scheduler(Config())


def test_due_jobs_move_with_enqueued_at_restamped_and_nothing_else_changed(redis_db):
    # PRO-330: string patch of the top-level enqueued_at, never a re-encode
    ruby = ('{"retry":true,"queue":"low","args":[{"enqueued_at":1}," \\"enqueued_at\\":2 "],'
            '"class":"HardJob","jid":"a1","created_at":1700000000.123456,"enqueued_at":1700000000.5}')
    python = '{"class":"x.Job","args":[],"queue":"default","jid":"b2","created_at":1700000000000}'
    spaced = '{ "enqueued_at" : 17 , "queue":"default","class":"C","args":[],"jid":"c3"}'
    empty_args_first = '{"args":[{"queue":"nested"}],"queue":"default","class":"D","jid":"d4"}'
    later = '{"class":"x.Job","args":[],"queue":"default","jid":"later"}'
    redis_db.zadd("schedule", {ruby: 100, python: 200, spaced: 250, empty_args_first: 260, later: 10_000})
    assert scheduler().enqueue_due(now=1000.0) == 4
    assert redis_db.zrange("schedule", 0, -1) == [later.encode()]
    low = redis_db.lrange("queue:low", 0, -1)
    assert low == [ruby.replace('"enqueued_at":1700000000.5', '"enqueued_at":1000000').encode()]
    default = [raw.decode() for raw in redis_db.lrange("queue:default", 0, -1)]
    assert '{"enqueued_at":1000000,"class":"x.Job","args":[],"queue":"default","jid":"b2","created_at":1700000000000}' in default
    assert '{ "enqueued_at" : 1000000 , "queue":"default","class":"C","args":[],"jid":"c3"}' in default
    assert '{"enqueued_at":1000000,"args":[{"queue":"nested"}],"queue":"default","class":"D","jid":"d4"}' in default
    for raw in default + [low[0].decode()]:
        assert json.loads(raw)["enqueued_at"] == 1000000
    assert redis_db.smembers("queues") == {b"low", b"default"}


def test_retry_set_is_promoted_too(redis_db):
    job = '{"class":"x.Job","args":[1],"queue":"default","jid":"r1","retry_count":0,"error_message":"boom"}'
    redis_db.zadd("retry", {job: 5})
    assert scheduler().enqueue_due(now=10.0) == 1
    assert json.loads(redis_db.lpop("queue:default"))["retry_count"] == 0
    assert redis_db.zcard("retry") == 0


def test_unusable_members_go_to_the_dead_set(redis_db):
    # PRO-330: not an object with a string queue -> dead, scored now
    redis_db.zadd("schedule", {"not json": 1, "[1,2]": 2, '{"class":"X","args":[]}': 3, '{"queue":5}': 4})
    assert scheduler().enqueue_due(now=50.0) == 0
    assert redis_db.zcard("schedule") == 0
    assert redis_db.zcard("dead") == 4
    assert {score for _m, score in redis_db.zrange("dead", 0, -1, withscores=True)} == {50.0}


def test_more_than_a_batch_is_drained_in_one_sweep(redis_db):
    # PRO-330: the caller loops while a full batch came back
    members = {f'{{"class":"X","args":[{i}],"queue":"default","jid":"j{i}"}}': i for i in range(BATCH * 2 + 7)}
    redis_db.zadd("schedule", members)
    assert scheduler().enqueue_due(now=1e9) == BATCH * 2 + 7
    assert redis_db.llen("queue:default") == BATCH * 2 + 7


def test_promotion_does_not_go_through_a_second_client_call(redis_db, monkeypatch):
    # The pop and the push are one script: there is no window in Python where the job
    # is out of the set but not on its queue. A push path that fails cannot lose it.
    from wurk_django.client import push as client

    def explode(*args, **kwargs):
        raise SystemExit("the process dies here")

    monkeypatch.setattr(client.Client, "push", explode)
    monkeypatch.setattr(client.Client, "raw_push", explode)
    redis_db.zadd("schedule", {'{"class":"X","args":[],"queue":"default","jid":"z"}': 1})
    assert scheduler().enqueue_due(now=10.0) == 1
    assert redis_db.llen("queue:default") == 1


def test_concurrent_promoters_push_each_job_exactly_once(redis_db):
    count = 1500
    redis_db.zadd("schedule", {f'{{"class":"X","args":[{i}],"queue":"default","jid":"j{i}"}}': i for i in range(count)})
    errors = []

    def sweep():
        try:
            scheduler().enqueue_due(now=time.time())
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=sweep) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    jids = [json.loads(raw)["jid"] for raw in redis_db.lrange("queue:default", 0, -1)]
    assert len(jids) == count and len(set(jids)) == count


def test_promotion_wakes_idle_fetchers_of_the_queues_it_pushed_to(redis_db):
    # Issue 19: an idle fetcher serving several queues blocks on wake:<queue>; a promoted
    # job must send that wake-up in the same atomic step as its push.
    for i in range(3):
        redis_db.zadd("schedule", {json.dumps({"class": "X", "args": [i], "jid": f"{i:024d}", "queue": "mail"}): 1})
    assert Scheduler(Config()).enqueue_due() == 3
    assert redis_db.llen("queue:mail") == 3
    assert redis_db.lrange("wake:mail", 0, -1) == [b"1"] * 3 and 0 < redis_db.ttl("wake:mail") <= 60


def test_a_due_job_whose_queue_keys_were_not_given_waits_for_the_next_call(redis_db):
    # The script takes every key in KEYS (review of stop 51): the scheduler names the due jobs'
    # queues, read first; a job due meanwhile, of another queue, stays in the set and its
    # queue is returned, so the next call names it.
    from wurk_django import keys
    from wurk_django.client.operations import wake_args
    from wurk_django.redis.scripts import lua
    from wurk_django.server.scheduler import promote_keys

    mail = json.dumps({"class": "X", "args": [1], "jid": "m" * 24, "queue": "mail"})
    late = json.dumps({"class": "X", "args": [2], "jid": "l" * 24, "queue": "late"})
    redis_db.zadd("schedule", {mail: 1, late: 2, "not json": 3})
    taken, buried, dead, missing = lua("promote_due")(
        redis_db, ["schedule", keys.QUEUES, keys.DEAD, *promote_keys([b"mail"])],
        ["10.0", "10000", BATCH, *wake_args(), b"mail"])
    assert (taken, buried, dead, missing) == (2, 1, [b"not json"], [b"late"])
    assert redis_db.zrange("schedule", 0, -1) == [late.encode()] and redis_db.llen("queue:mail") == 1
    assert redis_db.zrange("dead", 0, -1) == [b"not json"]
    assert scheduler().enqueue_due(now=10.0) == 1
    assert redis_db.zcard("schedule") == 0 and redis_db.llen("queue:late") == 1
    assert redis_db.smembers("queues") == {b"mail", b"late"}
