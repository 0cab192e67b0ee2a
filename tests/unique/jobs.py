"""Unique jobs used by the unique-job tests (real workers import them via IMPORT_ON_MISS)."""

from __future__ import annotations

import datetime as dt

from wurk_django import Job
from wurk_django.redis.connection import get_redis


class SyncAccount(Job):
    unique_for = 300

    def perform(self, account_id):
        get_redis().rpush("test:synced", str(account_id))


class StartUnique(Job):
    unique_for = dt.timedelta(minutes=2)
    unique_until = "start"

    def perform(self, account_id):
        from wurk_django.unique import locked

        # Released before perform: record whether the lock was still there.
        get_redis().rpush("test:seen_lock", str(locked(StartUnique, [account_id])))


class FailingUnique(Job):
    unique_for = 300
    retry = 2

    def perform(self, account_id):
        raise RuntimeError("sync failed")


class NoRetryUnique(Job):
    unique_for = 300
    retry = False

    def perform(self, account_id):
        raise RuntimeError("no retry")


class ByAccount(Job):
    """Unique per account whatever the other arguments are."""

    unique_for = 60

    @staticmethod
    def unique_context(job):
        return [job["class"], job["args"][0]]

    def perform(self, account_id, note):
        pass


class CriticalSync(Job):
    queue = "critical"
    unique_for = 30

    def perform(self, account_id):
        pass
