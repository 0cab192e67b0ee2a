#!/usr/bin/env python
"""Pushes from any client (issue 25 item 4): pickup latency, and what idle workers cost Redis.

    python bench/pickup.py latency --samples 200
    python bench/pickup.py idle --processes 20 --seconds 60
    python bench/pickup.py trickle --processes 20 --rate 20 --seconds 30

Every measurement runs on a private ``redis-server`` this script starts (``--port``,
default 7440; no persistence) and stops, so nothing else on the machine touches its
command counts.

**latency**: one idle ``manage.py wurk -c 10`` (``--concurrency``) on 1, 3 or 10 queues, strict or weighted;
jobs go to the last queue (the lowest priority: every queue is walked before it). The
pusher is either Ruby Sidekiq 6.4 (``Sidekiq::Client.push`` in one long-lived ``ruby``
process, the push time taken in Ruby just before the call) or a bare ``LPUSH`` (one
command, no ``SADD queues``, no wake-up token: what ``redis-cli LPUSH`` sends), or
wurk_django's own client (``--pushers wurk``: ``Client().push`` in one long-lived process,
writing wake-up tokens only while a fetcher in the polling fallback wants them). One job
at a time, 20-40 ms apart; each records ``now - sent`` when ``perform`` starts. The
last column counts the connections the server accepted meanwhile (the pushers' and the
worker's redials).
``--notifications off`` runs the same with ``FETCH_NOTIFICATIONS = False`` (the polling
fallback).

**idle**: N idle worker processes (``-c`` each of ``--concurrency``, default 10), wurk_django
or Ruby Sidekiq 6.4 (the ``sidekiq`` binary with a one-line require file), then ``INFO
commandstats`` and ``INFO cpu`` read before and after ``--seconds``: commands per second
and Redis CPU seconds per second, per command, in total and per process (net of the CPU
the server spends alone, measured first for up to 20 s). Connections are
counted from ``CLIENT LIST`` at the end of the window, each one put to the worker process
that owns its socket (``ss -tnp`` maps the client's port to a pid, the pid's process group
to the worker started): the most any process holds, the mean, and what the connections of
the most-connected process last ran (``CLIENT LIST``'s ``cmd``).

**trickle**: the same N idle processes while a bare ``LPUSH`` arrives ``--rate`` times a
second (noop jobs): what a push costs when every process hears it.

Prints markdown tables; asserts nothing. Figures on a shared machine are noisy: repeat.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import latency_proxy  # bench/ is this script's folder, first on sys.path
import redis

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PY = sys.executable
OUT = Path(os.environ.get("BENCH_OUT", "/tmp/wurk-bench"))
RUBY_PUSHER = """
require "sidekiq"
STDOUT.sync = true
$stdin.each_line do |line|
  klass, queue = line.strip.split(" ")
  Sidekiq::Client.push("class" => klass, "queue" => queue, "args" => [Time.now.to_f])
  puts "ok"
end
"""
TINY_SIDEKIQ = """require "sidekiq"
class HoldJob
  include Sidekiq::Worker
  def perform(seconds)
    sleep seconds
  end
end

class PickupJob
  include Sidekiq::Worker
  def perform(sent)
    late = Time.now.to_f - sent
    Sidekiq.redis { |c| c.rpush("bench:lat", late.to_s) }
  end
end
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def queue_args(count: int, weighted: bool) -> list[str]:
    names = [f"q{i}" for i in range(count)]
    if not weighted:
        return names
    return [f"{name},{count - i}" for i, name in enumerate(names)]


