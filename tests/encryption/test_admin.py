"""The admin never shows an encrypted argument, not even in a hidden form field (ENT-610, ENT-806)."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from tests.admin.conftest import BASE, enqueue, heartbeat, job, make_user
from tests.encryption.jobs import ChargeCard, DeclinedCard
from tests.support import wurk_settings
from wurk_django import encryption, payload
from wurk_django.conf import get_config
from wurk_django.encryption import envelope
from wurk_django.outcome import Outcome
from wurk_django.server.retry import Retrier

pytestmark = pytest.mark.django_db

KEYS = {"ACTIVE_VERSION": 1, "KEYS": {1: base64.b64encode(bytes(range(32))).decode()}}
CARD = {"number": "4242424242424242", "holder": "Ada Lovelace"}
LEGACY = "legacy-cleartext-9876"  # an encrypt job some older client stored without sealing it
PLAINTEXTS = ("4242424242424242", "Ada Lovelace", LEGACY)


@pytest.fixture
def admin_client(client, db):
    client.force_login(make_user("admin", superuser=True))
    return client


@pytest.fixture(autouse=True)
def keys():
    encryption.disable()
    with wurk_settings(ENCRYPTION=KEYS):
        yield


def fill(redis_db) -> None:
    ChargeCard.perform_async(1, CARD)
    enqueue(redis_db, job("tests.encryption.jobs.ChargeCard", args=[2, {"number": LEGACY}], encrypt=True))
    ChargeCard.perform_in(3600, 3, CARD)
    DeclinedCard.perform_async(4, CARD)
    raw = redis_db.lpop("queue:default")  # DeclinedCard, the newest
    assert Retrier(get_config()).book(DeclinedCard, raw, "default",
                                      ValueError("card [encrypted data] declined")) is Outcome.RETRIED
    DeclinedCard.set(retry=0).perform_async(5, CARD)
    raw = redis_db.lpop("queue:default")
    assert Retrier(get_config()).book(DeclinedCard, raw, "default", ValueError("declined")) is Outcome.DEAD
    # A Ruby-sealed argument without the encrypt flag is masked as well.
    sealed = envelope.seal(encryption.keyring.current(), CARD)
    enqueue(redis_db, job("Ruby::Charge", args=[6, sealed]))


def assert_clean(body: str) -> None:
    for plaintext in PLAINTEXTS:
        assert plaintext not in body


def test_every_page_masks_the_argument(admin_client, redis_db):
    fill(redis_db)
    assert redis_db.llen("queue:default") == 3 and redis_db.zcard("retry") == 1 and redis_db.zcard("dead") == 1
    sealed_jobs = [payload.loads(r) for r in redis_db.lrange("queue:default", 0, -1)]
    identity = heartbeat(redis_db, work={"tid1": sealed_jobs[1]})  # the legacy job, running
    assert identity
    bodies = {}
    for page in ("queues/default/", "scheduled/", "retries/", "dead/", "busy/", "queues/", ""):
        response = admin_client.get(BASE + page)
        assert response.status_code == 200, page
        bodies[page] = response.content.decode()
        assert_clean(bodies[page])
    shown = re.findall(r'<code class="wurk-args">(.*?)</code>', bodies["queues/default/"])
    # The legacy job's argument is plain text under an encrypt flag: hidden, but never
    # labelled as encrypted (issue 12 item 9).
    assert len(shown) == 3 and sorted("[encrypted data]" in s for s in shown) == [False, True, True]
    assert any("[hidden: stored unencrypted]" in s for s in shown)
    for kind in ("scheduled", "retries", "dead"):
        assert "[encrypted data]" in bodies[f"{kind}/"]
        keys = re.findall(rf'href="{re.escape(BASE)}{kind}/job/([^/"]+)/"', bodies[f"{kind}/"])
        assert keys, kind
        detail = admin_client.get(f"{BASE}{kind}/job/{keys[0]}/")
        assert detail.status_code == 200
        body = detail.content.decode()
        assert_clean(body)
        assert "[encrypted data]" in body
    assert "[hidden: stored unencrypted]" in bodies["busy/"]  # the running job is the legacy one


def test_queue_delete_form_carries_a_digest_not_the_payload(admin_client, redis_db):
    enqueue(redis_db, job("tests.encryption.jobs.ChargeCard", args=[2, {"number": LEGACY}], encrypt=True))
    ChargeCard.perform_async(1, CARD)
    body = admin_client.get(BASE + "queues/default/").content.decode()
    assert_clean(body)
    assert 'name="key_val"' not in body
    digests = re.findall(r'name="digest" value="([0-9a-f]{64})"', body)
    stored = redis_db.lrange("queue:default", 0, -1)
    assert digests == [hashlib.sha256(raw).hexdigest() for raw in stored]
    admin_client.post(BASE + "queues/default/delete/", {"digest": digests[1]})
    assert redis_db.lrange("queue:default", 0, -1) == [stored[0]]
    response = admin_client.post(BASE + "queues/default/delete/", {"digest": digests[1]}, follow=True)
    assert "no longer in the queue" in response.content.decode()
    assert redis_db.llen("queue:default") == 1
