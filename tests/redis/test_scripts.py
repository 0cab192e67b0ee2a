"""Lua scripts share snippets (issue 24 item 3): ``--!include`` is expanded when the script
is read, so the text Redis runs, its SHA and the ``EVAL`` sent after ``NOSCRIPT`` are all
the whole script."""

from __future__ import annotations

import hashlib

from wurk_django import keys, payload
from wurk_django.batch import scripts as batch_scripts
from wurk_django.client.writer import Writer
from wurk_django.redis import scripts

PUSHERS = ("promote_due", "batch/lua/push", "batch/lua/fire")


def test_every_script_that_pushes_includes_the_one_push_snippet():
    snippet = scripts.source("lua/snippets/push_job")
    assert "local function push_job(" in snippet and "local function wake_fetchers(" in snippet
    for name in PUSHERS:
        text = scripts.source(name)
        assert "--!include" not in text and snippet.rstrip("\n") in text
        # The push itself is the snippet's alone.
        assert text.count("'LPUSH'") == snippet.count("'LPUSH'") and "lpush" not in text


def test_the_sha_and_the_noscript_fallback_are_for_the_expanded_text(redis_db):
    push = scripts.lua("batch/lua/push")
    assert push.sha == hashlib.sha1(scripts.source("batch/lua/push").encode()).hexdigest()
    assert scripts.source_for_sha(push.sha) == push.source
    redis_db.script_flush()  # server-wide, harmless: every sender falls back on NOSCRIPT
    job = {"class": "X", "args": [], "queue": "q", "jid": "j" * 24, "bid": "b" * 14}
    raw = payload.dumps(job)
    assert Writer().send([batch_scripts.push_command("b" * 14, "q", job["jid"], raw)]) == [1]
    assert redis_db.lrange("queue:q", 0, -1) == [raw] and redis_db.smembers("queues") == {b"q"}
    assert redis_db.lrange(keys.wake("q"), 0, -1) == [b"1"]


def test_a_front_batch_push_goes_where_workers_take_next(redis_db):
    first, second = payload.dumps({"jid": "1"}), payload.dumps({"jid": "2"})
    Writer().send([batch_scripts.push_command("c" * 14, "q", "1", first),
                   batch_scripts.push_command("c" * 14, "q", "2", second, front=True)])
    assert redis_db.rpop("queue:q") == second
    assert redis_db.llen(keys.wake("q")) == 2 and redis_db.hget(f"b-{'c' * 14}", "total") == b"2"
