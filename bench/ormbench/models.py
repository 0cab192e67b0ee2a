"""The one table every system's job reads and updates."""

from django.db import models


class Counter(models.Model):
    """One row per job-id range: job ``i`` touches row ``i % ROWS + 1``."""

    hits = models.IntegerField(default=0)
    touched_at = models.FloatField(default=0.0)

    class Meta:
        app_label = "ormbench"
