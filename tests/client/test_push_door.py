"""One push door (issue 41 item 2): every way to push is planned by the same step, the
client middleware included, and Lua scripts only move bytes that were planned.

On the code before the door, a workflow step of an ``encrypt = True`` job was stored in
clear in the workflow's keys, the batch callbacks and workflow steps skipped the client
middleware, a deferred push checked less at its call site than an immediate one, and two
``Client`` subclasses carried what Celery and django.tasks push beside a job.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import json
from pathlib import Path

import pytest
from django.db import transaction

from tests.batch.conftest import run_jobs
from tests.client.door_jobs import CARD, ChargeStep, OpenOrder, PlainCard, Stamped
from tests.support import queued, wait_for, wurk_settings
from wurk_django.batch import Batch
from wurk_django.batch.fire import CALLBACK_CLASS
from wurk_django.workflow import Flow, chain

KEY = base64.b64encode(bytes(range(32))).decode()
ENCRYPTION = {"ACTIVE_VERSION": 1, "KEYS": {1: KEY}}


def everything_stored(redis) -> list[bytes]:
    """Every key name and every value in the test database: each key read by its type,
    and its DUMP besides."""
    out: list[bytes] = []
    for key in redis.scan_iter(count=1000):
        out.append(key)
        kind = redis.type(key)
        if kind == b"string":
            out.append(redis.get(key))
        elif kind == b"hash":
            for field, value in redis.hgetall(key).items():
                out += [field, value]
        elif kind == b"list":
            out += redis.lrange(key, 0, -1)
        elif kind == b"zset":
            out += redis.zrange(key, 0, -1)
        elif kind == b"set":
            out += list(redis.smembers(key))
        dump = redis.dump(key)
        if dump is not None:
            out.append(dump)
    return [blob for blob in out if blob is not None]


def shows_card(redis) -> bool:
    return any(CARD.encode() in blob for blob in everything_stored(redis))


def test_an_encrypted_workflow_step_is_stored_sealed_and_runs_on_a_worker(redis_db, worker_factory):
    # ENT-606/607 through the door: the step is sealed when the workflow is built.
    card = {"number": CARD, "holder": "Ada Lovelace"}
    with wurk_settings(ENCRYPTION=ENCRYPTION):
        workflow = chain(OpenOrder.s(), ChargeStep.s(card)).run("charge")
    assert redis_db.dbsize() > 0
    assert not shows_card(redis_db), "the card number is stored in clear in the workflow's keys"
    assert not any(b"Ada Lovelace" in blob for blob in everything_stored(redis_db))

    worker = worker_factory("-c", "2", env={"WURK_TEST_EXTRA": json.dumps({
        "ENCRYPTION": {"ACTIVE_VERSION": 1, "KEYS": {"1": KEY}}, "IMPORT_ON_MISS": ["tests"],
        "POLL_INTERVAL_AVERAGE": 1})})
    wait_for(lambda: redis_db.llen("test:door:charged") == 1, timeout=40, message="the encrypted step ran")
    assert redis_db.lrange("test:door:charged", 0, -1) == [b"order-7:Ada Lovelace:1111"]  # opened, result in front
    wait_for(lambda: workflow.state == "succeeded", timeout=20, message="the workflow finished")
    worker.stop()
    redis_db.delete("test:door:charged")  # the job's own record of what it got, not a push
    assert not shows_card(redis_db)

    # The scan does find a card that is stored in clear (no worker takes it now).
    with wurk_settings(ENCRYPTION=ENCRYPTION):
        PlainCard.perform_async(card)
    assert shows_card(redis_db)


def test_an_encrypt_step_whose_last_argument_would_be_a_result_is_refused(redis_db):
    with wurk_settings(ENCRYPTION=ENCRYPTION):
        with pytest.raises(ValueError, match="last argument is sealed"):
            chain(OpenOrder.s(), ChargeStep.s()).run()
    assert redis_db.dbsize() == 0


class Stamp:
    """A client middleware that stamps every payload it plans."""

    def __call__(self, job_class, job, queue, redis, call_next):
        job["stamp"] = "door"
        return call_next()


class Done:
    def on_success(self, status, options):
        return None


def test_client_middleware_runs_for_batch_callbacks(redis_db):
    with wurk_settings(CLIENT_MIDDLEWARE=[Stamp]):
        batch = Batch()
        batch.on("success", Done)
        with batch.jobs():
            Stamped.perform_async()
        assert run_jobs(redis_db, limit=1) == 1  # the member; its success fires the callback
        [callback] = queued(redis_db)
    assert callback["class"] == CALLBACK_CLASS
    assert callback["stamp"] == "door"


def test_client_middleware_runs_for_workflow_steps(redis_db):
    flow = Flow("stamped")
    flow.step("first", Stamped.s())
    flow.step("second", Stamped.s(), after=["first"])
    flow.step("third", Stamped.si(), after=["first", "second"])
    with wurk_settings(CLIENT_MIDDLEWARE=[Stamp]):
        workflow = flow.run()
        [root] = queued(redis_db)
        assert root["stamp"] == "door"  # pushed by the workflow's script
        run_jobs(redis_db)
    assert workflow.state == "succeeded"
    assert redis_db.lrange("test:door:stamps", 0, -1) == [b"door"] * 3


def test_a_workflow_step_is_unique_checked_when_the_workflow_is_run(redis_db):
    from tests.unique.jobs import SyncAccount

    with wurk_settings(UNIQUE_JOBS=True):
        assert SyncAccount.perform_async(7) is not None
        before = sorted(redis_db.keys("*"))
        flow = Flow("duplicate")
        flow.step("sync", SyncAccount.s(7))
        with pytest.raises(ValueError, match="client middleware stopped"):
            flow.run()
        assert sorted(redis_db.keys("*")) == before  # nothing of the workflow written
        # A step given results could never have its lock released (keyed on its arguments).
        with pytest.raises(ValueError, match="must be immutable"):
            chain(Stamped.s(), SyncAccount.s(8)).run()
        workflow = chain(Stamped.s(), SyncAccount.si(8)).run()
        assert redis_db.keys("unique:*")
        run_jobs(redis_db)
    assert workflow.state == "succeeded"
    assert redis_db.keys("unique:*") == []  # every lock taken by the door was released by its job


def _refusal(call) -> str:
    with pytest.raises(ValueError) as info:
        call()
    return str(info.value)


@pytest.mark.django_db(transaction=True)
def test_a_deferred_push_refuses_a_bad_option_at_the_call_site(redis_db):
    bad = Stamped.set(queue="control\x07character")
    immediate = _refusal(lambda: bad.perform_async(1))
    with transaction.atomic():
        deferred = _refusal(lambda: bad.perform_async_on_commit(1))
    assert deferred == immediate
    assert "queue" in immediate
    assert redis_db.dbsize() == 0


@pytest.mark.django_db(transaction=True)
def test_tasks_refuse_a_bad_argument_the_same_way_on_every_writer(settings, redis_db):
    from wurk_django.tasks.compat import AVAILABLE

    if not AVAILABLE:
        pytest.skip("no django.tasks")
    from tests.tasks import sample

    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend"}}
    immediate = _refusal(lambda: sample.echo.enqueue({1: "int key"}))
    asynced = _refusal(lambda: asyncio.run(sample.echo.aenqueue({1: "int key"})))
    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend", "OPTIONS": {"ENQUEUE_ON_COMMIT": True}}}
    with transaction.atomic():
        deferred = _refusal(lambda: sample.echo.enqueue({1: "int key"}))
    assert immediate == asynced == deferred
    assert redis_db.dbsize() == 0


def _client_subclasses() -> list[str]:
    """Classes anywhere in the package whose bases name ``Client`` (the push client)."""
    root = Path(__file__).resolve().parents[2] / "wurk_django"
    found = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
                    if name == "Client":
                        found.append(f"{path.relative_to(root)}:{node.name}")
    return found


def test_no_client_subclass_remains():
    from wurk_django.celery import calling  # noqa: F401  (imported: any subclass it made is counted)
    from wurk_django.client.push import Client

    try:
        from wurk_django.tasks import backend  # noqa: F401
    except ImportError:
        pass
    assert _client_subclasses() == []
    assert Client.__subclasses__() == []


def test_the_workflow_writes_no_batch_key_by_hand():
    """A workflow creates its step batches through the batch's own API
    (``Batch.creation_commands``), never by naming a batch's keys or private methods."""
    root = Path(__file__).resolve().parents[2] / "wurk_django" / "workflow"
    found = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and (node.attr in ("batch", "batch_keys") or
                                                    (node.attr.startswith("_") and not node.attr.startswith("__")
                                                     and getattr(node.value, "id", None) == "batch")):
                found.append(f"{path.name}:{node.lineno} .{node.attr}")
            if isinstance(node, ast.Name) and node.id == "batch_keys":
                found.append(f"{path.name}:{node.lineno} {node.id}")
    assert found == []


