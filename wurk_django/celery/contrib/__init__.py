"""``celery.contrib``: only :mod:`.django.task` (``DjangoTask``) has a counterpart here."""
