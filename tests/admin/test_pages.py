"""What each page shows and what its actions do (CORE-190..199, DJ-053)."""

from __future__ import annotations

import base64
import re
import time
import zlib
from datetime import UTC, datetime

import pytest

from wurk_django import payload

from .conftest import BASE, add_to_set, enqueue, failed, heartbeat, job

pytestmark = pytest.mark.django_db


def test_dashboard_counts_history_and_redis(admin_client, redis_db):
    today = datetime.now(UTC).date().isoformat()
    redis_db.mset({"stat:processed": 1234, "stat:failed": 56, f"stat:processed:{today}": 78,
                   f"stat:failed:{today}": 9})
    enqueue(redis_db, job(), job(queue="mail"))
    add_to_set(redis_db, "dead", failed())
    response = admin_client.get(BASE + "?days=7")
    body = response.content.decode()
    assert response.status_code == 200
    assert 'data-stat="processed">1234<' in body
    assert 'data-stat="today_processed">78<' in body
    assert 'data-stat="today_failed">9<' in body
    assert 'data-stat="enqueued">2<' in body
    assert 'data-stat="dead">1<' in body
    chart = response.context["history_chart"]
    assert len(chart["labels"]) == 7 and chart["labels"][-1] == today
    assert chart["series"][0]["values"][-1] == 78
    # The dashboard says how its days are counted, and that the Historical tab counts otherwise.
    assert "per UTC day, from the processed/failed counters" in body
    assert "Redis version" in body and response.context["redis"]["redis_version"]
    # Scripts and styles ship with the app: nothing is loaded from another host.
    assert not re.search(r'<(script|link)[^>]+(src|href)="(https?:)?//', body)
    assert "/static/wurk_django/wurk.js" in body and "/static/wurk_django/wurk.css" in body


def test_stats_json_shape(admin_client, redis_db):
    redis_db.set("stat:processed", 5)
    heartbeat(redis_db, busy=2)
    data = admin_client.get(BASE + "stats.json").json()
    assert data["sidekiq"]["processed"] == 5
    assert data["sidekiq"]["busy"] == 2
    assert data["sidekiq"]["processes"] == 1
    assert set(data["redis"]) >= {"redis_version", "uptime_in_days", "connected_clients", "used_memory_human"}
    assert data["server_utc_time"].endswith(" UTC")
    enqueue(redis_db, job(), job(), job(queue="mail"))
    assert admin_client.get(BASE + "stats/queues.json").json() == {"default": 2, "mail": 1}
    text = admin_client.get(BASE + "prometheus").content.decode()
    assert "wurk_processed_total 5" in text
    assert 'wurk_queue_size{queue="default"} 2' in text


def test_busy_lists_processes_and_running_jobs(admin_client, redis_db):
    running = job("ReportJob", args=["<script>alert(1)</script>"], queue="mail")
    heartbeat(redis_db, busy=1, work={"t1x": running})
    body = admin_client.get(BASE + "busy/").content.decode()
    assert "web.1" in body and "4242" in body and "shop" in body and "default, mail" in body
    assert "ReportJob" in body and "t1x" in body
    assert "<script>alert(1)" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "200.0 MB" in body  # rss 204800 KB


def test_quiet_and_stop_one_and_all_but_never_embedded(admin_client, redis_db):
    normal = heartbeat(redis_db, "worker.1:11:aaa")
    embedded = heartbeat(redis_db, "web.1:22:bbb", embedded=True)
    response = admin_client.post(BASE + "busy/", {"identity": normal, "action": "quiet"}, follow=True)
    assert redis_db.lrange(f"{normal}-signals", 0, -1) == [b"TSTP"]
    assert "Quiet sent" in response.content.decode()

    response = admin_client.post(BASE + "busy/", {"identity": embedded, "action": "stop"}, follow=True)
    assert redis_db.llen(f"{embedded}-signals") == 0
    assert "runs embedded" in response.content.decode()

    admin_client.post(BASE + "busy/", {"action": "stop"})
    assert redis_db.lrange(f"{normal}-signals", 0, -1) == [b"TERM", b"TSTP"]
    assert redis_db.llen(f"{embedded}-signals") == 0
    assert 0 < redis_db.ttl(f"{normal}-signals") <= 60


