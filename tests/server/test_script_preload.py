"""Lua scripts loaded at boot and checked in every swarm child (issue 31 item 4; PRO-004,
RUN-403). Each test runs its own redis-server (ports from ``WURK_TEST_PORTS``): the
script cache is server-wide, and a ``SCRIPT FLUSH`` must not reach other tests."""

from __future__ import annotations

import json
import os
import signal

import pytest
import redis as redis_lib

from tests.redis_servers import TCPRedis
from tests.support import WorkerProcess, wait_for
from wurk_django.conf import Config
from wurk_django.redis import scripts
from wurk_django.server import child

pytestmark = pytest.mark.slow


@pytest.fixture
def server():
    started = TCPRedis().start()
    yield started
    started.stop()


def _present(client: redis_lib.Redis) -> list[bool]:
    return client.script_exists(*(scripts.lua(name).sha for name in scripts.all_names()))


def test_every_script_of_the_package_is_named():
    names = scripts.all_names()
    assert "reclaim" in names and "batch/lua/push" in names and "periodic/lua/claim_fire" in names
    assert not any("snippets" in name for name in names)  # only ever sent inside the scripts that include them
    assert len(names) == len(set(names))


def test_preload_loads_what_is_missing_and_nothing_twice(server):
    client = server.client()
    try:
        assert not any(_present(client))
        assert scripts.preload(client) == len(scripts.all_names())
        assert all(_present(client))
        assert scripts.preload(client) == 0  # one round trip, nothing to load
        client.script_flush()
        client.script_load(scripts.lua("reclaim").source)
        assert scripts.preload(client) == len(scripts.all_names()) - 1
    finally:
        client.close()


def test_a_server_without_script_commands_still_boots(caplog):
    """A server that renamed SCRIPT away still runs ``EVAL`` (the NOSCRIPT fallback)."""
    started = TCPRedis("--rename-command", "SCRIPT", "").start()
    client = started.client()
    try:
        assert scripts.preload(client) == 0
        assert "refuses SCRIPT EXISTS" in caplog.text
    finally:
        client.close()
        started.stop()


def test_the_child_check_fails_after_its_attempts_when_redis_is_gone(server):
    config = Config(raw={"REDIS_URL": server.url(), "TAG": "t"})
    server.stop()
    with pytest.raises(redis_lib.ConnectionError):
        child.check_redis(config, attempts=2, delay=0.01)


def test_a_respawned_swarm_child_loads_the_scripts_before_it_works(server):
    """The scripts are flushed under a running swarm and its child is killed: the
    supervisor respawns it, and the new child has every script back (those no job
    of it has run included) by the time it beats."""
    client = server.client()
    extra = {"REDIS_URL": server.url(), "SUPER_FETCH_REAPER_INTERVAL": 1}
    swarm = WorkerProcess("--processes", "1", "-c", "1", env={"WURK_TEST_EXTRA": json.dumps(extra)})
    try:
        def beating() -> set[str]:
            return {m.decode() for m in client.smembers("processes") if client.hexists(m, "info")}

        first = wait_for(beating, timeout=60, message="the child to beat")
        assert all(_present(client))  # loaded at boot
        client.script_flush()
        (identity,) = first
        os.kill(int(identity.split(":")[1]), signal.SIGKILL)
        wait_for(lambda: beating() - first, timeout=60, message="the respawned child to beat")
        assert all(_present(client))
        assert swarm.stop() == 0
    finally:
        if swarm.alive():
            swarm.kill()
        client.close()
