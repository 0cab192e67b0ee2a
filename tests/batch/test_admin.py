"""The Batches admin pages and the status JSON (PRO-262, PRO-360; DJ-050..DJ-056 rules)."""

from __future__ import annotations

import pytest
from django.middleware.csrf import get_token
from django.test import Client

from tests.admin.conftest import BASE, make_user
from tests.batch.conftest import promote_retries, run_jobs
from tests.jobsapp.batch_jobs import AlwaysFails, Callbacks, FailOnce, Mark
from wurk_django.batch import Batch, Status

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, db):
    client.force_login(make_user("admin", superuser=True))
    return client


def _batch(description: str, jobs: int = 2, tags=(), cls=Mark) -> Batch:
    batch = Batch()
    batch.description = description
    batch.tags = list(tags)
    batch.on("success", Callbacks, {"tag": description})
    with batch.jobs():
        for i in range(jobs):
            cls.perform_async(i)
    return batch


def test_batches_page_lists_newest_first_with_progress(admin_client, redis_db):
    old = _batch("Old import <b>", 4)
    new = _batch("New import", 2, tags=["nightly"])
    run_jobs(redis_db, limit=2)  # two of the old batch's jobs (the list is FIFO)
    response = admin_client.get(BASE + "batches/")
    body = response.content.decode()
    assert response.status_code == 200
    assert body.index(new.bid) < body.index(old.bid)
    assert "Old import &lt;b&gt;" in body and "<b>" not in body.split("Old import")[1][:10]
    rows = {r["bid"]: r for r in response.context["page"].items}
    assert rows[old.bid]["total"] == 4 and rows[old.bid]["pending"] == 2 and rows[old.bid]["percent"] == 50
    assert rows[new.bid]["state"] == "running" and rows[new.bid]["tags"] == ["nightly"]
    assert 'value="50"' in body
    redis_db.delete(f"b-{new.bid}")  # its keys expired; the index keeps the bid for 30 days
    rows = {r["bid"]: r for r in admin_client.get(BASE + "batches/").context["page"].items}
    assert rows[new.bid]["state"] == "expired" and rows[old.bid]["state"] == "running"
    assert '>Batches</a>' in body  # the tab


def test_batches_paging_search_tags_and_dead(admin_client, redis_db):
    made = [_batch(f"Report {i}", 1) for i in range(5)]
    page2 = admin_client.get(BASE + "batches/?count=2&page=2").context["page"]
    assert [r["bid"] for r in page2.items] == [made[2].bid, made[1].bid] and page2.total == 5
    found = admin_client.get(BASE + "batches/?q=report 3")
    assert [r["bid"] for r in found.context["page"].items] == [made[3].bid]
    assert "Searched the newest 5 batches" in found.content.decode()
    assert [r["bid"] for r in admin_client.get(BASE + f"batches/?q={made[0].bid[:10]}").context["page"].items] \
        == [made[0].bid]
    tagged = _batch("Tagged", 1, tags=["t1"])
    assert [r["bid"] for r in admin_client.get(BASE + "batches/?tag=t1").context["page"].items] == [tagged.bid]
    dying = _batch("Dying", 1, cls=AlwaysFails)
    run_jobs(redis_db)
    dead = admin_client.get(BASE + "batches/?kind=dead").context["page"].items
    assert [r["bid"] for r in dead] == [dying.bid] and dead[0]["state"] == "dead"


