"""The write path: the one place normalized jobs are written to Redis.

Every enqueue goes through a :class:`Writer`: ``perform_async/in/at/bulk``,
the ``django.tasks`` backend (``aenqueue`` through its twin
:class:`AsyncWriter`, on ``redis.asyncio``), the reliable-push drain,
retry booking, the data API's retry/add-to-queue moves,
and whatever features re-push (batch callbacks, limiter reschedules). That
gives one connection policy (a ``READONLY`` reply after a failover redials and
sends once more), one seam for features, and one serializer: jobs become typed
operations (:mod:`wurk_django.client.operations`), and only
:func:`wurk_django.client.operations.commands` makes them Redis commands.

Promoting a due job from ``schedule``/``retry`` is one atomic script of the
scheduler's (``lua/promote_due.lua``, which pushes with the snippet every
pushing script shares, wake-up tokens included), and putting a fetched job
back on its queue (a requeue at shutdown, the reaper's recovery) is not an
enqueue either: it is sent with :meth:`Writer.send`, so it gets the policy,
but the write hooks never see it.

The seam is a *write hook*: ``hook(ops) -> ops``. It receives the typed
operations of one round trip (:mod:`wurk_django.client.operations`: ``Enqueue``,
``Schedule``, ``Extra``) and returns the operations to write instead: usually
the same list with its own ``Extra`` commands added (a batch registers its jids
in the same round trip), or with a job's operation given a ``via`` (a script
that pushes and books atomically). Hooks run in position order; then one
serializer (:func:`wurk_django.client.operations.commands`) makes the commands and the
wake-up signals. A hook must be cheap when the operations are none of its
business: it runs on every push.

Scripts inside a round trip are sent as ``EVALSHA``; a ``NOSCRIPT`` reply
means that script did not run, so exactly that command is sent again as
``EVAL`` (see :mod:`wurk_django.redis.scripts`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from time import monotonic
from typing import Any

import redis as redis_lib

from .. import context, features, fleet, payload, wake_demand
from ..conf import Config
from ..errors import RedisClusterError
from ..positioned import Positioned
from ..redis import cluster, pools
from ..redis import errors as redis_errors
from ..redis.connection import async_redis, client_for, cluster_for, send_commands
from ..redis.scripts import source_for_sha
from . import cluster_writer, operations, reliable_push
from .operations import Command, Enqueue, Extra, Operation, Schedule

WriteHook = Callable[[list[Operation]], list[Operation]]


_hooks: Positioned[WriteHook] = Positioned()


def register_hook(name: str, hook: WriteHook, *, position: int = 0) -> None:
    """Add (or replace) the write hook ``name``: ``hook(ops) -> ops`` over the
    :mod:`~wurk_django.client.operations` of each round trip; lower positions run first."""
    _hooks.add(name, hook, position)


def unregister_hook(name: str) -> None:
    _hooks.remove(name)


def _apply_hooks(ops: list[Operation]) -> list[Operation]:
    if not _hooks.ordered:
        features.install(features.CLIENT)
    for hook in _hooks.ordered:
        ops = hook(ops)
    return ops


def _operations(jobs: list[dict], extra: Iterable[Command] | None, front: bool,
                config: Config) -> list[Operation]:
    """``extra`` commands first, then the jobs' operations in their order."""
    ops = operations.for_jobs(jobs, front=front, wire=config.wire_format)
    return [*(Extra(command) for command in extra), *ops] if extra else ops


def _db(client: Any) -> int:
    return pools.database_of(client)


#: A connection of the push path used less than this many seconds ago is not checked for
#: a server-side close before use (a system call per push); as for application code's
#: commands (app_redis.IDLE_CHECK).
IDLE_CHECK = 1.0


def _wake_plan(client: Any, ops: list[Operation]) -> tuple[bool, wake_demand._Known | None, float]:
    """Whether the round trip writes wake-up tokens, and the answer to update when it also
    asks whether any fetcher wants them (``None``: it does not ask); see wake_demand."""
    for op in ops:
        if type(op) is Enqueue and op.via is None:
            break
    else:
        return True, None, 0.0  # no plain push: nothing to decide (scripts write their own)
    state = wake_demand.known(client)
    now = monotonic()
    if now - state.sent < wake_demand.LEARN_EVERY:
        return state.wanted, None, 0.0
    return True, state, now  # no answer young enough: write them, and ask again


def _commands(ops: list[Operation], client: Any) -> tuple[list[Command], wake_demand._Known | None, float]:
    wake_lists, ask, sent = _wake_plan(client, ops)
    commands = operations.commands(ops, _db(client), wake_lists=wake_lists)
    if ask is not None:
        commands.append(wake_demand.ask_command())
    return commands, ask, sent


