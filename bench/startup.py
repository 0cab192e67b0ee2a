#!/usr/bin/env python
"""Startup costs: ``django.setup()``, the first push of a fresh process, a worker's boot to first job.

    python bench/startup.py                          # 7 runs of each, this checkout
    python bench/startup.py --compare /work/main     # the same harness against another checkout, alternating
    python bench/startup.py --runs 11 --only push    # or: boot
    python bench/startup.py --features               # every feature on (see below) for the worker too

Each figure is the median of ``--runs`` fresh processes, with min-max. Bytecode
is compiled once and cached (in ``$BENCH_OUT/pycache``, outside the checkouts), as
for an installed package; ``--no-pyc`` compiles every module of the project from
source each time instead (what a checkout run with ``PYTHONDONTWRITEBYTECODE=1`` pays). With
``--compare``, runs alternate between the two checkouts (this one first on odd
runs, the other first on even ones), so a noisy neighbour hits both alike.
Only the ``wurk_django`` package comes from the checkout under test: the
settings (``bench/wurk_settings.py``) and the jobs (``bench/wurkbench/``) are
this folder's in both, so the two sides run the same code around the package.

* **setup**: ``import django; django.setup()`` in a fresh interpreter, with
  the bench settings, then again with the admin's apps added
  (``BENCH_ADMIN=1``): Django imports every app's admin module at setup.
* **first push**: after ``django.setup()`` and importing the job module, the
  first ``perform_async`` of the process, with batches, unique jobs,
  encryption and statsd switched on (``BENCH_FEATURES=1``); then the first
  push of each other kind (a unique job, an encrypted job, a job inside a
  batch) and a second plain push. Nothing listens on the statsd port: its
  packets are dropped, as they are when a collector is down.
* **boot**: from ``Popen`` of ``manage.py wurk -c 10 -q bench`` to the start of
  the one job waiting in its queue (the job writes ``time.time()`` to Redis).

Beside each wall-clock figure, ``CPU`` is the CPU time the process had used
over the same step (``time.process_time()``, every thread): on a machine shared
with other work it moves far less than the wall clock, so compare those when
the load average is high.

Uses one Redis logical database (``--redis``, DB 9 by default, never 0), which
it flushes before every measurement and at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent

PUSH_CODE = """
import time
clocks = [(time.perf_counter(), time.process_time())]
import django
django.setup()
clocks.append((time.perf_counter(), time.process_time()))
from wurkbench.jobs import Noop, SecretNoop, UniqueNoop
clocks.append((time.perf_counter(), time.process_time()))
Noop.perform_async()
clocks.append((time.perf_counter(), time.process_time()))
UniqueNoop.perform_async()
clocks.append((time.perf_counter(), time.process_time()))
SecretNoop.perform_async("card")
clocks.append((time.perf_counter(), time.process_time()))
from wurk_django.batch import Batch
batch = Batch()
with batch.jobs():
    Noop.perform_async()
