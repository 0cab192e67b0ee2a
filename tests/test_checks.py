"""System checks for settings.WURK, and Redis taken from a cache alias (DJ-002, DJ-003, DJ-004)."""

from __future__ import annotations

import io

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from tests.jobsapp.jobs import RecordJob
from wurk_django.checks import check_redis_server, check_settings
from wurk_django.conf import get_config, reset_config
from wurk_django.redis import connection


@pytest.fixture
def wurk(settings):
    """Replace settings.WURK for one test, keeping the test Redis URL."""

    def use(**values):
        settings.WURK = {"REDIS_URL": settings.WURK_TEST_REDIS_URL, **values}
        reset_config()
        connection.reset()

    return use


def _ids(messages) -> list[str]:
    return sorted(m.id for m in messages)


def test_test_settings_pass():
    assert check_settings() == []


def test_unknown_key_with_a_suggestion(wurk):
    wurk(CONCURENCY=5)
    [message] = check_settings()
    assert message.id == "wurk.E001" and message.level == checks.ERROR
    assert "CONCURENCY" in message.msg
    assert "CONCURRENCY" in message.hint


def test_wrong_types_and_impossible_values(wurk):
    wurk(CONCURRENCY="5", TIMEOUT=0, MAX_RETRIES=-1, TESTING="sometimes")
    messages = check_settings()
    assert _ids(messages) == ["wurk.E002"] * 4
    assert {m.msg.split("'")[1] for m in messages} == {"CONCURRENCY", "TIMEOUT", "MAX_RETRIES", "TESTING"}
    assert all(m.hint.startswith("the default is") for m in messages)


def test_bad_queue_names(wurk):
    wurk(QUEUES=["default", "bad\nqueue", "low,-1"])
    assert _ids(check_settings()) == ["wurk.E003", "wurk.E003"]


def test_bad_redis_dicts(wurk):
    wurk(REDIS={"URL": "redis://x/1", "CACHE": "default", "POOLSIZE": 3})
    assert _ids(check_settings()) == ["wurk.E004", "wurk.E004"]


def test_redis_cache_alias_must_exist_and_be_redis(wurk, settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    wurk(REDIS={"CACHE": "missing"})
    [missing] = check_settings()
    assert missing.id == "wurk.E005" and "missing" in missing.msg
    wurk(REDIS={"CACHE": "default"})
    [not_redis] = check_settings()
    assert not_redis.id == "wurk.E005" and "LocMemCache" in not_redis.msg


def test_wurk_must_be_a_dict(settings):
    settings.WURK = "redis://localhost"
    [message] = check_settings()
    assert message.id == "wurk.E006"


def test_manage_py_check_reports_wurk_errors(wurk):
    # The checks are registered by WurkConfig.ready().
    wurk(CONCURRENCY=0)
    with pytest.raises(SystemCheckError, match=r"wurk\.E002"):
        call_command("check")
    wurk()
    call_command("check")  # clean settings: no exception


def test_deploy_check_talks_to_redis_only_then(wurk):
    assert check_redis_server() == [] or all(m.level < checks.ERROR for m in check_redis_server())
    wurk(REDIS_URL="redis://127.0.0.1:1/12")
    assert check_settings() == []  # the ordinary check never dials
    [message] = check_redis_server()
    assert message.id == "wurk.W011"
    assert check_redis_server in checks.registry.registry.get_checks(include_deployment_checks=True)
    assert check_redis_server not in checks.registry.registry.get_checks(include_deployment_checks=False)


def _redis_cache(settings, url, **options):
    return {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": url,
        "KEY_PREFIX": "cacheprefix",
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient", **options},
    }


def test_redis_from_a_django_redis_cache(wurk, settings, redis_db):
    # DJ-002
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "jobs": _redis_cache(settings, settings.WURK_TEST_REDIS_URL, SOCKET_TIMEOUT=1, SOCKET_CONNECT_TIMEOUT=2,
                             CONNECTION_POOL_KWARGS={"max_connections": 3, "health_check_interval": 30}),
    }
    wurk(REDIS={"CACHE": "jobs"})
    config = get_config()
    assert config.redis_url == settings.WURK_TEST_REDIS_URL
    assert config.redis_options == {"socket_timeout": 1, "socket_connect_timeout": 2, "health_check_interval": 30}
    jid = RecordJob.perform_async("via cache")
    from django.core.cache import caches

    caches["jobs"].set("k", "v")
    keys = {k.decode() for k in redis_db.keys("*")}
    assert "queue:default" in keys and "queues" in keys
    assert not any(k.startswith("cacheprefix") and "queue" in k for k in keys)
    assert any(k.startswith("cacheprefix") for k in keys)  # the cache itself still uses its prefix
    assert jid.encode() in redis_db.lindex("queue:default", 0)


def test_blocking_fetch_outlives_a_short_cache_socket_timeout(wurk, settings, redis_db):
    # DJ-003: the cache's socket_timeout=1 must not cut a 2 s blocking read short.
    settings.CACHES = {"jobs": _redis_cache(settings, settings.WURK_TEST_REDIS_URL, SOCKET_TIMEOUT=1)}
    wurk(REDIS={"CACHE": "jobs"})
    assert connection.get_redis().connection_pool.connection_kwargs["socket_timeout"] == 1
    fetch = connection.get_redis("fetch", block_seconds=2)
    assert fetch.connection_pool.connection_kwargs["socket_timeout"] >= 4
    assert fetch.brpop(["queue:empty"], timeout=2) is None


