"""Jobs for the workflow tests. They record what they did in the test Redis."""

from __future__ import annotations

import os
import time

from wurk_django import Job, job
from wurk_django.redis.connection import get_redis


class Add(Job):
    retry = False

    def perform(self, *numbers):
        get_redis().rpush("test:wf:ran", f"add:{list(numbers)}")
        return sum(numbers)


class Total(Job):
    """A chord callback: the sum of a list of results (plus extra numbers)."""

    retry = False

    def perform(self, results, *extra):
        get_redis().rpush("test:wf:ran", f"total:{results}")
        return sum(results) + sum(extra)


class Record(Job):
    """Records its name (and what it was given) and returns its name."""

    retry = False

    def perform(self, *args):
        get_redis().rpush("test:wf:ran", "|".join(str(a) for a in args))
        return args[-1] if args else None


class FailUntilFlag(Job):
    """Fails (retry off: it dies at once) until ``test:wf:fixed`` is set."""

    retry = False

    def perform(self, name):
        if not get_redis().get("test:wf:fixed"):
            raise RuntimeError(f"{name} is broken")
        get_redis().rpush("test:wf:ran", name)
        return name


class Big(Job):
    retry = False

    def perform(self, size):
        return "x" * size


class NotJson(Job):
    retry = False

    def perform(self):
        return object()


@job(retry=False)
def greet(name, greeting="hello"):
    get_redis().rpush("test:wf:ran", f"{greeting} {name}")
    return f"{greeting} {name}"


class GraphStep(Job):
    """A step of the process test: counts its runs, records its start and finish in order."""

    retry = 3

    def perform(self, *args):
        # .s(expected, step_id) after dependencies: (their results, expected, step_id); a root: (expected, step_id).
        *given, expected, step_id = args
        redis = get_redis()
        if given and given[0] != expected:
            redis.rpush("test:wf:wrong", f"{step_id}:{given[0]}!={expected}")
        redis.incr(f"test:wf:runs:{step_id}")
        redis.rpush(f"test:wf:pids:{step_id}", os.getpid())
        redis.rpush("test:wf:events", f"start:{step_id}")
        time.sleep(float(os.environ.get("WURK_TEST_STEP_SLEEP", "0.002")))
        redis.rpush("test:wf:events", f"finish:{step_id}")
        return step_id


class FinalStep(Job):
    retry = 3

    def perform(self, results):
        redis = get_redis()
        redis.incr("test:wf:final")
        redis.rpush("test:wf:events", "start:final")
        redis.set("test:wf:final_count", len(results))
        redis.rpush("test:wf:events", "finish:final")
        return len(results)


class TopologyStep(Job):
    """A step of the topology tests (tests/topologies/test_workflows.py): adds ``add`` to
    what it was given (a number, a list of numbers or nothing) and returns the sum.

    Each run appends a JSON line (``start`` and ``done``, with what it was given and its
    payload's ``jid`` and ``enqueued_at``) to the file named by ``WURK_TEST_RECORD_FILE``:
    outside Redis, so a failover cannot lose the record of a run, and a step pushed twice
    (a second ``enqueued_at``) tells itself from a job delivered twice (the same one).
    With a ``gate`` path, the run waits (up to 60 s) for that file before it finishes."""

    retry = 3

    def perform(self, *args):
        import json

        *given, label, add, seconds, gate = args
        previous = given[0] if given else None
        base = sum(previous) if isinstance(previous, list) else (previous or 0)
        line = {"label": label, "given": previous, "jid": self.jid, "pid": os.getpid(),
                "enqueued_at": self.payload.get("enqueued_at")}
        with open(os.environ["WURK_TEST_RECORD_FILE"], "a") as out:
            out.write(json.dumps({"event": "start", **line}) + "\n")
        time.sleep(seconds)
        deadline = time.monotonic() + 60
        while gate and not os.path.exists(gate):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{label}: {gate} never appeared")
            time.sleep(0.05)
        with open(os.environ["WURK_TEST_RECORD_FILE"], "a") as out:
            out.write(json.dumps({"event": "done", **line}) + "\n")
        return base + add
