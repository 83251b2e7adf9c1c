"""Time the store's filtered listings on a large history (issue 8, finding 18).

Builds a database with ``--versions`` versions (default 80,000) in one store of 2,000
memories, 500 stores, 5,000 sessions, a change per version and ``--events`` events, then prints
the median time of each query and the plan SQLite chose for it (``EXPLAIN QUERY PLAN``).
Run it on two checkouts to compare, e.g. ``.venv/bin/python scripts/bench_queries.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memfs.models import Actor  # noqa: E402
from memfs.store import Store, format_time, new_id, sha256_hex  # noqa: E402

MEMORIES = 2000
SESSIONS = 5000
WRITERS = 20  # sessions that wrote versions; writer 0 wrote only a handful


def build(store: Store, versions: int, events: int) -> dict[str, Any]:
    c = store.conn
    start = datetime.now(UTC) - timedelta(days=10)
    t = [start]

    def tick() -> str:
        t[0] += timedelta(milliseconds=5)
        return format_time(t[0])

    c.execute("BEGIN IMMEDIATE")
    stores = [new_id("memstore") for _ in range(500)]
    for i, sid in enumerate(stores):
        now = tick()
        c.execute("INSERT INTO stores (id, name, description, metadata, created_at, updated_at) "
                  "VALUES (?, ?, '', '{}', ?, ?)", (sid, f"store-{i}", now, now))
    main = stores[0]
    sessions = [new_id("sesn") for _ in range(SESSIONS)]
    for i, sess in enumerate(sessions):
        now = tick()
        launcher = json.dumps({"host": "h", "boot_id": "b", "pid": i, "start": i}) \
            if i % 2 else None
        status = "running" if i % 500 == 1 else "terminated"
        c.execute("INSERT INTO sessions (id, status, agent, environment_id, metadata, title, "
                  "created_at, updated_at, launcher) "
                  "VALUES (?, ?, NULL, NULL, '{}', NULL, ?, ?, ?)",
                  (sess, status, now, now, launcher))
    writers = [Actor.session(s) for s in sessions[:WRITERS]]
    mids = [new_id("mem") for _ in range(MEMORIES)]
    per = max(1, versions // MEMORIES)
    vrows, crows = [], []
    heads: dict[str, tuple[str, str, str]] = {}
    n = 0
    for round_ in range(per):
        for j, mid in enumerate(mids):
            if n >= versions:
                break
            n += 1
            op = "created" if round_ == 0 else "modified"
            if round_ == per - 1 and j % 400 == 0:
                op = "deleted"  # a few deletes: a rare operation to filter on
            # writer 0 (the rare one) wrote 10 versions; the others share the rest
            actor = writers[0] if n % (versions // 10) == 0 else writers[1 + n % (WRITERS - 1)]
            path = f"/d{j % 10}/m{j}.md"
            content = None if op == "deleted" else f"content {round_} of {j} " + "x" * 100
            now = tick()
            vid = new_id("memver")
            vrows.append((vid, main, mid, op, now, path, content,
                          content and sha256_hex(content.encode()),
                          content and len(content.encode()), actor.type, actor.id))
            crows.append((main, "delete" if op == "deleted" else "put", mid, path, None, now))
            if op == "deleted":
                heads.pop(mid, None)
            else:
                heads[mid] = (vid, path, content or "")
    c.executemany("INSERT INTO versions (id, store_id, memory_id, operation, created_at, path, "
                  "content, content_sha256, content_size_bytes, created_by_type, created_by_id) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", vrows)
    c.executemany("INSERT INTO changes (store_id, op, memory_id, path, old_path, at) "
                  "VALUES (?, ?, ?, ?, ?, ?)", crows)
    now = tick()
    c.executemany("INSERT INTO memories (id, store_id, path, content, content_sha256, "
                  "content_size_bytes, version_id, created_at, updated_at) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        (mid, main, path, content, sha256_hex(content.encode()), len(content.encode()), vid,
         now, now) for mid, (vid, path, content) in heads.items()])
    erows = []
    for i in range(events):
        sess = None if i % 2 else sessions[i % 200]
        at = tick()
        body = {"type": "agent.tool_use", "id": new_id("sevt"), "processed_at": at,
                "name": "bash", "input": {"operation": "read", "file_path": "/x"}}
        erows.append((body["id"], sess, None if sess else main, body["type"], at,
                      json.dumps(body)))
    c.executemany("INSERT INTO events (id, session_id, store_id, type, processed_at, body) "
                  "VALUES (?, ?, ?, ?, ?, ?)", erows)
    c.execute("COMMIT")
    return {"main": main, "memory": mids[7], "rare_session": sessions[0],
            "busy_session": sessions[5], "session_with_events": sessions[4],
            "versions": n}


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def plans(store: Store, fn: Callable[[], Any]) -> list[str]:
    """The query plan of every SELECT that ``fn`` runs (traced with bound values)."""
    seen: list[str] = []
    # Reads go through this thread's reader connection, writes through the writer.
    conns = [store.conn, store.database.reader()]
    for conn in conns:
        conn.set_trace_callback(seen.append)
    try:
        fn()
    finally:
        for conn in conns:
            conn.set_trace_callback(None)
    out = []
    for sql in seen:
        if sql.lstrip().upper().startswith(("SELECT", "DELETE")):
            rows = store.conn.execute("EXPLAIN QUERY PLAN " + sql).fetchall()
            out.append(" | ".join(r[3] for r in rows))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--versions", type=int, default=80_000)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--db", help="database file (default: a temporary one)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or str(Path(tmp) / "bench.db")
        store = Store(path, synchronous="NORMAL")
        t0 = time.perf_counter()
        ids = build(store, args.versions, args.events)
        print(f"built {ids['versions']} versions, {args.events} events in "
              f"{time.perf_counter() - t0:.1f} s")
        main_id = ids["main"]
        last = store.feed.last(main_id)
        queries: list[tuple[str, Callable[[], Any]]] = [
            ("list_versions(store)", lambda: store.versions.list(main_id)),
            ("list_versions(memory_id)",
             lambda: store.versions.list(main_id, memory_id=ids["memory"])),
            ("list_versions(session_id, rare)",
             lambda: store.versions.list(main_id, session_id=ids["rare_session"])),
            ("list_versions(session_id, busy)",
             lambda: store.versions.list(main_id, session_id=ids["busy_session"])),
            ("list_versions(operation=deleted)",
             lambda: store.versions.list(main_id, operation="deleted")),
            ("list_versions(operation=created)",
             lambda: store.versions.list(main_id, operation="created")),
            ("list_versions(operation=modified)",
             lambda: store.versions.list(main_id, operation="modified")),
            ("list_versions(session, deleted)",
             lambda: store.versions.list(main_id, session_id=ids["busy_session"],
                                         operation="deleted")),
            ("resolve_store(name)", lambda: store.stores.resolve("store-250")),
            ("launched_sessions()", store.sessions.launched),
            ("list_events(session)",
             lambda: store.events.list(ids["session_with_events"], limit=100)),
            ("last_change", lambda: store.feed.last(main_id)),
            ("changes_since(last-10)", lambda: store.feed.since(main_id, last - 10)),
        ]
        print(f"{'query':36} {'median ms':>10}  plan")
        for name, fn in queries:
            ms = median_ms(fn, args.repeat)
            print(f"{name:36} {ms:10.3f}  {' ;; '.join(plans(store, fn))}")
        # what a write costs with these indexes (new store: no retention work)
        sid = store.stores.create("writes").id
        actor = Actor.api("apikey_bench")
        m = store.memories.create(sid, "/w.md", "0", actor=actor)
        n = 500
        t0 = time.perf_counter()
        for i in range(n):
            store.memories.update(sid, m.id, content=str(i + 1), actor=actor)
        print(f"{'update_memory (one write)':36} {(time.perf_counter() - t0) * 1000 / n:10.3f}")
        t0 = time.perf_counter()
        pruned = store.versions.prune(now=datetime.now(UTC) + timedelta(days=60))
        print(f"{'prune_versions (+60 days)':36} {(time.perf_counter() - t0) * 1000:10.1f}"
              f"  pruned {pruned} versions")
        counts = {t: store.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("versions", "changes", "events")}
        print("rows after prune:", counts)
        store.close()


if __name__ == "__main__":
    main()
