"""Every Wurk page says when Redis may evict jobs (issue 43 item 3), from a private
redis-server started with ``--maxmemory-policy allkeys-lfu``; the Prometheus endpoint
exports ``evicted_keys``. In French too (the banner's strings are in the catalog)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.redis_servers import TCPRedis
from wurk_django.admin import eviction_banner
from wurk_django.conf import reset_config
from wurk_django.redis import connection

from .conftest import BASE

pytestmark = pytest.mark.django_db


@pytest.fixture
def point_at(settings):
    """Point the dashboard at another Redis (and forget the banner's cached readings)."""

    def use(url: str, **extra) -> None:
        settings.WURK = {**settings.WURK, "REDIS_URL": url, **extra}
        reset_config()
        connection.reset()
        eviction_banner.forget()

    yield use
    eviction_banner.forget()
    connection.reset()


@pytest.fixture
def lfu():
    server = TCPRedis("--maxmemory-policy", "allkeys-lfu").start()
    yield server
    connection.reset()
    server.stop()


def test_the_banner_names_the_policy_on_every_page(admin_client, point_at, lfu):
    point_at(lfu.url())
    for page in ("", "queues/", "retries/"):
        html = admin_client.get(BASE + page).content.decode()
        assert 'id="wurk-eviction"' in html, page
        assert "<code>allkeys-lfu</code>" in html and "ALLOW_EVICTION" in html
    assert "since it started" not in html  # nothing evicted yet: no count shown


def test_the_banner_counts_evicted_keys_and_speaks_french(admin_client, point_at, lfu):
    client = lfu.client()
    try:
        used = int(client.info("memory")["used_memory"])
        client.config_set("maxmemory", used + 1_000_000)
        for n in range(6):
            client.set(f"big:{n}", b"x" * 400_000)
        client.config_set("maxmemory", 0)
        evicted = int(client.info("stats")["evicted_keys"])
        assert evicted > 0
    finally:
        client.close()
    point_at(lfu.url())
    html = admin_client.get(BASE, HTTP_ACCEPT_LANGUAGE="fr").content.decode()
    assert 'id="wurk-eviction"' in html and "Redis peut évincer des jobs" in html
    assert f"Il a évincé {evicted} clé" in html
    scrape = admin_client.get(BASE + "prometheus").content.decode()
    families = {family.name: family for family in text_string_to_metric_families(scrape)}
    assert families["wurk_redis_evicted_keys"].type == "counter"
    assert families["wurk_redis_evicted_keys"].samples[0].value == evicted


def test_no_banner_when_allowed_or_on_noeviction(admin_client, point_at, lfu, settings):
    point_at(lfu.url(), ALLOW_EVICTION=True)
    assert 'id="wurk-eviction"' not in admin_client.get(BASE).content.decode()
    point_at(settings.WURK_TEST_REDIS_URL)  # the test Redis: noeviction
    html = admin_client.get(BASE).content.decode()
    assert 'id="wurk-eviction"' not in html
    scrape = admin_client.get(BASE + "prometheus").content.decode()
    assert "wurk_redis_evicted_keys " in scrape  # exported whatever the policy


def test_the_reading_is_cached_briefly(admin_client, point_at, lfu, monkeypatch):
    """One INFO round trip per CACHE_SECONDS per process and Redis, not one per page."""
    from wurk_django.redis import eviction

    point_at(lfu.url())
    calls = []
    real = eviction.state
    monkeypatch.setattr(eviction, "state", lambda client: calls.append(1) or real(client))
    for _ in range(3):
        assert 'id="wurk-eviction"' in admin_client.get(BASE + "queues/").content.decode()
    assert len(calls) == 1
    monkeypatch.setattr(eviction_banner, "CACHE_SECONDS", 0.0)
    admin_client.get(BASE + "queues/")
    assert len(calls) == 2
