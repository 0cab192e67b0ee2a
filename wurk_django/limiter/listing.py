"""The list of limiter names (``lmtr-list``), kept bounded, and rebuilding a limiter
from its stored metadata for the dashboard.

Per-tenant names (``stripe-<user id>``) add one name each. A name is added
only when its metadata is written afresh, and :func:`names` sweeps out names
whose metadata has expired, so the list tracks the limiters in use rather than
every name ever seen.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from ..redis.cluster_layout import layout_of
from ..text import to_text
from .base import Limiter, redis_client, run, send

#: Names checked per sweep script call.
SWEEP_BATCH = 100


def names() -> list[str]:
    """Every listed name whose metadata still exists, sorted; the others are swept out."""
    client = redis_client()
    where = layout_of(client)
    listed = sorted(to_text(n) for n in client.smembers(where.limiter_list))
    if not listed:
        return []
    exists = send([("EXISTS", where.limiter_meta(n)) for n in listed], client)
    gone = [n for n, e in zip(listed, exists, strict=True) if not int(e)]
    if where.cluster:
        # Each name's metadata is in its own slot, the list in {wurk}: no one script sees
        # both. A name registered again between the probe and this SREM drops off the
        # dashboard's list until its metadata is written afresh (the limiter works on).
        if gone:
            send([("SREM", where.limiter_list, *gone)], client)
        gone_set = set(gone)
        return [n for n in listed if n not in gone_set]
    for i in range(0, len(gone), SWEEP_BATCH):
        batch = gone[i:i + SWEEP_BATCH]
        # The script checks again: a name registered since our probe stays.
        run("list_sweep", [where.limiter_list, *(where.limiter_meta(n) for n in batch)], batch, client)
    gone_set = set(gone)
    return [n for n in listed if n not in gone_set]


def metadata(name: str) -> dict[str, str] | None:
    """``{"type", "options", "fingerprint"}`` as stored, or None."""
    client = redis_client()
    raw = client.hgetall(layout_of(client).limiter_meta(name))
    if not raw:
        return None
    return {to_text(k): to_text(v) for k, v in raw.items()}


def build(name: str, type: str, options: str | dict[str, Any], register: bool = False) -> Any:
    """The limiter described by stored metadata (no Redis writes unless ``register``);
    None for an unknown type or options that no longer validate."""
    from . import TYPES, Unlimited

    if type == "unlimited":
        return Unlimited()
    klass = TYPES.get(type)
    if klass is None:
        return None
    values = json.loads(options) if isinstance(options, str) else dict(options)
    if values.get("backoff") == "<proc>":
        values["backoff"] = None  # the callable lives in the defining process only
    kwargs = _constructor_kwargs(klass, values)
    try:
        return klass(name, **kwargs, register=register)
    except (TypeError, ValueError):
        return None


def _constructor_kwargs(klass: type, values: dict[str, Any]) -> dict[str, Any]:
    """Stored option names as constructor keywords; options this version does not
    know (written by a newer Ruby or Python process) are left out."""
    renamed = {"initial": "initial_points", "refill": "refill_per_second"}
    accepted = inspect.signature(klass.__init__).parameters
    return {renamed.get(k, k): v for k, v in values.items() if renamed.get(k, k) in accepted and k != "register"}


def reset(name: str) -> bool:
    """Reset the limiter ``name`` from its metadata; without metadata, delete whatever
    state keys it may have left. Returns True when metadata was found."""
    meta = metadata(name)
    limiter: Limiter | None = build(name, meta["type"], meta["options"]) if meta else None
    if limiter is not None:
        limiter.reset()
        return True
    client = redis_client()
    where = layout_of(client)
    send([("DEL", where.limiter_slots(name), where.limiter_window(name), where.limiter_leaky(name),
           where.limiter_points(name), where.limiter_stats(name))], client)
    return False
