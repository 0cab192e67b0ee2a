#!/usr/bin/env python
"""The Django ORM shape: each job reads and updates one row on PostgreSQL (issue 30 item 5).

    python bench/orm.py                          # wurk, wurk-nolog, celery, dramatiq, huey, rq; 3 runs
    python bench/orm.py --systems wurk,dramatiq --jobs 2000 --runs 1
    python bench/orm.py --conn-max-age 0         # a new connection per job for every system
    python bench/orm.py --only profile           # py-spy (GIL holder) on the wurk worker draining ORM jobs
    python bench/orm.py --only profile --conn-max-age 0 --py-spy-flags=--idle   # every thread, waits included

One Django project (bench/ormbench/: settings, the ``Counter`` model, the job
body in ``job.py``, each system's wrapper in ``tasks.py``) run with each
system's own Django integration: ``manage.py wurk``, ``celery -A ormbench
worker -P threads``, ``manage.py rundramatiq`` (django_dramatiq), ``manage.py
run_huey`` (djhuey) and ``manage.py rqworker`` (django-rq), 1 process x 10
threads (RQ: one process forking a child per job). The same DATABASES for
all. Per measurement, as in bench/run.py: flush the Redis database, enqueue N
jobs (job i touches row ``i % ROWS + 1``), start the worker and time first ->
last completion. While it drains, ``pg_stat_activity`` is sampled every
50 ms for the benchmark's database (the driver's own connection excluded).
Job latency is start-to-finish of the job body (the two queries), measured
in the job. Systems alternate inside each run; ratios are paired.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import threading
import time
import uuid
from pathlib import Path

import psycopg
import redis
import run
from run import BENCH, BIN, OUT, PY, THREADS, base_env, completions, log, med, peak_rss_mb, start, stop

SYSTEMS = ("wurk", "wurk-nolog", "celery", "celery-reuse", "dramatiq", "huey", "rq")
PACKAGES = {"wurk": "wurk_django", "celery": "celery", "dramatiq": "django_dramatiq",
            "huey": "huey.contrib.djhuey", "rq": "django_rq"}
LAT_KEY = "bench:orm:lat"
DJANGO = [PY, "-m", "django"]

ENQUEUE = {
    "celery": "from ormbench.tasks import celery_touch as t\nfor pk in PKS: t.delay(pk)",
    "dramatiq": "from ormbench.tasks import dramatiq_touch as t\nfor pk in PKS: t.send(pk)",
    "huey": "from ormbench.tasks import huey_touch as t\nfor pk in PKS: t(pk)",
    "rq": ("import django_rq; from rq import Queue; from ormbench.tasks import rq_touch\n"
           "q = django_rq.get_queue('bench')\n"
           "for i in range(0, len(PKS), 1000):\n"
           "    q.enqueue_many([Queue.prepare_data(rq_touch, (pk,)) for pk in PKS[i:i + 1000]])"),
}


def env_for(system: str, args: argparse.Namespace) -> dict:
    extra = {"DJANGO_SETTINGS_MODULE": "ormbench.settings", "BENCH_ORM_SYSTEM": system.split("-")[0],
             "BENCH_CONN_MAX_AGE": str(args.conn_max_age), "BENCH_PG_DB": args.pg_db}
    if system == "wurk-nolog":
        extra["BENCH_JOBLOG"] = "0"
    if system == "celery-reuse":
        # Celery's Django fix-up closes every connection before and after each task whatever
        # CONN_MAX_AGE says, unless CELERY_DB_REUSE_MAX is set: then once per that many tasks.
        extra["BENCH_CELERY_DB_REUSE_MAX"] = "1000000"
    return extra


def worker_command(system: str) -> list[str]:
    if system.startswith("wurk"):
        return [*DJANGO, "wurk", "-c", str(THREADS), "-q", "bench"]
    if system.startswith("celery"):
        return [PY, "-m", "celery", "-A", "ormbench", "worker", "-P", "threads", "-c", str(THREADS), "-Q", "bench",
                "-l", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", "orm@%h"]
    if system == "dramatiq":
        return [*DJANGO, "rundramatiq", "--processes", "1", "--threads", str(THREADS), "--queues", "bench"]
    if system == "huey":
        return [*DJANGO, "run_huey"]  # workers=10, worker_type=thread in settings.HUEY["consumer"]
    if system == "rq":
        return [*DJANGO, "rqworker", "bench", "--worker-class", "rq.worker.Worker"]
    raise ValueError(system)


def pks(n: int, rows: int) -> list[int]:
    return [i % rows + 1 for i in range(n)]


def fill(r: redis.Redis, system: str, n: int, args: argparse.Namespace) -> None:
    keys = pks(n, args.rows)
    if system.startswith("wurk"):  # hand-built Sidekiq 8 payloads, as bench/run.py pushes them
        ms = int(time.time() * 1000)
        base = {"class": "ormbench.tasks.Touch", "retry": True, "queue": "bench", "created_at": ms, "enqueued_at": ms}
        bodies = [json.dumps({**base, "args": [pk], "jid": uuid.uuid4().hex[:24]}, separators=(",", ":"))
                  for pk in keys]
        pipe = r.pipeline(transaction=False)
        pipe.sadd("queues", "bench")
        for i in range(0, n, 1000):
            pipe.lpush("queue:bench", *bodies[i:i + 1000])
        pipe.execute()
        return
    code = f"import django; django.setup()\nPKS = {keys!r}\n{ENQUEUE[system.split('-')[0]]}\n"
    subprocess.run([PY, "-c", code], env=base_env(args.redis, env_for(system, args)), cwd=BENCH, check=True,
                   capture_output=True)


class ConnectionSampler(threading.Thread):
    """Counts the server's backends connected to the benchmark database every 50 ms."""

    def __init__(self, dsn: str, db: str):
        super().__init__(daemon=True, name="pg-sampler")
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.db = db
        self.samples: list[int] = []
        self.stopping = threading.Event()

    def count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                                 (self.db,)).fetchone()[0]

    def run(self) -> None:
        while not self.stopping.wait(0.05):
            self.samples.append(self.count())

    def close(self) -> None:
        self.stopping.set()
        self.join(2)
        self.conn.close()


