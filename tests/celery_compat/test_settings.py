"""The settings a Celery project has (issue 44 item 4): ``CELERY_BEAT_SCHEDULE`` fires as
periodic loops, routes/default queue/eager/time limits/result expiry map onto wurk's
behaviour, any other ``CELERY_*`` setting is named by ``manage.py check``; ``rate_limit``
is kept by a limiter."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
from django.test import override_settings

from tests.celery_compat.tasks import add, fail, wait_for
from wurk_django.celery import states

SPEED = 12  # a cron minute every 5 s (tests/periodic/test_processes.py's accelerated clock)
LEADER = {"TTL": 1, "RENEW_INTERVAL": 0.3, "FOLLOWER_INTERVAL": 0.3, "INITIAL_WAIT": 0, "CACHE_TTL": 0.2}


def _queued(redis_db, queue):
    return [json.loads(raw) for raw in redis_db.lrange(f"queue:{queue}", 0, -1)]


def test_celery_beat_schedule_entries_fire_as_periodic_loops(redis_db, worker_factory):
    env = {"WURK_TEST_EXTRA": json.dumps({"LEADER": LEADER, "IMPORT_ON_MISS": ["tests.celery_compat"]}),
           "WURK_TEST_CLOCK": f"{time.time():.3f},{SPEED}", "WURK_TEST_CELERY_BEAT": "1"}
    worker_factory("-c", "2", "-q", "default", "-q", "celery_kw", settings="tests.celery_compat.worker_settings",
                   env=env)

    def fired():
        return Counter(raw.decode() for raw in redis_db.lrange("test:beat", 0, -1))

    # Each entry (crontab(), schedule(run_every=60), timedelta(minutes=1)) fires every (fast) minute.
    wait_for(lambda: all(fired()[name] >= 2 for name in ("crontab", "schedule", "timedelta")), timeout=60,
             message=f"every beat entry to fire twice (so far {fired()})")
    labels = {json.loads(redis_db.hget(b"loops:" + lid, "options")).get("label") for lid in redis_db.smembers("periodic")}
    assert labels == {"cron-every-minute", "interval", "timedelta"}


def test_beat_entries_map_onto_loops_and_bad_ones_are_named():
    from wurk_django.celery import beat
    from wurk_django.celery.schedules import crontab

    cron, task, options = beat.loop_of("nightly", {"task": "shop.tasks.purge", "schedule": crontab(hour=3, minute=0),
                                                   "args": (1,), "kwargs": {"full": True},
                                                   "options": {"queue": "low", "priority": 5}})
    assert (cron, task, options) == ("0 3 * * *", "shop.tasks.purge",
                                     {"label": "nightly", "args": [1], "kwargs": {"full": True}, "queue": "low"})
    with pytest.raises(ValueError, match=r"options \['expires'\] have no periodic counterpart"):
        beat.loop_of("x", {"task": "t", "schedule": 60, "options": {"expires": 10}})
    with pytest.raises(ValueError, match=r"CELERY_BEAT_SCHEDULE\['x'\].*crontab"):
        beat.loop_of("x", {"task": "t", "schedule": 45})


def test_task_routes_and_default_queue_choose_the_queue(redis_db):
    routes = {"tests.celery_compat.tasks.add": {"queue": "math"}, "proj.tasks.*": "proj"}
    with override_settings(CELERY_TASK_ROUTES=routes, CELERY_TASK_DEFAULT_QUEUE="celery"):
        add.delay(1, 2)
        fail.delay(1, "x")
        add.apply_async((3, 4), queue="explicit")  # a call's queue= wins, as in Celery
        from tests.celery_compat.tasks import greet, quiet

        greet.delay("x")  # queue="celery_kw" on the task
        quiet.delay("k")  # no queue, no route: the default queue
    assert [j["args"] for j in _queued(redis_db, "math")] == [[1, 2]]
    assert len(_queued(redis_db, "proj")) == 1 and len(_queued(redis_db, "explicit")) == 1
    assert len(_queued(redis_db, "celery_kw")) == 1 and len(_queued(redis_db, "celery")) == 1
    with override_settings(CELERY_TASK_ROUTES=[lambda name, args, kwargs, options, task=None, **kw: {"queue": "fn"}]):
        add.delay(5, 6)
    assert len(_queued(redis_db, "fn")) == 1


def test_task_always_eager_runs_the_call_here(redis_db):
    with override_settings(CELERY_TASK_ALWAYS_EAGER=True):
        result = add.delay(2, 2)
        assert result.get(timeout=1) == 4 and result.state == states.SUCCESS
        failed = fail.delay(1, "x")
        assert failed.state == states.FAILURE
        with override_settings(CELERY_TASK_EAGER_PROPAGATES=True), pytest.raises(Exception, match="x"):
            fail.delay(1, "x")
    assert redis_db.dbsize() == 0  # nothing was pushed


def test_time_limits_and_result_expires_are_every_tasks_defaults(redis_db):
    from wurk_django.celery import shared_task

    with override_settings(CELERY_TASK_TIME_LIMIT=60, CELERY_TASK_SOFT_TIME_LIMIT=50, CELERY_RESULT_EXPIRES=600):
        result = add.delay(1, 1)
        own = shared_task(name="tests.celery_compat.own_limit", time_limit=9, result_expires=30)(lambda: None)
        mine = own.delay()
    job, other = _queued(redis_db, "default")[::-1]
    assert (job["time_limit"], job["soft_time_limit"], job["result_ttl"]) == (60, 50, 600)
    assert (other["time_limit"], other["soft_time_limit"], other["result_ttl"]) == (9, 50, 30)
    assert 590 <= redis_db.ttl(f"status:{result.id}") <= 600 and redis_db.ttl(f"status:{mine.id}") <= 30


def test_check_names_every_celery_setting_wurk_does_not_read(settings):
    from django.core import checks

    settings.CELERY_BROKER_URL = "redis://localhost:6379/0"
    settings.CELERY_WORKER_FANCY = True
    settings.CELERY_ALWAYS_EAGER = True  # Celery 3's name
    settings.CELERY_TASK_ROUTES = {"a": {"queue": "b"}}  # read: no warning
    settings.CELERY_BEAT_SCHEDULE = {"bad": {"task": "t", "schedule": 45}}
    found = {(m.id, m.msg) for m in checks.run_checks(tags=["wurk"]) if m.id in ("wurk.W030", "wurk.E040")}
    messages = sorted(msg for _id, msg in found)
    assert any(m.startswith("CELERY_BROKER_URL is not read") and "WURK['REDIS_URL']" in m for m in messages)
    assert any(m.startswith("CELERY_WORKER_FANCY is not read") and "no effect" in m for m in messages)
    assert any(m.startswith("CELERY_ALWAYS_EAGER") and "rename it CELERY_TASK_ALWAYS_EAGER" in m for m in messages)
    assert not any(m.startswith("CELERY_TASK_ROUTES") for m in messages)
    assert any(i == "wurk.E040" and "CELERY_BEAT_SCHEDULE['bad']" in m for i, m in found)


def test_check_leaves_another_apps_celery_prefixed_settings_alone(settings):
    """django-celery-email's CELERY_EMAIL_BACKEND is that app's setting, read by it: the
    check does not call it "no effect" (tests/celery_project runs that project)."""
    from django.core import checks

    settings.CELERY_EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.CELERYD_CONCURRENCY = 4  # Celery 3's worker setting: Celery's, named
    names = {m.msg.split()[0] for m in checks.run_checks(tags=["wurk"]) if m.id == "wurk.W030"}
    assert "CELERYD_CONCURRENCY" in names and "CELERY_EMAIL_BACKEND" not in names


def test_current_app_conf_sets_and_reads_the_settings_wurk_reads(redis_db):
    """``celery.current_app.conf.task_always_eager = True`` (a test's setUp on Celery) makes
    calls run here; a name wurk does not read is refused saying what becomes of it."""
    from wurk_django.celery import current_app

    conf = current_app.conf
    assert conf.task_always_eager is False
    conf.task_always_eager = True
    try:
        assert conf.task_always_eager is True and conf["task_always_eager"] is True
        assert add.delay(2, 3).get(timeout=1) == 5
        with override_settings(CELERY_TASK_DEFAULT_QUEUE="low"):
            assert conf.task_default_queue == "low"
        with pytest.raises(AttributeError, match="WURK\\['REDIS_URL'\\]"):
            conf.broker_url = "redis://elsewhere"
    finally:
        del conf.task_always_eager
    assert conf.task_always_eager is False
    assert redis_db.dbsize() == 0  # the eager call pushed nothing
    assert current_app.tasks["tests.celery_compat.tasks.add"] is add


def test_rate_limit_holds_back_calls_over_the_rate(redis_db, worker_factory):
    from tests.celery_compat.limited_tasks import limited

    for n in range(5):
        limited.delay(n)
    worker_factory("-c", "3", "-q", "default",
                   env={"WURK_TEST_EXTRA": json.dumps({"IMPORT_ON_MISS": ["tests.celery_compat"]})})
    wait_for(lambda: redis_db.llen("test:limited") >= 2 and redis_db.zcard("schedule") == 3, timeout=60,
             message="two runs and three rescheduled calls")
    time.sleep(2)
    assert redis_db.llen("test:limited") == 2  # "2/m": the others wait in the schedule set
    # ...held back about one slot of the rate (30 to 60 s for "2/m"), not the limiters' minutes.
    for _raw, at in redis_db.zrange("schedule", 0, -1, withscores=True):
        assert time.time() + 20 <= at <= time.time() + 61


def test_rate_limit_is_refused_only_when_malformed():
    from wurk_django.celery import rate_limits

    assert rate_limits.parse("10/m") == (10, 60) and rate_limits.parse("2/s") == (2, 1)
    assert rate_limits.parse(100) == (100, 1) and rate_limits.parse("0.5/s") == (1, 2)
    assert rate_limits.parse(None) is None and rate_limits.parse("0/m") is None
    with pytest.raises(ValueError, match="rate_limit must be like"):
        rate_limits.parse("ten a minute")


def test_the_guide_names_every_setting_the_check_explains():
    """docs/from-celery.md's settings table has a row for each setting wurk.W030 explains,
    with the check's own words, so the page and the warning cannot drift apart."""
    from tests.support import ROOT
    from wurk_django.celery.checks import NOT_READ, OLD_NAMES

    page = (ROOT / "docs" / "from-celery.md").read_text().replace("`", "")  # the page marks code, the check cannot
    missing = [name for name, what in NOT_READ.items()
               if name not in OLD_NAMES and f"| CELERY_{name} | {what} |" not in page]
    assert not missing, f"docs/from-celery.md lacks the rows of {missing}"
