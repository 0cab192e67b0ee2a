"""wurk_django.FastRedis: the fast client job code gets from redis-py or django-redis (issue 30 item 2).

Run with the fast path on and off (the suite's ``WURK_FAST_PATH=0`` run, .ci/run): the
replies must not change, only the path (``fast_path``).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import redis
from django.conf import settings

from wurk_django import FastRedis
from wurk_django.conf import get_config, reset_config
from wurk_django.redis import connection, wire


@pytest.fixture
def url(redis_db) -> str:
    return settings.WURK_TEST_REDIS_URL


def _django_redis_cache(url: str, **options) -> dict:
    return {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": url,
        "OPTIONS": {"REDIS_CLIENT_CLASS": "wurk_django.FastRedis",
                    "CONNECTION_POOL_KWARGS": {"protocol": 2}, **options},
    }


def test_from_url_speaks_resp2_and_takes_the_fast_path(url):
    client = FastRedis.from_url(url)
    try:
        assert client.fast_path is wire.enabled()
        assert client.connection_pool.connection_kwargs["protocol"] == 2
        assert client.set("k", "v") is True
        assert client.get("k") == b"v"
        assert client.incr("n") == 1
        with client.pipeline() as pipe:
            assert pipe.incr("n").get("k").execute() == [2, b"v"]
        assert client.hset("h", mapping={"a": "1"}) == 1 and client.hgetall("h") == {b"a": b"1"}
    finally:
        client.close()


def test_replies_match_plain_redis_py_with_decoding(url):
    fast = FastRedis.from_url(url, decode_responses=True)
    plain = redis.Redis.from_url(url, decode_responses=True, protocol=2)
    try:
        seen = []
        for client in (plain, fast):
            client.flushdb()
            seen.append([client.set("s", "é"), client.get("s"), client.incrbyfloat("f", 0.5),
                         client.zadd("z", {"x": 1.5}), client.zrange("z", 0, -1, withscores=True),
                         client.rpush("l", "a", "b"), client.lrange("l", 0, -1), client.get("missing")])
        assert seen[0] == seen[1]
    finally:
        fast.close()
        plain.close()


def test_a_resp3_pool_is_served_by_redis_py_unchanged(url):
    pool = redis.ConnectionPool.from_url(url, protocol=3)
    client = FastRedis(connection_pool=pool)
    try:
        assert client.fast_path is False
        assert client.incr("n") == 1 and client.get("n") == b"1"
    finally:
        pool.disconnect()


def test_a_pool_naming_no_protocol_is_served_as_redis_py_defaults(url):
    # redis-py up to 7 speaks RESP2 by default, 8 RESP3: the fast path only for the former.
    pool = redis.ConnectionPool.from_url(url)
    client = FastRedis(connection_pool=pool)
    try:
        assert client.incr("n") == 1
        conn = pool.get_connection()
        spoken = str(conn.protocol)
        pool.release(conn)
        assert client.fast_path is (spoken == "2" and wire.enabled())
    finally:
        pool.disconnect()


def test_django_redis_hands_out_fast_redis(url, settings, redis_db, monkeypatch):
    from django.core.cache import caches
    from django_redis import get_redis_connection
    from django_redis.pool import ConnectionFactory

    # django-redis keeps one pool per URL for the whole process: a pool another test
    # built for this URL with other options (no protocol named) would be handed out here.
    monkeypatch.setattr(ConnectionFactory, "_pools", {})

    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
                       "fast": _django_redis_cache(url)}
    client = get_redis_connection("fast")
    assert isinstance(client, FastRedis)
    assert client.fast_path is wire.enabled()
    cache = caches["fast"]
    cache.set("k", {"a": 1}, timeout=60)
    assert cache.get("k") == {"a": 1}
    cache.set("n", 1)
    assert cache.incr("n") == 2 and cache.incr("n", 5) == 7
    assert cache.get_many(["k", "n", "missing"]) == {"k": {"a": 1}, "n": 7}
    assert cache.add("k", "other") is False
    assert client.incr("raw") == 1
    with client.pipeline() as pipe:
        assert pipe.incr("raw").incr("raw").execute() == [2, 3]
    assert redis_db.get("raw") == b"3"


def test_wurk_reuses_a_cache_whose_client_class_is_fast_redis(settings, url, redis_db):
    # REDIS_CLIENT_CLASS is django-redis's, not a redis-py option: wurk must not pass it on.
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
                       "fast": _django_redis_cache(url, REDIS_CLIENT_KWARGS={})}
    settings.WURK = {"REDIS": {"CACHE": "fast"}}
    reset_config()
    connection.reset()
    assert "REDIS_CLIENT_CLASS" not in get_config().redis_options
    from wurk_django import redis_client

    assert redis_client().incr("n") == 1


FORK_CHECK = """
import os, sys
from wurk_django import FastRedis

client = FastRedis.from_url(sys.argv[1])
client.incr("n")
parent_id = client.client_id()
pid = os.fork()
if pid == 0:
    # The same object in the child: it must dial its own connection, never write on the parent's.
    ok = client.incr("n") == 2 and client.client_id() != parent_id
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
assert client.incr("n") == 3 and client.client_id() == parent_id  # the parent's connection is intact
print("ok")
"""


def test_a_forked_child_dials_its_own_connection(url, redis_db):
    done = subprocess.run([sys.executable, "-c", FORK_CHECK, url], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    assert redis_db.get("n") == b"3"


def test_a_pool_sized_by_someone_else_lends_a_bounded_stack(url):
    client = FastRedis(connection_pool=redis.ConnectionPool.from_url(url, protocol=2, max_connections=2 ** 31))
    try:
        assert client._keep == 64
        assert FastRedis(connection_pool=redis.ConnectionPool.from_url(url, max_connections=1))._keep == 1
    finally:
        client.close()


def test_an_idle_stack_goes_with_its_pool(url):
    # The stacks are kept by the pool's id: one left behind would keep its connections
    # open, and could be handed to a later pool given the same id.
    import gc

    client = FastRedis.from_url(url)
    assert client.incr("n") == 1
    pool_id = id(client.connection_pool)
    if client.fast_path:
        assert connection.idle_stack(client.connection_pool)
    client.close()
    del client
    gc.collect()
    assert pool_id not in connection._idle_stacks and pool_id not in connection._stack_refs


def test_response_callbacks_set_by_the_user_still_apply(url):
    # The fast path looks a reply's callback up without redis-py's upper-casing when the
    # command name is upper case already; a callback named in lower case is the same entry.
    client = FastRedis.from_url(url)
    try:
        client.set_response_callback("incrby", lambda reply, **options: ("counted", reply))
        assert client.incr("n") == ("counted", 1)
        assert client.execute_command("incrby", "n", 2) == ("counted", 3)
        assert client.execute_command("GET", "n") == b"3"
    finally:
        client.close()
