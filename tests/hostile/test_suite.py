"""Issue 12: 1,000+ malformed payloads of 20+ kinds pushed raw ahead of good jobs, one real worker.

Every malformed payload must end in the dead or retry set with a reason, every
good job must run, no worker thread may die, and the log must stay bounded.
The figures printed here are the ones in docs/reliability.md.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.jobsapp.jobs import RecordJob
from tests.support import wait_for

pytestmark = pytest.mark.slow

PER_KIND = 50
GOOD = 500
GOOD_PER_CHUNK = 40


def _job(i: int, **fields) -> dict:
    job = {"class": "tests.jobsapp.jobs.RecordJob", "args": ["bad"], "jid": f"{i:024x}", "queue": "default",
           "retry": True, "created_at": 1, "enqueued_at": 1}
    job.update(fields)
    return {k: v for k, v in job.items() if v is not ...}


def _dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


# kind -> (payload maker, where it must end, a piece of the reason)
KINDS = {
    "not json": (lambda i: b"{broken " + str(i).encode(), "dead", "Invalid JSON"),
    "empty bytes": (lambda i: b"", "dead", "Invalid JSON"),
    "truncated": (lambda i: _dumps(_job(i))[:-7], "dead", "Invalid JSON"),
    "not utf-8": (lambda i: b'{"class":"\xff\xfe","args":[]}', "dead", "Invalid JSON"),
    "NaN literal": (lambda i: b'{"class":"X","args":[NaN],"jid":"' + f"{i:024x}".encode() + b'"}', "dead",
                    "Invalid JSON"),
    "a string": (lambda i: _dumps(f"just a string {i}"), "dead", "not an object"),
    "an array": (lambda i: _dumps([i, 2]), "dead", "not an object"),
    "a number": (lambda i: str(i).encode(), "dead", "not an object"),
    "no class": (lambda i: _dumps(_job(i, **{"class": ...})), "dead", "lacks a string 'class'"),
    "no args": (lambda i: _dumps(_job(i, args=...)), "dead", "lacks a string 'class'"),
    "class not a string": (lambda i: _dumps(_job(i, **{"class": 123})), "dead", "lacks a string 'class'"),
    "empty class": (lambda i: _dumps(_job(i, **{"class": ""})), "dead", "lacks a string 'class'"),
    "args not a list": (lambda i: _dumps(_job(i, args="[]")), "dead", "lacks a string 'class'"),
    "integer jid": (lambda i: _dumps(_job(i, jid=1000 + i)), "dead", "'jid' must be"),
    "null jid": (lambda i: _dumps(_job(i, jid=None)), "dead", "'jid' must be"),
    "retry_count text": (lambda i: _dumps(_job(i, retry_count="abc")), "dead", "'retry_count' must be"),
    "retry text": (lambda i: _dumps(_job(i, retry="maybe")), "dead", "'retry' must be"),
    "queue a list": (lambda i: _dumps(_job(i, queue=["x"])), "dead", "'queue' must be"),
    "retry_for text": (lambda i: _dumps(_job(i, retry_for="1h")), "dead", "'retry_for' must be"),
    "wrapped a dict": (lambda i: _dumps(_job(i, wrapped={"x": 1})), "dead", "'wrapped' must be"),
    "400 levels deep": (lambda i: _dumps(_job(i, args=_nested(400))), "dead", "nested deeper"),
    "deep, no class": (lambda i: _dumps(_job(i, **{"class": ..., "args": _nested(400)})), "dead",
                       "nested deeper"),
    "empty jid": (lambda i: _dumps(_job(i, jid="", args=[i])), "dead", "'jid' must be"),
    "bid a number": (lambda i: _dumps(_job(i, bid=i)), "dead", "'bid' must be"),
    "unknown class, retry": (lambda i: _dumps(_job(i, **{"class": "Nowhere::Job"})), "retry", "Nowhere::Job"),
    "unknown class, no retry key": (lambda i: _dumps(_job(i, **{"class": "Nowhere::Job", "retry": ...})), "dead",
                                    "Nowhere::Job"),
}


def test_malformed_payloads_end_with_a_reason_and_good_jobs_run(redis_db, worker_factory, capsys):
    bad = []
    for kind, (make, _where, _reason) in KINDS.items():
        bad.extend(make(n * 100 + i) for n, i in [(list(KINDS).index(kind), j) for j in range(PER_KIND)])
    # Bad payloads go to the fetch end in chunks, each with good jobs queued right behind it.
    good = 0
    for start in range(0, len(bad), 100):
        redis_db.lpush("queue:default", *bad[start:start + 100])
        good += len(RecordJob.perform_bulk([[f"good-{start}-{i}"] for i in range(GOOD_PER_CHUNK)]))
    assert good >= GOOD
    started = time.monotonic()
    worker = worker_factory("-c", "5")
    wait_for(lambda: redis_db.llen("test:ran") == good, timeout=120, message="every good job")
    wait_for(lambda: redis_db.zcard("dead") + redis_db.zcard("retry") == len(bad), timeout=60,
             message="every malformed payload in the dead or retry set")
    elapsed = time.monotonic() - started
    assert worker.alive()
    assert worker.stop() == 0
    log = worker.output()

    dead = [json.loads(m) for m in redis_db.zrange("dead", 0, -1)]
    retry = [json.loads(m) for m in redis_db.zrange("retry", 0, -1)]
    assert all(e.get("error_message") and e.get("error_class") for e in dead + retry)
    for kind, (_make, where, reason) in KINDS.items():
        entries = dead if where == "dead" else retry
        found = sum(1 for e in entries if reason in e["error_message"])
        assert found >= PER_KIND, f"{kind}: {found} entries in {where} with {reason!r}"
    assert len(retry) == PER_KIND
    assert redis_db.llen("queue:default") == 0
    assert not [k for k in redis_db.scan_iter(match="queue:default|*") if redis_db.llen(k)]
    assert not re.search(r"thread \S+ died", log) and "Traceback" not in log
    lines = log.splitlines()
    assert len(lines) <= 3 * len(bad) + 2 * good + 50
    assert max(len(line) for line in lines) < 2_000
    with capsys.disabled():
        print(f"\n[hostile payloads] malformed={len(bad)} kinds={len(KINDS)} good={good} dead={len(dead)} "
              f"retry={len(retry)} good_ran={redis_db.llen('test:ran')} log_lines={len(lines)} "
              f"log_bytes={len(log)} longest_line={max(len(line) for line in lines)} seconds={elapsed:.1f}")
