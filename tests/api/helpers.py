"""Builders shared by the data API tests."""

from __future__ import annotations

import base64
import time
import zlib
from typing import Any

import orjson
from django.conf import settings
from django.test import override_settings

from wurk_django import payload


def job(jid: str, klass: str = "HardJob", queue: str = "default", **extra: Any) -> dict:
    """A minimal Sidekiq 8 style payload."""
    item = {"retry": True, "queue": queue, "class": klass, "args": [jid], "jid": jid,
            "created_at": payload.now_ms()}
    item.update(extra)
    return item


def raw(item: dict) -> bytes:
    return payload.dumps(item)


def jid_of(value: bytes | str) -> str:
    return orjson.loads(value)["jid"]


def wurk(**overrides: Any):
    """``override_settings`` of a few WURK keys on top of the test settings."""
    return override_settings(WURK={**settings.WURK, **{k.upper(): v for k, v in overrides.items()}})


def backtrace_blob(lines: list[str]) -> str:
    """``error_backtrace`` as Sidekiq writes it: base64(zlib(JSON)) (CORE-027)."""
    return base64.b64encode(zlib.compress(orjson.dumps(lines))).decode()


def seconds_ago(seconds: float) -> float:
    return time.time() - seconds
