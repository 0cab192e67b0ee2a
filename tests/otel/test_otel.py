"""OpenTelemetry spans around push and perform, trace context carried in the payload."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from tests.jobsapp.jobs import FailingJob, RecordJob  # noqa: E402
from tests.support import WorkerProcess, queued, wait_for  # noqa: E402
from wurk_django.conf import get_config  # noqa: E402
from wurk_django.middleware import server_chain  # noqa: E402

EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))


@pytest.fixture(autouse=True)
def spans(monkeypatch):
    # Not the global provider (it can be set once per process, and would trace every
    # other test's pushes): wurk's tracer and the "web" tracer both come from PROVIDER.
    monkeypatch.setattr("wurk_django.otel.middleware.tracer", lambda: PROVIDER.get_tracer("wurk_django"))
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def _hex(n: int, width: int) -> str:
    return format(n, f"0{width}x")


def test_push_makes_a_producer_span_and_carries_the_context(redis_db, spans):
    tracer = PROVIDER.get_tracer("web")
    with tracer.start_as_current_span("GET /checkout") as request_span:
        jid = RecordJob.perform_async("x")
    [job] = queued(redis_db)
    trace_id = _hex(request_span.get_span_context().trace_id, 32)
    assert job["traceparent"].split("-")[1] == trace_id
    publish = next(s for s in spans.get_finished_spans() if s.name == "default publish")
    assert publish.kind == SpanKind.PRODUCER
    assert publish.parent.span_id == request_span.get_span_context().span_id
    assert job["traceparent"].split("-")[2] == _hex(publish.context.span_id, 16)
    assert publish.attributes["messaging.message.id"] == jid
    assert publish.attributes["wurk.job.class"] == "tests.jobsapp.jobs.RecordJob"


def test_process_span_is_a_child_of_the_payload_context_and_records_errors(redis_db, spans):
    chain = server_chain(get_config())
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    job = {"class": "X", "args": [], "jid": "j1", "traceparent": parent}
    assert chain.invoke((None, job, "mail"), lambda: 5) == 5
    with pytest.raises(ValueError):
        chain.invoke((None, {**job, "jid": "j2"}, "mail"), lambda: (_ for _ in ()).throw(ValueError("bad")))
    ok, bad = sorted(spans.get_finished_spans(), key=lambda s: s.attributes["messaging.message.id"])
    for span in (ok, bad):
        assert span.name == "mail process" and span.kind == SpanKind.CONSUMER
        assert _hex(span.context.trace_id, 32) == "0af7651916cd43dd8448eb211c80319c"
        assert _hex(span.parent.span_id, 16) == "b7ad6b7169203331"
    assert ok.status.status_code == StatusCode.UNSET
    assert bad.status.status_code == StatusCode.ERROR and bad.events[0].name == "exception"


def test_a_job_ended_by_an_error_of_a_layer_further_in_is_an_error_span(redis_db, spans):
    # A layer inside (encryption, when the argument cannot be decrypted) ends the job as dead
    # and returns instead of raising: the span still records the error.
    from wurk_django import context
    from wurk_django.outcome import Outcome

    chain = server_chain(get_config())
    job = {"class": "X", "args": [], "jid": "j3"}
    where = context.JobContext(get_config(), redis_db, b"{}", queue="mail", job=job)

    def undecryptable():
        where.outcome, where.error = Outcome.DEAD, ValueError("cannot decrypt")

    with context.scope(where):
        chain.invoke((None, job, "mail"), undecryptable)
    (span,) = spans.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR and "cannot decrypt" in span.status.description
    assert span.events[0].name == "exception"


@pytest.mark.slow
def test_web_request_and_its_job_share_a_trace_across_processes(redis_db, tmp_path, spans):
    tracer = PROVIDER.get_tracer("web")
    with tracer.start_as_current_span("POST /orders") as request_span:
        RecordJob.perform_async("traced")
        FailingJob.perform_async("traced failure")
    trace_id = "0x" + _hex(request_span.get_span_context().trace_id, 32)
    out = tmp_path / "spans.jsonl"
    worker = WorkerProcess("-c", "2", settings="tests.otel.settings_otel", env={"WURK_TEST_SPANS": str(out)})
    try:
        def processed():
            if not out.exists():
                return None
            found = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
            done = [s for s in found if s["name"] == "default process"]
            return done if len(done) == 2 else None

        done = wait_for(processed, timeout=30, message="two process spans from the worker")
    finally:
        assert worker.stop() == 0
    publishes = {s.context.span_id for s in spans.get_finished_spans() if s.name == "default publish"}
    for span in done:
        assert span["context"]["trace_id"] == trace_id
        assert int(span["parent_id"], 16) in publishes
        assert span["kind"] == "SpanKind.CONSUMER"
    failed = next(s for s in done if "FailingJob" in s["attributes"]["wurk.job.class"])
    assert failed["status"]["status_code"] == "ERROR"


def test_no_sdk_means_no_spans_and_nothing_in_the_payload(redis_db, monkeypatch):
    from wurk_django import otel

    monkeypatch.setattr("wurk_django.otel._cached", None)
    monkeypatch.setattr("wurk_django.otel.middleware.tracer", otel.tracer)  # undo the fixture's provider
    assert otel.tracer() is None  # this process never set a global provider
    RecordJob.perform_async("plain")
    [job] = queued(redis_db)
    assert "traceparent" not in job
