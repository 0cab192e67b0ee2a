"""A receiver of ``child_forked`` for tests/server/test_swarm.py, imported by
tests.server.settings_ops (``WURK_TEST_PROBE_MODULE``) in the supervisor before it forks:
each child records ``<slot>:<pid>:<queues>`` in the Redis list ``test:forked``."""

import os

import redis

from wurk_django.server.child import child_forked

_redis = redis.Redis.from_url(os.environ.get("WURK_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))


def _forked(sender, index, **kwargs):
    _redis.rpush("test:forked", f"{index}:{os.getpid()}:{','.join(sender.queue_names)}")


child_forked.connect(_forked, weak=False)