def test_queues_pause_unpause_clear(admin_client, redis_db):
    """CORE-193: queues page: size, latency, paused; clear/pause."""
    enqueue(redis_db, job(), job(queue="mail"))
    body = admin_client.get(BASE + "queues/").content.decode()
    assert 'data-queue="default"' in body and 'data-queue="mail"' in body
    admin_client.post(BASE + "queues/mail/action/", {"action": "pause"})
    assert redis_db.smembers("paused") == {b"mail"}
    assert "paused" in admin_client.get(BASE + "queues/").content.decode()
    admin_client.post(BASE + "queues/mail/action/", {"action": "unpause"})
    assert redis_db.smembers("paused") == set()
    admin_client.post(BASE + "queues/mail/action/", {"action": "clear"})
    assert not redis_db.exists("queue:mail")
    assert redis_db.smembers("queues") == {b"default"}


def test_a_queue_name_with_a_control_character_is_404(admin_client):
    # Other names Sidekiq accepts open (issue 26 item 7; CORE-183's narrower rule is a recorded deviation).
    assert admin_client.get(BASE + "queues/bad%0Aname/").status_code == 404
    assert admin_client.post(BASE + "queues/bad%00name/action/", {"action": "clear"}).status_code == 404


def test_queue_page_escapes_truncates_masks_and_deletes_exact_bytes(admin_client, redis_db):
    """CORE-194: one queue's jobs, paging, delete one."""
    long_arg = "x" * 500
    secret = job("PayJob", args=[1, "NDExMSBjYXJkIGNpcGhlcg=="], encrypt=True)
    nasty = job("XssJob", args=["<img src=x onerror=alert(1)>", long_arg])
    enqueue(redis_db, secret, nasty)
    response = admin_client.get(BASE + "queues/default/")
    body = response.content.decode()
    assert "<img src=x" not in body
    shown = re.findall(r'<code class="wurk-args">(.*?)</code>', body)
    assert len(shown) == 2
    assert "&lt;img src=x onerror=alert(1)&gt;" in shown[0]
    assert long_arg not in shown[0] and shown[0].endswith("…") and len(shown[0]) < 200
    assert "[encrypted data]" in shown[1] and "NDExMSBjYXJkIGNpcGhlcg" not in shown[1]
    raw = payload.dumps(nasty).decode()
    admin_client.post(BASE + "queues/default/delete/", {"key_val": raw})
    assert redis_db.lrange("queue:default", 0, -1) == [payload.dumps(secret)]
    # The same bytes again: already gone, nothing else removed.
    admin_client.post(BASE + "queues/default/delete/", {"key_val": raw})
    assert redis_db.llen("queue:default") == 1


def test_queue_pages_newest_first_and_oldest_first(admin_client, redis_db):
    """CORE-194: one queue's jobs, paging, delete one."""
    enqueue(redis_db, *[job(args=[i], jid=f"jid{i:03d}") for i in range(30)])
    first = admin_client.get(BASE + "queues/default/")
    jids = [j["jid"] for j in first.context["page"].items]
    assert jids[0] == "jid029" and len(jids) == 25
    second = admin_client.get(BASE + "queues/default/?page=2")
    assert [j["jid"] for j in second.context["page"].items] == [f"jid{i:03d}" for i in range(4, -1, -1)]
    oldest = admin_client.get(BASE + "queues/default/?direction=asc&count=3")
    assert [j["jid"] for j in oldest.context["page"].items] == ["jid000", "jid001", "jid002"]
    assert admin_client.get(BASE + "queues/default/?count=100000").context["page"].count == 200


def test_retries_listed_due_first_and_dead_newest_first(admin_client, redis_db):
    # CORE-195: Retries lists the next retry first; CORE-197: Dead lists the newest death first.
    now = time.time()
    for i, offset in enumerate((30, 10, 20)):
        add_to_set(redis_db, "retry", failed(jid=f"r{i}"), at=now + offset)
        add_to_set(redis_db, "dead", failed(jid=f"d{i}"), at=now - offset)
    retries = admin_client.get(BASE + "retries/").context["page"].items
    assert [r["jid"] for r in retries] == ["r1", "r2", "r0"]
    dead = admin_client.get(BASE + "dead/").context["page"].items
    assert [r["jid"] for r in dead] == ["d1", "d2", "d0"]


