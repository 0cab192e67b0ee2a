"""Smoke test of the installed package, run by .ci/run in a fresh virtualenv holding only the wheel.

    <venv>/bin/python tests/installed/smoke.py --redis-url redis://127.0.0.1:6379/13

It does what a team does on its first day, outside the checkout: copies a small project of its
own (``project/`` beside this file) to a temporary folder, runs ``manage.py check``, ``migrate``
and ``collectstatic``, starts ``manage.py wurk``, pushes a plain job, a batch with a success
callback, limited jobs, a unique job (twice), a workflow chain and waits for a periodic job,
then renders every admin page it can reach from the admin index (with the static files each
page names, and in French), and stops the worker by its pid. Any failure exits non-zero with
what went wrong and the worker's log. It flushes only its own Redis database.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path

HERE = Path(__file__).resolve().parent


def fail(message: str) -> None:
    raise SystemExit(f"smoke: FAILED: {message}")


def step(message: str) -> None:
    print(f"smoke: {message}", flush=True)


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    fail(f"timed out after {timeout:.0f}s waiting for {what}")


def check_installed() -> None:
    """The wurk_django this interpreter imports is an installed wheel, not a checkout."""
    import wurk_django

    where = Path(wurk_django.__file__).resolve()
    if "site-packages" not in where.parts:
        fail(f"wurk_django imported from {where}, not from an installed package")
    dist = importlib.metadata.distribution("wurk-django")
    direct = dist.read_text("direct_url.json")
    if direct and json.loads(direct).get("dir_info", {}).get("editable"):
        fail("wurk-django is installed in editable mode")
    if dist.version != wurk_django.__version__:
        fail(f"metadata says {dist.version}, the package {wurk_django.__version__}")
    step(f"wurk-django {dist.version} installed at {where.parent}")


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.statics: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value and name in ("href", "src"):
                (self.statics if value.startswith("/static/") else self.hrefs).append(value)


def manage(project: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0:
        fail(f"manage.py {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis-url", required=True)
    options = parser.parse_args()
    check_installed()

    workdir = Path(tempfile.mkdtemp(prefix="wurk-smoke-"))
    project = workdir / "project"
    shutil.copytree(HERE / "project", project)
    env = {**os.environ, "SMOKE_REDIS_URL": options.redis_url, "PYTHONUNBUFFERED": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)

    import redis

    raw = redis.Redis.from_url(options.redis_url)
    if raw.connection_pool.connection_kwargs.get("db", 0) == 0:
        fail("refusing Redis database 0: give the smoke a database of its own")
    raw.flushdb()

    out = manage(project, env, "check")
    step(f"manage.py check: {out.strip().splitlines()[-1]}")
    manage(project, env, "migrate", "--noinput")
    manage(project, env, "collectstatic", "--noinput")
    step("migrate and collectstatic done")

    log = open(workdir / "worker.log", "w")  # noqa: SIM115 (kept open for the worker's life)
    # A cron minute passes in a second (the poller's test clock), so the periodic job fires soon.
    worker_env = {**env, "WURK_TEST_CLOCK": f"{time.time():.0f},60"}
    worker = subprocess.Popen([sys.executable, "manage.py", "wurk", "-c", "5"], cwd=project, env=worker_env,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        os.environ["SMOKE_REDIS_URL"] = options.redis_url
        run_checks(project, raw)
    except BaseException:
        print((workdir / "worker.log").read_text()[-6000:], file=sys.stderr)
        raise
    finally:
        if worker.poll() is None:
            os.kill(worker.pid, signal.SIGTERM)
            try:
                code = worker.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.kill(worker.pid, signal.SIGKILL)
                worker.wait(timeout=10)
                fail("the worker did not stop within 40 s of SIGTERM")
            if code != 0:
                print((workdir / "worker.log").read_text()[-6000:], file=sys.stderr)
                fail(f"the worker exited {code} on SIGTERM")
        log.close()
    step("worker stopped on SIGTERM with exit 0")
    shutil.rmtree(workdir, ignore_errors=True)
    step("PASSED")


def run_checks(project: Path, raw) -> None:
    sys.path.insert(0, str(project))
    os.chdir(project)
    os.environ["DJANGO_SETTINGS_MODULE"] = "smokesite.settings"
    import django

    django.setup()
    wait_for(lambda: raw.scard("processes"), 30, "the worker to register in the process set")
    step("worker booted")

    from shop.jobs import Add, BatchDone, Limited, Once, Record

    from wurk_django.batch import Batch
    from wurk_django.workflow import Workflow, chain

    Record.perform_async("plain", 1)
    batch = Batch()
    batch.description = "smoke batch"
    batch.on("success", BatchDone, {"label": "smoke"})
    with batch.jobs():
        for n in range(3):
            Record.perform_async("batch", n)
    for n in range(3):
        Limited.perform_async(n)
    # Scheduled a second ahead, the first holds its lock until it has run: pushed for now, it
    # could run and free the lock (unique until success) before the second push arrives.
    first, second = Once.perform_in(1, 7), Once.perform_in(1, 7)
    if not first or second is not None:
        fail(f"a unique job pushed twice gave {first!r} then {second!r} (want a jid, then None)")
    flow = chain(Add.s(1, 2), Add.s(10)).run("smoke chain")

    def got(what: str, count: int = 1) -> list[str]:
        values = [v.decode() for v in raw.lrange(f"smoke:{what}", 0, -1)]
        return values if len(values) >= count else []

    wait_for(lambda: got("plain"), 30, "the plain job")
    wait_for(lambda: got("batch", 3), 30, "the batch's three jobs")
    if wait_for(lambda: got("batch-success"), 30, "the batch's success callback") != ["3:smoke"]:
        fail(f"the batch callback recorded {got('batch-success')}")
    step(f"batch {batch.bid}: 3 jobs and its success callback ran")
    if sorted(wait_for(lambda: got("limited", 3), 30, "the limited jobs")) != ["0", "1", "2"]:
        fail(f"limited jobs recorded {got('limited')}")
    step("3 jobs ran through a concurrent limiter")
    if wait_for(lambda: got("unique"), 30, "the unique job") != ["7"]:
        fail(f"the unique job recorded {got('unique')}")
    step("unique job: one push of two, run once")
    wait_for(lambda: Workflow(flow.id).state == "succeeded", 30, "the workflow chain to succeed")
    if sorted(got("chain", 2), key=int) != ["3", "13"]:
        fail(f"the chain recorded {got('chain')} (want 3, then 3 + 10)")
    step(f"workflow chain {flow.id}: succeeded, 1 + 2 = 3 passed on to 3 + 10 = 13")
    wait_for(lambda: got("periodic"), 60, "the periodic job to fire")
    step("periodic job fired by the leader")
    crawl_admin(project)


def crawl_admin(project: Path) -> None:
    from django.contrib.auth.models import User
    from django.test import Client

    user = User.objects.create_superuser("smoke", "smoke@example.com", "smoke-password")
    client = Client()
    client.force_login(user)
    index = client.get("/admin/")
    if index.status_code != 200:
        fail(f"/admin/ answered {index.status_code}")
    queue = [href for href in _links(index).hrefs if href.startswith("/admin/wurk_django/")]
    if not queue:
        fail("the admin index links to no Wurk page")
    seen: set[str] = set()
    statics: set[str] = set()
    while queue and len(seen) < 300:
        url = queue.pop(0).split("#", 1)[0]
        if url in seen or "/delete/" in url or "logout" in url:
            continue
        seen.add(url)
        response = client.get(url)
        if response.status_code == 302 and response["Location"].startswith("/admin/"):
            # The index entries of the feature pages redirect to the page itself.
            queue.append(response["Location"])
            continue
        if response.status_code != 200:
            fail(f"{url} answered {response.status_code}")
        if "html" not in response.get("Content-Type", ""):
            continue
        links = _links(response)
        statics.update(links.statics)
        queue.extend(h for h in links.hrefs if h.startswith(("/admin/wurk_django/", "/admin/wurk/")) and h not in seen)
    collected = project / "static-collected"
    missing = [s for s in sorted(statics) if not (collected / s.removeprefix("/static/").split("?")[0]).is_file()]
    if missing:
        fail(f"pages name static files collectstatic did not collect: {missing}")
    ours = sorted(s for s in statics if s.startswith("/static/wurk_django/"))
    if not ours:
        fail("no page names a wurk_django static file")
    pages = sorted({re.sub(r"/[^/]+/$", "/…/", u) if u.count("/") > 4 else u for u in seen})
    step(f"{len(seen)} admin pages rendered with 200 ({len(pages)} kinds), {len(statics)} static files "
         f"collected, ours: {', '.join(ours)}")
    dashboard = "/admin/wurk_django/dashboard/"
    if dashboard not in seen:
        fail(f"the admin index does not link to {dashboard}")
    french = client.get(dashboard, HTTP_ACCEPT_LANGUAGE="fr")
    if french.status_code != 200 or "Tableau de bord" not in french.content.decode():
        fail(f"{dashboard} in French: {french.status_code}, no 'Tableau de bord' (translations missing?)")
    step(f"{dashboard} renders in French")


def _links(response) -> Links:
    parser = Links()
    parser.feed(response.content.decode())
    return parser


if __name__ == "__main__":
    main()
