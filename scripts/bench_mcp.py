"""What a tool call over ``/mcp`` costs next to the same operation through the HTTP API
(issue 42: "a tool call over HTTP costs ≤ 2× the same operation through the HTTP API, p50 on
this machine").

    .venv/bin/python scripts/bench_mcp.py [--calls 300] [--size 1000] [--db URL|PATH]

Starts a real ``memfs serve`` (a subprocess, on loopback; a fresh SQLite database unless
``--db``), makes a store and a stored read_write key, and from one client process, in turns
of 10 calls so that both see the same machine: reads a memory of ``--size`` bytes with
``memory_read`` (the official client: ``ClientSession`` over ``streamable_http_client``, one
session) and with :class:`memfs.client.AsyncClient` (``memories.get_by_path``), and writes a
new memory with ``memory_write`` and with ``memories.create``. Prints each operation's p50
and p90 (ms, end to end as the client sees it) both ways, and the ratio of the p50s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

from memfs.client import AsyncClient  # noqa: E402
from tests.support.server import start_server, stop_server  # noqa: E402

SERVER_KEY = "memfs-bench-mcp-server-key"
#: Calls of one kind in a row before the other kind's turn.
TURN = 10
WARMUP = 20


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


async def timed(fn: Callable[[int], Awaitable[Any]], i: int, into: list[float]) -> None:
    t0 = time.perf_counter()
    await fn(i)
    into.append((time.perf_counter() - t0) * 1000)


async def run(url: str, key: str, store_id: str, calls: int, size: int) -> dict[str, Any]:
    content = ("x" * 79 + "\n") * max(1, size // 80)
    api = AsyncClient(url, key)
    await api.memories.create(store_id, "/bench/read.md", content)
    http = create_mcp_http_client(headers={"authorization": f"Bearer {key}"})
    times: dict[str, list[float]] = {k: [] for k in ("api read", "mcp read", "api write",
                                                    "mcp write")}
    async with http, streamable_http_client(url + "/mcp", http_client=http) as (r, w, _), \
            ClientSession(r, w) as mcp:
        await mcp.initialize()

        async def mcp_call(name: str, args: dict[str, Any]) -> None:
            result = await mcp.call_tool(name, args)
            if result.isError:
                raise SystemExit(f"{name} failed: {result.content}")

        ops: dict[str, Callable[[int], Awaitable[Any]]] = {
            "api read": lambda i: api.memories.get_by_path(store_id, "/bench/read.md"),
            "mcp read": lambda i: mcp_call("memory_read", {"store": store_id,
                                                           "path": "/bench/read.md"}),
            "api write": lambda i: api.memories.create(store_id, f"/written/api-{i}.md",
                                                       content),
            "mcp write": lambda i: mcp_call("memory_write", {
                "store": store_id, "path": f"/written/mcp-{i}.md", "content": content}),
        }
        for name, op in ops.items():  # warm-up: connections, caches, the JIT-less rest
            for i in range(WARMUP):
                await op(-1 - i - WARMUP * len(name))
        done = 0
        while done < calls:
            n = min(TURN, calls - done)
            for name, op in ops.items():
                for i in range(done, done + n):
                    await timed(op, i, times[name])
            done += n
    await api.aclose()
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=300, help="calls of each kind (default 300)")
    p.add_argument("--size", type=int, default=1000, help="bytes of the memory (default 1000)")
    p.add_argument("--db", help="the server's database (PostgreSQL URL or SQLite path; "
                   "default: a new SQLite file)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="memfs-bench-mcp-") as tmp:
        server = start_server(Path(tmp), "--key-rate", "1000000", db=args.db,
                              env={"MEMFS_API_KEYS": SERVER_KEY, "MEMFS_EMBEDDINGS": "none"})
        try:
            admin = httpx.Client(base_url=server.url, headers={"x-api-key": SERVER_KEY})
            store_id = admin.post("/v1/memory_stores", json={"name": f"bench {time.time_ns()}"}
                                  ).raise_for_status().json()["id"]
            key = admin.post("/v1/memfs/keys", json={"name": "bench", "role": "read_write"}
                             ).raise_for_status().json()["key"]
            admin.close()
            times = trio.run(run, server.url, key, store_id, args.calls, args.size)
        finally:
            stop_server(server)
    print(f"{args.calls} calls of each, {args.size} B memory, one client, in turns of {TURN}")
    print(f"{'operation':<10} {'API p50':>8} {'MCP p50':>8} {'API p90':>8} {'MCP p90':>8} "
          f"{'ratio':>6}")
    for op in ("read", "write"):
        a, m = times[f"api {op}"], times[f"mcp {op}"]
        ratio = statistics.median(m) / statistics.median(a)
        print(f"{op:<10} {statistics.median(a):>7.2f}m {statistics.median(m):>7.2f}m "
              f"{percentile(a, 0.9):>7.2f}m {percentile(m, 0.9):>7.2f}m {ratio:>5.2f}×")


if __name__ == "__main__":
    main()
