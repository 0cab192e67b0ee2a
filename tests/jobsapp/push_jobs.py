"""Jobs a web process pushes, one per client-side feature (tests/test_features.py,
bench/first_push.py). Importing this module must stay as light as a user's job module."""

from __future__ import annotations

from wurk_django import Job


class Plain(Job):
    def perform(self, value):
        return value


class Unique(Job):
    unique_for = 60

    def perform(self, value):
        return value


class Secret(Job):
    encrypt = True

    def perform(self, value, secret):
        return value