def test_batch_page_shows_jobs_failures_children_and_callbacks(admin_client, redis_db):
    parent = Batch()
    parent.description = "Parent"
    parent.on("success", Callbacks, {"tag": "p"})
    parent.on("complete", Callbacks)
    with parent.jobs():
        failing = FailOnce.perform_async("adm")
        dying = AlwaysFails.perform_async("adm")
        waiting = Mark.perform_in(3600, "later")
        child = Batch()
        child.description = "Child"
        with child.jobs():
            Mark.perform_async("c")
    run_jobs(redis_db)
    response = admin_client.get(BASE + f"batches/{parent.bid}/")
    body = response.content.decode()
    assert response.status_code == 200
    assert waiting in response.context["pending_jids"] and failing in response.context["pending_jids"]
    assert [j["jid"] for j in response.context["retries"]] == [failing]
    assert [j["jid"] for j in response.context["dead_jobs"]] == [dying]
    # The failures table and the records it was drawn from go with the assertion, so a failure
    # says which part was missing.
    shown = body[body.find('id="wurk-batch-failures"'):][:1500]
    seen = [(j["jid"], j.get("error_class"), j.get("error_message"))
            for j in (*response.context["retries"], *response.context["dead_jobs"])]
    assert "RuntimeError: adm fails once" in body and "RuntimeError: adm always fails" in body, (seen, shown)
    dead = response.context["dead_jobs"][0]
    assert (dead["error_class"], dead["error_message"]) == ("RuntimeError", "adm always fails"), seen
    assert [c["bid"] for c in response.context["children"]] == [child.bid]
    assert response.context["children"][0]["state"] == "success"
    events = {c["event"]: c for c in response.context["callbacks"]}
    assert events["complete"]["fired_at"] is None and events["success"]["fired_at"] is None
    promote_retries(redis_db)  # the retry works, the scheduled job runs; the dead one stays dead
    run_jobs(redis_db)
    events = {c["event"]: c for c in admin_client.get(BASE + f"batches/{parent.bid}/").context["callbacks"]}
    assert events["complete"]["fired_at"] is not None and events["success"]["fired_at"] is None
    assert f'data-batch-status-url="{BASE}batches/{parent.bid}.json"' in body
    child_page = admin_client.get(BASE + f"batches/{child.bid}/").content.decode()
    assert f'href="{BASE}batches/{parent.bid}/"' in child_page
    assert admin_client.get(BASE + "batches/nosuchbatch01/").status_code == 404
    assert admin_client.get(BASE + "batches/bad%20bid/").status_code == 404


def test_status_json_for_polling(admin_client, redis_db, settings):  # PRO-262
    batch = _batch("Poll", 3)
    data = admin_client.get(BASE + f"batches/{batch.bid}.json").json()
    assert data["bid"] == batch.bid and data["total"] == 3 and data["pending"] == 3 and data["complete"] is False
    run_jobs(redis_db)
    data = admin_client.get(BASE + f"batches/{batch.bid}.json").json()
    assert data["pending"] == 0 and data["complete"] is True and data["success_at"]
    assert admin_client.get(BASE + "batches/nosuchbatch01.json").status_code == 404
    listing = admin_client.get(BASE + "batches.json").json()
    assert listing["size"] == 1 and listing["batches"][0]["bid"] == batch.bid
    client = Client()
    assert client.get(BASE + f"batches/{batch.bid}.json").status_code == 401  # anonymous
    # The API token opens the documented read-outs only: a batch's JSON names its failed jobs
    # (issue 43 item 4), so it needs a staff session like the pages.
    settings.WURK = {**settings.WURK, "API_TOKEN": "s3cret-token-0123456789"}
    refused = client.get(BASE + f"batches/{batch.bid}.json", HTTP_AUTHORIZATION="Bearer s3cret-token-0123456789")
    assert refused.status_code == 401 and "total" not in refused.json()


def test_permissions_csrf_and_read_only(client, redis_db, settings):
    batch = _batch("Guarded", 1)
    page = BASE + f"batches/{batch.bid}/"
    assert client.get(BASE + "batches/").status_code == 302  # anonymous: to the login page
    plain = make_user("plain")
    client.force_login(plain)
    assert client.get(page).status_code == 403
    viewer = make_user("viewer", perms=("view_dashboard",))
    client.force_login(viewer)
    body = client.get(page).content.decode()
    assert 'value="invalidate"' not in body
    assert client.post(page, {"action": "invalidate"}).status_code == 403
    assert Batch(batch.bid).valid
    manager = make_user("manager", perms=("view_dashboard", "manage_jobs"))
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(manager)
    refused = csrf_client.post(page, {"action": "invalidate"})
    assert refused.status_code == 403 and b"CSRF" in refused.content and Batch(batch.bid).valid
    token = get_token(csrf_client.get(page).wsgi_request)
    assert 'value="invalidate"' in csrf_client.get(page).content.decode()
    settings.WURK = {**settings.WURK, "ADMIN_READ_ONLY": True}
    assert csrf_client.post(page, {"action": "invalidate", "csrfmiddlewaretoken": token}).status_code == 403
    assert Batch(batch.bid).valid
    settings.WURK = {**settings.WURK, "ADMIN_READ_ONLY": False}
    done = csrf_client.post(page, {"action": "invalidate", "csrfmiddlewaretoken": token})
    assert done.status_code == 302 and not Batch(batch.bid).valid
    gone = csrf_client.post(page, {"action": "delete", "csrfmiddlewaretoken": token})
    assert gone.status_code == 302 and gone["Location"].endswith("/batches/")
    assert not Status(batch.bid).exists


