"""Which settings a worker on a Redis Cluster refuses at boot (issue 46 stage 3), without a cluster:
the real boot is tests/topologies/test_cluster_worker.py."""

from __future__ import annotations

from wurk_django.conf import Config
from wurk_django.server import cluster_boot


def test_the_core_settings_are_not_refused():
    raw = {"REDIS_URL": "redis://node:7000/0", "CONCURRENCY": 5, "QUEUES": ["a", "b"], "TIMEOUT": 8,
           "PERIODIC": [], "UNIQUE_JOBS": True, "RELIABLE_PUSH_SPOOL": False}  # unique jobs: issue 46 item 3
    assert cluster_boot.refusal(raw, Config(raw=raw)) is None


def test_a_custom_fetcher_is_named_in_one_line_with_the_server_without_its_password():
    raw = {"REDIS_URL": "redis://user:s3cret@node:7000/0", "FETCH_CLASS": "my.Fetch", "QUEUE_LIMITS": {"a": 2}}
    line = cluster_boot.refusal(raw, Config(raw={"REDIS_URL": raw["REDIS_URL"]}), swarm=True, burst=True)
    assert line is not None and "\n" not in line
    for named in ("a custom fetcher (WURK['FETCH_CLASS'])", "cluster_enabled:1", "hash slots",
                  "redis://user@node:7000/0", "docs/redis.md#redis-cluster"):
        assert named in line
    assert "s3cret" not in line
    assert "queue limits" not in line and "swarm" not in line and "--burst" not in line


def test_capsules_a_swarm_queue_limits_the_memory_limit_and_burst_run_on_a_cluster():
    # Issue 46 item 3: converted (tests/topologies/test_cluster_processes.py runs them on a real cluster).
    raw = {"REDIS_URL": "redis://node:7000/0", "CAPSULES": {"x": {"queues": ["c9"], "concurrency": 1}},
           "SWARM": [{"count": 2}], "QUEUE_LIMITS": {"a": 2}, "MEMORY_LIMIT_MB": 500}
    assert cluster_boot.refusal(raw, Config(raw=raw), swarm=True, burst=True) is None
    assert set(cluster_boot.UNCONVERTED) == {"FETCH_CLASS"}


def test_leader_periodic_jobs_and_a_limiters_redis_are_not_refused():
    # Issue 46 item 3: converted to the cluster layout (tests/topologies/test_cluster_periodic.py,
    # tests/topologies/test_cluster_limiters.py run them on a real cluster).
    raw = {"REDIS_URL": "redis://node:7000/0", "LEADER": {"TTL": 10, "RENEW_INTERVAL": 3},
           "PERIODIC": [{"cron": "* * * * *", "job": "tests.jobsapp.jobs.CronRecordJob"}],
           "LIMITER_REDIS": {"POOL_SIZE": 3}}
    assert cluster_boot.refusal(raw, Config(raw={"REDIS_URL": raw["REDIS_URL"]})) is None
    assert not {"PERIODIC", "LEADER", "LIMITER_REDIS"} & set(cluster_boot.UNCONVERTED)


def test_history_statsd_and_the_health_port_run_on_a_cluster():
    # Issue 46 item 3: converted (tests/topologies/test_cluster_worker.py runs them on a real cluster).
    raw = {"REDIS_URL": "redis://node:7000/0", "HISTORY": {"ROLLUP_INTERVAL": 5},
           "STATSD": {"HOST": "127.0.0.1", "PORT": 8125}, "HEALTH_PORT": 7433}
    assert cluster_boot.refusal(raw, Config(raw=raw)) is None
    assert not {"HISTORY", "STATSD", "HEALTH_PORT"} & set(cluster_boot.UNCONVERTED)