def test_substring_filter_counts_all_matches(admin_client, redis_db):
    for i in range(40):
        add_to_set(redis_db, "retry", failed("BillingJob" if i % 4 == 0 else "MailJob", jid=f"j{i:02d}"),
                   at=1000 + i)
    add_to_set(redis_db, "retry", failed("OddJob", error_message="disk [full] *now*"), at=5000)
    response = admin_client.get(BASE + "retries/?substr=BillingJob&count=4&page=2")
    page = response.context["page"]
    assert page.total == 10
    assert [r["jid"] for r in page.items] == ["j16", "j20", "j24", "j28"]
    assert "10 matches" in response.content.decode()
    # Glob characters are matched literally.
    assert admin_client.get(BASE + "retries/?substr=[full] *now").context["page"].total == 1
    assert admin_client.get(BASE + "retries/?substr=nothing-like-this").context["page"].total == 0


def test_job_detail_shows_every_field_and_decoded_backtrace(admin_client, redis_db):
    # CORE-195: a retry's detail page shows its fields and the decoded backtrace.
    lines = ["app/jobs.py:12:in 'perform'", "wurk_django/server/run/processor.py:88:in 'run'"]
    backtrace = base64.b64encode(zlib.compress(payload.dumps(lines))).decode()
    item = failed(jid="abc", error_backtrace=backtrace, custom_field={"tenant": "<acme>"}, bid="b-1")
    at = add_to_set(redis_db, "retry", item)
    key = f"{payload.score(at)}-abc"
    response = admin_client.get(BASE + f"retries/job/{key}/")
    body = response.content.decode()
    assert response.status_code == 200
    names = [name for name, _ in response.context["fields"]]
    assert {"class", "args", "jid", "queue", "retry_count", "error_class", "error_message", "custom_field",
            "bid"} <= set(names)
    assert "&lt;acme&gt;" in body
    assert "app/jobs.py:12:in &#x27;perform&#x27;" in body
    assert "RuntimeError: it broke" in body
    failed_at = dict(response.context["fields"])["failed_at"]
    assert failed_at.startswith(str(item["failed_at"])) and failed_at.endswith(" UTC)")
    assert admin_client.get(BASE + "retries/job/123.0-nothere/").status_code == 404
    assert admin_client.get(BASE + "retries/job/not-a-key/").status_code == 404


def test_detail_masks_encrypted_args(admin_client, redis_db):
    at = add_to_set(redis_db, "dead", failed(jid="enc", args=["visible", "c2VjcmV0"], encrypt=True))
    body = admin_client.get(BASE + f"dead/job/{payload.score(at)}-enc/").content.decode()
    assert "[encrypted data]" in body and "c2VjcmV0" not in body and "visible" in body


def test_single_job_actions(admin_client, redis_db):
    at_r = add_to_set(redis_db, "retry", failed(jid="r1", retry_count=3))
    at_k = add_to_set(redis_db, "retry", failed(jid="k1"), at=time.time() + 99)
    at_s = add_to_set(redis_db, "schedule", job(jid="s1", queue="later"))
    admin_client.post(BASE + f"retries/job/{payload.score(at_r)}-r1/", {"action": "retry"})
    queued = payload.loads(redis_db.lindex("queue:default", 0))
    assert queued["jid"] == "r1" and queued["retry_count"] == 2  # a manual retry does not use one up
    admin_client.post(BASE + f"retries/job/{payload.score(at_k)}-k1/", {"action": "kill"})
    assert redis_db.zcard("retry") == 0 and redis_db.zcard("dead") == 1
    admin_client.post(BASE + f"scheduled/job/{payload.score(at_s)}-s1/", {"action": "add_to_queue"})
    assert payload.loads(redis_db.lindex("queue:later", 0))["jid"] == "s1"
    assert redis_db.zcard("schedule") == 0
    # A second click on the same job finds nothing and changes nothing.
    response = admin_client.post(BASE + f"retries/job/{payload.score(at_r)}-r1/", {"action": "retry"}, follow=True)
    assert "no longer there" in response.content.decode()
    assert redis_db.llen("queue:default") == 1


