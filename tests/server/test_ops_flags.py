"""Worker flags for operators (DJ-040, CORE-151, RUN-110 health, USR2): real worker processes."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.jobsapp.jobs import PidJob, RecordJob
from tests.support import RedisServer, WorkerProcess, free_port, wait_for

pytestmark = pytest.mark.slow

# Never fixed ports: the CI runs two suites side by side.
HEALTH_PORT, HEALTH_PORT_2, HEALTH_PORT_3, PRIVATE_REDIS_PORT = (free_port() for _ in range(4))


def _get(path: str, port: int = HEALTH_PORT) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except (urllib.error.URLError, ConnectionError):
        return 0, {}


def test_pidfile_written_and_removed(redis_db, worker_factory, tmp_path):
    pidfile = tmp_path / "wurk.pid"
    worker = worker_factory("-c", "1", "--pidfile", str(pidfile))
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() == str(worker.pid), message="the pidfile")
    assert worker.stop() == 0
    assert not pidfile.exists()


def test_pidfile_naming_a_live_process_is_refused(redis_db, worker_factory, tmp_path):
    pidfile = tmp_path / "wurk.pid"
    pidfile.write_text(f"{os.getpid()}\n")  # this test process is alive
    worker = worker_factory("-c", "1", "--pidfile", str(pidfile))
    assert worker.wait(30) == 1
    assert f"names running process {os.getpid()}" in worker.output()
    assert pidfile.read_text().strip() == str(os.getpid())


def test_pidfile_refused_for_a_swarm(redis_db, worker_factory, tmp_path):
    worker = worker_factory("--processes", "2", "--pidfile", str(tmp_path / "p"))
    assert worker.wait(30) == 1
    assert "--pidfile runs with a single process" in worker.output()


def test_health_probes_follow_quiet_and_stop(redis_db, worker_factory):
    worker = worker_factory("-c", "2", "--health-port", str(HEALTH_PORT))
    wait_for(lambda: _get("/ready")[0] == 200, message="ready")
    status, body = _get("/live")
    assert status == 200 and body["status"] == "ok"
    assert _get("/nope")[0] == 404
    worker.signal(signal.SIGTSTP)
    wait_for(lambda: _get("/ready")[0] == 503, message="not ready once quiet")
    assert _get("/ready")[1]["reasons"] == ["quiet"]
    assert _get("/live")[0] == 503 and _get("/live")[1]["reasons"] == ["quiet"]  # RUN-201
    assert worker.stop() == 0
    assert _get("/live")[0] == 0  # the port is closed with the process


def test_ready_follows_redis(worker_factory, redis_db):
    class PrivateRedis(RedisServer):
        def __init__(self) -> None:
            super().__init__()
            self.port = PRIVATE_REDIS_PORT
            self.url = f"redis://127.0.0.1:{self.port}/0"

    server = PrivateRedis()
    server.start()
    try:
        extra = json.dumps({"REDIS_URL": server.url})
        worker = worker_factory("-c", "1", "--health-port", str(HEALTH_PORT_2), env={"WURK_TEST_EXTRA": extra})
        wait_for(lambda: _get("/ready", HEALTH_PORT_2)[0] == 200, timeout=30, message="ready")
        server.stop()
        wait_for(lambda: _get("/ready", HEALTH_PORT_2)[0] == 503, message="not ready without Redis")
        assert any(r.startswith("redis:") for r in _get("/ready", HEALTH_PORT_2)[1]["reasons"])
        assert _get("/live", HEALTH_PORT_2)[0] == 200
        server.start()
        wait_for(lambda: _get("/ready", HEALTH_PORT_2)[0] == 200, timeout=30, message="ready again")
        assert worker.stop() == 0
    finally:
        server.stop()


def test_max_jobs_standalone_exits_cleanly_after_n(redis_db, worker_factory):
    for i in range(5):
        RecordJob.perform_async(i)
    worker = worker_factory("-c", "2", "--max-jobs", "3")
    assert worker.wait(30) == 0
    assert len(redis_db.lrange("test:ran", 0, -1)) == 3
    assert redis_db.llen("queue:default") == 2  # the rest wait for the next process
    assert redis_db.scard("processes") == 0
    assert "--max-jobs" in worker.output()


def test_max_jobs_recycles_a_swarm_child(redis_db, worker_factory):
    for i in range(6):
        PidJob.perform_async(f"m{i}")
    worker = worker_factory("--processes", "1", "-c", "1", "--max-jobs", "2")
    rows = wait_for(lambda: len(redis_db.lrange("test:pids", 0, -1)) == 6 and redis_db.lrange("test:pids", 0, -1),
                    timeout=60, message="six jobs across recycled children")
    pids = [row.decode().split(":")[1] for row in rows]
    assert len(set(pids)) == 3 and all(pids.count(p) == 2 for p in set(pids))
    assert worker.alive()
    assert worker.stop() == 0
    assert "recycled itself" in worker.output()


def test_process_title_shows_busy_of_total(redis_db, worker_factory):
    worker = worker_factory("-c", "2")
    comm = Path(f"/proc/{worker.pid}/comm")
    try:
        import setproctitle  # noqa: F401
        pytest.skip("setproctitle installed: the full title is in the cmdline, checked elsewhere")
    except ImportError:
        pass
    wait_for(lambda: comm.read_text().strip() == "wurk 0/2", message="the short title")
    worker.signal(signal.SIGTSTP)
    wait_for(lambda: comm.read_text().strip() == "wurk stopping", timeout=15, message="stopping in the title")
    assert worker.stop() == 0


def test_usr2_reopens_log_files(redis_db, tmp_path):
    log = tmp_path / "worker.log"
    worker = WorkerProcess("-c", "1", settings="tests.server.settings_ops", env={"WURK_TEST_LOGFILE": str(log)})
    try:
        wait_for(lambda: log.exists() and "started" in log.read_text(), message="the log file")
        log.rename(tmp_path / "worker.log.1")  # what logrotate does
        worker.signal(signal.SIGUSR2)
        wait_for(lambda: log.exists() and "reopened 1 log file" in log.read_text(), message="a new log file")
        RecordJob.perform_async("after")
        wait_for(lambda: "done" in log.read_text(), message="job lines in the new file")
        assert "reopened" not in (tmp_path / "worker.log.1").read_text()
    finally:
        assert worker.stop() == 0


def test_reload_restarts_on_code_change(redis_db, tmp_path):
    probe = tmp_path / "wurk_reload_probe.py"
    probe.write_text("VALUE = 1\n")
    env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "WURK_TEST_PROBE_MODULE": "wurk_reload_probe"}
    worker = WorkerProcess("-c", "1", "--reload", settings="tests.server.settings_ops", env=env)
    try:
        wait_for(lambda: _banner_pids(worker.output()), timeout=30, message="the first worker")
        first = _banner_pids(worker.output())
        time.sleep(1.5)  # the watcher's first snapshot
        probe.write_text("VALUE = 2\n")
        os.utime(probe, (time.time() + 5, time.time() + 5))
        wait_for(lambda: len(_banner_pids(worker.output())) >= 2, timeout=40, message="a restarted worker")
        pids = _banner_pids(worker.output())
        assert pids[0] == first[0] and pids[1] != pids[0]
        assert "changed: restarting the worker" in worker.output()
        RecordJob.perform_async("after-reload")
        wait_for(lambda: redis_db.lrange("test:ran", 0, -1) == [b"after-reload"], message="a job after reload")
    finally:
        code = worker.stop(timeout=30)  # TERM to the watcher is passed on to the worker
    assert code == 0
    for pid in _banner_pids(worker.output()):
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


def _banner_pids(text: str) -> list[str]:
    pids = []
    for line in text.splitlines():
        if "INFO: wurk_django " in line and " pid " in line:
            pids.append(line.split(" pid ")[-1].split(",")[0])
    return pids


def test_bad_flag_values_exit_1(redis_db, worker_factory):
    for args, message in ((("--max-jobs", "0"), "must be at least 1"), (("--health-port", "70000"), "TCP port")):
        worker = worker_factory(*args)
        assert worker.wait(30) == 1
        assert message in worker.output()


def test_swarm_children_share_the_health_port(redis_db, worker_factory):
    port = HEALTH_PORT_3
    worker = worker_factory("--processes", "2", "-c", "1", "--health-port", str(port))
    status, body = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(_get("/ready", port)), timeout=40,
                            message="a ready child")
    owner = body["identity"]
    owner_pid = int(owner.split(":")[1])
    assert owner_pid != worker.pid  # a child answers, never the supervisor
    os.kill(owner_pid, signal.SIGKILL)
    # The other child (or the replacement) takes the port within its 5 s retry.
    _status, body = wait_for(lambda: (lambda r: r if r[0] == 200 and r[1]["identity"] != owner else None)(
        _get("/live", port)), timeout=40, message="another child on the port")
    assert int(body["identity"].split(":")[1]) not in (owner_pid, worker.pid)
    assert worker.stop(timeout=30) == 0
