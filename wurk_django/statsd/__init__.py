"""Job metrics to statsd / DogStatsD, with Sidekiq Pro's names and tags.

Turn it on with ``WURK["STATSD"] = {"HOST": "127.0.0.1", "PORT": 8125, "TAGS": ["env:prod"]}``,
or hand over a client you already have with ``{"CLIENT": "myproject.metrics.statsd_client"}``
(a callable returning an object with DogStatsD's ``increment``/``gauge``/``distribution``
methods, such as ``datadog.dogstatsd.DogStatsd``). Every name starts with ``sidekiq.``,
so Sidekiq Pro dashboards and monitors work unchanged, and the names and tags Ruby wurk
adds are sent too (``class:`` beside ``worker:``; see docs/operations.md):

========================================  =============  ==================
metric                                    type           tags
========================================  =============  ==================
``sidekiq.jobs.count``                    counter        worker, queue
``sidekiq.jobs.success`` / ``.failure``   counter        worker, queue
``sidekiq.jobs.perform``                  gauge (ms)     worker, queue
``sidekiq.jobs.perform_dist``             distribution   worker, queue
``sidekiq.jobs.enqueued``                 counter        worker, queue
``sidekiq.jobs.retried``                  counter        worker, queue
``sidekiq.jobs.expired``                  counter        worker, queue, class
``sidekiq.jobs.rate_limited``             counter        worker, queue
``sidekiq.jobs.encryption_error``         counter        worker
``sidekiq.jobs.recovered.fetch``          counter        queue, worker, class
``sidekiq.jobs.recovered.push``           counter        queue
``sidekiq.jobs.poison``                   counter        worker, queue, class
``sidekiq.busy``                          gauge          process
``sidekiq.queue.size``                    gauge          queue, process
``sidekiq.batch.created``                 counter        -
``sidekiq.batch.duration_dist``           distribution   -
========================================  =============  ==================

A job thread never waits for statsd: it queues its lines in memory and one
sender thread per process looks the host name up (once; a failure is retried
every 30 s, not per metric), packs the lines into datagrams and sends them on
a non-blocking socket. When statsd is down, slow or unresolvable, metrics are
dropped and counted (``client().dropped``), never waited for, and a failing
client never changes a job's outcome (see :mod:`.client`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from .. import context
from .client import UDPClient, format_metric
from .settings import StatsdSettings

__all__ = ["UDPClient", "client", "emit", "format_metric", "job_tags", "set_client", "set_options"]

logger = logging.getLogger("wurk_django.statsd")

PREFIX = "sidekiq."
SETTING_KEYS = ("HOST", "PORT", "TAGS", "NAMESPACE", "CLIENT", "OPTIONS")

_lock = threading.Lock()
# (fork count, the setting object it was built from, client or None, settings generation)
_memo: tuple[int, Any, Any, int] | None = None
# Bumped in a forked child, so every job can tell "same process" without a getpid() call.
_forks = 0
# Bumped when Django says a setting changed (override_settings, pytest's ``settings``):
# until then a job reads the client without going through the settings object.
_generation = 0
_options_memo: tuple[int, Any] | None = None  # (generation, the OPTIONS function or None)
_override: Any = None  # set_client(): a client or a factory, wins over the setting
_options: Callable[[str, dict, str], dict] | None = None


def set_client(client_or_factory: Any) -> None:
    """Use this client (or ``factory() -> client``) instead of ``WURK["STATSD"]``; ``None`` goes
    back to the setting. Resolved lazily, again after a fork (Pro's ``config.dogstatsd = ...``)."""
    global _override, _memo
    with _lock:
        _override = client_or_factory
        _memo = None


def set_options(fn: Callable[[str, dict, str], dict] | None) -> None:
    """``fn(class_name, job, queue) -> {"tags": [...], "sample_rate": r}`` replaces the default
    tags (``worker:<class>``, ``queue:<q>``) of the per-job metrics (Pro's ``Statsd.options``)."""
    global _options
    _options = fn


def _setting() -> StatsdSettings | None:
    # The cached config's typed value: one object per settings dict, so the memo below
    # rebuilds the client only when the setting changes.
    if not django_settings.configured:
        return None  # a bare script: no metrics
    try:
        return context.config().statsd
    except Exception:  # bad settings: ``manage.py check`` and the worker's boot report them
        return None


def client() -> Any:
    """The statsd client of this process, or ``None`` when statsd is off.

    Built once per process from ``set_client()`` or ``WURK["STATSD"]``, again
    after a fork (a child must not share its parent's socket) or when the
    setting changes: Django's ``setting_changed`` signal (sent by
    ``override_settings``) has the next call read the setting again.
    """
    global _memo
    memo = _memo
    forks = _forks
    if memo is not None and memo[0] == forks and memo[3] == _generation:
        return memo[2]  # every job comes here: no settings lookup
    source = _override if _override is not None else _setting()
    generation = _generation
    if memo is not None and memo[0] == forks and memo[1] is source:
        _memo = (forks, source, memo[2], generation)
        return memo[2]
    with _lock:
        memo = _memo
        if memo is not None and memo[0] == forks and memo[1] is source:
            return memo[2]
        built = None
        try:
            built = _build(source)
        except Exception:
            logger.exception("statsd client could not be built; metrics are off in this process")
        _memo = (forks, source, built, generation)
    if built is not None:
        from .install import connect_enqueued  # the receiver lives with the other receivers

        connect_enqueued()
    return built


def _forked() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_forked)


