"""URLs served by the gunicorn processes of tests/test_embedded.py: each view enqueues one job."""

import os

from django.http import HttpResponse, JsonResponse
from django.urls import path

from tests.jobsapp.jobs import RecordJob, SlowJob


def enqueue(request, value):
    return JsonResponse({"jid": RecordJob.perform_async(value), "pid": os.getpid()})


def slow(request, seconds, marker):
    return JsonResponse({"jid": SlowJob.perform_async(seconds, marker), "pid": os.getpid()})


def pid(request):
    """Touches nothing but the process: answers even while Redis is down."""
    return HttpResponse(str(os.getpid()))


urlpatterns = [
    path("enqueue/<str:value>/", enqueue),
    path("slow/<int:seconds>/<str:marker>/", slow),
    path("pid/", pid),
]
