#!/usr/bin/env python
"""Redis Cluster, scale by primaries (issue 46 item 5): Redis CPU per job on each primary,
and jobs/s, with 1, 2 and 3 primaries, and on one plain redis-server for reference.

    python bench/cluster_scale.py --primaries 1,2,3 --jobs 20000 --runs 3 --processes 2
    python bench/cluster_scale.py --primaries 3 --queues 1        # one hot queue on a 3-primary cluster

Every server is private: started here on ``--port`` and the ports after it (cluster bus
ports are port + 10000), no persistence, stopped by pid at the end. Per layout:

* **cluster, P primaries**: P ``redis-server --cluster-enabled yes``, each given an even
  share of the 16,384 slots (``CLUSTER ADDSLOTSRANGE``, ``CLUSTER MEET``: ``redis-cli
  --cluster create`` refuses fewer than three primaries, and this way one, two and three are
  made alike; no replicas, which the measure does not need). ``--queues`` K queue names are
  picked so that their hash tags (``{q:<name>}``, ``redis.crc.key_slot``) land evenly on the
  primaries (K / P each).
* **one server**: one plain ``redis-server``, the same K queues in Sidekiq's layout
  (``queue:<name>``), the one-server worker as shipped (its fetch, as configured by default).

Per measurement: flush every server; stage ``--jobs`` noop jobs (hand-built payloads) spread
evenly over the K queues, each queue's share in a side list of its own slot; start
``--processes`` M worker processes (``manage.py wurk -c 10`` with bench/wurk_settings.py, per-job
log off, every queue at weight 1: each fetch tries the queues in a fresh random order, as a
fleet serving many queues does) and wait until each has beaten; read every server's counters
twice, ``--idle`` seconds apart (the idle cost: blocked fetches timing out, beats, cluster
gossip); ``RENAME`` every side list to its queue (the enqueue's cost stays out); wait until
the jobs have all run (bench/peers/recorder.py counts them on a private recorder server,
so its writes touch no measured server); read the counters again; stop the workers.

Reported, medians over ``--runs``:

* jobs/s: first to last completion, as the jobs record them;
* worker CPU per job: user + system of the workers' process trees (/proc), from the
  ``RENAME`` to the end of the drain, divided by the jobs;
* Redis CPU per job, all primaries and each: ``used_cpu_user + used_cpu_sys`` (``INFO cpu``)
  over the same window, divided by all the jobs (each primary's own share: what it spends for
  the fleet's jobs, not per job it served);
* commands per job, each primary: ``total_commands_processed`` over the window, less the
  driver's own (one ``INFO`` and its ``RENAME``s), divided by all the jobs; the per-command
  breakdown (``INFO commandstats``) goes to the log and ``--json``;
* round trips per job, each primary: ``total_writes_processed`` (one per event-loop turn in
  which the server has replies for a client: a pipeline is one), the driver's taken out the same way;
* the busiest primary's share of one core over the drain, and the idle CPU (ms per second)
  of each primary before the drain;
* first, per layout, the push side (``--pushes``, 0 skips it): ``Noop.set(queue=...).perform_async()``
  one at a time from one process, round robin over the same queues: Redis CPU and commands
  per job pushed, each primary.

A shared 2-core machine bounds jobs/s by the workers' own CPU, not by Redis: the per-job
costs are the figures that carry over (docs/benchmarks.md turns them into a fleet's
arithmetic). Prints a markdown table; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pickup import BENCH, OUT, PY, REPO, Server, env_for, log, stop_workers, wait_ready  # noqa: E402
from run import cpu_seconds  # noqa: E402

from wurk_django.redis.cluster_layout import CLUSTER, SIDEKIQ  # noqa: E402

SLOTS = 16384
THREADS = 10


class ClusterNodes:
    """P primaries on ``ports``, each owning an even share of the slots; stopped by pid."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.dir = tempfile.mkdtemp(prefix="wurk-cluster-scale-")
        self.procs: list[subprocess.Popen] = []
        try:
            for port in ports:
                self.procs.append(subprocess.Popen(
                    ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                     "--cluster-config-file", f"nodes-{port}.conf", "--cluster-node-timeout", "5000",
                     "--save", "", "--appendonly", "no", "--dir", self.dir],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            self.nodes = {port: redis.Redis(host="127.0.0.1", port=port) for port in ports}
            for client in self.nodes.values():
                _wait(client.ping, "a node to answer")
            count = len(ports)
            for i, client in enumerate(self.nodes.values()):
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", SLOTS * i // count, SLOTS * (i + 1) // count - 1)
                client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
            first = ports[0]
            for port in ports[1:]:
                self.nodes[port].execute_command("CLUSTER", "MEET", "127.0.0.1", first)
            _wait(self.ready, "cluster_state:ok on every node", timeout=60)
            self.client = RedisCluster(host="127.0.0.1", port=first)
            self.owner = self._owners()
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def ready(self) -> bool:
        for client in self.nodes.values():
            info = client.cluster("info")
            if info.get("cluster_state") != "ok" or int(info.get("cluster_known_nodes", 0)) < len(self.ports):
                return False
        return True

    def _owners(self) -> list[int]:
        """The port of the primary owning each slot: the ranges given out above."""
        count = len(self.ports)
        owner = [0] * SLOTS
        for i, port in enumerate(self.ports):
            for slot in range(SLOTS * i // count, SLOTS * (i + 1) // count):
                owner[slot] = port
        return owner

    def port_of(self, key: str) -> int:
        return self.owner[key_slot(key.encode())]

    def flush(self) -> None:
        for client in self.nodes.values():
            client.flushall()

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


def _wait(check, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except redis.ConnectionError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def pick_queues(cluster: ClusterNodes | None, count: int) -> list[str]:
    """``count`` queue names whose tags spread evenly over the cluster's primaries
    (``count // P`` each; fewer queues than primaries: the first names found)."""
    if cluster is None:
        return [f"bench{i}" for i in range(count)]
    per = max(1, count // len(cluster.ports))
    chosen: dict[int, list[str]] = {port: [] for port in cluster.ports}
    picked: list[str] = []
    i = 0
    while len(picked) < count:
        name = f"bench{i}"
        port = cluster.port_of(CLUSTER.queue(name))
        if len(chosen[port]) < per:
            chosen[port].append(name)
            picked.append(name)
        i += 1
    for name in picked:  # the slot map given out agrees with the cluster's own
        assert cluster.client.get_node_from_key(CLUSTER.queue(name)).port == cluster.port_of(CLUSTER.queue(name))
    return picked


def stage_key(layout, queue: str) -> str:
    """A side list in the queue's own slot: one ``RENAME`` makes it the queue."""
    return layout.queue(queue).replace(":queue", ":stage") if layout.cluster else f"bench:stage:{queue}"


def fill(client, layout, queues: list[str], jobs: int) -> None:
    ms = int(time.time() * 1000)
    pipe = client.pipeline(transaction=False)
    share = jobs // len(queues)
    for queue in queues:
        base = {"class": "wurkbench.jobs.Noop", "args": [], "retry": True, "queue": queue,
                "created_at": ms, "enqueued_at": ms}
        bodies = [json.dumps({**base, "jid": uuid.uuid4().hex[:24]}, separators=(",", ":")).encode()
                  for _ in range(share)]
        for i in range(0, share, 1000):
            pipe.lpush(stage_key(layout, queue), *bodies[i:i + 1000])
    pipe.sadd(layout.queues, *queues)
    pipe.execute()


def counters(nodes: dict[int, redis.Redis]) -> dict[int, dict]:
    out = {}
    for port, client in nodes.items():
        info = client.execute_command("INFO", "cpu", "stats", "commandstats")
        out[port] = {"cpu": float(info["used_cpu_user"]) + float(info["used_cpu_sys"]),
                     "commands": int(info["total_commands_processed"]),
                     "writes": int(info["total_writes_processed"]),
                     "by_command": {k[len("cmdstat_"):]: int(v["calls"]) for k, v in info.items()
                                    if k.startswith("cmdstat_")}}
    return out


def recorded(r: redis.Redis) -> tuple[int, float, float]:
    count, first, last = 0, float("inf"), 0.0
    for value in r.hgetall("bench:rec").values():
        c, f, la = value.split()
        if int(c):
            count += int(c)
            first, last = min(first, float(f)), max(last, float(la))
    return count, first, last


def start_workers(url: str, recorder_url: str, queues: list[str], processes: int) -> list[subprocess.Popen]:
    OUT.mkdir(parents=True, exist_ok=True)
    out = open(OUT / "cluster-scale-wurk.log", "ab")
    env = env_for(recorder_url, {"REDIS_URL": url})  # the recorder's writes on a server of their own
    env["REDIS_URL"] = url
    qargs = [a for q in queues for a in ("-q", f"{q},1")]
    procs = [subprocess.Popen([PY, str(REPO / "manage.py"), "wurk", "-c", str(THREADS), *qargs], env=env, cwd=BENCH,
                              stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
             for _ in range(processes)]
    out.close()
    return procs


def wait_cluster_ready(client: RedisCluster, processes: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    live: list = []
    while time.monotonic() < deadline:
        live = [p for p in client.smembers(CLUSTER.processes) if client.hget(CLUSTER.process(p.decode()), "beat")]
        if len(live) >= processes:
            return
        time.sleep(0.2)
    raise RuntimeError(f"only {len(live)} of {processes} workers reported within {timeout}s")


def measure(cluster: ClusterNodes | None, single: Server | None, recorder: Server, queue_count: int,
            processes: int, jobs: int, idle: float, timeout: float = 600) -> dict:
    layout = CLUSTER if cluster is not None else SIDEKIQ
    if cluster is not None:
        cluster.flush()
        client, nodes, url = cluster.client, cluster.nodes, cluster.url
    else:
        single.client.flushall()
        client, nodes, url = single.client, {single.port: single.client}, single.url
    recorder.client.flushall()
    queues = pick_queues(cluster, queue_count)
    jobs = jobs // len(queues) * len(queues)
    fill(client, layout, queues, jobs)
    procs = start_workers(url, recorder.url, queues, processes)
    try:
        if cluster is not None:
            wait_cluster_ready(client, processes)
        else:
            wait_ready(client, processes)
        time.sleep(1.0)  # past the boot's first beats, walks and recovery sweep
        pids = [p.pid for p in procs]
        idle_start, idle_t0 = counters(nodes), time.monotonic()
        time.sleep(idle)
        before, t0, worker0 = counters(nodes), time.monotonic(), cpu_seconds(pids)
        renamed = dict.fromkeys(nodes, 0)
        for queue in queues:
            client.rename(stage_key(layout, queue), layout.queue(queue))
            renamed[cluster.port_of(layout.queue(queue)) if cluster is not None else single.port] += 1
        deadline = time.monotonic() + timeout
        while True:
            count, first, last = recorded(recorder.client)
            if count >= jobs:
                break
            if time.monotonic() > deadline or all(p.poll() is not None for p in procs):
                raise RuntimeError(f"not drained: {count}/{jobs} (see {OUT / 'cluster-scale-wurk.log'})")
            time.sleep(0.05)
        after, t1, worker1 = counters(nodes), time.monotonic(), cpu_seconds(pids)
    finally:
        stop_workers(procs)
    ports = sorted(nodes)
    window = t1 - t0
    spent = {p: after[p]["cpu"] - before[p]["cpu"] for p in ports}
    idle_rate = {p: (before[p]["cpu"] - idle_start[p]["cpu"]) / (t0 - idle_t0) for p in ports}
    # Less the driver's own: the "before" INFO (counted by "after"), and the RENAMEs sent there.
    commands = {p: after[p]["commands"] - before[p]["commands"] - 1 - renamed[p] for p in ports}
    # Reply writes: one per event-loop turn with replies for a client, so a pipeline is one
    # (bench/README.md, round trips/job); less the driver's "before" INFO and RENAMEs.
    writes = {p: after[p]["writes"] - before[p]["writes"] - 1 - renamed[p] for p in ports}
    by_command: dict[str, float] = {}
    for p in ports:
        for name, calls in after[p]["by_command"].items():
            delta = calls - before[p]["by_command"].get(name, 0)
            if delta:
                by_command[name] = by_command.get(name, 0) + delta / jobs
    by_command["info"] = by_command.get("info", 0) - len(ports) / jobs
    by_command["rename"] = by_command.get("rename", 0) - len(queues) / jobs
    return {
        "jobs": jobs, "queues": queues, "jobs_s": (jobs - 1) / (last - first),
        "worker_us_per_job": (worker1 - worker0) / jobs * 1e6,
        "redis_us_per_job": sum(spent.values()) / jobs * 1e6,
        "redis_us_per_job_each": [spent[p] / jobs * 1e6 for p in ports],
        "commands_per_job_each": [commands[p] / jobs for p in ports],
        "round_trips_per_job_each": [writes[p] / jobs for p in ports],
        "busiest_core": max(spent.values()) / window,
        "idle_ms_per_s_each": [idle_rate[p] * 1e3 for p in ports],
        # Less what the server spent idle at the same rate over the window (cluster gossip,
        # serverCron, idle fetches): what the jobs themselves added.
        "redis_net_us_per_job": sum(spent[p] - idle_rate[p] * window for p in ports) / jobs * 1e6,
        "by_command": {k: round(v, 3) for k, v in sorted(by_command.items(), key=lambda kv: -kv[1]) if abs(v) >= 0.001},
        "load": os.getloadavg()[0],
    }


PUSH_CODE = """import django
django.setup()
from wurkbench.jobs import Noop
queues = {queues!r}
jobs = [Noop.set(queue=q) for q in queues]
for i in range({n}):
    jobs[i % len(queues)].perform_async()
"""


def push_cost(cluster: ClusterNodes | None, single: Server | None, recorder: Server, queue_count: int,
              pushes: int) -> dict:
    """Redis CPU and commands per job pushed one at a time (``perform_async``) from one
    process, spread over the queues; the process's ``django.setup()`` and its first
    probe are in the window (a few commands)."""
    if cluster is not None:
        cluster.flush()
        nodes, url = cluster.nodes, cluster.url
    else:
        single.client.flushall()
        nodes, url = {single.port: single.client}, single.url
    queues = pick_queues(cluster, queue_count)
    env = env_for(recorder.url, {"REDIS_URL": url})
    env["REDIS_URL"] = url
    before = counters(nodes)
    subprocess.run([PY, "-c", PUSH_CODE.format(queues=queues, n=pushes)], env=env, cwd=BENCH, check=True,
                   capture_output=True)
    after = counters(nodes)
    ports = sorted(nodes)
    return {"redis_us_per_job_each": [(after[p]["cpu"] - before[p]["cpu"]) / pushes * 1e6 for p in ports],
            "commands_per_job_each": [(after[p]["commands"] - before[p]["commands"] - 1) / pushes for p in ports],
            "round_trips_per_job_each": [(after[p]["writes"] - before[p]["writes"] - 1) / pushes for p in ports]}


def median_row(results: list[dict]) -> dict:
    out = {}
    for key, value in results[0].items():
        if isinstance(value, list) and value and isinstance(value[0], (int, float)):
            out[key] = [statistics.median(r[key][i] for r in results) for i in range(len(value))]
        elif isinstance(value, (int, float)):
            out[key] = statistics.median(r[key] for r in results)
    return out


def each(values: list[float], fmt: str) -> str:
    return " / ".join(format(v, fmt) for v in values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=8800,
                    help="the one server's port; the cluster's nodes on port + 1...; the recorder on port + 99")
    ap.add_argument("--primaries", default="1,2,3")
    ap.add_argument("--queues", type=int, default=6, help="queues the jobs spread over (divisible by each P)")
    ap.add_argument("--processes", type=int, default=2, help="worker processes, -c 10 each")
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--idle", type=float, default=2.0, help="seconds of idle counters before each drain")
    ap.add_argument("--pushes", type=int, default=10000,
                    help="jobs pushed one at a time for the push cost (0: skip it)")
    ap.add_argument("--no-single", action="store_true", help="skip the one-server reference")
    ap.add_argument("--json", help="write every run's figures here")
    args = ap.parse_args()
    load = os.getloadavg()
    print(f"## bench/cluster_scale.py {time.strftime('%Y-%m-%d %H:%M:%S %Z')} (load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} cores), {args.jobs} noop jobs over "
          f"{args.queues} queue(s), {args.processes} worker process(es) x {THREADS} threads, medians of {args.runs}\n")
    print("| layout | jobs/s | worker CPU us/job | Redis CPU us/job, all primaries | Redis CPU us/job, each primary "
          "| Redis CPU us/job, all, net of idle | commands/job, each primary | round trips/job, each primary "
          "| busiest primary, share of a core | idle Redis CPU ms/s, each | load (1 min) |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    recorder = Server(args.port + 99)
    raw: dict[str, list[dict]] = {}
    layouts: list[tuple[str, int]] = [] if args.no_single else [("one server (Sidekiq layout)", 0)]
    layouts += [(f"cluster, {p} primar{'y' if p == 1 else 'ies'}", p) for p in map(int, args.primaries.split(","))]
    try:
        for label, primaries in layouts:
            cluster = single = None
            try:
                if primaries:
                    cluster = ClusterNodes([args.port + 1 + i for i in range(primaries)])
                else:
                    single = Server(args.port)
                if args.pushes:
                    costs = [push_cost(cluster, single, recorder, args.queues, args.pushes) for _ in range(args.runs)]
                    log(f"{label} push: {json.dumps(costs)}")
                    raw[f"{label} push"] = costs
                    m = median_row(costs)
                    print(f"| {label}, push one at a time | - | - | {sum(m['redis_us_per_job_each']):.1f} | "
                          f"{each(m['redis_us_per_job_each'], '.1f')} | - | {each(m['commands_per_job_each'], '.2f')} "
                          f"| {each(m['round_trips_per_job_each'], '.2f')} | - | - | {os.getloadavg()[0]:.2f} |", flush=True)
                results = []
                for run in range(args.runs):
                    res = measure(cluster, single, recorder, args.queues, args.processes, args.jobs, args.idle)
                    log(f"{label} run {run}: {json.dumps(res)}")
                    results.append(res)
            finally:
                for server in (cluster, single):
                    if server is not None:
                        server.stop()
            raw[label] = results
            m = median_row(results)
            print(f"| {label} | {m['jobs_s']:,.0f} | {m['worker_us_per_job']:.0f} | {m['redis_us_per_job']:.1f} | "
                  f"{each(m['redis_us_per_job_each'], '.1f')} | {m['redis_net_us_per_job']:.1f} | "
                  f"{each(m['commands_per_job_each'], '.2f')} | {each(m['round_trips_per_job_each'], '.2f')} | "
                  f"{m['busiest_core']:.0%} | {each(m['idle_ms_per_s_each'], '.1f')} | {m['load']:.2f} |", flush=True)
    finally:
        recorder.stop()
        if args.json:
            Path(args.json).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