class Writer:
    """Writes jobs for one :class:`Config`; cheap to build."""

    def __init__(self, config: Config | None = None, redis: redis_lib.Redis | None = None) -> None:
        self.config = context.config(config)
        self._redis = redis

    @property
    def redis(self) -> redis_lib.Redis:
        return self._redis or client_for(self.config)

    def push(self, jobs: list[dict], *, extra: Iterable[Command] = (), front: bool = False) -> None:
        """Write normalized jobs (immediate and scheduled may be mixed), buffering
        them through a Redis outage when ``RELIABLE_PUSH`` is on (PRO-320)."""
        if not jobs and not extra:
            return
        if self.config.reliable_push or reliable_push.installed():
            reliable_push.deliver(self, jobs, extra=list(extra), front=front)
        else:
            self.write(jobs, extra=list(extra), front=front)
        if jobs and not cluster.known(self.config.redis_target):
            # After the write: a job Ruby would run lossily is warned about (once per queue).
            # (No Ruby process can run on a Redis Cluster: nothing to warn about there.)
            fleet.check(jobs, self.config, self.redis)

    def write(self, jobs: list[dict], *, extra: list[Command] | None = None, front: bool = False,
              connect_attempts: int = redis_errors.CONNECT_ATTEMPTS) -> list[Any]:
        """Write now, in one round trip, or raise. ``extra`` commands go first."""
        return self.write_operations(_operations(jobs, extra, front, self.config), connect_attempts=connect_attempts)

    def write_operations(self, ops: list[Operation], *, hooks: bool = True,
                         connect_attempts: int = redis_errors.CONNECT_ATTEMPTS) -> list[Any]:
        """Write ``ops`` now, in one round trip, after the write hooks (unless ``hooks`` is
        False: operations the hooks already made, such as a batch's buffered pushes)."""
        if hooks:
            ops = _apply_hooks(ops)
        clustered = self.cluster()
        if clustered is not None:
            return cluster_writer.write(self.config, clustered, ops)
        commands, ask, sent = _commands(ops, self.redis)
        replies = self.send(commands, connect_attempts=connect_attempts)
        if ask is not None:
            wake_demand.learn(ask, replies.pop(), sent)
        return replies

    def cluster(self) -> Any | None:
        """The ``RedisCluster`` client to write through when this writer's Redis is a
        cluster node (issue 46: :mod:`wurk_django.client.cluster_writer`), else ``None``.
        Outside a cluster, once the server was probed, one dictionary lookup."""
        if self._redis is not None:
            return None  # an explicit client is used as it is
        return cluster_for(self.config)

    def add_to_set(self, name: str, entries: Iterable[tuple[dict | bytes, float]],
                   *, extra: Iterable[Command] = ()) -> list[Any]:
        """``ZADD name`` for ``(job, score)`` pairs (retry booking, re-scheduling), with
        the write hooks run over their operations, in one round trip. Stored bytes are
        passed on as they are (a :class:`~wurk_django.client.operations.Schedule` without a job)."""
        ops: list[Operation] = [Extra(command) for command in extra]
        for job, score in entries:
            if isinstance(job, dict):
                ops.append(Schedule(float(score), payload.dumps(job), job, name))
            else:
                ops.append(Schedule(float(score), job, None, name))
        return self.write_operations(ops)

    def send(self, commands: list[Command], *, connect_attempts: int = redis_errors.CONNECT_ATTEMPTS) -> list[Any]:
        """Send ``commands`` in one round trip under the replay policy of
        :mod:`wurk_django.redis.errors`: a connection that cannot be made is tried
        again with back-off (up to ``connect_attempts`` in all); after a failover the
        old primary answers ``READONLY``, so redial and send once more (CORE-085);
        a round trip that broke mid-way is never replayed; a script the server
        forgot (``NOSCRIPT``) is sent again as ``EVAL``."""
        replay = None  # made at the first failure: most round trips never need it
        while True:
            try:
                return self._send_once(commands)
            except redis_lib.RedisError as exc:
                if replay is None:
                    replay = redis_errors.Replay(self.config, connect_attempts)
                step = replay.after(exc)
                if step is None:
                    raise redis_errors.as_raised(exc)  # noqa: B904 (the same error, or it as PrimaryRefused)
                if step == redis_errors.REDIAL:
                    self.redis.connection_pool.disconnect()
                else:
                    redis_errors.sleep(step)

    def _send_once(self, commands: list[Command]) -> list[Any]:
        client = self.redis
        # hold_gil: the caller waits for the reply at once; spin: and is latency-bound
        # (see wire.exchange).
        replies = send_commands(client, commands, raise_errors=False, check_idle_after=IDLE_CHECK, hold_gil=True,
                                spin=self.config.push_spin_us * 1e-6)
        for reply in replies:
            if isinstance(reply, redis_lib.ResponseError):
                break
        else:
            return replies  # the usual case: no error reply, nothing to resend or raise
        retry, again = _noscript_resends(commands, replies)
        if again:
            for i, reply in zip(retry, send_commands(client, again, raise_errors=False), strict=True):
                replies[i] = reply
        try:
            return _checked(replies)
        except redis_lib.OutOfMemoryError as exc:
            raise redis_errors.full_error(redis_errors.memory_info(client), exc) from exc


