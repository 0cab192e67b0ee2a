"""Examples from Celery's user guide (Tasks, Calling, Canvas, results), each a small function
written for Celery; wurk_examples.py runs the same source with the imports changed. Each
returns what the guide says to look at (a value, a state, a list); an exception it raises is
part of its outcome (the harness keeps its type)."""

from __future__ import annotations

import datetime as dt
import time
import uuid

from celery import chain, chord, group, signature, states
from celery.exceptions import MaxRetriesExceededError  # noqa: F401 - the guide's import
from celery.result import AsyncResult, GroupResult

from tests.celery_guide.celery_tasks import (
    add,
    always_retry,
    auto_gives_up,
    auto_retry,
    div,
    hello,
    log_error,
    mark,
    mul,
    named_add,
    progress,
    quiet,
    record,
    retry_twice,
    retry_without_exc,
    routed,
    store,
    whoami,
    xsum,
)

T = 30
EXAMPLES: list = []


def example(section: str):
    """Register an example under the user guide's page it comes from."""
    def register(fn):
        fn.section = section
        EXAMPLES.append(fn)
        return fn
    return register


def wait_until(condition, timeout: float = T):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    return condition()


# -- Calling tasks (docs/userguide/calling.rst) --------------------------------------------


@example("calling")
def delay_and_get():
    return add.delay(2, 2).get(timeout=T)


@example("calling")
def apply_async_args():
    return add.apply_async((2, 2)).get(timeout=T)


@example("calling")
def apply_async_kwargs():
    return hello.apply_async(("world",), {"greeting": "hi"}).get(timeout=T)


@example("calling")
def direct_call_runs_here():
    return add(2, 2)


@example("calling")
def countdown_runs_later():
    started = time.monotonic()
    value = add.apply_async((2, 2), countdown=2).get(timeout=T)
    return value, time.monotonic() - started >= 1.9


@example("calling")
def eta_runs_at_the_time():
    started = time.monotonic()
    eta = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2)
    value = add.apply_async((4, 4), eta=eta).get(timeout=T)
    return value, time.monotonic() - started >= 1.9


@example("calling")
def expires_in_the_past_is_revoked():
    res = add.apply_async((1, 1), expires=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=10))
    wait_until(lambda: res.state != states.PENDING)
    return res.state


@example("calling")
def link_callback_gets_the_result():
    key = f"guide:link:{uuid.uuid4()}"
    add.apply_async((2, 2), link=record.s(key))
    wait_until(lambda: store().llen(key))
    return [int(v) for v in store().lrange(key, 0, -1)]


@example("calling")
def link_error_errback():
    store().delete("guide:errors")
    res = div.apply_async((1, 0), link_error=log_error.s())
    wait_until(lambda: store().llen("guide:errors"))
    return [v.decode().endswith(":ZeroDivisionError") and v.decode().startswith(res.id)
            for v in store().lrange("guide:errors", 0, -1)]


@example("calling")
def own_task_id():
    task_id = str(uuid.uuid4())
    res = add.apply_async((3, 4), task_id=task_id)
    return res.id == task_id, AsyncResult(task_id).get(timeout=T)


@example("calling")
def queue_option_routes():
    return add.apply_async((5, 5), queue="guide_high").get(timeout=T)


@example("calling")
def task_level_queue():
    return routed.delay(41).get(timeout=T)


@example("calling")
def priority_and_serializer_options():
    return add.apply_async((1, 2), priority=5, serializer="json").get(timeout=T)


# -- Tasks (docs/userguide/tasks.rst) --------------------------------------------------------


@example("tasks")
def explicit_name():
    return named_add.name.rpartition(".")[2], named_add.delay(1, 1).get(timeout=T)


@example("tasks")
def bound_task_request():
    res = whoami.delay(1, 2, z=3)
    got = res.get(timeout=T)
    return got["id"] == res.id, got["args"], got["kwargs"], got["retries"], got["name"] == whoami.name


#: A retry's wait: wurk adds jitter to a retry's countdown today (issue 44 item 3).
T_RETRY = 90


@example("tasks")
def retry_then_succeed():
    key = f"guide:retry:{uuid.uuid4()}"
    return retry_twice.delay(key).get(timeout=T_RETRY)


@example("tasks")
def retries_exhausted_raise_the_exception():
    return always_retry.delay().get(timeout=T_RETRY)


@example("tasks")
def retry_without_exc_raises_max_retries_exceeded():
    return retry_without_exc.delay().get(timeout=T_RETRY)


@example("tasks")
def autoretry_for():
    key = f"guide:auto:{uuid.uuid4()}"
    return auto_retry.delay(key).get(timeout=T_RETRY)


@example("tasks")
def autoretry_gives_up():
    res = auto_gives_up.delay()
    try:
        res.get(timeout=T_RETRY)
    except Exception as exc:
        return type(exc).__name__, res.state
    return "no error", res.state


