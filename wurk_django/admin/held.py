"""Held page: jobs held back as poison-pill suspects, why, and "release now" (issue 42 item 4).

A job running in more than one process death waits in the dead process's held
list and goes back to its queue alone, once the suspect given back before it
finished or crashed again (:mod:`wurk_django.server.suspects`). This page lists
them with the deaths they were running in, and gives one back at once. On a Redis
Cluster nothing is held (the worker there gives a dead process's jobs back at once):
the page says so.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _

from ..api import JobRecord
from ..redis.layout_client import is_cluster
from ..server import poison, suspects
from ..server.reaper import Reaper
from .common import args_text, redirect_back, redis, render, url, when


def _release(request: HttpRequest) -> None:
    held_list, jid = request.POST.get("held", ""), request.POST.get("jid", "")
    if not held_list or not jid:
        messages.error(request, _("No held job named."))
        return
    outcome = Reaper([]).release_now(held_list, jid, by=request.user.get_username() or None, redis=redis())
    if outcome == "released":
        messages.success(request, _("Job %(jid)s is back on its queue.") % {"jid": jid})
    elif outcome == "buried":
        messages.warning(request, _("Job %(jid)s was running in %(count)d process deaths: it went to the dead set "
                                    "as a poison pill.") % {"jid": jid, "count": poison.RECOVERY_THRESHOLD})
    else:
        messages.info(request, _("Job %(jid)s is no longer held (it went back meanwhile).") % {"jid": jid})


def _row(job: suspects.HeldJob) -> dict[str, Any]:
    record = JobRecord(job.raw.decode("utf-8", "replace"), job.queue)
    return {
        "queue": job.queue,
        "held": job.held_list,
        "process": job.process,
        "jid": job.jid,
        "klass": record.display_class,
        "args": args_text(record),
        "since": when(job.since),
        "crashes": [{"process": crash.process, "at": when(crash.found_at)} for crash in job.crashes],
        "deaths": job.recoveries + 1,
    }


def index(request: HttpRequest, model_admin: Any) -> HttpResponse:
    # On a Redis Cluster (issue 46 item 3) the worker's recovery gives every job of a dead
    # process back to its queue at once (server/cluster_reaper.py: no poison-pill accounting
    # there), so no job is ever held: the page says so instead of reading one-server keys.
    clustered = is_cluster(redis())
    if request.method == "POST":
        if clustered:
            messages.info(request, _("No job is held on a Redis Cluster."))
        else:
            _release(request)
        return redirect_back(request, url(request, "wurk_held"))
    jobs = [] if clustered else [_row(job) for job in suspects.held_jobs(redis())]
    context = {"jobs": jobs, "threshold": poison.RECOVERY_THRESHOLD, "release_wait": suspects.RELEASE_WAIT,
               "cluster": clustered}
    return render(request, model_admin, "held.html", context, section="held", title=_("Held suspects"))
