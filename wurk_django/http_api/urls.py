"""The ``/v1`` URLs, to include in a project's URLconf::

    path("wurk/v1/", include("wurk_django.http_api.urls"))

Nothing answers until ``WURK["HTTP_API_TOKENS"]`` has a token (every request is a 401
problem before that), and no job class may be enqueued until ``HTTP_API_JOB_CLASSES``
lists it.
"""

from django.urls import path, re_path

from . import views

app_name = "wurk_http_api"

#: A jid in a URL: what a job id may be (wurk's 24 hex digits, a Celery UUID, a chosen id).
JID = r"(?P<jid>[A-Za-z0-9][A-Za-z0-9_.:-]{0,127})"

urlpatterns = [
    path("jobs", views.create_job, name="jobs"),
    path("jobs/bulk", views.create_jobs, name="jobs-bulk"),
    re_path(rf"^jobs/{JID}$", views.job, name="job"),
    path("queues", views.queues, name="queues"),
    path("processes", views.processes, name="processes"),
    path("openapi.json", views.openapi, name="openapi"),
    re_path(r"^(?P<rest>.*)$", views.not_found),
]
