"""Settings for the run gate's worker tests (tests/server/run/test_gate.py).

The gate's limit is held at ``TEST_GATE_LIMIT`` from the first job on, and a job
stops counting against it after ``TEST_GATE_LONG_JOB`` seconds (the module's own
value when unset): a test can then make threads wait for their turn, which a
worker on an idle machine does only under a CPU-bound load. ``TEST_GATE_CONN_MAX_AGE``
keeps each thread's database connection open between jobs for that many seconds.
"""

import os

from tests.settings import *  # noqa: F403
from wurk_django.server.run import gate as run_gate

_LIMIT = int(os.environ["TEST_GATE_LIMIT"])

WURK = {**WURK, "GIL_GATE": True}  # noqa: F405

run_gate.REVIEW_EVERY = 0.0
run_gate.next_limit = lambda limit, ceiling, cpu_share, waits, starts, sleeps_per_job: _LIMIT
if "TEST_GATE_LONG_JOB" in os.environ:
    run_gate.LONG_JOB = float(os.environ["TEST_GATE_LONG_JOB"])
if "TEST_GATE_CONN_MAX_AGE" in os.environ:
    DATABASES = {"default": {**DATABASES["default"], "CONN_MAX_AGE": int(os.environ["TEST_GATE_CONN_MAX_AGE"])}}  # noqa: F405
