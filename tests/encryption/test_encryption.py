"""Encrypted arguments: envelope, middleware, re-push safety, failures, settings (ENT-601..610)."""

from __future__ import annotations

import base64
import json
import logging
import shutil
import subprocess

import pytest
from django.test import override_settings

from tests.encryption.jobs import ChargeCard, DeclinedCard, OpaqueFailure, fingerprint
from tests.support import wurk_settings
from wurk_django import context, encryption, payload, testing
from wurk_django.api import DeadSet, RetrySet
from wurk_django.client.push import Client
from wurk_django.conf import get_config
from wurk_django.encryption import envelope, keyring
from wurk_django.outcome import Outcome
from wurk_django.redis.connection import get_redis
from wurk_django.server.retry import Retrier

KEY1 = bytes(range(32))
KEY2 = bytes(range(100, 132))
B64_1 = base64.b64encode(KEY1).decode()
B64_2 = base64.b64encode(KEY2).decode()
CARD = {"number": "4242424242424242", "holder": "Ada Lovelace"}
SECRETS = (b"4242424242424242", b"Ada Lovelace")


@pytest.fixture(autouse=True)
def keys_v2():
    encryption.disable()
    with wurk_settings(ENCRYPTION={"ACTIVE_VERSION": 2, "KEYS": {1: B64_1, 2: B64_2}}):
        yield
    encryption.disable()


def assert_no_plaintext(data: bytes | str) -> None:
    data = data.encode() if isinstance(data, str) else data
    for secret in SECRETS:
        assert secret not in data


def stored(redis_db, queue: str = "default") -> tuple[bytes, dict]:
    raw = redis_db.lindex(f"queue:{queue}", 0)
    return raw, payload.loads(raw)


# -- envelope ----------------------------------------------------------------------------


def test_envelope_shape_and_round_trip():  # ENT-604, ENT-605
    ring = keyring.Keyring(2, {2: KEY2}.__getitem__)
    sealed = envelope.seal(ring, CARD)
    assert list(sealed) == ["__wurk_enc__", "v", "iv", "ct", "tag"]
    assert sealed["__wurk_enc__"] is True and sealed["v"] == 2
    assert len(base64.b64decode(sealed["iv"], validate=True)) == 12
    assert len(base64.b64decode(sealed["tag"], validate=True)) == 16
    assert envelope.is_envelope(sealed)
    assert envelope.unseal(ring, sealed) == CARD
    for value in (None, 1.5, "text", [1, {"a": True}], {"1": 2}):
        assert envelope.unseal(ring, envelope.seal(ring, value)) == value
    assert envelope.seal(ring, CARD)["iv"] != sealed["iv"]  # a fresh IV each time
    assert not envelope.is_envelope({"__wurk_enc__": True, "v": 2, "iv": "", "ct": ""})  # all four fields
    assert not envelope.is_envelope({"__wurk_enc__": "true", "v": 2, "iv": "", "ct": "", "tag": ""})


@pytest.mark.parametrize("damage", [
    lambda e: {**e, "tag": base64.b64encode(b"\0" * 16).decode()},
    lambda e: {**e, "ct": base64.b64encode(b"other").decode()},
    lambda e: {**e, "iv": "not base64!"},
    lambda e: {**e, "tag": base64.b64encode(b"short").decode()},
    lambda e: {**e, "v": "2"},
])
def test_damaged_envelopes_raise_decryption_error(damage):  # ENT-608
    ring = keyring.Keyring(2, {2: KEY2}.__getitem__)
    with pytest.raises(encryption.DecryptionError) as info:
        envelope.unseal(ring, damage(envelope.seal(ring, CARD)))
    assert "4242" not in str(info.value)


