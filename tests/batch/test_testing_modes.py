"""Batches under the fake and inline testing modes (PRO-263)."""

from __future__ import annotations

from tests.batch.conftest import callbacks
from tests.jobsapp.batch_jobs import Callbacks, Mark
from wurk_django import testing
from wurk_django.batch import Batch, Status


def test_fake_mode_writes_the_batch_but_registers_and_fires_nothing(redis_db):
    batch = Batch()
    batch.on("success", Callbacks)
    with testing.fake():
        with batch.jobs():
            Mark.perform_async(1)
        recorded = testing.jobs(Mark)
        assert len(recorded) == 1 and recorded[0]["bid"] == batch.bid
        assert [j["class"] for j in testing.jobs("Sidekiq::Batch::Empty")] == ["Sidekiq::Batch::Empty"]
        status = Status(batch.bid)
        assert status.exists and status.total == 0
        testing.drain_all()
        testing.clear_all()
    assert redis_db.llen("queue:default") == 0
    assert callbacks(redis_db) == []


def test_inline_mode_runs_jobs_then_callbacks(redis_db):
    batch = Batch()
    batch.on("success", Callbacks, {"tag": "i"})
    batch.on("complete", Callbacks, {"tag": "i"})
    with testing.inline():
        with batch.jobs():
            Mark.perform_async(1)
            Mark.perform_async(2)
            assert callbacks(redis_db) == []
    marks = [m.decode() for m in redis_db.lrange("test:marks", 0, -1)]
    assert marks == [f"{batch.bid}:1", f"{batch.bid}:2"]
    assert sorted(callbacks(redis_db)) == [f"complete:{batch.bid}:i", f"success:{batch.bid}:i"]
    assert redis_db.llen("queue:default") == 0


def test_callbacks_pushed_in_a_testing_mode_are_not_stamped_with_an_open_batch(redis_db):  # PRO-247
    from wurk_django.batch import fire

    other = Batch()
    other.on("death", Callbacks)
    with other.jobs():
        Mark.perform_async(1)
    with testing.fake():
        outer = Batch()
        with outer.jobs():
            assert fire.fire_event(other.bid, "death")
        recorded = testing.jobs("Wurk::Batch::CallbackJob")
        assert len(recorded) == 1 and "bid" not in recorded[0]
        assert recorded[0]["args"][:3] == [other.bid, "tests.jobsapp.batch_jobs.Callbacks", "death"]
        testing.clear_all()
