"""The store's foundation: the database, its transactions, and the change feed every
write records."""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Self

from ..backends import Connection, Cursor, Row, check_database, default_db_path, open_database
from ..errors import Busy, MemfsError, StorageError, WouldBlock
from ..models import MemoryStore, Page
from ..rules import Limits, format_time
from .common import T, archived, no_store, utc_now
from .paging import L, after_cursor, newest_first_page
from .rows import store_from_row
from .schema import sqlite as sqlite_schema

if TYPE_CHECKING:
    import sqlite_utils


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExportSnapshot:
    """A store as it was at one moment, for an export (:meth:`Store.archive.export_snapshot`):
    ``store`` read then, ``conn`` the read transaction that shows the rest."""

    store: MemoryStore
    conn: Connection


#: The write transaction a thread runs a :meth:`Store.batch` in, by ``id(store)``
#: (``conns``), and the changes its writes sent ahead (``ahead``, :meth:`Core.record_ahead`).
_batching = threading.local()

#: A change appended to a store's feed (:meth:`Core.record`).
_RECORD = ("INSERT INTO changes (store_id, op, memory_id, path, old_path, at) "
           "VALUES (?, ?, ?, ?, ?, ?) RETURNING seq")


def _with_writes(writes: Sequence[tuple[str, Sequence[Any]]], sql: str,
                 params: Sequence[Any]) -> tuple[str, list[Any]]:
    """``writes`` (statements with their parameters) and then ``sql`` as ONE PostgreSQL
    statement: each write a data-modifying ``WITH`` part (:meth:`Core.at_once`)."""
    if not writes:
        return sql, list(params)
    parts = ", ".join(f"w{i} AS ({w})" for i, (w, _) in enumerate(writes))
    return f"WITH {parts} {sql}", [p for _, ps in writes for p in ps] + list(params)


def _outcome(fn: Callable[[], Any]) -> Any:
    """``fn()``, or the exception it raised (a :meth:`Store.batch` result)."""
    try:
        return fn()
    except WouldBlock:  # not an outcome: the caller runs the batch again where it may wait
        raise
    except Exception as e:
        return e


