"""Workflows on batches (issue 27 item 1): chain, group, chord, graphs, failure, retry, cancel."""

from __future__ import annotations

import pytest

from tests.jobsapp.workflow_jobs import Add, Big, FailUntilFlag, NotJson, Record, Total, greet
from tests.workflow.conftest import ran
from wurk_django.workflow import (
    CannotRetry,
    Flow,
    InvalidWorkflow,
    Signature,
    Workflow,
    WorkflowSet,
    chain,
    chord,
    group,
)


def test_signatures_of_job_classes_and_functions():
    sig = Add.s(1, 2)
    assert isinstance(sig, Signature)
    assert sig.target == "tests.jobsapp.workflow_jobs.Add" and sig.args == [1, 2] and not sig.immutable
    assert Add.si(3).immutable
    fn = greet.s("ann", greeting="hi").set(queue="low")
    assert fn.target == "tests.jobsapp.workflow_jobs.greet"
    assert fn.kwargs == {"greeting": "hi"} and fn.options == {"queue": "low"}
    assert Signature.from_dict(fn.to_dict()) == fn
    with pytest.raises(ValueError, match="JSON"):
        Add.s(object())
    with pytest.raises(ValueError, match="unknown signature options"):
        Add.s(1).set(bogus=1)


def test_chain_passes_each_result_to_the_next_step(redis_db, work):
    wf = chain(Add.s(1, 2), Add.s(10), Add.s(100)).run("sums")
    assert wf.state == "running"
    # Only the first step is queued: the others wait for their dependency.
    assert redis_db.llen("queue:default") == 1
    work()
    assert wf.state == "succeeded"
    assert ran(redis_db) == ["add:[1, 2]", "add:[3, 10]", "add:[13, 100]"]
    assert list(wf.results().values()) == [3, 13, 113]
    assert [s.state for s in wf.steps()] == ["succeeded"] * 3


def test_immutable_step_ignores_the_previous_result(redis_db, work):
    wf = (Add.s(1, 2) | Add.si(5)).run()
    work()
    assert ran(redis_db) == ["add:[1, 2]", "add:[5]"]
    assert wf.state == "succeeded"


def test_group_runs_in_parallel_and_completes_once(redis_db, work):
    wf = group(Add.s(1), Add.s(2), Add.s(3)).run()
    assert redis_db.llen("queue:default") == 3  # all at once
    work()
    assert wf.state == "succeeded"
    assert sorted(wf.results().values()) == [1, 2, 3]


def test_chord_callback_gets_the_list_of_results(redis_db, work):
    wf = chord([Add.s(i) for i in range(5)], Total.s(100)).run()
    work()
    assert wf.state == "succeeded"
    final = wf.steps()[-1]
    assert final.after == [s.name for s in wf.steps()[:5]]
    assert final.result == 110
    assert ran(redis_db)[-1] == "total:[0, 1, 2, 3, 4]"


def test_a_dag_runs_each_step_after_all_its_dependencies(redis_db, work):
    flow = Flow("diamond")
    flow.step("a", Record.s("a"))
    flow.step("b", Record.s("b"), after=["a"])
    flow.step("c", Record.s("c"), after=["a"])
    flow.step("d", Record.s("d"), after=["b", "c"])
    wf = flow.run()
    assert Workflow(wf.id).step_states() == {"a": "enqueued", "b": "waiting", "c": "waiting", "d": "waiting"}
    work()
    order = ran(redis_db)
    assert order[0] == "a" and order[-1] == "['b', 'c']|d"  # d got both results, in after order
    assert sorted(order[1:3]) == ["a|b", "a|c"]
    assert wf.state == "succeeded" and wf.result("d") == "d"


def test_a_bad_graph_is_refused_before_anything_is_written(redis_db):
    flow = Flow()
    flow.step("a", Add.s(), after=["b"])
    flow.step("b", Add.s(), after=["a"])
    with pytest.raises(InvalidWorkflow, match="cycle"):
        flow.run()
    flow = Flow()
    flow.step("a", Add.s(), after=["nope"])
    with pytest.raises(InvalidWorkflow, match="'nope', which is not a step"):
        flow.run()
    with pytest.raises(InvalidWorkflow, match="step name"):
        Flow().step("a,b", Add.s())
    assert redis_db.dbsize() == 0