def test_bulk_actions_on_selected_keys(admin_client, redis_db):
    # CORE-197: selected dead jobs are retried or deleted; kill is not a Dead action.
    keys = []
    for i in range(5):
        at = add_to_set(redis_db, "dead", failed(jid=f"d{i}"), at=1000.5 + i)
        keys.append(f"{payload.score(at)}-d{i}")
    response = admin_client.post(BASE + "dead/", {"action": "retry", "key": keys[:2]}, follow=True)
    assert redis_db.llen("queue:default") == 2
    assert "Retry now: 2 jobs" in response.content.decode()
    admin_client.post(BASE + "dead/", {"action": "delete", "key": keys[2:4]})
    assert [payload.loads(m)["jid"] for m in redis_db.zrange("dead", 0, -1)] == ["d4"]
    assert admin_client.post(BASE + "dead/", {"action": "kill", "key": keys[4:]}).status_code == 302
    assert redis_db.zcard("dead") == 1  # kill is not a Dead action


def test_all_actions_need_confirmation_then_run_server_side(admin_client, redis_db):
    # CORE-195: retry and kill every retry; CORE-196: add every scheduled job to its queue; CORE-197: delete every dead job.
    for i in range(7):
        add_to_set(redis_db, "retry", failed(jid=f"r{i}", retry_count=1), at=1000 + i)
        add_to_set(redis_db, "schedule", job(jid=f"s{i}"), at=2000 + i)
    confirm = admin_client.get(BASE + "retries/all/retry/")
    assert confirm.status_code == 200 and "7 right now" in confirm.content.decode()
    assert redis_db.zcard("retry") == 7
    admin_client.post(BASE + "retries/all/retry/")
    assert redis_db.zcard("retry") == 0 and redis_db.llen("queue:default") == 7
    admin_client.post(BASE + "scheduled/all/add_to_queue/")
    assert redis_db.zcard("schedule") == 0 and redis_db.llen("queue:default") == 14
    for i in range(3):
        add_to_set(redis_db, "retry", failed(jid=f"x{i}"))
    admin_client.post(BASE + "retries/all/kill/")
    assert redis_db.zcard("retry") == 0 and redis_db.zcard("dead") == 3
    admin_client.post(BASE + "dead/all/delete/")
    assert not redis_db.exists("dead")
    assert admin_client.post(BASE + "dead/all/kill/").status_code == 404


def test_enqueue_all_keeps_unreadable_members(admin_client, redis_db):
    redis_db.zadd("schedule", {b"not json": 10})
    add_to_set(redis_db, "schedule", job(jid="ok"), at=20)
    admin_client.post(BASE + "scheduled/all/add_to_queue/")
    assert redis_db.zrange("schedule", 0, -1) == [b"not json"]
    assert payload.loads(redis_db.lindex("queue:default", 0))["jid"] == "ok"


def test_unreadable_dead_member_can_be_seen_and_deleted(admin_client, redis_db):
    # CORE-197: one dead entry's page, even unreadable, and its actions.
    redis_db.zadd("dead", {b"{broken": 1234.5})
    page = admin_client.get(BASE + "dead/")
    assert page.context["page"].items[0]["key"] == "1234.5-"
    detail = admin_client.get(BASE + "dead/job/1234.5-/")
    assert "{broken" in detail.content.decode()
    admin_client.post(BASE + "dead/job/1234.5-/", {"action": "retry"})
    assert redis_db.zcard("dead") == 1  # cannot be pushed, stays
    admin_client.post(BASE + "dead/job/1234.5-/", {"action": "delete"})
    assert redis_db.zcard("dead") == 0


