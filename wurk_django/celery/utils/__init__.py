"""``celery.utils``: only :mod:`.log` (``get_task_logger``) has a counterpart here."""
