"""``delay``/``apply_async``: Celery's call options as one wurk push (issue 27 item 2)."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest

from tests.celery_compat.tasks import add, greet, quiet
from wurk_django.celery import AsyncResult, shared_task, states


def _one(redis_db, queue="default") -> dict:
    [raw] = redis_db.lrange(f"queue:{queue}", 0, -1)
    return json.loads(raw)


def test_delay_pushes_args_kwargs_and_writes_the_record_in_the_same_push(redis_db):
    result = greet.delay("bob", greeting="hi")
    assert isinstance(result, AsyncResult) and result.id
    item = _one(redis_db, "celery_kw")
    assert item["class"] == "tests.celery_compat.tasks.greet" and item["jid"] == result.id
    assert item["args"] == ["bob"] and item["kwargs"] == {"greeting": "hi"}
    assert item["retry"] == 3 and item["result_ttl"] == 86400
    assert redis_db.hget(f"status:{result.id}", "state") == b"enqueued"
    assert 0 < redis_db.ttl(f"status:{result.id}") <= 86400
    assert result.state == states.PENDING and not result.ready()


def test_countdown_schedules_and_queue_task_id_shadow_time_limits_apply(redis_db):
    before = time.time()
    result = add.apply_async((1, 2), countdown=120, queue="celery_kw", task_id="c" * 24, shadow="Adder",
                             soft_time_limit=5, time_limit=10, priority=3, routing_key="ignored")
    [(raw, score)] = redis_db.zrange("schedule", 0, -1, withscores=True)
    item = json.loads(raw)
    assert result.id == item["jid"] == "c" * 24
    assert before + 119 <= score <= time.time() + 121
    assert item["queue"] == "celery_kw" and item["display_class"] == "Adder"
    assert (item["soft_time_limit"], item["time_limit"]) == (5, 10)
    assert "priority" not in item and "routing_key" not in item
    assert redis_db.hget(f"status:{result.id}", "state") == b"scheduled"


def test_eta_datetime_and_expires(redis_db):
    eta = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    add.apply_async((1, 2), eta=eta, expires=eta + dt.timedelta(minutes=30))
    [(raw, score)] = redis_db.zrange("schedule", 0, -1, withscores=True)
    item = json.loads(raw)
    assert abs(score - eta.timestamp()) < 1
    assert 5390 < item["expires_in"] <= 5400  # counted from the push, as Celery's is
    assert abs(item["expiry"] - (eta.timestamp() + 1800)) < 2


def test_expires_in_seconds_and_a_past_eta_pushes_now(redis_db):
    add.apply_async((1, 2), expires=30, eta=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5))
    item = _one(redis_db)
    assert item["expires_in"] == 30 and redis_db.zcard("schedule") == 0


def test_deadline_travels_as_epoch_seconds_beside_expires(redis_db):
    # issue 47 item 5 from Celery's door: wurk's own option, next to expires, not instead of it.
    at = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    add.apply_async((1, 2), deadline=at, expires=600)
    add.apply_async((3, 4), deadline=at.timestamp(), deadline_action="discard", countdown=60)
    item = _one(redis_db)
    assert item["deadline"] == at.timestamp() and item["expires_in"] == 600 and "deadline_action" not in item
    [scheduled] = [json.loads(raw) for raw in redis_db.zrange("schedule", 0, -1)]
    assert scheduled["deadline"] == at.timestamp() and scheduled["deadline_action"] == "discard"
    plain = add.delay(5, 6)
    assert all("deadline" not in json.loads(raw) for raw in redis_db.lrange("queue:default", 0, -1)
               if plain.id in raw.decode())


@pytest.mark.parametrize(("options", "match"), [
    ({"deadline": dt.datetime(2099, 1, 1, 9, 0)}, r"naive datetime\.datetime\(2099, 1, 1, 9, 0\)"),
    ({"deadline": "tomorrow"}, "'tomorrow'"),
    ({"deadline": 600}, "absolute time .* not 600"),
    ({"deadline": time.time() + 3600, "deadline_action": "later"}, "deadline_action.*'later'"),
    ({"deadline": time.time() + 60, "countdown": 120}, "after its deadline"),
])
def test_a_bad_deadline_is_refused_at_apply_async_naming_it(redis_db, options, match):
    with pytest.raises(ValueError, match=match):
        add.apply_async((1, 2), **options)
    assert redis_db.dbsize() == 0


def test_a_deadline_is_refused_inside_a_canvas_and_with_link(redis_db):
    from wurk_django.celery import chain

    soon = time.time() + 60
    with pytest.raises(TypeError, match="option 'deadline' is not supported inside a chain"):
        chain(add.s(1, 2).set(deadline=soon), add.s(3)).apply_async()
    with pytest.raises(TypeError, match=r"apply_async\(link=..., deadline=...\) is not supported"):
        add.apply_async((1, 2), link=add.s(3), deadline=soon)
    assert redis_db.dbsize() == 0


def test_ignore_result_pushes_no_record(redis_db, drain):
    result = quiet.delay("test:quiet")
    assert "result_ttl" not in _one(redis_db)
    drain()
    assert redis_db.lrange("test:quiet", 0, -1) == [b"ran"]
    assert not redis_db.exists(f"status:{result.id}") and result.state == states.PENDING
    per_call = add.apply_async((1, 1), ignore_result=True)
    assert not redis_db.exists(f"status:{per_call.id}")


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: add.delay(1), TypeError, r"add\(x, y\): missing a required argument: 'y'"),
    (lambda: greet.delay("x", colour="red"), TypeError, "unexpected keyword argument 'colour'"),
    (lambda: add.apply_async((1, 2), bogus=1), TypeError, r"unknown options \['bogus'\]"),
    (lambda: add.apply_async((1, 2), link="x"), TypeError, r"link takes task signatures \(task.s"),
    (lambda: add.apply_async((1, 2), countdown=1, eta=dt.datetime.now(dt.UTC)), ValueError, "not both"),
    (lambda: add.apply_async((1, 2), eta=5), ValueError, "eta must be a datetime"),
    (lambda: add.apply_async("12"), TypeError, "args must be a list or tuple"),
    (lambda: greet.delay("x", greeting=dt.date(2024, 1, 1)), ValueError, r"kwargs\['greeting'\]"),
])
def test_bad_calls_fail_at_the_call_site(redis_db, call, error, match):
    with pytest.raises(error, match=match):
        call()
    assert redis_db.dbsize() == 0


def test_publish_retry_policy_retries_the_push_while_redis_is_unreachable(redis_db, monkeypatch):
    import redis as redis_lib

    from wurk_django.celery import calling

    failures = [redis_lib.ConnectionError("down"), redis_lib.ConnectionError("down")]
    real = calling.Setter.perform_async

    def flaky(self, *args, **kwargs):
        if failures:
            raise failures.pop()
        return real(self, *args, **kwargs)

    monkeypatch.setattr(calling.Setter, "perform_async", flaky)
    result = add.apply_async((1, 2), retry=True, retry_policy={"interval_step": 0, "interval_max": 0})
    assert _one(redis_db)["jid"] == result.id and not failures
    failures[:] = [redis_lib.ConnectionError("down")]
    with pytest.raises(redis_lib.ConnectionError):
        add.apply_async((1, 2))  # no policy: the push fails at once, as wurk's do


def test_decorator_refuses_what_it_cannot_honour():
    with pytest.raises(ValueError, match="rate_limit must be like"):
        shared_task(rate_limit="10 per minute")(lambda: None)
    with pytest.raises(TypeError, match="base=DjangoTask"):
        shared_task(base=object)(lambda: None)
    with pytest.raises(TypeError, match="max_retries"):
        shared_task(retry=3)(lambda: None)
    with pytest.raises(TypeError, match="exception classes"):
        shared_task(autoretry_for=("ValueError",))(lambda: None)
    with pytest.raises(TypeError, match="unknown options"):
        shared_task(colour="red")(lambda: None)


def test_amqp_message_options_are_accepted_and_read_back_as_on_celery():
    """django-celery-email's ``@shared_task(queue=..., delivery_mode=1, rate_limit=...)``:
    the AMQP-only option is ignored (a Redis list keeps every job) but reads back."""
    task = shared_task(name="tests.celery_compat.amqp", queue="mail", delivery_mode=1, rate_limit="50/m")(
        lambda: None)
    assert (task.queue, task.delivery_mode, task.rate_limit) == ("mail", 1, "50/m")
    with pytest.raises(AttributeError, match="not given routing_key"):
        task.routing_key  # noqa: B018 - the read is the test


def test_tuples_travel_as_lists_as_celerys_json_sends_them(redis_db):
    """An email's ``(name, content, mimetype)`` attachment tuples: Celery's JSON serializer
    sends them as lists; so does a push, where a plain wurk job refuses a tuple."""
    result = greet.delay(("bob", ("a", 1)), greeting=("hi",))
    item = _one(redis_db, "celery_kw")
    assert item["jid"] == result.id and item["args"] == [["bob", ["a", 1]]] and item["kwargs"] == {"greeting": ["hi"]}
    with pytest.raises(ValueError, match="native JSON"):
        greet.delay({1, 2})  # a set is no more JSON on Celery: still refused at the call


def test_calling_the_task_runs_the_function_here(redis_db):
    assert add(2, 3) == 5 and redis_db.dbsize() == 0
    assert add.name == "tests.celery_compat.tasks.add" and add.max_retries == 3


@pytest.mark.django_db(transaction=True)
def test_a_bad_deadline_is_refused_at_apply_async_on_commit_not_at_the_commit(redis_db):
    from django.db import transaction

    with transaction.atomic():
        with pytest.raises(ValueError, match="absolute time .* not 60"):
            add.apply_async_on_commit((1, 2), deadline=60)
        add.apply_async_on_commit((1, 2), deadline=time.time() + 3600)
    assert redis_db.llen("queue:default") == 1
