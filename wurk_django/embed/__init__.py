"""Running wurk workers inside another server's process (embedded mode) and deciding whether to.

* :mod:`.boot` — decides once, at Django boot, whether this process may run workers;
* :mod:`.embedded` — the embedded worker itself: start, stop, drain;
* :mod:`.gunicorn` — gunicorn server hooks (import them from ``wurk_django.gunicorn``);
* :mod:`.asgi` — the ASGI lifespan wrapper (import it from ``wurk_django.asgi``).
"""
