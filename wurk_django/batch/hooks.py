"""The write hook: a batch job is pushed and registered in its batch in one script.

The plain push of a job carrying a ``bid`` (``LPUSH queue:<q>`` or ``ZADD
schedule``) is replaced by ``push.lua`` / ``schedule.lua``, which register the
jid (total, pending, expiry) and push in one atomic step. A ``NOSCRIPT`` reply
means the script did not run at all, so the writer's resend as ``EVAL`` can
neither lose nor double a registration. A jid already registered (a retry, a
scheduled promotion, a retry from the morgue) is pushed without being counted
again.

Inside an open ``jobs()`` block the scripts for that batch are not sent yet:
they wait in the block's buffer (see :class:`~wurk_django.batch.context.Buffer`).
"""

from __future__ import annotations

import logging
from typing import Any

from .. import payload
from . import context, scripts

logger = logging.getLogger("wurk_django.batch")

Command = tuple[Any, ...]


def write_hook(jobs: list[dict], commands: list[Command]) -> list[Command]:
    if not jobs:
        return commands
    batch_jobs = [job for job in jobs if job.get("bid")]
    if not batch_jobs:
        return commands
    immediate: dict[bytes, tuple[str, Command]] = {}
    scheduled: dict[bytes, tuple[str, Command]] = {}
    for job in batch_jobs:
        bid = str(job["bid"])
        if "at" in job:
            # The schedule holds a job without at/enqueued_at (enqueued_at is stamped at promotion).
            raw = payload.dumps({k: v for k, v in job.items() if k not in ("at", "enqueued_at")})
            scheduled[raw] = (bid, scripts.schedule_command(bid, float(job["at"]), job["jid"], raw))
        else:
            raw = payload.dumps(job)
            immediate[raw] = (bid, scripts.push_command(bid, job["queue"], job["jid"], raw))
    kept: list[Command] = []
    replaced: list[tuple[str, Command]] = []
    pushed_to: set[str] = set()
    for command in commands:
        verb = command[0]
        if verb == "LPUSH" and immediate and str(command[1]).startswith("queue:"):
            pushed_to.add(str(command[1]))
            rest = []
            for raw in command[2:]:
                found = immediate.pop(raw, None)
                if found is None:
                    rest.append(raw)
                else:
                    replaced.append(found)
            if rest:
                kept.append((verb, command[1], *rest))
        elif verb == "ZADD" and command[1] == "schedule" and scheduled:
            rest = []
            members = command[2:]
            for score, raw in zip(members[::2], members[1::2], strict=True):
                found = scheduled.pop(raw, None)
                if found is None:
                    rest += (score, raw)
                else:
                    replaced.append(found)
            if rest:
                kept.append((verb, command[1], *rest))
        else:
            kept.append(command)
    # A job pushed now whose bytes were not found was changed after it was serialized
    # (by an earlier hook): it is pushed, but its batch does not count it. Say so loudly.
    for raw, (bid, _command) in immediate.items() if pushed_to else ():
        job = payload.loads(raw)
        if f"queue:{job.get('queue')}" in pushed_to:
            logger.error("batch %s: job %s was pushed without being registered in its batch (its payload "
                         "changed after serialization)", bid, job.get("jid"))
    if not replaced:
        return commands
    buffer = context.current_buffer.get()
    for bid, command in replaced:
        if buffer is not None and bid == buffer.bid:
            kept += buffer.add([command])
        else:
            kept.append(command)
    return kept
