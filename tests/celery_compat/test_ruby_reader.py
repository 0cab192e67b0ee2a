"""Ruby Sidekiq reads a job with keyword arguments: ``args`` intact, the extra key kept (issue 27 item 2)."""

from __future__ import annotations

import json

import pytest

from tests.celery_compat.tasks import greet
from tests.test_ruby_interop import _ruby_sidekiq_available, ruby

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _ruby_sidekiq_available(), reason="Ruby sidekiq not installed (apt-get install ruby-sidekiq)"),
]


def test_a_plain_json_reader_sees_args_intact(redis_db):
    result = greet.delay("ann", greeting="hey")
    [raw] = redis_db.lrange("queue:celery_kw", 0, -1)
    item = json.loads(raw)  # what any JSON reader sees
    assert item["args"] == ["ann"] and item["kwargs"] == {"greeting": "hey"}
    out = ruby('j = Sidekiq::Queue.new("celery_kw").first; '
               'puts [j.klass, j.args.to_json, j.jid, j.item["kwargs"].to_json].join("|")')
    assert out == f'tests.celery_compat.tasks.greet|["ann"]|{result.id}|{{"greeting":"hey"}}'
