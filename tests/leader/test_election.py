"""Leader election on dear-leader (ENT-301..309, RUN-104, RUN-143), against the test Redis."""

from __future__ import annotations

import time

import pytest

from tests.support import wait_for
from wurk_django import leader as leader_api
from wurk_django import signals
from wurk_django.leader import Leader, opted_out


def fast(identity: str, **kwargs) -> Leader:
    options = dict(ttl=2, renew_interval=0.2, follower_interval=0.2, initial_wait=0, cache_ttl=0)
    options.update(kwargs)
    return Leader(identity=identity, **options)


@pytest.fixture
def leaders():
    made: list[Leader] = []

    def make(identity: str, **kwargs) -> Leader:
        one = fast(identity, **kwargs)
        made.append(one)
        return one

    yield make
    for one in made:
        one.stop()


def test_first_campaign_takes_the_free_lock_with_a_ttl(redis_db, leaders):
    # ENT-301, ENT-303 step 1
    a = leaders("host:1:aaaaaaaaaaaa")
    assert a.campaign() is True
    assert redis_db.get("dear-leader") == b"host:1:aaaaaaaaaaaa"
    assert 0 < redis_db.pttl("dear-leader") <= 2000
    assert a.held and a.token == 1


def test_a_second_process_does_not_take_a_held_lock(redis_db, leaders):
    # ENT-303 step 3
    a, b = leaders("a:1:x"), leaders("b:2:y")
    assert a.campaign()
    assert b.campaign() is False
    assert not b.held and b.token is None
    assert redis_db.get("dear-leader") == b"a:1:x"


def test_the_owner_extends_its_lock(redis_db, leaders):
    # ENT-303 step 2: compare-and-extend
    a = leaders("a:1:x", ttl=5)
    a.campaign()
    redis_db.pexpire("dear-leader", 300)
    assert a.campaign()
    assert redis_db.pttl("dear-leader") > 4000
    assert a.token == 1  # an extension is not a new term


def test_each_promotion_takes_a_new_fencing_token(redis_db, leaders):
    # ENT-304
    a, b = leaders("a:1:x"), leaders("b:2:y")
    assert a.campaign() and a.token == 1
    a.release()
    assert a.token is None
    assert b.campaign() and b.token == 2
    info = leader_api.leader_info(redis_db)
    assert info["identity"] == "b:2:y" and info["token"] == 2 and info["since"] == pytest.approx(time.time(), abs=5)


def test_losing_the_lock_clears_held_and_token(redis_db, leaders):
    # ENT-304: losing the lock clears the flag and the token
    a = leaders("a:1:x")
    a.campaign()
    redis_db.set("dear-leader", "someone-else")
    assert a.campaign() is False
    assert not a.held and a.token is None


def test_release_only_deletes_our_own_lock(redis_db, leaders):
    # ENT-305: compare-and-delete, never a bare DEL of a successor's lock
    a = leaders("a:1:x")
    a.campaign()
    redis_db.set("dear-leader", "successor")
    assert a.release() is False
    assert redis_db.get("dear-leader") == b"successor"
    redis_db.set("dear-leader", "a:1:x")
    assert a.release() is True
    assert redis_db.get("dear-leader") is None


def test_a_clean_stop_hands_over_at_once(redis_db, leaders):
    # ENT-305: a graceful exit releases, a follower leads at its next check
    a, b = leaders("a:1:x"), leaders("b:2:y")
    a.start()
    wait_for(lambda: redis_db.get("dear-leader") == b"a:1:x", timeout=5, message="a leads")
    b.start()
    time.sleep(0.5)
    assert redis_db.get("dear-leader") == b"a:1:x"
    a.stop()
    assert redis_db.get("dear-leader") != b"a:1:x"
    wait_for(lambda: redis_db.get("dear-leader") == b"b:2:y", timeout=3, message="b leads after a's stop")


def test_a_killed_leaders_lock_lapses_and_a_follower_takes_over(redis_db, leaders):
    # ENT-305: a leader that dies without releasing costs at most TTL + follower interval
    a = leaders("a:1:x", ttl=1)
    a.campaign()  # never renewed: as if the process was SIGKILLed
    b = leaders("b:2:y", ttl=1)
    b.start()
    started = time.monotonic()
    wait_for(lambda: redis_db.get("dear-leader") == b"b:2:y", timeout=5, message="b leads")
    assert time.monotonic() - started <= 1 + 0.2 + 1.0  # ttl + follower interval + scheduling slack


def test_first_campaign_waits_initial_wait_and_stop_interrupts_it(redis_db, leaders):
    # ENT-302 [SEED-0]: 1 s initial wait, interruptible by stop (ENT-306)
    a = leaders("a:1:x", initial_wait=30)
    a.start()
    time.sleep(0.3)
    assert redis_db.get("dear-leader") is None
    started = time.monotonic()
    a.stop()
    assert time.monotonic() - started < 2


def test_default_cadence_is_sidekiq_enterprises():
    # ENT-302
    one = Leader(identity="x:1:y")
    assert (one.ttl, one.renew_interval, one.follower_interval, one.initial_wait, one.cache_ttl) == (30, 15, 60, 1, 5)


