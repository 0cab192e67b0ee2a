"""Every URL of the Wurk admin, with every kind of credential, against the access table in
docs/admin.md (issue 43 item 4; DJ-050..DJ-052, DJ-056).

The URLs come from Django's resolver, not from a list kept here: a page or JSON endpoint
added by a feature without a row in the table fails :func:`test_every_url_has_a_row`.
The table is the contract: this test parses it and compares each cell with what the
view answers, for a GET (and a POST with a valid CSRF token where the view takes one),
on data made here so every path parameter names something that exists.
"""

from __future__ import annotations

import fnmatch
import gzip
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils.crypto import get_random_string

from wurk_django import payload
from wurk_django.tasks.compat import AVAILABLE as TASKS_AVAILABLE

from .conftest import add_to_set, enqueue, failed, heartbeat, job, make_user

pytestmark = pytest.mark.django_db

DOC = Path(__file__).resolve().parents[2] / "docs" / "admin.md"
PREFIX = "admin/wurk_django/"
TOKEN = "s3cret-token-0123456789"
KINDS = ("none", "token", "staff", "viewer", "manager", "superuser")
ALLOWED = re.compile(r"^(200|302)$")  # the view itself ran (a POST's redirect back included)


# -- the documented table ----------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    name: str  # URL name, may hold * (the index entries)
    path: str  # under admin/wurk_django/, parameters as <name>
    method: str
    cells: dict[str, str]  # credential kind -> "200", "302", "401", "403", "405" or "login"
    read_only: str  # what an allowed request gets with ADMIN_READ_ONLY: "same" or "403"


def documented() -> list[Row]:
    """The table after ``<!-- access-table -->`` in docs/admin.md."""
    text = DOC.read_text()
    start = text.index("<!-- access-table -->")
    lines = []
    for line in text[start:].splitlines()[1:]:
        if not line.strip():
            if lines:
                break
            continue
        lines.append(line)
    header = [cell.strip().strip("`") for cell in lines[0].strip("|").split("|")]
    assert header == ["URL name", "path", "method", *KINDS, "read-only"], header
    rows = []
    for line in lines[2:]:
        cells = [cell.strip().strip("`") for cell in line.strip("|").split("|")]
        name, route, method, *codes, read_only = cells
        rows.append(Row(name, route, method, dict(zip(KINDS, codes, strict=True)), read_only))
    return rows


# -- the URLs the resolver has -----------------------------------------------------------


def _readable(pattern: str) -> str:
    """``queues/<wurk_queue:name>/`` and ``^(?P<kind>a|b)/$`` both as ``<name>``/``<kind>``."""
    pattern = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"<\1>", pattern)
    pattern = re.sub(r"<(?:\w+:)?(\w+)>", r"<\1>", pattern)
    return pattern.replace("^", "").replace("$", "")


def resolved() -> list[tuple[str, str, Any]]:
    """(URL name, readable path under admin/wurk_django/, view) for every URL there."""
    found = []

    def walk(patterns, prefix: str) -> None:
        for entry in patterns:
            route = prefix + _readable(str(entry.pattern))
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, route)
            elif isinstance(entry, URLPattern) and route.startswith(PREFIX):
                found.append((entry.name, route[len(PREFIX):], entry.callback))

    walk(get_resolver().url_patterns, "")
    return found


def row_for(rows: list[Row], name: str, route: str, method: str) -> Row | None:
    matches = [r for r in rows if fnmatch.fnmatchcase(name, r.name) and fnmatch.fnmatchcase(route, r.path)
               and r.method == method]
    return matches[0] if len(matches) == 1 else None


def test_every_url_has_a_row():
    rows = documented()
    seen = set()
    missing = []
    for name, route, view in resolved():
        methods = getattr(view, "wurk_methods", None)
        assert methods is not None, f"{name} ({route}) is not wrapped by WurkAdmin.wrap/api"
        for method in [m for m in methods if m != "HEAD"]:
            row = row_for(rows, name, route, method)
            if row is None:
                missing.append(f"| `{name}` | `{route}` | {method} |")
            else:
                seen.add((row.name, row.path, row.method))
    assert not missing, "docs/admin.md's access table lacks:\n" + "\n".join(missing)
    unused = {(r.name, r.path, r.method) for r in rows} - seen
    unused = {key for key in unused if TASKS_AVAILABLE or "task" not in key[0]}
    assert not unused, f"rows for URLs that do not exist: {unused}"


