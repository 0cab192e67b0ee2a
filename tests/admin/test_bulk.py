"""Admin actions over large sets and queues (issue 28 item 6).

* "Retry all", "Kill all" and "Enqueue all" over more than ``SYNC_LIMIT`` entries run
  as a job of our own, with progress in a Redis hash shown on a page; smaller sets
  stay inside the request.
* Deleting one job of a large queue reads a window near the row's position, never
  the whole list.
* A ``substr`` filter keeps only the current page's matches in memory.

Behaviour is asserted by counting Redis commands and entries read, never by timing.
"""

from __future__ import annotations

import re
import time
import tracemalloc

import pytest

from wurk_django import keys, payload
from wurk_django.admin import bulk as bulk_views
from wurk_django.admin import sets as set_views
from wurk_django.api import RetrySet, bulk
from wurk_django.redis.scripts import lua

from . import test_windowed
from .conftest import BASE, enqueue, failed, job
from .test_windowed import fill_queue

commands = test_windowed.commands  # the command-recording fixture, used by name

pytestmark = pytest.mark.django_db

SIZE = 20_000
#: A queue no test worker serves: the moved jobs stay there to be counted.
ELSEWHERE = "elsewhere"


@pytest.fixture
def wurk_worker():
    """Drain the served queues with an in-process worker (it serves ``default``)."""
    from wurk_django.server.burst import run_burst

    return lambda timeout=30.0: run_burst(timeout=timeout)


def fill(client, name: str, count: int, queue: str = ELSEWHERE) -> None:
    template = failed("BigJob", queue=queue)
    # Retries and scheduled jobs are due a day from now: a worker's scheduler running beside
    # a bulk action would otherwise promote due entries itself (600 of 20,000 in one CI run),
    # and the action would count fewer than it was asked to move.
    base = int(time.time()) + 86_400 if name in ("retry", "schedule") else 1_700_000_000
    pipe = client.pipeline(transaction=False)
    for i in range(count):
        template["jid"] = f"{i:024x}"
        pipe.zadd(name, {payload.dumps(template): base + i})
        if i % 5_000 == 4_999:
            pipe.execute()
    pipe.execute()


def token_of(response) -> str:
    assert response.status_code == 302, response.status_code
    found = re.search(r"/bulk/([0-9a-f]+)/$", response["Location"])
    assert found, response["Location"]
    return found.group(1)


