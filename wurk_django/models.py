"""A table-less model so the admin has something to hang the Wurk pages and
their permissions on (DJ-050, DJ-051). Nothing is ever stored: jobs live in Redis."""

from django.db import models


class Dashboard(models.Model):
    """The admin's "Wurk" entry. Unmanaged: the migration creates no table, only
    the content type and the two permissions below."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("view_dashboard", "Can view the Wurk dashboard"),
            ("manage_jobs", "Can change jobs, queues and processes in the Wurk dashboard"),
        ]
        verbose_name = "dashboard"
        verbose_name_plural = "dashboard"
