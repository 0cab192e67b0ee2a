"""Which Redis errors the write path replays, and the ``ON_REDIS_ERROR`` hook.

The policy, by where a round trip failed:

* it never left: the connection could not be made (refused, DNS, Sentinel with no
  primary). Nothing was applied, so it is sent again after ``0.5 * 2**n`` seconds
  plus up to 0.25 s of jitter, 3 attempts in all (:class:`NotSent`);
* the server answered ``READONLY``, ``NOREPLICAS``, ``MASTERDOWN`` or ``UNBLOCKED``:
  it refused the writes (a demoted primary after a failover, or one cut off from
  its replicas under ``min-replicas-to-write``), so nothing was applied. The
  connection is closed and the round trip sent once more, at once, to wherever
  the name or the sentinels point now; a second refusal is raised as
  :class:`PrimaryRefused`, a connection error, so a push waits in the push
  buffer and a worker treats it as an outage;
* it broke or timed out after the commands were written: they may have been
  applied. A push is not idempotent (a replay can duplicate a job), so it is
  never replayed; the error goes to the caller (with ``RELIABLE_PUSH`` on, the
  jobs wait in the push buffer and are delivered again: at least once).

Every retry, refusal to replay and give-up is logged as a warning and passed
to ``WURK["ON_REDIS_ERROR"]`` as a :class:`RedisErrorEvent`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from .. import errors

if TYPE_CHECKING:
    from ..conf import Config

logger = logging.getLogger("wurk_django.redis")

#: Attempts in all for a round trip whose connection could not be made.
CONNECT_ATTEMPTS = 3
RETRIED = "retried"
NOT_REPLAYED = "not_replayed"
GAVE_UP = "gave_up"

# Tests replace these to control the clock.
sleep = time.sleep
async_sleep = asyncio.sleep
jitter = random.uniform


class NotSent(redis.ConnectionError):
    """The connection could not be made, so nothing of the round trip reached Redis."""


class PrimaryRefused(redis.ConnectionError):
    """The server refused the writes because it is not a writable primary (any more):
    demoted (``READONLY``), cut off from its replicas (``NOREPLICAS``), a replica whose
    primary is gone (``MASTERDOWN``) or unblocked by its own demotion (``UNBLOCKED``).
    Nothing was applied. A connection error, so every caller treats it like an
    outage: the push buffer keeps the jobs, the worker waits and dials again."""


@dataclass(frozen=True)
class RedisErrorEvent:
    """What ``WURK["ON_REDIS_ERROR"]`` receives."""

    error: BaseException
    #: 1 for the first try of this round trip.
    attempt: int
    #: True when the round trip is sent again.
    retried: bool
    #: ``"main"`` (``"main@<shard>"`` for a shard).
    pool: str
    #: ``"retried"``, ``"not_replayed"`` (may have been applied) or ``"gave_up"``.
    action: str


def backoff(attempt: int) -> float:
    """Seconds to wait after failed connect attempt ``attempt`` (1-based)."""
    return 0.5 * 2 ** (attempt - 1) + jitter(0, 0.25)


def retryable_connect(exc: BaseException) -> bool:
    """Connect failures waiting may cure; not a refused password or certificate."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return True
        if isinstance(seen, redis.AuthenticationError) or "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return False
        seen = seen.__cause__ or seen.__context__
    return True


def report(config: Config, error: BaseException, *, attempt: int, retried: bool, action: str) -> None:
    """Log ``error`` and hand it to ``ON_REDIS_ERROR`` (a failing hook is logged, never raised)."""
    pool = "main" if config.shard == "default" else f"main@{config.shard}"
    logger.warning("Redis error on %s (attempt %d, %s): %s: %s", pool, attempt, action.replace("_", " "),
                   type(error).__name__, error)
    hook = config.on_redis_error
    if hook is None:
        return
    try:
        hook(RedisErrorEvent(error=error, attempt=attempt, retried=retried, pool=pool, action=action))
    except Exception:
        logger.exception("WURK['ON_REDIS_ERROR'] failed")


#: Error replies of a server that is not (or no longer) a writable primary: nothing ran,
#: dial again and resend.
FAILOVER_ERRORS = ("READONLY", "NOREPLICAS", "UNBLOCKED", "MASTERDOWN")
#: :meth:`Replay.after`'s answer for "close the connections, then send again at once".
REDIAL = "redial"


def is_failover(exc: BaseException) -> bool:
    if isinstance(exc, (PrimaryRefused, redis.ReadOnlyError, redis.exceptions.MasterDownError)):
        # redis-py strips the READONLY and MASTERDOWN codes from these classes' messages.
        return True
    if not isinstance(exc, redis.ResponseError):
        return False
    text = str(exc)
    # The code leads the reply; inside a script it follows the script's own prefix.
    return any(text.startswith(code) or f" {code} " in text or f"-{code} " in text for code in FAILOVER_ERRORS)


def as_raised(exc: BaseException) -> BaseException:
    """What a round trip that gave up raises: ``exc``, or a failover refusal as
    :class:`PrimaryRefused`, the connection error the push buffer and the worker's
    outage handling take (redis-py raises ``NOREPLICAS`` as a plain ``ResponseError``)."""
    if isinstance(exc, PrimaryRefused) or not is_failover(exc):
        return exc
    return refused(exc)