clocks.append((time.perf_counter(), time.process_time()))
Noop.perform_async()
clocks.append((time.perf_counter(), time.process_time()))
import json, sys
steps = ("setup", "import", "first", "unique", "secret", "batch", "second")
out = {step: clocks[i + 1][0] - clocks[i][0] for i, step in enumerate(steps)}
out.update({step + "_cpu": clocks[i + 1][1] - clocks[i][1] for i, step in enumerate(steps)})
out["engine_modules"] = len([m for m in sys.modules if m.startswith(("wurk_django.server", "croniter"))])
print(json.dumps(out))
"""


PYC = Path(os.environ.get("BENCH_OUT", "/tmp/wurk-bench")) / "pycache"


def env_for(checkout: Path, url: str, extra: dict | None = None, pyc: bool = True) -> dict:
    env = dict(os.environ)
    # The package from the checkout under test; settings and jobs from this bench folder.
    env["PYTHONPATH"] = os.pathsep.join([str(BENCH), str(checkout)])
    if pyc:
        # Compiled bytecode cached as an installed package has it, but outside the source
        # trees (a checkout under comparison is only read).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(PYC)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    env["BENCH_REDIS_URL"] = url
    env["DJANGO_SETTINGS_MODULE"] = "wurk_settings"
    env.pop("BENCH_COUNT", None)
    env.update(extra or {})
    return env


def client(url: str):
    import redis

    r = redis.Redis.from_url(url)
    if int(r.connection_pool.connection_kwargs.get("db", 0)) == 0:
        sys.exit(f"refusing to use Redis database 0 ({url}); pick a dedicated one")
    return r


def push_once(checkout: Path, url: str, pyc: bool = True, admin: bool = False) -> dict:
    client(url).flushdb()
    extra = {"BENCH_FEATURES": "1", "BENCH_ADMIN": "1" if admin else "0"}
    out = subprocess.run([sys.executable, "-c", PUSH_CODE], cwd=BENCH, capture_output=True, text=True,
                         env=env_for(checkout, url, extra, pyc))
    if out.returncode:
        raise RuntimeError(f"push run failed in {checkout}:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def boot_once(checkout: Path, url: str, features: bool, pyc: bool = True) -> tuple[float, float]:
    """Wall seconds from ``Popen`` to the job's start, and the CPU seconds the worker had used by then."""
    r = client(url)
    r.flushdb()
    now = int(time.time() * 1000)
    job = {"class": "wurkbench.jobs.BootMark", "args": [], "retry": False, "queue": "bench",
           "jid": uuid.uuid4().hex[:24], "created_at": now, "enqueued_at": now}
    r.sadd("queues", "bench")
    r.lpush("queue:bench", json.dumps(job, separators=(",", ":")))
    extra = {"BENCH_FEATURES": "1"} if features else {}
    started = time.time()
    proc = subprocess.Popen([sys.executable, str(checkout / "manage.py"), "wurk", "-c", "10", "-q", "bench"],
                            cwd=BENCH, env=env_for(checkout, url, extra, pyc), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            mark = r.get("bench:boot")
            if mark:
                at, cpu = mark.split()
                return float(at) - started, float(cpu)
            if proc.poll() is not None:
                raise RuntimeError(f"the worker of {checkout} exited with {proc.returncode} before the job ran")
            time.sleep(0.002)
        raise RuntimeError(f"no job ran within 60 s ({checkout})")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        r.flushdb()


def fmt(values: list[float], scale: float = 1000.0) -> str:
    m = statistics.median(values) * scale
    return f"{m:7.1f} ({min(values) * scale:.1f}-{max(values) * scale:.1f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--compare", type=Path, help="another checkout of the project, measured alternately")
    ap.add_argument("--only", choices=("push", "boot"), action="append")
    ap.add_argument("--features", action="store_true", help="boot with every feature on (BENCH_FEATURES=1)")
    ap.add_argument("--no-pyc", action="store_true",
                    help="compile every module from source, as with PYTHONDONTWRITEBYTECODE=1 and no .pyc files")
    ap.add_argument("--redis", default=os.environ.get("WURK_BENCH_REDIS_URL", "redis://127.0.0.1:6379/9"))
    args = ap.parse_args()
    only = set(args.only or ("push", "boot"))
    checkouts = [REPO] + ([args.compare.resolve()] if args.compare else [])
    pushes: dict[tuple[Path, bool], list[dict]] = {(c, admin): [] for c in checkouts for admin in (False, True)}
    boots: dict[Path, list[tuple[float, float]]] = {c: [] for c in checkouts}
    print(f"startup benchmark: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.runs} runs, "
          f"{'bytecode cached' if not args.no_pyc else 'no bytecode cache'}, "
          f"load average {os.getloadavg()[0]:.2f} (other work on the machine skews every figure)")
    pyc = not args.no_pyc
    try:
        if pyc:
            for checkout in checkouts:  # not measured: fills the bytecode cache
                push_once(checkout, args.redis, admin=True)
                boot_once(checkout, args.redis, True)
        for run in range(args.runs):
            order = checkouts if run % 2 == 0 else checkouts[::-1]
            for checkout in order:
                if "push" in only:
                    for admin in (False, True):
                        pushes[checkout, admin].append(push_once(checkout, args.redis, pyc, admin))
                if "boot" in only:
                    boots[checkout].append(boot_once(checkout, args.redis, args.features, pyc))
    finally:
        client(args.redis).flushdb()
    for checkout in checkouts:
        print(f"\n{checkout}  (median (min-max), ms)")
        for admin in (False, True):
            rows = pushes[checkout, admin]
            if not rows:
                continue
            print("  a web process " + ("with django.contrib.admin installed" if admin else "without the admin"))
            for key, label in (("setup", "django.setup()"), ("import", "import the job module"),
                               ("first", "first push (plain job)"), ("unique", "first unique push"),
                               ("secret", "first encrypted push"), ("batch", "first batch (open + 1 push)"),
                               ("second", "a later plain push")):
                print(f"    {label:28} {fmt([r[key] for r in rows])}   CPU {fmt([r[key + '_cpu'] for r in rows])}")
            print(f"    {'engine modules after pushing':28} "
                  f"{statistics.median([r['engine_modules'] for r in rows]):7.0f}  (wurk_django.server*, croniter*)")
        if boots[checkout]:
            print(f"  {'boot to first job':30} {fmt([b[0] for b in boots[checkout]])}   "
                  f"CPU {fmt([b[1] for b in boots[checkout]])}" + ("  (every feature on)" if args.features else ""))


if __name__ == "__main__":
    main()
