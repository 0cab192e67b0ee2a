"""The HTTP API mounted at /wurk/v1/ with three tokens, one per scope, and a few classes allowed."""

from __future__ import annotations

import json

import pytest
from django.test import Client, override_settings

from tests.support import wurk_settings

ENQUEUER = "enqueue-token-0123456789"
READER = "read-token-0123456789ab"
ADMIN = "admin-token-0123456789a"
BASE = "/wurk/v1"

TOKENS = {
    "pusher": {"TOKEN": ENQUEUER, "SCOPES": ["enqueue"]},
    "reader": {"TOKEN": READER, "SCOPES": ["read"]},
    "boss": {"TOKEN": ADMIN, "SCOPES": ["admin"]},
}
ALLOWED = ["tests.jobsapp.jobs.RecordJob", "HardJob", "RubyWorker", "tests.jobsapp.push_jobs.*"]


class Api:
    """The Django test client speaking to the API with a token."""

    def __init__(self, token: str | None = ADMIN) -> None:
        self.client = Client()
        self.token = token

    def headers(self, **extra: str) -> dict[str, str]:
        return {**({"Authorization": f"Bearer {self.token}"} if self.token else {}), **extra}

    def post(self, path: str, body, **headers: str):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return self.client.post(BASE + path, data=data, content_type="application/json",
                                headers=self.headers(**headers))

    def get(self, path: str, **headers: str):
        return self.client.get(BASE + path, headers=self.headers(**headers))

    def delete(self, path: str, **headers: str):
        return self.client.delete(BASE + path, headers=self.headers(**headers))


@pytest.fixture
def http_api(settings):
    with override_settings(ROOT_URLCONF="tests.http_api.urls"), \
            wurk_settings(HTTP_API_TOKENS=TOKENS, HTTP_API_JOB_CLASSES=ALLOWED):
        from wurk_django.conf import reset_config

        reset_config()
        yield Api
    from wurk_django.conf import reset_config

    reset_config()