def test_start_is_idempotent(redis_db, leaders):
    # ENT-306: one campaigner, however often start() is called
    a = leaders("a:1:x", initial_wait=5)
    assert a.start() is a.start()


def test_stop_is_bounded_and_keeps_a_straggler(redis_db, monkeypatch, leaders):
    # ENT-306, RUN-103: bounded join, release regardless, the straggler stays referenced
    a = leaders("a:1:x")
    gate = __import__("threading").Event()
    real = a.campaign

    def stuck():
        gate.wait(10)
        return real()

    monkeypatch.setattr(a, "campaign", stuck)
    thread = a.start()
    time.sleep(0.1)
    started = time.monotonic()
    a.stop(timeout=0.3)
    assert time.monotonic() - started < 2
    assert a.start() is thread  # no twin campaigner
    gate.set()
    thread.join(5)


def test_is_leader_is_cached(redis_db):
    # ENT-308, RUN-104: cached per instance for cache_ttl (monotonic)
    clock = [100.0]
    a = Leader(identity="a:1:x", cache_ttl=5, monotonic=lambda: clock[0])
    redis_db.set("dear-leader", "a:1:x")
    assert a.is_leader()
    redis_db.set("dear-leader", "other")
    clock[0] += 4.9
    assert a.is_leader()  # still cached
    clock[0] += 0.2
    assert not a.is_leader()


def test_an_election_listener_already_sees_this_process_lead(redis_db, leaders):
    # ENT-304, ENT-308: the periodic poller's listener wakes its thread, which asks is_leader()
    # at once; a follower's "no" still in the cache made the new leader skip a whole minute's tick.
    a = leaders("a:1:x", cache_ttl=60)
    redis_db.set("dear-leader", "b:2:y", px=100_000)
    assert a.campaign() is False
    assert a.is_leader() is False  # cached as a follower for a minute
    answers = []
    a.on_elected(lambda leader: answers.append(leader.is_leader()))
    redis_db.delete("dear-leader")
    assert a.campaign() is True
    assert answers == [True]


def test_is_leader_is_false_on_redis_error():
    # ENT-308
    class Broken:
        def get(self, key):
            raise ConnectionError("down")

    assert Leader(identity="a:1:x", redis=Broken(), cache_ttl=0).is_leader() is False


@pytest.mark.parametrize("env,expected", [
    ({"WURK_LEADER": "false"}, True), ({"WURK_LEADER": "FALSE"}, True), ({"SIDEKIQ_LEADER": "False"}, True),
    ({"WURK_LEADER": "true"}, False), ({}, False),
])
def test_opt_out_env(env, expected):
    # ENT-307
    assert opted_out(env) is expected


def test_opted_out_process_never_campaigns(redis_db, monkeypatch):
    # ENT-307
    monkeypatch.setenv("SIDEKIQ_LEADER", "false")
    a = fast("a:1:x")
    assert a.start() is None
    time.sleep(0.2)
    assert redis_db.get("dear-leader") is None
    redis_db.set("dear-leader", "a:1:x")
    assert a.is_leader() is False
    a.stop()
    assert redis_db.get("dear-leader") == b"a:1:x"  # an opted-out process releases nothing


def test_leader_elected_signal_and_listener(redis_db, leaders):
    # ENT-304: promotion fires the leader hooks; a failing hook is reported, not propagated
    seen = []

    def receiver(sender, identity, token, **kwargs):
        seen.append((identity, token))

    signals.leader_elected.connect(receiver)
    try:
        a = leaders("a:1:x")
        a.on_elected(lambda leader: (_ for _ in ()).throw(RuntimeError("hook failed")))
        assert a.campaign()
        a.campaign()  # renewal: no second event
    finally:
        signals.leader_elected.disconnect(receiver)
    assert seen == [("a:1:x", 1)]
    assert a.held


def test_renew_must_be_shorter_than_ttl():
    with pytest.raises(ValueError, match="renew_interval"):
        Leader(identity="a", ttl=10, renew_interval=10)


def test_leader_component_is_registered_at_position_10():
    # launcher order: leader 10, before periodic 20
    from wurk_django import features
    from wurk_django.server import launcher

    features.install()
    assert launcher._components["leader"][0] == 10


def test_a_failed_term_record_still_holds_and_renews(redis_db, monkeypatch):
    # Winning the lock is what counts: if INCR leader-token fails, the process still leads
    # (and keeps the renew cadence), it just has no fencing token for this term.
    a = fast("a:1:x")
    monkeypatch.setattr(redis_db.__class__, "incr", lambda self, *a, **k: (_ for _ in ()).throw(ConnectionError("x")))
    a._redis = redis_db
    assert a.campaign() is True
    assert a.held and a.token is None
    assert redis_db.get("dear-leader") == b"a:1:x"


def test_term_record_lives_as_long_as_the_lock(redis_db, leaders):
    a = leaders("a:1:x", ttl=5)
    a.campaign()
    assert 0 < redis_db.pttl("leader-info") <= 5000
    redis_db.pexpire("leader-info", 100)
    a.campaign()  # a renewal extends it too
    assert redis_db.pttl("leader-info") > 4000
