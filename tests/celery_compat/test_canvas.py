"""Celery's canvas on wurk's workflow engine (issue 44 item 1): the user guide's canvas
examples, each run by a real ``manage.py wurk`` process, give Celery's documented result;
what a workflow cannot do is refused naming the alternative."""

from __future__ import annotations

import json

import pytest

from tests.celery_compat.canvas_tasks import add, boom, mul, note, on_error, on_error_old, xsum
from tests.support import wait_for
from wurk_django.celery import AsyncResult, GroupResult, Signature, chain, chord, chunks, group, signature, states
from wurk_django.celery.canvas import xmap, xstarmap

T = 60


@pytest.fixture(scope="module")
def worker():
    """One worker process for the module (a process per test would cost seconds each)."""
    from tests.support import WorkerProcess

    proc = WorkerProcess("-c", "5", "-q", "default",
                         env={"WURK_TEST_EXTRA": json.dumps({"IMPORT_ON_MISS": ["tests.celery_compat"],
                                                             "POLL_INTERVAL_AVERAGE": 1})})
    yield proc
    proc.stop(timeout=15)
    if proc.alive():
        proc.kill()


# -- the user guide's examples, on a worker ----------------------------------------------


def test_signature_delay_and_partial_args(redis_db, worker):
    res = add.s(2, 2).delay()
    assert res.args == [2, 2] and res.kwargs == {} and res.name == add.name  # the push's record keeps the call
    assert res.get(timeout=T) == 4
    assert add.signature((2, 2), countdown=0).apply_async().get(timeout=T) == 4
    partial = add.s(2)
    assert partial.delay(16).get(timeout=T) == 18  # Celery: the new args go in front: add(16, 2)
    assert partial.apply_async((8,)).get(timeout=T) == 10
    assert signature("tests.celery_compat.canvas_tasks.add", args=(1, 1)).delay().get(timeout=T) == 2


def test_chain_called_gives_the_last_result_and_its_parents(redis_db, worker):
    res = (add.s(2, 2) | add.s(4) | add.s(8))()
    assert res.get(timeout=T) == 16
    assert res.parent.get(timeout=T) == 8 and res.parent.parent.get(timeout=T) == 4
    assert res.parent.parent.parent is None
    assert res.parent.children == [res] and res.name == "tests.celery_compat.canvas_tasks.add"
    assert res.args == [8, 8] and res.kwargs == {}  # the record knows the call, results in front
    first = res.parent.parent
    assert [(r.id, value) for r, value in first.collect(timeout=T)] == [(first.id, 4), (res.parent.id, 8), (res.id, 16)]
    assert chain(add.s(4, 4), mul.s(8), mul.s(10)).apply_async().get(timeout=T) == 640
    assert chain(add.s(4, 4), mul.s(8)).apply_async().get(timeout=T) == 64


def test_a_partial_chain_and_immutable_steps(redis_db, worker):
    assert chain(add.s(4), mul.s(8)).apply_async((4,)).get(timeout=T) == 64
    res = (add.si(2, 2) | add.si(4, 4) | add.si(8, 8))()
    assert res.get(timeout=T) == 16 and res.parent.get(timeout=T) == 8


def test_group_of_a_generator(redis_db, worker):
    res = group(add.s(i, i) for i in range(10))()
    assert isinstance(res, GroupResult) and len(res.results) == 10
    assert res.get(timeout=T) == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]
    assert res.ready() and res.successful() and not res.failed() and res.completed_count() == 10
    assert res.join(timeout=T) == res.get() and res.children == res.results
    assert group(add.s(2, 2), add.s(4, 4)).apply_async().get(timeout=T) == [4, 8]
    assert group([add.s(2), add.s(4)])(10).get(timeout=T) == [12, 14]  # partial args for every task


