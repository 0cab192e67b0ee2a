"""The Queues page shows each capped queue's running jobs and limit (issue 47 item 4)."""

from __future__ import annotations

import re

from tests.support import wurk_settings
from wurk_django import keys

from .conftest import BASE, enqueue, job


def _cells(body: str) -> dict[str, str]:
    return {name: re.sub(r"<[^>]+>", "", cell).strip() for name, cell in
            re.findall(r'<tr data-queue="([^"]+)">(?:(?!</tr>).)*?<td data-limit>(.*?)</td>', body, re.S)}


def test_the_queues_page_shows_running_and_limit(admin_client, redis_db):
    enqueue(redis_db, job(queue="reports"), job(queue="default"), job(queue="exports"))
    redis_db.hset(keys.queue_limit("reports"), mapping={"queue:reports|h|1|n|0": 1, "queue:reports|h|2|n|0": 1})
    with wurk_settings(QUEUE_LIMITS={"reports": 2, "exports": 3}):
        body = admin_client.get(BASE + "queues/").content.decode()
        french = admin_client.get(BASE + "queues/", HTTP_ACCEPT_LANGUAGE="fr").content.decode()
    assert "Running / limit" in body
    assert _cells(body) == {"reports": "2 / 2 full", "exports": "0 / 3", "default": ""}
    assert "En cours / limite" in french and _cells(french)["reports"] == "2 / 2 plein"


def test_without_limits_the_page_has_no_such_column(admin_client, redis_db):
    enqueue(redis_db, job(queue="reports"))
    body = admin_client.get(BASE + "queues/").content.decode()
    assert "Running / limit" not in body and "data-limit" not in body
