"""wurk_django/keys.py: the Redis key formats, as Sidekiq (Pro/Ent) lays them out (CORE-060..079, PRO-110)."""

from __future__ import annotations

import ast
from datetime import UTC, date, datetime

from tests.support import PACKAGE
from wurk_django import keys


def test_core_keys():
    """CORE-001: keys carry no namespace prefix."""
    assert (keys.QUEUES, keys.SCHEDULE, keys.RETRY, keys.DEAD, keys.PROCESSES) == (
        "queues", "schedule", "retry", "dead", "processes")
    assert keys.queue("mail") == "queue:mail"
    assert (keys.stat("processed"), keys.stat_on("failed", "2025-02-14")) == ("stat:processed", "stat:failed:2025-02-14")
    assert keys.stat_processed_on("2025-02-14") == "stat:processed:2025-02-14"
    identity = "web.1:42:0123456789ab"
    assert keys.process(identity) == identity
    assert (keys.work(identity), keys.signals_list(identity)) == (f"{identity}:work", f"{identity}-signals")
    assert keys.iteration("abc") == "it-abc"
    assert (keys.PAUSED, keys.LEADER, keys.PROCESS_CLEANUP, keys.PROFILES) == (
        "paused", "dear-leader", "process_cleanup", "profiles")


def test_metrics_and_deploy_keys():
    moment = datetime(2025, 2, 4, 8, 3, tzinfo=UTC)
    assert keys.metrics_minute(moment) == "j|250204|8:03"
    assert keys.metrics_ten_minutes(moment) == "j|250204|8:0"
    assert keys.metrics_histogram("App::HardJob", moment) == "h|App::HardJob-4-8:3"
    assert keys.deploy_marks(date(2025, 2, 14)) == "20250214-marks"
    assert keys.deploy_lock("abc123 fix") == "deploylock-abc123 fix"


def test_reliable_fetch_keys():
    assert keys.private_queue("default", "web.1", 42, "0123456789ab") == "queue:default|web.1|42|0123456789ab|0"
    assert keys.private_pattern("default") == "queue:default|*" and keys.PRIVATE_ALL == "queue:*|*"
    assert keys.recovered("j1") == "super_fetch:recovered:j1"
    assert (keys.REAPER_LOCK, keys.REAPER_FULL_LOCK) == ("super_fetch:reaper", "super_fetch:reaper:full")


def test_keys_imports_nothing_from_the_package():
    """Any module may import keys.py without risking an import circle."""
    tree = ast.parse((PACKAGE / "keys.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and not (node.module or "").startswith("wurk_django"), ast.dump(node)