def test_a_planned_job_gives_its_bytes_and_typed_operations(redis_db):
    from wurk_django import payload
    from wurk_django.client.operations import Enqueue, Extra, Schedule
    from wurk_django.client.planning import Companions
    from wurk_django.client.push import Client

    companions = Companions(commands=lambda job: [("SET", f"beside:{job['jid']}", "1")], front=True)
    planned = Client().plan({"class": Stamped, "args": [1]}, companions)
    first, second = planned.operations()
    assert first == Extra(("SET", f"beside:{planned.jid}", "1"))
    assert type(second) is Enqueue and second.front and payload.loads(second.raw)["jid"] == planned.jid
    assert payload.loads(planned.raw(enqueued_at=5)) == {**planned.job, "enqueued_at": 5}
    later = Client().plan({"class": Stamped, "args": [], "at": 4_000_000_000.0})
    [scheduled] = later.operations()
    assert type(scheduled) is Schedule and scheduled.at == 4_000_000_000.0
    # Written through the client: the companions' command in the same round trip, RPUSH for front.
    assert Client().write(planned) == planned.jid
    assert redis_db.get(f"beside:{planned.jid}") == b"1"
    assert payload.loads(redis_db.rpop("queue:default"))["jid"] == planned.jid
    with pytest.raises(ValueError, match="native JSON"):
        Client().plan({"class": Stamped, "args": [object()]})  # planning refuses; nothing is written
