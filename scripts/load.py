#!/usr/bin/env python3
"""Load a real ``memfs serve`` over HTTP and report throughput and latency percentiles.

    scripts/load [--servers 2] [--db PATH|postgresql://…] [--clients 32] [--seconds 10]
                 [--workloads creates,reads,lists,mixed] [--stores N] [--json FILE]
    scripts/load --url http://host:port [--url …] --api-key KEY   # servers already running
    scripts/load --postgresql --db-rtt-ms 2 [--servers 4 --stores 16 --locks store]
    scripts/load --postgresql --db-rtt-ms 2 --matrix [--seconds 5]    # issue 44's table
    scripts/load --postgresql --db-rtt-ms 2 --held-txn                # A held 5 s, B's p99

Starts ``--servers`` ``memfs serve`` processes on 127.0.0.1 sharing one database (by default a
fresh SQLite file in a temporary directory; ``--db`` names another, a PostgreSQL URL included),
then runs each workload for ``--seconds`` after a warm-up:

* ``creates``: ``POST …/memories`` of 1 kB memories at new paths, the clients spread over
  ``--stores`` stores (default: one store per client; a store holds at most 2,000, a limit
  the servers started here raise far above any run's creates when clients share stores);
* ``reads``: ``GET …/memories/{id}`` of 500 seeded memories, at random;
* ``lists``: ``GET …/memories?limit=20`` of the seeded store;
* ``mixed``: 20 % creates, 50 % reads, 30 % lists.

``--clients`` connections (HTTP/1.1 keep-alive, one request in flight each: a closed loop)
are spread over the servers and over ``--procs`` load processes. The load processes are
lean (prepared requests, non-blocking sockets, a minimal HTTP parser), so that on a small
machine they leave the CPU to the servers; their own CPU is reported too. Latency is from
the request's first byte sent to the response's last byte read, of every request under way
during the window (also one sent before it or answered after it: the slowest ones);
requests/s counts the successes answered within the window.

Reported per workload: completed requests per second, errors (non-2xx or broken
connections), latency p50/p90/p99/max in ms, the servers' CPU per request (utime + stime
from /proc over the measured window, all servers together, without their background
threads), the cores they kept busy, and how many of those their background threads did:
threads at the lowest priority that take whatever CPU is idle, above all the indexer
embedding every new memory (``MEMFS_EMBEDDINGS=none`` runs the servers without it).

PostgreSQL a network hop away (issue 44):

* ``--postgresql`` starts a throwaway durable cluster (listening on 127.0.0.1 too);
  ``--db-rtt-ms X`` puts ``scripts/tcpdelay.py`` between the servers and it (a process of its
  own: X/2 ms each way, so every round trip gains X ms). Its CPU is reported per workload and
  how late it delivered at the end. A ``--db`` postgresql:// URL with a TCP host:port can be
  delayed the same way.
* ``--locks global|store`` sets ``MEMFS_PG_LOCKS`` for the servers: one write lock for the
  whole database (the old behaviour) or one per store.
* ``--matrix``: in one run, the creates workload for each lock mode (``--locks``, default
  global,store) x replicas (``--matrix-servers``, default 1,2,4) x stores
  (``--matrix-stores``, default 1,16), each cell on a fresh database (a copy of one migrated
  once), then creates/s and p99 per cell and the ratio store/global per (replicas, stores).
* ``--held-txn``: per lock mode, creates on store B (``--stores``, default 1) for
  ``--held-seconds`` (default 5) without and with another connection holding a write
  transaction on store A open all that time (the locks a write to A takes: the shared
  global lock and A's own, or the exclusive global lock in global mode), in
  ``--held-rounds`` (default 3) rounds ordered without, with, with, without, ... so that a
  drift over the run weighs on both sides; B's median p99 both ways and their ratio
  (issue 44's target: at most 1.10), and each round's p99.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import multiprocessing as mp
import os
import queue
import random
import re
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from load_hop import Proxy, held_table, hold_store, matrix_tables, tcp_target, via

SCRIPTS = Path(__file__).resolve().parent
KEY = "memfs-load-key"
WORKLOADS = ("creates", "reads", "lists", "mixed")
SEEDED = 500
#: For servers whose stores take several clients' creates (``--stores``, the matrix, the
#: held transaction): a store's limit far above what any run creates. The check still runs
#: in every create, under the store's lock as ever; only a long or fast run no longer ends
#: in refusals once a store holds 2,000.
ROOMY = {"MEMFS_MAX_MEMORIES": "1000000"}
CONTENT = "x" * 1000


# -- servers ------------------------------------------------------------------------------------


def start_servers(n: int, db: str, tmp: Path, workers: int = 1,
                  env: dict[str, str] | None = None,
                  ) -> tuple[list[subprocess.Popen[bytes]], list[str]]:
    """``n`` servers sharing ``db``, ``env`` added to their environment (MEMFS_PG_LOCKS). The
    first one migrates the database alone; the others then start together."""
    procs: list[subprocess.Popen[bytes]] = []
    errs: list[Path] = []
    environ = {k: v for k, v in os.environ.items() if k not in ("MEMFS_URL",)} | (env or {})

    def spawn() -> None:
        err = Path(tempfile.mkstemp(prefix="serve-", suffix=".err", dir=tmp)[1])
        errs.append(err)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "memfs", "--db", db, "serve", "--port", "0",
             "--api-key", KEY, *(["--workers", str(workers)] if workers > 1 else [])],
            stdout=subprocess.DEVNULL, stderr=err.open("wb"), env=environ,
        ))

    def serving(i: int) -> str:
        deadline = time.monotonic() + 60
        while True:
            m = re.search(r"serving (http://\S+)", errs[i].read_text())
            if m:
                return m.group(1)
            if procs[i].poll() is not None or time.monotonic() > deadline:
                stop_servers(procs)
                raise SystemExit(f"memfs serve did not start: {errs[i].read_text()[-2000:]}")
            time.sleep(0.05)

    spawn()
    urls = [serving(0)]
    for _ in range(1, n):
        spawn()
    return procs, urls + [serving(i) for i in range(1, n)]


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


def _stat(path: str) -> list[str] | None:
    """The fields of a /proc stat file after the command's name (state first)."""
    try:
        return Path(path).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def cpu_seconds(pids: list[int]) -> float:
    """The processes' CPU (utime + stime), their threads gone since included."""
    total = 0
    for pid in _with_children(pids):
        if (fields := _stat(f"/proc/{pid}/stat")) is not None:
            total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
    return total / os.sysconf("SC_CLK_TCK")


