"""Private Redis topologies for tests: a TLS server with certificates made here, a
Unix-socket server, a primary with a replica and three sentinels, a Redis
Cluster of three primaries and three replicas (:class:`RedisClusterGroup`). Built on :class:`tests.local_redis.LocalRedis`; every process is stopped
by its pid. Ports come from ``WURK_TEST_PORTS``.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as redis_lib

from tests.local_redis import LocalRedis
from tests.local_redis import free_port as _any_free_port
from tests.support import stop_process

_handed_out: set[int] = set()


def free_port() -> int:
    """A free port of ``WURK_TEST_PORTS`` not handed out before in this process (a
    server told its port may not have bound it yet)."""
    for _ in range(200):
        port = _any_free_port()
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    _handed_out.clear()
    return _any_free_port()


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def certificates(where: Path, *, name: str = "wurk test CA") -> dict[str, str]:
    """A CA and a server certificate for 127.0.0.1 / localhost signed by it; paths by
    file name (``ca.crt``, ``server.crt``, ``server.key``)."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is not installed")
    where.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", f"/CN={name}",
             cwd=where)
    _openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost", cwd=where)
    (where / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.crt", "-days", "1", "-extfile", "san.ext", cwd=where)
    return {name: str(where / name) for name in ("ca.crt", "server.crt", "server.key")}


class _PrivateRedis:
    """What the three transports share: ``start`` pings through ``client()``,
    ``stop`` stops the server and removes its temporary folder, if any."""

    server: LocalRedis
    tmp: Path | None = None

    def client(self, db: int = 0) -> redis_lib.Redis:
        raise NotImplementedError

    def start(self):
        probe = self.client()
        try:
            self.server.start(probe.ping)
        finally:
            probe.close()
        return self

    def stop(self) -> None:
        self.server.stop()
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)


class TLSRedis(_PrivateRedis):
    """redis-server on a TLS port only, with a CA and certificate made for it."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="wurk-tls-"))
        self.certs = certificates(self.tmp / "certs")
        self.port = free_port()
        self.server = LocalRedis("--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
                                 "--tls-cert-file", self.certs["server.crt"],
                                 "--tls-key-file", self.certs["server.key"],
                                 "--tls-ca-cert-file", self.certs["ca.crt"], "--tls-auth-clients", "no")

    def url(self, db: int = 0) -> str:
        return f"rediss://127.0.0.1:{self.port}/{db}"

    def client(self, db: int = 0) -> redis_lib.Redis:
        return redis_lib.Redis.from_url(self.url(db), ssl_ca_certs=self.certs["ca.crt"])

    def start(self) -> TLSRedis:
        try:
            return super().start()
        except RuntimeError as exc:
            if "TLS" in str(exc):
                pytest.skip(f"this redis-server has no TLS support: {exc}")
            raise


class UnixRedis(_PrivateRedis):
    """redis-server listening on a Unix socket only."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="wurk-unix-"))
        self.path = self.tmp / "redis.sock"
        self.server = LocalRedis("--port", "0", "--unixsocket", str(self.path), "--unixsocketperm", "700")

    def url(self, db: int = 0) -> str:
        return f"unix://{self.path}?db={db}"

    def client(self, db: int = 0) -> redis_lib.Redis:
        return redis_lib.Redis.from_url(self.url(db))


class TCPRedis(_PrivateRedis):
    """A plain redis-server on a port of ``WURK_TEST_PORTS`` (``*args`` added)."""

    def __init__(self, *args: str) -> None:
        self.port = free_port()
        self.server = LocalRedis("--port", str(self.port), "--bind", "127.0.0.1", *args)

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def client(self, db: int = 0) -> redis_lib.Redis:
        return redis_lib.Redis(port=self.port, db=db)


def _sentinel_process(port: int, primary_port: int, service: str) -> LocalRedis:
    """A sentinel watching ``primary_port`` with short timeouts (quorum 2 of 3)."""
    sentinel = LocalRedis("--sentinel")
    conf = sentinel.dir / "sentinel.conf"
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {sentinel.dir}\n"
        f"sentinel monitor {service} 127.0.0.1 {primary_port} 2\n"
        f"sentinel down-after-milliseconds {service} 1000\n"
        f"sentinel failover-timeout {service} 5000\n"
        f"sentinel parallel-syncs {service} 1\n"
    )
    # LocalRedis puts its own arguments first; a sentinel needs its file first.
    sentinel.args = ()
    sentinel.conf = conf
    return sentinel