@example("tasks")
def ignore_result_stays_pending():
    key = f"guide:quiet:{uuid.uuid4()}"
    res = quiet.delay(key)
    wait_until(lambda: store().get(key))
    time.sleep(0.5)
    return res.state, store().get(key)


@example("tasks")
def custom_state_update_state():
    res = progress.delay()
    return res.get(timeout=T), res.state


@example("tasks")
def handlers_on_a_base_class():
    from tests.celery_guide.celery_base_tasks import recorded

    store().delete("guide:handlers")
    ok = recorded.delay(4)
    ok.get(timeout=T)
    bad = recorded.delay(1, fail=True)
    bad.get(timeout=T, propagate=False)
    wait_until(lambda: store().llen("guide:handlers") >= 2)
    return sorted(v.decode() for v in store().lrange("guide:handlers", 0, -1))


@example("tasks")
def bound_task_on_a_base_class():
    from tests.celery_guide.celery_base_tasks import recorded_bound

    return recorded_bound.delay(7).get(timeout=T)


@example("tasks")
def soft_time_limit_lets_the_task_clean_up():
    from tests.celery_guide.celery_limit_tasks import soft_limited

    return soft_limited.delay().get(timeout=T)


@example("tasks")
def hard_time_limit_fails_the_task():
    from celery.exceptions import TimeLimitExceeded

    from tests.celery_guide.celery_limit_tasks import hard_limited

    res = hard_limited.delay()
    got = res.get(timeout=T, propagate=False)
    return isinstance(got, TimeLimitExceeded), res.state  # what code catching it relies on


@example("tasks")
def task_logger():
    from tests.celery_guide.celery_logging_tasks import logged

    return logged.delay(2, 3).get(timeout=T)


@example("tasks")
def rate_limited_task():
    from tests.celery_guide.celery_rate_tasks import limited

    return [limited.delay(i).get(timeout=T) for i in range(2)]


@example("tasks")
def apply_runs_eagerly():
    res = add.apply((2, 2))
    return res.get(), res.successful()


@example("tasks")
def task_async_result_method():
    return add.AsyncResult(add.delay(1, 2).id).get(timeout=T)


@example("signals")
def prerun_and_postrun_signals():
    from tests.celery_guide.celery_signal_tasks import signalled

    res = signalled.delay(21)
    res.get(timeout=T)
    key = f"guide:signals:{res.id}"
    wait_until(lambda: store().llen(key) >= 2, timeout=5)
    return [v.decode() for v in store().lrange(key, 0, -1)]


# -- Results (tasks.rst, calling.rst: AsyncResult) ------------------------------------------


@example("results")
def failure_reraises_the_task_error():
    return div.delay(1, 0).get(timeout=T)


@example("results")
def failure_state_and_predicates():
    res = div.delay(1, 0)
    res.get(timeout=T, propagate=False)
    return res.state, res.failed(), res.successful(), res.ready(), "ZeroDivisionError" in (res.traceback or "")


@example("results")
def get_propagate_false_returns_the_exception():
    got = div.delay(1, 0).get(timeout=T, propagate=False)
    return type(got).__name__


@example("results")
def success_state_and_result():
    res = add.delay(8, 8)
    res.get(timeout=T)
    return res.state, res.result, res.successful(), res.ready(), res.state == states.SUCCESS


@example("results")
def async_result_by_id():
    task_id = add.delay(10, 10).id
    res = AsyncResult(task_id)
    return res.get(timeout=T), res.id == task_id


@example("results")
def unknown_id_is_pending():
    return AsyncResult(str(uuid.uuid4())).state


@example("results")
def get_timeout_raises():
    res = add.apply_async((1, 1), countdown=10)
    try:
        res.get(timeout=0.5)
    except Exception as exc:
        res.revoke()
        return type(exc).__name__
    return "no timeout"


@example("results")
def revoke_before_it_runs():
    res = add.apply_async((1, 1), countdown=3)
    res.revoke()
    wait_until(lambda: res.state != states.PENDING, timeout=10)
    return res.state


@example("results")
def result_extended_name_and_args():
    res = add.delay(3, 3)
    res.get(timeout=T)
    return res.name == add.name, list(res.args), res.kwargs


# -- Canvas (docs/userguide/canvas.rst) ------------------------------------------------------


@example("canvas")
def signature_delay():
    return add.s(2, 2).delay().get(timeout=T)


@example("canvas")
def signature_by_name():
    return signature(add.name, args=(2, 2), countdown=0).apply_async().get(timeout=T)


@example("canvas")
def signature_method_with_options():
    return add.signature((2, 2), countdown=1).apply_async().get(timeout=T)


@example("canvas")
def signature_fields():
    s = add.signature((2, 2), {"debug": True}, countdown=10)
    return list(s.args), s.kwargs, s.options.get("countdown")


@example("canvas")
def partial_args_prepend():
    return add.s(2).delay(16).get(timeout=T)


@example("canvas")
def partial_kwargs_merge():
    return hello.s("world").apply_async(kwargs={"greeting": "hey"}).get(timeout=T)


