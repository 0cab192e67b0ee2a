"""The process's one subscribed connection (wurk_django/server/subscriber.py; issue 30 item 3).

Each test runs on a private redis-server and counts subscribed clients (flag ``P`` in
``CLIENT LIST``) there. No assertion is about timing.
"""

from __future__ import annotations

import logging
import threading

import pytest

from tests.redis_servers import TCPRedis
from tests.support import wait_for
from wurk_django.conf import Config
from wurk_django.server import subscriber as subscriber_module
from wurk_django.server.subscriber import Subscriber


@pytest.fixture(scope="module")
def server():
    started = TCPRedis().start()
    try:
        yield started
    finally:
        started.stop()


def _subscribed(client) -> list[dict]:
    return [c for c in client.client_list() if "P" in c.get("flags", "")]


class Heard:
    """A listener's three callbacks, recorded."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []
        self.changes: list[tuple[bool, int | None]] = []
        self.ticks = 0
        self.lock = threading.Lock()

    def message(self, data) -> None:
        with self.lock:
            self.messages.append(data)

    def change(self, up, client_id) -> None:
        with self.lock:
            self.changes.append((up, client_id))

    def tick(self) -> None:
        self.ticks += 1


def test_two_channels_share_one_connection_and_each_hears_its_own(server):
    client = server.client(1)
    sub = Subscriber(Config(REDIS_URL=server.url(1)))
    first, second = Heard(), Heard()
    one = sub.listen("chan:one", first.message, first.change, first.tick)
    two = None
    try:
        wait_for(lambda: first.changes, message="the first listener to hear the subscription is up")
        (up, client_id), = first.changes
        assert up and client_id == int(_subscribed(client)[0]["id"])
        # Added later: subscribed on the same connection, and told at once or when it is done.
        two = sub.listen("chan:two", second.message, second.change)
        wait_for(lambda: client.pubsub_numsub("chan:two")[0][1] == 1, message="the second channel subscribed")
        assert len(_subscribed(client)) == 1
        wait_for(lambda: second.changes == [(True, client_id)], message="the second listener told it is up")
        client.publish("chan:one", "a")
        client.publish("chan:two", "b")
        wait_for(lambda: first.messages == [b"a"] and second.messages == [b"b"], message="each its own message")
        wait_for(lambda: first.ticks >= 1, message="a tick")
    finally:
        sub.leave(one)
        if two is not None:
            sub.leave(two)
    wait_for(lambda: not _subscribed(client), message="the connection to close once the last listener left")
    client.close()


def test_a_killed_connection_is_reported_down_then_up_on_a_new_one(server):
    client = server.client(2)
    sub = Subscriber(Config(REDIS_URL=server.url(2)))
    heard = Heard()
    handle = sub.listen("chan:k", heard.message, heard.change)
    try:
        wait_for(lambda: heard.changes, message="the subscription to come up")
        old_id = heard.changes[0][1]
        client.client_kill_filter(_id=old_id)
        wait_for(lambda: len(heard.changes) >= 3, message="down, then up again")
        assert heard.changes[1] == (False, None)
        up, new_id = heard.changes[2]
        assert up and new_id != old_id and sub.client_id == new_id
        client.publish("chan:k", "after")
        wait_for(lambda: heard.messages == [b"after"], message="the message after the redial")
    finally:
        sub.leave(handle)
        client.close()


def test_a_failing_callback_is_logged_and_the_subscription_goes_on(server, caplog):
    client = server.client(3)
    sub = Subscriber(Config(REDIS_URL=server.url(3)))
    heard = Heard()

    def broken(data) -> None:
        raise ValueError(f"cannot use {data!r}")

    bad = sub.listen("chan:x", broken)
    good = sub.listen("chan:x", heard.message, heard.change)
    caplog.set_level(logging.ERROR, logger="wurk_django.worker")
    try:
        wait_for(lambda: client.pubsub_numsub("chan:x")[0][1] == 1, message="the channel subscribed")
        client.publish("chan:x", "1")
        client.publish("chan:x", "2")
        wait_for(lambda: heard.messages == [b"1", b"2"], message="both messages heard by the other listener")
        assert [r for r in caplog.records if "callback failed" in r.getMessage()]
        assert heard.changes[-1][0] is True  # never reported down
    finally:
        sub.leave(bad)
        sub.leave(good)
        client.close()


def test_a_listener_added_while_the_thread_waits_hears_the_next_message(server, monkeypatch):
    """A listener on a channel already subscribed is told "up" at once, from ``listen``;
    a message read by the wait that was under way then reaches it too (the thread's list
    of listeners is read when the message arrives, not when the wait began). A long
    ``TICK`` holds the thread in that one wait."""
    monkeypatch.setattr(subscriber_module, "TICK", 30.0)
    client = server.client(4)
    sub = Subscriber(Config(REDIS_URL=server.url(4)))
    first, second = Heard(), Heard()
    one = sub.listen("chan:w", first.message, first.change)
    two = None
    try:
        wait_for(lambda: first.changes, message="the subscription to come up")
        wait_for(lambda: client.pubsub_numsub("chan:w")[0][1] == 1, message="the channel subscribed")
        two = sub.listen("chan:w", second.message, second.change)
        assert second.changes == [(True, first.changes[0][1])]
        client.publish("chan:w", "m")
        wait_for(lambda: first.messages == [b"m"], message="the first listener's message")
        wait_for(lambda: second.messages == [b"m"], message="the second listener's message")
    finally:
        sub.leave(one)
        if two is not None:
            sub.leave(two)
        client.publish("chan:w", "end")  # wakes the thread, which finds no listener and ends
    wait_for(lambda: not _subscribed(client), message="the connection to close once the last listener left")
    client.close()


@pytest.mark.parametrize("step", ["_dial", "_catch_up"])
def test_a_listener_added_while_the_thread_subscribes_is_told_up_exactly_once(server, monkeypatch, step):
    """The thread copies its list of listeners, then dials (or subscribes a channel it lacks).
    A listener added in between finds the channel not yet up in ``listen``, so the thread
    must tell it when it marks the channel subscribed: the push watch learns the client
    id it redirects tracking to only that way. The step is held until the listener is in."""
    db = 5 if step == "_dial" else 6
    client = server.client(db)
    sub = Subscriber(Config(REDIS_URL=server.url(db)))
    inside, go = threading.Event(), threading.Event()
    original = getattr(Subscriber, step)

    def held(self, *args):
        if any(listener.channel == "chan:v" for listener in args[-1]):  # the copy holds the early one
            inside.set()
            assert go.wait(10)
        return original(self, *args)

    early, late, other = Heard(), Heard(), Heard()
    handles = []
    try:
        if step == "_catch_up":  # the connection is up on another channel first
            handles.append(sub.listen("chan:other", other.message, other.change))
            wait_for(lambda: other.changes, message="the subscription to come up")
        monkeypatch.setattr(Subscriber, step, held)
        handles.append(sub.listen("chan:v", early.message, early.change))
        assert inside.wait(10), f"the thread never reached {step}"
        handles.append(sub.listen("chan:v", late.message, late.change))
        assert late.changes == []  # the channel is not up yet: listen() told it nothing
        go.set()
        wait_for(lambda: late.changes, message="the late listener to be told the channel is up")
        client.publish("chan:v", "m")
        wait_for(lambda: late.messages == [b"m"] and early.messages == [b"m"], message="both listeners' message")
        assert early.changes == late.changes == [(True, early.changes[0][1])]  # once each
    finally:
        go.set()
        for handle in handles:
            sub.leave(handle)
        client.publish("chan:v", "end")  # wakes the thread, which finds no listener and ends
    wait_for(lambda: not _subscribed(client), message="the connection to close once the last listener left")
    client.close()


@pytest.mark.slow
def test_where_client_is_refused_the_id_is_none_and_channels_still_work():
    """Some managed services rename ``CLIENT`` away: no tracking then (the push watch
    falls back to polling), but the scheduler's wake-ups still arrive."""
    server = TCPRedis("--rename-command", "CLIENT", "").start()
    client = server.client()
    sub = Subscriber(Config(REDIS_URL=server.url()))
    heard = Heard()
    handle = sub.listen("chan:r", heard.message, heard.change)
    try:
        wait_for(lambda: heard.changes, message="the subscription to come up")
        assert heard.changes == [(True, None)]
        wait_for(lambda: client.pubsub_numsub("chan:r")[0][1] == 1, message="the channel subscribed")
        client.publish("chan:r", "still")
        wait_for(lambda: heard.messages == [b"still"], message="the message")
    finally:
        sub.leave(handle)
        client.close()
        server.stop()


def test_one_subscriber_per_process_and_redis():
    a = subscriber_module.for_config(Config(REDIS_URL="redis://127.0.0.1:6379/3"))
    assert subscriber_module.for_config(Config(REDIS_URL="redis://127.0.0.1:6379/3")) is a
    assert subscriber_module.for_config(Config(REDIS_URL="redis://127.0.0.1:6379/4")) is not a
