"""What a stop that reaches its timeout writes to the log (issue 28 item 10): the
``requeued`` line of every job put back, and the ``worker ... stopped`` line, also in a
swarm child (which ends with ``os._exit`` as soon as its worker says it stopped)."""

from __future__ import annotations

import re
import signal

import pytest

from tests.jobsapp.jobs import LoopJob, SlowJob
from tests.support import wait_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("swarm", [False, True], ids=["standalone", "swarm-child"])
def test_a_stop_past_its_timeout_logs_each_requeue_and_the_stop(redis_db, worker_factory, swarm):
    """RUN-112: the stop's joins are bounded by the deadline: a job stuck in a ten-minute
    C call does not hold the process (an unbounded join would outlive the wait below)."""
    # One job stuck in C code (time.sleep: the interruption never reaches it before the
    # process exits) and one that sleeps in short steps (the interruption lands).
    stuck = SlowJob.perform_async(600, "stuck")
    stepping = LoopJob.perform_async(60, "stepping")
    worker = worker_factory(*(["--processes", "1"] if swarm else []), "-c", "2", "-t", "1")
    wait_for(lambda: redis_db.llen("test:started") == 2, timeout=30, message="both jobs running")
    worker.signal(signal.SIGTERM)
    assert worker.wait(60) == 0
    output = worker.output()
    for jid in (stuck, stepping):
        lines = [line for line in output.splitlines() if f"jid={jid}" in line and line.endswith("requeued")]
        assert len(lines) == 1, (jid, output)
    assert re.search(r"worker \S+:\d+:\w+ stopped", output), output
    assert redis_db.llen("queue:default") == 2  # both put back
