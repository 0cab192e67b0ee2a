"""The admin index lists every Wurk page, not only "Dashboard" (issue 29 item 7)."""

from __future__ import annotations

from .conftest import BASE, make_user

PAGES = {"busy": "busy/", "queues": "queues/", "scheduled": "scheduled/", "retries": "retries/", "dead": "dead/",
         "metrics": "metrics/", "batches": "batches/", "limits": "limits/", "periodic": "periodic/"}


def test_the_index_links_every_page(admin_client):
    html = admin_client.get("/admin/").content.decode()
    for model in ("busypage", "queuespage", "deadpage", "metricspage", "batchespage", "periodicpage"):
        assert f'href="/admin/wurk_django/{model}/"' in html, model
    assert f'href="{BASE}"' in html


def test_each_entry_leads_to_its_page(admin_client):
    for key, suffix in PAGES.items():
        response = admin_client.get(f"/admin/wurk_django/{key}page/")
        assert response.status_code == 302, key
        assert response["Location"] == BASE + suffix, key
        assert admin_client.get(response["Location"]).status_code == 200, key


def test_staff_without_the_view_permission_sees_no_entry(client, db):
    client.force_login(make_user("plain", staff=True))
    html = client.get("/admin/").content.decode()
    assert "busypage" not in html and "dashboard/" not in html
    assert client.get("/admin/wurk_django/busypage/").status_code == 403


def test_a_viewer_sees_the_entries(client, viewer):
    client.force_login(viewer)
    assert 'href="/admin/wurk_django/deadpage/"' in client.get("/admin/").content.decode()
