"""``python manage.py wurk_http_api``: the HTTP producer API (docs/http-api.md) served on
its own, at ``http://<bind>/v1/``, with Django's threaded server."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


def parse_bind(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise CommandError(f"--bind takes HOST:PORT or PORT (e.g. 127.0.0.1:8001), not {value!r}")
    return (host or "127.0.0.1").strip("[]"), int(port)


class Command(BaseCommand):
    help = "Serve the wurk HTTP producer API (/v1/) on its own."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bind", default="127.0.0.1:8001", help="HOST:PORT to listen on (127.0.0.1:8001)")

    def handle(self, *args: Any, **options: Any) -> None:
        from django.core.servers.basehttp import WSGIServer, run

        from ... import context
        from ...http_api.standalone import Handler

        host, port = parse_bind(options["bind"])
        if not context.config().http_api_tokens:
            raise CommandError("WURK['HTTP_API_TOKENS'] has no token: every request would be refused; "
                               "see docs/http-api.md")
        self.stdout.write(f"wurk HTTP API at http://{host}:{port}/v1/ (Ctrl-C or SIGTERM stops it)")
        self.stdout.flush()
        try:
            run(host, port, Handler(), ipv6=":" in host, threading=True, server_cls=WSGIServer)
        except KeyboardInterrupt:
            pass