@example("canvas")
def signature_called_runs_here():
    return add.s(2, 2)()


@example("canvas")
def signature_set_options():
    s = add.s(2, 2).set(countdown=1)
    return s.options.get("countdown"), s.delay().get(timeout=T)


@example("canvas")
def clone_with_args():
    return add.s(2).clone(args=(4,)).delay().get(timeout=T)


@example("canvas")
def immutable_callback():
    key = f"guide:si:{uuid.uuid4()}"
    add.apply_async((2, 2), link=mark.si(key, "fixed"))
    wait_until(lambda: store().llen(key))
    return [v.decode() for v in store().lrange(key, 0, -1)]


@example("canvas")
def chain_with_pipe():
    return (add.s(2, 2) | add.s(4) | add.s(8))().get(timeout=T)


@example("canvas")
def chain_function():
    return chain(add.s(4, 4), mul.s(8), mul.s(10)).apply_async().get(timeout=T)


@example("canvas")
def chain_parents():
    res = chain(add.s(4, 4), mul.s(8), mul.s(10))()
    res.get(timeout=T)
    return res.parent.get(timeout=T), res.parent.parent.get(timeout=T), res.parent.parent.parent


@example("canvas")
def partial_chain():
    return chain(add.s(4), mul.s(8)).apply_async((4,)).get(timeout=T)


@example("canvas")
def immutable_chain():
    res = (add.si(2, 2) | add.si(4, 4) | add.si(8, 8))()
    return res.get(timeout=T), res.parent.get(timeout=T), res.parent.parent.get(timeout=T)


@example("canvas")
def group_of_signatures():
    return group(add.s(2, 2), add.s(4, 4)).apply_async().get(timeout=T)


@example("canvas")
def group_from_generator():
    return group(add.s(i, i) for i in range(10))().get(timeout=T)


@example("canvas")
def group_result_predicates():
    res = group(add.s(i, i) for i in range(5))()
    res.join(timeout=T)
    return res.ready(), res.successful(), res.failed(), res.completed_count(), len(res), isinstance(res, GroupResult)


@example("canvas")
def group_with_a_failure():
    res = group(add.s(1, 1), div.s(1, 0))()
    try:
        res.get(timeout=T)
    except Exception as exc:
        wait_until(res.ready)
        return type(exc).__name__, res.completed_count(), res.failed()
    return "no error"


@example("canvas")
def group_partial():
    return group(add.s(i) for i in range(3)).apply_async((10,)).get(timeout=T)


@example("canvas")
def chord_header_body():
    return chord(add.s(i, i) for i in range(10))(xsum.s()).get(timeout=T)


@example("canvas")
def chord_with_body_argument():
    return chord((add.s(i, i) for i in range(10)), xsum.s()).apply_async().get(timeout=T)


@example("canvas")
def group_piped_into_task_is_a_chord():
    return (group(add.s(i, i) for i in range(10)) | xsum.s())().get(timeout=T)


@example("canvas")
def chain_ending_in_group():
    return (add.s(4, 4) | group(add.si(2, 2), add.si(4, 4)))().get(timeout=T)


@example("canvas")
def group_of_chains():
    return group(chain(add.s(1, 1), mul.s(2)), chain(add.s(2, 2), mul.s(3)))().get(timeout=T)


@example("canvas")
def task_map():
    return ~xsum.map([list(range(10)), list(range(100))])


@example("canvas")
def task_starmap():
    return ~add.starmap(list(zip(range(10), range(10))))


@example("canvas")
def task_chunks():
    return add.chunks(list(zip(range(20), range(20))), 5)().get(timeout=T)


@example("canvas")
def chunks_group():
    return add.chunks(list(zip(range(6), range(6))), 2).group().apply_async().get(timeout=T)


@example("canvas")
def on_error_of_a_signature():
    store().delete("guide:errors")
    res = div.s(1, 0).on_error(log_error.s()).delay()
    wait_until(lambda: store().llen("guide:errors"))
    return [v.decode().startswith(res.id) for v in store().lrange("guide:errors", 0, -1)]


@example("canvas")
def chain_error_propagates():
    res = (add.s(1, 1) | div.s(0))()
    try:
        res.get(timeout=T)
    except Exception as exc:
        return type(exc).__name__
    return "no error"


@example("results")
def link_children():
    res = add.apply_async((2, 2), link=add.s(16))
    res.get(timeout=T)
    wait_until(lambda: res.children, timeout=5)
    return [child.get(timeout=T) for child in (res.children or [])]


@example("results")
def forget_a_result():
    res = add.delay(2, 2)
    res.get(timeout=T)
    res.forget()
    return AsyncResult(res.id).state


@example("results")
def collect_a_chain():
    res = (add.s(1, 1) | add.s(2))()
    res.get(timeout=T)
    return sorted(value for _, value in res.collect() if isinstance(value, int))


@example("canvas")
def states_constants():
    return states.PENDING, states.STARTED, states.SUCCESS, states.FAILURE, states.RETRY, states.REVOKED
