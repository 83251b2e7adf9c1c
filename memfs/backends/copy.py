"""A whole memfs database copied between backends, the engine of ``memfs db copy``
(:mod:`memfs.cli.dbadmin` opens the two databases and checks their schema).

:func:`copy_into` copies EVERY table of one database (an SQLite file or a ``postgresql://``
URL) into another that is empty, rows and ids unchanged, plus the counters of the ``changes`` and
``events`` sequence numbers (SQLite's ``sqlite_sequence``, PostgreSQL's identity sequences), so
a feed follower's position stays valid and new writes after the copy get new numbers. Unlike
``memfs export`` (one store, a portable archive) it is exact: versions, redactions, sessions,
resources, events, the changes feed, agents, environments.

* The source is read from one snapshot (:meth:`~memfs.backends.Database.snapshot`): writers
  may go on.
* The destination is written in ONE transaction: a failure, or a verification that does not
  match, rolls it all back and leaves the destination empty. It must be empty to begin with
  (a new file, a new database, or one whose memfs tables hold no row): a copy never merges.
* Rows are streamed in batches (``executemany``): memory holds one batch, not the database.
* Verification (:func:`summarize`): for every table, its row count and a SHA-256 over its rows
  in primary-key order, computed the same way on both backends (columns by name, values
  normalised: NULL, integers, text; bytes that are UTF-8 count as that text), read from the
  source's snapshot and from the destination inside the copy's transaction before it commits.

Both databases must be at the same schema (:func:`read_schema_status` reads which migrations a
database has; :mod:`memfs.cli.dbadmin` knows those of this memfs, and ``memfs db migrate``
applies pending ones). The catalog of each backend (tables, columns, keys, counters) is
read here, in its own SQL; nothing here knows a memory store.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..errors import Conflict, InvalidRequest, MemfsError, StorageError
from .targets import is_url, redact_url

#: Rows per executemany, and the most bytes of text one batch may hold (memory is bounded by
#: about this, whatever the database's size).
BATCH_ROWS = 1000
BATCH_BYTES = 8 << 20
#: Rows fetched from the source per step.
FETCH_ROWS = 200
#: The tables of migration bookkeeping: each database keeps its own, never copied.
MIGRATION_TABLES = ("_sqlite_migrations", "_memfs_migrations")
#: Tables of recall (memfs.recall.schema), derived from the memories and never copied: the
#: destination's triggers index each memory's words as it goes in, and its indexers embed
#: the memories again (vectors are the provider's, leases the source's processes').
DERIVED_PREFIXES = ("memory_words", "memory_vectors", "recall_leases")
#: Tables written last: triggers of other tables update them (``stores.memory_count`` is
#: kept by triggers on ``memories``), so they must not exist yet when those rows go in: the
#: copied counts are then the source's, exactly.
LAST = ("stores",)


class SchemaMismatch(InvalidRequest):
    """The two databases are not at the same schema (run ``memfs db migrate`` first)."""


class NotEmpty(Conflict):
    """The destination holds data: a copy never merges into or overwrites it."""


# --------------------------------------------------------------------------------------------
# the schema a database is at


@dataclass
class SchemaStatus:
    """Which of its backend's migrations a database has."""

    dialect: str
    applied: list[str]
    known: list[str]
    #: Tables other than migration bookkeeping (a database with none is new).
    tables: list[str] = field(default_factory=list)

    @property
    def pending(self) -> list[str]:
        return [m for m in self.known if m not in self.applied]

    @property
    def unknown(self) -> list[str]:
        """Applied migrations this memfs does not know (a newer memfs made them)."""
        return [m for m in self.applied if m not in self.known]

    @property
    def fresh(self) -> bool:
        return not self.applied and not self.tables

    @property
    def version(self) -> str:
        done = [m for m in self.known if m in self.applied]
        last = done[-1] if done else "none"
        return f"{len(done)}/{len(self.known)} ({last})"

    def to_dict(self) -> dict[str, Any]:
        return {"dialect": self.dialect, "applied": len(self.applied), "known": len(self.known),
                "version": self.version, "pending": self.pending, "unknown": self.unknown}


def read_schema_status(db: Any, migration_set: str, known: list[str]) -> SchemaStatus:
    """The migrations of ``migration_set`` that ``db`` has, and the tables it holds;
    ``known``: the migrations of its backend this memfs knows, in order."""
    if db.dialect == "postgresql":
        with db.read() as c:
            tables = _tables_pg(c)
            applied = []
            if c.execute("SELECT to_regclass('_memfs_migrations') IS NOT NULL").fetchone()[0]:
                applied = [r[0] for r in c.execute(
                    "SELECT name FROM _memfs_migrations WHERE migration_set = ? ORDER BY name",
                    (migration_set,))]
        return SchemaStatus("postgresql", applied, known, tables)
    with db.read() as c:
        tables = _tables_sqlite(c)
        applied = []
        if c.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = "
                     "'_sqlite_migrations'").fetchone():
            applied = [r[0] for r in c.execute(
                "SELECT name FROM _sqlite_migrations WHERE migration_set = ? ORDER BY name",
                (migration_set,))]
    return SchemaStatus("sqlite", applied, known, tables)


