"""The Workflows admin pages (issue 27 item 1): the list, the graph picture, the JSON, retry and cancel."""

from __future__ import annotations

import re

import pytest

from tests.admin.conftest import BASE, make_user
from tests.jobsapp.workflow_jobs import Add, FailUntilFlag, Record
from tests.workflow.conftest import ran
from wurk_django.workflow import Flow, Workflow, chain, group, keys
from wurk_django.workflow.graph import DRAW_LIMIT

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, db):
    client.force_login(make_user("admin", superuser=True))
    return client


def _picture(body: str) -> str:
    start = body.index('class="wurk-wf-graph"')
    return body[start:body.index("</svg>", start)]


def _diamond(description: str = "diamond <b>") -> Workflow:
    flow = Flow(description)
    flow.step("fetch", Record.s("fetch"))
    flow.step("left", Record.s("left"), after=["fetch"])
    flow.step("right", FailUntilFlag.si("right"), after=["fetch"])
    flow.step("merge", Record.s("merge"), after=["left", "right"])
    return flow.run()


def test_list_and_detail_show_the_workflow_as_an_svg_graph(admin_client, redis_db, work):
    wf = _diamond()
    work()
    listing = admin_client.get(BASE + "workflows/")
    body = listing.content.decode()
    assert listing.status_code == 200 and wf.id in body
    assert "diamond &lt;b&gt;" in body and ">Workflows</a>" in body
    page = admin_client.get(BASE + f"workflows/{wf.id}/")
    body = page.content.decode()
    assert page.status_code == 200
    svg = _picture(body)
    # One box per step, coloured by state; an arrow per dependency.
    states = {name: state for state, name in re.findall(r'data-state="(\w+)" data-step="([\w-]+)"', svg)}
    assert states == {"fetch": "succeeded", "left": "succeeded", "right": "failed", "merge": "waiting"}
    assert svg.count("marker-end=") == 4
    # Levels: fetch in the first column, left and right in the second, merge in the third.
    xs = {name: int(x) for name, x in re.findall(r'data-step="([\w-]+)"><title>[^<]*</title><rect x="(\d+)"', svg)}
    assert xs["fetch"] < xs["left"] == xs["right"] < xs["merge"]
    assert "RuntimeError: right is broken" in body  # in the table and the box's title


def test_retry_button_runs_the_failed_step_and_the_workflow_goes_on(admin_client, redis_db, work):
    wf = _diamond()
    work()
    assert wf.state == "failed"
    redis_db.set("test:wf:fixed", 1)
    response = admin_client.post(BASE + f"workflows/{wf.id}/", {"action": "retry", "step": "right"})
    assert response.status_code == 302
    work()
    assert wf.state == "succeeded"
    assert ran(redis_db)[-1] == "['left', 'right']|merge"


def test_cancel_button_and_json(admin_client, redis_db, work):
    wf = chain(Add.s(1), Add.s(2)).run("to cancel")
    response = admin_client.post(BASE + f"workflows/{wf.id}/", {"action": "cancel"})
    assert response.status_code == 302 and wf.state == "cancelled"
    data = admin_client.get(BASE + f"workflows/{wf.id}.json").json()
    assert data["state"] == "cancelled" and [s["state"] for s in data["steps"]] == ["cancelled", "cancelled"]
    assert admin_client.get(BASE + "workflows.json").json()["workflows"][0]["id"] == wf.id
    assert admin_client.get(BASE + "workflows/nope.json").status_code == 404
    assert admin_client.get(BASE + "workflows/nope/").status_code == 404


def test_a_big_workflow_is_drawn_one_box_per_level(admin_client, redis_db):
    wf = group(*[Add.s(i) for i in range(DRAW_LIMIT + 1)]).run()
    body = admin_client.get(BASE + f"workflows/{wf.id}/").content.decode()
    svg = _picture(body)
    assert svg.count('class="wurk-wf-level"') == 1 and f"level 0: {DRAW_LIMIT + 1} steps" in svg


@pytest.mark.parametrize("created_at", ["1764493577123", "yesterday"])  # in ms, not s; no number at all
def test_one_malformed_workflow_shows_as_unreadable_and_the_list_still_renders(admin_client, redis_db, created_at):
    good, bad = _diamond("fine"), _diamond("broken")  # issue 45 item 3
    key = keys.workflow(bad.id)
    redis_db.hset(key, "created_at", created_at)
    listing = admin_client.get(BASE + "workflows/")
    body = listing.content.decode()
    assert listing.status_code == 200
    assert f'href="{BASE}workflows/{good.id}/"' in body  # the good one as ever
    row = body[body.index(f'data-workflow="{bad.id}"'):]
    row = row[:row.index("</tr>")]
    assert "wurk-unreadable" in body and "unreadable" in row and key in row