class AsyncWriter:
    """The :class:`Writer` for ``async`` callers, on ``redis.asyncio`` (DJ-017).

    The same operations and commands (:mod:`wurk_django.client.operations`), the same write hooks and the same
    policy (``READONLY`` redial, ``NOSCRIPT`` resend, the reliable-push buffer);
    only the round trip awaits instead of blocking.
    """

    def __init__(self, config: Config | None = None, redis: Any = None) -> None:
        self.config = context.config(config)
        self._redis = redis

    @property
    def redis(self) -> Any:
        return self._redis or async_redis(self.config)

    def sync(self) -> Writer:
        """The blocking writer for the same config (the reliable-push buffer delivers through it)."""
        return Writer(self.config)

    async def push(self, jobs: list[dict], *, extra: Iterable[Command] = (), front: bool = False) -> None:
        """:meth:`Writer.push`, awaited."""
        if not jobs and not extra:
            return
        if self.config.reliable_push or reliable_push.installed():
            await reliable_push.adeliver(self, jobs, extra=list(extra), front=front)
        else:
            await self.write(jobs, extra=list(extra), front=front)
        if jobs and not cluster.known(self.config.redis_target):
            await fleet.acheck(jobs, self.config, self.redis)

    async def write(self, jobs: list[dict], *, extra: list[Command] | None = None, front: bool = False) -> list[Any]:
        """:meth:`Writer.write`, awaited."""
        ops = _apply_hooks(_operations(jobs, extra, front, self.config))
        if self._redis is None and cluster.known(self.config.redis_target) is not False:
            try:
                self.redis  # noqa: B018 (asks the server whether it is a cluster node, once per process)
            except RedisClusterError:
                clustered = cluster_for(self.config)
                if clustered is None:
                    raise
                # A Redis Cluster (issue 46): the blocking cluster write runs in a thread,
                # off the event loop (wurk has no redis.asyncio cluster path).
                import asyncio

                return await asyncio.to_thread(cluster_writer.write, self.config, clustered, ops)
        commands, ask, sent = _commands(ops, self.redis)
        replies = await self.send(commands)
        if ask is not None:
            wake_demand.learn(ask, replies.pop(), sent)
        return replies

    async def send(self, commands: list[Command], *,
                   connect_attempts: int = redis_errors.CONNECT_ATTEMPTS) -> list[Any]:
        """:meth:`Writer.send`, awaited, under the same replay policy: a connection that
        cannot be made is tried again with back-off (awaited, never blocking the loop),
        ``READONLY`` redials once, a round trip that broke mid-way is not replayed."""
        replay = redis_errors.Replay(self.config, connect_attempts)
        while True:
            try:
                return await self._send_once(commands)
            except redis_lib.RedisError as exc:
                step = replay.after(exc)
                if step is None:
                    raise redis_errors.as_raised(exc)  # noqa: B904 (the same error, or it as PrimaryRefused)
                if step == redis_errors.REDIAL:
                    await self.redis.connection_pool.disconnect()
                else:
                    await redis_errors.async_sleep(step)

    async def _send_once(self, commands: list[Command]) -> list[Any]:
        replies = await _async_round_trip(self.redis, commands)
        retry, again = _noscript_resends(commands, replies)
        if again:
            for i, reply in zip(retry, await _async_round_trip(self.redis, again), strict=True):
                replies[i] = reply
        try:
            return _checked(replies)
        except redis_lib.OutOfMemoryError as exc:
            try:
                info = await self.redis.info("memory")
            except redis_lib.RedisError:
                info = None
            raise redis_errors.full_error(info, exc) from exc


async def _async_round_trip(client: Any, commands: list[Command]) -> list[Any]:
    # The connection is made before the pipeline takes it, so a failure to connect is
    # known to have sent nothing (NotSent, which the caller may try again).
    try:
        conn = await client.connection_pool.get_connection()
    except (redis_lib.ConnectionError, redis_lib.TimeoutError) as exc:
        raise redis_errors.NotSent(f"could not connect to Redis: {exc}") from exc
    pipe = client.pipeline(transaction=False)
    pipe.connection = conn  # the pipeline's reset gives it back to the pool
    try:
        for command in commands:
            pipe.execute_command(*command)
        return list(await pipe.execute(raise_on_error=False))
    finally:
        if pipe.connection is not None:  # execute() never ran (or did not reset): give it back
            await pipe.reset()


def _noscript_resends(commands: list[Command], replies: list[Any]) -> tuple[list[int], list[Command]]:
    """Where ``EVALSHA`` met ``NOSCRIPT``, and those commands again as ``EVAL``.

    NOSCRIPT means that script did not run (every other command did), so exactly
    those are sent again, with the script's text.
    """
    retry = [i for i, (c, r) in enumerate(zip(commands, replies, strict=True))
             if isinstance(r, redis_lib.exceptions.NoScriptError) and c[0] == "EVALSHA"]
    again: list[Command] = []
    for i in retry:
        text = source_for_sha(commands[i][1])
        if text is None:
            raise replies[i]
        again.append(("EVAL", text, *commands[i][2:]))
    return retry, again


def _checked(replies: list[Any]) -> list[Any]:
    for reply in replies:
        if isinstance(reply, redis_lib.ResponseError):
            raise reply
    return replies
