#!/usr/bin/env python
"""Benchmark driver: wurk_django against Celery, RQ, Dramatiq, Huey and Ruby Sidekiq.

    python bench/run.py                      # every installed system, all shapes, 3 runs
    python bench/run.py --smoke              # tiny, < 60 s, proves the harness works
    python bench/run.py --systems wurk,dramatiq --shapes noop --jobs 5000 --runs 5
    python bench/run.py --processes 2        # 2 worker processes per system where supported
    python bench/run.py --only enqueue       # enqueue rates only (also: drain, commands, profile)
    python bench/run.py --systems wurk,wurk-nolog,sidekiq,sidekiq-nolog,dramatiq --shapes noop,redis

Everything lives in one Redis logical database (``--redis``, DB 9 by default,
never 0); only that database is flushed. Per measurement: flush, pre-enqueue N jobs with hand-built payloads
(wurk_django, Sidekiq) or the system's own bulk client (peers), start the
worker (1 process x 10 threads), and time first -> last completion as the
jobs record it (bench/peers/recorder.py). Systems alternate within each run
and every figure is a median over runs with min-max; ratios are paired
(wurk_django / peer inside the same run and shape). See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import latency_proxy  # bench/ is this script's folder, first on sys.path
import redis

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PY = sys.executable
BIN = Path(PY).parent
OUT = Path(os.environ.get("BENCH_OUT", "/tmp/wurk-bench"))
SHAPES = ("noop", "cpu", "io", "redis", "redis-plain", "redis-fast", "redis-cache")
ALL_SYSTEMS = ("wurk", "wurk-nolog", "sidekiq", "sidekiq-nolog", "celery-threads", "celery-prefork",
               "rq", "dramatiq", "huey")
THREADS = 10
WURK_CLASSES = {"noop": "wurkbench.jobs.Noop", "cpu": "wurkbench.jobs.Cpu", "io": "wurkbench.jobs.Io",
                "redis": "wurkbench.jobs.RedisCall", "redis-plain": "wurkbench.jobs.RedisPlainCall",
                "redis-fast": "wurkbench.jobs.RedisFastCall", "redis-cache": "wurkbench.jobs.RedisCacheCall",
                # wurk_django only, named in --shapes (not a default shape): 1 job in 16 sleeps 20 ms.
                "mixed": "wurkbench.jobs.Mixed",
                # Named in --shapes: the redis job's INCR hand-written on a raw socket, the floor.
                "redis-floor": "wurkbench.jobs.RedisFloorCall"}
RUBY_CLASSES = {"noop": "NoopJob", "cpu": "CpuJob", "io": "IoJob", "redis": "RedisCallJob",
                "redis-plain": "RedisPlainCallJob", "redis-fast": "RedisPlainCallJob", "redis-cache": "RedisPlainCallJob",
                "redis-floor": "RedisCallJob"}
#: Shapes where only wurk_django's job differs (the client it makes its call on): every
#: peer runs its plain-client job, so the ratio shows what the documented client buys.
#: Against redis-floor, Sidekiq runs its redis job (Sidekiq.redis) and the Python peers theirs.
PEER_SHAPES = {"redis-fast": "redis-plain", "redis-cache": "redis-plain", "redis-floor": "redis"}
#: Ratios with the same per-job logging policy on both sides: (ours, theirs, label).
POLICY_PAIRS = (("wurk", "sidekiq", "log on for both"), ("wurk-nolog", "sidekiq-nolog", "log off for both"),
                ("wurk-nolog", "dramatiq", "no per-job log on either side"))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- environment ---------------------------------------------------------------


def base_env(url: str, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(BENCH), str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    # Bytecode cached, as an installed package has it, for every system alike: the peers
    # come compiled from site-packages, and without this wurk_django (run from the
    # checkout) would compile every module at each boot when PYTHONDONTWRITEBYTECODE is set.
    # The cache lives outside the source tree, which is only read.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(OUT / "pycache")
    env["BENCH_REDIS_URL"] = url
    env["DJANGO_SETTINGS_MODULE"] = "wurk_settings"
    env["PYTHONUNBUFFERED"] = "0"
    env.pop("BENCH_COUNT", None)
    env.update(extra or {})
    return env


def importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def wurk_has_processes() -> bool:
    try:
        out = subprocess.run([PY, str(REPO / "manage.py"), "wurk", "--help"], capture_output=True, text=True,
                             env=base_env("redis://127.0.0.1:6379/9"), cwd=REPO, timeout=60).stdout
    except Exception:
        return False
    return "--processes" in out


def available(system: str) -> tuple[bool, str]:
    if system.startswith("wurk"):
        return importable("wurk_django"), "wurk_django"
    if system.startswith("sidekiq"):
        return shutil.which("sidekiq") is not None, "sidekiq (apt-get install ruby-sidekiq)"
    if system == "lpush":  # a bare redis-py LPUSH (enqueue only)
        return importable("redis"), "redis"
    module = system.split("-")[0]
    return importable(module), module


def versions(systems: list[str]) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for pkg in ("wurk-django", "django", "redis", "hiredis", "celery", "kombu", "rq", "dramatiq", "huey"):
        try:
            found[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    if any(s.startswith("sidekiq") for s in systems) and shutil.which("ruby"):
        out = subprocess.run(["ruby", "-e", 'require "sidekiq"; require "redis"; '
                              'puts "#{RUBY_VERSION} #{Sidekiq::VERSION} #{Redis::VERSION}"'],
                             capture_output=True, text=True).stdout.split()
        if len(out) == 3:
            found.update({"ruby": out[0], "sidekiq": out[1], "redis-rb": out[2]})
    return found


# -- enqueueing (not on the clock) --------------------------------------------


def hand_built(system: str, shape: str, n: int) -> list[bytes]:
    now = time.time()
    if system.startswith("sidekiq"):  # Sidekiq 6.4 schema: float epoch seconds
        base = {"class": RUBY_CLASSES[shape], "args": [], "retry": True, "queue": "bench",
                "created_at": now, "enqueued_at": now}
    else:  # Sidekiq 8 schema, as wurk_django writes it: integer epoch milliseconds
        ms = int(now * 1000)
        base = {"class": WURK_CLASSES[shape], "args": [], "retry": True, "queue": "bench",
                "created_at": ms, "enqueued_at": ms}
    return [json.dumps({**base, "jid": uuid.uuid4().hex[:24]}, separators=(",", ":")).encode() for _ in range(n)]


def fill(r: redis.Redis, system: str, shape: str, n: int, url: str) -> None:
    """Pre-enqueue n jobs of one shape for one system."""
    if system.startswith("wurk") or system.startswith("sidekiq"):
        bodies = hand_built(system, shape, n)
        pipe = r.pipeline(transaction=False)
        pipe.sadd("queues", "bench")
        for i in range(0, n, 1000):
            pipe.lpush("queue:bench", *bodies[i:i + 1000])
        pipe.execute()
        return
    # Peers: their own client, in a child process so each library stays out of the driver.
    code = {
        "celery-threads": "from peers.celery_app import TASKS; t=TASKS[S]\nfor _ in range(N): t.apply_async()",
        "celery-prefork": "from peers.celery_app import TASKS; t=TASKS[S]\nfor _ in range(N): t.apply_async()",
        "rq": ("from redis import Redis; from rq import Queue; from peers.rq_jobs import FUNCS; import os\n"
               "q=Queue('bench', connection=Redis.from_url(os.environ['BENCH_REDIS_URL']))\n"
               "for i in range(0, N, 1000): q.enqueue_many([Queue.prepare_data(FUNCS[S]) for _ in range(min(1000, N-i))])"),
        "dramatiq": "from peers.dramatiq_app import ACTORS; a=ACTORS[S]\nfor _ in range(N): a.send()",
        "huey": "from peers.huey_app import TASKS; t=TASKS[S]\nfor _ in range(N): t()",
    }[system]
    subprocess.run([PY, "-c", f"S={PEER_SHAPES.get(shape, shape)!r}; N={n}\n{code}"], env=base_env(url), cwd=BENCH, check=True,
                   capture_output=True)


# -- workers --------------------------------------------------------------------


def worker_commands(system: str, processes: int, url: str, has_processes: bool) -> list[tuple[list[str], dict]] | None:
    """Command lines (with extra env) that make up `processes` x 10 threads, or None if unsupported."""
    env: dict = {}
    if system in ("wurk", "wurk-nolog"):
        if system != "wurk":
            env["BENCH_JOBLOG"] = "0"
        cmd = [PY, str(REPO / "manage.py"), "wurk", "-c", str(THREADS), "-q", "bench"]
        if processes > 1:
            if not has_processes:
                return None
            cmd += ["--processes", str(processes)]
        return [(cmd, env)]
    if system in ("sidekiq", "sidekiq-nolog"):
        if system == "sidekiq-nolog":
            env["BENCH_JOBLOG"] = "0"
        env["REDIS_URL"] = url
        cmd = ["sidekiq", "-r", str(BENCH / "peers" / "sidekiq_jobs.rb"), "-c", str(THREADS), "-q", "bench"]
        return [(cmd, env)] * processes  # Sidekiq OSS: one process each, no built-in fork
    if system == "celery-threads":
        return [([PY, "-m", "celery", "-A", "peers.celery_app", "worker", "-P", "threads", "-c", str(THREADS),
                  "-Q", "bench", "-l", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
                  "-n", f"bench{i}@%h"], env) for i in range(processes)]
    if system == "celery-prefork":
        if processes > 1:
            return None  # prefork is already multi-process: one measurement, concurrency 10
        return [([PY, "-m", "celery", "-A", "peers.celery_app", "worker", "-P", "prefork", "-c", str(THREADS),
                  "-Q", "bench", "-l", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
                  "-n", "benchp@%h"], env)]
    if system == "rq":
        # RQ has no threads: one process that forks a child per job.
        return [([str(BIN / "rq"), "worker", "bench", "--url", url, "-w", "rq.worker.Worker"], env)] * processes
    if system == "dramatiq":
        return [([PY, "-m", "dramatiq", "peers.dramatiq_app", "--processes", str(processes), "--threads",
                  str(THREADS), "--queues", "bench"], env)]
    if system == "huey":
        return [([str(BIN / "huey_consumer"), "peers.huey_app.huey", "-w", str(THREADS), "-k", "thread"], env)] * processes
    raise ValueError(system)


def start(cmds: list[tuple[list[str], dict]], url: str, logfile: Path) -> list[subprocess.Popen]:
    out = open(logfile, "ab")
    procs = []
    for cmd, extra in cmds:
        procs.append(subprocess.Popen(cmd, env=base_env(url, extra), cwd=BENCH if "sidekiq" not in cmd[0] else REPO,
                                      stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
    out.close()
    return procs


def stop(procs: list[subprocess.Popen], grace: float = 15.0) -> None:
    """TERM each worker's own process group (it leads one: start_new_session), then KILL what is left."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # leftovers in the group (forked children) too
        except ProcessLookupError:
            pass
        if p.poll() is None:
            p.wait(5)


