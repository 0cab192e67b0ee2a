"""OpenTelemetry spans around pushing and running jobs (optional).

When the ``opentelemetry-api`` package is installed, every push makes a
``PRODUCER`` span named ``<queue> publish`` and writes the W3C trace context
into the job's payload (top-level ``traceparent``/``tracestate`` keys, where
Ruby's ``opentelemetry-instrumentation-sidekiq`` puts and reads them); every
run makes a ``CONSUMER`` span named ``<queue> process`` whose parent is that
context. A web request that pushes a job and the job itself therefore share
one trace, across Python and Ruby processes.

Without the package nothing happens. Without a configured SDK the API's
no-op tracer is used: no spans, no context written, next to no cost.
"""

from __future__ import annotations

from typing import Any

try:
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:  # optional dependency
    trace = None  # type: ignore[assignment]

__all__ = ["SpanKind", "Status", "StatusCode", "attributes", "available", "propagate", "tracer"]


def __getattr__(name: str) -> Any:
    # ``propagate`` loads on first use: importing it scans the entry points of every
    # installed package, which a process with no SDK set up (no span, so no context
    # to carry) never needs, and which would otherwise delay its first push.
    if name == "propagate":
        found = None
        if trace is not None:
            from opentelemetry import propagate as found
        globals()["propagate"] = found
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

SYSTEM = "wurk"
TRACER_NAME = "wurk_django"


def available() -> bool:
    return trace is not None


_cached: tuple[object, object] | None = None


def tracer():
    """The ``wurk_django`` tracer of the global provider, or ``None`` while no SDK is set up.

    Looked up per call (a provider installed after start-up, as some frameworks and
    tests do, is honoured) and cached per provider: without an SDK a span would
    record nothing yet cost a job several microseconds.
    """
    global _cached
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    cached = _cached
    if cached is None or cached[0] is not provider:
        cached = _cached = (provider, provider.get_tracer(TRACER_NAME))
    return cached[1]


def attributes(job: dict, queue: str) -> dict:
    attrs = {
        "messaging.system": SYSTEM,
        "messaging.destination.name": str(queue),
        "wurk.job.class": str(job.get("wrapped") or job.get("class")),
    }
    if job.get("jid"):
        attrs["messaging.message.id"] = str(job["jid"])
    if job.get("bid"):
        attrs["wurk.batch.id"] = str(job["bid"])
    return attrs