def _settings_changed(setting: str = "", **_kw: Any) -> None:
    global _generation
    if setting == "WURK":
        _generation += 1


setting_changed.connect(_settings_changed, weak=False, dispatch_uid="wurk_statsd_setting_changed")


def _build(source: Any) -> Any:
    if source is None or source is False:
        return None
    if isinstance(source, StatsdSettings):
        if source.client is None:
            return UDPClient(source.host, source.port, tags=source.tags, namespace=source.namespace)
        factory = import_string(source.client) if isinstance(source.client, str) else source.client
        return factory()
    if isinstance(source, str):
        source = import_string(source)
    if callable(source) and not hasattr(source, "increment"):
        return source()
    return source  # already a client


def setting_options() -> Callable[[str, dict, str], dict] | None:
    global _options_memo
    if _options is not None:
        return _options
    memo = _options_memo
    if memo is not None and memo[0] == _generation:
        return memo[1]
    generation = _generation
    source = _setting()
    fn = source.options if source is not None else None
    fn = import_string(fn) if isinstance(fn, str) else fn
    _options_memo = (generation, fn)
    return fn


def job_tags(klass: str, job: dict, queue: str) -> tuple[list[str], float | None]:
    """Tags and sample rate for one job's metrics: ``worker:<class>``, ``queue:<q>`` unless an
    options function says otherwise; the job's ``dd_rate`` key overrides the sample rate."""
    tags: list[str] = [f"worker:{klass}", f"queue:{queue}"]
    rate: float | None = None
    fn = setting_options()
    if fn is not None:
        try:
            custom = fn(klass, job, queue) or {}
            tags = list(custom.get("tags", tags))
            rate = custom.get("sample_rate", rate)
        except Exception:
            logger.exception("statsd options function failed; using the default tags")
    dd_rate = job.get("dd_rate")
    if isinstance(dd_rate, (int, float)) and not isinstance(dd_rate, bool) and 0 < dd_rate <= 1:
        rate = float(dd_rate)
    return tags, rate


def emit(kind: str, name: str, value: float = 1, tags: Iterable[str] | None = None,
         sample_rate: float | None = None, *, to: Any = None) -> None:
    """Send ``sidekiq.<name>`` with ``kind`` = ``increment``, ``gauge``, ``distribution``...

    A no-op when statsd is off; a client error is logged, never raised.
    """
    target = to if to is not None else client()
    if target is None:
        return
    method = getattr(target, kind, None)
    if method is None and kind == "distribution":
        method = getattr(target, "histogram", None)  # older clients lack distributions
    if method is None:
        return
    try:
        kwargs: dict[str, Any] = {"tags": list(tags) if tags else None}
        if sample_rate is not None:
            kwargs["sample_rate"] = sample_rate
        method(PREFIX + name, value, **kwargs)
    except Exception:
        logger.warning("statsd %s %s failed", kind, name, exc_info=True)