def test_the_testing_modes_refuse_a_workflow_instead_of_writing_to_redis(redis_db):
    from wurk_django import testing

    with testing.fake(), pytest.raises(InvalidWorkflow, match="testing mode 'fake'"):
        chain(Add.s(1)).run()
    assert redis_db.dbsize() == 0


def test_a_dead_step_stops_its_dependents_and_retry_continues(redis_db, work):
    flow = Flow()
    flow.step("ok", Record.s("ok"))
    flow.step("broken", FailUntilFlag.si("broken"), after=["ok"])
    flow.step("after", Record.si("after"), after=["broken"])
    wf = flow.run()
    work()
    assert wf.state == "failed"
    states = wf.step_states()
    assert states == {"ok": "succeeded", "broken": "failed", "after": "waiting"}
    broken = {s.name: s for s in wf.steps()}["broken"]
    assert broken.error == "RuntimeError: broken is broken"
    assert "after" not in ran(redis_db)
    assert redis_db.zcard("dead") == 0  # retry: false jobs skip the dead set; retry() pushes it again
    with pytest.raises(CannotRetry, match="succeeded, not failed"):
        wf.retry("ok")
    redis_db.set("test:wf:fixed", 1)
    assert wf.retry() == ["broken"]
    assert wf.state == "running" and wf.step_states()["broken"] == "enqueued"
    work()
    assert wf.state == "succeeded"
    assert ran(redis_db) == ["ok", "broken", "after"]
    assert {s.name: s.error for s in wf.steps()}["broken"] is None


def test_a_step_in_the_dead_set_is_retried_from_there(redis_db, work):
    from tests.batch.conftest import promote_retries

    wf = chain(FailUntilFlag.si("dies").set(retry=1), Record.s("then")).run()
    work()
    promote_retries(redis_db)
    work()
    assert wf.state == "failed" and redis_db.zcard("dead") == 1
    redis_db.set("test:wf:fixed", 1)
    assert wf.retry(wf.steps()[0].name) == [wf.steps()[0].name]
    assert redis_db.zcard("dead") == 0
    work()
    assert wf.state == "succeeded"
    assert ran(redis_db) == ["dies", "dies|then"]


def test_a_result_past_the_limit_fails_the_step_naming_both_sizes(redis_db, work, settings):
    settings.WURK = {**settings.WURK, "WORKFLOW_RESULT_MAX_BYTES": 100}
    from wurk_django.conf import reset_config

    reset_config()
    wf = chain(Big.s(500), Record.s("next")).run()
    work()
    assert wf.state == "failed"
    error = wf.steps()[0].error
    assert "502 bytes" in error and "WORKFLOW_RESULT_MAX_BYTES (100 bytes)" in error
    assert wf.step_states()[wf.steps()[1].name] == "waiting"


def test_a_result_that_is_not_json_fails_the_step(redis_db, work):
    wf = chain(NotJson.s(), Record.s("next")).run()
    work()
    assert wf.state == "failed"
    assert "returned a object, which is not JSON" in wf.steps()[0].error


def test_cancel_skips_queued_steps_and_starts_nothing_more(redis_db, work):
    wf = chain(Record.s("one"), Record.s("two")).run()
    assert wf.cancel() is True
    work()
    assert ran(redis_db) == []  # the queued first step was skipped
    assert wf.state == "cancelled"
    assert set(wf.step_states().values()) == {"cancelled"}
    assert 0 < redis_db.ttl(f"wf-{wf.id}") <= 7 * 24 * 3600
    assert wf.cancel() is False


