"""connection.py is the one client factory and takes the Config explicitly (issue 11, item 2)."""

from __future__ import annotations

import asyncio

from django.conf import settings

from wurk_django import conf
from wurk_django.conf import Config
from wurk_django.redis import connection
from wurk_django.redis.connection import async_redis, get_redis, pool_size_for, probe_redis


def _config(**extra) -> Config:
    return Config(raw={"REDIS_URL": settings.WURK_TEST_REDIS_URL, "TAG": "t", **extra})


def test_a_given_config_is_used_without_reading_settings(monkeypatch, redis_db):
    config = _config(CONCURRENCY=7)

    def refuse():
        raise AssertionError("settings were read although a Config was given")

    monkeypatch.setattr(conf, "raw_settings", refuse)
    client = get_redis(config=config)
    assert client.ping()
    assert client.connection_pool.max_connections == 7 + connection.MAIN_POOL_EXTRAS
    assert get_redis("fetch", block_seconds=2, config=config).connection_pool.max_connections == 9
    assert probe_redis(config).ping()


def test_pools_are_sized_from_the_config_in_use_and_only_grow(redis_db):
    # Issue 11: a settings-sized pool (CONCURRENCY 5 -> 10) built first must not cap `-c 50`.
    small = get_redis()
    assert small.connection_pool.max_connections == 10
    big = get_redis(config=_config(CONCURRENCY=50))
    assert big.connection_pool.max_connections == 55 == pool_size_for(_config(CONCURRENCY=50))
    assert get_redis() is big  # a smaller request is served by the bigger pool
    assert small.ping()  # a holder of the replaced client can still use it


def test_the_fetch_pool_reads_past_its_block_time(redis_db):
    """RUN-832: fetch socket timeout covers the block time; RUN-602: connect/read timeouts; blocking reads widened."""
    config = _config(REDIS={"URL": settings.WURK_TEST_REDIS_URL, "OPTIONS": {"socket_timeout": 0.5}})
    blocking = get_redis("fetch", block_seconds=3, config=config)
    assert blocking.connection_pool.connection_kwargs["socket_timeout"] >= 3
    assert get_redis(config=config).connection_pool.connection_kwargs["socket_timeout"] == 0.5


def test_probe_is_a_private_one_connection_client_with_short_timeouts(redis_db):
    probe = probe_redis(_config(), timeout=0.3)
    try:
        pool = probe.connection_pool
        assert pool.max_connections == 1 and pool.timeout == 0.3
        assert pool.connection_kwargs["socket_timeout"] == 0.3
        assert pool.connection_kwargs["socket_connect_timeout"] == 0.3
        assert probe is not get_redis(config=_config()) and probe is not probe_redis(_config())
        probe.set("probe", "x")
        assert redis_db.get("probe") == b"x"  # the config's database
    finally:
        probe.connection_pool.disconnect()


def test_async_client_follows_the_config_and_the_running_loop(redis_db):
    config = _config()

    async def use():
        client = async_redis(config)
        assert client is async_redis(config)
        await client.set("async", "y")
        value = await client.get("async")
        kwargs = client.connection_pool.connection_kwargs
        await client.aclose() if hasattr(client, "aclose") else await client.close()
        return client, value, kwargs

    first, value, kwargs = asyncio.run(use())
    second, _, _ = asyncio.run(use())
    assert value == b"y"  # bytes, like every wurk client
    assert kwargs["socket_timeout"] == connection.READ_TIMEOUT and kwargs["protocol"] == 2
    assert first is not second  # a client never crosses event loops


def test_pool_size_setting_raises_every_pool_but_never_below_the_threads(redis_db):
    url = settings.WURK_TEST_REDIS_URL
    big = _config(CONCURRENCY=5, REDIS={"URL": url, "POOL_SIZE": 40})
    assert get_redis(config=big).connection_pool.max_connections == 40
    assert get_redis("ack", config=big).connection_pool.max_connections == 40
    small = _config(CONCURRENCY=20, REDIS={"URL": url, "POOL_SIZE": 3})
    assert pool_size_for(small) == 25 and pool_size_for(small, "fetch") == 22


def test_a_shards_own_pool_size_sizes_that_shards_pools_only(redis_db):
    url = settings.WURK_TEST_REDIS_URL
    config = _config(CONCURRENCY=5, REDIS={"URL": url, "POOL_SIZE": 12},
                     SHARDS={"big": {"URL": url.rsplit("/", 1)[0] + "/3", "POOL_SIZE": 60}, "plain": url})
    assert pool_size_for(config) == 12
    assert pool_size_for(config.for_shard("big")) == 60
    assert get_redis(config=config.for_shard("big")).connection_pool.max_connections == 60
    assert pool_size_for(config.for_shard("plain")) == 10  # a URL shard: the thread-based size
    assert pool_size_for(config.for_shard({"URL": url, "POOL_SIZE": 30})) == 30
