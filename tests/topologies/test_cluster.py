"""Redis Cluster, issue 46 stage 1, on a real cluster of 3 primaries and 3 replicas
started once per session (``redis_cluster`` in tests/conftest.py):

* detection (``cluster_enabled:1``, or ``CLUSTER INFO`` when ``INFO`` is refused)
  from a URL naming any node, with or without a database number;
* application code's ``redis_client()`` is redis-py's ``RedisCluster`` there;
* everything of the engine not supported on a cluster yet fails at the call or at
  boot with a ``RedisClusterError`` naming it, never a raw ``MovedError`` (RUN-606:
  a cluster is refused for jobs, at configuration and at every call);
* a single server is still probed as one and left as it was.
"""

from __future__ import annotations

import asyncio
import io
import json

import pytest
import redis as redis_lib
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from redis.cluster import RedisCluster
from redis.exceptions import MovedError

from tests.redis_servers import TCPRedis
from tests.support import WorkerProcess, wurk_settings
from wurk_django import Job, api, redis_client
from wurk_django.checks import check_redis_server
from wurk_django.conf import Config
from wurk_django.errors import ConfigurationError, RedisClusterError
from wurk_django.redis import cluster, connection
from wurk_django.redis.cluster_layout import CLUSTER


class ClusterJob(Job):
    def perform(self, *args):
        pass


def _says_not_yet(error: BaseException, feature: str) -> None:
    message = str(error)
    assert "\n" not in message
    assert feature in message and "not supported on a Redis Cluster yet" in message
    assert "cluster_enabled:1" in message and "docs/redis.md#redis-cluster" in message


def test_the_fixture_is_a_healthy_cluster_of_three_primaries_and_three_replicas(redis_cluster):
    assert len(redis_cluster.ports) == 6 and len(redis_cluster.primary_ports()) == 3
    client = redis_cluster.client()
    try:
        # Keys of many slots: each lands on the primary owning its slot.
        for n in range(30):
            client.set(f"k{n}", n)
        assert [int(client.get(f"k{n}")) for n in range(30)] == list(range(30))
        owners = {client.get_node_from_key(f"k{n}").port for n in range(30)}
        assert owners == set(redis_cluster.primary_ports())
    finally:
        client.close()


@pytest.mark.parametrize("index", [0, 4])  # a primary and a replica (cluster create makes the first 3 primaries)
def test_every_node_is_detected_as_a_cluster(redis_cluster, index):
    client = redis_lib.Redis(port=redis_cluster.ports[index])
    try:
        assert cluster.probe(client) is True
    finally:
        client.close()


def test_a_database_number_in_the_url_is_detected_too(redis_cluster):
    # The connect itself fails there: SELECT is not allowed in cluster mode.
    client = redis_lib.Redis.from_url(redis_cluster.url(0).replace("/0", "/3"))
    try:
        assert cluster.probe(client) is True
    finally:
        client.close()


def test_a_single_server_is_not_a_cluster(redis_db):
    assert cluster.probe(redis_db) is False
    config = Config(raw={"REDIS_URL": _test_url()})
    connection.get_redis(config=config)  # probes once, raises nothing
    assert cluster.known(config.redis_target) is False


def _test_url() -> str:
    from django.conf import settings

    return settings.WURK_TEST_REDIS_URL