class SentinelGroup:
    """A primary, ``replicas`` replicas and three sentinels watching them, all on private
    ports; ``server_args`` go to every data server (e.g. ``min-replicas-to-write``,
    which a replica needs too: it may become the primary)."""

    service = "mymaster"

    def __init__(self, replicas: int = 1, server_args: tuple[str, ...] = ()) -> None:
        self.server_args = server_args
        self.primary = TCPRedis(*server_args)
        self.replicas = [TCPRedis("--replicaof", "127.0.0.1", str(self.primary.port), *server_args)
                         for _ in range(replicas)]
        self.replica = self.replicas[0]
        self.sentinel_ports: list[int] = []
        self.sentinels: list[LocalRedis] = []

    @property
    def servers(self) -> list[TCPRedis]:
        return [self.primary, *self.replicas]

    def start(self) -> SentinelGroup:
        try:
            self.primary.start()
            for each in self.replicas:
                each.start()
                replica = each.client()
                _wait(lambda r=replica: r.info("replication").get("master_link_status") == "up", "the replica to sync")
                replica.close()
            for _ in range(3):
                port = free_port()
                sentinel = _sentinel_process(port, self.primary.port, self.service)
                self.sentinels.append(sentinel)
                self.sentinel_ports.append(port)
                _start_sentinel(sentinel, port)
            # Every sentinel has found the replica and the other two sentinels.
            for port in self.sentinel_ports:
                client = redis_lib.Redis(port=port, decode_responses=True)
                _wait(lambda c=client: int(c.sentinel_master(self.service)["num-slaves"]) >= len(self.replicas)
                      and int(c.sentinel_master(self.service)["num-other-sentinels"]) >= 2, "the sentinels to agree")
                client.close()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", port) for port in self.sentinel_ports]

    def master_port(self) -> int:
        client = redis_lib.Redis(port=self.sentinel_ports[0], decode_responses=True)
        try:
            return int(client.sentinel_get_master_addr_by_name(self.service)[1])
        finally:
            client.close()

    def failover(self, timeout: float = 30.0) -> None:
        """``SENTINEL FAILOVER``: a replica becomes the primary (returns at once). Sent
        again while the sentinel still finishes the previous one (``INPROG``) or has
        not yet checked the replicas since (``NOGOODSLAVE``)."""
        client = redis_lib.Redis(port=self.sentinel_ports[0])
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    client.execute_command("SENTINEL", "FAILOVER", self.service)
                    return
                except redis_lib.ResponseError as exc:
                    if not str(exc).startswith(("INPROG", "NOGOODSLAVE")) or time.monotonic() > deadline:
                        raise
                time.sleep(0.1)
        finally:
            client.close()

    def crash(self, port: int) -> None:
        """SIGKILL the data server on ``port``: a primary that dies without a word."""
        import signal

        server = next(s for s in self.servers if s.port == port)
        server.server.proc.send_signal(signal.SIGKILL)
        server.server.proc.wait(timeout=10)

    def restart_as_replica(self, port: int, primary_port: int) -> None:
        """Start a crashed server again on ``port``, as a replica of ``primary_port`` (as
        an operator or a supervisor would; the sentinels would convert it anyway)."""
        index = next(i for i, s in enumerate(self.servers) if s.port == port)
        server = self.servers[index]
        server.server.stop()  # reaped already; removes its folder
        server.server = LocalRedis("--port", str(port), "--bind", "127.0.0.1", "--replicaof", "127.0.0.1",
                                   str(primary_port), *self.server_args)
        server.start()

    def settled(self) -> bool:
        """True when the first sentinel (the one :meth:`failover` asks, so the leader of
        the next failover) sees every replica answer as a replica of the primary it
        names, with its link up: the next failover then promotes a real copy of it."""
        client = redis_lib.Redis(port=self.sentinel_ports[0], decode_responses=True)
        try:
            primary = int(client.sentinel_get_master_addr_by_name(self.service)[1])
            replicas = client.execute_command("SENTINEL", "REPLICAS", self.service)
        finally:
            client.close()
        seen = [dict(zip(r[::2], r[1::2], strict=True)) if isinstance(r, list) else r for r in replicas]
        good = [r for r in seen if r.get("role-reported") == "slave" and r.get("master-link-status") == "ok"
                and int(r.get("master-port", 0)) == primary and "s_down" not in r.get("flags", "")
                and "disconnected" not in r.get("flags", "")]
        return len(good) >= len(self.replicas)

    def stop(self) -> None:
        # This process's sentinel watchers would keep dialling these ports for the rest of
        # the session, and a later test's plain redis-server may get one of them: every
        # "no primary" warning then lands in whatever test runs, and its log checks fail.
        # They are stopped for every group (the next pool this process builds starts its own).
        from wurk_django.redis import sentinel as sentinel_module

        sentinel_module.stop_watchers()
        for sentinel in self.sentinels:
            sentinel.stop()
        for each in self.replicas:
            each.stop()
        self.primary.stop()