def test_key_resolver_rules():  # ENT-601, ENT-602
    calls = []

    def resolver(version):
        calls.append(version)
        return {1: KEY1, 2: KEY2, 3: b"short", 4: None}[version]

    encryption.enable(2, resolver)
    ring = encryption.keyring.current()
    assert ring.key(2) == KEY2 and ring.key(2) == KEY2 and calls == [2]  # cached per version
    with pytest.raises(encryption.KeyMissingError, match="version 9"):
        ring.key(9)
    with pytest.raises(encryption.KeyMissingError, match="version 4"):
        ring.key(4)
    with pytest.raises(encryption.EncryptionError, match="version 3 must be 32 raw bytes, got 5 bytes"):
        ring.key(3)
    encryption.enable(2, resolver)  # again: the cache is cleared
    encryption.keyring.current().key(2)
    assert calls.count(2) == 2

    def kms_down(version):
        raise TimeoutError("KMS timeout")

    encryption.enable(1, kms_down)
    with pytest.raises(TimeoutError):  # not a key error: the job retries as usual
        encryption.keyring.current().key(1)


@pytest.mark.skipif(shutil.which("ruby") is None, reason="no ruby on PATH")
def test_ruby_openssl_reads_and_writes_the_same_envelope():  # ENT-001, ENT-605: Ruby wurk shares keys and jobs
    ring = keyring.Keyring(2, {2: KEY2}.__getitem__)
    ours = envelope.seal(ring, {"n": 1.0e20, "s": "é\n"})
    script = r"""
    require 'json'; require 'openssl'; require 'base64'
    input = JSON.parse(STDIN.read); key = Base64.strict_decode64(input['key']); env = input['env']
    d = OpenSSL::Cipher.new('aes-256-gcm').decrypt
    d.key = key; d.iv = Base64.strict_decode64(env['iv']); d.auth_tag = Base64.strict_decode64(env['tag'])
    plain = d.update(Base64.strict_decode64(env['ct'])) + d.final
    e = OpenSSL::Cipher.new('aes-256-gcm').encrypt
    iv = OpenSSL::Random.random_bytes(12); e.key = key; e.iv = iv
    ct = e.update(JSON.dump({'from' => 'ruby', 'x' => [1, 2.5]})) + e.final
    out = {'__wurk_enc__' => true, 'v' => 2, 'iv' => Base64.strict_encode64(iv),
           'ct' => Base64.strict_encode64(ct), 'tag' => Base64.strict_encode64(e.auth_tag(16))}
    puts JSON.dump({'plain' => plain, 'env' => out})
    """
    done = subprocess.run(["ruby", "-e", script], input=json.dumps({"key": B64_2, "env": ours}),
                          capture_output=True, text=True, timeout=30, check=True)
    answer = json.loads(done.stdout)
    assert answer["plain"] == '{"n":1.0e+20,"s":"é\\n"}'  # Ruby's JSON.dump of the same value
    assert envelope.unseal(ring, answer["env"]) == {"from": "ruby", "x": [1, 2.5]}


# -- client side -------------------------------------------------------------------------


def test_push_stores_only_ciphertext(redis_db):  # ENT-603, ENT-606
    jid = ChargeCard.perform_async(7, CARD)
    raw, job = stored(redis_db)
    assert_no_plaintext(raw)
    assert job["jid"] == jid and job["encrypt"] is True
    assert job["args"][0] == 7  # earlier arguments stay in clear
    sealed = job["args"][1]
    assert envelope.is_envelope(sealed) and sealed["v"] == 2
    assert encryption.decrypt(sealed) == CARD


def test_scheduled_and_bulk_pushes_are_sealed_one_by_one(redis_db):
    ChargeCard.perform_in(600, 1, CARD)
    jids = ChargeCard.perform_bulk([[2, CARD], [3, {"number": "5555444433332222", "holder": "Bob Smith"}]])
    assert all(jids)
    for raw in redis_db.zrange("schedule", 0, -1) + redis_db.lrange("queue:default", 0, -1):
        assert_no_plaintext(raw)
        assert b"5555444433332222" not in raw
    ivs = {payload.loads(r)["args"][-1]["iv"] for r in redis_db.lrange("queue:default", 0, -1)}
    assert len(ivs) == 2


def test_repush_never_double_encrypts(redis_db):  # ENT-607
    ChargeCard.perform_async(7, CARD)
    raw, job = stored(redis_db)
    redis_db.delete("queue:default")
    job.pop("enqueued_at")
    Client().push(dict(job))  # what a retry promotion, the admin's Retry and the scheduler do
    _again_raw, again = stored(redis_db)
    assert again["args"][-1] == job["args"][-1]
    assert encryption.decrypt(again["args"][-1]) == CARD