def test_chord_both_ways(redis_db, worker):
    header = [add.s(i, i) for i in range(10)]
    res = chord((add.s(i, i) for i in range(10)), xsum.s())()
    assert res.get(timeout=T) == 90
    assert isinstance(res.parent, GroupResult) and res.parent.get(timeout=T) == [i + i for i in range(10)]
    assert chord(header)(xsum.s()).get(timeout=T) == 90
    # A chain with a group before a task is a chord (Celery upgrades it so).
    assert (group(add.s(i, i) for i in range(3)) | xsum.s())().get(timeout=T) == 6
    assert chain(add.s(1, 1), group(mul.s(2), mul.s(3)), xsum.s())().get(timeout=T) == 10


def test_map_starmap_chunks(redis_db, worker):
    assert ~xsum.map([range(10), range(100)]) == [45, 4950]
    assert ~add.starmap(zip(range(10), range(10))) == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]
    assert isinstance(xsum.map([[1]]), xmap) and isinstance(add.starmap([(1, 1)]), xstarmap)
    res = add.chunks(zip(range(100), range(100)), 10)()
    assert isinstance(res, GroupResult) and len(res.results) == 10
    assert res.get(timeout=T) == [[2 * (10 * p + i) for i in range(10)] for p in range(10)]
    assert chunks(add.s(), [(1, 1), (2, 2), (3, 3)], 2)().get(timeout=T) == [[2, 4], [6]]
    assert add.chunks(zip(range(4), range(4)), 2).group()().get(timeout=T) == [[0, 2], [4, 6]]


def test_a_failure_in_a_chain_reaches_its_last_result(redis_db, worker):
    res = (add.s(1, 1) | boom.s() | add.s(1))()
    with pytest.raises(ValueError, match="boom 2"):
        res.get(timeout=T)
    assert res.parent.state == states.FAILURE and res.parent.parent.get(timeout=T) == 2
    group_res = group(add.s(1, 1), boom.s(3))()
    with pytest.raises(ValueError, match="boom 3"):
        group_res.get(timeout=T)
    assert group_res.failed() and group_res.completed_count() == 1
    assert isinstance(group_res.get(timeout=T, propagate=False)[1], ValueError)


def test_link_gets_the_result_first(redis_db, worker):
    res = add.apply_async((2, 2), link=add.s(16))
    assert res.get(timeout=T) == 4
    assert [c.get(timeout=T) for c in res.children] == [20]
    res = add.apply_async((1, 2), link=[note.s("test:link"), note.s("test:link")])
    assert res.get(timeout=T) == 3
    wait_for(lambda: redis_db.llen("test:link") == 2, timeout=T, message="both callbacks")
    sig = add.s(5, 5)
    sig.link(mul.s(3))
    assert [c.get(timeout=T) for c in sig.delay().children] == [30]


def test_link_error_new_and_old_forms(redis_db, worker):
    res = boom.apply_async((7,), link_error=on_error.s())
    with pytest.raises(ValueError):
        res.get(timeout=T)
    wait_for(lambda: redis_db.lrange("test:errback", 0, -1), timeout=T, message="the errback")
    assert redis_db.lrange("test:errback", 0, -1) == [f"{res.id}|ValueError: boom 7|True".encode()]
    res = boom.s(8).on_error(on_error_old.s()).delay()
    wait_for(lambda: redis_db.lrange("test:errback-old", 0, -1), timeout=T, message="the old-style errback")
    assert redis_db.lrange("test:errback-old", 0, -1) == [res.id.encode()]
    # An errback on a step of a chain: the step's death calls it.
    res = (add.s(1, 1) | boom.s().on_error(on_error_old.s()))()
    wait_for(lambda: redis_db.llen("test:errback-old") == 2, timeout=T, message="the step's errback")
    assert redis_db.lrange("test:errback-old", 1, 1) == [res.id.encode()]


def test_a_step_task_id_and_queue(redis_db, worker):
    res = (add.s(1, 1) | add.s(1).set(task_id="my-own-id"))()
    assert res.id == "my-own-id" and res.get(timeout=T) == 3
    assert AsyncResult("my-own-id").get(timeout=T) == 3  # any process reads it by its id
    res = chain(add.s(1, 1), add.s(2)).apply_async(queue="default")
    assert res.get(timeout=T) == 4


