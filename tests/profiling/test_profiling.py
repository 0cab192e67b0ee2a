"""Job profiling (CORE-230, CORE-231): sampler, Firefox Profiler format, storage, a real
worker, the Profiles admin page (also for a Ruby/Vernier-shaped profile)."""

from __future__ import annotations

import gzip
import json
import time

import pytest

from tests.jobsapp.jobs import SlowJob
from tests.support import wait_for
from wurk_django.api import ProfileSet
from wurk_django.conf import get_config
from wurk_django.middleware import server_chain
from wurk_django.profiling import Sampler, build, load, store, to_gzip, top_functions

BASE = "/admin/wurk_django/dashboard/"


def napping_function():
    time.sleep(0.12)


def busy_function():
    end = time.perf_counter() + 0.05
    while time.perf_counter() < end:
        pass


def test_sampler_and_processed_profile():
    with Sampler(interval=0.002) as sampler:
        napping_function()
        busy_function()
    assert len(sampler.samples) > 20
    profile = build(sampler, "tests.Job")
    assert profile["meta"]["preprocessedProfileVersion"] == 47
    thread = profile["threads"][0]
    for table in ("samples", "stackTable", "frameTable", "funcTable"):
        columns = {k: v for k, v in thread[table].items() if isinstance(v, list)}
        assert all(len(v) == thread[table]["length"] for v in columns.values()), table
    top = top_functions(load(to_gzip(profile)))
    by_name = {row["function"]: row for row in top["rows"]}
    # Which share each gets depends on the machine's load; that both are seen, with their
    # own time as "self" (the sleep is inside time.sleep, a C call, so it counts as self here), does not.
    assert by_name["napping_function"]["self"] > 0 and by_name["busy_function"]["self"] > 0
    assert top["rows"][0]["self_pct"] >= top["rows"][-1]["self_pct"]
    assert by_name["busy_function"]["file"].endswith("test_profiling.py")


def test_reads_a_vernier_shaped_profile_and_the_gecko_layout():
    vernier = {"meta": {"product": "Ruby/Vernier"}, "threads": [{
        "stringArray": ["<main>", "app.rb", "Report#run", "sleep", "<cfunc>"],
        "samples": {"stack": [1, 2, 2, None], "weight": [1, 3, 1, 1], "length": 4},
        "stackTable": {"frame": [0, 1, 2], "prefix": [None, 0, 1], "length": 3},
        "frameTable": {"func": [0, 1, 2], "line": [1, 5, 0], "length": 3},
        "funcTable": {"name": [0, 2, 3], "fileName": [1, 1, 4], "lineNumber": [1, 4, None], "length": 3},
    }]}
    top = top_functions(vernier)
    assert top["samples"] == 5
    rows = {r["function"]: r for r in top["rows"]}
    assert rows["sleep"]["self"] == 4 and rows["sleep"]["self_pct"] == 80.0
    assert rows["Report#run"]["total"] == 5 and rows["<main>"]["total"] == 5
    gecko = {"threads": [{
        "stringTable": ["main", "work"],
        "samples": {"schema": {"stack": 0, "time": 1}, "data": [[1, 0.0], [1, 1.0]]},
        "stackTable": {"schema": {"prefix": 0, "frame": 1}, "data": [[None, 0], [0, 1]]},
        "frameTable": {"schema": {"func": 0}, "data": [[0], [1]]},
        "funcTable": {"schema": {"name": 0, "fileName": 1}, "data": [[0, None], [1, None]]},
    }]}
    assert top_functions(gecko)["rows"][0] == {"function": "work", "file": "", "line": None, "self": 2, "total": 2,
                                               "self_pct": 100.0, "total_pct": 100.0}
    with pytest.raises(ValueError):
        load(b"\x1f\x8b" + b"garbage"[:0] + gzip.compress(b"[1, 2]")[2:])
    with pytest.raises(ValueError):
        load(gzip.compress(b"not json"))


def test_middleware_stores_successful_runs_only(redis_db):
    # CORE-070: the `profiles` member is `<token>-<jid>`, scored at now + 86,400.
    chain = server_chain(get_config())
    job = {"class": "tests.jobsapp.jobs.SlowJob", "args": [], "jid": "a" * 24, "profile": "slow-one"}
    before = time.time()
    assert chain.invoke((None, job, "default"), lambda: (napping_function(), 7)[1]) == 7
    key = "slow-one-" + "a" * 24
    score = redis_db.zscore("profiles", key)
    assert before + 86_400 - 5 < score < time.time() + 86_400 + 5
    fields = {k.decode(): v for k, v in redis_db.hgetall(key).items()}
    assert set(fields) == {"started_at", "token", "type", "jid", "filename", "elapsed", "data", "size"}
    assert fields["type"] == b"tests.jobsapp.jobs.SlowJob" and int(fields["size"]) == len(fields["data"])
    assert fields["filename"].decode().startswith("slow-one-tests.jobsapp.jobs.SlowJob-" + "a" * 24)
    assert 0.1 < float(fields["elapsed"]) < 5
    assert 86_000 < redis_db.ttl(key) <= 86_400
    assert json.loads(gzip.decompress(fields["data"]))["meta"]["preprocessedProfileVersion"] == 47
    with pytest.raises(RuntimeError):
        chain.invoke((None, {**job, "jid": "b" * 24}, "default"),
                     lambda: (_ for _ in ()).throw(RuntimeError("failed run")))
    assert redis_db.zcard("profiles") == 1
    # Not a text token: the job runs, unprofiled.
    assert chain.invoke((None, {**job, "jid": "c" * 24, "profile": 5}, "default"), lambda: 8) == 8
    assert redis_db.zcard("profiles") == 1