# --------------------------------------------------------------------------------------------
# the catalog of each backend


@dataclass
class Table:
    name: str
    #: Column names, sorted: the order every read, write and hash uses on both backends.
    columns: list[str]
    #: The primary key's columns (all columns if there is none).
    key: list[str]
    #: The column whose numbers a counter hands out (AUTOINCREMENT / identity), or None.
    counter: str | None = None


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _tables_sqlite(c: Any) -> list[str]:
    return [r[0] for r in c.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' "
        "ESCAPE '\\' ORDER BY name")
        if r[0] not in MIGRATION_TABLES and not r[0].startswith(DERIVED_PREFIXES)]


def _tables_pg(c: Any) -> list[str]:
    return [r[0] for r in c.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename")
        if r[0] not in MIGRATION_TABLES and not r[0].startswith(DERIVED_PREFIXES)]


def catalog(db: Any, c: Any) -> dict[str, Table]:
    """Every table of the database ``c`` reads (a connection of ``db``)."""
    out: dict[str, Table] = {}
    if db.dialect == "postgresql":
        for name in _tables_pg(c):
            cols = sorted(r[0] for r in c.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                "current_schema() AND table_name = ?", (name,)))
            key = [r[0] for r in c.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = ?::regclass AND i.indisprimary "
                "ORDER BY array_position(i.indkey::int2[], a.attnum)", (_q(name),))]
            ident = c.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                "current_schema() AND table_name = ? AND (is_identity = 'YES' OR "
                "column_default LIKE 'nextval(%')", (name,)).fetchone()
            out[name] = Table(name, cols, key or cols, ident[0] if ident else None)
        return out
    for name in _tables_sqlite(c):
        info = c.execute(f"PRAGMA table_info({_q(name)})").fetchall()
        cols = sorted(r["name"] for r in info)
        key = [r["name"] for r in sorted((r for r in info if r["pk"]), key=lambda r: r["pk"])]
        sql = c.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (name,)).fetchone()[0] or ""
        counter = key[0] if len(key) == 1 and "AUTOINCREMENT" in sql.upper() else None
        out[name] = Table(name, cols, key or cols, counter)
    return out


def read_counters(db: Any, c: Any, tables: dict[str, Table]) -> dict[str, int]:
    """The last number each table's counter handed out (0: none yet), by table."""
    out: dict[str, int] = {}
    if db.dialect == "postgresql":
        for t in tables.values():
            if t.counter:
                seq = c.execute("SELECT pg_get_serial_sequence(?, ?)",
                                (_q(t.name), t.counter)).fetchone()[0]
                last, called = c.execute(f"SELECT last_value, is_called FROM {seq}").fetchone()
                out[t.name] = int(last) if called else int(last) - 1
        return out
    seqs = {}
    if c.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'").fetchone():
        seqs = {r[0]: int(r[1]) for r in c.execute("SELECT name, seq FROM sqlite_sequence")}
    for t in tables.values():
        if t.counter:
            out[t.name] = seqs.get(t.name, 0)
    return out


def write_counters(db: Any, c: Any, tables: dict[str, Table], values: dict[str, int]) -> None:
    """Set each counter to ``values`` (never below the largest number its table holds)."""
    for name, value in values.items():
        t = tables[name]
        top = c.execute(f"SELECT max({_q(t.counter or '')}) FROM {_q(name)}").fetchone()[0]
        value = max(value, int(top or 0))
        if db.dialect == "postgresql":
            seq = c.execute("SELECT pg_get_serial_sequence(?, ?)",
                            (_q(name), t.counter)).fetchone()[0]
            if value > 0:
                c.execute("SELECT setval(?, ?, true)", (seq, value))
            else:
                c.execute("SELECT setval(?, 1, false)", (seq,))
        else:
            c.execute("DELETE FROM sqlite_sequence WHERE name = ?", (name,))
            if value > 0:
                c.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", (name, value))