def test_metrics_pages_read_sidekiq_keys(admin_client, redis_db):
    """CORE-198: periods, a case-insensitive class filter, the table ranked by total time
    with succeeded, failed, total and mean. CORE-199: one class's histogram totals and
    its series (see the rows for what is not built)."""
    from tests.metrics.test_query import sidekiq_flush

    now = datetime.now(UTC)
    sidekiq_flush(redis_db, now, {"HardJob": {"p": 4, "f": 1, "ms": 900}, "EasyJob": {"p": 2, "ms": 10}},
                  durations={"HardJob": [100, 200, 600]})
    response = admin_client.get(BASE + "metrics/")
    rows = response.context["rows"]
    assert [r["name"] for r in rows] == ["HardJob", "EasyJob"]
    assert (rows[0]["succeeded"], rows[0]["failed"], rows[0]["processed"]) == (3, 1, 4)
    assert rows[0]["mean_s"] == pytest.approx(0.3)
    assert [r["name"] for r in admin_client.get(BASE + "metrics/?substr=easy").context["rows"]] == ["EasyJob"]
    assert admin_client.get(BASE + "metrics/?period=24h").context["rows"][0]["processed"] == 4
    detail = admin_client.get(BASE + "metrics/HardJob/")
    assert sum(detail.context["histogram"]["values"]) == 3
    assert detail.context["job"].total_ms == 900


def test_metrics_shows_every_class_a_page_at_a_time(admin_client, redis_db):  # issue 45 item 3
    from tests.metrics.test_query import sidekiq_flush

    now = datetime.now(UTC)
    sidekiq_flush(redis_db, now, {f"Job{n:02d}": {"p": 1, "ms": 1000 - n} for n in range(28)})
    first = admin_client.get(BASE + "metrics/")
    assert [r["name"] for r in first.context["rows"]] == [f"Job{n:02d}" for n in range(20)]
    body = first.content.decode()
    assert "28 in all" in body and 'href="?page=2&amp;count=20"' in body
    second = admin_client.get(BASE + "metrics/?page=2&count=20")
    assert [r["name"] for r in second.context["rows"]] == [f"Job{n:02d}" for n in range(20, 28)]
    assert len(second.context["chart"]["series"]) == 5  # the chart still shows the top five
    filtered = admin_client.get(BASE + "metrics/?substr=job0&period=2h&count=5")
    assert [r["name"] for r in filtered.context["rows"]] == [f"Job0{n}" for n in range(5)]
    assert 'href="?period=2h&amp;substr=job0&amp;page=2&amp;count=5"' in filtered.content.decode()


def test_busy_pages_its_tables_and_shows_one_on_request_CORE_192(admin_client, redis_db):
    """``count`` (100 by default) and ``page`` window both tables; ``only=processes`` or
    ``only=jobs`` shows one; the cards still count every process."""
    for n in range(103):
        heartbeat(redis_db, f"host{n:03d}:{1000 + n}:abc", busy=1,
                  work={f"tid{n:03d}": job("PagedJob", args=[n], queue="mail")})
    body = admin_client.get(BASE + "busy/").content.decode()
    assert body.count("<tr data-identity=") == 100
    assert "103 in all" in body and "?page=2&amp;count=100" in body
    assert "<h3>Processes</h3><p>103</p>" in body
    second = admin_client.get(BASE + "busy/?page=2&count=100").content.decode()
    assert second.count("<tr data-identity=") == 3
    assert second.count("<code class=\"wurk-args\">") == 3
    small = admin_client.get(BASE + "busy/?count=10&page=3").content.decode()
    assert small.count("<tr data-identity=") == 10 and "<span class=\"current\" aria-current=\"page\">3</span>" in small
    jobs_only = admin_client.get(BASE + "busy/?only=jobs&count=5").content.decode()
    assert 'id="wurk-processes"' not in jobs_only and 'id="wurk-jobs"' in jobs_only
    assert "?only=jobs&amp;page=2&amp;count=5" in jobs_only  # paging keeps the choice
    processes_only = admin_client.get(BASE + "busy/?only=processes").content.decode()
    assert 'id="wurk-jobs"' not in processes_only and 'id="wurk-processes"' in processes_only
    junk = admin_client.get(BASE + "busy/?only=everything&page=x&count=-4").content.decode()
    assert 'id="wurk-jobs"' in junk and 'id="wurk-processes"' in junk  # bad values: the defaults


def test_a_celery_call_shows_its_keyword_arguments_in_every_list(admin_client, redis_db):  # issue 45 item 3
    call = job("tests.celery_compat.tasks.greet", args=["ann"], queue="celery_kw", kwargs={"greeting": "hi"})
    enqueue(redis_db, call)
    add_to_set(redis_db, "retry", {**failed("tests.celery_compat.tasks.greet", args=["bob"]),
                                   "kwargs": {"punctuation": "?"}})
    queue = admin_client.get(BASE + "queues/celery_kw/").content.decode()
    assert '<code class="wurk-args">&quot;ann&quot;, greeting=&quot;hi&quot;</code>' in queue
    retries = admin_client.get(BASE + "retries/").content.decode()
    assert "&quot;bob&quot;, punctuation=&quot;?&quot;" in retries


