"""A swarm co-hosted in a web process, supervised on a daemon thread (ENT-711, RUN-411)."""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading

from ...conf import Config
from ...errors import ConfigurationError
from ...redis import connection
from ..threads import spawn
from .slots import SHUTDOWN_GRACE, SwarmError
from .supervisor import Swarm
from .topology import assignments

logger = logging.getLogger("wurk_django.swarm")

COHOSTED_JOIN_SLACK = 1.0

_cohosted: Swarm | None = None


def start_cohosted(config: Config | None = None) -> Swarm | None:
    """Start a swarm inside this (web) process, supervised on a daemon thread (ENT-711, RUN-411).

    Allowed only where forking is safe: on the main thread, before any other
    thread exists, in a process that is not a preforking server's worker.
    Otherwise it logs why and returns None; run ``manage.py wurk --processes N``
    instead. Installs no signal handlers (the host owns them); an ``atexit``
    hook, registered before the first fork, drains the children when the host
    exits. Returns the running :class:`Swarm`; a second call returns the same one.
    """
    global _cohosted
    if _cohosted is not None and _cohosted.owner():
        return _cohosted
    reason = cohosted_refusal()
    if reason:
        logger.error("wurk: not starting a co-hosted swarm: %s. Run `python manage.py wurk --processes N` "
                     "as its own process instead.", reason)
        return None
    if config is None:
        config = Config()
    try:
        swarm = Swarm(config, assignments(config), cohosted=True, cluster=_on_cluster(config))
    except (SwarmError, ConfigurationError) as exc:
        logger.error("wurk: not starting a co-hosted swarm: %s", exc)
        return None
    holder: dict[str, threading.Thread] = {}
    # Registered before the first fork, so children forked by a boot that fails
    # halfway still get drained; children inherit it but are not the owner.
    atexit.register(_stop_cohosted, swarm, holder, swarm.timeout + SHUTDOWN_GRACE + COHOSTED_JOIN_SLACK)
    try:
        swarm.boot()
    except Exception:
        logger.exception("wurk: co-hosted swarm boot failed")
        swarm.shutdown()
        return None

    holder["thread"] = spawn("wurk-swarm-supervisor", swarm.supervise)
    _cohosted = swarm
    return swarm


def _on_cluster(config: Config) -> bool:
    """Whether ``config``'s Redis is a Redis Cluster node (its children then run the cluster
    worker, issue 46 item 3): asked on a one-connection client closed at once, so nothing
    is left open across the forks. A server that cannot be asked now counts as one server,
    as ``manage.py wurk`` would wait for it; its children fail their boot check and are
    respawned with the back-off."""
    from ...redis import cluster

    known = cluster.known(config.redis_target)
    if known is not None:
        return known
    probe = connection.probe_redis(config)
    try:
        return cluster.is_cluster(config.redis_target, probe)
    finally:
        probe.connection_pool.disconnect()


def cohosted_refusal() -> str | None:
    """Why a co-hosted swarm may not start in this process, or None (RUN-820, RUN-841)."""
    if not hasattr(os, "fork"):
        return "this platform cannot fork"
    if threading.current_thread() is not threading.main_thread():
        return "it must be started from the main thread"
    if threading.active_count() > 1:
        names = ", ".join(t.name for t in threading.enumerate() if t is not threading.current_thread())
        return f"other threads are already running ({names}), and forking next to them is unsafe"
    argv0 = os.path.basename(sys.argv[0]) if sys.argv else ""
    if argv0 in ("gunicorn", "uwsgi") or "gunicorn" in sys.modules or "uwsgi" in sys.modules:
        return "this is a preforking server's process; use embedded mode there"
    return None


def _stop_cohosted(swarm: Swarm, holder: dict[str, threading.Thread], join: float) -> None:
    """``atexit``: ask the supervisor to drain, wait for it, drain here only if it is dead (ENT-711)."""
    if not swarm.owner():
        return
    swarm.request_shutdown()
    thread = holder.get("thread")
    if thread is not None:
        thread.join(join)
        if thread.is_alive():
            return  # wedged mid-drain: leave it; the children's orphan guards finish the job
    if swarm.children:
        swarm.shutdown()