@contextmanager
def _rows(db: Any, c: Any, t: Table) -> Iterator[Callable[[], list[tuple[Any, ...]]]]:
    """A function returning the next rows of ``t`` in key order ([] at the end), streamed (a
    server-side cursor on PostgreSQL, SQLite's own stepping)."""
    sql = (f"SELECT {', '.join(_q(col) for col in t.columns)} FROM {_q(t.name)} "
           f"ORDER BY {', '.join(_q(col) for col in t.key)}")
    if db.dialect == "postgresql":
        with c.raw.cursor(name=f"memfs_copy_{t.name}") as cur:
            cur.itersize = FETCH_ROWS
            try:
                cur.execute(sql)
            except Exception as e:
                raise c.translate(e) from e
            yield lambda: [tuple(r) for r in cur.fetchmany(FETCH_ROWS)]
    else:
        cur = c.execute(sql)
        try:
            yield lambda: [tuple(r) for r in cur.fetchmany(FETCH_ROWS)]
        finally:
            cur.close()


# --------------------------------------------------------------------------------------------
# hashing


def _norm(v: Any) -> bytes:
    """One value as the hash sees it, the same from either backend."""
    if type(v) is str:  # most values: first
        b = v.encode("utf-8", "surrogatepass")
        return b"s%d:" % len(b) + b
    if v is None:
        return b"N"
    if isinstance(v, int):  # bool too
        return b"i%d" % v
    if isinstance(v, bytes | bytearray | memoryview):
        b = bytes(v)
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            return b"b%d:" % len(b) + b
        return b"s%d:" % len(b) + b
    if isinstance(v, float):
        return b"i%d" % v if v.is_integer() else b"f" + repr(v).encode()
    b = str(v).encode("utf-8", "surrogatepass")
    return b"s%d:" % len(b) + b


def hash_row(h: Any, row: tuple[Any, ...]) -> None:
    h.update(b"(" + b",".join(_norm(v) for v in row) + b")")


@dataclass
class TableReport:
    name: str
    src_rows: int = 0
    dst_rows: int | None = None
    src_hash: str = ""
    dst_hash: str = ""

    @property
    def ok(self) -> bool:
        return self.src_rows == self.dst_rows and self.src_hash == self.dst_hash

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.name, "src_rows": self.src_rows, "dst_rows": self.dst_rows,
                "src_sha256": self.src_hash, "dst_sha256": self.dst_hash, "ok": self.ok}


def summarize(db: Any, c: Any, tables: dict[str, Table]) -> dict[str, tuple[int, str]]:
    """(rows, sha256) of every table, and of the counters (as the table ``(counters)``)."""
    out: dict[str, tuple[int, str]] = {}
    for t in tables.values():
        h, n = hashlib.sha256(), 0
        with _rows(db, c, t) as fetch:
            while batch := fetch():
                n += len(batch)
                for row in batch:
                    hash_row(h, row)
        out[t.name] = (n, h.hexdigest())
    counters = read_counters(db, c, tables)
    h = hashlib.sha256()
    for name in sorted(counters):
        hash_row(h, (name, counters[name]))
    out["(counters)"] = (len(counters), h.hexdigest())
    return out


# --------------------------------------------------------------------------------------------
# the copy


@dataclass
class CopyReport:
    src: str
    dst: str
    tables: list[TableReport]
    rows: int
    copy_seconds: float
    verify_seconds: float
    counters: dict[str, int]

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tables)

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.copy_seconds if self.copy_seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"src": self.src, "dst": self.dst, "ok": self.ok, "rows": self.rows,
                "copy_seconds": round(self.copy_seconds, 3),
                "verify_seconds": round(self.verify_seconds, 3),
                "rows_per_second": round(self.rows_per_second), "counters": self.counters,
                "tables": [t.to_dict() for t in self.tables]}

    def lines(self) -> list[str]:
        w = max(len(t.name) for t in self.tables)
        out = [f"{'table':<{w}}  {'rows src':>9}  {'rows dst':>9}  {'sha256 src':<16}  "
               f"{'sha256 dst':<16}"]
        for t in self.tables:
            dst = "-" if t.dst_rows is None else str(t.dst_rows)
            out.append(f"{t.name:<{w}}  {t.src_rows:>9}  {dst:>9}  {t.src_hash[:16]:<16}  "
                       f"{t.dst_hash[:16]:<16}  {'ok' if t.ok else 'MISMATCH'}")
        out.append(f"counters: {', '.join(f'{k}={v}' for k, v in sorted(self.counters.items()))}")
        out.append(f"{self.rows} rows copied in {self.copy_seconds:.2f} s "
                   f"({self.rows_per_second:,.0f} rows/s), verified in "
                   f"{self.verify_seconds:.2f} s")
        return out


def _for_dst(value: Any, dialect: str) -> Any:
    """A value as the destination takes it: PostgreSQL's text columns take no bytes."""
    if dialect == "postgresql" and isinstance(value, bytes | bytearray | memoryview):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise StorageError("a value in the source is bytes that are not UTF-8: "
                               "PostgreSQL's text cannot hold it") from None
    return value


