"""The settlement frees a capped job's slot whatever the outcome, and the paths that end
a job without a run free it too (issue 47 item 4). In this process, on the real processor."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.jobsapp.outcome_jobs import Broken, Doomed, Fine, Limited, a_job
from tests.support import StandInUnit, processor_manager
from wurk_django.queue_limits import caps as queue_caps
from wurk_django.server.run.processor import Processor


class CappedUnit(StandInUnit):
    """A unit that took a slot of queue ``reports``, as the capped fetch makes one."""

    def __init__(self, job: dict) -> None:
        super().__init__(job, "reports")
        self.cap = "queue:reports|host|1|nonce|0"
        self.slot = SimpleNamespace(config=None)


@pytest.fixture
def freed(monkeypatch):
    sent: list = []
    monkeypatch.setattr(queue_caps, "send", lambda config, releases: sent.extend(releases))
    return sent


@pytest.mark.parametrize("klass", [Fine, Broken, Doomed, Limited], ids=["succeeded", "retried", "dead", "rescheduled"])
def test_every_outcome_of_a_run_frees_its_slot_once(redis_db, freed, klass):
    unit = CappedUnit(a_job(klass, "reports"))
    Processor(processor_manager()).process(unit)
    assert freed == [("reports", "queue:reports|host|1|nonce|0", 1)]
    assert unit.cap is None and unit.acked == 1


def test_a_payload_that_cannot_run_frees_its_slot(redis_db, freed):
    unit = CappedUnit({})
    unit.job = b"{not json"
    Processor(processor_manager()).process(unit)
    assert freed == [("reports", "queue:reports|host|1|nonce|0", 1)] and unit.acked == 1


def test_a_job_put_back_unrun_frees_its_slot(redis_db, freed):
    unit = CappedUnit(a_job(Fine, "reports"))
    manager = processor_manager()
    manager.fetcher = SimpleNamespace(retrieve_work=lambda: unit)
    processor = Processor(manager)
    processor.done = True  # quiet began: the job goes back to its queue, unrun
    processor.process_one()
    assert unit.requeued == 1 and freed == [("reports", "queue:reports|host|1|nonce|0", 1)]


def test_a_unit_without_a_slot_sends_nothing(redis_db, freed):
    unit = StandInUnit(a_job(Fine, "reports"), "default")
    Processor(processor_manager()).process(unit)
    assert unit.acked == 1 and freed == []
