"""Reading and changing a workflow: :class:`Workflow` (one) and :class:`WorkflowSet` (all)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .. import context as job_context
from .. import keys as core_keys
from .. import payload
from ..redis.cluster_layout import layout_of
from ..text import to_text
from . import advance, keys, results, scripts
from .errors import CannotRetry, NoSuchWorkflow

#: States a workflow ends in (``failed`` may still go on after a retry).
FINISHED = ("succeeded", "cancelled")
STATES = ("running", "failed", "succeeded", "cancelled")
STEP_STATES = ("waiting", "enqueued", "succeeded", "failed", "cancelled")


@dataclass
class StepView:
    """One step as stored: its definition, state, result and last error."""

    name: str
    target: str
    args: list
    kwargs: dict
    after: list[str]
    mode: str
    immutable: bool
    queue: str
    jid: str
    bid: str
    state: str
    result: Any
    has_result: bool
    error: str | None

    def data(self) -> dict[str, Any]:
        return {"name": self.name, "target": self.target, "args": self.args, "kwargs": self.kwargs,
                "after": self.after, "results_given": self.mode, "immutable": self.immutable, "queue": self.queue,
                "jid": self.jid, "bid": self.bid, "state": self.state,
                "result": self.result if self.has_result else None, "error": self.error}


def _or_empty(value: bytes | None) -> str:
    return to_text(value) or ""


class Workflow:
    """A handle on workflow ``wid``; every property reads Redis now."""

    def __init__(self, wid: str) -> None:
        if not isinstance(wid, str) or not wid:
            raise ValueError(f"a workflow id must be a non-empty string, not {wid!r}")
        self.id = wid

    def __repr__(self) -> str:
        return f"<Workflow {self.id}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workflow) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    @staticmethod
    def _redis() -> Any:
        """On a Redis Cluster the ``RedisCluster``, the keys then ``{wf:<id>}`` (issue 46 item 3)."""
        return job_context.layout_redis()

    def _key(self, suffix: str | None = None, redis: Any = None) -> str:
        return keys.workflow(self.id, suffix, layout_of(self._redis() if redis is None else redis))

    def _fields(self) -> dict[str, str]:
        raw = self._redis().hgetall(self._key())
        return {to_text(k): to_text(v) for k, v in raw.items()}

    def _require(self) -> dict[str, str]:
        fields = self._fields()
        if not fields:
            raise NoSuchWorkflow(f"no workflow {self.id!r} (never created, expired or deleted)")
        return fields

    @property
    def exists(self) -> bool:
        return bool(self._redis().exists(self._key()))

    @property
    def state(self) -> str | None:
        """``running``, ``failed``, ``succeeded``, ``cancelled``; None once it is gone."""
        return to_text(self._redis().hget(self._key(), "state"))

    def step_states(self) -> dict[str, str]:
        raw = self._redis().hgetall(self._key("state"))
        return {to_text(k): to_text(v) for k, v in raw.items()}

    def result(self, step: str) -> Any:
        """The return value of ``step`` (None until it succeeded)."""
        return results.decode(self._redis().hget(self._key("results"), step))

    def results(self) -> dict[str, Any]:
        """Every stored result, by step."""
        raw = self._redis().hgetall(self._key("results"))
        return {to_text(k): results.decode(v) for k, v in raw.items()}

    def steps(self) -> list[StepView]:
        """Every step, each after its dependencies."""
        redis = self._redis()
        pipe = redis.pipeline(transaction=False)
        pipe.hget(self._key(), "order")
        for suffix in ("steps", "state", "results", "errors"):
            pipe.hgetall(self._key(suffix))
        order_raw, specs, states, values, errors = pipe.execute()
        order = payload.loads(order_raw) if order_raw else sorted(to_text(k) for k in specs)
        views = []
        for name in order:
            key = name.encode()
            spec = payload.loads(specs[key]) if key in specs else {}
            views.append(StepView(
                name=name, target=spec.get("target", ""), args=spec.get("args", []), kwargs=spec.get("kwargs", {}),
                after=spec.get("after", []), mode=spec.get("mode", "none"), immutable=bool(spec.get("immutable")),
                queue=spec.get("queue", ""), jid=spec.get("jid", ""), bid=spec.get("bid", ""),
                state=_or_empty(states.get(key)) or "unknown", result=results.decode(values.get(key)),
                has_result=key in values, error=_or_empty(errors.get(key)) or None))
        return views

    def data(self) -> dict[str, Any]:
        """Everything about the workflow, JSON-ready (times are epoch seconds)."""
        fields = self._require()
        number = lambda name: float(fields[name]) if fields.get(name) else None  # noqa: E731
        return {"id": self.id, "state": fields.get("state"), "description": fields.get("description", ""),
                "created_at": number("created_at"), "finished_at": number("finished_at"),
                "failed_at": number("failed_at"), "total": int(fields.get("total") or 0),
                "succeeded": int(fields.get("succeeded") or 0), "failed": int(fields.get("failed") or 0),
                "callback_queue": fields.get("callback_queue", "default"),
                "steps": [step.data() for step in self.steps()]}

    def join(self, timeout: float = 60.0, interval: float = 0.1) -> str | None:
        """Wait until the workflow succeeded, failed or was cancelled (tests and scripts); its state."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.state
            if state is None or state in FINISHED or state == "failed" or time.monotonic() >= deadline:
                return state
            time.sleep(interval)

    # -- changing ---------------------------------------------------------------

    def retry(self, step: str | None = None) -> list[str]:
        """Run failed ``step`` (every failed step with None) again; the workflow goes on
        once it succeeds. Returns the steps retried.

        The step's job leaves the dead set (when it is there: ``retry: False`` jobs
        never go there) and is pushed again as it was first pushed, same jid, into its
        batch. :class:`CannotRetry` when a named step has not failed.
        """
        self._require()
        redis = self._redis()
        states = self.step_states()
        names = [step] if step is not None else [n for n, s in states.items() if s == "failed"]
        specs = redis.hmget(self._key("steps"), names) if names else []
        retried = []
        for name, spec in zip(names, specs, strict=True):
            state = states.get(name)
            if spec is None:
                raise CannotRetry(f"workflow {self.id} has no step {name!r}")
            spec_fields = payload.loads(spec)
            jid = spec_fields["jid"]
            # The dead set the step's job is in: one server's, or on a cluster its queue's own.
            dead = layout_of(redis).dead(str(spec_fields.get("queue") or "default"))
            # A step left enqueued with its job in the dead set: a retry cut short between its two steps.
            if state != "failed" and not (state == "enqueued" and _dead_entry(redis, jid, dead) is not None):
                if step is not None:
                    raise CannotRetry(f"step {name!r} of workflow {self.id} is {state}, not failed")
                continue
            if state == "failed" and scripts.retry(redis, self.id, name) != 1:
                continue  # retried meanwhile by another caller
            # The state changed first: if the job dies again at once, its death finds the step enqueued.
            entry = _dead_entry(redis, jid, dead)
            if entry is not None and not redis.zrem(dead, entry[0]):
                entry = None  # someone else took it (a click on the Dead page): it is being retried
            try:
                self._push_again(name)
            except BaseException:
                if entry is not None:
                    redis.zadd(dead, {entry[0]: entry[1]})
                raise
            retried.append(name)
        return retried

    def _push_again(self, step: str) -> None:
        from ..client.push import Client

        config = job_context.config()
        job = advance.payload_for(self._redis(), self.id, step, payload.dumps(config.wire_format.now()).decode())
        if job is None:
            raise CannotRetry(f"workflow {self.id} has no step {step!r}")
        job.pop("enqueued_at", None)
        for key in ("error_message", "error_class", "failed_at", "retry_count", "retried_at"):
            job.pop(key, None)
        Client(config=config).push(job)

    def cancel(self) -> bool:
        """Stop the workflow: steps not started never start, queued step jobs are skipped
        (a step running now finishes, and nothing starts after it). False if it had finished."""
        self._require()
        keep = job_context.config().workflow_keep
        return scripts.cancel(self._redis(), self.id, time.time(), keep) == 1

    def resume(self) -> int:
        """Push any step whose dependencies all succeeded but that is still waiting (a
        repair tool: the workflow does this itself). How many were pushed."""
        self._require()
        return advance.start_ready(self.id)