def background_cpu_seconds(pids: list[int]) -> float:
    """The CPU of the processes' threads at a priority below their process's (a higher nice
    than its main thread's): a server's background services
    (memfs.background.lowest_priority: the indexer, whose embedding of every new memory takes
    whatever CPU is idle, and the OpenMP threads it starts; the words catch-up). They live as
    long as the server, so the difference of two readings is what they used in between."""
    total = 0
    for pid in _with_children(pids):
        if (main := _stat(f"/proc/{pid}/stat")) is None:
            continue
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                fields = _stat(f"/proc/{pid}/task/{task}/stat")
                if fields is not None and int(fields[16]) > int(main[16]):  # nice
                    total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


# -- set-up through the API ---------------------------------------------------------------------


@dataclass
class Plan:
    create_stores: list[str]  # the store of each client
    read_store: str | None
    read_ids: list[str]


def prepare(url: str, key: str, clients: int, stores: int | None = None,
            seed: bool = True) -> Plan:
    """``stores`` new stores for the creates (default: one per client), client i on store
    i mod ``stores``; with ``seed``, a store of 500 memories for the reads and lists."""
    tag = f"{os.getpid()}-{time.time_ns()}"
    with httpx.Client(base_url=url, headers={"x-api-key": key}, timeout=60) as c:
        def store(name: str) -> str:
            r = c.post("/v1/memory_stores", json={"name": name})
            r.raise_for_status()
            return str(r.json()["id"])

        made = [store(f"load-{tag}-create-{i}") for i in range(stores or clients)]
        creates = [made[i % len(made)] for i in range(clients)]
        if not seed:
            return Plan(creates, None, [])
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
    index: int  # the client's, for paths of its own in a store it shares
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
            body = json.dumps({"path": f"{self.prefix}/c{c.index}/{c.n // 100}/m{c.n}.md",
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
                 seed: int, begin: float, seconds: float, out: mp.Queue) -> None:
    """One load process: its connections run a closed loop until the window ends (``begin``:
    its start, a time.perf_counter value, the same clock in every process).

    Throughput counts the successes answered within the window; latency is that of every
    request under way at some time within it, however long before it was sent or after it
    was answered (a connection ends once its last request is answered). Keeping only requests
    both sent and answered within the window would drop exactly the slow ones: a request
    that waits out a 5 s transaction over a 5 s window."""
    loader = Loader(workload, plan, key, seed)
    sel = selectors.DefaultSelector()
    conns = []
    for i, store in enumerate(stores):
        u = urlsplit(urls[(seed + i) % len(urls)])
        s = socket.create_connection((u.hostname, u.port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        c = Conn(s, u.netloc, store, i)
        conns.append(c)
    end = begin + seconds
    latencies: list[float] = []
    errors = completed = 0
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
            if begin <= now <= end and 200 <= status < 300:
                completed += 1
            if c.started < end and now > begin:
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
    out.put({"latencies": latencies, "completed": completed, "errors": errors,
             "statuses": statuses,
             "cpu": usage.user + usage.system})


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, round(q / 100 * len(sorted_values)) - 1))
    return sorted_values[i]


def run_workload(workload: str, urls: list[str], plan: Plan, key: str, clients: int, procs: int,
                 warmup: float, seconds: float, server_pids: list[int],
                 proxy_pid: int | None = None,
                 during: Callable[[float], Any] | None = None) -> dict[str, Any]:
    """One workload's figures. ``during(begin)``, if given, runs in a thread started with the
    load processes (``begin``: when the measured window starts, a time.perf_counter value);
    what it returns is in the figures as ``during``."""
    ctx = mp.get_context("fork")
    q: mp.Queue = ctx.Queue()
    per = [plan.create_stores[i::procs] for i in range(procs)]
    begin = time.perf_counter() + warmup
    workers = [ctx.Process(target=load_process, args=(urls, per[i], plan, key, workload,
                                                       i, begin, seconds, q))
               for i in range(procs) if per[i]]
    for w in workers:
        w.start()
    side: list[Any] = []
    thread = None
    if during is not None:  # started after the fork: no load process inherits its socket
        thread = threading.Thread(target=lambda: side.append(during(begin)), daemon=True)
        thread.start()
    time.sleep(max(0.0, begin - time.perf_counter()))
    cpu0, proxy0 = cpu_seconds(server_pids), cpu_seconds([proxy_pid] if proxy_pid else [])
    bg0 = background_cpu_seconds(server_pids)
    time.sleep(seconds)
    cpu1, proxy1 = cpu_seconds(server_pids), cpu_seconds([proxy_pid] if proxy_pid else [])
    bg1 = background_cpu_seconds(server_pids)
    results = []
    deadline = time.monotonic() + 120
    while len(results) < len(workers):
        try:
            results.append(q.get(timeout=1))
        except queue.Empty:
            if time.monotonic() > deadline or not any(w.is_alive() for w in workers):
                raise SystemExit("scripts/load: a load process ended without its figures "
                                 "(its traceback is above)") from None
    for w in workers:
        w.join()
    if thread is not None:
        thread.join(seconds + 60)
    lat = sorted(x for r in results for x in r["latencies"])
    statuses: dict[str, int] = {}
    for r in results:
        for s, n in r["statuses"].items():
            statuses[str(s)] = statuses.get(str(s), 0) + n
    errors = sum(r["errors"] for r in results)
    ok = sum(r["completed"] for r in results)
    return {
        "workload": workload, "servers": len(urls), "clients": clients,
        "stores": len(set(plan.create_stores)),
        "requests_per_s": ok / seconds,
        "p50_ms": percentile(lat, 50) * 1000, "p90_ms": percentile(lat, 90) * 1000,
        "p99_ms": percentile(lat, 99) * 1000, "max_ms": (lat[-1] if lat else float("nan")) * 1000,
        "errors": errors, "statuses": statuses,
        "server_cpu_ms_per_request": ((cpu1 - cpu0) - (bg1 - bg0)) / max(ok, 1) * 1000
        if server_pids else None,
        "server_cpu_cores": (cpu1 - cpu0) / seconds if server_pids else None,
        "background_cpu_cores": (bg1 - bg0) / seconds if server_pids else None,
        "proxy_cpu_cores": (proxy1 - proxy0) / seconds if proxy_pid else None,
        "load_cpu_s": sum(r["cpu"] for r in results),
        **({"during": side[0] if side else None} if during is not None else {}),
    }


def _f(v: float | None, fmt: str = ".2f") -> str:
    return "-" if v is None else format(v, fmt)


def table(rows: list[dict[str, Any]], label: str) -> str:
    out = [f"{label}", "",
           "| workload | servers | clients | stores | requests/s | p50 ms | p90 ms | p99 ms "
           "| max ms | errors | server CPU ms/request | server cores busy | of which background "
           "| proxy cores busy |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(
            f"| {r['workload']} | {r['servers']} | {r['clients']} | {r['stores']} "
            f"| {r['requests_per_s']:,.0f} "
            f"| {r['p50_ms']:.1f} | {r['p90_ms']:.1f} | {r['p99_ms']:.1f} | {r['max_ms']:.1f} "
            f"| {r['errors']} | {_f(r['server_cpu_ms_per_request'])} "
            f"| {_f(r['server_cpu_cores'])} | {_f(r['background_cpu_cores'])} "
            f"| {_f(r['proxy_cpu_cores'])} |")
    return "\n".join(out)


def _throwaway_cluster(tcp: bool = False):  # noqa: ANN202 (tests/support/pgcluster.Cluster)
    """A durable PostgreSQL cluster in a temporary directory (the tests' own: a unix socket,
    and 127.0.0.1 with ``tcp``; removed at the end, and by a watchdog if this script is
    killed)."""
    sys.path.insert(0, str(SCRIPTS.parent / "tests" / "support"))
    from pgcluster import start_cluster

    cluster = start_cluster(durable=True, tcp=tcp)
    if cluster is None:
        raise SystemExit("scripts/load: PostgreSQL is not installed (Debian: apt install "
                         "postgresql)")
    return cluster


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"not a list of positive integers: {text!r}")
    return values


