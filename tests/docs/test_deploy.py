"""The deployment artefacts of docs/deploy/, each checked for what it claims.

* the systemd units pass ``systemd-analyze verify`` without a warning, their
  timeouts cover the worker's drain, and their exact ``ExecStart`` line, run
  here, tells a stand-in notify socket READY=1, pings the watchdog and says
  STOPPING=1 on the unit's ``KillSignal``;
* the Dockerfile passes hadolint; the entrypoint passes shellcheck and, run with
  ``sh`` as the image runs it, hands TERM and TSTP to the process it starts and
  that process's exit status back; the image's HEALTHCHECK command, run against
  a real worker, passes while it fetches and fails once it is quiet;
* the Kubernetes manifests validate against the Kubernetes JSON schemas
  (offline, strict: an unknown field fails), their probes, ports and grace
  periods agree with the worker's, and the autoscaler asks for a series the
  admin's Prometheus endpoint really exports.

Every process is started here and stopped by its pid.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.local_redis import free_port
from tests.support import ROOT, stop_process, wait_for
from wurk_django.conf import Config
from wurk_django.server.run.manager import HARD_SHUTDOWN_WAIT
from wurk_django.server.swarm.slots import SHUTDOWN_GRACE

DEPLOY = ROOT / "docs" / "deploy"
UNITS = ["wurk@.service", "wurk.service"]
BIN = Path(sys.executable).parent  # where pip put hadolint and shellcheck (the test extra)


def _tool(name: str) -> str:
    found = shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]' installs it)")
    return found


def _env(**extra: str) -> dict[str, str]:
    """A worker's environment: the test settings, this interpreter's `python` first on PATH."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONUNBUFFERED": "1", **extra}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        if name not in extra:
            env.pop(name, None)
    return env


# -- systemd ---------------------------------------------------------------------------


def _unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # systemd's keys are case-sensitive
    parser.read_string((DEPLOY / name).read_text())
    return parser


def _seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+)(s|min)?", value)
    assert match, f"a plain number of seconds or minutes, not {value!r}"
    return int(match.group(1)) * (60 if match.group(2) == "min" else 1)


def _verify(unit_dir: Path, name: str) -> subprocess.CompletedProcess:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    return subprocess.run([analyze, "verify", str(unit_dir / name)], capture_output=True, text=True, timeout=60)


def _runnable_copy(name: str, tmp_path: Path, text: str | None = None) -> Path:
    """The unit with its ExecStart binary pointed at a real file (verify checks that it
    exists and is executable), everything else byte for byte."""
    text = (DEPLOY / name).read_text() if text is None else text
    binary = shlex.split(_unit(name)["Service"]["ExecStart"])[0]
    (tmp_path / name).write_text(text.replace(binary, sys.executable))
    return tmp_path


@pytest.mark.parametrize("name", UNITS)
def test_unit_passes_systemd_analyze_verify(name, tmp_path):
    result = _verify(_runnable_copy(name, tmp_path), name)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_verify_would_catch_a_mistake(tmp_path):
    # verify exits 0 on an unknown key: its warnings are what the test above must see.
    broken = (DEPLOY / "wurk.service").read_text().replace("KillMode=mixed", "KillMode=mixd")
    result = _verify(_runnable_copy("wurk.service", tmp_path, broken), "wurk.service")
    assert "mixd" in result.stderr


@pytest.mark.parametrize("name", UNITS)
def test_unit_waits_for_readiness_and_covers_the_drain(name):
    service = _unit(name)["Service"]
    assert service["Type"] == "notify"
    assert service.get("NotifyAccess", "main") == "main"  # only the main process speaks
    assert service["KillSignal"] == "SIGTERM"
    assert service["KillMode"] == "mixed"
    assert service["Restart"] == "always"  # --max-jobs exits 0 on purpose
    assert service["ExecReload"] == "/bin/kill -USR2 $MAINPID"  # the worker reopens its logs on USR2
    swarm = "--processes" in service["ExecStart"]
    # The worker's own budget before it exits: the drain, then the requeue (standalone)
    # or the supervisor's KILL of its children (swarm).
    budget = Config().timeout + (SHUTDOWN_GRACE if swarm else HARD_SHUTDOWN_WAIT)
    assert _seconds(service["TimeoutStopSec"]) > budget + 5


