"""Actions that lose or end jobs read as what they do, stand apart and ask first (issue 45 item 3):
"Delete", "Cancel" and "Kill" were adjacent red buttons whose meanings overlap."""

from __future__ import annotations

import re

import pytest

from wurk_django import payload

from .conftest import BASE, add_to_set, enqueue, failed, heartbeat, job

pytestmark = pytest.mark.django_db

#: The actions that lose a job or end one, by their ``value``.
DESTRUCTIVE = {"delete", "kill", "cancel", "clear", "stop", "stop_job", "invalidate"}
#: The labels that said too little: which "Delete"? "Cancel" what?
VAGUE = {"Delete", "Kill", "Cancel", "Clear", "Delete all", "Kill all"}


def buttons(html: str) -> list[tuple[str, str]]:
    """Every ``<button ...>label</button>`` of the Wurk part of the page, as (opening tag, label)."""
    root = html[html.index('id="wurk-root"'):]
    return [(tag, label.strip()) for tag, label in re.findall(r"(<button\b[^>]*>)(.*?)</button>", root, re.S)]


def value(tag: str) -> str | None:
    found = re.search(r'value="([^"]*)"', tag)
    return found[1] if found else None


def check_page(html: str, where: str) -> list[str]:
    """Each destructive button asks first; only the ones that erase jobs are red; no vague label."""
    problems = []
    for tag, label in buttons(html):
        action = value(tag)
        red = "wurk-danger" in tag
        if label in VAGUE:
            problems.append(f"{where}: a button reads only {label!r}")
        if (action in DESTRUCTIVE or red) and 'data-confirm="' not in tag:
            problems.append(f"{where}: {label!r} runs without asking")
        if red and label in ("Move to Dead", "Move all to Dead", "Revoke"):
            problems.append(f"{where}: {label!r} is red, yet the job can still be retried from Dead")
    return problems


def test_every_destructive_button_is_labelled_by_its_effect_and_asks_first(admin_client, redis_db):
    from tests.jobsapp.workflow_jobs import Add
    from wurk_django.batch import Batch
    from wurk_django.workflow import chain

    enqueue(redis_db, job("ReportJob"))
    heartbeat(redis_db, busy=1, work={"t1x": job("ReportJob")})
    retry_at = add_to_set(redis_db, "retry", failed("MailJob", jid="r" * 24))
    scheduled_at = add_to_set(redis_db, "schedule", job("ReportJob", jid="s" * 24))
    add_to_set(redis_db, "dead", failed("MailJob"))
    batch = Batch()
    with batch.jobs():
        from tests.jobsapp.jobs import RecordJob

        RecordJob.perform_async("in a batch")
    workflow = chain(Add.s(1), Add.s(2)).run()
    pages = ["busy/", "queues/", "queues/default/", "scheduled/", "retries/", "dead/",
             f"retries/job/{payload.score(retry_at)}-{'r' * 24}/", f"scheduled/job/{payload.score(scheduled_at)}-{'s' * 24}/",
             f"batches/{batch.bid}/", f"workflows/{workflow.id}/"]
    problems = []
    for path in pages:
        response = admin_client.get(BASE + path)
        assert response.status_code == 200, path
        problems += check_page(response.content.decode(), path)
    assert not problems, "\n".join(problems)

    # The retry set's job page: the safe actions first, then, apart, the three that end the job.
    html = admin_client.get(BASE + pages[6]).content.decode()
    apart = html[html.index('class="wurk-destructive"'):]
    apart = apart[:apart.index("</span>")]
    assert [label for _tag, label in buttons('id="wurk-root"' + apart)] == ["Delete for good", "Move to Dead", "Revoke"]
    assert "Retry now" not in apart
    # The Retries list: "Move all to Dead" leads to a confirmation page that changes nothing.
    html = admin_client.get(BASE + "retries/").content.decode()
    assert "Delete all for good" in html and "Move all to Dead" in html
    confirm = admin_client.get(BASE + "retries/all/kill/").content.decode()
    assert "Yes: Move all to Dead" in confirm and redis_db.zcard("retry") == 1


def test_the_check_above_can_fail():
    # A page as it was before issue 45: adjacent red Delete and Kill, Kill without a question.
    before = ('<div id="wurk-root"><button type="submit" name="action" value="delete" class="button wurk-danger">'
              'Delete</button><button type="submit" name="action" value="kill" class="button wurk-danger">Kill</button>')
    assert len(check_page(before, "old")) == 4
