"""Middleware chains: order, halting, per-job instances, client and inline use (CORE-082, CORE-088, CORE-114)."""

from __future__ import annotations

import pytest

from tests.jobsapp.jobs import RecordJob
from tests.support import wurk_settings
from wurk_django import Job, payload
from wurk_django.client.push import Client
from wurk_django.middleware import Chain

TRACE: list = []


@pytest.fixture(autouse=True)
def clear_trace():
    TRACE.clear()
    yield
    TRACE.clear()


class Outer:
    def __call__(self, *args):
        call_next = args[-1]
        TRACE.append("outer>")
        result = call_next()
        TRACE.append("<outer")
        return result


class Inner:
    def __call__(self, *args):
        call_next = args[-1]
        TRACE.append("inner>")
        result = call_next()
        TRACE.append("<inner")
        return result


class Third(Inner):
    def __call__(self, *args):
        TRACE.append("third")
        return args[-1]()


class Halt:
    def __call__(self, *args):
        TRACE.append("halt")
        return None


class Tagged:
    """Built with arguments; stamps the job (client side)."""

    instances = 0

    def __init__(self, label="plain"):
        Tagged.instances += 1
        self.label = label
        self.seen = 0

    def __call__(self, job_class, job, queue, redis, call_next):
        self.seen += 1
        TRACE.append((self.label, self.seen, job_class, queue, redis is not None))
        job.setdefault("tags", []).append(self.label)
        return call_next()


def _run(chain):
    return chain.invoke(("a",), lambda: TRACE.append("core") or "result")


def test_first_entry_is_outermost():
    chain = Chain([Outer, Inner])
    assert _run(chain) == "result"
    assert TRACE == ["outer>", "inner>", "core", "<inner", "<outer"]


def test_empty_chain_calls_the_core():
    assert _run(Chain()) == "result"
    assert TRACE == ["core"]


def test_halting_skips_the_rest_and_the_core():
    chain = Chain([Outer, Halt, Inner])
    assert _run(chain) is None
    assert TRACE == ["outer>", "halt", "<outer"]


def test_add_moves_an_existing_entry_to_the_end():
    chain = Chain([Outer, Inner])
    chain.add(Outer)
    assert chain.entries == [Inner, Outer]
    assert len(chain) == 2


def test_prepend_insert_before_after():
    chain = Chain([Outer])
    chain.prepend(Inner)
    assert chain.entries == [Inner, Outer]
    chain.insert_after(Inner, Third)
    assert chain.entries == [Inner, Third, Outer]
    chain.insert_before(Inner, Halt)
    assert chain.entries == [Halt, Inner, Third, Outer]
    chain.insert_before(Outer, Inner)  # moves, never duplicates
    assert chain.entries == [Halt, Third, Inner, Outer]


def test_insert_relative_to_a_missing_anchor():
    chain = Chain([Outer])
    chain.insert_after(Halt, Inner)
    assert chain.entries == [Outer, Inner]
    chain.insert_before(Halt, Third)
    assert chain.entries == [Third, Outer, Inner]


def test_remove_exists_clear_copy():
    chain = Chain([Outer, Inner])
    copy = chain.copy()
    chain.remove(Outer)
    assert not chain.exists(Outer) and chain.exists(Inner)
    assert copy.entries == [Outer, Inner]
    chain.clear()
    assert len(chain) == 0


def test_dotted_paths_and_constructor_arguments():
    chain = Chain([("tests.test_middleware.Tagged", {"label": "from-settings"})])
    chain.add("tests.test_middleware.Outer")
    assert chain.entries == [Tagged, Outer]
    job = {"class": "X", "args": []}
    chain.invoke(("X", job, "default", object()), lambda: job)
    assert job["tags"] == ["from-settings"]


def test_a_fresh_instance_per_job():
    Tagged.instances = 0
    chain = Chain()
    chain.add(Tagged, label="t")
    for _ in range(3):
        chain.invoke(("X", {}, "q", None), lambda: True)
    assert Tagged.instances == 3
    assert [entry[1] for entry in TRACE] == [1, 1, 1]  # no state leaks between jobs


def test_client_middleware_from_settings_mutates_what_is_stored(redis_db):  # CORE-082
    with wurk_settings(CLIENT_MIDDLEWARE=[("tests.test_middleware.Tagged", {"label": "audit"}), Outer]):
        jid = RecordJob.perform_async(1)
    [raw] = redis_db.lrange("queue:default", 0, -1)
    stored = payload.loads(raw)
    assert stored["jid"] == jid
    assert stored["tags"] == ["audit"]
    label, _, job_class, queue, has_redis = TRACE[0]
    assert (label, job_class, queue, has_redis) == ("audit", "tests.jobsapp.jobs.RecordJob", "default", True)
    assert TRACE[1:] == ["outer>", "<outer"]


