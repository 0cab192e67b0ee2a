"""Encrypted jobs run by real worker processes: key rotation, retries, logs (ENT-607..610)."""

from __future__ import annotations

import base64
import json

from tests.encryption.jobs import ChargeCard, DeclinedCard, fingerprint
from tests.support import wait_for, wurk_settings
from wurk_django import payload

KEY1 = base64.b64encode(bytes(range(32))).decode()
KEY2 = base64.b64encode(bytes(range(100, 132))).decode()
SECRETS = [b"4242424242424242", b"Ada Lovelace", b"5105105105105100", b"Grace Hopper"]


def card(i: int) -> dict:
    return {"number": f"{4242424242424242 + i}", "holder": f"Holder Number{i}"}


def extra(active: int, keys: dict) -> dict:
    return {"WURK_TEST_EXTRA": json.dumps({
        "ENCRYPTION": {"ACTIVE_VERSION": active, "KEYS": keys}, "IMPORT_ON_MISS": ["tests"],
        "POLL_INTERVAL_AVERAGE": 1, "VERBOSE": True})}


def all_stored(redis_db) -> list[bytes]:
    return (redis_db.lrange("queue:default", 0, -1) + redis_db.zrange("schedule", 0, -1)
            + redis_db.zrange("retry", 0, -1) + redis_db.zrange("dead", 0, -1))


def test_rotation_with_jobs_of_both_versions_queued(redis_db, worker_factory):  # ENT-609
    expected = set()
    # Step 1-2: the old key is active.
    with wurk_settings(ENCRYPTION={"ACTIVE_VERSION": 1, "KEYS": {1: KEY1}}):
        for i in range(3):
            ChargeCard.perform_async(i, card(i))
            expected.add(f"{i}:{fingerprint(card(i))}")
        ChargeCard.perform_in(1, 10, card(10))
        expected.add(f"10:{fingerprint(card(10))}")
    # Step 3: both keys known, the new one active.
    with wurk_settings(ENCRYPTION={"ACTIVE_VERSION": 2, "KEYS": {1: KEY1, 2: KEY2}}):
        for i in range(3, 6):
            ChargeCard.perform_async(i, card(i))
            expected.add(f"{i}:{fingerprint(card(i))}")
    versions = sorted(payload.loads(raw)["args"][-1]["v"] for raw in all_stored(redis_db))
    assert versions == [1, 1, 1, 1, 2, 2, 2]
    for raw in all_stored(redis_db):
        assert b"Holder Number" not in raw and b"424242424242" not in raw

    worker = worker_factory("-c", "3", env=extra(2, {"1": KEY1, "2": KEY2}))
    wait_for(lambda: redis_db.llen("test:charged") == 7, timeout=30, message="all seven jobs ran")
    assert {v.decode() for v in redis_db.lrange("test:charged", 0, -1)} == expected
    worker.stop()

    # Step 5: the old key dropped; a straggler of version 1 cannot run and goes dead, intact.
    with wurk_settings(ENCRYPTION={"ACTIVE_VERSION": 1, "KEYS": {1: KEY1}}):
        ChargeCard.perform_async(99, card(99))
    sealed = payload.loads(redis_db.lindex("queue:default", 0))["args"]
    worker_factory("-c", "2", env=extra(2, {"2": KEY2}))
    wait_for(lambda: redis_db.zcard("dead") == 1, timeout=30, message="the v1 job in the dead set")
    dead = payload.loads(redis_db.zrange("dead", 0, -1)[0])
    assert dead["args"] == sealed
    assert dead["error_message"] == "encryption_error: KeyMissingError: no key for version 1"
    assert redis_db.llen("test:charged") == 7


def test_failing_job_never_shows_its_secret(redis_db, worker_factory):  # ENT-610
    secret = {"number": "5105105105105100", "holder": "Grace Hopper"}
    with wurk_settings(ENCRYPTION={"ACTIVE_VERSION": 2, "KEYS": {1: KEY1, 2: KEY2}}):
        DeclinedCard.perform_async(1, secret)
    worker = worker_factory("-c", "2", env=extra(2, {"1": KEY1, "2": KEY2}))
    wait_for(lambda: redis_db.zcard("retry") == 1, timeout=30, message="the failure booked as a retry")
    worker.stop()
    entry_raw = redis_db.zrange("retry", 0, -1)[0]
    entry = payload.loads(entry_raw)
    assert entry["error_message"] == "card [encrypted data] declined for [encrypted data]"
    assert entry["error_backtrace"]
    log = worker.output()
    assert "declined" in log  # the error was logged (verbose: with its traceback)...
    assert "Traceback" in log
    for needle in SECRETS:  # ...but nothing shows the argument: not Redis, not the log
        assert needle not in entry_raw
        assert needle.decode() not in log
    for raw in all_stored(redis_db):
        for needle in SECRETS:
            assert needle not in raw