def wait_backends_gone(sampler: ConnectionSampler, timeout: float = 10) -> None:
    """Workers from the last measurement must have hung up before the next one is sampled."""
    deadline = time.monotonic() + timeout
    while sampler.count() and time.monotonic() < deadline:
        time.sleep(0.1)


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def drain(r: redis.Redis, system: str, n: int, args: argparse.Namespace, dsn: str) -> dict:
    r.flushdb()
    fill(r, system, n, args)
    logfile = OUT / f"orm-{system}.log"
    probe = ConnectionSampler(dsn, args.pg_db)
    wait_backends_gone(probe)
    procs = start([(worker_command(system), env_for(system, args))], args.redis, logfile)
    result: dict = {"system": system, "jobs": n, "load": round(os.getloadavg()[0], 2)}
    spawned = time.time()
    probe.start()
    count = 0
    # The worker's CPU (and Redis's, round trips, commands) over the rate's own window, as
    # bench/run.py measures them (issue 48 item 4: the run gate, since removed, was judged by CPU
    # time too).
    sampler = run.Sampler(r, [p.pid for p in procs])
    sampler.sample()
    try:
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            count, first, last = completions(r)
            sampler.sample()
            if count >= n and last > first:
                result.update(run.window(sampler.at(first), sampler.at(last), count - 1))
            if count >= n or any(p.poll() is not None for p in procs):
                break
            if count and "first_sample" not in result:
                result["first_sample"] = len(probe.samples)
            time.sleep(0.02)
        held = probe.samples[result.get("first_sample", 0):]
        time.sleep(3 * 0.05 + 0.1)  # the last latency batch
        result["rss_mb"] = round(peak_rss_mb([p.pid for p in procs]), 1)
    finally:
        probe.close()
        stop(procs)
    result["completed"] = count
    if count < n:
        result["error"] = f"only {count}/{n} completed (see {logfile})"
        return result
    lat = [float(x) for x in r.lrange(LAT_KEY, 0, -1)]
    result.update(rate=(n - 1) / (last - first), boot_s=round(first - spawned, 3),
                  conn_max=max(held, default=0), conn_median=statistics.median(held) if held else 0,
                  p50_ms=1000 * percentile(lat, 0.50), p99_ms=1000 * percentile(lat, 0.99), latencies=len(lat))
    result.pop("first_sample", None)
    return result


def profile(r: redis.Redis, args: argparse.Namespace) -> Path:
    """py-spy on the wurk worker (job log on) while it drains ORM jobs; collapsed stacks to OUT."""
    r.flushdb()
    fill(r, "wurk", 60_000, args)
    out = OUT / "profile-orm.txt"
    procs = start([(worker_command("wurk"), env_for("wurk", args))], args.redis, OUT / "orm-profile.log")
    try:
        time.sleep(1.5)
        spy = subprocess.run([str(BIN / "py-spy"), "record", "-p", str(procs[0].pid), "-d", str(int(args.profile_seconds)),
                              "-r", "250", "-f", "raw", "-o", str(out), *args.py_spy_flags.split()],
                             capture_output=True, text=True)
        if spy.returncode:
            raise RuntimeError(f"py-spy failed: {spy.stderr[-3000:]}")
        for line in run.summarize(out, 40):
            log(line)
    finally:
        stop(procs)
    return out


def setup_db(args: argparse.Namespace, dsn: str) -> None:
    """Tables for the model (and each integration's own), and ROWS rows to touch."""
    subprocess.run([*DJANGO, "migrate", "--run-syncdb", "-v", "0"], cwd=BENCH, check=True,
                   env=base_env(args.redis, {**env_for("wurk", args), "BENCH_ORM_SYSTEM": "migrate"}))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO ormbench_counter (id, hits, touched_at) SELECT g, 0, 0 FROM generate_series(1, %s) g "
                     "ON CONFLICT (id) DO NOTHING", (args.rows,))
        conn.execute("VACUUM ANALYZE ormbench_counter")