class Server:
    """A private redis-server on ``port``, stopped by pid."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.dir = tempfile.mkdtemp(prefix="wurk-pickup-")
        self.proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{port}/0"
        self.clients_url = self.url  # the workers' and pushers' way in: through the delaying proxy if any
        self.client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


def env_for(url: str, extra_wurk: dict | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(BENCH), str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update({"BENCH_REDIS_URL": url, "REDIS_URL": url, "DJANGO_SETTINGS_MODULE": "wurk_settings",
                "BENCH_JOBLOG": "0", "BENCH_WURK": json.dumps(extra_wurk or {})})
    return env


def start_workers(system: str, url: str, queues: list[str], processes: int, extra: dict | None = None,
                  concurrency: int = 10) -> list[subprocess.Popen]:
    OUT.mkdir(parents=True, exist_ok=True)
    out = open(OUT / f"pickup-{system}.log", "ab")
    qargs = [a for q in queues for a in ("-q", q)]
    procs = []
    tiny = None
    if system == "sidekiq":
        tiny = OUT / "tiny_sidekiq.rb"
        tiny.write_text(TINY_SIDEKIQ)
    for _ in range(processes):
        if system == "wurk":
            cmd = [PY, str(REPO / "manage.py"), "wurk", "-c", str(concurrency), *qargs]
        else:
            cmd = ["sidekiq", "-r", str(tiny), "-c", str(concurrency), *qargs]
        procs.append(subprocess.Popen(cmd, env=env_for(url, extra), cwd=BENCH, stdout=out,
                                      stderr=subprocess.STDOUT, start_new_session=True))
    out.close()
    return procs


def stop_workers(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(5)


def wait_ready(r: redis.Redis, processes: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live = [p for p in r.smembers("processes") if r.hget(p, "beat")]
        if len(live) >= processes:
            return
        time.sleep(0.2)
    raise RuntimeError(f"only {len(live)} of {processes} workers reported within {timeout}s")


def percentiles(values: list[float]) -> dict:
    values = sorted(values)

    def pick(q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))]

    return {"n": len(values), "p50": pick(0.5), "p99": pick(0.99), "max": values[-1], "mean": statistics.fmean(values)}


class RubyPusher:
    def __init__(self, url: str) -> None:
        self.proc = subprocess.Popen(["ruby", "-e", RUBY_PUSHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env={"REDIS_URL": url, "PATH": "/usr/bin:/bin"}, text=True,
                                     stderr=subprocess.DEVNULL)

    def push(self, klass: str, queue: str) -> None:
        self.proc.stdin.write(f"{klass} {queue}\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "ok":
            raise RuntimeError("the Ruby pusher failed")

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


WURK_PUSHER = """
import sys, time
import django
django.setup()
from wurk_django.client.push import Client
for line in sys.stdin:
    klass, queue = line.split()
    Client().push({"class": klass, "queue": queue, "args": [time.time()]})
    print("ok", flush=True)
