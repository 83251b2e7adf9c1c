#!/usr/bin/env python3
"""Load a real ``memfs serve`` over HTTP and report throughput and latency percentiles.

    scripts/load [--servers 2] [--db PATH|postgresql://…] [--clients 32] [--seconds 10]
                 [--workloads creates,reads,lists,mixed] [--json FILE]
    scripts/load --url http://host:port [--url …] --api-key KEY   # servers already running

Starts ``--servers`` ``memfs serve`` processes on 127.0.0.1 sharing one database (by default a
fresh SQLite file in a temporary directory; ``--db`` names another, a PostgreSQL URL included),
then runs each workload for ``--seconds`` after a warm-up:

* ``creates``: ``POST …/memories`` of 1 kB memories at new paths, spread over one store per
  client (a store holds at most 2,000);
* ``reads``: ``GET …/memories/{id}`` of 500 seeded memories, at random;
* ``lists``: ``GET …/memories?limit=20`` of the seeded store;
* ``mixed``: 20 % creates, 50 % reads, 30 % lists.

``--clients`` connections (HTTP/1.1 keep-alive, one request in flight each: a closed loop)
are spread over the servers and over ``--procs`` load processes. The load processes are
lean (prepared requests, non-blocking sockets, a minimal HTTP parser), so that on a small
machine they leave the CPU to the servers; their own CPU is reported too. Latency is from
the request's first byte sent to the response's last byte read.

Reported per workload: completed requests per second, errors (non-2xx or broken
connections), latency p50/p90/p99/max in ms, and the servers' CPU per request (utime + stime
from /proc over the measured window, all servers together).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import random
import re
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

KEY = "memfs-load-key"
WORKLOADS = ("creates", "reads", "lists", "mixed")
SEEDED = 500
CONTENT = "x" * 1000


# -- servers ------------------------------------------------------------------------------------


def start_servers(n: int, db: str, tmp: Path,
                  workers: int = 1) -> tuple[list[subprocess.Popen[bytes]], list[str]]:
    procs, urls = [], []
    for i in range(n):
        err = tmp / f"serve{i}.err"
        proc = subprocess.Popen(
            [sys.executable, "-m", "memfs", "--db", db, "serve", "--port", "0",
             "--api-key", KEY, *(["--workers", str(workers)] if workers > 1 else [])],
            stdout=subprocess.DEVNULL, stderr=err.open("wb"),
            env={k: v for k, v in os.environ.items() if k not in ("MEMFS_URL",)},
        )
        procs.append(proc)
        deadline = time.monotonic() + 30
        while True:
            m = re.search(r"serving (http://\S+)", err.read_text())
            if m:
                urls.append(m.group(1))
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_servers(procs)
                raise SystemExit(f"memfs serve did not start: {err.read_text()[-2000:]}")
            time.sleep(0.05)
    return procs, urls


def stop_servers(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _with_children(pids: list[int]) -> list[int]:
    """The processes and their children (``memfs serve --workers``)."""
    out = list(pids)
    for pid in pids:
        with contextlib.suppress(OSError):
            out += [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return out


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in _with_children(pids):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
    return total / os.sysconf("SC_CLK_TCK")


# -- set-up through the API ---------------------------------------------------------------------


@dataclass
class Plan:
    create_stores: list[str]
    read_store: str
    read_ids: list[str]


def prepare(url: str, key: str, clients: int) -> Plan:
    tag = f"{os.getpid()}-{int(time.time())}"
    with httpx.Client(base_url=url, headers={"x-api-key": key}, timeout=60) as c:
        def store(name: str) -> str:
            r = c.post("/v1/memory_stores", json={"name": name})
            r.raise_for_status()
            return r.json()["id"]

        creates = [store(f"load-{tag}-create-{i}") for i in range(clients)]
        read = store(f"load-{tag}-read")
        ids = []
        for i in range(SEEDED):
            r = c.post(f"/v1/memory_stores/{read}/memories",
                       json={"path": f"/seed/{i // 50}/m{i}.md", "content": CONTENT})
            r.raise_for_status()
            ids.append(r.json()["id"])
    return Plan(creates, read, ids)


# -- the load processes -------------------------------------------------------------------------


def _request(method: str, host: str, path: str, key: str, body: bytes = b"") -> bytes:
    head = (f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nx-api-key: {key}\r\n"
            "anthropic-beta: agent-memory-2026-07-22\r\n")
    if method == "POST":
        head += f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
    return (head + "\r\n").encode() + body


@dataclass
class Conn:
    sock: socket.socket
    host: str
    store: str
    n: int = 0
    out: bytes = b""
    buf: bytearray = field(default_factory=bytearray)
    started: float = 0.0


class Loader:
    def __init__(self, workload: str, plan: Plan, key: str, seed: int) -> None:
        self.workload = workload
        self.plan = plan
        self.key = key
        self.rng = random.Random(seed)
        self.prefix = f"/load/{workload}/{seed}"

    def next_request(self, c: Conn) -> bytes:
        kind = self.workload
        if kind == "mixed":
            r = self.rng.random()
            kind = "creates" if r < 0.2 else "reads" if r < 0.7 else "lists"
        if kind == "creates":
            c.n += 1
            body = json.dumps({"path": f"{self.prefix}/{c.n // 100}/m{c.n}.md",
                               "content": CONTENT}).encode()
            return _request("POST", c.host, f"/v1/memory_stores/{c.store}/memories", self.key,
                            body)
        if kind == "reads":
            mid = self.rng.choice(self.plan.read_ids)
            return _request("GET", c.host, f"/v1/memory_stores/{self.plan.read_store}/memories/"
                            f"{mid}", self.key)
        return _request("GET", c.host,
                        f"/v1/memory_stores/{self.plan.read_store}/memories?limit=20", self.key)


def _response_end(buf: bytearray) -> tuple[int, int] | None:
    """(status, total length) once ``buf`` holds a whole response, else None."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(buf[:end]).decode("latin1")
    status = int(head[9:12])
    m = re.search(r"(?im)^content-length:\s*(\d+)", head)
    if m is None:
        if re.search(r"(?im)^transfer-encoding:", head):
            raise RuntimeError("chunked responses are not supported by the load client")
        length = 0
    else:
        length = int(m.group(1))
    total = end + 4 + length
    return (status, total) if len(buf) >= total else None


