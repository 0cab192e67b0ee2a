"""WSGI entry point of the HTTP API on its own: ``gunicorn wurk_django.http_api.wsgi``
(with ``DJANGO_SETTINGS_MODULE`` set, as for the project's own WSGI module)."""

import django

django.setup(set_prefix=False)

from .standalone import Handler  # noqa: E402 - after setup, as django.core.wsgi does

application = Handler()
