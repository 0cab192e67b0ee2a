"""Register the OpenTelemetry middleware. Outermost on both sides: the publish span
covers every other client middleware, the process span everything the server runs.
Without opentelemetry-api the chains stay as they were: no cost per job."""

from __future__ import annotations

CLIENT_POSITION = -60
SERVER_POSITION = -60


def install_client() -> None:
    from .. import middleware
    from . import available

    if available():
        from .middleware import PublishSpan

        middleware.register("client", "otel", PublishSpan, position=CLIENT_POSITION)


def install_server() -> None:
    from .. import middleware
    from . import available

    if available():
        from .middleware import ProcessSpan

        middleware.register("server", "otel", ProcessSpan, position=SERVER_POSITION)
