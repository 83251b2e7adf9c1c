#!/usr/bin/env python3
"""Round trips to PostgreSQL per write (issue 44, item 4): how many times a create, an update,
a rename and a delete make the client wait for the database, in all and while holding the
write lock, on a throwaway PostgreSQL cluster.

    .venv/bin/python scripts/bench_pg_trips.py [--repeat 10] [--db postgresql://…] [--json FILE]

Each operation runs through the store (:class:`memfs.store.Store` on a
:class:`~memfs.backends.postgresql.PgDatabase`) the way the HTTP API runs it: a request's
write is a call that :class:`~memfs.api.batching.WriteBatcher` hands to ``Store.batch``, alone
(one request) or with the requests that waited for the previous commit (a batch of 16
creates); a create sent with an ``Idempotency-Key`` and a deadline (as a remote mount sends
every write) goes through ``Store.idempotency.write_once``. The mount's path operations
(``write_path``, ``rename_path``, ``delete_path``) are counted too.

Counted by libpq itself: its trace (``PQtrace``) of every connection the store uses logs each
message the client sends (F) and each one it reads (B). A round trip is a run of messages sent
followed by the answers read: the client waited for the server. Statements sent without
waiting for their answer (psycopg's pipeline mode, ``executemany``, several statements in one
query) ride in the round trip that next waits. **Under the lock** counts the round trips after
the one that took the write lock (the statement naming ``pg_advisory_xact_lock``), its COMMIT
included: at 2 ms a round trip, each of them is 2 ms during which no other writer of the
store (today: of the database) commits. ``statements`` counts the statements executed (an
Execute or a simple Query message).

Each figure is the mean over ``--repeat`` operations (a change whose sequence number is a
multiple of ``Store.feed_prune_every`` also prunes the feed: rarely, a few more).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402

from memfs.backends import postgresql  # noqa: E402
from memfs.backends.scopes import store_scope  # noqa: E402
from memfs.models import Actor  # noqa: E402
from memfs.store import Store  # noqa: E402

ACTOR = Actor.api("apikey_bench")
CONTENT = "x" * 1999 + "\n"
LOCK_MARK = "advisory_xact_lock"  # pg_advisory_xact_lock, or an unscoped write's pg_try_…
#: Rounds of each operation before any is counted (psycopg prepares at the fifth).
WARM = 6


@dataclass
class Trips:
    """What one traced piece of work cost: round trips, those under the lock, statements."""

    trips: int = 0
    locked: int = 0
    statements: int = 0

    def __iadd__(self, other: Trips) -> Trips:
        self.trips += other.trips
        self.locked += other.locked
        self.statements += other.statements
        return self


_PARSE = re.compile(r' "([^"]*)" "(.*)" \d+')
_BIND = re.compile(r' "[^"]*" "([^"]*)"')


def count(trace: str, locks: set[str]) -> Trips:
    """The round trips of one connection's libpq trace (see the module's doc). ``locks``:
    the names of the connection's prepared statements that take the lock (psycopg prepares a
    statement it ran five times: later ones bind it by name), kept from one trace to the
    next."""
    t = Trips()
    sending = False
    lock_sent = False  # the lock's statement was sent in the round trip under way
    locked = False  # the lock is held: this round trip and every later one count
    for line in trace.splitlines():
        parts = line.split("\t")
        if len(parts) < 4 or parts[0] not in ("F", "B"):
            continue
        direction, kind = parts[0], parts[2]
        if direction == "F":
            sending = True
            if kind in ("Execute", "Query"):
                t.statements += 1
            if kind == "Query" and LOCK_MARK in line:
                lock_sent = True
            elif kind == "Parse" and (m := _PARSE.match(parts[3])) and LOCK_MARK in m[2]:
                if m[1]:
                    locks.add(m[1])
                else:
                    lock_sent = True
            elif kind == "Bind" and (m := _BIND.match(parts[3])) and m[1] in locks:
                lock_sent = True
        elif sending:  # the first answer read after sending: the client waited once
            sending = False
            t.trips += 1
            if locked:
                t.locked += 1
            if lock_sent:
                locked, lock_sent = True, False
        if direction == "B" and kind == "ReadyForQuery" and parts[3].strip() == "I":
            locked = False  # out of the transaction: the lock is released
    return t


class Tracer:
    """libpq's trace on every connection the store opens or reuses while :meth:`measure`."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.live: dict[int, tuple[psycopg.Connection[Any], Path]] = {}
        #: Each connection's prepared statements that take the lock (:func:`count`).
        self.locks: dict[int, set[str]] = {}
        self.active = False
        self._n = 0
        self._real = real = postgresql.PgConnection.__init__
        tracer = self

        def init(self: postgresql.PgConnection, conn: psycopg.Connection[Any]) -> None:
            real(self, conn)
            if tracer.active:
                tracer.start(conn)

        postgresql.PgConnection.__init__ = init  # type: ignore[method-assign]

    def close(self) -> None:
        """PgConnection as it was."""
        postgresql.PgConnection.__init__ = self._real  # type: ignore[method-assign]

    def start(self, conn: psycopg.Connection[Any]) -> None:
        if id(conn) in self.live:
            return
        self._n += 1
        path = self.tmp / f"trace{self._n}.txt"
        with open(path, "w") as f:
            # libpq takes the descriptor for a FILE it keeps: a duplicate of its own.
            conn.pgconn.trace(os.dup(f.fileno()))
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS
                                    | psycopg.pq.Trace.REGRESS_MODE)
        self.live[id(conn)] = (conn, path)

    @contextmanager
    def measure(self) -> Iterator[Trips]:
        total = Trips()
        self.active = True
        try:
            yield total
        finally:
            self.active = False
            for conn, path in self.live.values():
                conn.pgconn.untrace()  # flushes libpq's buffered trace
                total += count(path.read_text(), self.locks.setdefault(id(conn), set()))
                path.unlink()
            self.live.clear()