def _bus_port_free(port: int) -> bool:
    """Whether a cluster node's bus port (``port + 10000``) can be bound now."""
    import socket

    if port + 10000 > 65535:
        return False
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port + 10000))
        except OSError:
            return False
    return True


def cluster_port() -> int:
    """A port of ``WURK_TEST_PORTS`` whose cluster bus port (+10000) is free too."""
    for _ in range(50):
        port = free_port()
        if _bus_port_free(port):
            return port
    raise RuntimeError("no port of WURK_TEST_PORTS has a free cluster bus port (+10000)")


class _ClusterNode(_PrivateRedis):
    """One cluster-enabled redis-server; over TLS only (cluster bus and replication
    too) when given ``certs``."""

    def __init__(self, port: int, certs: dict[str, str] | None, node_timeout: int = 2000,
                 extra: tuple[str, ...] = ()) -> None:
        self.port = port
        self.certs = certs
        cluster = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                   "--cluster-node-timeout", str(node_timeout), *extra)
        if certs is None:
            transport: tuple[str, ...] = ("--port", str(port))
        else:
            transport = ("--port", "0", "--tls-port", str(port), "--tls-cluster", "yes", "--tls-replication", "yes",
                         "--tls-cert-file", certs["server.crt"], "--tls-key-file", certs["server.key"],
                         "--tls-ca-cert-file", certs["ca.crt"], "--tls-auth-clients", "no")
        self.server = LocalRedis(*transport, "--bind", "127.0.0.1", *cluster)

    def client(self, db: int = 0, **options) -> redis_lib.Redis:
        if self.certs is not None:
            options.update(ssl=True, ssl_ca_certs=self.certs["ca.crt"])
        return redis_lib.Redis(port=self.port, **options)

    def halt(self, sig: int) -> None:
        """End the server with ``sig`` (by its pid) and reap it, keeping its folder
        (``nodes.conf``, an append-only file): :meth:`start` brings the same node back."""
        if self.server.proc is not None:
            stop_process(self.server.proc, sig, 10)


