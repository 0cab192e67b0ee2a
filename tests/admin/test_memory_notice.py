"""The dashboard says when Redis is at its memory limit (issue 25 item 5)."""

from __future__ import annotations

import pytest

from wurk_django.admin import dashboard

from .conftest import BASE

pytestmark = pytest.mark.django_db


class _Full:
    """The test Redis, except that ``INFO`` reports it at a ``noeviction`` limit."""

    def __init__(self, real, policy: str) -> None:
        self._real = real
        self._policy = policy

    def info(self, *args, **kwargs):
        info = dict(self._real.info(*args, **kwargs))
        info.update(used_memory=3_300_000, used_memory_human="3.15M", maxmemory=3_145_728,
                    maxmemory_human="3.00M", maxmemory_policy=self._policy)
        return info

    def __getattr__(self, name):
        return getattr(self._real, name)


@pytest.mark.parametrize(("policy", "shown"), [("noeviction", True), ("volatile-lru", True), ("allkeys-lru", False)])
def test_the_dashboard_names_the_memory_limit(admin_client, redis_db, monkeypatch, policy, shown):
    real = dashboard.redis()
    monkeypatch.setattr(dashboard, "redis", lambda: _Full(real, policy))
    html = admin_client.get(BASE).content.decode()
    assert ('id="wurk-memory-full"' in html) is shown
    if shown:
        assert f"used_memory 3.15M &gt; maxmemory 3.00M, maxmemory-policy {policy}" in html
        assert "allow-oom" in html


def test_no_notice_below_the_limit(admin_client, redis_db):
    assert 'id="wurk-memory-full"' not in admin_client.get(BASE).content.decode()
    assert dashboard.memory_full({"used_memory": 10, "maxmemory": 0}) == ""
