"""TLS (issue 18 item 1): ``rediss://`` URLs and a Redis cache's SSL options, with the
certificate chain and the host name checked by default, against a redis-server
listening on a TLS port only with certificates made here; a worker process runs
jobs over it."""

from __future__ import annotations

import pytest
import redis as redis_lib

from tests.redis_servers import TLSRedis, certificates
from tests.support import WorkerProcess, wait_for
from wurk_django import payload
from wurk_django.client.writer import Writer
from wurk_django.conf import Config
from wurk_django.redis import connection
from wurk_django.redis.connection import get_redis, probe_redis


@pytest.fixture(scope="module")
def tls():
    server = TLSRedis()
    # Also on 127.0.0.2, an address the certificate does not name.
    server.server.args = (*server.server.args, "--bind", "127.0.0.1 127.0.0.2")
    server.start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def clean(tls):
    tls.client(1).flushdb()
    yield
    connection.reset()


def _config(url: str, **options) -> Config:
    return Config(raw={"REDIS": {"URL": url, "OPTIONS": options}, "TAG": "t"})


def _job(**extra) -> dict:
    return {"class": "X", "args": [1], "queue": "default", "jid": payload.new_jid(), "created_at": payload.now_ms(),
            **extra}


def test_a_rediss_url_with_its_ca_pushes_over_tls(tls):
    config = _config(tls.url(1), ssl_ca_certs=tls.certs["ca.crt"])
    job = _job()
    Writer(config).push([job])
    assert payload.loads(tls.client(1).lpop("queue:default"))["jid"] == job["jid"]
    conn = get_redis(config=config).connection_pool.get_connection()
    try:
        assert isinstance(conn, redis_lib.SSLConnection)
        assert conn.cert_reqs == __import__("ssl").CERT_REQUIRED and conn.check_hostname is True
    finally:
        get_redis(config=config).connection_pool.release(conn)


def test_a_certificate_from_another_ca_is_refused(tls, tmp_path):
    other = certificates(tmp_path / "other", name="another CA")
    config = _config(tls.url(1), ssl_ca_certs=other["ca.crt"])
    with pytest.raises(redis_lib.ConnectionError, match="certificate verify failed"):
        Writer(config).push([_job()])
    probe = probe_redis(config, timeout=2)
    with pytest.raises(redis_lib.ConnectionError, match="certificate verify failed"):
        probe.ping()
    probe.connection_pool.disconnect()
    assert tls.client(1).llen("queue:default") == 0


def test_without_a_ca_the_system_store_refuses_a_private_ca(tls):
    with pytest.raises(redis_lib.ConnectionError, match="certificate verify failed"):
        Writer(_config(tls.url(1))).push([_job()])


def test_the_host_name_is_checked_by_default(tls):
    """127.0.0.2 is the same server, but its certificate names 127.0.0.1 and localhost."""
    url = f"rediss://127.0.0.2:{tls.port}/1"
    with pytest.raises(redis_lib.ConnectionError, match="IP address mismatch|hostname|match"):
        get_redis(config=_config(url, ssl_ca_certs=tls.certs["ca.crt"])).ping()
    # Turning the check off is an explicit choice in OPTIONS (or ?ssl_check_hostname=false).
    assert get_redis(config=_config(url, ssl_ca_certs=tls.certs["ca.crt"], ssl_check_hostname=False)).ping()


@pytest.mark.parametrize("form", ["django-redis", "django"])
def test_a_redis_cache_ssl_options_are_used(tls, settings, form, tmp_path):
    ca = tls.certs["ca.crt"]
    if form == "django-redis":
        cache = {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": tls.url(1),
                 "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient",
                             "CONNECTION_POOL_KWARGS": {"ssl_ca_certs": ca, "max_connections": 3}}}
    else:
        cache = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": tls.url(1),
                 "OPTIONS": {"ssl_ca_certs": ca}}
    settings.CACHES = {**settings.CACHES, "jobs": cache}
    config = Config(raw={"REDIS": {"CACHE": "jobs"}, "TAG": "t"})
    assert config.redis_options == {"ssl_ca_certs": ca}
    job = _job()
    Writer(config).push([job])
    assert payload.loads(tls.client(1).lpop("queue:default"))["jid"] == job["jid"]
    # The cache's verification settings are honoured as given: a wrong CA is refused.
    other = certificates(tmp_path / "other", name="another CA")["ca.crt"]
    settings.CACHES = {**settings.CACHES, "bad": {**cache, "OPTIONS": {"ssl_ca_certs": other}}}
    with pytest.raises(redis_lib.ConnectionError, match="certificate verify failed"):
        Writer(Config(raw={"REDIS": {"CACHE": "bad"}, "TAG": "t"})).push([_job()])


def test_a_worker_process_runs_jobs_over_tls(tls):
    url = f"{tls.url(1)}?ssl_ca_certs={tls.certs['ca.crt']}"
    config = _config(url)
    jobs = [{"class": "tests.jobsapp.jobs.RecordJob", "args": [f"tls-{i}"], "queue": "default",
             "jid": payload.new_jid(), "created_at": payload.now_ms()} for i in range(20)]
    Writer(config).push(jobs)
    worker = WorkerProcess("-c", "3", env={"WURK_TEST_REDIS_URL": url,
                                           "WURK_TEST_EXTRA": '{"FETCH_POLL_INTERVAL": 0.5}'})
    try:
        plain = tls.client(1)
        wait_for(lambda: plain.llen("test:ran") == 20, timeout=30, message="20 jobs run over TLS")
        assert sorted(v.decode() for v in plain.lrange("test:ran", 0, -1)) == sorted(f"tls-{i}" for i in range(20))
        assert plain.llen("queue:default") == 0
        assert "Traceback" not in worker.output()
    finally:
        worker.stop()
    assert worker.proc.returncode == 0, worker.output()