def load_process(urls: list[str], stores: list[str], plan: Plan, key: str, workload: str,
                 seed: int, warmup: float, seconds: float, out: mp.Queue) -> None:
    """One load process: its connections run a closed loop until the window ends."""
    loader = Loader(workload, plan, key, seed)
    sel = selectors.DefaultSelector()
    conns = []
    for i, store in enumerate(stores):
        u = urlsplit(urls[(seed + i) % len(urls)])
        s = socket.create_connection((u.hostname, u.port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        c = Conn(s, u.netloc, store)
        conns.append(c)
    t0 = time.perf_counter()
    begin, end = t0 + warmup, t0 + warmup + seconds
    latencies: list[float] = []
    errors = 0
    statuses: dict[int | str, int] = {}

    def send(c: Conn) -> None:
        c.out = loader.next_request(c)
        c.started = time.perf_counter()
        sent = c.sock.send(c.out)
        c.out = c.out[sent:]
        sel.register(c.sock, selectors.EVENT_WRITE if c.out else selectors.EVENT_READ, c)

    for c in conns:
        send(c)
    open_conns = len(conns)
    while open_conns:
        for k, _ in sel.select(timeout=1.0):
            c = k.data
            if c.out:
                sent = c.sock.send(c.out)
                c.out = c.out[sent:]
                if not c.out:
                    sel.modify(c.sock, selectors.EVENT_READ, c)
                continue
            try:
                chunk = c.sock.recv(262144)
            except ConnectionError:
                chunk = b""
            if not chunk:  # the server closed the connection: this client stops
                errors += 1
                statuses["closed"] = statuses.get("closed", 0) + 1
                sel.unregister(c.sock)
                c.sock.close()
                open_conns -= 1
                continue
            c.buf += chunk
            done = _response_end(c.buf)
            if done is None:
                continue
            status, total = done
            del c.buf[:total]
            now = time.perf_counter()
            if c.started >= begin and now <= end:
                latencies.append(now - c.started)
                statuses[status] = statuses.get(status, 0) + 1
                if not 200 <= status < 300:
                    errors += 1
            sel.unregister(c.sock)
            if now >= end:
                c.sock.close()
                open_conns -= 1
            else:
                send(c)
    usage = os.times()
    out.put({"latencies": latencies, "errors": errors, "statuses": statuses,
             "cpu": usage.user + usage.system})


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, round(q / 100 * len(sorted_values)) - 1))
    return sorted_values[i]


def run_workload(workload: str, urls: list[str], plan: Plan, key: str, clients: int, procs: int,
                 warmup: float, seconds: float, server_pids: list[int]) -> dict:
    ctx = mp.get_context("fork")
    q: mp.Queue = ctx.Queue()
    per = [plan.create_stores[i::procs] for i in range(procs)]
    workers = [ctx.Process(target=load_process, args=(urls, per[i], plan, key, workload,
                                                       i, warmup, seconds, q))
               for i in range(procs) if per[i]]
    for w in workers:
        w.start()
    time.sleep(warmup)
    cpu0 = cpu_seconds(server_pids)
    time.sleep(seconds)
    cpu1 = cpu_seconds(server_pids)
    results = [q.get(timeout=seconds + 120) for _ in workers]
    for w in workers:
        w.join()
    lat = sorted(x for r in results for x in r["latencies"])
    statuses: dict[str, int] = {}
    for r in results:
        for s, n in r["statuses"].items():
            statuses[str(s)] = statuses.get(str(s), 0) + n
    errors = sum(r["errors"] for r in results)
    ok = len(lat) - sum(n for s, n in statuses.items() if s != "closed" and not s.startswith("2"))
    return {
        "workload": workload, "servers": len(urls), "clients": clients,
        "requests_per_s": ok / seconds,
        "p50_ms": percentile(lat, 50) * 1000, "p90_ms": percentile(lat, 90) * 1000,
        "p99_ms": percentile(lat, 99) * 1000, "max_ms": (lat[-1] if lat else float("nan")) * 1000,
        "errors": errors, "statuses": statuses,
        "server_cpu_ms_per_request": (cpu1 - cpu0) / max(ok, 1) * 1000 if server_pids else None,
        "server_cpu_cores": (cpu1 - cpu0) / seconds if server_pids else None,
        "load_cpu_s": sum(r["cpu"] for r in results),
    }