"""


class WurkPusher(RubyPusher):
    """wurk_django's own client in a long-lived process: wake-up tokens as its pushes
    decide them (written only while a fetcher in the polling fallback wants them)."""

    def __init__(self, url: str) -> None:
        self.proc = subprocess.Popen([PY, "-c", WURK_PUSHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env_for(url), cwd=BENCH, text=True, stderr=subprocess.DEVNULL)


def bare_body(klass: str, queue: str) -> bytes:
    now = time.time()
    return json.dumps({"class": klass, "args": [now], "retry": True, "queue": queue,
                       "jid": uuid.uuid4().hex[:24], "created_at": now, "enqueued_at": now}).encode()


def latency(server: Server, count: int, weighted: bool, pusher: str, samples: int, notifications: bool,
            system: str = "wurk", concurrency: int = 10) -> dict:
    r = server.client
    r.flushall()
    queues = queue_args(count, weighted)
    target = queues[-1].split(",")[0]
    klass = "wurkbench.jobs.Pickup" if system == "wurk" else "PickupJob"
    procs = start_workers(system, server.clients_url, queues, 1, {"FETCH_NOTIFICATIONS": notifications}, concurrency)
    ruby = (RubyPusher(server.clients_url) if pusher == "ruby" else WurkPusher(server.clients_url) if pusher == "wurk"
            else None)
    lpush = redis.Redis.from_url(server.clients_url)
    try:
        wait_ready(r, 1)
        time.sleep(1.0)
        dialed = int(r.info("stats")["total_connections_received"])
        for i in range(samples):
            time.sleep(random.uniform(0.02, 0.04))
            if ruby is not None:
                ruby.push(klass, target)
            else:
                lpush.execute_command("LPUSH", f"queue:{target}", bare_body(klass, target))
            deadline = time.monotonic() + 10
            while r.llen("bench:lat") <= i:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"sample {i} was not picked up within 10 s")
                time.sleep(0.0005)
        lat = [float(x) * 1000 for x in r.lrange("bench:lat", 0, -1)]
        dialed = int(r.info("stats")["total_connections_received"]) - dialed
    finally:
        if ruby is not None:
            ruby.close()
        lpush.close()
        stop_workers(procs)
    return {**percentiles(lat), "dialed": dialed}


def counts(r: redis.Redis) -> tuple[dict[str, int], float]:
    stats = r.info("commandstats")
    cpu = r.info("cpu")
    calls = {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}
    return calls, float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])


def _pgid(pid: int) -> int | None:
    try:
        # Field 5 of /proc/<pid>/stat, after the parenthesised command (which may hold spaces).
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def connections(r: redis.Redis, port: int, procs: list[subprocess.Popen]) -> dict:
    """Each worker's connections to the server on ``port``: ``CLIENT LIST`` joined with
    ``ss -tnp`` (client port -> pid -> process group, i.e. the worker started)."""
    owners: dict[str, int] = {}
    out = subprocess.run(["ss", "-tnpH", "state", "established", f"( dport = :{port} )"],
                         capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        fields = line.split()
        local = next((f for f in fields if f.startswith("127.0.0.1:")), None)
        pid = next((int(m) for m in re.findall(r"pid=(\d+)", line)), None)
        if local and pid:
            owners[local] = _pgid(pid) or pid
    leaders = {p.pid for p in procs}
    per: dict[int, list[str]] = {pid: [] for pid in leaders}
    for client in r.client_list():
        owner = owners.get(client["addr"])
        if owner in per:
            per[owner].append(client.get("cmd", "?"))
    counts_ = sorted(len(v) for v in per.values())
    busiest = max(per.values(), key=len) if per else []
    cmds: dict[str, int] = {}
    for cmd in busiest:
        cmds[cmd] = cmds.get(cmd, 0) + 1
    return {"total": sum(counts_), "max": counts_[-1] if counts_ else 0,
            "mean": statistics.fmean(counts_) if counts_ else 0.0,
            "min": counts_[0] if counts_ else 0,
            "busiest": sorted(cmds.items(), key=lambda kv: -kv[1])}


def idle_cost(server: Server, system: str, processes: int, queues: list[str], seconds: float, settle: float,
              rate: float = 0.0, notifications: bool = True, concurrency: int = 10) -> dict:
    r = server.client
    r.flushall()
    r.config_resetstat()
    procs = start_workers(system, server.url, queues, processes, {"FETCH_NOTIFICATIONS": notifications},
                          concurrency)
    try:
        wait_ready(r, processes)
        time.sleep(settle)
        before, cpu_before = counts(r)
        started = time.monotonic()
        pushed = 0
        target = queues[-1].split(",")[0]
        pusher = redis.Redis.from_url(server.url)
        while time.monotonic() - started < seconds:
            if rate:
                pusher.execute_command("LPUSH", f"queue:{target}", json.dumps(
                    {"class": "wurkbench.jobs.Hold" if system == "wurk" else "HoldJob", "args": [0],
                     "queue": target, "jid": uuid.uuid4().hex[:24], "retry": False}).encode())
                pushed += 1
                time.sleep(1.0 / rate)
            else:
                time.sleep(min(1.0, seconds))
        elapsed = time.monotonic() - started
        after, cpu_after = counts(r)
        pusher.close()
        conns = connections(r, server.port, procs)
    finally:
        stop_workers(procs)
    delta = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    delta = {name: n for name, n in delta.items() if n > 0 and name not in ("info",)}
    if rate:
        delta["lpush"] = delta.get("lpush", 0) - pushed  # the driver's own pushes
    total = sum(delta.values())
    return {"per_s": total / elapsed, "cpu_ms_per_s": (cpu_after - cpu_before) * 1000 / elapsed,
            "top": sorted(((n / elapsed, name) for name, n in delta.items()), reverse=True)[:8],
            "pushed": pushed, "per_push": (total / pushed) if pushed else None, "connections": conns}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("latency", "idle", "trickle"))
    ap.add_argument("--port", type=int, default=7440)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--queues", default="1,3,10", help="queue counts (latency)")
    ap.add_argument("--pushers", default="ruby,lpush")
    ap.add_argument("--notifications", choices=("on", "off"), default="on")
    ap.add_argument("--control", action="store_true",
                    help="latency: also Ruby Sidekiq's own worker, Ruby pushes (the machine's noise)")
    ap.add_argument("--processes", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--settle", type=float, default=15)
    ap.add_argument("--rate", type=float, default=20)
    ap.add_argument("--systems", default="wurk,sidekiq")
    ap.add_argument("--idle-queues", default="1,3", help="queue counts (idle, trickle)")
    ap.add_argument("--latency-ms", type=float, default=0.0,
                    help="latency: the worker and pushers reach the server through bench/latency_proxy.py, each "
                         "reply this many ms late (the driver's own reads stay direct)")
    ap.add_argument("--concurrency", default="10", help="-c of each idle process, a list (idle, trickle); latency: the worker's -c (the first)")
    args = ap.parse_args()
    if args.latency_ms and args.what != "latency":
        ap.error("--latency-ms is for the latency measurement (idle and trickle map connections to processes)")
    server = Server(args.port)
    proxy = None
    load = os.getloadavg()
    print(f"## bench/pickup.py {args.what} {time.strftime('%Y-%m-%d %H:%M:%S')} "
          f"(load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})\n")
    try:
        if args.latency_ms:
            proxy, server.clients_url = latency_proxy.spawn(server.url, args.latency_ms)
            ping = latency_proxy.ping_ms(server.clients_url)
            print(f"Worker and pushers behind bench/latency_proxy.py, {args.latency_ms} ms added to each reply: "
                  f"a PING's round trip p50 {ping['p50']:.2f} ms, p99 {ping['p99']:.2f} ms through it.\n")
        if args.what == "latency":
            on = args.notifications == "on"
            print("| worker | queues | order | pusher | notifications | p50 ms | p99 ms | max ms | n | "
                  "connections dialed |\n|---|---|---|---|---|---|---|---|---|---|")
            runs = [("wurk", pusher) for pusher in args.pushers.split(",")]
            if args.control and shutil.which("sidekiq"):
                runs.append(("sidekiq", "ruby"))
            for count in (int(c) for c in args.queues.split(",")):
                for weighted in ((False,) if count == 1 else (False, True)):
                    for system, pusher in runs:
                        res = latency(server, count, weighted, pusher, args.samples, on, system,
                                      int(args.concurrency.split(",")[0]))
                        order = "weighted" if weighted else "strict"
                        label = args.notifications if system == "wurk" else "-"
                        log(f"{system} {count} {order} {pusher}: {res}")
                        print(f"| {system} | {count} | {order} | {pusher} | {label} | {res['p50']:.2f} | "
                              f"{res['p99']:.2f} | {res['max']:.2f} | {res['n']} | {res['dialed']} |", flush=True)
        else:
            rate = args.rate if args.what == "trickle" else 0.0
            # The server's own CPU with no client (its cron): the per-process CPU figures are net of it.
            _, bare_before = counts(server.client)
            time.sleep(min(args.seconds, 20))
            _, bare_after = counts(server.client)
            bare = (bare_after - bare_before) * 1000 / min(args.seconds, 20)
            print(f"The server alone: {bare:.2f} ms of CPU a second; per process below is net of it.\n")
            print("| system | processes x threads | queues | notifications | commands/s | per process | "
                  "Redis CPU ms/s | per process | connections per process (mean, most) | per push | "
                  "top commands/s |\n|---|---|---|---|---|---|---|---|---|---|---|")
            for count in (int(c) for c in args.idle_queues.split(",")):
                queues = queue_args(count, False)
                for conc in (int(c) for c in args.concurrency.split(",")):
                    for system in args.systems.split(","):
                        if system == "sidekiq" and not shutil.which("sidekiq"):
                            continue
                        on = args.notifications == "on"
                        res = idle_cost(server, system, args.processes, queues, args.seconds, args.settle, rate,
                                        on, conc)
                        top = ", ".join(f"{name} {n:.1f}" for n, name in res["top"])
                        per_push = f"{res['per_push']:.1f}" if res["per_push"] is not None else "-"
                        label = args.notifications if system == "wurk" else "-"
                        conns = res["connections"]
                        n = args.processes
                        log(f"{system} {count} queues -c {conc}: {res}")
                        print(f"| {system} | {n} x {conc} | {count} | {label} | {res['per_s']:.1f} | "
                              f"{res['per_s'] / n:.2f} | {res['cpu_ms_per_s']:.2f} | "
                              f"{(res['cpu_ms_per_s'] - bare) / n:.3f} | {conns['mean']:.1f}, {conns['max']} | "
                              f"{per_push} | {top} |", flush=True)
    finally:
        if proxy is not None:
            latency_proxy.stop(proxy)
        server.stop()


if __name__ == "__main__":
    main()