def test_when_info_is_refused_cluster_info_answers(redis_cluster):
    # An ACL user who may not run INFO (as on some managed services): CLUSTER INFO tells.
    plain = TCPRedis().start()
    try:
        for port in (redis_cluster.ports[0], plain.port):
            admin = redis_lib.Redis(port=port)
            admin.acl_setuser("noinfo", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-info"])
            admin.close()
        node = redis_lib.Redis(port=redis_cluster.ports[0], username="noinfo", password="pw")
        single = redis_lib.Redis(port=plain.port, username="noinfo", password="pw")
        with pytest.raises(redis_lib.exceptions.NoPermissionError):
            node.info("cluster")
        assert cluster.probe(node) is True
        assert cluster.probe(single) is False
        node.close()
        single.close()
        # Refused both questions: taken at its word as one server (a cluster behind such
        # an ACL answers MOVED, which becomes the clear error: see the test below).
        admin = redis_lib.Redis(port=plain.port)
        admin.acl_setuser("mute", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-info", "-cluster"])
        admin.close()
        mute = redis_lib.Redis(port=plain.port, username="mute", password="pw")
        assert cluster.probe(mute) is False
        mute.close()
    finally:
        admin = redis_lib.Redis(port=redis_cluster.ports[0])
        admin.acl_deluser("noinfo")
        admin.close()
        plain.stop()


def test_an_unreachable_server_is_not_decided_and_not_asked_again_at_once(redis_db, monkeypatch):
    from tests.local_redis import free_port

    port = free_port()
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    client = redis_lib.Redis(port=port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))  # no redis-py 8 retries
    assert cluster.probe(client) is None
    asked = []
    monkeypatch.setattr(cluster, "probe", lambda c: asked.append(c) or None)
    target = Config(raw={"REDIS_URL": f"redis://127.0.0.1:{port}/0"}).redis_target
    assert [cluster.is_cluster(target, client) for _ in range(5)] == [False] * 5
    assert len(asked) == 1 and cluster.known(target) is None and not cluster.due(target)
    monkeypatch.setattr(cluster, "ASK_AGAIN_EVERY", 0.0)
    cluster._ask_again_at.clear()
    cluster.is_cluster(target, client)
    assert len(asked) == 2


def test_redis_client_is_a_redis_cluster_client_on_a_cluster(redis_cluster):
    with wurk_settings(REDIS_URL=redis_cluster.url(1)):
        client = redis_client()
        assert isinstance(client, RedisCluster)
        for n in range(20):
            client.set(f"app:{n}", n)
        assert client.mget([f"{{app}}:{n}" for n in range(3)]) == [None, None, None]  # one slot: allowed
        assert sum(int(client.get(f"app:{n}")) for n in range(20)) == sum(range(20))
        decoded = redis_client(decode_responses=True)
        assert isinstance(decoded, RedisCluster) and decoded.get("app:3") == "3"
        assert redis_client() is client  # one per process, as on one server


def test_a_cluster_client_refuses_a_database_other_than_0(redis_cluster):
    config = Config(raw={"REDIS_URL": redis_cluster.url(0).replace("/0", "/2")})
    with pytest.raises(ConfigurationError, match="only database 0"):
        cluster.cluster_client(config)


def test_pushes_work_and_what_is_not_converted_fails_at_the_call_naming_it(redis_cluster):
    # Stage 2: plain pushes write the cluster layout (tests/topologies/test_cluster_push.py);
    # the data API reads it (tests/api/test_cluster.py); the engine's asyncio client is not converted yet.
    with wurk_settings(REDIS_URL=redis_cluster.url(2)):
        ClusterJob.perform_async(1)
        ClusterJob.perform_bulk([[n] for n in range(5)])
        ClusterJob.set(queue="other").perform_in(60, 1)
        assert api.Stats().enqueued == 6
        with pytest.raises(RedisClusterError) as caught:
            connection.async_redis()
        _says_not_yet(caught.value, "asyncio client")
    client = redis_cluster.client()
    try:
        assert client.llen(CLUSTER.queue("default")) == 6 and client.zcard(CLUSTER.schedule("other")) == 1
        # Nothing anywhere in the single-server layout.
        assert client.exists("queue:default", "queues", "schedule") == 0
    finally:
        client.close()


def test_the_engines_asyncio_client_is_refused(redis_cluster):
    # Async pushes go through the cluster write path (tests/topologies/test_cluster_push.py);
    # the engine's redis.asyncio client itself is single-server only.
    config = Config(raw={"REDIS_URL": redis_cluster.url(0)})

    async def main():
        return connection.async_redis(config)

    with pytest.raises(RedisClusterError) as caught:
        asyncio.run(main())
    _says_not_yet(caught.value, "pushes")


def test_a_redirection_the_probe_missed_is_still_a_clear_error(redis_cluster):
    # As if the probe could not ask (the server was down when the pool was built):
    # the first MOVED reply becomes the same error, not a raw MovedError.
    config = Config(raw={"REDIS_URL": redis_cluster.url(0)})
    cluster._known[config.redis_target.identity] = False
    refused = 0
    for n in range(40):  # queues of many slots: some hash to this node (written), most do not
        try:
            connection.send_commands(connection.get_redis(config=config), [("LPUSH", f"queue:q{n}", b"x")])
        except MovedError:
            pytest.fail("a raw MovedError reached the caller")
        except RedisClusterError as exc:
            _says_not_yet(exc, "pushes")
            refused += 1
    assert refused > 0


def test_check_server_refuses_a_cluster_node(redis_cluster):
    config = Config(raw={"REDIS_URL": redis_cluster.url(0)})
    client = redis_lib.Redis.from_url(redis_cluster.url(0))
    try:
        with pytest.raises(RedisClusterError) as caught:
            connection.check_server(client, config)
    finally:
        client.close()
    _says_not_yet(caught.value, "The worker")


def test_the_deploy_check_says_why(redis_cluster):
    with wurk_settings(REDIS_URL=redis_cluster.url(0)):
        [warning] = check_redis_server()  # the core worker runs there (issue 46 stage 3)
        assert warning.id == "wurk.W013" and "Redis Cluster node" in warning.msg
    with wurk_settings(REDIS_URL=redis_cluster.url(0), FETCH_CLASS="wurk_django.server.fetch.basic.BasicFetch"):
        [error] = check_redis_server()
        assert error.id == "wurk.E011" and "a custom fetcher" in error.msg
        with pytest.raises(SystemCheckError, match="wurk.E011"):
            call_command("check", "--deploy", stdout=io.StringIO(), stderr=io.StringIO())


def test_a_worker_with_a_custom_fetcher_refuses_to_boot_on_a_cluster(redis_cluster):
    # The one refusal left (issue 46 item 3: a swarm, capsules, queue limits run there).
    extra = json.dumps({"FETCH_CLASS": "wurk_django.server.fetch.basic.BasicFetch"})
    worker = WorkerProcess("-c", "1", "--processes", "2",
                           env={"WURK_TEST_REDIS_URL": redis_cluster.url(3), "WURK_TEST_EXTRA": extra})
    try:
        assert worker.wait(timeout=60) == 1
    finally:
        worker.stop(5)  # never left running into the next test, whatever happened
    output = worker.output()
    assert "a custom fetcher" in output and "does not run on a Redis Cluster" in output
    assert "cluster_enabled:1" in output
    assert "Traceback" not in output and "MovedError" not in output


@pytest.fixture
def cluster_user(redis_cluster):
    """An ACL user on every node (ACLs are per node on a cluster), removed afterwards."""
    for port in redis_cluster.ports:
        admin = redis_lib.Redis(port=port)
        admin.acl_setuser("app", enabled=True, passwords=["+s3cret"], keys=["*"], channels=["*"], commands=["+@all"])
        admin.close()
    yield "app", "s3cret"
    for port in redis_cluster.ports:
        admin = redis_lib.Redis(port=port)
        admin.acl_deluser("app")
        admin.close()


def test_a_password_and_options_of_the_redis_dict_reach_every_node(redis_cluster, cluster_user):
    user, password = cluster_user
    redis_setting = {"URL": redis_cluster.url(5),
                     "OPTIONS": {"username": user, "password": password, "client_name": "wurk-app"}}
    with wurk_settings(REDIS=redis_setting, REDIS_URL=None):
        client = redis_client()
        assert isinstance(client, RedisCluster)
        for n in range(30):  # keys on every primary: each node's connection authenticated
            client.set(f"auth:{n}", n)
        assert client.get("auth:29") == b"29"
        names = set()
        for port in redis_cluster.primary_ports():
            admin = redis_lib.Redis(port=port, decode_responses=True)
            names |= {(c["name"], c["user"]) for c in admin.client_list() if c["name"] == "wurk-app"}
            admin.close()
        assert names == {("wurk-app", user)}
        ClusterJob.perform_async(1)  # pushes log in on every node too
    assert redis_cluster.client().llen(CLUSTER.queue("default")) == 1


def test_the_message_never_shows_the_password(redis_cluster, cluster_user):
    user, password = cluster_user
    url = redis_cluster.url(0).replace("redis://", f"redis://{user}:{password}@")
    with wurk_settings(REDIS_URL=url), pytest.raises(RedisClusterError) as caught:
        connection.async_redis()
    _says_not_yet(caught.value, "asyncio client")
    assert password not in str(caught.value) and f"redis://{user}@127.0.0.1:" in str(caught.value)
    assert cluster.shown("redis://:pw@h:1/0") == "redis://h:1/0" and cluster.shown("redis://h:1/0") == "redis://h:1/0"


def test_a_wrong_password_decides_nothing(redis_cluster, cluster_user):
    user, _ = cluster_user
    config = Config(raw={"REDIS": {"URL": redis_cluster.url(0), "OPTIONS": {"username": user, "password": "nope"}}})
    client = redis_lib.Redis(port=redis_cluster.ports[0], username=user, password="nope")
    try:
        assert cluster.probe(client) is None  # cannot ask: neither a cluster nor a single server
    finally:
        client.close()
    connection.get_redis(config=config)  # builds the pool; the probe fails quietly
    assert cluster.known(config.redis_target) is None  # asked again by the next pool


def test_a_shard_that_is_a_cluster_takes_pushes_in_the_cluster_layout(redis_cluster):
    from wurk_django import via

    with wurk_settings(SHARDS={"big": redis_cluster.url(1)}):
        with via("big"):
            ClusterJob.perform_async(1)
    client = redis_cluster.client()
    try:
        assert client.llen(CLUSTER.queue("default")) == 1
    finally:
        client.close()


def test_a_cluster_that_could_not_be_asked_at_first_is_asked_again_before_a_push_writes(redis_cluster, monkeypatch):
    # A web process whose pool was built while the cluster did not answer: the next
    # push asks again, so nothing is written in the one-server layout on the node that
    # happens to own a key's slot.
    from tests.local_redis import free_port
    from tests.redis_servers import SwitchableProxy

    monkeypatch.setattr(cluster, "ASK_AGAIN_EVERY", 0.0)
    proxy = SwitchableProxy(free_port())  # nothing listens there yet
    try:
        with wurk_settings(REDIS_URL=proxy.url(0), RELIABLE_PUSH=False):
            config = Config(raw={"REDIS_URL": proxy.url(0)})
            connection.get_redis(config=config)  # built, not decided
            assert cluster.known(config.redis_target) is None
            proxy.point_to(redis_cluster.ports[0])
            for n in range(20):  # queues of many slots: each push asks, finds the cluster, writes its layout
                ClusterJob.set(queue=f"q{n}").perform_async(n)
    finally:
        proxy.stop()
    client = redis_cluster.client()
    try:
        assert sum(client.llen(CLUSTER.queue(f"q{n}")) for n in range(20)) == 20
        assert not any(client.exists(f"queue:q{n}") for n in range(20))
    finally:
        client.close()


@pytest.fixture(scope="module")
def tls_cluster():
    """Three TLS-only primaries (no replicas: this only checks the transport)."""
    from tests.redis_servers import RedisClusterGroup

    group = RedisClusterGroup(replicas=0, tls=True).start()
    yield group
    group.stop()


def test_a_tls_cluster_is_detected_and_redis_client_speaks_tls_to_every_node(tls_cluster):
    options = {"ssl_ca_certs": tls_cluster.certs["ca.crt"]}
    with wurk_settings(REDIS={"URL": tls_cluster.url(1), "OPTIONS": options}, REDIS_URL=None):
        client = redis_client()
        assert isinstance(client, RedisCluster)
        for n in range(30):  # keys on every primary
            client.set(f"tls:{n}", n)
        owners = {client.get_node_from_key(f"tls:{n}").port for n in range(30)}
        assert owners == set(tls_cluster.ports) and client.get("tls:7") == b"7"
        ClusterJob.perform_async(1)  # over TLS to the primary owning the queue's slot
        assert client.llen(CLUSTER.queue("default")) == 1
