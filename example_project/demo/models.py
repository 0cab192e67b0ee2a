from django.db import models


class Report(models.Model):
    """One row per run of a demo job, so you can watch the worker in the admin."""

    title = models.CharField(max_length=200)
    jid = models.CharField(max_length=24, blank=True)
    attempts = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.title
