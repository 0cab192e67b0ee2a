"""The job, wrapped the way each system's Django integration declares it.

Found by each integration's autodiscovery of ``tasks`` modules (Celery,
django_dramatiq, djhuey); wurk_django and RQ name it by import path.
"""

from django.conf import settings

from ormbench.job import touch, touch_forked

SYSTEM = settings.SYSTEM

if SYSTEM == "wurk":
    from wurk_django import Job

    class Touch(Job):
        queue = "bench"

        def perform(self, pk):
            touch(pk)

elif SYSTEM == "celery":
    from celery import shared_task

    @shared_task(name="ormbench.touch")
    def celery_touch(pk):
        touch(pk)

elif SYSTEM == "dramatiq":
    import dramatiq

    @dramatiq.actor(queue_name="bench", max_retries=0)
    def dramatiq_touch(pk):
        touch(pk)

elif SYSTEM == "huey":
    from huey.contrib.djhuey import db_task

    @db_task()
    def huey_touch(pk):
        touch(pk)


def rq_touch(pk):
    """RQ: a plain function, enqueued through django_rq.get_queue("bench")."""
    touch_forked(pk)
