"""Any queue name Sidekiq accepts works in the admin, the worker, Prometheus and statsd (issue 26 item 7).

Sidekiq's Web UI 404s names outside ``[a-z0-9_:.-]`` (CORE-183); we deviate, as
docs/admin.md says: a Rails app pushing to ``mailers/high`` made our dashboard
answer 500.
"""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.urls import reverse

from tests.admin.conftest import BASE, enqueue, heartbeat, job
from wurk_django import keys

NAMES = ["mailers/high", "with space", "café", "100%", "<b>bold</b>", "a|b*[c]?", "..", "~x~2F", 'say "hi"']


@pytest.fixture
def queued(redis_db):
    jobs = {name: job(queue=name, args=[name]) for name in NAMES}
    enqueue(redis_db, *jobs.values())
    return jobs


def test_every_page_lists_odd_names_escaped(admin_client, redis_db, queued):
    heartbeat(redis_db, work={"t1": queued["mailers/high"]})
    for page in ("", "queues/", "busy/", "metrics/"):
        response = admin_client.get(BASE + page)
        assert response.status_code == 200, page
        assert "<b>bold</b>" not in response.content.decode()
    body = admin_client.get(BASE + "queues/").content.decode()
    assert "&lt;b&gt;bold&lt;/b&gt;" in body and "café" in body
    # Every queue's link opens its page, and the page is that queue's.
    links = {unescape(href) for href in re.findall(r'href="([^"]*/queues/[^"]+/)"', body)}
    for name, item in queued.items():
        link = reverse("admin:wurk_queue", kwargs={"name": name})
        assert link in links, name
        page = admin_client.get(link)
        assert page.status_code == 200, name
        assert page.context["queue"].name == name
        assert [j["jid"] for j in page.context["page"].items] == [item["jid"]]


@pytest.mark.parametrize(("path", "name"), [
    ("queues/mailers~2Fhigh/", "mailers/high"),
    ("queues/caf%C3%A9/", "café"),
    ("queues/with%20space/", "with space"),
    ("queues/100%25/", "100%"),
    ("queues/~2E~2E/", ".."),
])
def test_escaped_paths_open_the_queue(admin_client, queued, path, name):
    response = admin_client.get(BASE + path)
    assert response.status_code == 200 and response.context["queue"].name == name


def test_actions_and_delete_on_a_slash_name(admin_client, redis_db, queued):
    action = reverse("admin:wurk_queue_action", kwargs={"name": "mailers/high"})
    admin_client.post(action, {"action": "pause"})
    assert redis_db.smembers("paused") == {b"mailers/high"}
    admin_client.post(action, {"action": "unpause"})
    page = admin_client.get(reverse("admin:wurk_queue", kwargs={"name": "café"}))
    digest = page.context["page"].items[0]["digest"]
    response = admin_client.post(reverse("admin:wurk_queue_delete", kwargs={"name": "café"}), {"digest": digest})
    assert response.status_code == 302 and not redis_db.exists("queue:café")
    admin_client.post(action, {"action": "clear"})
    assert not redis_db.exists("queue:mailers/high") and b"mailers/high" not in redis_db.smembers("queues")


def test_only_control_characters_are_404(admin_client, queued):
    # Sidekiq's Web UI answers 404 for "no spaces" (CORE-183); any name a client can push opens here.
    assert admin_client.get(BASE + "queues/no%20spaces/").status_code == 200
    assert admin_client.get(BASE + "queues/bad%0Aname/").status_code == 404
    assert admin_client.post(BASE + "queues/bad%01name/action/", {"action": "clear"}).status_code == 404


def test_prometheus_labels_hold_the_names(admin_client, queued):
    text = admin_client.get(BASE + "prometheus").content.decode()
    assert 'wurk_queue_size{queue="mailers/high"} 1' in text
    assert 'wurk_queue_size{queue="café"} 1' in text
    assert 'wurk_queue_size{queue="say \\"hi\\""} 1' in text


def test_statsd_tags_cannot_be_broken_by_a_name():
    from wurk_django.statsd.client import format_metric

    line = format_metric("jobs.count", "c", 1, ["worker:HardJob", "queue:a|b,c#d"], None)
    assert line == "jobs.count:1|c|#worker:HardJob,queue:a_b_c_d"


def test_private_list_pattern_matches_the_name_literally(redis_db):
    redis_db.rpush(keys.private_queue("a*", "h", 1, "n"), "x")
    redis_db.rpush(keys.private_queue("ab", "h", 1, "n"), "x")
    found = {k.decode() for k in redis_db.scan_iter(match=keys.private_pattern("a*"))}
    assert found == {keys.private_queue("a*", "h", 1, "n")}


def test_python_pushes_and_a_worker_serves_odd_names(redis_db, worker_factory):
    from tests.jobsapp.jobs import RecordJob
    from tests.support import wait_for

    served = ["mailers/high", "café", "with space", "100%"]
    for name in served:
        RecordJob.set(queue=name).perform_async(name)
    assert {n.decode() for n in redis_db.smembers("queues")} == set(served)
    worker_factory("-c", "2", *[arg for name in served for arg in ("-q", name)])
    wait_for(lambda: redis_db.llen("test:ran") == len(served), message="the four jobs", timeout=60)
    assert all(redis_db.llen(keys.queue(name)) == 0 for name in served)


def test_wurk_stats_command_lists_odd_names(redis_db, queued):
    import io
    import json

    from django.core.management import call_command

    out = io.StringIO()
    call_command("wurk_stats", "--json", stdout=out)
    assert {q["name"] for q in json.loads(out.getvalue())["queues"]} == set(NAMES)
    text = io.StringIO()
    call_command("wurk_stats", stdout=text)
    assert "mailers/high" in text.getvalue() and "café" in text.getvalue()