def test_only_the_documented_read_outs_take_the_token():
    """The token opens stats.json, stats/queues.json and prometheus, nothing else."""
    taking = sorted(route for _, route, view in resolved() if getattr(view, "wurk_token", False))
    assert taking == ["dashboard/prometheus", "dashboard/stats.json", "dashboard/stats/queues.json"]


# -- data, so that every path parameter names something real -----------------------------


def _make_data(redis_db) -> dict[str, list[dict[str, str]]]:
    """The kwargs to reverse each URL with (a list: one request per entry)."""
    from tests.jobsapp.batch_jobs import Mark
    from tests.jobsapp.workflow_jobs import Record
    from wurk_django import periodic
    from wurk_django.api import bulk
    from wurk_django.batch import Batch
    from wurk_django.periodic import registration
    from wurk_django.profiling import store
    from wurk_django.workflow import Flow

    enqueue(redis_db, job(jid="q1"))
    keys = {}
    for kind, zset, item in (("scheduled", "schedule", job(jid="s1")), ("retries", "retry", failed(jid="r1")),
                             ("dead", "dead", failed(jid="d1"))):
        at = add_to_set(redis_db, zset, item)
        keys[kind] = f"{payload.score(at)}-{item['jid']}"
    heartbeat(redis_db)
    token = bulk.start("dead", "retry")
    batch = Batch()
    batch.description = "walked"
    with batch.jobs():
        Mark.perform_async(1)
    flow = Flow("walked")
    flow.step("one", Record.s("one"))
    workflow = flow.run()
    registration.forget_code_registrations()
    loop = periodic.register("0 4 * * *", "tests.jobsapp.jobs.RecordJob", args=["x"])
    jid = payload.new_jid()
    profile = {"meta": {"product": "Ruby/Vernier"}, "threads": []}
    store(redis_db, token="walk", jid=jid, job_type="HardJob", started_at=time.time(), elapsed=0.5,
          data=gzip.compress(json.dumps(profile).encode()))
    kwargs: dict[str, list[dict[str, str]]] = {
        "wurk_queue": [{"name": "default"}], "wurk_queue_action": [{"name": "default"}],
        "wurk_queue_delete": [{"name": "default"}],
        "wurk_set": [{"kind": k} for k in keys],
        "wurk_set_all": [{"kind": k, "action": "delete"} for k in keys],
        "wurk_set_job": [{"kind": k, "key": v} for k, v in keys.items()],
        "wurk_bulk": [{"token": token}],
        "wurk_metrics_job": [{"klass": "HardJob"}],
        "wurk_batch": [{"bid": batch.bid}], "wurk_batch_status": [{"bid": batch.bid}],
        "wurk_workflow": [{"wid": workflow.id}], "wurk_workflow_json": [{"wid": workflow.id}],
        "wurk_periodic_loop": [{"lid": loop.lid}],
        "wurk_profile": [{"key": f"walk-{jid}"}], "wurk_profile_data": [{"key": f"walk-{jid}"}],
    }
    from wurk_django.results import store as records

    tracked = payload.new_jid()  # a tracked job's status record (issue 47 item 2)
    records.write(redis_db, tracked, {"state": "running", "class": "HardJob", "progress": 40, "message": "m",
                                      "errors": [], "worker_ids": ["w1"], "enqueued_at": payload.now_ms()}, 3600)
    kwargs["wurk_status"] = kwargs["wurk_status_json"] = [{"jid": tracked}]
    if TASKS_AVAILABLE:
        from wurk_django.results import store

        result = payload.new_jid()
        store.write(redis_db, result, {
            "state": "complete", "class": "tests.tasks.sample.add", "task": {"queue_name": "default"},
            "args": [2, 40], "kwargs": {}, "errors": [], "worker_ids": ["w1"], "enqueued_at": payload.now_ms(),
            "started_at": payload.now_ms(), "finished_at": payload.now_ms(), "return_value": 42}, 3600)
        kwargs["wurk_task"] = [{"result_id": result}]
    return kwargs


@pytest.fixture
def walk_data(redis_db):
    from wurk_django.periodic import registration

    data = _make_data(redis_db)
    yield data
    registration.forget_code_registrations()


def _clients() -> dict[str, Client]:
    users = {"staff": make_user("w-staff"), "viewer": make_user("w-viewer", perms=("view_dashboard",)),
             "manager": make_user("w-manager", perms=("view_dashboard", "manage_jobs")),
             "superuser": make_user("w-super", superuser=True)}
    clients = {}
    for kind in KINDS:
        headers = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"} if kind == "token" else {}
        client = Client(enforce_csrf_checks=True, **headers)
        if kind in users:
            client.force_login(users[kind])
        # A CSRF cookie as a browser would hold, sent back as the form's token on every POST.
        client.cookies[settings.CSRF_COOKIE_NAME] = get_random_string(32)
        clients[kind] = client
    return clients


