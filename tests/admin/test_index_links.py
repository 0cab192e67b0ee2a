"""The admin index lists every Wurk page, not only "Dashboard" (issue 29 item 7)."""

from __future__ import annotations

import re

import django

from .conftest import BASE, make_user

PAGES = {"busy": "busy/", "queues": "queues/", "scheduled": "scheduled/", "retries": "retries/", "dead": "dead/",
         "metrics": "metrics/", "batches": "batches/", "workflows": "workflows/", "limits": "limits/", "periodic": "periodic/",
         "policies": "policies/"}


def test_the_index_links_every_page(admin_client):
    html = admin_client.get("/admin/").content.decode()
    for model in ("busypage", "queuespage", "deadpage", "metricspage", "batchespage", "workflowspage", "periodicpage",
                  "policiespage"):
        assert f'href="/admin/wurk_django/{model}/"' in html, model
    assert f'href="{BASE}"' in html


def test_each_entry_leads_to_its_page(admin_client):
    """CORE-260: the Web UI is Django pages rendered on the server, inside the admin: each
    section of the spec's §6 is one page, served as HTML (what each page shows is checked
    under its own ID, CORE-190..201)."""
    for key, suffix in PAGES.items():
        response = admin_client.get(f"/admin/wurk_django/{key}page/")
        assert response.status_code == 302, key
        assert response["Location"] == BASE + suffix, key
        page = admin_client.get(response["Location"])
        assert page.status_code == 200, key
        assert page["Content-Type"].startswith("text/html") and b'id="nav-sidebar"' in page.content, key


def test_staff_without_the_view_permission_sees_no_entry(client, db):
    client.force_login(make_user("plain", staff=True))
    html = client.get("/admin/").content.decode()
    assert "busypage" not in html and "dashboard/" not in html
    assert client.get("/admin/wurk_django/busypage/").status_code == 403


def test_a_viewer_sees_the_entries(client, viewer):
    client.force_login(viewer)
    assert 'href="/admin/wurk_django/deadpage/"' in client.get("/admin/").content.decode()


def test_the_sidebar_marks_the_current_page_only(admin_client):
    # Issue 45 item 2: every Wurk page is under the dashboard's URL, and Django marks an entry
    # current when its URL is in the path: "Dashboard" read as current on all of them.
    for key, suffix in [("dashboard", ""), *PAGES.items(), ("retries", "retries/?page=2")]:
        html = admin_client.get(BASE + suffix).content.decode()
        sidebar = html[html.index('id="nav-sidebar"'):]
        current = re.findall(r'class="model-(\w+) current-model"', sidebar)
        assert current == [f"{key}page" if key != "dashboard" else "dashboard"], (suffix, current)
        # Each entry leads straight to its page, no redirect.
        assert f'href="{BASE}workflows/"' in sidebar


def test_breadcrumbs_use_this_djangos_markup(admin_client):
    html = admin_client.get(BASE + "busy/").content.decode()
    if django.VERSION >= (6, 1):  # 6.1 styles ol.breadcrumbs, 5.2 and 6.0 div.breadcrumbs
        assert '<ol class="breadcrumbs">' in html and '<div class="breadcrumbs">' not in html
    else:
        assert '<div class="breadcrumbs">' in html and '<ol class="breadcrumbs">' not in html
