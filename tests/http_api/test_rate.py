"""The per-token rate limit, on the project's own window limiter (issue 47 item 1)."""

from __future__ import annotations

from tests.http_api.access import assert_problem
from tests.http_api.conftest import ADMIN, READER, TOKENS
from tests.support import wurk_settings
from wurk_django import limiter


def test_a_token_over_its_limit_is_429_with_retry_after(http_api, redis_db):
    with wurk_settings(HTTP_API_RATE_LIMIT={"COUNT": 2, "INTERVAL": "minute"}):
        api = http_api(READER)
        assert api.get("/queues").status_code == 200
        assert api.get("/queues").status_code == 200
        response = api.get("/queues")
        assert_problem(response, 429, "rate-limited")
        assert 1 <= int(response["Retry-After"]) <= 60
        # Per token: another token has its own window.
        assert http_api(ADMIN).get("/queues").status_code == 200
        assert "http_api:reader" in limiter.names()


def test_a_token_s_own_limit_wins_and_no_limit_counts_nothing(http_api, redis_db):
    tokens = {**TOKENS, "reader": {**TOKENS["reader"], "RATE_LIMIT": {"COUNT": 1, "INTERVAL": 60}}}
    with wurk_settings(HTTP_API_TOKENS=tokens):
        api = http_api(READER)
        assert api.get("/queues").status_code == 200
        assert_problem(api.get("/queues"), 429, "rate-limited")
        for _ in range(3):
            assert http_api(ADMIN).get("/queues").status_code == 200
    assert "http_api:boss" not in limiter.names()


def test_a_refused_request_is_refused_before_it_is_counted(http_api, redis_db):
    with wurk_settings(HTTP_API_RATE_LIMIT={"COUNT": 1, "INTERVAL": "minute"}):
        assert http_api("wrong-token-0123456789").get("/queues").status_code == 401
        assert http_api(READER).get("/queues").status_code == 200