def test_encrypt_without_keys_refuses_to_store_cleartext(redis_db):  # ENT-603
    with wurk_settings(ENCRYPTION=None):
        with pytest.raises(encryption.EncryptionError, match="refusing to store its last argument in clear"):
            ChargeCard.perform_async(7, CARD)
        assert redis_db.llen("queue:default") == 0
        with testing.fake():  # nothing reaches Redis: fine without keys
            ChargeCard.perform_async(7, CARD)
            assert testing.jobs(ChargeCard)[0]["args"] == [7, CARD]
            testing.clear_all()


def test_complex_secret_is_refused_without_being_quoted(redis_db):
    import datetime as dt

    secret = dt.datetime(2031, 5, 4, 3, 2, 1)
    with pytest.raises(ValueError) as info:
        ChargeCard.perform_async(7, {"expires": secret})
    assert "2031" not in str(info.value) and "datetime" in str(info.value)
    with pytest.raises(ValueError, match="2031"):  # earlier arguments are checked as usual
        ChargeCard.perform_async(secret, CARD)


def test_missing_active_key_fails_the_push(redis_db):  # ENT-606
    encryption.enable(5, {2: KEY2}.__getitem__)
    with pytest.raises(encryption.KeyMissingError, match="version 5"):
        ChargeCard.perform_async(7, CARD)
    assert redis_db.llen("queue:default") == 0


def test_code_enable_takes_precedence_over_the_setting(redis_db):  # ENT-601
    encryption.enable(1, {1: KEY1}.__getitem__)
    ChargeCard.perform_async(7, CARD)
    assert stored(redis_db)[1]["args"][-1]["v"] == 1


# -- server side -------------------------------------------------------------------------


def run_job(job: dict, job_class) -> context.JobContext:
    """The server chain around ``perform``, as the processor runs it, in the job's
    context (the bytes as fetched are ``job`` as it is now); the context afterwards."""
    from wurk_django.middleware import server_chain

    instance = job_class()
    instance.payload = job
    config = get_config()
    where = context.JobContext(config, get_redis(config=config), payload.dumps(job), queue=job["queue"], job=job)
    with context.scope(where):
        server_chain(config).invoke((instance, job, job["queue"]), lambda: instance.run(job["args"]))
    return where


def test_worker_side_decrypts_for_perform_and_puts_the_envelope_back(redis_db):  # ENT-608
    ChargeCard.perform_async(7, CARD)
    _raw, job = stored(redis_db)
    sealed = list(job["args"])
    run_job(job, ChargeCard)
    assert redis_db.lrange("test:charged", 0, -1) == [f"7:{fingerprint(CARD)}".encode()]
    assert job["args"] == sealed


def test_failure_is_retried_with_the_original_ciphertext_and_a_masked_message(redis_db):  # ENT-607, ENT-610
    DeclinedCard.perform_async(7, CARD)
    raw, job = stored(redis_db)
    with pytest.raises(ValueError) as info:
        run_job(job, DeclinedCard)
    assert_no_plaintext(str(info.value))
    assert str(info.value) == "card [encrypted data] declined for [encrypted data]"
    assert Retrier(get_config()).book(DeclinedCard, raw, "default", info.value) is Outcome.RETRIED
    retry_raw = redis_db.zrange("retry", 0, -1)[0]
    assert_no_plaintext(retry_raw)
    entry = payload.loads(retry_raw)
    assert entry["args"] == payload.loads(raw)["args"]  # the same envelope, not re-wrapped
    assert entry["error_message"] == "card [encrypted data] declined for [encrypted data]"


def test_a_message_that_cannot_be_cleaned_is_replaced(redis_db):
    from wurk_django.encryption.redaction import RedactedError

    OpaqueFailure.perform_async(7, CARD)
    _raw, job = stored(redis_db)
    with pytest.raises(RedactedError) as info:
        run_job(job, OpaqueFailure)
    assert_no_plaintext(str(info.value))
    assert "Opaque" in str(info.value) and info.value.__traceback__ is not None


