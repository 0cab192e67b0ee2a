"""Issue 12, item 15: a queue holding jobs that no live process serves is marked."""

from __future__ import annotations

import re

from .conftest import BASE, enqueue, heartbeat, job


def _badges(body: str) -> list[str]:
    return re.findall(r'<tr data-queue="([^"]+)">(?:(?!</tr>).)*data-unserved', body, re.S)


def test_queues_page_and_dashboard_mark_unserved_queues(admin_client, redis_db):
    heartbeat(redis_db)  # serves default and mail
    enqueue(redis_db, job(queue="default"), job(queue="reports"), job(queue="reports"))
    redis_db.sadd("queues", "mail", "empty")  # known queues without jobs: nothing to warn about
    body = admin_client.get(BASE + "queues/").content.decode()
    assert _badges(body) == ["reports"]
    dashboard = admin_client.get(BASE).content.decode()
    assert 'id="wurk-unserved"' in dashboard and 'data-unserved="reports"' in dashboard
    assert 'data-unserved="default"' not in dashboard and "(2)" in dashboard


def test_no_live_process_marks_every_queue_with_jobs(admin_client, redis_db):
    enqueue(redis_db, job(queue="default"))
    assert _badges(admin_client.get(BASE + "queues/").content.decode()) == ["default"]


def test_nothing_marked_when_every_queue_is_served(admin_client, redis_db):
    heartbeat(redis_db)
    enqueue(redis_db, job(queue="default"), job(queue="mail"))
    assert _badges(admin_client.get(BASE + "queues/").content.decode()) == []
    assert 'id="wurk-unserved"' not in admin_client.get(BASE).content.decode()


def test_read_only_viewer_sees_the_mark(client, viewer, redis_db):
    client.force_login(viewer)
    enqueue(redis_db, job(queue="reports"))
    assert _badges(client.get(BASE + "queues/").content.decode()) == ["reports"]