@pytest.mark.slow
@pytest.mark.django_db
def test_a_worker_profiles_a_job_and_the_admin_shows_it(redis_db, worker_factory, admin_client):
    jid = SlowJob.set(profile="report").perform_async(0.3, "profiled")
    worker_factory("-c", "1")
    wait_for(lambda: redis_db.zcard("profiles") == 1, timeout=20, message="a stored profile")
    [record] = list(ProfileSet())
    assert record.jid == jid and record.token == "report" and record.type == "tests.jobsapp.jobs.SlowJob"
    listing = admin_client.get(BASE + "profiles/").content.decode()
    assert f"report-{jid}" in listing and "tests.jobsapp.jobs.SlowJob" in listing
    page = admin_client.get(BASE + f"profiles/report-{jid}/").content.decode()
    assert "SlowJob.perform" in page and "Where the time went" in page
    download = admin_client.get(BASE + f"profiles/report-{jid}/data")
    assert download["Content-Type"] == "application/gzip"
    assert load(download.content)["threads"]
    assert admin_client.get(BASE + "profiles/nope-123/").status_code == 404


@pytest.mark.django_db
def test_a_ruby_written_profile_is_listed_and_readable(redis_db, admin_client):
    vernier = {"meta": {"product": "Ruby/Vernier"}, "threads": [{
        "stringArray": ["HardJob#perform", "app/jobs/hard_job.rb"],
        "samples": {"stack": [0, 0], "weight": [1, 1], "length": 2},
        "stackTable": {"frame": [0], "prefix": [None], "length": 1},
        "frameTable": {"func": [0], "line": [3], "length": 1},
        "funcTable": {"name": [0], "fileName": [1], "lineNumber": [2], "length": 1}}]}
    store(redis_db, token="mike", jid="1234abcd", job_type="HardJob", started_at=time.time(), elapsed=0.5,
          data=gzip.compress(json.dumps(vernier).encode()))
    page = admin_client.get(BASE + "profiles/mike-1234abcd/").content.decode()
    assert "HardJob#perform" in page and "100.0%" in page
    redis_db.hset("mike-1234abcd", "data", b"not a profile")
    assert "cannot be read here" in admin_client.get(BASE + "profiles/mike-1234abcd/").content.decode()


def test_a_job_pushed_without_a_token_skips_the_profiling_layer(monkeypatch):
    from wurk_django.profiling.middleware import ProfileMiddleware

    entered: list[str] = []
    monkeypatch.setattr(ProfileMiddleware, "__call__", lambda self, *args: entered.append(args[1]["jid"]) or args[-1]())
    chain = server_chain(get_config())
    assert chain.invoke((None, {"class": "A", "args": [], "jid": "plain"}, "q"), lambda: 1) == 1
    assert chain.invoke((None, {"class": "A", "args": [], "jid": "empty", "profile": ""}, "q"), lambda: 2) == 2
    assert chain.invoke((None, {"class": "A", "args": [], "jid": "tok", "profile": "t"}, "q"), lambda: 3) == 3
    assert entered == ["tok"]


def test_profiles_of_both_ruby_wurk_layouts_show_seconds(redis_db):
    """Issue 26 item 5: we write Sidekiq 8.1's layout (the job's token, float seconds, one
    day), as Ruby wurk's current profiler does; an earlier Ruby wurk profiler wrote whole
    milliseconds, a random token, a ``sid`` and no ``filename``. Both read as seconds."""
    now = time.time()
    redis_db.zadd("profiles", {"0f3a9c1d2b4e6f70-aaaa": now + 7 * 86_400, "report-bbbb": now + 86_400})
    redis_db.hset("0f3a9c1d2b4e6f70-aaaa", mapping={
        "jid": "aaaa", "type": "HardJob", "token": "0f3a9c1d2b4e6f70", "started_at": int(now),
        "elapsed": 1250, "size": 3, "sid": "web.1:42:abc", "data": b"gz!"})
    store(redis_db, token="report", jid="bbbb", job_type="HardJob", started_at=now, elapsed=1.25, data=b"gz!")
    elapsed = {record.jid: record.elapsed for record in ProfileSet()}
    assert elapsed == {"aaaa": 1.25, "bbbb": 1.25}
