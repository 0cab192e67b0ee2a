"""Redis Cluster: finding out that a config's Redis is one, and what wurk does then.

A ``REDIS_URL`` (or ``REDIS`` dict) naming any node of a cluster is detected the
first time a process builds a pool for it (:func:`is_cluster`, one ``INFO
cluster`` per target and process, remembered): before anything is written, since
a cluster node accepts a write whose key hashes to one of its own slots and
refuses the others with ``MOVED``, so without the probe some pushes would land in
the single-server layout and the rest fail.

Issue 46, stage 1: on a cluster,

* application code's client (:func:`wurk_django.redis_client`) is redis-py's
  ``RedisCluster`` (:func:`cluster_client`), TLS, passwords and the other
  ``OPTIONS`` as for one server;
* everything of the engine (pushes, the worker, the data API, the admin) raises
  :class:`~wurk_django.errors.RedisClusterError` at the call or at boot, naming
  what is not supported on a cluster yet (:func:`not_yet`), never a raw
  ``MovedError`` halfway through a run;
* where keys go on a cluster is decided in :mod:`wurk_django.redis.cluster_layout`.

Outside a cluster nothing changes except that one probe per target and process.
"""

from __future__ import annotations

from time import monotonic
from typing import Any

import redis

from ..errors import ConfigurationError, RedisClusterError

#: Whether each target (by :attr:`RedisTarget.identity`) is a cluster, as probed by this
#: process. A node stays a cluster node (or not) for its life: kept across a fork, forgotten
#: only by :func:`forget` (``connection.reset()``). No lock: single dict operations, and a
#: forked child could inherit one held.
_known: dict[str, bool] = {}

#: Where the docs say what a cluster supports today.
DOCS = "docs/redis.md#redis-cluster"


def probe(client: redis.Redis) -> bool | None:
    """Whether ``client``'s server is a Redis Cluster node: ``True``, ``False``, or
    ``None`` when it cannot be asked (unreachable, or the login refused).

    ``INFO cluster`` first (``cluster_enabled:1``); a server that refuses it (some
    managed services restrict ``INFO`` sections, an ACL may deny it) is asked
    ``CLUSTER INFO``, which a server without cluster support answers with an error
    that says so. Connecting itself fails on a cluster node when the URL names a
    database other than 0 (``SELECT`` is not allowed in cluster mode): that is a yes.
    """
    try:
        info = client.info("cluster")
    except redis.ResponseError as exc:
        if _says_cluster_mode(exc):
            return True
    except (redis.ConnectionError, redis.TimeoutError):
        return None
    else:
        if "cluster_enabled" in info:
            return str(info["cluster_enabled"]) == "1"
        # An empty reply: a server or proxy that hides the section. Ask the other way.
    try:
        reply = client.execute_command("CLUSTER", "INFO")
    except redis.ResponseError as exc:
        # "cluster support disabled" on a server without it; a server (or proxy) that
        # refuses both questions is taken at its word as one server too: a cluster
        # behind it would answer MOVED, which moved_refusal turns into the clear error.
        return _says_cluster_mode(exc)
    except (redis.ConnectionError, redis.TimeoutError):
        return None
    # Text or, parsed by redis-py, a dict: a cluster node's answer starts with cluster_state.
    text = reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)
    return "cluster_state" in text


def _says_cluster_mode(exc: BaseException) -> bool:
    # "SELECT is not allowed in cluster mode" (a database number in the URL), "MOVED ...".
    text = str(exc)
    return "cluster mode" in text or text.startswith(("MOVED ", "ASK ", "CLUSTERDOWN"))


def is_cluster(target: Any, client: redis.Redis | None = None) -> bool:
    """Whether the :class:`~wurk_django.redis.targets.RedisTarget` ``target`` is a Redis
    Cluster, probed once per process through ``client`` (a client of that target). A
    Sentinel target never is; a server that cannot be asked counts as not one for
    now, and is asked again by the next call (the connection layer does so at most
    once a second); a push that meets ``MOVED`` meanwhile gets the same clear error
    from :func:`moved_refusal`."""
    if target.is_sentinel:
        _known[target.identity] = False
        return False
    known = _known.get(target.identity)
    if known is not None:
        return known
    if client is None or not due(target):
        return False
    answer = probe(client)
    if answer is None:
        # Unreachable: not asked again for a second, so a caller asking per command
        # does not add a connect attempt (a timeout, on a silent host) to each.
        _ask_again_at[target.identity] = monotonic() + ASK_AGAIN_EVERY
        return False
    _known[target.identity] = answer
    _ask_again_at.pop(target.identity, None)
    return answer


def settled(target: Any) -> bool:
    """Whether :func:`is_cluster` has its final answer for ``target`` in this process
    (False while the server could not be asked yet)."""
    return target.is_sentinel or target.identity in _known


