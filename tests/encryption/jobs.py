"""Encrypted jobs used by the encryption tests (real workers import them via IMPORT_ON_MISS)."""

from __future__ import annotations

import hashlib

from wurk_django import Job, canonical
from wurk_django.redis.connection import get_redis


def fingerprint(value) -> str:
    return hashlib.sha256(canonical.dumps(value).encode()).hexdigest()


class ChargeCard(Job):
    encrypt = True

    def perform(self, order_id, card):
        # Records a digest of what perform received, never the value itself.
        get_redis().rpush("test:charged", f"{order_id}:{fingerprint(card)}")


class DeclinedCard(Job):
    encrypt = True
    retry = 3
    backtrace = True

    def perform(self, order_id, card):
        raise ValueError(f"card {card['number']} declined for {card['holder']}")


class Opaque(Exception):
    def __init__(self, secret):
        super().__init__("x")
        self.secret = secret

    def __str__(self):
        return f"opaque failure with {self.secret}"


class OpaqueFailure(Job):
    encrypt = True

    def perform(self, order_id, card):
        raise Opaque(card["number"])
