"""The OpenAPI document is what the endpoints do: schemathesis generates requests from it
(valid and invalid bodies, headers, jids) and checks every answer against it (status
codes, content types, response schemas, no server error). Kept short: it runs twice in CI."""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings

from tests.http_api.conftest import ADMIN, BASE

EXAMPLES = 15


#: Every operation of the document (the test below checks the list is complete).
OPERATIONS = ["POST /jobs", "POST /jobs/bulk", "GET /jobs/{jid}", "DELETE /jobs/{jid}", "GET /queues",
              "GET /processes"]


@pytest.fixture
def no_database():
    """As Django's test client does: the WSGI handler's close_old_connections would touch a
    database connection an earlier test opened, which pytest-django forbids here."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.mark.parametrize("label", OPERATIONS)
def test_the_api_answers_as_its_openapi_document_says(http_api, no_database, label):
    # The schema is loaded inside the test (schemathesis' own lazy pytest loader does not
    # run on pytest 9), from the document the mounted API serves.
    schema = schemathesis.openapi.from_wsgi(f"{BASE}/openapi.json", get_wsgi_application())
    operations = {op.label: op for op in (result.ok() for result in schema.get_all_operations())}
    assert sorted(operations) == sorted(OPERATIONS)

    @given(operations[label].as_strategy())
    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    def answers_as_documented(case):
        case.call_and_validate(headers={"Authorization": f"Bearer {ADMIN}"})

    answers_as_documented()


def test_the_document_is_openapi_3_1_and_lists_every_problem_type(http_api):
    from wurk_django.http_api.problems import PREFIX, TYPES

    response = http_api(None).get("/openapi.json")  # no token needed: it holds no data
    document = response.json()
    assert response.status_code == 200 and document["openapi"] == "3.1.0"
    assert document["servers"] == [{"url": "http://testserver/wurk/v1/"}]
    assert set(document["paths"]) == {"/jobs", "/jobs/bulk", "/jobs/{jid}", "/queues", "/processes"}
    assert document["components"]["schemas"]["Problem"]["properties"]["type"]["enum"] == [
        PREFIX + slug for slug in TYPES]
