"""Jobs the Redis Cluster worker tests run (issue 46 stage 3): they record what they did on
the cluster through application code's client (``redis_client()``, a ``RedisCluster``), in
keys of one test tag."""

from __future__ import annotations

import time

from wurk_django import Job, redis_client
from wurk_django.iterable import IterableJob


def _redis():
    return redis_client()


class ClusterRecordJob(Job):
    """Appends its argument to ``{test}:ran``."""

    def perform(self, value):
        _redis().rpush("{test}:ran", str(value))


class ClusterFlakyJob(Job):
    """Fails its first try, then records like :class:`ClusterRecordJob`; retried after 1 s."""

    retry = 3
    retry_in = staticmethod(lambda count, exc, job: 1)

    def perform(self, value):
        if _redis().incr(f"{{test}}:tries:{value}") < 2:
            raise RuntimeError("the first try fails")
        _redis().rpush("{test}:ran", str(value))


class ClusterDoomedJob(Job):
    """Always fails: one retry after 1 s, then the dead set."""

    retry = 1
    retry_in = staticmethod(lambda count, exc, job: 1)

    def perform(self):
        _redis().incr("{test}:doomed")
        raise RuntimeError("doomed")


class ClusterSlowJob(Job):
    """Notes its start in ``{test}:started``, sleeps, then records its end in ``{test}:ran``."""

    def perform(self, marker, seconds):
        _redis().rpush("{test}:started", marker)
        time.sleep(seconds)
        _redis().rpush("{test}:ran", marker)


# -- issue 46 item 3: the features beside a job, on a cluster ------------------------------


class ClusterUniqueJob(Job):
    """A unique job (until it succeeded): records like :class:`ClusterRecordJob`."""

    unique_for = 60

    def perform(self, value):
        _redis().rpush("{test}:ran", str(value))


class ClusterTrackedJob(Job):
    """A tracked job (``track = True``) reporting its progress halfway, returning twice its argument."""

    track = True

    def perform(self, value):
        self.progress(50, "halfway")
        _redis().rpush("{test}:ran", str(value))
        return value * 2


class ClusterDoomedAtOnce(Job):
    """Fails with no retry: straight to the dead set (a batch's death)."""

    retry = False

    def perform(self, value):
        _redis().rpush("{test}:ran", str(value))
        raise RuntimeError("doomed at once")


class ClusterBatchCallbacks:
    """A batch's callbacks: each records ``<event>:<bid>:<options' tag>`` in ``{test}:callbacks``."""

    def _note(self, event, status, options):
        _redis().rpush("{test}:callbacks", f"{event}:{status.bid}:{options.get('tag', '')}")

    def on_success(self, status, options):
        self._note("success", status, options)

    def on_complete(self, status, options):
        self._note("complete", status, options)

    def on_death(self, status, options):
        self._note("death", status, options)


class ClusterLateRetryJob(Job):
    """Always fails, its retry an hour away: it stays in its queue's retry set."""

    retry = 3
    retry_in = staticmethod(lambda count, exc, job: 3600)

    def perform(self):
        raise RuntimeError("retried much later")


class ClusterCountJob(IterableJob):
    """Iterates over range(n) on a cluster worker, recording each item in ``{test}:items``
    and its hooks in ``{test}:hooks`` (its cursor saved in the iteration's own key)."""

    def build_enumerator(self, n, pause=0.0, cursor=None):
        return self.iterate_list(list(range(n)), cursor)

    def each_iteration(self, item, n, pause=0.0):
        time.sleep(pause)
        _redis().rpush("{test}:items", str(item))

    def on_cancel(self):
        _redis().rpush("{test}:hooks", "cancel")

    def on_complete(self):
        _redis().rpush("{test}:hooks", "complete")


# -- workflows on a cluster (issue 46 item 3) -----------------------------------------------


class ClusterAdd(Job):
    """A workflow step: records ``add:<numbers>`` in ``{test}:ran`` and returns their sum
    (a list given by a fan-in counts as its sum)."""

    retry = False

    def perform(self, *numbers):
        _redis().rpush("{test}:ran", f"add:{list(numbers)}")
        return sum(sum(n) if isinstance(n, list) else n for n in numbers)


class ClusterBrokenStep(Job):
    """A workflow step that dies at once (no retry) until ``{test}:fixed`` is set."""

    retry = False

    def perform(self, name):
        if not _redis().get("{test}:fixed"):
            raise RuntimeError(f"{name} is broken")
        _redis().rpush("{test}:ran", name)
        return name


class ClusterGraphStep(Job):
    """A step of the cluster kill -9 test: checks it was given what its dependencies
    returned, counts its runs and records its pid, its start and its finish (in order, in
    ``{test}:events``), and returns its name."""

    retry = 3

    def perform(self, *args):
        import os

        # .s(expected, name) after dependencies: (their results, expected, name); a root: (expected, name).
        *given, expected, name = args
        redis = _redis()
        if given and given[0] != expected:
            redis.rpush("{test}:wrong", f"{name}:{given[0]}!={expected}")
        redis.incr(f"{{test}}:runs:{name}")
        redis.rpush(f"{{test}}:pids:{name}", os.getpid())
        redis.rpush("{test}:events", f"start:{name}")
        time.sleep(0.01)
        redis.rpush("{test}:events", f"finish:{name}")
        return name


class ClusterFinalStep(Job):
    """The fan-in of the cluster kill -9 test: counts its runs and what it was given."""

    retry = 3

    def perform(self, results):
        redis = _redis()
        redis.incr("{test}:final")
        redis.rpush("{test}:events", "start:final")
        redis.set("{test}:final_count", len(results))
        redis.rpush("{test}:events", "finish:final")
        return len(results)