#: Seconds before a server that could not be asked is asked again.
ASK_AGAIN_EVERY = 1.0
_ask_again_at: dict[str, float] = {}


def due(target: Any) -> bool:
    """Whether :func:`is_cluster` would ask ``target``'s server now (not answered yet,
    and not asked in vain less than ``ASK_AGAIN_EVERY`` seconds ago)."""
    return target.identity not in _known and _ask_again_at.get(target.identity, 0.0) <= monotonic()


def known(target: Any) -> bool | None:
    """What :func:`is_cluster` found for ``target`` in this process (``None``: not asked)."""
    return _known.get(target.identity)


#: Called by :func:`forget`: whoever keeps a client chosen by an answer (the connection
#: layer's remembered clients) forgets it too.
forgetters: list[Any] = []


def forget() -> None:
    """Forget every answer (tests that reuse one URL for different servers)."""
    _known.clear()
    _ask_again_at.clear()
    for forgetter in forgetters:
        forgetter()


def not_yet(feature: str, url: str) -> RedisClusterError:
    """The error for ``feature`` used against the Redis Cluster at ``url``: says it is a
    cluster, that wurk does not support that feature on one yet, and where to look."""
    return RedisClusterError(
        f"{feature} is not supported on a Redis Cluster yet: Redis at {shown(url)} is a cluster node "
        f"(cluster_enabled:1). On a cluster wurk_django runs today pushes, the core worker and the "
        f"features the docs list (unique jobs, batches, push policies, limiters, periodic jobs, results, the data API, "
        f"the admin's core pages); for the rest use one Redis primary (Sentinel for failover) "
        f"or a one-server shard in WURK['SHARDS'], see {DOCS}.")


def shown(url: str) -> str:
    """``url`` without its password: the message reaches logs and admin pages."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.netloc.rpartition("@")[2]
        netloc = f"{parts.username}@{host}" if parts.username else host
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    except ValueError:
        return "(unparsable Redis URL)"


def moved_refusal(exc: BaseException, url: str, feature: str = "this command") -> RedisClusterError | None:
    """A :func:`not_yet` error when ``exc`` is a cluster's redirection or slot error
    (``MOVED``, ``ASK``, ``CROSSSLOT``, ``CLUSTERDOWN``) met by a single-server client,
    else ``None``: so a cluster the probe could not see still fails with a clear line."""
    from redis.exceptions import AskError, ClusterCrossSlotError, ClusterDownError, MovedError

    if isinstance(exc, (MovedError, AskError, ClusterCrossSlotError, ClusterDownError)):
        return not_yet(feature, url)
    # The socket fast path (wire.py) may hand a plain ResponseError: its first word says.
    if isinstance(exc, redis.ResponseError) and str(exc).startswith(_REDIRECTIONS):
        return not_yet(feature, url)
    return None


_REDIRECTIONS = ("MOVED ", "ASK ", "CROSSSLOT ", "CLUSTERDOWN ")


def cluster_client(config: Any, *, decode_responses: bool = False, **overrides: Any) -> Any:
    """redis-py's ``RedisCluster`` for ``config``'s Redis (a node of the cluster: the
    client discovers the others), with the config's ``OPTIONS`` (TLS, password,
    timeouts...) applied to every node's connections. Commands are not replayed on a
    connection error (as for every wurk client); redirections (``MOVED``/``ASK``)
    are followed, as redis-py does."""
    from redis.cluster import RedisCluster

    from .connection import CONNECT_TIMEOUT, READ_TIMEOUT

    target = config.redis_target
    if target.is_sentinel:
        raise ConfigurationError("a Sentinel target cannot be a Redis Cluster: give the URL of a cluster node")
    options: dict[str, Any] = {
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": READ_TIMEOUT,
        "protocol": 2,
    }
    options.update(config.redis_options)
    options.update(overrides)
    options["decode_responses"] = decode_responses
    db = options.pop("db", 0)
    if db not in (0, "0", None):
        raise ConfigurationError(f"a Redis Cluster has only database 0; OPTIONS names db {db!r}")
    # A pool size is per node on a cluster; redis-py's per-node pools grow as needed.
    options.pop("max_connections", None)
    url = _without_database(target.url)
    return RedisCluster.from_url(url, **options)


def _without_database(url: str) -> str:
    """``url`` without its database path (``/0`` or none: a cluster has no other).
    Any other number raises :class:`ConfigurationError` here, a clear line instead of
    a ``SELECT`` refused at the first connection."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    path = parts.path.strip("/")
    if path and path != "0":
        raise ConfigurationError(f"a Redis Cluster has only database 0; the URL {url!r} names database {path}")
    return urlunsplit((parts.scheme, parts.netloc, "", parts.query, parts.fragment))
