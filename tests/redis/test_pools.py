"""wurk_django/redis/pools.py: each reach into a redis-py pool's undocumented parts, on
this redis-py, and the plain answer it gives when redis-py no longer has that part
(issue 41 item 4). The fallbacks are met here by pools that lack the part."""

from __future__ import annotations

import types

import pytest
import redis
from django.conf import settings

from wurk_django.redis import pools
from wurk_django.redis.connection import get_redis, send_on, trim_idle


@pytest.fixture
def plain_client(redis_db):
    client = redis.Redis.from_url(settings.WURK_TEST_REDIS_URL, protocol=2)
    yield client
    client.close()
    client.connection_pool.disconnect()


def test_the_database_comes_from_the_pools_options(plain_client):
    expected = int(settings.WURK_TEST_REDIS_URL.rsplit("/", 1)[1])
    assert pools.database_of(plain_client) == expected
    assert pools.server_of(plain_client)[3] == expected


def test_without_the_pools_options_the_database_is_asked_of_the_server(plain_client):
    # A client whose pool does not say its options (a redis-py that renamed them).
    client = types.SimpleNamespace(connection_pool=types.SimpleNamespace(), client_info=plain_client.client_info)
    assert pools.options_of(client.connection_pool) == {}
    assert pools.database_of(client) == int(settings.WURK_TEST_REDIS_URL.rsplit("/", 1)[1])
    assert pools.server_of(client) == (None, None, None, 0, None)


def test_the_protocol_is_the_options_or_the_connection_classes_default(plain_client):
    assert str(pools.protocol_of(plain_client.connection_pool)) == "2"
    unnamed = redis.ConnectionPool.from_url(settings.WURK_TEST_REDIS_URL)
    assert pools.protocol_of(unnamed) == redis.Connection().protocol  # redis-py's own default
    assert pools.protocol_of(types.SimpleNamespace()) is None


def test_a_connection_of_its_own_is_made_outside_the_pool_or_checked_out_of_it(plain_client):
    pool = plain_client.connection_pool
    own = pools.new_connection(pool)
    assert send_on(own, [("PING",)]) == [b"PONG"]
    own.disconnect()

    class NoMake:  # a pool without make_connection
        def __init__(self) -> None:
            self.lent = []

        def get_connection(self):
            conn = pool.get_connection()
            self.lent.append(conn)
            return conn

    other = NoMake()
    conn = pools.new_connection(other)
    assert other.lent == [conn] and send_on(conn, [("PING",)]) == [b"PONG"]
    pool.release(conn)


def test_the_free_queue_of_a_blocking_pool_is_taken_and_put_back_in_order(redis_db):
    pool = get_redis("pools-test", pool_size=3).connection_pool
    conns = [pool.get_connection() for _ in range(2)]
    for conn in conns:
        pool.release(conn)
    taken = pools.take_free(pool)
    assert taken[:2] == [conns[1], conns[0]]  # top (the last released) first
    assert len(taken) == 3  # the slot of the connection not made yet is None
    assert pools.free_connections(pool) == []
    pools.put_free(pool, list(reversed(taken)))
    assert pools.free_connections(pool) == [c for c in reversed(taken) if c is not None]
    assert pool.get_connection() is conns[1]


def test_a_pool_without_a_free_queue_is_left_alone(plain_client):
    plain_client.ping()
    pool = plain_client.connection_pool  # redis.ConnectionPool: no queue of free connections
    assert pools.take_free(pool) is None and pools.free_connections(pool) == []
    before = trim_idle(keep=0)
    assert isinstance(before, int)
    assert plain_client.ping()


def test_classes_are_changed_only_where_the_pool_says_which_it_uses(plain_client):
    pool = plain_client.connection_pool
    made = []

    def wrap(cls):
        made.append(cls)
        return type(f"Wrapped{cls.__name__}", (cls,), {})

    pools.wrap_connections(pool, wrap)
    assert made == [redis.Connection] and pool.connection_class.__name__ == "WrappedConnection"
    nothing = types.SimpleNamespace()
    pools.wrap_connections(nothing, wrap)
    assert made == [redis.Connection]
    pools.set_class(pool, type("Sub", (type(pool),), {}))
    assert type(pool).__name__ == "Sub"
    pools.set_class(pool, dict)  # not a subclass of its class: refused
    assert type(pool).__name__ == "Sub"


def test_a_sentinel_pools_heard_primary_on_the_proxy_or_on_the_pool(redis_db):
    proxied = types.SimpleNamespace(proxy=types.SimpleNamespace(master_address=("10.0.0.1", 6379)))
    assert pools.heard_primary(proxied) == ("10.0.0.1", 6379)
    pools.hear_primary(proxied, ("10.0.0.2", 6380))
    assert proxied.proxy.master_address == ("10.0.0.2", 6380)
    older = types.SimpleNamespace(master_address=None)  # a redis-py whose pool keeps it itself
    pools.hear_primary(older, ("10.0.0.3", 6379))
    assert pools.heard_primary(older) == ("10.0.0.3", 6379)
    assert pools.heard_primary(types.SimpleNamespace()) is None


def test_only_a_connection_to_a_sentinel_primary_has_a_sentinel_side(plain_client):
    assert pools.sentinel_primary(plain_client.connection_pool.get_connection()) is None
    proxy = types.SimpleNamespace(is_master=True, service_name="mymaster", sentinel_manager="m",
                                  master_address=("10.0.0.1", 6379))
    side = pools.sentinel_primary(types.SimpleNamespace(connection_pool=proxy))
    assert (side.service, side.manager, side.primary) == ("mymaster", "m", ("10.0.0.1", 6379))
    proxy.is_master = False  # a replica's connection
    assert pools.sentinel_primary(types.SimpleNamespace(connection_pool=proxy)) is None
