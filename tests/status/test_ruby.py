"""A tracked job stays a Sidekiq job (issue 47 item 2): pushed with ``track``, it runs on a
real Ruby Sidekiq 6.4 server process, which ignores the extra key; its status record is
the one the push wrote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile

import pytest
from django.conf import settings

from tests.support import stop_process, wait_for
from tests.test_ruby_interop import _ruby_sidekiq_available
from wurk_django import status
from wurk_django.client.push import Client

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _ruby_sidekiq_available(), reason="Ruby sidekiq not installed (apt-get install ruby-sidekiq)"),
]

BOOT = '''require "sidekiq"
class TrackedInRuby
  include Sidekiq::Worker
  def perform(word)
    Sidekiq.redis { |r| r.rpush("ruby:ran", word) }
  end
end
'''


@pytest.fixture
def ruby_worker(redis_db):
    boot = tempfile.NamedTemporaryFile("w", suffix=".rb", delete=False)
    boot.write(BOOT)
    boot.close()
    log = tempfile.NamedTemporaryFile(prefix="sidekiq-", suffix=".log", delete=False)
    proc = subprocess.Popen(["sidekiq", "-r", boot.name, "-q", "rubyonly", "-c", "1"], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env={"REDIS_URL": settings.WURK_TEST_REDIS_URL, "PATH": "/usr/bin:/bin"})
    try:
        yield proc
    finally:
        stop_process(proc, signal.SIGTERM, 15)
        os.unlink(boot.name)


def test_a_tracked_push_runs_on_ruby_sidekiq(redis_db, ruby_worker):
    jid = Client().push({"class": "TrackedInRuby", "args": ["hello"], "queue": "rubyonly", "track": True})
    assert json.loads(redis_db.lrange("queue:rubyonly", 0, -1)[0])["track"] == 86_400
    assert status.get(jid).state == "enqueued"
    wait_for(lambda: redis_db.lrange("ruby:ran", 0, -1) == [b"hello"], timeout=60, message="Ruby to run it")
    assert redis_db.zcard("retry") == 0 and redis_db.zcard("dead") == 0
    assert status.get(jid).state == "enqueued"  # Ruby does not update it, as the docs say
