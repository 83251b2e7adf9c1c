"""Time ``memfs db copy`` on a full store: SQLite -> PostgreSQL -> SQLite, each run a
``memfs db copy`` process of its own (its wall time and peak RSS), repeated; medians printed.

    .venv/bin/python scripts/bench_dbcopy.py [--memories 2000] [--versions 4] [--repeat 3]

The PostgreSQL side is a throwaway cluster (tests/support/pgcluster.py) with fsync on
(durable=True).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from memfs.models import Actor  # noqa: E402
from memfs.store import Limits, Store  # noqa: E402
from tests.support.pgcluster import start_cluster  # noqa: E402


def populate(path: str, memories: int, versions: int, events: int) -> None:
    user = Actor("user_actor", "user_bench")
    with Store(path, limits=Limits(), synchronous="NORMAL") as s:
        st = s.stores.create("bench")
        body = "lorem ipsum dolor sit amet, " * 50  # 1.4 kB
        for i in range(memories):
            m = s.memories.create(st.id, f"/d{i % 40}/m{i}.md", f"{i} {body}", actor=user)
            for v in range(1, versions):
                s.memories.update(st.id, m.id, content=f"{i} v{v} {body}", actor=user)
        sess = s.sessions.create([{"type": "memory_store", "memory_store_id": st.id}])
        for _ in range(events // 100):
            s.events.add(sess.id, [{"type": "user.message",
                                    "content": [{"type": "text", "text": body[:200]}]}] * 100)


def run_copy(src: str, dst: str) -> dict:
    t0 = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-c", "from memfs.cli import main; main()", "--json", "db", "copy",
         src, dst], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = p.stdout.read()  # type: ignore[union-attr]
    err = p.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(p.pid, 0)  # reaped here: its own peak RSS
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"copy failed: {err.strip()}")
    report = json.loads(out)
    report["wall"] = wall
    report["maxrss_mb"] = usage.ru_maxrss / 1024
    return report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--versions", type=int, default=4)
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-dbcopy-")
    src = os.path.join(tmp, "src.db")
    t0 = time.monotonic()
    populate(src, a.memories, a.versions, a.events)
    print(f"populated {src} in {time.monotonic() - t0:.1f} s "
          f"({os.path.getsize(src) / 1e6:.1f} MB)")
    cluster = start_cluster(durable=True)
    if cluster is None:
        raise SystemExit("PostgreSQL is not installed")
    try:
        results: dict[str, list[dict]] = {"sqlite->pg": [], "pg->sqlite": []}
        for i in range(a.repeat):
            url = cluster.url(cluster.new_database())
            results["sqlite->pg"].append(run_copy(src, url))
            back = os.path.join(tmp, f"back{i}.db")
            results["pg->sqlite"].append(run_copy(url, back))
        last = results["pg->sqlite"][-1]
        for t in last["tables"]:
            print(f"  {t['table']:<18} {t['src_rows']:>7} {t['dst_rows']:>7} "
                  f"{t['src_sha256'][:16]} {t['dst_sha256'][:16]} {'ok' if t['ok'] else 'BAD'}")
        for name, runs in results.items():
            med = {k: statistics.median(r[k] for r in runs)
                   for k in ("wall", "copy_seconds", "verify_seconds", "rows_per_second")}
            rss = statistics.median(r["maxrss_mb"] for r in runs if r["maxrss_mb"])
            print(f"{name}: {runs[0]['rows']} rows; median of {len(runs)}: wall {med['wall']:.2f} s"
                  f", copy {med['copy_seconds']:.2f} s ({med['rows_per_second']:,.0f} rows/s), "
                  f"verify {med['verify_seconds']:.2f} s, peak RSS {rss:.0f} MB; "
                  f"walls {[round(r['wall'], 2) for r in runs]}")
        # The source and the last copy back hold the same rows (the report's hashes).
        assert all(t["ok"] for r in results["pg->sqlite"] for t in r["tables"])
        first = {t["table"]: t["src_sha256"] for t in results["sqlite->pg"][0]["tables"]}
        assert first == {t["table"]: t["dst_sha256"] for t in last["tables"]}
        print("round trip: every table's hash in the last copy back equals the source's")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