# -- in this process, no worker --------------------------------------------------------------


def test_calling_a_signature_runs_it_here():
    assert add.s(2, 2)() == 4
    assert add.s(2)(3) == 5  # partial args in front, as Celery
    assert add.si(2, 2)(3) == 4  # immutable: its own args only
    assert add.s(2, 2).apply().get() == 4


def test_signature_options_clone_and_set():
    sig = add.s(2)
    clone = sig.clone(args=(1,), countdown=3)
    assert clone.args == (1, 2) and clone.options == {"countdown": 3} and sig.options == {}
    assert sig.set(queue="low") is sig and sig.options == {"queue": "low"}
    assert add.signature((1, 2), {"x": 1}, queue="q").options == {"queue": "q"}
    assert isinstance(add.s(), Signature) and add.si(1).immutable and not add.s(1).immutable
    assert (add.s(1) | add.s(2) | (add.s(3) | add.s(4))).tasks == (add.s(1), add.s(2), add.s(3), add.s(4))
    assert signature(add.s(1)) == add.s(1)
    assert signature({"task": add.name, "args": [1], "kwargs": {}}) == add.s(1)


def test_empty_group_is_an_empty_result():
    assert group([])().get() == []


def test_group_result_save_and_restore_are_refused():
    with pytest.raises(TypeError, match=r"GroupResult\(id, \[AsyncResult\(i\)"):
        GroupResult("x", []).save()
    with pytest.raises(TypeError, match="rebuild it"):
        GroupResult.restore("x")


def test_the_children_of_a_result_not_ready_are_an_incomplete_stream(redis_db):
    from wurk_django.celery.exceptions import IncompleteStream

    waiting = AsyncResult("w" * 24)  # nothing ran it: PENDING
    waiting.children = [AsyncResult("c" * 24)]
    walk = waiting.iterdeps()
    assert next(walk) == (None, waiting)
    with pytest.raises(IncompleteStream):
        next(walk)
    assert [r.id for _, r in waiting.iterdeps(intermediate=True)] == [waiting.id]  # its children wait for it


@pytest.mark.parametrize(("call", "match"), [
    (lambda: chain(add.s(1, 1), add.s(2)).apply_async(countdown=5), "countdown.*lone signature"),
    (lambda: chain(add.s(1, 1), add.s(2).set(eta=1)).apply_async(), "eta.*lone signature"),
    (lambda: group(add.s(1, 1)).apply_async(expires=10), "expires.*lone signature"),
    (lambda: chain(add.s(1, 1), add.s(2).set(link=add.s(1))).apply_async(), "next element of a chain"),
    (lambda: chain(add.s(1, 1), add.s(2).set(time_limit=1)).apply_async(), "@shared_task"),
    (lambda: chain(add.s(1, 1)).apply_async(task_id="x"), r"sig.set\(task_id"),
    (lambda: chain(add.s(1, 1)).apply(), "each task's apply"),
    (lambda: chain(add.s(1, 1)).freeze(), "read them from the returned result"),
    (lambda: group(add.s(1, 1)).link(add.s()), r"group \| callback"),
    (lambda: chord([add.s(1, 1)]).link_error(add.s()), "on_error"),
    (lambda: chord([add.s(1, 1)])(), "needs a body"),
    (lambda: add.apply_async((1, 1), link=add.s(1), countdown=5), "push a task that makes the linked call"),
    (lambda: add.apply_async((1, 1), chord=add.s()), "canvas"),
    (lambda: add.apply_async((1, 1), link=chain(add.s(1))), "task signatures"),
    (lambda: AsyncResult("abc").then(print), "chain the next task"),
    (lambda: add.chunks([(1, 1)], 0), "n is a number of items"),
])
def test_refusals_name_the_alternative(redis_db, call, match):
    with pytest.raises(TypeError if "number" not in match else ValueError, match=match):
        call()
    assert not redis_db.keys("wf-*")  # nothing was written