def test_redis_from_djangos_own_redis_cache(wurk, settings):
    primary = settings.WURK_TEST_REDIS_URL
    settings.CACHES = {"default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": [primary, "redis://replica.invalid:6379/12"],
        "OPTIONS": {"socket_keepalive": True, "pool_class": "redis.BlockingConnectionPool"},
    }}
    wurk(REDIS={"CACHE": "default", "OPTIONS": {"health_check_interval": 5}})
    config = get_config()
    assert config.redis_url == primary
    assert config.redis_options == {"socket_keepalive": True, "health_check_interval": 5}


@override_settings(WURK={"REDIS": {"CACHE": "nope"}})
def test_config_refuses_an_unknown_cache_alias():
    from wurk_django.errors import ConfigurationError

    reset_config()
    with pytest.raises(ConfigurationError, match="nope"):
        get_config()


@pytest.mark.parametrize("extra", [(), ("--rename-command", "CONFIG", "")], ids=["config", "no-config"])
def test_deploy_check_errors_on_an_evicting_redis_issue_43_item_3(wurk, extra):
    """An error, not a warning (issue 43 item 3): the worker would refuse that server. Also
    where CONFIG is disabled, as on most managed Redis (the policy comes from INFO memory).
    ``ALLOW_EVICTION`` silences it."""
    from tests.redis_servers import TCPRedis

    server = TCPRedis("--maxmemory-policy", "allkeys-lfu", *extra).start()
    try:
        wurk(REDIS_URL=server.url())
        [message] = check_redis_server()
        assert message.id == "wurk.E012" and message.level == checks.ERROR
        assert "allkeys-lfu" in message.msg and "ALLOW_EVICTION" in message.msg
        wurk(REDIS_URL=server.url(), ALLOW_EVICTION=True)
        assert check_redis_server() == []
    finally:
        connection.reset()
        server.stop()


def test_deploy_check_warns_when_the_policy_cannot_be_read(wurk, monkeypatch):
    """A server whose INFO memory lacks maxmemory_policy and that refuses CONFIG (some
    look-alikes): a warning, as the worker warns and starts."""
    from wurk_django.redis import eviction

    monkeypatch.setattr(eviction, "policy_from_info", lambda memory: None)
    monkeypatch.setattr(eviction, "policy_from_config", lambda client: None)
    wurk()
    [message] = check_redis_server()
    assert message.id == "wurk.W012" and "maxmemory-policy" in message.msg


def test_allow_eviction_must_be_a_bool(wurk):
    wurk(ALLOW_EVICTION="yes")
    [message] = check_settings()
    assert message.id == "wurk.E002" and "ALLOW_EVICTION" in message.msg


def test_each_check_id_is_raised_by_one_module_only():
    """A check id names one problem: two modules raising the same id (the tasks backend's
    OPTIONS checks once shared ``wurk.E020`` with malformed ``PERIODIC`` entries) would make
    ``SILENCED_SYSTEM_CHECKS`` silence both."""
    import re
    from collections import defaultdict

    from tests.support import PACKAGE as package
    raisers: dict[str, set[str]] = defaultdict(set)
    for path in package.rglob("*.py"):
        for found in re.findall(r'"(wurk\.[EW]\d{3})"', path.read_text()):
            raisers[found].add(str(path.relative_to(package)))
    assert raisers, "no check ids found: the pattern no longer matches how checks are written"
    shared = {check_id: sorted(paths) for check_id, paths in raisers.items() if len(paths) > 1}
    assert shared == {}


def test_settings_that_do_nothing_together_are_warned_about_issue_47(wurk):
    """An enqueue token with no job class to enqueue (W042); queue limits under
    BasicFetch, which refuses to start on a capped queue (W043)."""
    from wurk_django.checks import check_feature_settings

    token = {"TOKEN": "t" * 20, "SCOPES": ["enqueue", "read"]}
    wurk(HTTP_API_TOKENS={"ci": token, "reader": {"TOKEN": "r" * 20, "SCOPES": ["read"]}})
    [message] = check_feature_settings()
    assert message.id == "wurk.W042" and "'ci'" in message.msg and "HTTP_API_JOB_CLASSES" in message.msg
    wurk(HTTP_API_TOKENS={"ci": token}, HTTP_API_JOB_CLASSES=["shop.jobs.*"])
    assert check_feature_settings() == []

    wurk(QUEUE_LIMITS={"reports": 2}, FETCH_CLASS="wurk_django.server.fetch.basic.BasicFetch")
    [message] = check_feature_settings()
    assert message.id == "wurk.W043" and "reports" in message.msg and "BasicFetch" in message.msg
    wurk(QUEUE_LIMITS={"reports": 2})
    assert check_feature_settings() == []


def test_gil_gate_is_still_accepted_but_warned_about_as_having_no_effect_issue_48(wurk):
    """The run gate is gone (issue 48 item 4): settings that set GIL_GATE still load and
    pass check_settings, and W044 says the key does nothing and can be deleted."""
    from wurk_django.checks import check_retired_settings

    assert check_retired_settings() == []
    for value in (None, True, False):
        wurk(GIL_GATE=value)
        assert check_settings() == []
        get_config()  # the worker's config still builds
        [message] = check_retired_settings()
        assert message.id == "wurk.W044" and message.level == checks.WARNING
        assert "'GIL_GATE'" in message.msg and "no longer has an effect" in message.msg
        assert "delete" in message.hint
    shown = io.StringIO()
    call_command("check", stderr=shown)  # registered: manage.py check shows it, and passes
    assert "wurk.W044" in shown.getvalue()
    wurk()
    assert check_retired_settings() == []
