"""Wake-up tokens only while a fetcher wants them (issue 30 item 1; wurk_django/wake_demand.py).

A push writes ``wake:<queue>`` tokens only while some fetcher waits on them (the
polling fallback), which it learns from one ``EXISTS`` in a push's own round trip at
most every ``LEARN_EVERY`` seconds. A fallback fetcher sets the marker and, while
pushers may not know yet, waits in short steps: these tests check that a job pushed
then, without a token, is still fetched, with a poll interval no test waits for.
No assertion here is about how fast anything is.
"""

from __future__ import annotations

import pytest

from tests.support import Fetching, wait_for
from wurk_django import keys, wake_demand
from wurk_django.client import writer
from wurk_django.client.push import Client
from wurk_django.conf import Config, get_config
from wurk_django.redis.connection import client_for
from wurk_django.server.fetch.reliable import ReliableFetch

JOB = {"class": "tests.jobsapp.jobs.RecordJob", "args": [1], "queue": "c"}


@pytest.fixture
def trips(monkeypatch):
    """The commands of each round trip the writer sends (and sends on)."""
    sent: list[list[tuple]] = []
    real = writer.send_commands

    def record(client, commands, **kwargs):
        sent.append([tuple(c) for c in commands])
        return real(client, commands, **kwargs)

    monkeypatch.setattr(writer, "send_commands", record)
    return sent


def _names(trip: list[tuple]) -> list[str]:
    return [f"{c[0]} {c[1]}" for c in trip]


def test_with_no_fetcher_wanting_them_pushes_write_the_sidekiq_pair_only(redis_db, trips):
    client = Client()
    client.push(dict(JOB))
    client.push(dict(JOB))
    # The first push knows nothing: it writes the tokens and asks; the answer is "no".
    assert _names(trips[0]) == ["SADD queues", "LPUSH queue:c", "LPUSH wake:c", "LTRIM wake:c",
                                "EXPIRE wake:c", f"EXISTS {keys.WAKE_WANTED}"]
    # The next one, within LEARN_EVERY of that answer: what a Sidekiq client sends.
    assert _names(trips[1]) == ["SADD queues", "LPUSH queue:c"]
    assert redis_db.llen("queue:c") == 2


def test_an_answer_older_than_learn_every_is_asked_again(redis_db, trips):
    Client().push(dict(JOB))
    state = wake_demand.known(client_for(get_config()))
    assert state.wanted is False
    state.sent -= wake_demand.LEARN_EVERY  # as if a second went by
    redis_db.set(keys.WAKE_WANTED, "1", ex=60)  # meanwhile a fallback fetcher started
    Client().push(dict(JOB))
    Client().push(dict(JOB))
    assert _names(trips[1])[-1] == f"EXISTS {keys.WAKE_WANTED}"
    assert _names(trips[2]) == ["SADD queues", "LPUSH queue:c", "LPUSH wake:c", "LTRIM wake:c", "EXPIRE wake:c"]
    assert wake_demand.known(client_for(get_config())).wanted is True


def test_a_scheduled_push_asks_nothing(redis_db, trips):
    Client().push({**JOB, "at": 9_999_999_999})
    assert [c[0] for c in trips[0]] == ["ZADD", "PUBLISH"]


def _fallback_fetcher(poll: float) -> ReliableFetch:
    return ReliableFetch(Config(QUEUES=["a", "b", "c"], FETCH_POLL_INTERVAL=poll, FETCH_NOTIFICATIONS=False))


def _blpops(redis_db) -> int:
    db = redis_db.connection_pool.connection_kwargs.get("db", 0)
    return sum(1 for c in redis_db.client_list() if c.get("cmd") == "blpop" and int(c.get("db", -1)) == int(db))


def test_a_fallback_fetcher_says_it_wants_tokens_and_is_woken_by_the_next_push(redis_db, monkeypatch):
    monkeypatch.setattr(wake_demand, "WINDOW", 0.0)  # no short waits: only a token ends this wait
    fetcher = _fallback_fetcher(poll=60)
    fetching = Fetching(fetcher)
    try:
        wait_for(lambda: _blpops(redis_db) == 1, timeout=30, message="the fetcher to block on the wake lists")
        assert 0 < redis_db.ttl(keys.WAKE_WANTED) <= wake_demand.WANTED_TTL
        Client().push(dict(JOB))  # a pusher that knows nothing yet writes the token, and learns "yes"
        wait_for(lambda: fetching.got, timeout=30, message="the job to be fetched")
        assert fetching.got[0].queue == "c"
        assert wake_demand.known(client_for(get_config())).wanted is True
    finally:
        fetching.stop()


def test_a_push_by_a_pusher_that_learnt_no_before_the_fetcher_started_is_still_fetched(redis_db, monkeypatch,
                                                                                        trips):
    """The window: the pusher's "no" is still young, so it writes no token; the new fallback
    fetcher waits in short steps meanwhile and finds the job on a walk, though its poll
    interval is a minute."""
    state = wake_demand.known(client_for(get_config()))
    state.wanted, state.sent = False, float("inf")  # learnt "no" a moment ago, and stays sure
    monkeypatch.setattr(wake_demand, "WINDOW", 120.0)  # however loaded the machine, the push falls inside
    fetcher = _fallback_fetcher(poll=60)
    fetching = Fetching(fetcher)
    try:
        wait_for(lambda: redis_db.exists(keys.WAKE_WANTED), timeout=30, message="the fetcher to set the marker")
        Client().push(dict(JOB))
        assert _names(trips[-1]) == ["SADD queues", "LPUSH queue:c"]  # no token was written
        assert not redis_db.exists(keys.wake("c"))
        wait_for(lambda: fetching.got, timeout=30, message="the job to be fetched")
        assert fetching.got[0].queue == "c"
    finally:
        fetching.stop()


def test_a_fetcher_with_push_notifications_sets_no_marker(redis_db):
    fetcher = ReliableFetch(Config(QUEUES=["a", "b"], FETCH_POLL_INTERVAL=60))
    fetching = Fetching(fetcher)
    try:
        wait_for(lambda: fetcher._watch is not None and fetcher._watch.on(), timeout=30,
                 message="the push watch to be on")
        Client().push({**JOB, "queue": "b"})
        wait_for(lambda: fetching.got, timeout=30, message="the job to be fetched")
        assert fetching.got[0].queue == "b"
        assert not redis_db.exists(keys.WAKE_WANTED)
    finally:
        fetching.stop()
