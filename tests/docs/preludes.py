"""What each page assumes of the reader's own project, for the doc-block tests.

Stand-ins only for the reader's code (models, mail, API clients, their admin
site): every wurk_django name a page uses must be imported by the page itself.
``prepare`` runs before a page's first block, ``finish`` after its last one and
before the worker drains what was pushed, ``verify`` once it did.
"""

from __future__ import annotations

import base64
import os
import types
from datetime import UTC, datetime, timedelta
from typing import Any

#: Queues a page pushes to for Ruby processes: the Python worker leaves them alone.
UNSERVED = {"ruby", "ruby_mail", "rails"}


class Record:
    """A model instance of the reader's (an order, an upload, a product)."""

    finished = failed = False

    def __init__(self, pk: int = 1, **fields: Any) -> None:
        self.pk = self.id = pk
        self.__dict__.update(fields)

    def save(self, update_fields: Any = None) -> None:
        self.saved = True

    def refresh_price(self) -> None:
        self.refreshed = True


class Rows(list):
    """Enough of a QuerySet for the iteration helpers: pk order, pk filters, slices."""

    def order_by(self, *fields: str) -> Rows:
        return Rows(sorted(self, key=lambda r: r.pk))

    def filter(self, pk__gte: int | None = None, pk__gt: int | None = None, **other: Any) -> Rows:
        return Rows(r for r in self if (pk__gte is None or r.pk >= pk__gte) and (pk__gt is None or r.pk > pk__gt))

    def update(self, **fields: Any) -> int:
        for r in self:
            r.__dict__.update(fields)
        return len(self)


class Manager:
    def __init__(self, make: Any) -> None:
        self.make = make
        self.rows: dict[int, Record] = {}

    def get(self, pk: int, **other: Any) -> Record:
        return self.rows.setdefault(pk, self.make(pk))

    def create(self, *args: Any, **fields: Any) -> Record:
        return self.get(len(self.rows) + 1)

    def filter(self, **lookups: Any) -> Rows:
        if "pk" in lookups:
            return Rows([self.get(lookups["pk"])])
        return Rows(self.get(pk) for pk in range(1, 6))

    def update_or_create(self, defaults: Any = None, **lookups: Any) -> tuple[Record, bool]:
        return self.create(), True


def model(name: str, make: Any = Record) -> type:
    return type(name, (), {"objects": Manager(make)})


def _upload(pk: int) -> Record:
    return Record(pk, name=f"upload-{pk}.csv", row_count=3, owner_id=7, owner=Record(7, email="owner@example.com"),
                  row=lambda n: {"sku": f"SKU-{n}", "name": f"row {n}"})


def settings_namespace(page: str) -> dict[str, Any]:
    """Names a settings excerpt leaves to the reader (secrets from the environment)."""
    return {"OLD_KEY_B64": _key(), "NEW_KEY_B64": _key()}


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def alias_module(name: str, module: types.ModuleType, setitem: Any) -> None:
    """Make ``import <name>`` find ``module`` (the page's namespace), parents included.
    ``setitem`` is ``monkeypatch.setitem`` bound to ``sys.modules``, so every alias goes
    at the test's end (sys.modules itself must stay the interpreter's own dict)."""
    import sys

    parts = name.split(".")
    for i in range(1, len(parts)):
        parent = ".".join(parts[:i])
        if parent not in sys.modules:
            package = types.ModuleType(parent)
            package.__path__ = []
            setitem(parent, package)
    setitem(name, module)


def prepare(page: str, namespace: dict[str, Any], setitem: Any) -> None:
    namespace.update(settings_namespace(page))
    Order = model("Order")  # noqa: N806 - the reader's model class
    namespace.update(Order=Order, order=Order.objects.get(1), user=Record(3), order_ids=[1, 2, 3],
                     tomorrow_9am=(datetime.now(UTC) + timedelta(days=1)).replace(hour=9, minute=0),
                     t1=datetime.now(UTC) + timedelta(hours=1), t2=datetime.now(UTC) + timedelta(hours=2),
                     when=datetime.now(UTC) + timedelta(hours=3), rows=[Record(n) for n in range(1, 4)])
    extra = PAGES.get(page)
    if extra:
        extra(namespace, setitem)


def _admin(ns: dict[str, Any], setitem: Any) -> None:
    from django.contrib.admin import AdminSite

    ns["ops_site"] = AdminSite(name="ops")


