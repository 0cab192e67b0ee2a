"""tests.settings plus an OpenTelemetry SDK that writes every finished span, one JSON
object per line, to the file named by ``WURK_TEST_SPANS`` (for the real-worker test)."""

import os

from tests.settings import *  # noqa: F403

if os.environ.get("WURK_TEST_SPANS"):
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    _provider = TracerProvider()
    _out = open(os.environ["WURK_TEST_SPANS"], "a", buffering=1)  # noqa: SIM115 - lives as long as the worker
    _provider.add_span_processor(SimpleSpanProcessor(
        ConsoleSpanExporter(out=_out, formatter=lambda span: span.to_json(indent=None) + "\n")))
    trace.set_tracer_provider(_provider)
