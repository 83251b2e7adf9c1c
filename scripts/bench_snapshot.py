"""Time store.versions.snapshot (time travel) on a store of 2,000 memories x 10 versions, on
SQLite and (when PostgreSQL is installed) on a throwaway PostgreSQL cluster, against
``memories.tree()`` of the same store in the same run as the baseline; prints medians and the
query plans.

    .venv/bin/python scripts/bench_snapshot.py [--memories 2000] [--versions 10] [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memfs.models import Actor  # noqa: E402
from memfs.store import Store  # noqa: E402

PLAN_SQL = (
    "SELECT m.memory_id, v.id, f.created_at FROM (SELECT DISTINCT memory_id FROM versions "
    "WHERE store_id = ?) AS m JOIN versions f ON f.id = (SELECT id FROM versions "
    "WHERE memory_id = m.memory_id ORDER BY created_at, id LIMIT 1) LEFT JOIN versions v "
    "ON v.id = (SELECT id FROM versions WHERE memory_id = m.memory_id AND created_at <= ? "
    "ORDER BY created_at DESC, id DESC LIMIT 1)")


def build(store: Store, memories: int, versions: int) -> tuple[str, list[str]]:
    sid = store.stores.create("bench").id
    actor = Actor.user("user_bench")
    cuts = []
    for round_ in range(versions):
        for start in range(0, memories, 500):
            store.batch([partial(store.memories.write_path, sid, f"/d{i % 40}/m{i}.md",
                                 f"memory {i} version {round_}\n" * 4, actor=actor)
                         for i in range(start, min(memories, start + 500))])
        cuts.append(store.versions.list(sid, limit=1).data[0].id)
    return sid, cuts


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def run(name: str, store: Store, args: argparse.Namespace) -> None:
    t = time.perf_counter()
    sid, cuts = build(store, args.memories, args.versions)
    print(f"{name}: built {args.memories} x {args.versions} in {time.perf_counter() - t:.1f} s")
    tree = median_ms(lambda: store.memories.tree(sid), args.repeat)
    mid = cuts[len(cuts) // 2]
    snap_mid = median_ms(lambda: store.versions.snapshot(sid, mid), args.repeat)
    snap_now = median_ms(lambda: store.versions.snapshot(sid, "2999-01-01T00:00:00Z"), args.repeat)
    snap_full = median_ms(lambda: store.versions.snapshot(sid, mid, view="full"), args.repeat)
    assert len(store.versions.snapshot(sid, mid).memories) == args.memories
    print(f"{name}: tree {tree:.1f} ms | snapshot at a middle version {snap_mid:.1f} ms, "
          f"at now {snap_now:.1f} ms, full view {snap_full:.1f} ms (medians of {args.repeat})")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--memories", type=int, default=2000)
    p.add_argument("--versions", type=int, default=10)
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        s = Store(Path(tmp) / "bench.db")
        try:
            run("sqlite", s, args)
            sid = s.stores.list().data[0].id
            for row in s.conn.execute("EXPLAIN QUERY PLAN " + PLAN_SQL, (sid, "2999")):
                print("  sqlite plan:", tuple(row)[3])
        finally:
            s.close()
    from tests.support.pgcluster import start_cluster

    cluster = start_cluster()
    if cluster is None:
        print("postgresql: not installed, skipped")
        return
    try:
        s = Store(cluster.url(cluster.new_database()))
        try:
            run("postgresql", s, args)
            sid = s.stores.list().data[0].id
            with s.read() as c:  # noqa: SLF001
                c.execute("ANALYZE versions")
                for row in c.execute("EXPLAIN ANALYZE " + PLAN_SQL, (sid, "2999")).fetchall():
                    print("  postgresql plan:", row[0])
        finally:
            s.close()
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