def test_halting_client_middleware_stops_the_push(redis_db):  # CORE-082
    with wurk_settings(CLIENT_MIDDLEWARE=[Halt]):
        assert RecordJob.perform_async(1) is None
        assert RecordJob.perform_in(60, 1) is None
    assert redis_db.keys("*") == []


class HaltOdd:
    def __call__(self, job_class, job, queue, redis, call_next):
        return None if job["args"][0] % 2 else call_next()


def test_halted_bulk_slots_are_none(redis_db):  # CORE-082, CORE-089
    client = Client()
    client.middleware.add(HaltOdd)
    jids = client.push_bulk({"class": RecordJob, "args": [[0], [1], [2], [3]]})
    assert jids[1] is None and jids[3] is None
    assert jids[0] and jids[2]
    assert sorted(payload.loads(r)["args"][0] for r in redis_db.lrange("queue:default", 0, -1)) == [0, 2]


class ServerRecorder:
    def __call__(self, instance, job, queue, call_next):
        TRACE.append(("server", type(instance).__name__, job["jid"], queue))
        return call_next()


class ServerSkip:
    def __call__(self, instance, job, queue, call_next):
        TRACE.append("skip")


def test_perform_inline_runs_client_then_server_middleware(redis_db):  # CORE-088
    class Inline(Job):
        def perform(self, x):
            TRACE.append(("perform", x))

    with wurk_settings(CLIENT_MIDDLEWARE=[Outer], SERVER_MIDDLEWARE=[ServerRecorder]):
        assert Inline.perform_inline(5) is True
    assert TRACE[0] == "outer>" and TRACE[1] == "<outer"
    assert TRACE[2][0:2] == ("server", "Inline") and TRACE[2][3] == "default"
    assert TRACE[3] == ("perform", 5)
    assert redis_db.keys("*") == []


def test_perform_inline_halted_by_client_middleware_returns_none():
    class Never(Job):
        def perform(self):
            TRACE.append("performed")

    with wurk_settings(CLIENT_MIDDLEWARE=[Halt]):
        assert Never.perform_inline() is None
    assert "performed" not in TRACE


def test_server_middleware_not_calling_next_skips_perform():  # CORE-114
    class Skipped(Job):
        def perform(self):
            TRACE.append("performed")

    with wurk_settings(SERVER_MIDDLEWARE=[ServerSkip]):
        assert Skipped.perform_inline() is None  # CORE-088: None when halted
    assert TRACE == ["skip"]


class OnlyFlagged:
    @staticmethod
    def applies(job):
        return bool(job.get("flag"))

    def __call__(self, job_class, job, queue, redis, call_next):
        TRACE.append("flagged")
        return call_next()


def test_a_middleware_that_does_not_apply_is_skipped():
    chain = Chain([OnlyFlagged])
    assert not chain.applies_to({"class": "X"}) and chain.applies_to({"flag": True})
    chain.invoke(("X", {"class": "X"}, "default", None), lambda: TRACE.append("core"))
    chain.invoke(("X", {"flag": True}, "default", None), lambda: TRACE.append("core"))
    assert TRACE == ["core", "flagged", "core"]
    assert Chain([Outer]).applies_to({})  # no predicate: always applies


# --- applies(job): skipping a middleware a job does not use (issue 19) ------------------------


def test_a_middleware_whose_applies_says_no_is_never_built_or_called():
    from wurk_django.middleware import Chain

    built: list[str] = []

    class Picky:
        @staticmethod
        def applies(job):
            return bool(job.get("flag"))

        def __init__(self):
            built.append("picky")

        def __call__(self, instance, job, queue, call_next):
            job["seen"] = True
            return call_next()

    chain = Chain([Picky])
    plain: dict = {}
    assert chain.invoke((None, plain, "q"), lambda: "ran") == "ran"
    assert built == [] and "seen" not in plain
    flagged = {"flag": 1}
    assert chain.invoke((None, flagged, "q"), lambda: "ran") == "ran"
    assert built == ["picky"] and flagged["seen"]


def test_applies_is_asked_when_its_turn_comes():
    """A middleware further out may turn a feature on for the ones inside it."""
    from wurk_django.middleware import Chain

    class TurnsOn:
        def __call__(self, instance, job, queue, call_next):
            job["flag"] = True
            return call_next()

    class Picky:
        @staticmethod
        def applies(job):
            return bool(job.get("flag"))

        def __call__(self, instance, job, queue, call_next):
            job["picky"] = True
            return call_next()

    job: dict = {}
    Chain([TurnsOn, Picky]).invoke((None, job, "q"), lambda: None)
    assert job == {"flag": True, "picky": True}