def table(rows: list[dict], label: str) -> str:
    out = [f"{label}", "",
           "| workload | servers | clients | requests/s | p50 ms | p90 ms | p99 ms | max ms "
           "| errors | server CPU ms/request | server cores busy |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        cpu = r["server_cpu_ms_per_request"]
        cores = r["server_cpu_cores"]
        out.append(
            f"| {r['workload']} | {r['servers']} | {r['clients']} | {r['requests_per_s']:,.0f} "
            f"| {r['p50_ms']:.1f} | {r['p90_ms']:.1f} | {r['p99_ms']:.1f} | {r['max_ms']:.1f} "
            f"| {r['errors']} | {'-' if cpu is None else f'{cpu:.2f}'} "
            f"| {'-' if cores is None else f'{cores:.2f}'} |")
    return "\n".join(out)


def _throwaway_cluster():  # noqa: ANN202 (tests/support/pgcluster.Cluster)
    """A durable PostgreSQL cluster in a temporary directory (the tests' own: a unix socket
    only, removed at the end, and by a watchdog if this script is killed)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
    from pgcluster import start_cluster

    cluster = start_cluster(durable=True)
    if cluster is None:
        raise SystemExit("scripts/load: PostgreSQL is not installed (Debian: apt install "
                         "postgresql)")
    return cluster


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/load", description=__doc__.split("\n\n")[0])
    p.add_argument("--servers", type=int, default=1, help="memfs serve processes (default 1)")
    p.add_argument("--workers", type=int, default=1,
                   help="memfs serve --workers of each server (default 1)")
    p.add_argument("--db", help="database the servers share (default: a fresh SQLite file)")
    p.add_argument("--postgresql", action="store_true",
                   help="start a throwaway PostgreSQL cluster (fsync and synchronous commits "
                   "on, as in production; Debian's postgresql package) and share it instead")
    p.add_argument("--url", action="append", default=[],
                   help="use running servers instead (repeatable; needs --api-key)")
    p.add_argument("--api-key", default=None)
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--procs", type=int, default=2, help="load processes (default 2)")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=2.0)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--json", metavar="FILE", help="also write the raw figures here")
    a = p.parse_args(argv)
    workloads = [w for w in a.workloads.split(",") if w]
    unknown = set(workloads) - set(WORKLOADS)
    if unknown:
        p.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    if a.clients < 1 or a.procs < 1 or a.servers < 1:
        p.error("--clients, --procs and --servers must be at least 1")
    tmp = Path(tempfile.mkdtemp(prefix="memfs-load-"))
    cluster = None
    db = None
    procs: list[subprocess.Popen[bytes]] = []
    try:
        if a.url:
            if not a.api_key:
                p.error("--url needs --api-key")
            urls, key, pids = a.url, a.api_key, []
            where = f"servers at {', '.join(urls)}"
        else:
            if a.postgresql:
                if a.db:
                    p.error("--postgresql and --db exclude each other")
                cluster = _throwaway_cluster()
                db = cluster.url(cluster.new_database())
            db = db or a.db or str(tmp / "load.db")
            procs, urls = start_servers(a.servers, db, tmp, a.workers)
            key, pids = KEY, [pr.pid for pr in procs]
            where = (f"{a.servers} memfs serve process(es)"
                     f"{f' of {a.workers} workers' if a.workers > 1 else ''} on "
                     f"{'PostgreSQL' if db.startswith('postgres') else 'SQLite'}")
        plan = prepare(urls[0], key, a.clients)
        rows = []
        for w in workloads:
            print(f"load: {w} for {a.seconds:g} s ...", file=sys.stderr, flush=True)
            rows.append(run_workload(w, urls, plan, key, a.clients, a.procs, a.warmup,
                                     a.seconds, pids))
        for r in rows:
            if r["errors"]:
                print(f"load: {r['workload']}: {r['errors']} errors; statuses {r['statuses']}",
                      file=sys.stderr)
        print(table(rows, f"{where}, {a.clients} clients, {os.cpu_count()} cores, "
                          f"{a.seconds:g} s per workload"))
        if a.json:
            Path(a.json).write_text(json.dumps({"where": where, "rows": rows}, indent=2))
        return 0 if all(r["errors"] == 0 for r in rows) else 1
    finally:
        stop_servers(procs)
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