def test_batch_status_middleware(redis_db, rf):  # PRO-262
    from django.http import HttpResponse

    from wurk_django.batch.web import BatchStatusMiddleware

    batch = _batch("Public", 2)
    middleware = BatchStatusMiddleware(lambda request: HttpResponse("passed through"))
    response = middleware(rf.get(f"/batch_status/{batch.bid}.json"))
    assert response.status_code == 200 and response["Cache-Control"] == "private, no-store"
    import json

    assert json.loads(response.content)["total"] == 2
    assert middleware(rf.get("/batch_status/nosuchbatch01.json")).status_code == 404
    assert middleware(rf.get("/other/")).content == b"passed through"
    assert middleware(rf.post(f"/batch_status/{batch.bid}.json")).content == b"passed through"


def test_failure_lookup_is_bounded(admin_client, redis_db, monkeypatch):
    from tests.admin.conftest import add_to_set, failed
    from wurk_django.batch import admin as batch_admin

    pipe = redis_db.pipeline()
    for i in range(2000):
        add_to_set(pipe, "retry", failed(jid=f"{i:024x}"))
    pipe.execute()
    batch = Batch()
    with batch.jobs():
        FailOnce.perform_async("bounded-1")
        FailOnce.perform_async("bounded-2")
    run_jobs(redis_db)
    page = BASE + f"batches/{batch.bid}/"
    found = admin_client.get(page).context["retries"]
    assert len(found) == 2 and sorted(j["jid"] for j in found) == Status(batch.bid).failed_jids
    monkeypatch.setattr(batch_admin, "SCAN_CALLS", 1)
    monkeypatch.setattr(batch_admin, "SCAN_COUNT", 5)
    response = admin_client.get(page)
    assert response.context["failures_complete"] is False
    assert "not every one was looked up" in response.content.decode()


def test_batch_page_shows_each_callback_jobs_real_state(admin_client, redis_db):
    """Issue 28 item 8: a fired callback is not just "Fired": its job is shown queued,
    retrying (with its error, and in the Failures table), dead or done."""
    from tests.jobsapp.batch_jobs import Broken

    batch = Batch()
    batch.on("success", Broken)  # its on_success raises
    batch.on("complete", Callbacks)
    with batch.jobs():
        Mark.perform_async("x")
    run_jobs(redis_db, limit=1)  # the batch's job: both events fire, their jobs are queued
    rows = {c["event"]: c for c in admin_client.get(BASE + f"batches/{batch.bid}/").context["callbacks"]}
    assert rows["success"]["state"] == rows["complete"]["state"] == "queued"
    run_jobs(redis_db)  # the callbacks run: one fails and waits in the retry set
    response = admin_client.get(BASE + f"batches/{batch.bid}/")
    body = response.content.decode()
    rows = {c["event"]: c for c in response.context["callbacks"]}
    assert rows["complete"]["state"] == "done"
    assert rows["success"]["state"] == "retrying" and "callback body fails" in rows["success"]["error"]
    assert [j["jid"] for j in response.context["retries"]] == [rows["success"]["jid"]]
    assert "No failure." not in body and 'data-callback-state="retrying"' in body
    assert response.context["failed_count"] == 1
    redis_db.zrem("retry", *redis_db.zrange("retry", 0, -1))
    rows = {c["event"]: c for c in admin_client.get(BASE + f"batches/{batch.bid}/").context["callbacks"]}
    assert rows["success"]["state"] == "done"  # gone from every set: nothing left of it