def _outcome(response) -> str:
    if response.status_code == 302 and response["Location"].startswith("/admin/login/"):
        return "login"
    return str(response.status_code)


def _request(client: Client, method: str, url: str) -> str:
    if method == "GET":
        return _outcome(client.get(url))
    return _outcome(client.post(url, {"csrfmiddlewaretoken": client.cookies[settings.CSRF_COOKIE_NAME].value}))


def _walk(walk_data, on_each=None) -> list[tuple[str, str, str, str, str]]:
    """(url, method, kind, documented, got) for every URL, method and credential: GETs
    first, then POSTs (an empty form: the access rules, not the actions, are under test)."""
    rows = documented()
    clients = _clients()
    plan = []
    for name, route, view in resolved():
        for method in [m for m in view.wurk_methods if m != "HEAD"]:
            row = row_for(rows, name, route, method)
            assert row is not None, f"no row for {name} {method}: see test_every_url_has_a_row"
            if "<" in route:
                assert name in walk_data, f"make data for {name} ({route}) in _make_data"
                urls = [reverse(f"admin:{name}", kwargs=kw) for kw in walk_data[name]]
            else:
                urls = [reverse(f"admin:{name}")]
            plan += [(method, url, row) for url in urls]
    results = []
    for method, url, row in sorted(plan, key=lambda p: p[0]):  # GET before POST
        for kind in KINDS:
            expected = on_each(row, kind) if on_each else row.cells[kind]
            results.append((url, method, kind, expected, _request(clients[kind], method, url)))
    return results


def _mismatches(results) -> list[str]:
    return [f"{method} {url} as {kind}: docs say {expected}, got {got}"
            for url, method, kind, expected, got in results if expected != got]


@pytest.fixture
def token_set(settings):
    settings.WURK = {**settings.WURK, "API_TOKEN": TOKEN}


def test_every_url_answers_every_credential_as_documented(walk_data, token_set):
    results = _walk(walk_data)
    assert len(results) > 200  # every URL, six credentials
    assert not _mismatches(results), "\n".join(_mismatches(results))


def test_read_only_mode_as_documented(walk_data, token_set, settings):
    settings.WURK = {**settings.WURK, "ADMIN_READ_ONLY": True}

    def expected(row: Row, kind: str) -> str:
        cell = row.cells[kind]
        return "403" if row.read_only == "403" and ALLOWED.match(cell) else cell

    results = _walk(walk_data, expected)
    assert not _mismatches(results), "\n".join(_mismatches(results))


CALLS: list[tuple[str, bool, bool]] = []


def refuse_all(request, method, path):
    CALLS.append((path, bool(getattr(request, "wurk_api_token", None)), request.user.is_authenticated))
    return False


def refuse_tokens(request, method, path):
    return not request.wurk_api_token


def test_admin_authorize_refuses_every_view_the_token_ones_too(walk_data, token_set, settings):
    """Whatever the view would have answered (200, a redirect back, a 404), a refusing hook
    makes it 403; the checks before it (login, permission, method) answer as before."""
    settings.WURK = {**settings.WURK, "ADMIN_AUTHORIZE": "tests.admin.test_access_table.refuse_all"}
    CALLS.clear()

    def expected(row: Row, kind: str) -> str:
        return "403" if ALLOWED.match(row.cells[kind]) else row.cells[kind]

    results = _walk(walk_data, expected)
    assert not _mismatches(results), "\n".join(_mismatches(results))
    # The hook saw the token's requests, told apart by request.wurk_api_token.
    assert any(by_token and not logged_in and path.endswith("/prometheus") for path, by_token, logged_in in CALLS)
    assert not any(by_token and logged_in for _, by_token, logged_in in CALLS)


def test_admin_authorize_can_refuse_the_token_alone(walk_data, token_set, settings, client):
    settings.WURK = {**settings.WURK, "ADMIN_AUTHORIZE": "tests.admin.test_access_table.refuse_tokens"}
    stats = reverse("admin:wurk_stats")
    assert client.get(stats, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 403
    client.force_login(make_user("hooked", perms=("view_dashboard",)))
    assert client.get(stats).status_code == 200