def test_core_195_196_the_retries_and_scheduled_pages_bulk_actions_on_selected_keys(admin_client, redis_db):
    """CORE-196: Scheduled lists by run time, soonest first, and its selected entries can be
    deleted or added to their queue; CORE-195: selected retries can be retried, deleted or
    killed (the Dead page's own bulk actions are checked above)."""
    now = time.time()
    scheduled = {f"s{i}": add_to_set(redis_db, "schedule", job(jid=f"s{i}"), at=now + offset)
                 for i, offset in enumerate((300, 100, 200))}
    assert [r["jid"] for r in admin_client.get(BASE + "scheduled/").context["page"].items] == ["s1", "s2", "s0"]
    key = {jid: f"{payload.score(at)}-{jid}" for jid, at in scheduled.items()}
    admin_client.post(BASE + "scheduled/", {"action": "delete", "key": [key["s0"]]})
    admin_client.post(BASE + "scheduled/", {"action": "add_to_queue", "key": [key["s1"]]})
    assert [payload.loads(m)["jid"] for m in redis_db.zrange("schedule", 0, -1)] == ["s2"]
    assert [payload.loads(m)["jid"] for m in redis_db.lrange("queue:default", 0, -1)] == ["s1"]
    retries = {f"r{i}": add_to_set(redis_db, "retry", failed(jid=f"r{i}"), at=now + 60 + i) for i in range(3)}
    key = {jid: f"{payload.score(at)}-{jid}" for jid, at in retries.items()}
    admin_client.post(BASE + "retries/", {"action": "retry", "key": [key["r0"]]})
    admin_client.post(BASE + "retries/", {"action": "delete", "key": [key["r1"]]})
    admin_client.post(BASE + "retries/", {"action": "kill", "key": [key["r2"]]})
    assert redis_db.zcard("retry") == 0
    assert "r0" in [payload.loads(m)["jid"] for m in redis_db.lrange("queue:default", 0, -1)]
    assert [payload.loads(m)["jid"] for m in redis_db.zrange("dead", 0, -1)] == ["r2"]


def test_core_063_the_busy_page_badges_the_process_dear_leader_names(admin_client, redis_db):
    """CORE-063: the dashboard only reads ``dear-leader``: the process it names gets the
    leader badge, the others none."""
    heartbeat(redis_db)
    heartbeat(redis_db, identity="web.2:4343:def456")
    redis_db.set("dear-leader", "web.1:4242:abc123")
    body = admin_client.get(BASE + "busy/").content.decode()
    assert body.count('<span class="wurk-badge">leader</span>') == 1
    assert redis_db.get("dear-leader") == b"web.1:4242:abc123"
    redis_db.delete("dear-leader")
    assert '<span class="wurk-badge">leader</span>' not in admin_client.get(BASE + "busy/").content.decode()


@pytest.mark.parametrize("page", ["", "busy/", "queues/", "queues/default/", "scheduled/", "retries/", "dead/",
                                  "metrics/"])
def test_core_180_every_page_has_the_summary_bar(admin_client, redis_db, page):
    """CORE-180: each page shows the summary bar from ``Stats``: Processed, Failed, Busy,
    Enqueued, Retries, Scheduled, Dead, with their values."""
    redis_db.mset({"stat:processed": 31, "stat:failed": 4})
    enqueue(redis_db, job(), job())
    add_to_set(redis_db, "retry", failed())
    add_to_set(redis_db, "dead", failed(jid="d1"))
    add_to_set(redis_db, "dead", failed(jid="d2"))
    body = admin_client.get(BASE + page).content.decode()
    shown = dict(re.findall(r'<dd data-stat="(\w+)">([^<]*)</dd>', body))
    assert shown == {"processed": "31", "failed": "4", "busy": "0", "enqueued": "2", "retries": "1",
                     "scheduled": "0", "dead": "2"}