def test_a_rescuing_middleware_is_built_only_when_the_inner_layers_raise():
    """``rescue``: the chain runs the inner layers in a try of its own; the instance is
    made only for an exception, which it handles (the run returns None) or lets through,
    and the layers inside and outside it run as around any other middleware."""
    built: list[str] = []

    class Handled(Exception):
        pass

    class Rescuer:
        def __init__(self):
            built.append("rescuer")

        def __call__(self, instance, job, queue, call_next):
            try:
                return call_next()
            except Exception as exc:
                if not self.rescue(exc, instance, job, queue):
                    raise
                return None

        def rescue(self, exc, instance, job, queue):
            TRACE.append(f"rescue {type(exc).__name__}")
            job["rescued"] = True
            return isinstance(exc, Handled)

    chain = Chain([Outer, Rescuer, Inner])
    job: dict = {}
    assert chain.invoke((None, job, "q"), lambda: "ran") == "ran"
    assert built == [] and TRACE == ["outer>", "inner>", "<inner", "<outer"]

    def handled():
        raise Handled("limited")

    TRACE.clear()
    assert chain.invoke((None, job, "q"), handled) is None
    assert built == ["rescuer"] and job["rescued"]
    assert TRACE == ["outer>", "inner>", "rescue Handled", "<outer"]

    def other():
        raise KeyError("boom")

    TRACE.clear()
    with pytest.raises(KeyError) as caught:
        chain.invoke((None, job, "q"), other)
    assert TRACE == ["outer>", "inner>", "rescue KeyError"]
    assert caught.value.__traceback__ is not None and "other" in str(caught.traceback[-1].name)


def test_the_limiter_middleware_rescues_rate_limits_only():
    from wurk_django.limiter.middleware import LimiterMiddleware
    from wurk_django.middleware import Entry

    assert Entry(LimiterMiddleware).rescues
    assert LimiterMiddleware().rescue(KeyError("x"), None, {"class": "X"}, "q") is False


def test_applies_key_spares_the_call_for_a_job_without_the_key():
    asked: list[dict] = []

    class Keyed:
        applies_key = "flag"

        @staticmethod
        def applies(job):
            asked.append(dict(job))
            return bool(job.get("flag"))

        def __call__(self, instance, job, queue, call_next):
            TRACE.append("keyed")
            return call_next()

    chain = Chain([Keyed])
    assert chain.invoke((None, {}, "q"), lambda: "ran") == "ran" and asked == [] and TRACE == []
    assert not chain.applies_to({}) and asked == []
    assert chain.invoke((None, {"flag": 0}, "q"), lambda: "ran") == "ran"
    assert asked == [{"flag": 0}] and TRACE == []  # has the key: applies is asked, and says no
    chain.invoke((None, {"flag": 1}, "q"), lambda: None)
    assert TRACE == ["keyed"]


def test_every_built_in_applies_key_is_one_its_applies_needs():
    """A built-in that names an applies_key must say no to every job without it (else
    the chain would skip it for a job it wants)."""
    from wurk_django.conf import get_config
    from wurk_django.middleware import server_chain

    keyed = [e for e in server_chain(get_config())._entries if e.key is not None]
    assert len(keyed) >= 5
    for entry in keyed:
        bare = {"class": "X", "args": [], "jid": "a" * 24, "queue": "default"}
        assert not entry.applies(bare), entry.klass
        # Present with a value that turns the feature on: the key alone is not the test.
        assert entry.applies({**bare, entry.key: "x"}), entry.klass


def test_built_in_server_middleware_a_plain_job_skips():
    from wurk_django.encryption.middleware import EncryptionServerMiddleware
    from wurk_django.unique.middleware import UniqueServerMiddleware

    plain = {"class": "X", "args": [], "jid": "a" * 24}
    assert not EncryptionServerMiddleware.applies(plain) and not UniqueServerMiddleware.applies(plain)
    assert EncryptionServerMiddleware.applies({**plain, "encrypt": True})
    assert UniqueServerMiddleware.applies({**plain, "unique_for": 60})


def test_a_chain_run_leaves_no_garbage_for_the_cycle_collector():
    """A worker runs the server chain once per job: a reference cycle per run meant
    a garbage collection every sixty jobs."""
    import gc

    from wurk_django.conf import get_config
    from wurk_django.middleware import server_chain

    class Outer:
        def __call__(self, instance, job, queue, call_next):
            return call_next() + 1

    chain = server_chain(get_config()).copy()
    chain.prepend(Outer)
    job = {"class": "A", "args": [], "jid": "j"}
    gc.collect()
    gc.disable()
    try:
        results = {chain.invoke((None, job, "q"), lambda: 1) for _ in range(200)}
        garbage = gc.collect()
    finally:
        gc.enable()
    assert results == {2}
    assert garbage < 100  # a cycle per run would be 2,000 (other threads may leave a little)
