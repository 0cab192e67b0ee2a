"""Firing a batch event pushes its callbacks with the shared push snippet (issue 24 item 3):
they wake idle fetchers like any push. Nothing here is about how fast anything is: an idle
fetcher with a poll interval no test waits for can only be released by the wake-up."""

from __future__ import annotations

import json

from tests.jobsapp.batch_jobs import Callbacks, Noop
from tests.server.test_wakeup import _blocked_on, _fetch_in_thread, _fetcher
from tests.support import wait_for
from wurk_django import keys, payload
from wurk_django.batch import Batch, fire


def _batch_with_callbacks(queue: str, count: int = 1) -> Batch:
    batch = Batch()
    batch.callback_queue = queue
    for i in range(count):
        batch.on("success", Callbacks, {"tag": f"t{i}"})
    with batch.jobs():
        Noop.perform_async()
    return batch


def test_fired_callbacks_leave_wake_up_tokens_on_their_queue(redis_db):
    batch = _batch_with_callbacks("cb", count=2)
    assert not redis_db.exists(keys.wake("cb"))
    assert fire.fire_event(batch.bid, "success")
    assert redis_db.llen("queue:cb") == 2 and b"cb" in redis_db.smembers("queues")
    assert redis_db.lrange(keys.wake("cb"), 0, -1) == [b"1", b"1"]  # one per job, as the client writes
    assert 0 < redis_db.ttl(keys.wake("cb")) <= keys.WAKE_TTL
    assert not fire.fire_event(batch.bid, "success")  # fired once: no second push, no second token
    assert redis_db.llen(keys.wake("cb")) == 2


def test_a_fired_callback_releases_an_idle_fetcher_waiting_on_its_queue(redis_db):
    batch = _batch_with_callbacks("cb")
    fetcher = _fetcher(poll=60, queues=("a", "cb"))
    attempts: list[int] = []
    thread, got = _fetch_in_thread(fetcher, attempts)
    try:
        wait_for(lambda: _blocked_on(redis_db, "blpop") == 1, message="the fetcher to block on the wake lists")
        assert fire.fire_event(batch.bid, "success")
        thread.join(30)
        assert got and got[0].queue == "cb"
        job = json.loads(got[0].job)
        assert job["class"] == fire.CALLBACK_CLASS and job["args"][:3] == [batch.bid, f"{Callbacks.__module__}."
                                                                          f"{Callbacks.__qualname__}", "success"]
        assert len(attempts) == 2  # blocked once, woken by the callback's token, found it on the next walk
    finally:
        fetcher.terminate()
        thread.join(5)
    assert payload.loads(got[0].job)["queue"] == "cb"
