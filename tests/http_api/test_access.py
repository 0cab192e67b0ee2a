"""Bearer tokens, scopes and the problem documents every refusal is (issue 47 item 1)."""

from __future__ import annotations

import hmac
import json
import os
import subprocess
import sys

import pytest
from django.core import checks
from django.test import Client

from tests.http_api.access import assert_problem
from tests.http_api.conftest import ADMIN, BASE, ENQUEUER, READER, TOKENS
from tests.support import ROOT, wurk_settings
from wurk_django.http_api import problems, tokens
from wurk_django.http_api.settings import token_problems

JOB = {"class": "tests.jobsapp.jobs.RecordJob", "args": ["x"]}


def test_no_token_and_a_wrong_token_are_401_with_a_challenge(http_api):
    for token in (None, "not-a-configured-token-at-all"):
        response = http_api(token).get("/queues")
        assert_problem(response, 401, "unauthorized")
        assert response["WWW-Authenticate"] == 'Bearer realm="wurk"'
    response = Client().get(BASE + "/queues", headers={"Authorization": f"Basic {ADMIN}"})
    assert_problem(response, 401, "unauthorized")


def test_the_scheme_is_case_insensitive(http_api):
    response = Client().get(BASE + "/queues", headers={"Authorization": f"bearer {READER}"})
    assert response.status_code == 200


def test_each_scope_opens_its_endpoints_and_admin_opens_all(http_api, redis_db):
    pusher, reader, boss = http_api(ENQUEUER), http_api(READER), http_api(ADMIN)
    assert pusher.post("/jobs", JOB).status_code == 201
    assert_problem(reader.post("/jobs", JOB), 403, "forbidden")["scope"] == "enqueue"
    assert_problem(pusher.get("/queues"), 403, "forbidden")["scope"] == "read"
    assert reader.get("/queues").status_code == 200
    assert reader.get("/processes").status_code == 200
    assert_problem(reader.get("/jobs/abc"), 404, "job-unknown")  # the scope let it through: no such job
    assert_problem(reader.delete("/jobs/abc"), 403, "forbidden")["scope"] == "admin"
    assert_problem(pusher.delete("/jobs/abc"), 403, "forbidden")
    assert boss.post("/jobs", JOB).status_code == 201
    assert boss.get("/queues").status_code == 200
    assert_problem(boss.delete("/jobs/abc"), 404, "job-not-found")
    assert redis_db.llen("queue:default") == 2  # the refused push pushed nothing


def test_every_configured_token_is_compared_in_constant_time(http_api, monkeypatch):
    compared = []
    real = hmac.compare_digest

    def spy(a, b):
        compared.append(b)
        return real(a, b)

    monkeypatch.setattr(tokens.hmac, "compare_digest", spy)
    assert tokens.authenticate(f"Bearer {ENQUEUER}").name == "pusher"
    # The first token matched, and the others were compared all the same.
    assert sorted(compared) == sorted(entry["TOKEN"].encode() for entry in TOKENS.values())


def test_with_no_token_configured_every_request_is_refused(http_api):
    with wurk_settings(HTTP_API_TOKENS={}):
        body = assert_problem(http_api(ADMIN).get("/queues"), 401, "unauthorized")
        assert "no tokens are configured" in body["detail"]


def test_an_unknown_path_and_a_wrong_method_are_problems(http_api):
    assert_problem(http_api().get("/nothing/here"), 404, "not-found")
    assert_problem(http_api().get("/jobs/"), 404, "not-found")  # never Django's HTML page
    response = http_api().get("/jobs")
    assert_problem(response, 405, "method-not-allowed")
    assert response["Allow"] == "POST"
    assert http_api().client.put(BASE + "/jobs/abc", headers=http_api().headers())["Allow"] == "GET, DELETE"


def test_the_token_is_never_in_its_repr():
    token = tokens.Token.from_setting("ci", {"TOKEN": ENQUEUER, "SCOPES": ["enqueue"]})
    assert ENQUEUER not in repr(token) and "ci" in repr(token)


@pytest.mark.parametrize(("value", "needle"), [
    ({"ci": {"TOKEN": "x" * 20}}, "has no SCOPES"),
    ({"ci": {"TOKEN": "x" * 20, "SCOPES": []}}, "has no SCOPES"),
    ({"ci": {"TOKEN": "x" * 20, "SCOPES": ["write"]}}, "may hold only"),
    ({"ci": {"TOKEN": "short", "SCOPES": ["read"]}}, "16+ characters"),
    ({"a": {"TOKEN": "x" * 20, "SCOPES": ["read"]}, "b": {"TOKEN": "x" * 20, "SCOPES": ["read"]}}, "same TOKEN"),
    ({"bad name": {"TOKEN": "x" * 20, "SCOPES": ["read"]}}, "token name"),
    ({"ci": {"TOKEN": "x" * 20, "SCOPES": ["read"], "RATE_LIMIT": {"COUNT": 0}}}, "COUNT"),
    ({"ci": {"TOKEN": "x" * 20, "SCOPES": ["read"], "EXTRA": 1}}, "must be a dict"),
    ([], "must be a dict"),
])
def test_bad_token_settings_are_named_without_the_token(value, needle):
    found = token_problems(value)
    assert any(needle in message for message in found), found
    assert not any("x" * 20 in message for message in found)


def test_the_system_check_reports_a_token_without_scopes():
    from wurk_django.checks import check_settings

    with wurk_settings(HTTP_API_TOKENS={"ci": {"TOKEN": "y" * 20}}):
        messages = [m for m in check_settings() if m.id == "wurk.E041"]
    assert len(messages) == 1 and "has no SCOPES" in messages[0].msg
    assert isinstance(messages[0], checks.Error) and "y" * 20 not in messages[0].msg


def test_every_problem_type_has_a_client_error_or_server_error_status():
    assert all(400 <= status < 600 for status, _ in problems.TYPES.values())
    with pytest.raises(ValueError, match="unknown problem type"):
        problems.Problem("no-such-type", "x")


def test_the_command_s_bind_is_host_and_port():
    from django.core.management.base import CommandError

    from wurk_django.management.commands.wurk_http_api import parse_bind

    assert parse_bind("0.0.0.0:8001") == ("0.0.0.0", 8001)
    assert parse_bind(":8001") == ("127.0.0.1", 8001)
    assert parse_bind("[::1]:8001") == ("::1", 8001)
    assert parse_bind("8001") == ("127.0.0.1", 8001)
    for bad in ("", "host:", "host:99999", "host:http"):
        with pytest.raises(CommandError, match="HOST:PORT"):
            parse_bind(bad)


def test_a_process_without_tokens_imports_nothing_of_the_api_but_its_settings():
    code = ("import django, sys; django.setup(); from wurk_django import context; context.config(); "
            "from tests.jobsapp.jobs import RecordJob; RecordJob.perform_async('x'); "
            "print(sorted(m for m in sys.modules if m.startswith('wurk_django.http_api')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), capture_output=True, text=True, timeout=120,
                         env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
                              "WURK_TEST_EXTRA": "{\"TESTING\": \"fake\"}"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[-2] == "['wurk_django.http_api', 'wurk_django.http_api.settings']"


def test_a_push_needs_no_csrf_token(http_api, redis_db):
    # A bearer token, not a cookie, authenticates: no cross-site page can forge one.
    client = Client(enforce_csrf_checks=True)
    response = client.post(BASE + "/jobs", data=json.dumps(JOB), content_type="application/json",
                           headers={"Authorization": f"Bearer {ENQUEUER}"})
    assert response.status_code == 201 and redis_db.llen("queue:default") == 1