def test_retry_all_of_a_large_set_runs_as_a_job_with_progress(admin_client, redis_db, commands, wurk_worker):
    fill(redis_db, "retry", SIZE)
    commands.clear()
    token = token_of(admin_client.post(BASE + "retries/all/retry/"))
    # The request only recorded the action and pushed one job: no entry was touched.
    assert len(commands) < 30, [c[0] for c in commands]
    assert not [c for c in commands if str(c[0]).upper() in ("ZPOPMIN", "ZRANGE", "ZSCAN")]
    assert redis_db.zcard("retry") == SIZE
    queued = [payload.loads(raw) for raw in redis_db.lrange("queue:default", 0, -1)]
    assert [item["class"] for item in queued] == ["wurk_django.api.bulk.SetAction"]
    assert queued[0]["args"] == [token, "retry", "retry"]
    info = bulk.progress(token)
    assert (info["state"], info["total"], info["done"]) == ("queued", SIZE, 0)

    page = admin_client.get(BASE + f"bulk/{token}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'http-equiv="refresh"' in html and 'data-state="queued"' in html

    assert wurk_worker(timeout=240)
    info = bulk.progress(token)
    assert (info["state"], info["done"], info["kept"], info["taken"]) == ("done", SIZE, 0, SIZE)
    assert redis_db.zcard("retry") == 0
    assert redis_db.llen(f"queue:{ELSEWHERE}") == SIZE
    moved = payload.loads(redis_db.lindex(f"queue:{ELSEWHERE}", 0))
    assert moved["retry_count"] == 1  # a manual retry does not use up an automatic one
    assert not redis_db.exists(keys.bulk_in_hand(token), keys.bulk_kept(token))
    html = admin_client.get(BASE + f"bulk/{token}/").content.decode()
    assert 'data-state="done"' in html and "http-equiv" not in html
    assert f"{SIZE} of {SIZE} jobs done" in html


def test_kill_all_runs_as_a_job_and_keeps_nothing_in_worker_memory_only(admin_client, redis_db, wurk_worker):
    fill(redis_db, "schedule", 1_500)
    token = bulk.start("schedule", "kill")
    # An earlier run died after taking a chunk: those entries wait in Redis, in hand.
    taken = lua("bulk_take")(redis_db, ["schedule", keys.bulk_in_hand(token), keys.bulk(token)], [50])
    assert len(taken) == 100 and redis_db.zcard(keys.bulk_in_hand(token)) == 50
    assert wurk_worker(timeout=120)
    info = bulk.progress(token)
    assert (info["state"], info["done"], info["taken"]) == ("done", 1_500, 1_500)
    assert redis_db.zcard("schedule") == 0 and redis_db.zcard(keys.bulk_in_hand(token)) == 0
    assert redis_db.zcard("dead") == 1_500


def test_entries_that_cannot_move_go_back_once_and_do_not_block_the_rest(admin_client, redis_db, wurk_worker):
    fill(redis_db, "dead", 1_200)
    # Lowest scores: taken first, and never taken again in place of the others.
    redis_db.zadd("dead", {b"not json at all": 1, b'"a string"': 2})
    token = token_of(admin_client.post(BASE + "dead/all/retry/"))
    assert wurk_worker(timeout=120)
    info = bulk.progress(token)
    assert (info["state"], info["done"], info["kept"]) == ("done", 1_200, 2)
    assert sorted(redis_db.zrange("dead", 0, -1)) == [b'"a string"', b"not json at all"]
    assert redis_db.llen(f"queue:{ELSEWHERE}") == 1_200
    html = admin_client.get(BASE + f"bulk/{token}/").content.decode()
    assert "2 jobs could not be moved" in html


def test_a_small_set_stays_inside_the_request(admin_client, redis_db):
    fill(redis_db, "retry", 20)
    response = admin_client.post(BASE + "retries/all/retry/")
    assert response.status_code == 302 and "/bulk/" not in response["Location"]
    assert redis_db.zcard("retry") == 0 and redis_db.llen(f"queue:{ELSEWHERE}") == 20
    assert not redis_db.exists("queue:default")


def test_the_progress_page_says_when_no_worker_serves_the_queue(admin_client, redis_db, monkeypatch):
    monkeypatch.setattr(bulk_views, "SYNC_LIMIT", 5)
    fill(redis_db, "schedule", 10)
    confirm = admin_client.get(BASE + "scheduled/all/add_to_queue/").content.decode()
    assert "A worker does it as a job" in confirm
    token = token_of(admin_client.post(BASE + "scheduled/all/add_to_queue/"))
    html = admin_client.get(BASE + f"bulk/{token}/").content.decode()
    assert "No running worker serves the queue default" in html
    cancel = admin_client.post(BASE + f"bulk/{token}/", {"action": "cancel"})
    assert cancel.status_code == 302
    assert redis_db.hget(keys.bulk(token), "cancel") == b"1"
    assert admin_client.get(BASE + "bulk/0123abcd/").status_code == 404


def test_cancel_stops_the_job_and_puts_what_it_holds_back(redis_db, wurk_worker):
    fill(redis_db, "retry", 600)
    token = bulk.start("retry", "retry")
    lua("bulk_take")(redis_db, ["retry", keys.bulk_in_hand(token), keys.bulk(token)], [100])
    bulk.cancel(token)
    assert wurk_worker(timeout=120)
    assert bulk.progress(token)["state"] == "cancelled"
    assert RetrySet().size == 600  # nothing moved, nothing lost
    assert not bulk.cancel(token)


# -- one job in a large queue -------------------------------------------------------


def rows(response) -> list[dict]:
    return response.context["page"].items


def delete_form(row: dict, page) -> dict:
    return {"digest": row["digest"], "index": row["index"], "size": page.total}


def ranged_reads(sent: list[tuple], key: str) -> int:
    """How many list entries the LRANGE commands sent asked for."""
    total = 0
    for command in sent:
        if str(command[0]).upper() == "LRANGE" and str(command[1]) == key:
            start, stop = int(command[2]), int(command[3])
            assert start >= 0 and stop >= start or start < 0 and stop < 0, command[:4]
            total += stop - start + 1
    return total


@pytest.mark.parametrize("query", ["?direction=asc&page=1&count=25", "?page=600&count=25"])
def test_deleting_one_job_of_a_large_queue_reads_a_window(admin_client, redis_db, commands, query):
    fill_queue(redis_db, "bulk", SIZE)
    response = admin_client.get(BASE + "queues/bulk/" + query)
    target = rows(response)[-1]
    form = delete_form(target, response.context["page"])
    # The list moves after the page was drawn: new pushes on the left, fetches on the right.
    enqueue(redis_db, *[job("NewJob", queue="bulk") for _ in range(30)])
    for _ in range(10):
        redis_db.rpop("queue:bulk")
    commands.clear()
    admin_client.post(BASE + "queues/bulk/delete/", form)
    # A window of a few hundred entries around the row, not the 20 000 of the queue.
    assert ranged_reads(commands, "queue:bulk") <= 1_000
    assert redis_db.llen("queue:bulk") == SIZE + 30 - 10 - 1
    jids = {payload.loads(v)["jid"] for v in redis_db.lrange("queue:bulk", 0, -1)}
    assert target["jid"] not in jids


def test_a_job_fetched_meanwhile_is_reported_gone_and_nothing_else_is_deleted(admin_client, redis_db):
    fill_queue(redis_db, "bulk", 2_000)
    response = admin_client.get(BASE + "queues/bulk/?direction=asc&count=5")
    form = delete_form(rows(response)[0], response.context["page"])
    redis_db.rpop("queue:bulk")  # a worker fetched it
    reply = admin_client.post(BASE + "queues/bulk/delete/", form, follow=True)
    assert "no longer in the queue" in reply.content.decode()
    assert redis_db.llen("queue:bulk") == 1_999


# -- searches ---------------------------------------------------------------------


def peak_bytes(call) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_deep_search_page_keeps_only_that_page(redis_db):
    fill(redis_db, "retry", SIZE)
    job_set = RetrySet()
    total, entries = set_views.search_page(job_set, "BigJob", 990, 20, newest_first=False)
    assert total == SIZE and [e.jid for e in entries] == [f"{i:024x}" for i in range(19_780, 19_800)]
    shallow = peak_bytes(lambda: set_views.search_page(job_set, "BigJob", 1, 20, newest_first=False))
    deep = peak_bytes(lambda: set_views.search_page(job_set, "BigJob", 1000, 20, newest_first=False))
    # Keeping page x count matches (the old way) costs megabytes here; one page costs the same at any depth.
    assert deep < 2 * shallow, (shallow, deep)


def test_search_pages_count_every_match_in_display_order(admin_client, redis_db):
    fill(redis_db, "dead", 300)
    template = failed("OtherJob", queue=ELSEWHERE)
    for i in range(7):
        template["jid"] = f"other{i}"
        redis_db.zadd("dead", {payload.dumps(template): 1_800_000_000 + i})
    page = admin_client.get(BASE + "dead/?substr=OtherJob&count=5&page=2").context["page"]
    assert page.total == 7
    assert [row["jid"] for row in page.items] == ["other1", "other0"]  # newest deaths first


def test_a_viewer_sees_the_progress_but_cannot_cancel(client, viewer, redis_db):
    fill(redis_db, "retry", 3)
    token = bulk.start("retry", "retry")
    client.force_login(viewer)
    page = client.get(BASE + f"bulk/{token}/")
    assert page.status_code == 200 and "Cancel" not in page.content.decode()
    assert client.post(BASE + f"bulk/{token}/", {"action": "cancel"}).status_code == 403
    assert not redis_db.hexists(keys.bulk(token), "cancel")


@pytest.mark.parametrize("index", [0, 1, 2, 3, 4, -1, -2, -5])
def test_delete_at_removes_exactly_that_entry(redis_db, index):
    from wurk_django.api import Queue

    values = [f"job-{i}".encode() for i in range(5)]
    redis_db.rpush("queue:exact", *values)
    queue = Queue("exact")
    assert not queue.delete_at(index, b"something else")
    assert not queue.delete_at(7, values[0]) and not queue.delete_at(-9, values[0])
    assert queue.delete_at(index, values[index])
    assert redis_db.lrange("queue:exact", 0, -1) == [v for i, v in enumerate(values) if i != index % 5]
