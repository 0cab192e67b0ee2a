"""Any task id a caller may pass works, Celery's UUIDs included, or is refused where it is
passed (issue 41 item 5)."""

from __future__ import annotations

import uuid

import pytest

from tests.results.tasks import add
from wurk_django.celery import AsyncResult, states


@pytest.mark.slow
def test_a_uuid_task_id_runs_and_its_result_is_read(redis_db, worker):
    # Celery's own id format: before, the record was never written and .get() waited for ever.
    task_id = str(uuid.uuid4())
    result = add.apply_async((20, 22), task_id=task_id)
    assert result.id == task_id
    named = add.apply_async((1, 2), task_id="billing:invoice-42.retry_1")
    worker()
    assert result.get(timeout=60) == 42 and result.state == states.SUCCESS
    assert AsyncResult(task_id).get(timeout=5) == 42  # any process, from the id alone
    assert named.get(timeout=60) == 3


@pytest.mark.parametrize("bad", ["", "has space", "x" * 129, "-leading-dash", "new\nline", "star*", 42])
def test_an_id_no_record_can_have_is_refused_at_the_call_site(redis_db, bad):
    with pytest.raises(ValueError, match="task_id .* cannot name a result"):
        add.apply_async((1, 2), task_id=bad)
    with pytest.raises(ValueError, match="cannot name a result"):
        add.apply((1, 2), task_id=bad)
    with pytest.raises(ValueError, match="cannot name a result"):
        AsyncResult(bad)
    assert redis_db.llen("queue:default") == 0  # nothing was pushed