class RedisClusterGroup:
    """A real Redis Cluster on private ports: ``primaries`` primaries with ``replicas``
    replicas each, made by ``redis-cli --cluster create``; every node has its own folder
    (its ``nodes.conf`` there) and is stopped by its pid. ``tls=True``: every node speaks
    TLS only, with a CA made here (:attr:`certs`)."""

    def __init__(self, primaries: int = 3, replicas: int = 1, *, tls: bool = False, node_timeout: int = 2000,
                 server_args: tuple[str, ...] = ()) -> None:
        if shutil.which("redis-cli") is None:
            pytest.skip("redis-cli is not installed")
        self.primaries = primaries
        self.replicas = replicas
        # The fault tests (issue 46 item 4) want a shorter cluster-node-timeout (a killed
        # primary's failover starts sooner) and an append-only file (a restarted node keeps its data).
        self.node_timeout = node_timeout
        self.server_args = server_args
        self.tmp = Path(tempfile.mkdtemp(prefix="wurk-cluster-"))
        self.certs = certificates(self.tmp / "certs") if tls else None
        self.nodes: list[_ClusterNode] = []

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    def url(self, index: int = 0) -> str:
        """The URL of node ``index`` (database 0: a cluster has no other)."""
        scheme = "redis" if self.certs is None else "rediss"
        return f"{scheme}://127.0.0.1:{self.nodes[index].port}/0"

    def start(self, timeout: float = 60.0) -> RedisClusterGroup:
        try:
            for _ in range(self.primaries * (1 + self.replicas)):
                node = _ClusterNode(cluster_port(), self.certs, self.node_timeout, self.server_args)
                self.nodes.append(node)
                node.start()
            addresses = [f"127.0.0.1:{port}" for port in self.ports]
            tls = [] if self.certs is None else ["--tls", "--cacert", self.certs["ca.crt"]]
            created = subprocess.run(
                ["redis-cli", *tls, "--cluster", "create", *addresses, "--cluster-replicas", str(self.replicas),
                 "--cluster-yes"], capture_output=True, text=True, timeout=timeout)
            if created.returncode != 0:
                raise RuntimeError(f"redis-cli --cluster create failed: {created.stdout[-1500:]} {created.stderr}")
            _wait(self.ready, "the cluster to report cluster_state:ok on every node, replicas in sync", timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def node_client(self, port: int, **options) -> redis_lib.Redis:
        """A plain client of the node on ``port`` (over TLS for a TLS cluster)."""
        return next(node for node in self.nodes if node.port == port).client(**options)

    def ready(self) -> bool:
        """Every node says ``cluster_state:ok`` and knows every other; every replica's link is up."""
        roles = []
        for port in self.ports:
            client = self.node_client(port, decode_responses=True)
            try:
                info = client.cluster("info")
                if info.get("cluster_state") != "ok" or int(info.get("cluster_known_nodes", 0)) < len(self.nodes):
                    return False
                replication = client.info("replication")
                roles.append(replication.get("role"))
                if replication.get("role") == "slave" and replication.get("master_link_status") != "up":
                    return False
            finally:
                client.close()
        return roles.count("master") == self.primaries

    def client(self) -> redis_lib.RedisCluster:
        """A plain redis-py ``RedisCluster`` (bytes replies) for a test's own reads and writes."""
        from redis.cluster import RedisCluster

        if self.certs is None:
            return RedisCluster(host="127.0.0.1", port=self.ports[0])
        return RedisCluster(host="127.0.0.1", port=self.ports[0], ssl=True, ssl_ca_certs=self.certs["ca.crt"])

    def node(self, port: int) -> _ClusterNode:
        return next(node for node in self.nodes if node.port == port)

    def replica_of(self, primary_port: int) -> int:
        """The port of a replica of the primary on ``primary_port``, its link up."""
        for port in self.ports:
            if port != primary_port and replicating(port, primary_port):
                return port
        raise AssertionError(f"no replica of the primary on port {primary_port} has its link up")

    def primary_ports(self) -> list[int]:
        found = []
        for port in self.ports:
            client = self.node_client(port, decode_responses=True)
            try:
                if client.info("replication").get("role") == "master":
                    found.append(port)
            finally:
                client.close()
        return found

    def flush(self) -> None:
        """Empty every primary (the replicas follow): between tests of one session's cluster."""
        for port in self.primary_ports():
            client = self.node_client(port)
            try:
                client.flushall()
            finally:
                client.close()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        self.nodes = []
        shutil.rmtree(self.tmp, ignore_errors=True)


def _start_sentinel(sentinel: LocalRedis, port: int) -> None:
    import signal

    sentinel.proc = subprocess.Popen(
        ["redis-server", str(sentinel.conf), "--sentinel", "--logfile", str(sentinel.dir / "redis.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    client = redis_lib.Redis(port=port)
    try:
        deadline = time.monotonic() + 10
        while True:
            if sentinel.proc.poll() is not None:
                raise RuntimeError(f"sentinel exited at start: {sentinel.log()}")
            try:
                if client.ping():
                    return
            except redis_lib.RedisError:
                pass
            if time.monotonic() > deadline:
                sentinel.proc.send_signal(signal.SIGTERM)
                raise RuntimeError(f"sentinel did not answer in 10 s: {sentinel.log()}")
            time.sleep(0.05)
    finally:
        client.close()


def replicating(port: int, primary_port: int) -> bool:
    """True once the server on ``port`` replicates the primary on ``primary_port``, its link up."""
    client = redis_lib.Redis(port=port, decode_responses=True)
    try:
        info = client.info("replication")
        return info.get("role") == "slave" and int(info.get("master_port", 0)) == primary_port \
            and info.get("master_link_status") == "up"
    except redis_lib.ConnectionError:
        return False  # a server changing its role may close a new connection: not following yet
    finally:
        client.close()


def _wait(condition, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except redis_lib.RedisError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


class SwitchableProxy:
    """A TCP forwarder standing in for a DNS name: new connections go to the port it
    points at now; open ones stay with the server they reached (as after a DNS
    change). Threads only; :meth:`stop` closes everything."""

    def __init__(self, target_port: int) -> None:
        import socket
        import threading

        self.target_port = target_port
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._sockets: list = []
        self._stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def point_to(self, port: int) -> None:
        self.target_port = port

    def _accept(self) -> None:
        import socket
        import threading

        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            self._sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source, sink) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.close()
                except OSError:
                    pass

    def stop(self) -> None:
        self._stopped.set()
        self._listener.close()
        for sock in self._sockets:
            try:
                sock.close()
            except OSError:
                pass


@contextlib.contextmanager
def every_topology(**sentinel_options) -> Iterator[dict]:
    """The servers of the topology tests, each stopped on the way out: ``tcp_a`` and ``tcp_b``
    (one Redis, or two shards), ``tls``, ``unix`` and ``sentinel`` (a :class:`SentinelGroup`
    made with ``sentinel_options``)."""
    started: dict = {}
    try:
        started["tcp_a"] = TCPRedis().start()
        started["tcp_b"] = TCPRedis().start()
        started["tls"] = TLSRedis().start()
        started["unix"] = UnixRedis().start()
        started["sentinel"] = SentinelGroup(**sentinel_options).start()
        yield started
    finally:
        for server in started.values():
            server.stop()
