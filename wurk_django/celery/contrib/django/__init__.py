"""``celery.contrib.django``: see :mod:`.task`."""
