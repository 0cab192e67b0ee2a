"""The Prometheus endpoint parses with Prometheus's own text-format parser, whatever
the queue and class names (issue 28 item 4)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from .conftest import BASE, enqueue, heartbeat, job

pytestmark = pytest.mark.django_db

NAMES = ["café", 'a"b', "back\\slash", "new\nline", "mailers/high", "{x=\"y\"} 1"]


def test_any_queue_or_class_name_gives_a_valid_scrape(admin_client, redis_db):
    enqueue(redis_db, *[job(f"Job{name}", queue=name) for name in NAMES])
    heartbeat(redis_db, busy=1, work={"t1x": job('Odd"Class\\é\n', queue="café")})
    response = admin_client.get(BASE + "prometheus")
    assert response.status_code == 200
    text = response.content.decode("utf-8")
    assert "\\u" not in text  # the format has no \u escape
    families = {family.name: family for family in text_string_to_metric_families(text)}
    sizes = {sample.labels["queue"]: sample.value for sample in families["wurk_queue_size"].samples}
    assert sizes == {name: 1 for name in NAMES}
    running = [(s.labels["queue"], s.labels["class"]) for s in families["wurk_running_jobs"].samples]
    assert running == [("café", 'Odd"Class\\é\n')]
    assert families["wurk_processed"].samples[0].value == 0  # the parser strips _total off a counter