def refused(reply: BaseException) -> PrimaryRefused:
    """``reply`` (a failover refusal) as the connection error callers handle."""
    error = PrimaryRefused(f"the server is not a writable primary: {reply}")
    error.__cause__ = reply
    return error


class Replay:
    """One round trip's way through the policy above, shared by the blocking and the
    async writer: after each failed attempt, :meth:`after` reports the error and
    says what comes next."""

    def __init__(self, config: Config, connect_attempts: int = CONNECT_ATTEMPTS) -> None:
        self.config = config
        self.connect_attempts = connect_attempts
        self.attempt = 0
        self.redialed = False

    def after(self, exc: BaseException) -> float | str | None:
        """Seconds to wait before sending again, :data:`REDIAL`, or ``None``: not again
        (the caller re-raises ``exc``)."""
        self.attempt += 1
        if is_failover(exc):
            if self.redialed:
                report(self.config, exc, attempt=self.attempt, retried=False, action=GAVE_UP)
                return None
            report(self.config, exc, attempt=self.attempt, retried=True, action=RETRIED)
            self.redialed = True
            return REDIAL
        if isinstance(exc, NotSent):
            if self.attempt >= self.connect_attempts or not retryable_connect(exc):
                report(self.config, exc, attempt=self.attempt, retried=False, action=GAVE_UP)
                return None
            report(self.config, exc, attempt=self.attempt, retried=True, action=RETRIED)
            return backoff(self.attempt)
        if isinstance(exc, redis.ResponseError):
            return None
        if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
            # Written, then lost: the server may have applied it. A replayed push is a duplicate job.
            report(self.config, exc, attempt=self.attempt, retried=False, action=NOT_REPLAYED)
        return None



def memory_limit(info: dict) -> str:
    """``"used_memory 3.1M > maxmemory 3.0M, maxmemory-policy noeviction"`` from ``INFO memory``."""
    def size(name: str) -> str:
        human = info.get(f"{name}_human")
        return str(human) if human else f"{info.get(name, '?')} bytes"

    return (f"used_memory {size('used_memory')} > maxmemory {size('maxmemory')}, "
            f"maxmemory-policy {info.get('maxmemory_policy', '?')}")


def full_error(info: dict | None, exc: BaseException) -> BaseException:
    """The :class:`~wurk_django.errors.RedisFull` to raise at the call site for a write
    refused at the memory limit, naming the limit from ``info`` (``INFO memory``, which
    Redis answers at the limit; ``None`` when it could not be read)."""
    limit = memory_limit(info) if info else "the limit could not be read"
    return errors.RedisFull(
        f"Redis refused this write (all or part of it): it is at its memory limit ({limit}). "
        "Workers keep fetching and finishing jobs, which frees memory; try again later, or raise "
        "maxmemory / pick an eviction policy that cannot evict jobs")


def memory_info(client: Any) -> dict | None:
    """``INFO memory`` of ``client``, or ``None`` if it cannot be read."""
    try:
        return client.info("memory")
    except redis.RedisError:
        return None


#: How long the writes that record a run that already happened (a batch's acknowledgement
#: and callbacks, a workflow step's result and the step's advance) wait for Redis: a Sentinel
#: failover (the old primary fenced for up to 5 s, then ``NOREPLICAS`` until a replica
#: follows the new one) or a restart, not a long outage. Before this they gave up after
#: 0.15 s, and a job that finished during a failover was booked as failed: run again, or
#: dead (``retry: False``), failing its workflow.
RIDE_OUT_SECONDS = 30.0
#: Attempts in all for an error that is not an outage (as before: it rarely passes).
OTHER_ATTEMPTS = 3

# Tests replace this to control the clock.
ride_out_sleep = time.sleep


def transient(exc: BaseException | None) -> bool:
    """An unreachable Redis or a primary refusing writes in a failover (or an error raised
    from one, such as a batch's ``CallbackEnqueueError``): it passes."""
    for _ in range(5):
        if exc is None:
            return False
        if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)) or is_failover(exc):
            return True
        exc = exc.__cause__
    return False


def ride_out(call: Any, what: str, seconds: float = RIDE_OUT_SECONDS) -> Any:
    """``call()``; called again while it fails with an outage (:func:`transient`) for up
    to ``seconds``, and up to :data:`OTHER_ATTEMPTS` times in all for any other error.
    ``call`` must be safe to repeat: a timeout may come after Redis applied it. Raises
    the last error when it still fails; one warning line when it had to wait."""
    deadline = time.monotonic() + seconds
    delay, attempts, waited = 0.05, 0, False
    while True:
        try:
            result = call()
        except Exception as exc:
            attempts += 1
            if transient(exc):
                if time.monotonic() + delay > deadline:
                    raise
                if not waited:
                    logger.warning("%s: Redis did not take it (%s); trying again for up to %.0f s", what, exc,
                                   seconds)
                    waited = True
            elif attempts >= OTHER_ATTEMPTS:
                raise
            ride_out_sleep(delay)
            delay = min(delay * 2, 1.0)
        else:
            if waited:
                logger.warning("%s: done after %d attempts", what, attempts + 1)
            return result
