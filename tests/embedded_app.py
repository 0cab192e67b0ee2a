"""WSGI and ASGI entry points for the gunicorn processes started by tests/test_embedded.py."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

from django.core.asgi import get_asgi_application  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402

from wurk_django.asgi import wrap  # noqa: E402

application = get_wsgi_application()
asgi_application = wrap(get_asgi_application())
