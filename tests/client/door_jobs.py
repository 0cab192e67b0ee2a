"""Jobs of the push door tests (real workers import them through IMPORT_ON_MISS)."""

from __future__ import annotations

from wurk_django import Job
from wurk_django.redis.connection import get_redis

#: A test card number: the scans look for it in everything the workflow wrote.
CARD = "4111111111111111"


class OpenOrder(Job):
    def perform(self):
        return "order-7"


class ChargeStep(Job):
    """A workflow step with a secret last argument; records what it was given, in digest form."""

    encrypt = True

    def perform(self, order, card):
        get_redis().rpush("test:door:charged", f"{order}:{card['holder']}:{card['number'][-4:]}")


class PlainCard(Job):
    def perform(self, card):
        return None


class Stamped(Job):
    """Records the stamp a client middleware put on its payload (or "none")."""

    def perform(self, *args):
        get_redis().rpush("test:door:stamps", self.payload.get("stamp") or "none")
        return "ok"