def test_undecryptable_job_goes_dead_with_its_ciphertext(redis_db, caplog):  # ENT-608, ENT-609 step 5
    died = []
    ChargeCard.perform_async(7, CARD)
    raw, job = stored(redis_db)
    with wurk_settings(ENCRYPTION={"ACTIVE_VERSION": 3, "KEYS": {3: base64.b64encode(b"k" * 32).decode()}},
                       DEATH_HANDLERS=[lambda j, e: died.append((j["jid"], type(e).__name__))]):
        with caplog.at_level(logging.ERROR, logger="wurk_django.worker"):
            where = run_job(job, ChargeCard)
    assert where.outcome is Outcome.DEAD and isinstance(where.error, encryption.KeyMissingError)
    assert redis_db.llen("test:charged") == 0
    dead_raw = redis_db.zrange("dead", 0, -1)[0]
    assert_no_plaintext(dead_raw)
    dead = payload.loads(dead_raw)
    assert dead["args"] == payload.loads(raw)["args"]  # the ciphertext, intact
    assert dead["error_class"] == "wurk_django.encryption.DecryptionError"
    assert dead["error_message"] == "encryption_error: KeyMissingError: no key for version 2"
    assert isinstance(dead["failed_at"], int)
    assert died == [(job["jid"], "KeyMissingError")]
    assert "cannot be decrypted" in caplog.text
    # The dead entry can be retried once the key is back.
    assert next(iter(DeadSet())).retry()
    _raw, again = stored(redis_db)
    run_job(again, ChargeCard)
    assert redis_db.llen("test:charged") == 1


def test_tampered_job_goes_dead(redis_db):
    ChargeCard.perform_async(7, CARD)
    _raw, job = stored(redis_db)
    job["args"][-1]["ct"] = base64.b64encode(b"x" * 30).decode()
    assert run_job(job, ChargeCard).outcome is Outcome.DEAD
    dead = payload.loads(redis_db.zrange("dead", 0, -1)[0])
    assert dead["error_message"].startswith("encryption_error: DecryptionError: authentication failed")
    assert RetrySet().size == 0


def test_resolver_outage_retries_instead_of_killing(redis_db):  # ENT-602
    ChargeCard.perform_async(7, CARD)
    _raw, job = stored(redis_db)

    def kms_down(version):
        raise TimeoutError("KMS timeout")

    encryption.enable(2, kms_down)
    with pytest.raises(TimeoutError):
        run_job(job, ChargeCard)
    assert DeadSet().size == 0


# -- settings and system check -----------------------------------------------------------


@pytest.mark.parametrize(("setting", "message"), [
    ({"ACTIVE_VERSION": 1, "KEYS": {1: base64.b64encode(b"x" * 31).decode()}},
     "the key for version 1 is 31 bytes after base64 decoding, not 32"),
    ({"ACTIVE_VERSION": 1, "KEYS": {1: "@@not-base64@@"}}, "the key for version 1 is not standard base64"),
    ({"ACTIVE_VERSION": 2, "KEYS": {1: B64_1}}, "ACTIVE_VERSION 2 has no key in KEYS"),
    ({"ACTIVE_VERSION": 1}, "KEYS must be a dict"),
    ({"ACTIVE_VERSION": "one", "KEYS": {1: B64_1}}, "ACTIVE_VERSION must be an integer"),
    ({"ACTIVE_VERSION": 1, "KEYS": {1: B64_1}, "CIPHER": "cbc"}, "unknown key 'CIPHER'"),
    ("secret-key-in-a-string", "must be None or a dict"),
])
def test_system_check_rejects_bad_keys_without_quoting_them(setting, message):  # ENT-602
    from django.conf import settings

    from wurk_django.checks import check_settings

    with override_settings(WURK={**settings.WURK, "ENCRYPTION": setting}):
        errors = check_settings()
    assert [e.id for e in errors] == ["wurk.E007"]
    assert message in errors[0].msg
    text = errors[0].msg + str(errors[0].hint)
    assert "@@not" not in text and "secret-key" not in text and B64_1 not in text


def test_good_settings_pass_and_json_style_string_versions_work(redis_db):
    from wurk_django.checks import check_settings

    assert check_settings() == []
    with wurk_settings(ENCRYPTION={"ACTIVE_VERSION": "1", "KEYS": {"1": B64_1}}):
        assert check_settings() == []
        ChargeCard.perform_async(7, CARD)
    assert stored(redis_db)[1]["args"][-1]["v"] == 1
