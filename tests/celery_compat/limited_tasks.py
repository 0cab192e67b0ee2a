"""A task with a Celery ``rate_limit`` (its own module: on main the decorator refused it)."""

from __future__ import annotations

import time

from wurk_django.celery import shared_task
from wurk_django.redis.app import redis_client


@shared_task(rate_limit="2/m")
def limited(n):
    redis_client().rpush("test:limited", f"{n}:{time.time():.3f}")
