"""A stop ends this process's blocked fetch reads at once (wurk_django/redis/blocked.py)."""

from __future__ import annotations

import threading

import pytest
import redis

from tests.local_redis import LocalRedis, free_port
from tests.support import wait_for
from wurk_django.redis import blocked
from wurk_django.redis.connection import get_redis


def _blocked_names(client) -> list[str]:
    return [blocked._text(entry.get("name")) for entry in client.client_list(_type="normal")
            if "b" in blocked._text(entry.get("flags"))]


def _block_in_thread(fetch_client, key: str, seconds: float) -> tuple[threading.Thread, list]:
    replies: list = []
    thread = threading.Thread(target=lambda: replies.append(fetch_client.blmove(key, f"{key}:private", seconds)),
                              daemon=True)
    thread.start()
    return thread, replies


def test_the_fetch_pools_connections_carry_this_process_s_name(redis_db):
    fetch = get_redis("fetch", block_seconds=2)
    fetch.ping()
    names = [blocked._text(e.get("name")) for e in redis_db.client_list(_type="normal")]
    assert blocked.connection_name() in names
    assert blocked.connection_name().startswith("wurk-fetch-")
    assert get_redis().connection_pool.connection_kwargs.get("client_name") is None  # only the blocking pool


def test_unblock_ends_this_process_s_blocked_read_as_a_timeout(redis_db):
    fetch = get_redis("fetch", block_seconds=300)
    thread, replies = _block_in_thread(fetch, "queue:idle", 300)
    wait_for(lambda: blocked.connection_name() in _blocked_names(redis_db), timeout=30, message="the read to block")
    assert blocked.unblock(get_redis()) == 1
    thread.join(timeout=30)
    assert not thread.is_alive() and replies == [None]  # ended as a timeout ends it: nothing moved
    assert redis_db.llen("queue:idle:private") == 0


def test_another_client_s_block_is_left_alone(redis_db, settings):
    other = redis.Redis.from_url(settings.WURK_TEST_REDIS_URL, client_name="wurk-fetch-somebody-else")
    try:
        thread, replies = _block_in_thread(other, "queue:other", 300)
        wait_for(lambda: "wurk-fetch-somebody-else" in _blocked_names(redis_db), timeout=30,
                 message="the other read to block")
        assert blocked.unblock(get_redis()) == 0
        assert "wurk-fetch-somebody-else" in _blocked_names(redis_db)
        redis_db.client_unblock(next(int(e["id"]) for e in redis_db.client_list(_type="normal")
                                     if blocked._text(e.get("name")) == "wurk-fetch-somebody-else"))
        thread.join(timeout=30)
        assert replies == [None]
    finally:
        other.close()


def test_a_name_from_the_settings_is_kept_and_nothing_is_unblocked(redis_db):
    assert blocked.name_option({"client_name": "shop-web"}) == {}
    assert blocked.name_option({}) == {"client_name": blocked.connection_name()}


@pytest.fixture
def no_client_command():
    port = free_port()
    server = LocalRedis("--port", str(port), "--bind", "127.0.0.1", "--rename-command", "CLIENT", "")
    server.start(lambda: redis.Redis(port=port).ping())
    yield port
    server.stop()


def test_a_server_refusing_client_leaves_the_blocks_to_their_timeout(no_client_command, caplog):
    client = redis.Redis(port=no_client_command)
    try:
        with caplog.at_level("DEBUG", logger="wurk_django.redis.blocked"):
            assert blocked.unblock(client) == 0
        assert "end on their timeout" in caplog.text
    finally:
        client.close()


def test_an_idle_worker_stops_without_waiting_out_its_blocked_fetch(redis_db, worker_factory):
    # The fetch blocks for ten minutes and the stop may drain for a minute: a stop that
    # waited for the read to time out would reach its deadline; this one ends the read.
    worker = worker_factory("-c", "3", "-q", "default",
                            env={"WURK_TEST_EXTRA": '{"FETCH_POLL_INTERVAL": 600, "TIMEOUT": 60}'})
    mine = f"wurk-fetch-{worker.pid}-"  # the server's other clients may be other tests' workers
    wait_for(lambda: any(n.startswith(mine) for n in _blocked_names(redis_db)), timeout=60,
             message="the worker's fetch to block")
    worker.stop(timeout=30)  # well inside the drain's minute, and within it only if the block ended
    assert worker.proc.returncode == 0, worker.output()
    assert "terminating" not in worker.output()