def tree(pids: list[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    seen, todo = [], list(pids)
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo.extend(children.get(pid, []))
    return seen


def cpu_seconds(pids: list[int], walk: bool = True) -> float:
    """User + system CPU seconds used so far by the worker process tree (/proc/<pid>/stat).

    Live processes count their own time (every thread's, ended threads included); children
    that have exited and been reaped count through their parent's cutime + cstime, so a
    fork-per-job worker (RQ) is charged for its jobs. A child counts once either way: alive
    it is in the tree, reaped it is in its parent's c-times."""
    total = 0
    for pid in tree(pids) if walk else pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # utime, stime, cutime, cstime: fields 14-17 of proc(5), counted from after the name
            total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        except (OSError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def _status_field(path: str, field: str) -> int:
    """The number after ``field:`` in a /proc status file; 0 if the task is gone."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def context_switches(pids: list[int], walk: bool = True) -> int:
    """Voluntary context switches so far, over every thread of the worker process tree:
    each is a thread going to sleep (on a socket, a lock, the GIL)."""
    total = 0
    for pid in tree(pids) if walk else pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        total += sum(_status_field(f"/proc/{pid}/task/{tid}/status", "voluntary_ctxt_switches") for tid in tids)
    return total


def peak_rss_mb(pids: list[int]) -> float:
    """Sum of VmHWM (peak resident set) over the worker process tree, in MB."""
    return sum(_status_field(f"/proc/{pid}/status", "VmHWM") for pid in tree(pids)) / 1024


#: Round trips (each one command) the driver itself has sent to Redis while polling for
#: completions: taken out of the server's counters over a drain window (window()).
DRIVER_CALLS = [0]
#: The delaying proxy's process ids while one runs (--latency-ms), else empty.
PROXY_PIDS: list[int] = []


def server_counters(r: redis.Redis) -> dict:
    """The Redis server's CPU seconds and its reply-write and command counters (one round trip)."""
    DRIVER_CALLS[0] += 1
    info = r.execute_command("INFO", "stats", "cpu")
    return {"redis_cpu": float(info.get("used_cpu_sys", 0)) + float(info.get("used_cpu_user", 0)),
            "writes": int(info.get("total_writes_processed", 0)),
            "commands": int(info.get("total_commands_processed", 0))}


class Sampler:
    """The costs' counters, read at every poll of a drain (every 20 ms) from the workers'
    spawn on, so that they can be read at the first and at the last completion the jobs
    timed (at()): the window the rate is measured over, whatever the recorder's 50 ms
    flush lag. The process tree is walked every 0.25 s (a walk reads all of /proc), the
    known processes' /proc files at each sample."""

    WALK_EVERY = 0.25

    def __init__(self, r: redis.Redis, roots: list[int]) -> None:
        self.r, self.roots = r, roots
        self.pids: list[int] = []
        self.proxy = tree(PROXY_PIDS) if PROXY_PIDS else []
        self.walked = float("-inf")
        self.samples: list[dict] = []

    def sample(self) -> None:
        now = time.monotonic()
        if now - self.walked >= self.WALK_EVERY:
            self.pids, self.walked = tree(self.roots), now
        before = time.time()
        row = {"worker_cpu": cpu_seconds(self.pids, walk=False), "switches": context_switches(self.pids, walk=False),
               **server_counters(self.r)}
        if self.proxy:
            row["proxy_cpu"] = cpu_seconds(self.proxy, walk=False)
        row["driver"] = DRIVER_CALLS[0]
        row["at"] = (before + time.time()) / 2
        self.samples.append(row)

    def at(self, when: float) -> dict:
        """Every counter at time `when`, interpolated between the samples either side."""
        rows = self.samples
        if when <= rows[0]["at"]:
            return rows[0]
        for prev, nxt in zip(rows, rows[1:], strict=False):
            if prev["at"] <= when <= nxt["at"]:
                f = (when - prev["at"]) / (nxt["at"] - prev["at"]) if nxt["at"] > prev["at"] else 0.0
                return {k: prev[k] + (nxt[k] - prev[k]) * f for k in prev}
        return rows[-1]


def window(a: dict, b: dict, jobs: int) -> dict:
    """Per-job costs between the counters at two moments `jobs` completions apart.

    * worker CPU: user + system of the worker's process tree (cpu_seconds());
    * Redis CPU: the server's used_cpu_user + used_cpu_sys (INFO cpu; every client of that
      server, whatever its database, counts: a shared server adds others' work);
    * round trips: the server's reply writes (INFO stats total_writes_processed): one each
      time it sends a client what it has for it in one event-loop turn, so a pipeline of
      any length or a blocking pop that returns is one, a pub/sub message one; less the
      driver's own polling and sampling (DRIVER_CALLS);
    * commands: total_commands_processed, less the driver's the same way.
    """
    driver = b["driver"] - a["driver"]
    out = {"cpu_us_per_job": (b["worker_cpu"] - a["worker_cpu"]) / jobs * 1e6,
           "switches_per_job": (b["switches"] - a["switches"]) / jobs,
           "redis_cpu_us_per_job": (b["redis_cpu"] - a["redis_cpu"]) / jobs * 1e6,
           "round_trips_per_job": (b["writes"] - a["writes"] - driver) / jobs,
           "commands_per_job": (b["commands"] - a["commands"] - driver) / jobs,
           "window_jobs": jobs}
    if "proxy_cpu" in a and "proxy_cpu" in b:
        out["proxy_cpu_us_per_job"] = (b["proxy_cpu"] - a["proxy_cpu"]) / jobs * 1e6
    return out


def completions(r: redis.Redis) -> tuple[int, float, float]:
    DRIVER_CALLS[0] += 2
    count, first, last = 0, float("inf"), 0.0
    for raw in r.hvals("bench:rec"):
        c, f, la = raw.split()
        if int(c):
            count += int(c)
            first, last = min(first, float(f)), max(last, float(la))
    direct = r.get("bench:direct:count")
    if direct:
        count += int(direct)
        DRIVER_CALLS[0] += 1
        ts = dict(r.zrange("bench:direct:ts", 0, -1, withscores=True))
        first, last = min(first, ts.get(b"first", first)), max(last, ts.get(b"last", last))
    return count, first, last


def drain(r: redis.Redis, url: str, system: str, shape: str, n: int, processes: int, has_processes: bool,
          timeout: float, extra_env: dict | None = None, fill_url: str | None = None) -> dict | None:
    """One drain measurement: the workers on `url`; the jobs put in beforehand on `fill_url`
    (default `url`: the direct one when `url` goes through the delaying proxy, since filling
    is not on the clock)."""
    cmds = worker_commands(system, processes, url, has_processes)
    if cmds is None:
        return None
    if extra_env:
        cmds = [(c, {**e, **extra_env}) for c, e in cmds]
    r.flushdb()
    fill(r, system, shape, n, fill_url or url)
    logfile = OUT / f"{system}-{shape}-p{processes}.log"
    spawned = time.time()
    procs = start(cmds, url, logfile)
    result: dict = {"system": system, "shape": shape, "jobs": n, "processes": processes}
    try:
        deadline = time.monotonic() + timeout
        count = 0
        sampler = Sampler(r, [p.pid for p in procs])
        sampler.sample()  # before any job can have run
        while time.monotonic() < deadline:
            count, first, last = completions(r)
            sampler.sample()
            if count >= n:
                # The costs over the rate's own window: first to last completion, n - 1 jobs.
                if last > first:
                    result.update(window(sampler.at(first), sampler.at(last), count - 1))
                break
            if all(p.poll() is not None for p in procs):
                break
            time.sleep(0.02)
        result["rss_mb"] = round(peak_rss_mb([p.pid for p in procs]), 1)
        if extra_env and extra_env.get("BENCH_COUNT") == "1":
            time.sleep(0.1)
            result["cmds"] = {}
            for key in r.scan_iter("bench:cmds:*"):
                for k, v in r.hgetall(key).items():
                    result["cmds"][k.decode()] = result["cmds"].get(k.decode(), 0) + int(v)
    finally:
        stop(procs)
    result["completed"] = count
    if count < n:
        result["error"] = f"only {count}/{n} completed (see {logfile})"
        return result
    result["rate"] = (n - 1) / (last - first) if last > first else float("nan")
    result["boot_s"] = round(first - spawned, 3)
    return result


# -- enqueue rates --------------------------------------------------------------

ENQUEUE_CODE = {
    "wurk": ("import django; django.setup(); from wurkbench.jobs import Noop\nfor _ in range(200): Noop.perform_async()\n",
             "Noop.perform_async()", "Noop.perform_bulk([[] for _ in range(N)])"),
    "celery": ("from peers.celery_app import noop\nfor _ in range(200): noop.apply_async()\n", "noop.apply_async()", None),
    "rq": ("import os; from redis import Redis; from rq import Queue; from peers.rq_jobs import noop\n"
           "q=Queue('bench', connection=Redis.from_url(os.environ['BENCH_REDIS_URL']))\n"
           "for _ in range(200): q.enqueue(noop)\n",
           "q.enqueue(noop)", "q.enqueue_many([Queue.prepare_data(noop) for _ in range(N)])"),
    "dramatiq": ("from peers.dramatiq_app import noop\nfor _ in range(200): noop.send()\n", "noop.send()", None),
    "huey": ("from peers.huey_app import noop\nfor _ in range(200): noop()\n", "noop()", None),
    # The floor for a Python client on redis-py: one LPUSH of a job's bytes (enqueue only).
    "lpush": ("import os, redis\nr = redis.Redis.from_url(os.environ['BENCH_REDIS_URL'])\n"
              "raw = b'{\"class\":\"wurkbench.jobs.Noop\",\"args\":[],\"jid\":\"0123456789abcdef01234567\",'"
              " b'\"queue\":\"bench\",\"retry\":true,\"created_at\":1796150408791,\"enqueued_at\":1796150408791}'\n"
              "for _ in range(200): r.lpush('queue:bench', raw)\n", "r.lpush('queue:bench', raw)", None),
}

RUBY_ENQUEUE = """
require "sidekiq"; require_relative "%s"
N = %d
200.times { NoopJob.perform_async }
t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
c = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
if ARGV[0] == "bulk"
  N.step(1, -1000) { |left| Sidekiq::Client.push_bulk("class" => NoopJob, "args" => Array.new([left, 1000].min) { [] }) }
else
  N.times { NoopJob.perform_async }
end
puts "#{Process.clock_gettime(Process::CLOCK_MONOTONIC) - t} #{Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - c}"
"""


def enqueue_rate(r: redis.Redis, url: str, system: str, mode: str, n: int) -> tuple[float, float] | None:
    """(jobs per second, CPU microseconds per job of the pushing process), or None."""
    r.flushdb()
    if system == "sidekiq":
        script = RUBY_ENQUEUE % (BENCH / "peers" / "sidekiq_jobs.rb", n)
        out = subprocess.run(["ruby", "-e", script, mode], env=base_env(url, {"REDIS_URL": url}),
                             capture_output=True, text=True, check=True).stdout
        wall, cpu = map(float, out.strip().splitlines()[-1].split())
        return n / wall, cpu / n * 1e6
    setup, one, bulk = ENQUEUE_CODE[system]
    body = one if mode == "single" else bulk
    if body is None:
        return None
    loop = f"for _ in range(N): {body}" if mode == "single" else body
    code = (f"N={n}\n{setup}import time\nt=time.perf_counter()\nc=time.process_time()\n{loop}\n"
            "print(time.perf_counter()-t, time.process_time()-c)")
    out = subprocess.run([PY, "-c", code], env=base_env(url), cwd=BENCH, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{system} enqueue failed: {out.stderr[-2000:]}")
    wall, cpu = map(float, out.stdout.strip().splitlines()[-1].split())
    return n / wall, cpu / n * 1e6


# -- reporting ------------------------------------------------------------------


def med(values: list[float]) -> str:
    values = [v for v in values if v == v]
    if not values:
        return "-"
    m = statistics.median(values)
    fmt = (lambda v: f"{v:,.0f}") if m >= 100 else (lambda v: f"{v:.2f}")
    return f"{fmt(m)} ({fmt(min(values))}-{fmt(max(values))})" if len(values) > 1 else fmt(m)


#: Per-job costs over each drain window (window()), as table columns.
COSTS = (("cpu_us_per_job", "worker CPU us/job"), ("redis_cpu_us_per_job", "Redis CPU us/job"),
         ("round_trips_per_job", "round trips/job"), ("commands_per_job", "commands/job"))


def report(results: list[dict], enq: list[dict], cmds: dict | None, meta: dict) -> str:
    lines = [f"## Run {meta['started']} - {meta['jobs']} jobs/run, {meta['runs']} runs, "
             f"{meta['processes']} process(es) x {THREADS} threads", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()), "",
             f"Load average at the start {meta['load'][0]:.2f}; the Redis server had "
             f"{meta['redis_other_clients']} client connection(s) on other databases at the start "
             "(their work counts in Redis CPU, round trips and commands: use a server of the bench's own, "
             "--own-redis, for clean figures).", ""]
    if meta.get("latency"):
        lat = meta["latency"]
        lines += [f"Redis behind the delaying proxy (bench/latency_proxy.py): {lat['delay_ms']} ms added to each "
                  f"reply, {lat['procs']} proxy process(es); a PING's round trip measured through it: "
                  f"p50 {lat['ping_ms']['p50']:.2f} ms, p99 {lat['ping_ms']['p99']:.2f} ms "
                  f"(direct: p50 {lat['direct_ping_ms']['p50']:.3f} ms).", ""]
    for shape in meta["shapes"]:
        rows = [x for x in results if x["shape"] == shape and "rate" in x]
        if not rows:
            continue
        proxied = any("proxy_cpu_us_per_job" in x for x in rows)
        costs = COSTS + ((("proxy_cpu_us_per_job", "proxy CPU us/job"),) if proxied else ())
        lines += [f"### {shape}", "",
                  "| system | jobs/s median (min-max) | wurk / system, paired | wurk-nolog / system, paired "
                  "| boot to first job s | peak RSS MB | " + " | ".join(label for _, label in costs) + " |",
                  "|---|---|---|---|---|---|" + "---|" * len(costs)]
        for system in meta["systems"]:
            mine = [x for x in rows if x["system"] == system]
            if not mine:
                failed = [x for x in results if x["shape"] == shape and x["system"] == system]
                if failed:
                    lines.append(f"| {system} | failed: {failed[0].get('error', 'unsupported')} | | | | |"
                                 + " |" * len(costs))
                continue
            cells = []
            for ours_name in ("wurk", "wurk-nolog"):
                ratios = []
                for x in mine:
                    ours = [y for y in rows if y["system"] == ours_name and y["run"] == x["run"]]
                    if ours:
                        ratios.append(ours[0]["rate"] / x["rate"])
                cells.append(med(ratios) + "x" if system != ours_name and ratios else "")
            lines.append(f"| {system} | {med([x['rate'] for x in mine])} | {cells[0]} | {cells[1]} | "
                         f"{med([x['boot_s'] for x in mine])} | {med([x['rss_mb'] for x in mine])} | "
                         + " | ".join(med([x[key] for x in mine if key in x]) for key, _ in costs) + " |")
        policy = []
        for ours_name, theirs, label in POLICY_PAIRS:
            ratios, cpu_ratios = [], []
            for x in rows:
                if x["system"] != theirs:
                    continue
                ours = [y for y in rows if y["system"] == ours_name and y["run"] == x["run"]]
                if ours:
                    ratios.append(ours[0]["rate"] / x["rate"])
                    if ours[0].get("cpu_us_per_job") and x.get("cpu_us_per_job"):
                        cpu_ratios.append(ours[0]["cpu_us_per_job"] / x["cpu_us_per_job"])
            if ratios:
                policy.append(f"| {ours_name} / {theirs} | {label} | {med(ratios)}x | "
                              + (f"{med(cpu_ratios)}x" if cpu_ratios else "-") + " |")
        if policy:
            lines += ["", "| same logging policy | | paired jobs/s ratio | paired worker CPU/job ratio |",
                      "|---|---|---|---|", *policy]
        if shape == "io":
            lines.append(f"\nio ceiling for {meta['processes']} x {THREADS} threads: "
                         f"{meta['processes'] * THREADS / 0.005:,.0f} jobs/s")
        if shape == "cpu":
            lines.append(f"\ncpu: one job is {meta['cpu_job_ms']:.3f} ms of arithmetic in this Python "
                         f"(one core = {1000 / meta['cpu_job_ms']:,.0f} jobs/s)")
        lines.append("")
    if enq:
        lines += ["### enqueue (noop, from one Python thread / Ruby thread)", "",
                  "| system | one at a time jobs/s | wurk / system | bulk jobs/s | wurk / system |", "|---|---|---|---|---|"]
        for system in sorted({e["system"] for e in enq}, key=lambda s: (s != "wurk", s)):
            cells = []
            for mode in ("single", "bulk"):
                mine = [e for e in enq if e["system"] == system and e["mode"] == mode and e["rate"]]
                ratios = []
                for e in mine:
                    ours = [o for o in enq if o["system"] == "wurk" and o["mode"] == mode and o["run"] == e["run"]]
                    if ours and ours[0]["rate"]:
                        ratios.append(ours[0]["rate"] / e["rate"])
                cells += [med([e["rate"] for e in mine]) if mine else "n/a",
                          (med(ratios) + "x") if mine and system != "wurk" else ""]
            lines.append(f"| {system} | " + " | ".join(cells) + " |")
        lines += ["", "CPU microseconds per job of the pushing process (process time: this client's work, not "
                  "the Redis server's; a steadier figure than the rates on a shared machine), one at a time; "
                  "the ratio is the system's CPU per job over wurk's in the same run:", "",
                  "| system | CPU us/job | system / wurk |", "|---|---|---|"]
        for system in sorted({e["system"] for e in enq}, key=lambda s: (s != "wurk", s)):
            mine = [e for e in enq if e["system"] == system and e["mode"] == "single" and e.get("cpu_us")]
            ratios = []
            for e in mine:
                ours = [o for o in enq if o["system"] == "wurk" and o["mode"] == "single" and o["run"] == e["run"]]
                if ours and ours[0].get("cpu_us"):
                    ratios.append(e["cpu_us"] / ours[0]["cpu_us"])
            if mine:
                lines.append(f"| {system} | {med([e['cpu_us'] for e in mine])} | "
                             + ((med(ratios) + "x") if system != "wurk" else "") + " |")
        lines.append("")
    if cmds:
        lines += ["### Redis commands per noop job (wurk_django)", "", "```", json.dumps(cmds, indent=1), "```", ""]
    return "\n".join(lines)


def other_clients(r: redis.Redis, db: int) -> int:
    """Connections to the bench's Redis server on another database than the bench's."""
    return sum(1 for c in r.client_list() if int(c.get("db", db)) != db)


def cpu_job_ms() -> float:
    sys.path.insert(0, str(BENCH))
    from peers.recorder import cpu_work

    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(50):
            cpu_work()
        best = min(best, (time.perf_counter() - t) / 50)
    return best * 1000


def commandstats(r: redis.Redis) -> dict:
    return {k.removeprefix("cmdstat_"): v["calls"] for k, v in r.info("commandstats").items()}


def count_commands(r: redis.Redis, url: str, n: int, has_processes: bool, fill_url: str | None = None) -> dict:
    """Client-side counts (exact, this worker only) plus server-wide INFO commandstats deltas."""
    before = commandstats(r)
    res = drain(r, url, "wurk", "noop", n, 1, has_processes, 120, {"BENCH_COUNT": "1"}, fill_url)
    after = commandstats(r)
    counts = res.get("cmds", {}) if res else {}
    per_job = {k: round(v / n, 3) for k, v in sorted(counts.items())}
    total_cmds = sum(v for k, v in counts.items() if k.startswith("cmd:"))
    total_rt = sum(v for k, v in counts.items() if k.startswith("rt:"))
    server = {k: round((after.get(k, 0) - before.get(k, 0)) / n, 3) for k in ("lrem", "lmove", "del", "blmove")}
    return {"jobs": n, "commands_per_job": round(total_cmds / n, 3), "round_trips_per_job": round(total_rt / n, 3),
            "client_breakdown_per_job": per_job,
            "server_commandstats_delta_per_job (server-wide, includes other clients)": server}


def profile(r: redis.Redis, url: str, n: int, seconds: float, extra: dict, shape: str = "noop") -> Path:
    """py-spy on the wurk worker while it drains n jobs of one shape; raw collapsed stacks to OUT."""
    r.flushdb()
    fill(r, "wurk", shape, n, url)
    out = OUT / f"profile-{shape}-{'nolog' if extra.get('BENCH_JOBLOG') == '0' else 'log'}.txt"
    cmd = worker_commands("wurk", 1, url, False)[0][0]
    procs = start([(cmd, extra)], url, OUT / "profile.log")
    try:
        time.sleep(1.0)
        spy = subprocess.run([str(BIN / "py-spy"), "record", "-p", str(procs[0].pid), "-d", str(int(seconds)), "-r", "250",
                        "-f", "raw", "-o", str(out), "--gil"], capture_output=True, text=True)
        if spy.returncode:
            raise RuntimeError(f"py-spy failed: {spy.stderr[-3000:]}")
        for line in summarize(out):
            log(line)
    finally:
        stop(procs)
    return out


def summarize(path: Path, top: int = 25) -> list[str]:
    """Self and inclusive sample shares per function from py-spy's collapsed stacks."""
    own: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        own[frames[-1]] = own.get(frames[-1], 0) + n
        for frame in set(frames):
            incl[frame] = incl.get(frame, 0) + n
    out = [f"{path.name}: {total} samples (GIL holder only)", "self%  incl%  function"]
    for frame, n in sorted(incl.items(), key=lambda kv: -kv[1])[:top]:
        out.append(f"{100 * own.get(frame, 0) / total:5.1f} {100 * n / total:6.1f}  {frame}")
    out.append("-- top self --")
    for frame, n in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        out.append(f"{100 * n / total:5.1f} {100 * incl[frame] / total:6.1f}  {frame}")
    return out


def main() -> None:
    global THREADS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", default=",".join(ALL_SYSTEMS),
                    help="comma list of " + ", ".join(ALL_SYSTEMS))
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--threads", type=int, default=THREADS, help="threads per worker process, every system (10)")
    ap.add_argument("--jobs", type=int, default=5000, help="jobs per drain measurement")
    ap.add_argument("--rq-jobs", type=int, default=500, help="jobs per RQ drain (fork per job is slow)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--enqueue-jobs", type=int, default=5000)
    ap.add_argument("--count-jobs", type=int, default=2000, help="noop jobs for the command count")
    ap.add_argument("--only", choices=("drain", "enqueue", "commands", "profile"), action="append")
    ap.add_argument("--profile-seconds", type=float, default=8)
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/9")
    ap.add_argument("--own-redis", type=int, metavar="PORT",
                    help="start a redis-server of the bench's own on 127.0.0.1:PORT for the run (--redis's "
                         "database on it), so Redis CPU, round trips and commands are the bench's alone")
    ap.add_argument("--latency-ms", type=float, default=0.0,
                    help="route every worker's and enqueuer's Redis connection through bench/latency_proxy.py, "
                         "which delays each reply this many ms (sidekiqload's 1 ms); the driver's own stays direct")
    ap.add_argument("--proxy-procs", type=int, default=1, help="processes of the delaying proxy (--latency-ms)")
    ap.add_argument("--smoke", action="store_true", help="tiny run (< 60 s) to prove the harness works")
    ap.add_argument("--json", help="also write the raw results here")
    args = ap.parse_args()
    THREADS = args.threads

    db = args.redis.rstrip("/").rsplit("/", 1)[-1]
    if not db.isdigit() or int(db) == 0:
        ap.error("--redis must name a logical database other than 0 (the benchmark flushes it)")
    OUT.mkdir(parents=True, exist_ok=True)
    own = None
    if args.own_redis:
        own = own_redis(args.own_redis)
        args.redis = f"redis://127.0.0.1:{args.own_redis}/{db}"
    try:
        run(ap, args, db)
    finally:
        if own is not None:
            own.terminate()
            own.wait(10)


def own_redis(port: int) -> subprocess.Popen:
    """A throwaway redis-server on 127.0.0.1:port (no persistence), up and answering."""
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--databases", "16"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            client.close()
            return proc
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise SystemExit(f"redis-server on port {port} did not start") from None
            time.sleep(0.05)


def run(ap: argparse.ArgumentParser, args: argparse.Namespace, db: str) -> None:
    r = redis.Redis.from_url(args.redis)
    r.ping()
    proxy = None
    url = args.redis  # what the workers and enqueuers connect to
    if args.latency_ms > 0:
        proxy, url = latency_proxy.spawn(args.redis, args.latency_ms, args.proxy_procs, log_path=OUT / "latency-proxy.log")
        PROXY_PIDS[:] = [proxy.pid]
    try:
        measure(ap, args, db, r, url)
    finally:
        if proxy is not None:
            latency_proxy.stop(proxy)
            PROXY_PIDS.clear()


def measure(ap: argparse.ArgumentParser, args: argparse.Namespace, db: str, r: redis.Redis, url: str) -> None:
    if args.smoke:
        args.systems, args.shapes, args.jobs, args.runs = "wurk", "noop,io", 300, 1
        args.enqueue_jobs, args.count_jobs, args.rq_jobs = 300, 300, 50
        args.only = ["drain", "enqueue", "commands"]
        args.timeout = 30
    only = set(args.only or ("drain", "enqueue", "commands"))
    systems, skipped = [], []
    for s in args.systems.split(","):
        ok, what = available(s)
        (systems if ok else skipped).append(s if ok else f"{s} (missing {what})")
    if skipped:
        log("skipping: " + ", ".join(skipped))
    shapes = args.shapes.split(",")
    has_processes = wurk_has_processes() if args.processes > 1 else False
    if args.processes > 1 and not has_processes:
        log("wurk_django: `manage.py wurk --processes` is not available yet; its multi-process rows are skipped")
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "jobs": args.jobs, "runs": args.runs,
            "processes": args.processes, "systems": systems, "shapes": shapes, "versions": versions(systems),
            "cpu_job_ms": cpu_job_ms(), "redis": r.info("server")["redis_version"], "host_cpus": os.cpu_count(),
            "load": os.getloadavg(), "redis_other_clients": other_clients(r, int(db))}
    if url != args.redis:
        meta["latency"] = {"delay_ms": args.latency_ms, "procs": args.proxy_procs, "url": url,
                           "ping_ms": latency_proxy.ping_ms(url), "direct_ping_ms": latency_proxy.ping_ms(args.redis)}
    meta["versions"]["redis-server"] = meta["redis"]
    results: list[dict] = []
    enq: list[dict] = []
    cmds = None
    t0 = time.monotonic()
    try:
        if "drain" in only:
            for run in range(args.runs):
                for shape in shapes:
                    order = systems[run % len(systems):] + systems[:run % len(systems)]  # rotate who goes first
                    for system in order:
                        n = args.rq_jobs if system == "rq" else args.jobs
                        res = drain(r, url, system, shape, n, args.processes, has_processes, args.timeout,
                                    fill_url=args.redis)
                        if res is None:
                            continue
                        res["run"] = run
                        results.append(res)
                        log(f"run {run} {shape:4} {system:15} " + (
                            f"{res['rate']:8.0f} jobs/s boot {res['boot_s']:.2f}s rss {res['rss_mb']}MB"
                            + (f" cpu {res['cpu_us_per_job']:.1f} us/job" if "cpu_us_per_job" in res else "")
                            + (f" {res['switches_per_job']:.1f} sleeps/job" if "switches_per_job" in res else "")
                            + (f" redis {res['redis_cpu_us_per_job']:.1f} us/job {res['round_trips_per_job']:.2f} rt/job"
                               f" {res['commands_per_job']:.2f} cmd/job" if "round_trips_per_job" in res else "")
                            + (f" proxy {res['proxy_cpu_us_per_job']:.1f} us/job" if "proxy_cpu_us_per_job" in res else "")
                            if "rate" in res else res["error"]))
        if "enqueue" in only:
            peers = [s for s in ("wurk", "sidekiq", "celery", "rq", "dramatiq", "huey", "lpush")
                     if any(x.startswith(s) for x in systems)]
            for run in range(args.runs):
                for system in peers[run % len(peers):] + peers[:run % len(peers)]:
                    for mode in ("single", "bulk"):
                        n = args.enqueue_jobs * (10 if mode == "bulk" and system == "wurk" else 1)
                        got = enqueue_rate(r, url, system, mode, n)
                        if got is not None:
                            rate, cpu = got
                            enq.append({"system": system, "mode": mode, "rate": rate, "cpu_us": cpu, "run": run})
                            log(f"run {run} enqueue {mode:6} {system:10} {rate:8.0f} jobs/s {cpu:6.1f} us CPU/job")
        if "commands" in only and any(s.startswith("wurk") for s in systems):
            cmds = count_commands(r, url, args.count_jobs, has_processes, fill_url=args.redis)
            log(f"commands: {cmds}")
        if "profile" in only:
            for extra in ({}, {"BENCH_JOBLOG": "0"}):
                for shape in shapes if args.shapes != ",".join(SHAPES) else ["noop"]:
                    log(f"profile written to {profile(r, url, 200_000, args.profile_seconds, extra, shape)}")
    finally:
        r.flushdb()
    text = report(results, enq, cmds, meta)
    print(text)
    log(f"total {time.monotonic() - t0:.1f}s")
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "drain": results, "enqueue": enq, "commands": cmds},
                                              indent=1))
    failed = [x for x in results if "error" in x]
    if args.smoke and (failed or not results):
        sys.exit(1)


if __name__ == "__main__":
    main()