def report(results: list[dict], meta: dict) -> str:
    lines = [f"## ORM shape {meta['started']} - {meta['jobs']} jobs/run (RQ {meta['rq_jobs']}), {meta['runs']} runs, "
             f"1 process x {THREADS} threads, CONN_MAX_AGE={meta['conn_max_age']}, load {meta['load']}", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()), "",
             "| system | jobs/s median (min-max) | wurk / system, paired | DB connections held (max; median) "
             "| p50 ms | p99 ms, start to finish | boot s | peak RSS MB |",
             "|---|---|---|---|---|---|---|---|"]
    ok = [x for x in results if "rate" in x]
    for system in meta["systems"]:
        mine = [x for x in ok if x["system"] == system]
        if not mine:
            failed = [x for x in results if x["system"] == system]
            if failed:
                lines.append(f"| {system} | failed: {failed[0]['error']} | | | | | | |")
            continue
        ratios = []
        for x in mine:
            ours = [y for y in ok if y["system"] == "wurk" and y["run"] == x["run"]]
            if ours and system != "wurk":
                ratios.append(ours[0]["rate"] / x["rate"])
        conns = f"{med([x['conn_max'] for x in mine])}; {med([x['conn_median'] for x in mine])}"
        lines.append(f"| {system} | {med([x['rate'] for x in mine])} | {med(ratios) + 'x' if ratios else ''} | {conns} | "
                     f"{med([x['p50_ms'] for x in mine])} | {med([x['p99_ms'] for x in mine])} | "
                     f"{med([x['boot_s'] for x in mine])} | {med([x['rss_mb'] for x in mine])} |")
    loads = [x["load"] for x in results]
    if loads:
        lines += ["", f"1-minute load average at the start of each drain: {min(loads)}-{max(loads)}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--rq-jobs", type=int, default=300, help="RQ forks a child per job: fewer jobs")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--conn-max-age", type=int, default=60)
    ap.add_argument("--pg-db", default="wurk_ormbench")
    ap.add_argument("--pg-user", default="postgres")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/13")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--only", choices=("drain", "profile"), default="drain")
    ap.add_argument("--profile-seconds", type=float, default=10)
    ap.add_argument("--py-spy-flags", default="--gil", help="--py-spy-flags=--idle: where the job threads wait, not only who holds the GIL")
    ap.add_argument("--json", help="also write the raw results here")
    args = ap.parse_args()

    db = args.redis.rstrip("/").rsplit("/", 1)[-1]
    if not db.isdigit() or int(db) == 0:
        ap.error("--redis must name a logical database other than 0 (the benchmark flushes it)")
    OUT.mkdir(parents=True, exist_ok=True)
    dsn = f"host=127.0.0.1 port=5432 user={args.pg_user} dbname={args.pg_db}"
    r = redis.Redis.from_url(args.redis)
    r.ping()
    systems = []
    for s in args.systems.split(","):
        if run.importable(PACKAGES[s.split("-")[0]]):
            systems.append(s)
        else:
            log(f"skipping {s}: {PACKAGES[s.split('-')[0]]} is not installed (bench/requirements.txt)")
    setup_db(args, dsn)
    versions = run.versions(systems)
    from importlib.metadata import PackageNotFoundError, version

    for pkg in ("django-dramatiq", "django-rq", "psycopg"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    with psycopg.connect(dsn) as conn:
        versions["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "jobs": args.jobs, "rq_jobs": args.rq_jobs,
            "runs": args.runs, "systems": systems, "versions": versions, "conn_max_age": args.conn_max_age,
            "load": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    results: list[dict] = []
    t0 = time.monotonic()
    try:
        if args.only == "profile":
            log(f"profile written to {profile(r, args)}")
            return
        for n_run in range(args.runs):
            for system in systems[n_run % len(systems):] + systems[:n_run % len(systems)]:
                n = args.rq_jobs if system == "rq" else args.jobs
                res = drain(r, system, n, args, dsn)
                res["run"] = n_run
                results.append(res)
                log(f"run {n_run} {system:11} " + (
                    f"{res['rate']:7.0f} jobs/s conns max {res['conn_max']} med {res['conn_median']} "
                    f"p50 {res['p50_ms']:.2f} ms p99 {res['p99_ms']:.2f} ms load {res['load']}"
                    + (f" cpu {res['cpu_us_per_job']:.1f} us/job {res['switches_per_job']:.1f} sleeps/job"
                       if "cpu_us_per_job" in res else "")
                    if "rate" in res else res["error"]))
    finally:
        r.flushdb()
    print(report(results, meta))
    log(f"total {time.monotonic() - t0:.1f}s")
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "drain": results}, indent=1))


if __name__ == "__main__":
    main()