@dataclass
class Pg:
    """The PostgreSQL a matrix or a held-transaction run makes its fresh databases in."""
    cluster: Any
    template: str
    proxy: Proxy | None

    def fresh(self) -> tuple[str, str]:
        """A new database, migrated: (its name, the URL the servers use)."""
        name = self.cluster.new_database(self.template)
        if self.proxy is None:
            return name, self.cluster.url(name)
        return name, self.cluster.tcp_url(name, self.proxy.port)


def _cell(pg: Pg, a: argparse.Namespace, tmp: Path, locks: str, servers: int,
          stores: int) -> dict[str, Any]:
    """The creates workload on a fresh database: ``servers`` replicas, ``stores`` stores."""
    name, url = pg.fresh()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs, urls = start_servers(servers, url, tmp, a.workers,
                                    {"MEMFS_PG_LOCKS": locks, **ROOMY})
        plan = prepare(urls[0], KEY, a.clients, stores, seed=False)
        row = run_workload("creates", urls, plan, KEY, a.clients, a.procs, a.warmup,
                           a.seconds, [pr.pid for pr in procs],
                           pg.proxy.pid if pg.proxy else None)
    finally:
        stop_servers(procs)
        pg.cluster.drop_database(name)
    return {"locks": locks, **row}


def matrix(pg: Pg, a: argparse.Namespace, tmp: Path, locks: list[str]) -> dict[str, Any]:
    """Every cell; the lock modes of one (replicas, stores) run one after the other, so that
    a busy machine changes less between the two figures compared."""
    cells = []
    for servers in a.matrix_servers:
        for stores in a.matrix_stores:
            for mode in locks:
                print(f"load: creates, locks {mode}, {servers} replica(s), {stores} store(s) "
                      f"for {a.seconds:g} s ...", file=sys.stderr, flush=True)
                cells.append(_cell(pg, a, tmp, mode, servers, stores))
    ratios = []
    if {"global", "store"} <= set(locks):
        for servers in a.matrix_servers:
            for stores in a.matrix_stores:
                g, st = (next(c for c in cells if c["locks"] == m and c["servers"] == servers
                              and c["stores"] == stores) for m in ("global", "store"))
                ratios.append({"servers": servers, "stores": stores,
                               "global_per_s": g["requests_per_s"],
                               "store_per_s": st["requests_per_s"],
                               "ratio": st["requests_per_s"] / max(g["requests_per_s"], 1e-9),
                               "global_p99_ms": g["p99_ms"], "store_p99_ms": st["p99_ms"]})
    return {"cells": cells, "ratios": ratios}


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median p99 among ``runs`` (its creates/s the median of all), with each
    round's p99 kept in ``p99s_ms``."""
    ranked = sorted(runs, key=lambda r: r["p99_ms"])
    out = dict(ranked[(len(ranked) - 1) // 2])
    out["p99s_ms"] = [r["p99_ms"] for r in runs]
    out["requests_per_s"] = statistics.median(r["requests_per_s"] for r in runs)
    return out


def held_txn(pg: Pg, a: argparse.Namespace, tmp: Path, locks: list[str]) -> list[dict[str, Any]]:
    """Per lock mode, on a fresh database: creates on B (fresh stores each time) for a
    window without, then with, a write transaction held open on store A all that window."""
    out = []
    hold, window = a.held_seconds, max(0.5, a.held_seconds - 0.4)
    for mode in locks:
        print(f"load: held transaction, locks {mode}: B without, then with A held "
              f"{hold:g} s ...", file=sys.stderr, flush=True)
        name, url = pg.fresh()
        procs: list[subprocess.Popen[bytes]] = []
        try:
            procs, urls = start_servers(a.servers, url, tmp, a.workers,
                                        {"MEMFS_PG_LOCKS": mode, **ROOMY})
            pids, proxy = [pr.pid for pr in procs], pg.proxy.pid if pg.proxy else None
            store_a = prepare(urls[0], KEY, 1, 1, seed=False).create_stores[0]
            # Rounds in the order without, with, with, without, ... (ABBA): a drift of the
            # machine or of the database's size over the run weighs on both sides alike.
            order = [held for i in range(a.held_rounds) for held in
                     ((False, True) if i % 2 == 0 else (True, False))]
            runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
            for held in order:
                plan = prepare(urls[0], KEY, a.clients, a.stores or 1, seed=False)
                during = (functools.partial(hold_store, url, store_a, mode, hold=hold)
                          if held else None)
                runs[held].append(run_workload("creates", urls, plan, KEY, a.clients, a.procs,
                                               a.warmup, window, pids, proxy, during))
        finally:
            stop_servers(procs)
            pg.cluster.drop_database(name)
        without, with_ = _median_run(runs[False]), _median_run(runs[True])
        out.append({"locks": mode, "servers": a.servers, "clients": a.clients,
                    "stores": without["stores"], "hold_s": hold, "window_s": window,
                    "without": without, "with": with_,
                    "p99_ratio": with_["p99_ms"] / max(without["p99_ms"], 1e-9)})
    return out


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
    p.add_argument("--stores", type=int, default=None,
                   help="stores the creates spread over (default: one per client; "
                   "--held-txn: 1)")
    p.add_argument("--db-rtt-ms", type=float, default=0.0,
                   help="round-trip time added between the servers and PostgreSQL "
                   "(scripts/tcpdelay.py: half of it each way)")
    p.add_argument("--locks", default=None,
                   help="MEMFS_PG_LOCKS of the servers: global or store (--matrix and "
                   "--held-txn: a list, default global,store)")
    p.add_argument("--matrix", action="store_true",
                   help="creates per lock mode x replicas x stores (PostgreSQL)")
    p.add_argument("--matrix-servers", type=_ints, default=[1, 2, 4], metavar="1,2,4")
    p.add_argument("--matrix-stores", type=_ints, default=[1, 16], metavar="1,16")
    p.add_argument("--held-txn", action="store_true",
                   help="B's p99 without and with a transaction held open on store A")
    p.add_argument("--held-seconds", type=float, default=5.0)
    p.add_argument("--held-rounds", type=int, default=3,
                   help="--held-txn: rounds of (without, with), in ABBA order; the table "
                   "shows each side's median p99 (default 3)")
    p.add_argument("--json", metavar="FILE", help="also write the raw figures here")
    a = p.parse_args(argv)
    workloads = [w for w in a.workloads.split(",") if w]
    unknown = set(workloads) - set(WORKLOADS)
    if unknown:
        p.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    if a.clients < 1 or a.procs < 1 or a.servers < 1 or (a.stores is not None and a.stores < 1):
        p.error("--clients, --procs, --servers and --stores must be at least 1")
    locks = [m for m in (a.locks or "global,store").split(",") if m]
    if set(locks) - {"global", "store"}:
        p.error("--locks takes global, store or both")
    if a.locks and len(locks) > 1 and not (a.matrix or a.held_txn):
        p.error("--locks takes one mode except with --matrix or --held-txn")
    if a.db_rtt_ms < 0:
        p.error("--db-rtt-ms must be at least 0")
    if (a.matrix or a.held_txn) and not a.postgresql:
        p.error("--matrix and --held-txn need --postgresql (a fresh database per cell)")
    if a.url and (a.db_rtt_ms or a.postgresql or a.db):
        p.error("--url uses running servers: no --db, --postgresql or --db-rtt-ms")
    if a.postgresql and a.db:
        p.error("--postgresql and --db exclude each other")
    if a.url and not a.api_key:
        p.error("--url needs --api-key")
    tmp = Path(tempfile.mkdtemp(prefix="memfs-load-"))
    cluster = None
    proxy: Proxy | None = None
    procs: list[subprocess.Popen[bytes]] = []
    try:
        db = a.db
        if a.postgresql:
            cluster = _throwaway_cluster(tcp=bool(a.db_rtt_ms))
        if a.db_rtt_ms:
            if cluster is None and not (db or "").startswith("postgres"):
                p.error("--db-rtt-ms needs PostgreSQL (--postgresql, or --db postgresql://…)")
            host, port = ("127.0.0.1", cluster.port) if cluster else tcp_target(db)
            proxy = Proxy(host, port, a.db_rtt_ms)
        hop = f", {a.db_rtt_ms:g} ms round trip added" if a.db_rtt_ms else ""
        result: dict[str, Any] = {}
        ok = True
        if a.matrix or a.held_txn:
            template = cluster.new_database()
            subprocess.run([sys.executable, "-m", "memfs", "--db", cluster.url(template),
                            "db", "migrate"], check=True, stdout=subprocess.DEVNULL)
            pg = Pg(cluster, template, proxy)
            if a.matrix:
                m = matrix(pg, a, tmp, locks)
                result["matrix"] = m
                ok = ok and all(c["errors"] == 0 for c in m["cells"])
                print(matrix_tables(m, f"creates on PostgreSQL{hop}, {a.clients} clients, "
                                       f"{os.cpu_count()} cores, {a.seconds:g} s per cell"))
            if a.held_txn:
                h = held_txn(pg, a, tmp, locks)
                result["held_txn"] = h
                ok = ok and all(r["with"]["errors"] == r["without"]["errors"] == 0 for r in h)
                if a.matrix:
                    print()
                print(held_table(h, f"a write transaction held {a.held_seconds:g} s on store "
                                    f"A, creates on B: {a.servers} replica(s), {a.clients} "
                                    f"clients, PostgreSQL{hop}"))
        else:
            if a.url:
                urls, key, pids = a.url, a.api_key, []
                where = f"servers at {', '.join(urls)}"
            else:
                if cluster is not None:
                    name = cluster.new_database()
                    db = (cluster.tcp_url(name, proxy.port) if proxy else cluster.url(name))
                elif proxy is not None:
                    db = via(db, proxy.port)
                db = db or str(tmp / "load.db")
                env = ({"MEMFS_PG_LOCKS": locks[0]} if a.locks else {}) | (
                    ROOMY if a.stores and a.stores < a.clients else {})
                procs, urls = start_servers(a.servers, db, tmp, a.workers, env)
                key, pids = KEY, [pr.pid for pr in procs]
                where = (f"{a.servers} memfs serve process(es)"
                         f"{f' of {a.workers} workers' if a.workers > 1 else ''} on "
                         f"{'PostgreSQL' if db.startswith('postgres') else 'SQLite'}{hop}"
                         f"{f', locks {a.locks}' if a.locks else ''}")
            plan = prepare(urls[0], key, a.clients, a.stores,
                           seed=bool(set(workloads) - {"creates"}))
            rows = []
            for w in workloads:
                print(f"load: {w} for {a.seconds:g} s ...", file=sys.stderr, flush=True)
                rows.append(run_workload(w, urls, plan, key, a.clients, a.procs, a.warmup,
                                         a.seconds, pids, proxy.pid if proxy else None))
            for r in rows:
                if r["errors"]:
                    print(f"load: {r['workload']}: {r['errors']} errors; statuses "
                          f"{r['statuses']}", file=sys.stderr)
            print(table(rows, f"{where}, {a.clients} clients, {os.cpu_count()} cores, "
                              f"{a.seconds:g} s per workload"))
            result = {"where": where, "rows": rows}
            ok = all(r["errors"] == 0 for r in rows)
        if proxy is not None:
            stats = proxy.stop()
            result["proxy"] = stats
            if stats:
                print(f"\nproxy (scripts/tcpdelay.py, {stats['one_way_ms']:g} ms each way): "
                      f"{stats['deliveries']:,} deliveries, late by p50 "
                      f"{stats['late_p50_ms']:.2f} ms, p99 {stats['late_p99_ms']:.2f} ms, "
                      f"max {stats['late_max_ms']:.1f} ms; {stats['cpu_s']:.1f} CPU s in all")
        if a.json:
            Path(a.json).write_text(json.dumps(result, indent=2))
        return 0 if ok else 1
    finally:
        stop_servers(procs)
        if proxy is not None:
            proxy.stop()
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
