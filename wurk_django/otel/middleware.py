"""Client and server middleware that make the OpenTelemetry spans."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import context as job_context
from ..errors import JobInterrupted, RetrySkip, Shutdown
from . import attributes, available, tracer

if available():
    from . import SpanKind, Status, StatusCode

# Not failures: a job pausing itself or cut short by a shutdown.
_NOT_FAILURES = (JobInterrupted, RetrySkip, Shutdown)
_CONTEXT_KEYS = ("traceparent", "tracestate")


class PublishSpan:
    """Client side: a PRODUCER span per push; the trace context goes into the payload."""

    @staticmethod
    def applies(job: dict) -> bool:
        return tracer() is not None  # no SDK set up: nothing to record, skip the middleware

    def __call__(self, job_class: Any, job: dict, queue: str, redis: Any, call_next: Callable[[], Any]) -> Any:
        spans = tracer()
        if spans is None:
            return call_next()
        attrs = attributes(job, queue)
        attrs["messaging.operation.type"] = "publish"
        from . import propagate  # loaded with the first span (see the package's __getattr__)

        with spans.start_as_current_span(f"{queue} publish", kind=SpanKind.PRODUCER, attributes=attrs):
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            for key in _CONTEXT_KEYS:
                if key in carrier:
                    job[key] = carrier[key]
            return call_next()


class ProcessSpan:
    """Server side: a CONSUMER span per run, child of the context found in the payload."""

    @staticmethod
    def applies(job: dict) -> bool:
        return tracer() is not None

    def __call__(self, instance: Any, job: dict, queue: str, call_next: Callable[[], Any]) -> Any:
        spans = tracer()
        if spans is None:
            return call_next()
        from . import propagate  # loaded with the first span (see the package's __getattr__)

        carrier = {k: job[k] for k in _CONTEXT_KEYS if isinstance(job.get(k), str)}
        parent = propagate.extract(carrier) if carrier else None
        attrs = attributes(job, queue)
        attrs["messaging.operation.type"] = "process"
        if isinstance(job.get("retry_count"), int):
            attrs["wurk.job.retry_count"] = job["retry_count"]
        with spans.start_as_current_span(f"{queue} process", context=parent, kind=SpanKind.CONSUMER,
                                            attributes=attrs, record_exception=False,
                                            set_status_on_exception=False) as span:
            try:
                result = call_next()
            except _NOT_FAILURES:
                raise
            except BaseException as exc:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:200]))
                raise
            # A layer further in may have ended the job over an error of its own (an argument
            # that cannot be decrypted) and returned: the span says so.
            where = job_context.running()
            error = where.error if where is not None else None
            if error is not None:
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:200]))
            return result