@pytest.mark.slow
@pytest.mark.parametrize("name", UNITS)
def test_units_exec_start_notifies_systemd(name, notify_socket, tmp_path):
    """The unit's own command line, with the test's interpreter and settings."""
    service = _unit(name)["Service"]
    argv = shlex.split(service["ExecStart"].replace("%i", "1"))
    argv[0] = sys.executable
    watchdog = _seconds(service["WatchdogSec"])
    env = _env(NOTIFY_SOCKET=notify_socket.address, WATCHDOG_USEC=str(int(watchdog * 1_000_000)))
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        pid, _ready = notify_socket.wait_for("READY=1", timeout=_seconds(service["TimeoutStartSec"]) / 2)
        assert pid == proc.pid
        # The first ping comes within half of WatchdogSec (sd_watchdog_enabled(3)).
        pid, _ping = notify_socket.wait_for("WATCHDOG=1", timeout=watchdog / 2 + 1)
        assert pid == proc.pid
        os.kill(proc.pid, signal.Signals[service["KillSignal"]])
        notify_socket.wait_for("STOPPING=1")
        assert proc.wait(_seconds(service["TimeoutStopSec"])) == 0, log.read_text()
        assert {pid for pid, _message in notify_socket.received} == {proc.pid}
    finally:
        stop_process(proc, signal.SIGKILL, 5)


# -- the container ---------------------------------------------------------------------


