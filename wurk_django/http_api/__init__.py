"""The HTTP producer API (issue 47 item 1): ``/v1`` endpoints any language can push jobs
through and read their status with, behind bearer tokens with scopes.

Off until the project mounts it (``path("wurk/v1/", include("wurk_django.http_api.urls"))``)
or runs ``manage.py wurk_http_api``, *and* configures ``WURK["HTTP_API_TOKENS"]``: nothing
here is imported by a push or a worker.

* :mod:`.settings`: the ``HTTP_API_*`` rows of ``settings.WURK``;
* :mod:`.tokens`: who is calling (constant-time token match) and what they may do;
* :mod:`.problems`: every error as an RFC 9457 problem document with a stable type;
* :mod:`.jobs`: a request body turned into a push through the one push door;
* :mod:`.status`: where a job is now (the one function the status endpoint calls);
* :mod:`.idempotency`: ``Idempotency-Key`` replays, kept in Redis;
* :mod:`.rate`: the per-token rate limit, on :mod:`wurk_django.limiter`;
* :mod:`.openapi`: the OpenAPI 3.1 document served at ``openapi.json``;
* :mod:`.views` and :mod:`.urls`: the endpoints.

See docs/http-api.md.
"""
