"""An editor's session on the Wagtail test site, then its search index and reference index
as JSON: ``python -m tests.integrations.wagtail_scenario OUT.json`` with
``DJANGO_SETTINGS_MODULE=tests.integrations.wagtail_settings`` (tests/integrations/test_wagtail.py).

Every action runs in ``transaction.atomic()``, as Wagtail's admin views do, and enqueues
Wagtail's own tasks (search index, reference index, file clean-up). Between actions the
session waits until no task is left to run, as a person working at the admin's pace
gives a worker time to: the end state must not depend on a worker's speed.
"""

from __future__ import annotations

import io
import json
import sys
import time

import django


def _png(colour: tuple[int, int, int]) -> bytes:
    from PIL import Image as PILImage

    out = io.BytesIO()
    PILImage.new("RGB", (8, 8), colour).save(out, "PNG")
    return out.getvalue()


def _settle(timeout: float = 60.0) -> None:
    """Wait until every task pushed so far has ended (or failed an attempt) on the worker."""
    from django.conf import settings

    if "Immediate" in settings.TASKS["default"]["BACKEND"]:
        return
    from wurk_django import context
    from wurk_django.results import store

    redis = context.redis()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = [(store.read(redis, key.decode().removeprefix(store.PREFIX)) or {}).get("state")
                  for key in redis.scan_iter(match=store.PATTERN)]
        if not redis.llen("queue:default") and all(s in ("complete", "failed", "retrying") for s in states):
            return
        time.sleep(0.1)
    raise SystemExit(f"tasks still running after {timeout}s")


def _failures() -> dict[str, object]:
    from django.conf import settings

    if "Immediate" in settings.TASKS["default"]["BACKEND"]:
        return {"failed_tasks": 0, "dead": 0, "retry": 0, "tasks": None}
    from wurk_django import context
    from wurk_django.results import store

    redis = context.redis()
    states = [(store.read(redis, key.decode().removeprefix(store.PREFIX)) or {}) for key in
              redis.scan_iter(match=store.PATTERN)]
    bad = [f"{s.get('class')}: {s.get('state')} {[e.get('message') for e in s.get('errors') or []]}"
           for s in states if s.get("state") != "complete" or s.get("errors")]
    return {"failed_tasks": len(bad), "failures": bad, "dead": redis.zcard("dead"),
            "retry": redis.zcard("retry"), "tasks": len(states)}


def run() -> dict[str, object]:
    from django.core.files.images import ImageFile
    from django.core.management import call_command
    from django.db import transaction
    from wagtail.images import get_image_model
    from wagtail.models import Page, ReferenceIndex
    from wagtail.search.models import IndexEntry

    from tests.integrations.wagtail_site.models import ArticlePage

    call_command("migrate", verbosity=0, interactive=False)
    Image = get_image_model()
    home = Page.objects.get(depth=2)

    def image(title: str, colour: tuple[int, int, int]) -> int:
        with transaction.atomic():
            made = Image(title=title, file=ImageFile(io.BytesIO(_png(colour)), name=f"{title[:8]}.png"))
            made.save()
        _settle()
        return made.pk

    def article(title: str, slug: str, body: str, image_id: int | None, publish: bool = True) -> int:
        with transaction.atomic():
            page = ArticlePage(title=title, slug=slug, body=body, image_id=image_id, live=publish)
            home.refresh_from_db()
            home.add_child(instance=page)
            revision = page.save_revision()
            if publish:
                revision.publish()
        _settle()
        return page.pk

    def edit(pk: int, **fields: object) -> None:
        with transaction.atomic():
            page = ArticlePage.objects.get(pk=pk)
            for name, value in fields.items():
                setattr(page, name, value)
            page.save_revision().publish()
        _settle()

    sunset = image("Sunset over harbour", (250, 120, 0))
    lake = image("Mountain lake", (0, 90, 200))
    harbour = article("Harbour news", "harbour", "<p>Boats in the harbour.</p>", sunset)
    report = article("Lake report", "lake",
                     f'<p>See <a linktype="page" id="{harbour}">the harbour</a>.</p>', sunset)
    edit(harbour, body="<p>Ferries in the harbour.</p>")
    # The lost rename, through the admin's own image edit view: the new title must be searchable.
    from django.contrib.auth import get_user_model
    from django.test import Client

    editor = get_user_model().objects.create_superuser("editor", "editor@example.com", "pw")
    browser = Client()
    browser.force_login(editor)
    renamed = Image.objects.get(pk=sunset)
    answer = browser.post(f"/cms/images/{sunset}/", {
        "title": "Sunrise over harbour", "collection": renamed.collection_id, "tags": "",
        "focal_point_x": "", "focal_point_y": "", "focal_point_width": "", "focal_point_height": ""})
    if answer.status_code != 302:
        raise SystemExit(f"the admin refused the rename: {answer.status_code} {answer.content[:2000]!r}")
    _settle()
    edit(report, title="Lake chronicle")
    article("Draft notes", "draft", "<p>Unpublished thoughts.</p>", None, publish=False)
    with transaction.atomic():  # the deleted page, whose tasks were left retrying
        Page.objects.get(pk=harbour).delete()
    _settle()
    with transaction.atomic():
        Image.objects.get(pk=lake).delete()
    _settle()

    searches = {
        term: {"pages": sorted(p.title for p in Page.objects.search(term)),
               "images": sorted(i.title for i in Image.objects.search(term))}
        for term in ("harbour", "sunrise", "sunset", "lake", "chronicle", "report", "ferries", "boats", "draft")
    }
    # Wagtail's API searches the same index.
    api = {term: sorted(item["title"] for item in browser.get("/api/v2/pages/", {"search": term}).json()["items"])
           for term in searches}
    index = sorted([entry.content_type.model, str(entry.object_id), entry.title, entry.body]
                   for entry in IndexEntry.objects.all())
    references = sorted([ref.base_content_type.model, str(ref.object_id), ref.to_content_type.model,
                         str(ref.to_object_id), ref.model_path] for ref in ReferenceIndex.objects.all())
    return {"searches": searches, "api": api, "index": index, "references": references, **_failures()}


if __name__ == "__main__":
    django.setup()
    result = run()
    with open(sys.argv[1], "w") as out:
        json.dump(result, out, indent=1, sort_keys=True)