def operations(store: Store, sid: str) -> list[tuple[str, int, Callable[[int], Any]]]:
    """(name, writes per call, the call for round i): each run for rounds 0, 1, ... in order
    (an update changes what a create made, a delete removes what a rename moved)."""
    m = store.memories
    ids: dict[int, str] = {}
    # A batch holds its store's scope, as the API's group commit of a store's writes does.
    scopes = [store_scope(sid)]

    def create(i: int) -> None:
        ids[i] = store.batch([partial(m.create, sid, f"/api/m{i}.md", CONTENT, actor=ACTOR)])[0].id

    def batch(i: int) -> None:
        calls = [partial(m.create, sid, f"/batch/b{i}/m{j}.md", CONTENT, actor=ACTOR)
                 for j in range(16)]
        out = store.batch(calls, scopes)
        assert not any(isinstance(o, Exception) for o in out), out

    def once(i: int) -> None:
        create = partial(m.create, sid, f"/once/m{i}.md", CONTENT, actor=ACTOR)
        out = store.batch([partial(store.idempotency.write_once, "ws", f"key{sid}{i}", "fp",
                                   time.time() + 60, create, lambda r: r.id)], scopes)
        assert out[0][0] == 200, out

    def update(i: int) -> None:
        store.batch([partial(m.update, sid, ids[i], content=CONTENT + str(i), actor=ACTOR)])

    def rename(i: int) -> None:
        store.batch([partial(m.update, sid, ids[i], path=f"/api/moved/m{i}.md", actor=ACTOR)])

    def delete(i: int) -> None:
        store.batch([partial(m.delete, sid, ids[i], actor=ACTOR)])

    def write_new(i: int) -> None:
        m.write_path(sid, f"/fs/f{i}.md", CONTENT, actor=ACTOR)

    def overwrite(i: int) -> None:
        m.write_path(sid, f"/fs/f{i}.md", CONTENT + str(i), actor=ACTOR)

    def rename_path(i: int) -> None:
        m.rename_path(sid, f"/fs/f{i}.md", f"/fs/g{i}.md", actor=ACTOR)

    def delete_path(i: int) -> None:
        m.delete_path(sid, f"/fs/g{i}.md", actor=ACTOR)

    return [
        ("create", 1, create),
        ("update (content)", 1, update),
        ("rename (update path)", 1, rename),
        ("delete", 1, delete),
        ("batch of 16 creates", 16, batch),
        ("create with an Idempotency-Key", 1, once),
        ("mount: write_path (new)", 1, write_new),
        ("mount: write_path (overwrite)", 1, overwrite),
        ("mount: rename_path", 1, rename_path),
        ("mount: delete_path", 1, delete_path),
    ]


def measure(url: str, repeat: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="memfs-trips-") as tmp:
        tracer = Tracer(Path(tmp))
        store = Store(url)
        try:
            # Every operation WARM times first, in a store of its own: what a connection
            # does once (psycopg prepares a statement at its fifth use: one round trip more,
            # once) is no operation's cost.
            # Traced too: the trace names the statements psycopg prepares (see count()).
            warm = store.stores.create("warm").id
            with tracer.measure():
                for _name, _writes, fn in operations(store, warm):
                    for i in range(WARM):
                        fn(i)
            sid = store.stores.create("trips").id
            rows = []
            for name, writes, fn in operations(store, sid):
                with tracer.measure() as t:
                    for i in range(repeat):
                        fn(i)
                rows.append({"operation": name, "writes": writes,
                             "trips": t.trips / repeat, "locked": t.locked / repeat,
                             "statements": t.statements / repeat})
            return rows
        finally:
            store.close()
            tracer.close()


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| operation | round trips | under the lock | statements |",
           "|---|---:|---:|---:|"]
    for r in rows:
        per = f" ({r['locked'] / r['writes']:.2f} a write)" if r["writes"] > 1 else ""
        out.append(f"| {r['operation']} | {r['trips']:g} | {r['locked']:g}{per} "
                   f"| {r['statements']:g} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench_pg_trips", description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=10, help="operations of each kind (10)")
    p.add_argument("--db", help="a postgresql:// database to write in (default: a throwaway "
                   "cluster)")
    p.add_argument("--json", metavar="FILE", help="also write the figures here")
    a = p.parse_args(argv)
    cluster = None
    try:
        url = a.db
        if url is None:
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
            from pgcluster import start_cluster

            cluster = start_cluster()
            if cluster is None:
                raise SystemExit("bench_pg_trips: PostgreSQL is not installed (Debian: apt "
                                 "install postgresql)")
            url = cluster.url(cluster.new_database())
        rows = measure(url, a.repeat)
        print(table(rows))
        if a.json:
            Path(a.json).write_text(json.dumps(rows, indent=2))
        return 0
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