def test_dockerfile_passes_hadolint():
    result = subprocess.run([_tool("hadolint"), "--no-color", str(DEPLOY / "Dockerfile")],
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_hadolint_would_catch_a_mistake(tmp_path):
    root_image = (DEPLOY / "Dockerfile").read_text().replace("USER 10001:10001\n", "USER root\n")
    (tmp_path / "Dockerfile").write_text(root_image)
    result = subprocess.run([_tool("hadolint"), "--no-color", str(tmp_path / "Dockerfile")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "DL3002" in result.stdout  # the last USER is root


def _dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", (DEPLOY / "Dockerfile").read_text())
    return [tuple(line.split(None, 1)) for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_image_runs_as_a_user_and_stops_the_worker_with_term():
    instructions = dict(_dockerfile())
    user = instructions["USER"].split(":")[0]
    assert user.isdigit() and int(user) != 0  # numeric: a runAsNonRoot pod can check it
    assert instructions["STOPSIGNAL"] == "SIGTERM"
    assert json.loads(instructions["ENTRYPOINT"]) == ["docker-entrypoint.sh"]
    assert json.loads(instructions["CMD"]) == ["worker"]


def test_entrypoint_passes_shellcheck():
    result = subprocess.run([_tool("shellcheck"), "--shell=sh", str(DEPLOY / "docker-entrypoint.sh")],
                            capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


#: Records each signal it gets in a file; exits with 7 on TERM (after a recorded TSTP).
SIGNAL_RECORDER = textwrap.dedent("""
    import signal, sys, time
    record = open(sys.argv[1], "a", buffering=1)
    def on(signum, frame):
        record.write(signal.Signals(signum).name + "\\n")
        if signum == signal.SIGTERM:
            sys.exit(7)
    for sig in (signal.SIGTERM, signal.SIGTSTP, signal.SIGINT):
        signal.signal(sig, on)
    record.write("started\\n")
    while True:
        time.sleep(0.05)
""")


def _entrypoint(*args: str, env: dict[str, str] | None = None, log: Path | None = None) -> subprocess.Popen:
    """The entrypoint as the image runs it: `sh docker-entrypoint.sh ARGS` in the app's directory."""
    out = log.open("w") if log is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen(["sh", str(DEPLOY / "docker-entrypoint.sh"), *args], cwd=ROOT,
                                env=env or _env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        if log is not None:
            out.close()


def test_entrypoint_hands_signals_and_the_exit_status_through(tmp_path):
    recorder, record = tmp_path / "recorder.py", tmp_path / "signals"
    recorder.write_text(SIGNAL_RECORDER)
    proc = _entrypoint("python", str(recorder), str(record))
    try:
        wait_for(lambda: record.exists() and "started" in record.read_text(), message="the program to start")
        # exec: the pid the container runtime signals is the program's, not a shell's.
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert cmdline[1:3] == [str(recorder).encode(), str(record).encode()]
        os.kill(proc.pid, signal.SIGTSTP)
        wait_for(lambda: "SIGTSTP" in record.read_text(), message="TSTP to arrive")
        os.kill(proc.pid, signal.SIGTERM)
        status = proc.wait(10)
        assert (status, record.read_text().split()) == (7, ["started", "SIGTSTP", "SIGTERM"])
    finally:
        stop_process(proc, signal.SIGKILL, 5)


def test_entrypoint_returns_the_workers_refusal():
    proc = _entrypoint("worker", "-c", "0")
    try:
        assert proc.wait(30) == 1  # the worker's "bad flag" status, not the shell's
    finally:
        stop_process(proc, signal.SIGKILL, 5)


def _healthcheck(port: int) -> int:
    """The image's HEALTHCHECK command, as Docker runs it inside the container."""
    command = json.loads(dict(_dockerfile())["HEALTHCHECK"].split(" CMD ", 1)[1])
    assert command[0] == "python"
    return subprocess.run([sys.executable, *command[1:]], env=_env(WURK_HEALTH_PORT=str(port)),
                          capture_output=True, timeout=10).returncode


def _live(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/live", timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


@pytest.mark.slow
def test_entrypoint_runs_the_worker_which_quiets_and_stops(tmp_path):
    port = free_port()
    log = tmp_path / "worker.log"
    proc = _entrypoint("worker", "-c", "2", env=_env(WURK_HEALTH_PORT=str(port)), log=log)
    try:
        wait_for(lambda: _live(port) == 200, timeout=30, message="the worker's /live")
        assert _healthcheck(port) == 0
        os.kill(proc.pid, signal.SIGTSTP)  # what the preStop hook's `kill -TSTP 1` sends
        wait_for(lambda: _live(port) == 503, message="/live to say quiet")
        assert _healthcheck(port) != 0  # Docker would call it unhealthy
        # The worker batches its log lines: they arrive within moments, not at once.
        wait_for(lambda: "quieting: no new jobs will be fetched" in log.read_text(), message="the quiet log line")
        os.kill(proc.pid, signal.SIGTERM)  # docker stop, the kubelet
        assert proc.wait(30) == 0
        assert "TERM received: stopping" in log.read_text()
    finally:
        stop_process(proc, signal.SIGKILL, 5)


# -- Kubernetes ------------------------------------------------------------------------

MANIFESTS = sorted((DEPLOY / "k8s").glob("*.yaml"))


def _documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _resource(kind: str, name: str) -> dict:
    for path in MANIFESTS:
        for doc in _documents(path):
            if doc["kind"] == kind and doc["metadata"]["name"] == name:
                return doc
    raise AssertionError(f"no {kind} {name} in docs/deploy/k8s")


@pytest.mark.parametrize("path", MANIFESTS, ids=[p.name for p in MANIFESTS])
def test_manifest_validates_against_the_kubernetes_schemas(path):
    import kubernetes_validate

    documents = _documents(path)
    assert documents
    for doc in documents:
        # Strict: a misspelt or misplaced field is an error, not ignored as the API server would.
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_validation_would_catch_a_mistake():
    import kubernetes_validate

    worker = _resource("Deployment", "wurk")
    worker["spec"]["template"]["spec"]["terminationGracePeriod"] = 45
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(worker, kubernetes_validate.latest_version(), strict=True)


def _container(deployment: dict) -> dict:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_worker_probes_the_health_port_and_drains_within_the_grace_period():
    worker = _resource("Deployment", "wurk")
    pod = worker["spec"]["template"]["spec"]
    container = _container(worker)
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert container["args"][0] == "worker"  # the entrypoint's branch that adds --health-port
    assert env["WURK_HEALTH_BIND"] == "0.0.0.0"  # the kubelet probes the pod's IP
    (port,) = container["ports"]
    assert (port["name"], port["containerPort"]) == ("health", int(env["WURK_HEALTH_PORT"]))
    assert container["livenessProbe"]["httpGet"] == {"path": "/live", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "health"}
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[:2] == ["sh", "-c"]
    quiet, pause = (part.strip() for part in pre_stop[2].split(";"))
    assert quiet == "kill -TSTP 1"  # PID 1 is the worker: the entrypoint exec's it
    pause_seconds = int(pause.removeprefix("sleep "))
    drain = pause_seconds + Config().timeout + HARD_SHUTDOWN_WAIT
    assert pod["terminationGracePeriodSeconds"] > drain
    live = container["livenessProbe"]
    # A quiet worker fails /live: the probe must not restart it before it has drained.
    assert live["periodSeconds"] * live["failureThreshold"] > drain
    assert pod["securityContext"]["runAsUser"] == int(dict(_dockerfile())["USER"].split(":")[0])


def test_web_runs_gunicorn_in_embedded_mode_within_its_grace_period():
    web = _resource("Deployment", "web")
    container = _container(web)
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert container["args"][0] == "web"
    assert env["WURK_MODE"] == "embedded"
    gunicorn_conf = (ROOT / "example_project" / "gunicorn.conf.py").read_text()
    graceful = int(re.search(r"^graceful_timeout = (\d+)", gunicorn_conf, re.M).group(1))
    assert graceful >= Config().timeout + 5
    assert web["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > graceful
    service = _resource("Service", "web")
    assert service["spec"]["selector"] == web["spec"]["selector"]["matchLabels"]


def test_entrypoint_knows_every_command_the_manifests_give():
    script = (DEPLOY / "docker-entrypoint.sh").read_text()
    for name in ("wurk", "web"):
        command = _container(_resource("Deployment", name))["args"][0]
        assert re.search(rf"^\s+{command}\)$", script, re.M), command


def test_autoscaler_reads_the_series_the_adapter_serves():
    hpa = _resource("HorizontalPodAutoscaler", "wurk")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "wurk"}
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "External"
    adapter = yaml.safe_load(_resource("ConfigMap", "prometheus-adapter")["data"]["config.yaml"])
    (rule,) = adapter["externalRules"]
    assert set(rule) == {"seriesQuery", "resources", "name", "metricsQuery"}
    assert rule["resources"] == {"namespaced": False}
    assert metric["external"]["metric"]["name"] == rule["name"]["as"]
    assert re.fullmatch(rule["name"]["matches"], "wurk_queue_latency_seconds")
    assert rule["seriesQuery"].startswith("wurk_queue_latency_seconds{")
    assert "<<.Series>>" in rule["metricsQuery"] and "<<.LabelMatchers>>" in rule["metricsQuery"]
    assert set(metric["external"]["metric"]["selector"]["matchLabels"]) == {"queue"}


@pytest.mark.django_db
def test_the_admin_exports_the_series_the_autoscaler_reads(admin_client, redis_db):
    from tests.jobsapp.jobs import RecordJob

    RecordJob.perform_async(1)
    time.sleep(0.01)
    text = admin_client.get("/admin/wurk_django/dashboard/prometheus").content.decode()
    hpa = _resource("HorizontalPodAutoscaler", "wurk")
    metric = hpa["spec"]["metrics"][0]["external"]["metric"]
    labels = ",".join(f'{k}="{v}"' for k, v in metric["selector"]["matchLabels"].items())
    found = re.search(rf"^{metric['name']}\{{{labels}\}} (\S+)$", text, re.M)
    assert found, text
    assert float(found.group(1)) >= 0


# -- the page --------------------------------------------------------------------------


def test_deployment_page_shows_every_artefact():
    from .blocks import blocks

    shown = {b.reason for b in blocks(ROOT / "docs" / "deployment.md") if b.kind == "file"}
    files = {str(p.relative_to(ROOT)) for p in DEPLOY.rglob("*") if p.is_file()}
    assert files <= shown, f"docs/deployment.md does not show {sorted(files - shown)}"
