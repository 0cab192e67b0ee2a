"""Users with and without the Wurk permissions, and a way to put jobs in Redis."""

from __future__ import annotations

import time

import pytest

from wurk_django import payload

BASE = "/admin/wurk_django/dashboard/"


def make_user(username: str, *, staff: bool = True, perms: tuple[str, ...] = (), superuser: bool = False,
              password: str | None = None):
    """A user; without ``password`` none is hashed (slow) and tests use ``force_login``."""
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user(username, f"{username}@example.com", password,
                                    is_staff=staff, is_superuser=superuser)
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(content_type__app_label="wurk_django", codename=codename))
    return user


@pytest.fixture
def viewer(db):
    return make_user("viewer", perms=("view_dashboard",))


@pytest.fixture
def manager(db):
    return make_user("manager", perms=("view_dashboard", "manage_jobs"))


@pytest.fixture
def admin_client(client, db):
    """A logged-in superuser (pytest-django's own hashes a password: slow, and not needed)."""
    client.force_login(make_user("admin", superuser=True))
    return client


@pytest.fixture
def manager_client(client, manager):
    client.force_login(manager)
    return client


def job(klass: str = "HardJob", args: list | None = None, queue: str = "default", **extra) -> dict:
    return {"class": klass, "args": [1, "two"] if args is None else args, "queue": queue,
            "jid": extra.pop("jid", payload.new_jid()), "retry": True,
            "created_at": payload.now_ms(), "enqueued_at": payload.now_ms(), **extra}


def enqueue(redis, *jobs: dict) -> None:
    for item in jobs:
        redis.sadd("queues", item["queue"])
        redis.lpush(f"queue:{item['queue']}", payload.dumps(item))


def add_to_set(redis, name: str, item: dict, at: float | None = None) -> float:
    at = time.time() + 60 if at is None else at
    redis.zadd(name, {payload.dumps(item): at})
    return at


def failed(klass: str = "HardJob", **extra) -> dict:
    return job(klass, **{"error_class": "RuntimeError", "error_message": "it broke",
                         "failed_at": payload.now_ms(), "retry_count": 2, **extra})


def heartbeat(redis, identity: str = "web.1:4242:abc123", *, embedded: bool = False, busy: int = 0,
              quiet: bool = False, work: dict | None = None) -> str:
    """Write a process entry the way a Sidekiq 8 heartbeat does (CORE-076, CORE-077)."""
    info = {"hostname": identity.split(":")[0], "started_at": time.time() - 120, "pid": int(identity.split(":")[1]),
            "tag": "shop", "concurrency": 5, "queues": ["default", "mail"], "labels": ["blue"],
            "capsules": {"default": {"concurrency": 5, "mode": "weighted", "weights": {"default": 2, "mail": 1}}},
            "identity": identity, "version": "0.1.0", "embedded": embedded}
    redis.sadd("processes", identity)
    redis.hset(identity, mapping={"info": payload.dumps(info), "concurrency": 5, "busy": busy,
                                  "beat": time.time(), "quiet": "true" if quiet else "false",
                                  "rss": 204800, "rtt_us": 120})
    for tid, item in (work or {}).items():
        redis.hset(f"{identity}:work", tid, payload.dumps(
            {"queue": item["queue"], "payload": payload.dumps(item).decode(), "run_at": int(time.time()) - 3}))
    return identity
