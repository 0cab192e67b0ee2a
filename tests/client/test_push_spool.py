"""The push spool's file handling (issue 43 item 2): claims across processes, a dead
claimer's file, what a file records and which folders it refuses. Against the
suite's Redis database; the real-process scenario is tests/hostile/test_push_spool.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.support import ROOT
from wurk_django import payload
from wurk_django.client import push_spool
from wurk_django.conf import Config


@pytest.fixture
def spool(tmp_path):
    folder = tmp_path / "spool"
    folder.mkdir(mode=0o700)
    return folder


@pytest.fixture
def config(spool):
    from django.conf import settings

    return Config(raw={"REDIS_URL": settings.WURK_TEST_REDIS_URL, "RELIABLE_PUSH_SPOOL": str(spool)})


def _job(name: str) -> dict:
    return {"class": "X", "args": [name], "queue": "default", "jid": payload.new_jid(), "retry": True,
            "created_at": payload.now_ms()}


def _queued(redis_db) -> list[str]:
    return [payload.loads(raw)["args"][0] for raw in reversed(redis_db.lrange("queue:default", 0, -1))]


def test_a_saved_file_is_pushed_once_in_order_with_its_commands(config, spool, redis_db):
    path = push_spool.save(config, [([_job("a"), _job("b")], [("SET", "k", b"\x00\xff"), ("EXPIRE", "k", 60)], False),
                                    ([_job("c")], [], False)])
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert push_spool.resume(config) == 3
    assert _queued(redis_db) == ["a", "b", "c"]
    assert redis_db.get("k") == b"\x00\xff" and 0 < redis_db.ttl("k") <= 60  # bytes survive the file
    assert list(spool.iterdir()) == []
    assert push_spool.resume(config) == 0  # nothing twice


def test_many_processes_claiming_at_once_push_each_file_once(config, spool, redis_db):
    for n in range(8):
        push_spool.save(config, [([_job(f"f{n}-{k}") for k in range(5)], [], False)])
    start = time.time() + 1.5  # every claimer starts at the same moment
    script = (f"import time, django\ndjango.setup()\nfrom wurk_django.client import push_spool\n"
              f"from wurk_django.conf import Config\n"
              f"config = Config(raw={{'REDIS_URL': {config.redis_url!r}, 'RELIABLE_PUSH_SPOOL': {str(spool)!r}}})\n"
              f"time.sleep(max({start} - time.time(), 0))\nprint(push_spool.resume(config))\n")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    procs = [subprocess.Popen([sys.executable, "-c", script], cwd=str(ROOT), env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [proc.communicate(timeout=60) for proc in procs]
    counts = [int(out.strip() or -1) for out, _err in outputs]
    assert sum(counts) == 40, outputs
    queued = _queued(redis_db)
    assert len(queued) == 40 and len(set(queued)) == 40  # each job once
    assert list(spool.iterdir()) == []


def test_a_dead_claimers_file_is_taken_over_for_what_it_did_not_deliver(config, spool, redis_db):
    """A claimer recorded its first push as delivered, then died (its lock went with it)
    while writing the next record: the next process pushes only the rest."""
    path = push_spool.save(config, [([_job("delivered")], [], False), ([_job("left")], [], False)])
    claimed = spool / path.name.replace("push-", "claimed-", 1)
    os.rename(path, claimed)
    with open(claimed, "ab") as out:
        out.write(b'{"done":0}\n{"do')  # the torn last line is ignored
    assert push_spool.resume(config) == 1
    assert _queued(redis_db) == ["left"]
    assert list(spool.iterdir()) == []


def test_a_file_being_pushed_by_a_live_process_is_left_to_it(config, spool, redis_db):
    import fcntl

    path = push_spool.save(config, [([_job("held")], [], False)])
    with open(path, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as a claimer holds it while it pushes
        assert push_spool.resume(config) == 0
    assert push_spool.resume(config) == 1


def test_a_file_saying_another_redis_than_its_name_is_moved_aside(config, spool, redis_db, caplog):
    path = push_spool.save(config, [([_job("x")], [], False)])
    lines = path.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    header["target"] = "redis://elsewhere:6379/0"
    path.write_bytes(b"\n".join([json.dumps(header).encode(), *lines[1:]]))
    assert push_spool.resume(config) == 0
    assert [p.name for p in spool.iterdir()] == [f"corrupt-{path.name}"]
    assert "it says it is for Redis redis://elsewhere:6379/0" in caplog.text
    assert redis_db.llen("queue:default") == 0


@pytest.mark.parametrize("content", [b"", b"\n", b"[]\n", b'{"wurk_django_push_spool": 1}\n',
                                     b'{"wurk_django_push_spool": 1, "target": "t"}\n{"group": 5, "jobs": []}\n',
                                     b'{"wurk_django_push_spool": 1, "target": "t"}\n{"group": 0, "jobs": [1], '
                                     b'"extra": [], "front": false}\n',
                                     b'{"wurk_django_push_spool": 1, "target": "t"}\n{"done": 0}\n',
                                     b'{"wurk_django_push_spool": 1, "target": "t"}\n{"group": 0, "jobs": [], '
                                     b'"extra": [[{"x": 1}]], "front": false}\n'])
def test_what_parse_refuses(content):
    with pytest.raises(push_spool.SpoolCorrupt):
        push_spool.parse(content)


def test_the_recorded_target_names_the_redis_without_its_password():
    key = push_spool.target_key(Config(raw={"REDIS_URL": "redis://user:secret@Redis.Example:6380/4"}))
    assert key == "redis://user@redis.example:6380/4"
    assert push_spool.target_key(Config(raw={"REDIS_URL": "redis://localhost"})) == "redis://localhost:6379/0"
    options = Config(raw={"REDIS": {"URL": "redis://h/1", "OPTIONS": {"db": 2, "password": "p"}}})
    assert push_spool.target_key(options) == "redis://h:6379/2"
    sentinel = Config(raw={"REDIS": {"SENTINELS": [("s2", 26379), ("s1", 26379)], "SERVICE": "mymaster"}})
    assert push_spool.target_key(sentinel) == "sentinel://s1:26379,s2:26379/mymaster/0"


def test_a_folder_every_user_may_write_to_is_refused(tmp_path, caplog):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    config = Config(raw={"REDIS_URL": "redis://127.0.0.1:1/0", "RELIABLE_PUSH_SPOOL": str(shared)})
    with pytest.raises(OSError, match="writable by every user"):
        push_spool.save(config, [([_job("x")], [], False)])
    assert push_spool.resume(config) == 0  # nor read from
    assert list(shared.iterdir()) == []


def test_the_default_folder_is_private_to_the_user(monkeypatch, tmp_path):
    from tests.conftest import SYSTEM_DEFAULT_SPOOL

    monkeypatch.setattr(push_spool, "default_dir", SYSTEM_DEFAULT_SPOOL)  # the suite points it at a folder of its own
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    config = Config(raw={"REDIS_URL": "redis://127.0.0.1:1/0", "RELIABLE_PUSH_SPOOL": True})
    assert push_spool.directory(config) == tmp_path / f"wurk_django-push-spool-{os.geteuid()}"
    path = push_spool.save(config, [([_job("x")], [], False)])
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
    path.parent.chmod(0o750)  # a group may read it: not private any more
    with pytest.raises(OSError, match="not private"):
        push_spool.save(config, [([_job("y")], [], False)])


def test_spooling_off():
    config = Config(raw={"REDIS_URL": "redis://127.0.0.1:1/0", "RELIABLE_PUSH_SPOOL": False})
    assert push_spool.directory(config) is None
    with pytest.raises(OSError, match="spooling is off"):
        push_spool.save(config, [([_job("x")], [], False)])