def test_finished_workflow_expires_and_is_listed(redis_db, work):
    wf = chain(Add.s(1), Add.s(2)).run("listed")
    work()
    assert 0 < redis_db.ttl(f"wf-{wf.id}-results") <= 7 * 24 * 3600
    rows = WorkflowSet().summaries()
    assert rows[0]["id"] == wf.id and rows[0]["state"] == "succeeded" and rows[0]["description"] == "listed"
    data = wf.data()
    assert data["total"] == 2 and data["succeeded"] == 2
    assert [s["result"] for s in data["steps"]] == [1, 3]


def test_a_replayed_batch_callback_starts_nothing_twice(redis_db, work):
    # A callback job run twice (its worker killed after the script ran): the second run changes nothing.
    from wurk_django.workflow.advance import advance

    wf = chain(Add.s(1), Add.s(2), Add.s(3)).run()
    work_one = __import__("tests.batch.conftest", fromlist=["run_jobs"]).run_jobs
    work_one(redis_db, limit=1)  # the first step ran; its callback job is queued
    first = wf.steps()[0].name
    assert advance(wf.id, first) == [1, 0]  # as the callback would
    assert advance(wf.id, first) == [0, 0]  # a replay: already succeeded, nothing pushed
    work()
    assert ran(redis_db) == ["add:[1]", "add:[1, 2]", "add:[3, 3]"]
    assert wf.state == "succeeded"


def test_keyword_arguments_travel_in_the_payload(redis_db, work):
    wf = chain(greet.s("ann", greeting="hi")).run()
    raw = redis_db.lindex("queue:default", 0)
    assert b'"kwargs":{"greeting":"hi"}' in raw
    work()
    assert wf.result(wf.steps()[0].name) == "hi ann"


def test_two_dependencies_finishing_together_start_their_dependent_once(redis_db):
    # The sibling race: both callbacks run advance.lua at the same moment, from two threads.
    import threading

    from wurk_django.workflow import scripts
    from wurk_django.workflow.advance import advance

    pushed = []
    for _trial in range(30):
        redis_db.delete("queue:default")
        flow = Flow()
        flow.step("a", Add.s(1))
        flow.step("b", Add.s(2))
        flow.step("c", Add.s(), after=["a", "b"])
        wf = flow.run()
        redis_db.delete("queue:default")  # the roots' jobs: the test plays the workers
        for name, value in (("a", b"1"), ("b", b"2")):
            scripts.store_result(redis_db, wf.id, name, value)
        barrier = threading.Barrier(2)

        def finish(name, wid=wf.id, barrier=barrier):
            barrier.wait()
            advance(wid, name)

        threads = [threading.Thread(target=finish, args=(n,)) for n in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        queued = redis_db.lrange("queue:default", 0, -1)
        pushed.append(len(queued))
        assert b'"args":[[1,2]]' in queued[0]
    assert pushed == [1] * 30


def test_resume_pushes_a_step_left_waiting_with_nothing_to_wait_for(redis_db, work):
    # A repair tool: a root put back to 'waiting' by hand (its job lost) is pushed again, once.
    wf = chain(Add.s(4), Add.s(5)).run()
    root = wf.steps()[0].name
    redis_db.delete("queue:default")
    redis_db.hset(f"wf-{wf.id}-state", root, "waiting")
    assert wf.resume() == 1 and wf.resume() == 0
    work()
    assert wf.state == "succeeded" and ran(redis_db) == ["add:[4]", "add:[4, 5]"]
    assert [w.id for w in WorkflowSet()] == [wf.id]


def test_a_signature_may_name_its_job_id_once(redis_db):
    """A step's job id may be chosen by its signature (Celery's task_id, issue 44 item 1); one id twice is refused."""
    flow = Flow("ids")
    flow.step("a", Add.s(1, 2).set(jid="chosen-id"))
    workflow = flow.run()
    assert [step.jid for step in workflow.steps()] == ["chosen-id"]
    twice = Flow("twice")
    twice.step("a", Add.s(1, 2).set(jid="same-id"))
    twice.step("b", Add.s(1, 2).set(jid="same-id"))
    with pytest.raises(InvalidWorkflow, match="'same-id' is already the id of step 'a'"):
        twice.run()
    assert not redis_db.exists("status:same-id") and redis_db.zcard("workflows") == 1