def test_batch_page_masks_encrypted_arguments(admin_client, redis_db):
    """Issue 28 item 8: a failed encrypted job's sealed argument is masked, as on the
    other pages, never shown as its iv/ct envelope."""
    import base64

    from tests.jobsapp.batch_jobs import SecretFails
    from tests.support import wurk_settings
    from wurk_django import encryption

    encryption.disable()
    with wurk_settings(ENCRYPTION={"ACTIVE_VERSION": 1, "KEYS": {1: base64.b64encode(bytes(range(32))).decode()}}):
        batch = Batch()
        with batch.jobs():
            SecretFails.perform_async("visible", {"card": "4242424242424242"})
        run_jobs(redis_db)
        body = admin_client.get(BASE + f"batches/{batch.bid}/").content.decode()
    encryption.disable()
    assert "visible" in body and "[encrypted data]" in body
    # The whole card number: a short run of its digits can turn up in a timestamp of the page.
    assert "4242424242424242" not in body and '"iv"' not in body and "&quot;iv&quot;" not in body


def test_a_batch_with_created_at_in_ms_is_an_unreadable_row_not_a_500(admin_client, redis_db):  # issue 45 item 3
    from wurk_django import keys

    good, bad = _batch("fine"), _batch("broken")
    redis_db.hset(keys.batch(bad.bid), "created_at", "1764493577123")  # ms, not s: out of datetime's range
    response = admin_client.get(BASE + "batches/")
    body = response.content.decode()
    assert response.status_code == 200
    assert f'data-bid="{good.bid}">' in body
    row = body[body.index(f'data-bid="{bad.bid}" class="wurk-unreadable"'):]
    row = row[:row.index("</tr>")]
    assert "unreadable" in row and keys.batch(bad.bid) in row


def _rows(body: str) -> dict[str, str]:
    """Each row of the Batches table by its bid."""
    import re

    table = body[body.index('id="wurk-batches"'):]
    table = table[:table.index("</table>")]
    return dict(re.findall(r'<tr data-bid="([^"]+)">(.*?)</tr>', table, re.S))


def test_workflow_steps_batches_are_hidden_until_asked_for_and_link_their_workflow(admin_client, redis_db):
    # Issue 45 item 3: a site using workflows had 54 of 56 rows of step batches.
    from tests.jobsapp.workflow_jobs import Add
    from wurk_django.workflow import chain

    mine = _batch("Nightly import", 1)
    wf = chain(Add.s(1), Add.s(2), Add.s(3)).run("three steps")
    steps = {step.name: step.bid for step in wf.steps()}
    assert len(steps) == 3

    body = admin_client.get(BASE + "batches/").content.decode()
    rows = _rows(body)
    assert set(rows) == {mine.bid}  # only the batch made by hand
    assert "3 batches of workflow steps are hidden." in body and "?steps=1" in body

    body = admin_client.get(BASE + "batches/?steps=1").content.decode()
    rows = _rows(body)
    assert set(rows) == {mine.bid, *steps.values()}
    for name, bid in steps.items():
        assert f'href="{BASE}workflows/{wf.id}/"' in rows[bid], name
        assert f"Workflow {wf.id}, step {name}" in rows[bid]
    # The first step's job is queued: its batch runs. The others wait for it: not started, no bar.
    first, *later = wf.steps()
    assert 'data-state="running"' in rows[first.bid] and "<progress" in rows[first.bid]
    for step in later:
        assert 'data-state="not_started"' in rows[step.bid] and ">not started<" in rows[step.bid]
        assert "<progress" not in rows[step.bid] and "running" not in rows[step.bid]

    # A step's batch page names its workflow and step too.
    page = admin_client.get(BASE + f"batches/{later[0].bid}/").content.decode()
    assert f'href="{BASE}workflows/{wf.id}/"' in page and ">not started<" in page

    # A search finds step batches only when they are shown.
    assert wf.id not in admin_client.get(BASE + "batches/?q=step").content.decode()
    assert set(_rows(admin_client.get(BASE + "batches/?q=step&steps=1").content.decode())) == set(steps.values())