def copy_into(sdb: Any, ddb: Any, src: str, dst: str, *, batch_rows: int = BATCH_ROWS,
              progress: Callable[[int], None] | None = None) -> CopyReport:
    """Copy every table of the open database ``sdb`` (``src``) into ``ddb`` (``dst``, at the
    same schema and empty), verified, in one transaction of ``ddb`` (see the module's doc).
    ``src`` and ``dst`` name them in messages and in the report.

    :raises SchemaMismatch: their tables differ.
    :raises NotEmpty: ``dst`` holds data.
    :raises CopyMismatch: ``dst`` did not read back as ``src``; nothing was written to it.
    :raises StorageError: a database fails; nothing was written to ``dst``.
    """
    with sdb.snapshot() as sc:
        stables = catalog(sdb, sc)
        with ddb.write() as dc:
            dtables = catalog(ddb, dc)
            _compare(stables, dtables, src, dst)
            for t in dtables.values():
                if dc.execute(f"SELECT 1 FROM {_q(t.name)} LIMIT 1").fetchone():
                    raise NotEmpty(
                        f"DST {redact_url(dst)} is not empty (table {t.name} has rows): "
                        "db copy never merges into or overwrites a database; use a new one")
            order = sorted(stables, key=lambda n: (n in LAST, n))
            start = time.monotonic()
            reports: dict[str, TableReport] = {}
            total = 0
            for name in order:
                t = stables[name]
                rep = reports[name] = TableReport(name)
                h = hashlib.sha256()
                insert = (f"INSERT INTO {_q(name)} ({', '.join(_q(c) for c in t.columns)}) "
                          f"VALUES ({', '.join('?' for _ in t.columns)})")
                with _rows(sdb, sc, t) as fetch:
                    pending: list[tuple[Any, ...]] = []
                    size = 0
                    while True:
                        rows = fetch()
                        for row in rows:
                            hash_row(h, row)
                            pending.append(tuple(_for_dst(v, ddb.dialect) for v in row))
                            size += sum(len(v) for v in row
                                        if isinstance(v, str | bytes))
                        if pending and (not rows or len(pending) >= batch_rows
                                        or size >= BATCH_BYTES):
                            _insert(dc, insert, pending)
                            rep.src_rows += len(pending)
                            total += len(pending)
                            if progress:
                                progress(len(pending))
                            pending, size = [], 0
                        if not rows:
                            break
                rep.src_hash = h.hexdigest()
            counters = read_counters(sdb, sc, stables)
            write_counters(ddb, dc, dtables, counters)
            h = hashlib.sha256()
            for name in sorted(counters):
                hash_row(h, (name, counters[name]))
            reports["(counters)"] = TableReport("(counters)", len(counters), None,
                                                h.hexdigest())
            copy_seconds = time.monotonic() - start
            # Verified before the commit: a mismatch rolls everything back.
            start = time.monotonic()
            got = summarize(ddb, dc, {n: dtables[n] for n in order})
            for name, rep in reports.items():
                rep.dst_rows, rep.dst_hash = got[name]
            report = CopyReport(redact_url(src), redact_url(dst),
                                [reports[n] for n in [*sorted(stables), "(counters)"]],
                                total, copy_seconds, time.monotonic() - start, counters)
            if not report.ok:
                raise CopyMismatch(report)
    return report


class CopyMismatch(MemfsError):
    """The destination did not read back as the source: the copy was rolled back."""

    def __init__(self, report: CopyReport) -> None:
        bad = [t.name for t in report.tables if not t.ok]
        super().__init__(f"verification failed for {', '.join(bad)}: the copy was rolled "
                         "back, DST is still empty")
        self.report = report


def _insert(c: Any, sql: str, rows: list[tuple[Any, ...]]) -> None:
    c.executemany(sql, rows)


def _compare(src: dict[str, Table], dst: dict[str, Table], s: str, d: str) -> None:
    for name, t in src.items():
        other = dst.get(name)
        if other is None:
            raise SchemaMismatch(f"DST {redact_url(d)} has no table {name}: the schemas differ "
                                 "(run `memfs db migrate` on both with this memfs)")
        if other.columns != t.columns or (t.counter is None) != (other.counter is None):
            raise SchemaMismatch(
                f"table {name} differs between SRC ({', '.join(t.columns)}) and DST "
                f"({', '.join(other.columns)}): run `memfs db migrate` on both with this memfs")


def same_database(a: str, b: str) -> bool:
    if is_url(a) or is_url(b):
        return a == b
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)
