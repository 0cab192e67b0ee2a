"""The core pages (dashboard, busy, queues, sets, metrics), registered like any feature's."""

from __future__ import annotations

from django.urls import path, re_path, register_converter
from django.utils.translation import gettext_lazy as _

from ..admin_pages import Page, register
from ..tasks.compat import AVAILABLE as TASKS_AVAILABLE
from . import bulk, busy, dashboard, held, metrics, queues, sets, shard_select
from .queue_url import QueueNameConverter

register_converter(QueueNameConverter, "wurk_queue")

POST = ("GET", "HEAD", "POST")


def _dashboard_urls(admin):
    info = admin.opts.app_label, admin.opts.model_name
    return [
        path("", admin.wrap(dashboard.index), name=f"{info[0]}_{info[1]}_changelist"),
        path("stats.json", admin.api(dashboard.stats_json, token=True), name="wurk_stats"),
        path("stats/queues.json", admin.api(dashboard.stats_queues, token=True), name="wurk_stats_queues"),
        path("prometheus", admin.api(dashboard.prometheus, token=True), name="wurk_prometheus"),
    ]


def _busy_urls(admin):
    return [path("busy/", admin.wrap(busy.index, methods=POST), name="wurk_busy")]


def _held_urls(admin):
    return [path("held/", admin.wrap(held.index, methods=POST), name="wurk_held")]


def _queues_urls(admin):
    w = admin.wrap
    return [
        path("queues/", w(queues.index), name="wurk_queues"),
        path("queues/<wurk_queue:name>/", w(queues.detail), name="wurk_queue"),
        path("queues/<wurk_queue:name>/action/", w(queues.action, methods=("POST",)), name="wurk_queue_action"),
        path("queues/<wurk_queue:name>/delete/", w(queues.delete_job, methods=("POST",)), name="wurk_queue_delete"),
    ]


def _sets_urls(admin):
    w = admin.wrap
    kinds = "|".join(sets.KINDS)
    return [
        re_path(rf"^(?P<kind>{kinds})/$", w(sets.index, methods=POST), name="wurk_set"),
        re_path(rf"^(?P<kind>{kinds})/all/(?P<action>[a-z_]+)/$", w(sets.all_action, methods=POST),
                name="wurk_set_all"),
        re_path(rf"^(?P<kind>{kinds})/job/(?P<key>[^/]+)/$", w(sets.detail, methods=POST), name="wurk_set_job"),
        re_path(r"^bulk/(?P<token>[0-9a-f]+)/$", w(bulk.progress, methods=POST), name="wurk_bulk"),
    ]


def _metrics_urls(admin):
    return [
        path("metrics/", admin.wrap(metrics.index), name="wurk_metrics"),
        path("metrics/<path:klass>/", admin.wrap(metrics.detail), name="wurk_metrics_job"),
    ]


def _tasks_urls(admin):
    from . import task_results  # needs django.tasks or the backport (tasks.compat)

    return [
        path("tasks/", admin.wrap(task_results.index), name="wurk_tasks"),
        path("tasks/<str:result_id>/", admin.wrap(task_results.detail), name="wurk_task"),
    ]


def _shard_urls(admin):
    return [path("shard/", admin.wrap(shard_select.select, methods=("POST",), changes_jobs=False),
                 name="wurk_shard")]


def _none(admin):
    return []


register(Page("dashboard", _("Dashboard"), "wurk_django_dashboard_changelist", _dashboard_urls, 10))
register(Page("busy", _("Busy"), "wurk_busy", _busy_urls, 20))
register(Page("queues", _("Queues"), "wurk_queues", _queues_urls, 30))
# No tab (a tab needs an admin index entry, a model): the Busy page links to it.
register(Page("held", _("Held"), "wurk_held", _held_urls, 25, tab=False))
register(Page("scheduled", _("Scheduled"), "wurk_set", _sets_urls, 40, url_kwargs={"kind": "scheduled"}))
register(Page("retries", _("Retries"), "wurk_set", _none, 50, url_kwargs={"kind": "retries"}))
register(Page("dead", _("Dead"), "wurk_set", _none, 60, url_kwargs={"kind": "dead"}))
register(Page("metrics", _("Metrics"), "wurk_metrics", _metrics_urls, 70))
if TASKS_AVAILABLE:
    register(Page("tasks", _("Tasks"), "wurk_tasks", _tasks_urls, 130))
register(Page("shard", _("Redis shard"), "wurk_shard", _shard_urls, 1000, tab=False))
