"""Register the OpenTelemetry middleware. Outermost on both sides: the publish span
covers every other client middleware, the process span everything the server runs."""

from __future__ import annotations

from .. import middleware
from . import available
from .middleware import ProcessSpan, PublishSpan

CLIENT_POSITION = -60
SERVER_POSITION = -60


def install() -> None:
    if not available():
        return  # without opentelemetry-api the chains stay as they were: no cost per job
    middleware.register("client", "otel", PublishSpan, position=CLIENT_POSITION)
    middleware.register("server", "otel", ProcessSpan, position=SERVER_POSITION)