def _api(ns: dict[str, Any], setitem: Any) -> None:
    from wurk_django import Job
    from wurk_django.client.push import Client

    class SendReceipt(Job):
        name = "shop.jobs.SendReceipt"
        queue = "mail"

        def perform(self, order_id: int) -> None:
            pass

    ns["SendReceipt"] = SendReceipt
    ns["jid"] = SendReceipt.perform_async(42)
    SendReceipt.perform_async(43)
    retry = {"class": "shop.jobs.SendReceipt", "queue": "mail", "args": [44], "retry": True}
    for n in range(3):
        Client().push({**retry, "at": (datetime.now(UTC) + timedelta(hours=n + 1)).timestamp()})
    # Scheduled entries stand in for retries: the same sorted-set entries, moved by hand.
    from wurk_django.api import RetrySet, ScheduledSet

    for entry in ScheduledSet():
        RetrySet().schedule(entry.score, {**entry.item, "retry_count": 0, "error_message": "boom",
                                           "error_class": "RuntimeError", "failed_at": 1764493577})
        entry.delete()
    ns["raw_job"] = {"class": "shop.jobs.SendReceipt", "queue": "mail", "args": [45], "jid": "0" * 24}


def _batches(ns: dict[str, Any], setitem: Any) -> None:
    ns.update(Upload=model("Upload", _upload), Product=model("Product"))


def _django(ns: dict[str, Any], setitem: Any) -> None:
    from wurk_django import Job

    class SendEmail(Job):
        name = "accounts.jobs.SendEmail"

        def perform(self, user_id: int) -> None:
            pass

    def signup(*args: Any) -> None:
        SendEmail.perform_async(1)

    ns.update(SendEmail=SendEmail, signup=signup)


def _encryption(ns: dict[str, Any], setitem: Any) -> None:
    keys = {1: ns["OLD_KEY_B64"], 2: ns["NEW_KEY_B64"]}
    ns["fetch_key_bytes"] = lambda version: base64.b64decode(keys[version])


def _jobs(ns: dict[str, Any], setitem: Any) -> None:
    ns.update(Product=model("Product"), current_tenant_id=lambda: "acme",
              CardDeclined=type("CardDeclined", (Exception,), {}),
              RateLimited=type("RateLimited", (Exception,), {}), notify_billing=lambda *a: None)

    class UseTenant:
        def __call__(self, instance: Any, job: dict, queue: str, call_next: Any) -> Any:
            return call_next()

    ns["UseTenant"] = UseTenant


def _limiters(ns: dict[str, Any], setitem: Any) -> None:
    stripe = types.ModuleType("stripe")
    stripe.charge = lambda amount, account=None: {"charged": amount}
    setitem("stripe", stripe)
    erp_client = types.SimpleNamespace(fetch_order=lambda order_id: {"id": order_id, "total": 10})
    ns.update(erp_client=erp_client, order_id=1)


def _periodic(ns: dict[str, Any], setitem: Any) -> None:
    from wurk_django import Job

    for name in ("Nightly", "Sweep", "Report"):
        type(name, (Job,), {"name": f"shop.jobs.{name}", "perform": lambda self, *a: None})


PAGES = {
    "docs/admin.md": _admin,
    "docs/api.md": _api,
    "docs/batches.md": _batches,
    "docs/django.md": _django,
    "docs/encryption.md": _encryption,
    "docs/jobs.md": _jobs,
    "docs/limiters.md": _limiters,
    "docs/periodic.md": _periodic,
}


def finish(page: str, namespace: dict[str, Any]) -> None:
    if page == "docs/batches.md":
        upload = namespace["Upload"].objects.get(1)
        namespace["started_bid"] = namespace["start_import"](upload)


def teardown(page: str) -> None:
    """Undo what a page changed in the process beyond settings (a key ring set in code)."""
    if page == "docs/encryption.md":
        from wurk_django import encryption

        encryption.disable()


def verify(page: str, namespace: dict[str, Any], redis: Any) -> None:
    if page == "docs/jobs.md":
        # The fast client's examples ran: the job through django-redis's FastRedis on the
        # worker, the counter through FastRedis.from_url.
        assert redis.get("visits:7") == b"1"
        assert redis.get("counter:signups") == b"1"
        assert redis.get(":1:last-visit:7") is not None
    if page == "docs/batches.md":
        # The worked example's success callback ran on the worker.
        assert namespace["Upload"].objects.get(1).finished is True
