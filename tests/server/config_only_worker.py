"""Run by test_config_only.py in a fresh interpreter: a worker's components built from
``Config(raw=...)`` alone, with no Django settings module (issue 11: a
``Scheduler(Config(raw=...))`` could not run without Django settings).

Prints one JSON line with what happened; every settings read is counted, not just
the ones that would have raised.
"""

from __future__ import annotations

import json
import os
import sys
import time

assert "DJANGO_SETTINGS_MODULE" not in os.environ

import redis  # noqa: E402

from wurk_django import conf, signals  # noqa: E402

settings_reads: list[str] = []
_raw_settings = conf.raw_settings


def _counted() -> dict:
    import traceback

    settings_reads.append("".join(traceback.format_stack(limit=6)[:-1]))
    return _raw_settings()


conf.raw_settings = _counted

from wurk_django.client.push import Client  # noqa: E402
from wurk_django.job import Job  # noqa: E402
from wurk_django.server.launcher import Launcher  # noqa: E402

URL = sys.argv[1]
raw = redis.Redis.from_url(URL)


class Echo(Job):
    name = "configonly.Echo"

    def perform(self, value):
        raw.rpush("configonly:done", value)


class Fails(Job):
    name = "configonly.Fails"
    retry = 1

    def perform(self):
        raise RuntimeError("on purpose")


died: list[str] = []
signals.job_died.connect(lambda sender, job, **kw: died.append(job["jid"]), weak=False)

config = conf.Config(raw={"REDIS_URL": URL, "CONCURRENCY": 3, "QUEUES": ["configonly"],
                          "TIMEOUT": 5, "FETCH_POLL_INTERVAL": 0.2})
launcher = Launcher(config)
launcher.run()
client = Client(config=config)
client.push({"class": "configonly.Echo", "queue": "configonly", "args": ["now"]})
done_now = raw.blpop("configonly:done", 10)
client.push({"class": "configonly.Echo", "queue": "configonly", "args": ["scheduled"], "at": time.time() + 3600})
promoted = launcher.scheduler.enqueue_due(now=time.time() + 7200)
done_scheduled = raw.blpop("configonly:done", 10)

jid = client.push({"class": "configonly.Fails", "queue": "configonly", "args": []})
deadline = time.monotonic() + 10
while not raw.zcard("retry") and time.monotonic() < deadline:
    time.sleep(0.05)
retried = raw.zcard("retry")
launcher.scheduler.enqueue_due(now=time.time() + 7200)  # the retry is due: promote it
while not died and time.monotonic() < deadline:
    time.sleep(0.05)

launcher.heartbeat.beat()
registered = raw.sismember("processes", launcher.state.identity)
swept = launcher.reaper.sweep(full=True) if launcher.reaper is not None else None
launcher.stop(timeout=5)

from django.conf import settings  # noqa: E402

print(json.dumps({
    "done_now": done_now[1].decode() if done_now else None,
    "promoted": promoted,
    "done_scheduled": done_scheduled[1].decode() if done_scheduled else None,
    "retried": retried,
    "died": died == [jid],
    "dead": raw.zcard("dead"),
    "registered": bool(registered),
    "swept": swept,
    "stopped": launcher.stopped.is_set(),
    "deregistered": not raw.sismember("processes", launcher.state.identity),
    "settings_configured": settings.configured,
    "settings_reads": settings_reads,
}))
