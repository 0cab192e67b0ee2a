"""Redis Cluster is refused (issue 18 item 5, RUN-606): at worker boot and in
``manage.py check --deploy``, with one line that says why and points to sharding,
against a redis-server started with ``--cluster-enabled yes``."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from tests.redis_servers import TCPRedis
from tests.support import WorkerProcess, wurk_settings
from wurk_django.checks import check_redis_server
from wurk_django.conf import Config
from wurk_django.errors import RedisClusterError
from wurk_django.redis import connection


@pytest.fixture(scope="module")
def cluster_node():
    server = TCPRedis("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize("db", [0, 3])  # a database number makes the connect itself fail (SELECT)
def test_check_server_refuses_a_cluster_node(cluster_node, db):
    config = Config(raw={"REDIS_URL": cluster_node.url(db)})
    try:
        with pytest.raises(RedisClusterError) as caught:
            connection.check_server(connection.get_redis(config=config), config)
    finally:
        connection.reset()
    message = str(caught.value)
    assert "\n" not in message
    assert "cluster_enabled:1" in message and "several keys" in message and "WURK['SHARDS']" in message


def test_the_deploy_check_says_why(cluster_node):
    with wurk_settings(REDIS_URL=cluster_node.url(0)):
        [error] = check_redis_server()
        assert error.id == "wurk.E011" and "WURK['SHARDS']" in error.msg
        with pytest.raises(SystemCheckError, match="wurk.E011"):
            call_command("check", "--deploy", stdout=io.StringIO(), stderr=io.StringIO())


def test_a_worker_refuses_to_boot_on_a_cluster(cluster_node):
    worker = WorkerProcess("-c", "1", env={"WURK_TEST_REDIS_URL": cluster_node.url(0)})
    assert worker.wait(timeout=60) == 1
    output = worker.output()
    assert "cluster_enabled:1" in output and "WURK['SHARDS']" in output
    assert "Traceback" not in output