class Core:
    """The database under a store, its transactions and change feed (:class:`memfs.store.Store`
    is what callers use)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        limits: Limits | None = None,
        synchronous: str = "FULL",
        checkpoint_pages: int | None = None,
        checkpoint_behind: bool = False,
        create: bool | None = None,
    ):
        self.limits = limits or Limits.from_env()
        self.path = str(default_db_path() if path is None else path)
        if create is None:
            # A path the caller names is made if missing (as sqlite3.connect does); the one
            # MEMFS_DB or the default gives must exist: a mistyped MEMFS_DB is an error, not a
            # new empty database (as in the CLI, where only the commands that make
            # something create one).
            create = path is not None
            if not create:
                check_database(self.path, create=False)
        #: Set by :meth:`close` (background work of this Store stops then).
        self.closed = False
        # Small pages for a new database (an existing one keeps its own): a commit appends
        # every page it dirtied to the WAL, and a memory write dirties about ten b-tree pages
        # (tables and indexes) for a few kB of data. 1 KiB pages made creates 25% and deletes
        # 20% faster than 4 KiB ones (2,000 memories of 2 kB, synchronous=NORMAL).
        # FULL (the default): a commit is on disk (WAL fsynced) before it returns, so an
        # acknowledged write survives a power cut as well as a killed process. NORMAL (what a
        # mount uses for close(), with sync() on fsync()): a commit survives a killed process
        # or daemon at once, and a power cut from the next sync() or checkpoint on; see
        # https://sqlite.org/pragma.html#pragma_synchronous and https://sqlite.org/wal.html.
        # A postgresql:// URL: PostgreSQL (memfs.backends), shared by any number of servers.
        self.database = open_database(
            self.path, synchronous=synchronous, checkpoint_pages=checkpoint_pages,
            checkpoint_behind=checkpoint_behind, page_size=1024, create=create,
        )
        #: The writer connection, and sqlite-utils over it (migrations, tests); None on
        #: PostgreSQL.
        self.conn = self.database.writer
        #: "sqlite" or "postgresql": which SQL the database speaks.
        self.dialect: str = self.database.dialect
        try:
            self._migrate()
        except BaseException:
            self.database.close()
            raise

    @functools.cached_property
    def db(self) -> sqlite_utils.Database:
        """sqlite-utils over the writer connection (migrations, tests)."""
        import sqlite_utils

        return sqlite_utils.Database(self.conn)

    def _migrate(self) -> None:
        """Bring the database to this memfs's schema (:mod:`memfs.store.schema`)."""
        if self.dialect == "postgresql":
            from ..backends.postgresql import PgDatabase
            from .schema import postgresql as pg_schema

            assert isinstance(self.database, PgDatabase)
            pg_schema.migrate(self.database)
            return
        sqlite_schema.migrate(self.database, lambda: self.db)

    def sync(self) -> None:
        """Make every committed write durable on disk (fsync of the WAL and the database file,
        whatever other connections hold). Needed only with ``synchronous="NORMAL"``.

        :raises StorageError: the sync failed.
        """
        self.database.sync()

    def check_file(self) -> None:
        """:raises DatabaseGone: the database file was deleted or replaced while in use."""
        self.database.check_file()

    def commits_elsewhere(self) -> int | None:
        """A number that changes when another process commits to the database, never for this
        store's own commits (None: cannot tell). A mount that sees it unchanged knows that
        every change in its store's feed since it last looked is its own."""
        return self.database.commits_elsewhere()

    def ping(self) -> None:
        """Check that the database answers a query (a server's readiness probe).

        :raises DatabaseGone, StorageError: the file was replaced, or the database fails.
        """
        self.database.check_file()
        self.one("SELECT 1")

    def nowait(self) -> AbstractContextManager[None]:
        """Calls in this block never wait for a lock: they raise
        :class:`memfs.errors.WouldBlock` first (see :meth:`Database.nowait`)."""
        return self.database.nowait()

    def patience(self, seconds: float) -> AbstractContextManager[None]:
        """Calls in this block (this thread) wait for the write lock at most ``seconds`` in
        all, then raise :class:`memfs.errors.Busy`, having changed nothing (see
        :meth:`Database.patience`)."""
        patience: AbstractContextManager[None] = self.database.patience(seconds)
        return patience

    def stop_waiting(self) -> None:
        """No call waits for a lock from now on (:class:`memfs.errors.Busy`, nothing changed):
        the process is stopping (SQLite: :meth:`SQLiteDatabase.stop_waiting
        <memfs.backends.sqlite.SQLiteDatabase.stop_waiting>`; PostgreSQL's waits end at
        their ``lock_timeout``)."""
        stop = getattr(self.database, "stop_waiting", None)
        if stop is not None:
            stop()

    def close(self) -> None:
        self.closed = True
        self.database.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions ------------------------------------------------------------------------

    def write(self, *scopes: str) -> AbstractContextManager[Connection]:
        """One write transaction, serialised with the writes that share one of ``scopes``
        (:mod:`memfs.backends.scopes`: the store, session or key it changes), or with every
        write when there are none (see :meth:`Database.write`). Inside :meth:`batch` (same
        thread), the batch's transaction instead, which must hold those scopes."""
        conn = self.batch_conn(*scopes)
        if conn is not None:
            return nullcontext(conn)
        return self.database.write(*scopes)

    def write_holding(self, scopes_of: Callable[[Connection], Iterable[str]],
                      fn: Callable[[Connection], T]) -> T:
        """``fn(conn)`` in a write holding the scopes ``scopes_of(conn)`` names, for a write
        whose scopes are known only from the database (the stores a revert changes, a
        dream's output store): read first outside the transaction, then again inside it once
        the locks are held. If the set grew meanwhile, that transaction ends having written
        nothing and a new one takes the bigger set, so ``fn`` always runs holding every scope
        it needs (never the global lock, which a long transaction of one store would hold
        up, and every other store's writes with it)."""
        scopes = set(self.database.run(lambda c: set(scopes_of(c))))
        while True:
            with self.write(*sorted(scopes)) as c:
                need = set(scopes_of(c))
                if need <= scopes:
                    return fn(c)
            scopes |= need

    def batch_conn(self, *scopes: str) -> Connection | None:
        """The transaction of the :meth:`batch` (or :meth:`joined_write`) this thread runs in
        (None: none).

        :raises AssertionError: a write asking for ``scopes`` (none: every write) that the
            batch does not hold (a bug: its rule would not be serialised). An unscoped batch
            holds them all.
        """
        joined: tuple[Connection, frozenset[str] | None] | None = (
            _batching.conns.get(id(self)) if hasattr(_batching, "conns") else None)
        if joined is None:
            return None
        conn, held = joined
        if held is not None and (not scopes or not held.issuperset(scopes)):
            raise AssertionError(
                f"a write asking for {sorted(scopes) or 'every write'} joined a batch holding "
                f"only {sorted(held)}")
        return conn

    @contextmanager
    def joined_write(self, *scopes: str) -> Iterator[Connection]:
        """A write transaction holding ``scopes`` (as :meth:`write`), that the store's write
        methods called in it join (as in a :meth:`batch`)."""
        with self.database.write(*scopes) as conn, self._joined(conn, scopes):
            yield conn

    @contextmanager
    def _joined(self, conn: Connection, scopes: Sequence[str]) -> Iterator[None]:
        """The store's write methods called by this thread in this block join ``conn``, which
        holds ``scopes`` (none: it is serialised with every write)."""
        if not hasattr(_batching, "conns"):
            _batching.conns = {}
        _batching.conns[id(self)] = (conn, frozenset(scopes) if scopes else None)
        try:
            yield
        finally:
            del _batching.conns[id(self)]

    @contextmanager
    def _ahead(self, conn: Connection) -> Iterator[None]:
        """In this block (a :meth:`batch`'s calls), :meth:`record_ahead` sends its changes
        ahead; at its end (no exception), every one of them is read (one round trip for
        the last), so that the batch commits only what succeeded."""
        if not hasattr(_batching, "ahead"):
            _batching.ahead = {}
        pending: list[tuple[str, Any]] = []
        _batching.ahead[id(self)] = pending
        try:
            yield
            for store_id, sent in pending:
                self.recorded(conn, store_id, int(sent.row()[0]))
        finally:
            del _batching.ahead[id(self)]

    def batch(
        self,
        calls: Sequence[Callable[[], Any]] | Callable[[], Sequence[Callable[[], Any]]],
        scopes: Sequence[str] = (),
    ) -> list[Any]:
        """Run several write calls of this store (``calls``: functions of no argument, e.g.
        ``partial(store.memories.create, …)``) in ONE write transaction: one lock, one commit
        and one fsync for all (group commit). Returns each call's result, or the exception it
        raised, in order; each result is durable when this returns, like the call's own.

        The transaction holds ``scopes`` (:meth:`write`; none: it is serialised with every
        write): every call's writes must ask for no other (:meth:`batch_conn`).

        ``calls`` may also be a function returning the calls, called once: as soon as the
        write lock is held (or, if the transaction fails before, when it has failed), so that
        the writes arriving while another process holds the lock join this batch.

        Each call runs in a SAVEPOINT of its own: a call refused by a rule (a
        :class:`~memfs.errors.MemfsError` of the caller's: NotFound, a conflict, a limit, bad
        input) is rolled back alone and its exception returned in its place, and later calls
        see the earlier ones' writes. A failure of the database or a bug (an SQLite error,
        StorageError, Busy, anything else) rolls the whole transaction back and every call
        is run again alone in a transaction of its own, so no call fails for another's
        reason.
        """
        taken: Sequence[Callable[[], Any]] | None = None if callable(calls) else calls
        if taken is not None and len(taken) == 1:
            return [_outcome(taken[0])]
        outcomes: list[Any] = []
        locked = False  # the transaction began and holds its locks
        try:
            with self.write(*scopes) as conn:
                locked = True
                if taken is None:
                    taken = calls()  # type: ignore[operator]
                with self._joined(conn, scopes), self._ahead(conn):
                    for fn in taken:
                        self.later(conn, "SAVEPOINT memfs_batch_call")
                        try:
                            outcomes.append(fn())
                        except MemfsError as e:
                            if isinstance(e, StorageError | Busy):
                                raise
                            conn.execute("ROLLBACK TO memfs_batch_call")
                            outcomes.append(e)
                        self.later(conn, "RELEASE memfs_batch_call")
                # A result whose seq was sent ahead (Memories.create): as the call alone returns
                # it, read now, in the transaction (the batch's _ahead has read every seq).
                outcomes = [o.settled() if hasattr(o, "settled") else o for o in outcomes]
        except WouldBlock:  # nowait mode (calls given as a list), the write lock is taken:
            raise  # nothing was done
        except AssertionError:  # a bug (a call asked for a scope the batch does not hold)
            raise
        except Exception as e:
            if taken is None:
                taken = calls()  # type: ignore[operator]
            if isinstance(e, Busy) and not locked:  # the lock never came: none ran
                return [e] * len(taken)
            log.info("a batch of %d writes failed (%r); running each alone", len(taken), e)
            return [_outcome(fn) for fn in taken]
        return outcomes

    def at_once(
        self,
        conn: Connection,
        writes: Sequence[tuple[str, Sequence[Any]]],
        sql: str,
        params: Sequence[Any],
    ) -> Cursor:
        """Run ``writes`` (statements with their parameters that return nothing), then
        ``sql``; returns the cursor of ``sql``.

        On PostgreSQL they are ONE statement (one round trip under the write lock instead of
        one each): each write a data-modifying ``WITH`` part, ``sql`` the statement itself.
        Every part sees the database as it was before the statement, so no part may depend
        on another's writes; triggers (the store's memory count, the words queue, the feed's
        NOTIFY) fire at the statement's end as they would after each. SQLite, which has no
        data-modifying WITH, runs them in turn (no round trips there)."""
        if writes and self.dialect == "postgresql":
            return conn.execute(*_with_writes(writes, sql, params))
        for w, ps in writes:
            conn.execute(w, ps)
        return conn.execute(sql, params)

    def delete_unlocked(self, table: str, where: str, order: str,
                        limit: int | None = None) -> str:
        """``DELETE FROM table WHERE where`` for a cleanup that writes of different scopes
        run at once (expired idempotency keys, old events): on PostgreSQL it skips the rows
        another transaction is deleting (``FOR UPDATE SKIP LOCKED``; that one deletes them),
        and takes the others in ``order`` (at most ``limit``). Two such writes waiting each
        for a row the other took would deadlock (one rolled back after a second's
        ``deadlock_timeout``). SQLite has one writer: the plain statement."""
        if self.dialect != "postgresql":
            return f"DELETE FROM {table} WHERE {where}"
        cap = f" LIMIT {int(limit)}" if limit is not None else ""
        return (f"DELETE FROM {table} WHERE ctid IN (SELECT ctid FROM {table} WHERE {where} "
                f"ORDER BY {order}{cap} FOR UPDATE SKIP LOCKED)")

    @staticmethod
    def later(conn: Connection, sql: str) -> None:
        """Run ``sql``, a ``SAVEPOINT`` or a ``RELEASE``, before the next statement on
        ``conn``: on PostgreSQL sent with it, in its round trip
        (:meth:`PgConnection.later <memfs.backends.postgresql.PgConnection.later>`); SQLite
        runs it now (no round trips there)."""
        send = getattr(conn, "later", None)
        if send is None:
            conn.execute(sql)
        else:
            send(sql)

    def read(self) -> AbstractContextManager[Connection]:
        """A consistent snapshot for several reads."""
        return self.database.read()

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, *args)`` outside a transaction (each statement reads a snapshot of its
        own), for a ``*_in`` helper that usually needs one statement."""
        return self.database.run(fn, *args)

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        return self.database.one(sql, params)

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self.database.all(sql, params)

    def change(
        self,
        conn: Connection,
        store_id: str,
        op: str,
        memory_id: str | None = None,
        path: str | None = None,
        old_path: str | None = None,
    ) -> int:
        """Append to the store's change feed; returns the change's sequence number."""
        return self.record(conn, (), store_id, op, memory_id, path, old_path)

    def record(
        self,
        conn: Connection,
        writes: Sequence[tuple[str, Sequence[Any]]],
        store_id: str,
        op: str,
        memory_id: str | None = None,
        path: str | None = None,
        old_path: str | None = None,
    ) -> int:
        """Run ``writes`` (statements with their parameters that return nothing: a version,
        the memory's row, a retention prune) and append the change they make to the store's
        feed, all as one statement on PostgreSQL (:meth:`at_once`); returns the change's
        sequence number. A prune cannot see the version inserted beside it there:
        :meth:`Memories.prune_sql <memfs.store.memories.Memories.prune_sql>` counts it in."""
        # RETURNING (SQLite 3.35+ and PostgreSQL): the seq on both backends.
        seq = int(self.at_once(
            conn, writes, _RECORD, (store_id, op, memory_id, path, old_path, utc_now()),
        ).fetchone()[0])
        self.recorded(conn, store_id, seq)
        return seq

    def record_ahead(
        self,
        conn: Connection,
        writes: Sequence[tuple[str, Sequence[Any]]],
        store_id: str,
        op: str,
        memory_id: str | None = None,
        path: str | None = None,
    ) -> int | Callable[[], int]:
        """:meth:`record`, returning a function that gives the change's sequence number.

        In a :meth:`batch` on PostgreSQL, the statement is sent ahead
        (:meth:`PgConnection.ahead <memfs.backends.postgresql.PgConnection.ahead>`): with
        the batch's next statement (the next write's look), in its round trip, so that a
        create costs one round trip under the lock instead of two. Its seq is read when
        asked for, or by the batch before it commits; the batch also prunes the feed then
        (:meth:`recorded`). A failure of the statement fails the whole batch (a
        :class:`StorageError`), whose writes are then run each alone, as
        :meth:`batch` does for every failure that is not a refusal. Elsewhere,
        :meth:`record` (its seq returned)."""
        ahead = getattr(conn, "ahead", None)
        pending: list[tuple[str, Any]] | None = getattr(_batching, "ahead", {}).get(id(self))
        joined = getattr(_batching, "conns", {}).get(id(self))
        if ahead is None or pending is None or joined is None or joined[0] is not conn:
            return self.record(conn, writes, store_id, op, memory_id, path)
        sent = ahead(*_with_writes(writes, _RECORD,
                                   (store_id, op, memory_id, path, None, utc_now())))
        pending.append((store_id, sent))
        return lambda: int(sent.row()[0])

    def recorded(self, conn: Connection, store_id: str, seq: int) -> None:
        """After the change ``seq`` of ``store_id`` was recorded: now and then, prune."""
        if seq % max(1, self.feed_prune_every) == 0:
            # Now and then a write also bounds the feed and the events (a few indexed
            # statements), so that they stay bounded without `memfs versions prune`.
            now = datetime.now(UTC)
            self.prune_changes_in(conn, store_id, now)
            self.prune_events_in(conn, now)

    def newest_first(self, table: str, filters: list[Any], where: list[str],
                      params: list[Any], limit: int, page: str | None,
                      make: Callable[[Any], L]) -> Page[L]:
        """A page of the rows of ``table`` (stores, dreams) that match ``where``, newest
        first, after the position in ``page`` (a cursor of this listing with ``filters``)."""
        if page:
            after_cursor(page, table, filters, where, params)
        sql = f"SELECT * FROM {table}"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
        rows = self.all(sql, [*params, limit + 1])
        return newest_first_page(rows, limit, table, filters, make)

    def store_in(self, c: Connection, store_id: str) -> MemoryStore:
        row = c.execute("SELECT * FROM stores WHERE id = ?", (store_id,)).fetchone()
        if row is None:
            raise no_store(store_id)
        return store_from_row(row)

    def writable_store_in(self, c: Connection, store_id: str) -> Row:
        """The store's ``memory_count`` and ``metadata`` (its types), for a write to its
        memories.

        :raises NotFound: unknown store. :raises StoreArchived:
        """
        row: Row | None = c.execute(
            "SELECT archived_at, memory_count, metadata FROM stores WHERE id = ?", (store_id,)
        ).fetchone()
        if row is None:
            raise no_store(store_id)
        if row["archived_at"] is not None:
            raise archived(store_id)
        return row


    def prune_events_in(self, c: Connection, now: datetime) -> int:
        """Bound the events (README "Retention"): a session's events are its audit log and
        stay as long as the session, then go :attr:`deleted_session_grace` after it is deleted
        (a live stream still ends on its ``session.deleted``); the events of mounts without a
        session go after the retention window (``retention_days``). Returns how many went."""
        n = 0
        grace = format_time(now - self.deleted_session_grace)
        for (session_id,) in c.execute(
            "SELECT session_id FROM events WHERE type = 'session.deleted' AND processed_at < ?",
            (grace,),
        ).fetchall():
            if session_id and c.execute(
                "SELECT 1 FROM sessions WHERE id = ?", (session_id,)
            ).fetchone() is None:
                n += c.execute(self.delete_unlocked("events", "session_id = ?", "seq"),
                               (session_id,)).rowcount
        # In seq order up to the first event inside the window (events arrive about in time
        # order): the cost is the number of events deleted, not the size of the table.
        cutoff = format_time(now - timedelta(days=self.limits.retention_days))
        young = c.execute(
            "SELECT seq FROM events WHERE session_id IS NULL AND processed_at >= ? "
            "ORDER BY seq LIMIT 1",
            (cutoff,),
        ).fetchone()
        n += c.execute(
            self.delete_unlocked("events", "session_id IS NULL AND seq < ?", "seq"),
            (young[0] if young else 2**63 - 1,),
        ).rowcount
        return n

    # -- change feed -------------------------------------------------------------------------

    #: Ids asked at most per statement of :meth:`newest_seqs` (one bound value each).
    NEWEST_CHUNK = 1000

    def newest_seqs(self, table: str, column: str, ids: Iterable[str]) -> dict[str, int]:
        """The newest ``seq`` of ``table`` (``changes`` or ``events``) for each of ``ids`` in
        ``column`` (``store_id``, ``session_id``); 0 for one without rows.

        What a follower of many stores (sessions) compares from one look to the next, never
        one cursor over the whole table: on PostgreSQL two stores' writes commit in
        parallel, each under its own store's lock (issue 44), so a change may commit after
        another store's change with a bigger seq; only one store's changes (one session's
        events) commit in seq order, and its newest seq moves whenever one commits. Each id
        costs one probe of the ``(column, seq)`` index (its newest row), whatever the size
        of the table: about 10 µs on PostgreSQL (500 ids: 5 ms), in one statement."""
        assert (table, column) in (("changes", "store_id"), ("events", "session_id"))
        unique = list(dict.fromkeys(ids))
        out: dict[str, int] = {}
        with self.read() as c:
            for i in range(0, len(unique), self.NEWEST_CHUNK):
                chunk = unique[i:i + self.NEWEST_CHUNK]
                # A VALUES list (its column is column1 on both backends), not a UNION of one
                # SELECT per id: PostgreSQL plans that in milliseconds per hundred ids.
                rows = c.execute(
                    f"SELECT v.column1, (SELECT max(seq) FROM {table} WHERE {column} = "
                    "v.column1) FROM (VALUES " + ", ".join(["(CAST(? AS TEXT))"] * len(chunk))
                    + ") AS v", chunk).fetchall()
                for key, seq in rows:
                    out[str(key)] = int(seq or 0)
        return out

    def feed_marks(self, store_ids: Iterable[str]) -> dict[str, int]:
        """The newest change seq of each of ``store_ids`` (0: none yet), for the followers of
        many stores' feeds (the indexers): see :meth:`newest_seqs`."""
        return self.newest_seqs("changes", "store_id", store_ids)

    #: The change feed of a store keeps at least its newest ``feed_keep`` changes, and every
    #: change younger than ``feed_keep_age``; older ones are pruned (a follower that far behind
    #: reloads the whole tree: :class:`FeedGap`).
    feed_keep = 10_000
    feed_keep_age = timedelta(hours=24)
    #: A write whose change seq is a multiple of this also prunes its store's feed and the
    #: events (a few indexed statements in its transaction).
    feed_prune_every = 1000
    #: How long the events of a deleted session outlive it.
    deleted_session_grace = timedelta(hours=1)

    def prune_changes_in(self, c: Connection, store_id: str, now: datetime) -> int:
        """Delete the store's changes that are both older than :attr:`feed_keep_age` and not
        among its newest :attr:`feed_keep`, and record the newest seq deleted
        (``stores.changes_pruned_seq``) so that :meth:`Feed.since` can tell a follower it
        missed some. Returns how many were deleted."""
        oldest_kept = c.execute(
            "SELECT seq FROM changes WHERE store_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?",
            (store_id, max(1, self.feed_keep) - 1),
        ).fetchone()
        if oldest_kept is None:
            return 0
        # Up to the first change inside the age window, in seq order: the cost is the number
        # of changes deleted (a clock that went back only keeps more).
        young = c.execute(
            "SELECT seq FROM changes WHERE store_id = ? AND seq < ? AND at >= ? "
            "ORDER BY seq LIMIT 1",
            (store_id, oldest_kept[0], format_time(now - self.feed_keep_age)),
        ).fetchone()
        top = c.execute(
            "SELECT seq FROM changes WHERE store_id = ? AND seq < ? ORDER BY seq DESC LIMIT 1",
            (store_id, young[0] if young else oldest_kept[0]),
        ).fetchone()
        if top is None:
            return 0
        c.execute(
            # CASE, not the two-argument max() that only SQLite has (greatest() elsewhere).
            "UPDATE stores SET changes_pruned_seq = CASE WHEN changes_pruned_seq > ? "
            "THEN changes_pruned_seq ELSE ? END WHERE id = ?",
            (top[0], top[0], store_id),
        )
        deleted: int = c.execute(
            "DELETE FROM changes WHERE store_id = ? AND seq <= ?", (store_id, top[0])
        ).rowcount
        return deleted

    def integrity_check(self) -> str:
        row = self.one("PRAGMA integrity_check")
        return str(row[0]) if row else "no answer"


class Part:
    """What every part of a :class:`memfs.store.Store` holds: the store's :class:`Core` (its
    database, transactions and change feed), through which it reads and writes. A part that
    calls another part is handed it when the store is made (its ``__init__`` names them)."""

    def __init__(self, core: Core) -> None:
        self.core = core

    @property
    def limits(self) -> Limits:
        """The limits the store enforces (:attr:`Core.limits`)."""
        return self.core.limits