#: The dead set: read here directly, as the engine does (the engine never imports the data API).
DEAD = core_keys.DEAD


def _dead_entry(redis: Any, jid: str, dead: str = DEAD) -> tuple[bytes, float] | None:
    """The entry of ``jid`` in the dead set ``dead``: its bytes and score, or None."""
    for member, score in redis.zscan_iter(dead, match=f"*{jid}*", count=1000):
        try:
            if payload.loads(member).get("jid") == jid:
                return member, score
        except ValueError:
            continue
    return None


class WorkflowSet:
    """Every workflow in the index, newest first."""

    def __init__(self) -> None:
        self._redis = job_context.layout_redis()
        self._layout = layout_of(self._redis)

    def __len__(self) -> int:
        return int(self._redis.zcard(self._layout.workflows))

    def ids(self, start: int = 0, count: int = 100) -> list[str]:
        return [to_text(w) for w in self._redis.zrevrange(self._layout.workflows, start, start + count - 1)]

    def __iter__(self) -> Iterator[Workflow]:
        start = 0
        while True:
            page = self.ids(start, 100)
            if not page:
                return
            for wid in page:
                yield Workflow(wid)
            start += len(page)

    def summaries(self, start: int = 0, count: int = 50) -> list[dict[str, Any]]:
        """One row per workflow of a page: the hash's fields (no steps); gone ones marked ``expired``."""
        wids = self.ids(start, count)
        pipe = self._redis.pipeline(transaction=False)
        for wid in wids:
            pipe.hmget(self._layout.workflow(wid), "state", "description", "created_at", "total", "succeeded", "failed")
        rows = []
        for wid, values in zip(wids, pipe.execute(), strict=True):
            state, description, created, total, succeeded, failed = (_or_empty(v) for v in values)
            try:
                rows.append({"id": wid, "state": state or "expired", "description": description,
                             "created_at": float(created) if created else None, "total": int(total or 0),
                             "succeeded": int(succeeded or 0), "failed": int(failed or 0)})
            except ValueError as exc:  # a field that is no number: the list shows the row as unreadable
                rows.append({"id": wid, "unreadable": True, "key": self._layout.workflow(wid),
                             "reason": f"{type(exc).__name__}: {exc}"})
        return rows
