"""The PostgreSQL database under a :class:`~memfs.store.Store`: the same interface as
:class:`memfs.backends.sqlite.SQLiteDatabase` (:class:`memfs.backends.Database`), so the
store's rules run unchanged on either.

``memfs serve --db postgresql://…`` (or ``MEMFS_DB=postgresql://…``) opens one of these, and
any number of server processes on any number of machines may share the database:

* **Writes are serialised per store**, each by what it changes. A write names its scopes
  (:mod:`memfs.backends.scopes`: ``store:<id>``, ``session:<id>``, ``key:<id>``…) and its
  transaction first takes, in ONE statement sent with its ``BEGIN`` (one round trip), the
  shared global lock ``pg_advisory_xact_lock_shared(WRITE_LOCK_KEY)`` and then one exclusive
  transaction-level advisory lock per scope (:func:`~memfs.backends.scopes.lock_key`), in
  ascending key order, held until it commits or rolls back, across every process using the
  database. Two writes of one store are serialised as SQLite's ``BEGIN IMMEDIATE`` would
  serialise them: in READ COMMITTED each later statement sees every write committed before
  the lock was granted, so a check such as "fewer than 2,000 memories" or "no memory at this
  path" and the write relying on it cannot interleave with another replica's, and a store's
  versions, change sequence numbers (its feed commits in order) and ``content_sha256``
  preconditions are exact. Writes of two different stores commit side by side: the rules
  (the limit, path uniqueness, the feed's order) are each a store's own
  (https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS).
  No advisory lock is taken later in a transaction, and every transaction takes its keys in
  one global order, so writers never deadlock on them.
* **A write that names no scope** (the rare administrative ones: migrations, ``db copy``)
  takes the global lock exclusively: it is serialised with every other write, as every
  write was before. It tries the lock for half its patience rather than wait in
  PostgreSQL's lock queue, where it would hold back every later scoped write of every store,
  then queues for the rest (:meth:`PgDatabase._exclusive`). ``MEMFS_PG_LOCKS=global`` (or
  ``PgDatabase(url, locks="global")``) makes every write do so (the old behaviour, kept to
  measure the difference); ``store`` is the default.
* **Reads** take a pooled connection (psycopg_pool); :meth:`PgDatabase.read` and
  :meth:`PgDatabase.snapshot` are one ``REPEATABLE READ READ ONLY`` transaction (one snapshot
  for every statement), :meth:`one`, :meth:`all` and :meth:`run` autocommit statements.
* **The store's SQL** is written once with ``?`` and ``:name`` placeholders, as sqlite3 takes
  them: :class:`PgConnection` rewrites each statement once (cached) to psycopg's ``%s`` and
  ``%(name)s``, and rows are :class:`Row`: by index and by column name, like ``sqlite3.Row``.
* **Errors** become memfs errors: a lost or refused connection is
  :class:`~memfs.errors.StorageError` (HTTP 503, EIO), a disk full
  :class:`~memfs.errors.StorageFull`, a database that cannot be reached at start
  :class:`~memfs.errors.DatabaseUnavailable`.
* **nowait** (:meth:`PgDatabase.nowait`): every call is a network round trip, which an event
  loop must not wait for, so inside ``nowait()`` every call raises
  :class:`~memfs.errors.WouldBlock` at once and the caller runs it again in a worker thread.

Durability is PostgreSQL's: a commit returns once it is in the server's WAL on disk
(``synchronous_commit``), so :meth:`sync` has nothing left to do.

The schema is not this module's: :mod:`memfs.store.schema` holds both backends' migrations,
and a :class:`~memfs.store.Store` applies them through :meth:`PgDatabase.write` when it opens
the database.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

import psycopg
import psycopg.adapt
import psycopg.errors
import psycopg.types.string
import psycopg_pool

from ..errors import Busy, DatabaseUnavailable, StorageError, StorageFull, WouldBlock
from .scopes import lock_key
from .targets import redact_url

T = TypeVar("T")

#: The advisory lock key every write transaction takes (any constant: "memfs" in ASCII):
#: shared by a write with scopes, exclusive by one without (or every write, in mode global).
WRITE_LOCK_KEY = 0x6D656D6673
#: What a write serialises on (:envvar:`MEMFS_PG_LOCKS`): its scopes (``store``, the
#: default), or every other write (``global``, the old behaviour).
LOCK_MODES = ("store", "global")
#: Seconds a writer waits for the write lock (another process's write) before it raises
#: :class:`Busy`, as SQLite's writers do (:data:`memfs.backends.sqlite.WRITE_PATIENCE`).
WRITE_PATIENCE = 60.0
#: Seconds to wait for a pooled connection before a call fails with :class:`Busy`.
POOL_PATIENCE = 30.0
#: Connections per process (a server's worker threads share them).
POOL_MAX = 16


# --------------------------------------------------------------------------------------------
# rows and statements


class Row(tuple):  # type: ignore[type-arg]
    """A result row by index and by column name, like ``sqlite3.Row``."""

    __slots__ = ()
    _index: dict[str, int] = {}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


@functools.lru_cache(maxsize=256)
def _row_class(names: tuple[str, ...]) -> type[Row]:
    return type("Row", (Row,), {"__slots__": (), "_index": {n: i for i, n in enumerate(names)}})


def _row_factory(cursor: psycopg.Cursor[Any]) -> Callable[[Sequence[Any]], Row]:
    # The column names straight from the result (cursor.description builds an object per
    # column, on every statement: a sixth of a create's client time).
    res = cursor.pgresult
    n = res.nfields if res is not None else 0
    names: list[str] = []
    if res and n:
        for i in range(n):
            name = res.fname(i)
            assert name is not None  # libpq names every column below nfields
            names.append(name.decode())
    cls = _row_class(tuple(names))
    return cls


# PostgreSQL's text cannot hold U+0000, which a memory's content may (it is valid UTF-8).
# Every string crosses the seam escaped: U+FFFF (a noncharacter) is the escape, U+0000 is sent
# as U+FFFF "0" and U+FFFF itself as U+FFFF "1"; text read back is unescaped. Equality,
# byte order (U+0000 is only ever in content) and LIKE work on the escaped form unchanged.
_ESC, _NUL = "\uffff", "\x00"
_UNESCAPE = re.compile("\uffff([01])")


def _escape(s: str) -> str:
    if _ESC in s:
        s = s.replace(_ESC, _ESC + "1")
    if _NUL in s:
        s = s.replace(_NUL, _ESC + "0")
    return s


def _unescape(s: str) -> str:
    return _UNESCAPE.sub(lambda m: _NUL if m.group(1) == "0" else _ESC, s)


class _StrDumper(psycopg.types.string.StrDumperUnknown):
    def dump(self, obj: str) -> Any:
        return super().dump(_escape(obj) if _ESC in obj or _NUL in obj else obj)


class _TextLoader(psycopg.types.string.TextLoader):
    def load(self, data: Any) -> Any:
        s = super().load(data)
        return _unescape(s) if isinstance(s, str) and _ESC in s else s


#: psycopg's adapters with the two above (every connection of a PgDatabase uses them).
_ADAPTERS = psycopg.adapt.AdaptersMap(psycopg.adapters)
_ADAPTERS.register_dumper(str, _StrDumper)
_ADAPTERS.register_loader("text", _TextLoader)


_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|::|\?|:[A-Za-z_]\w*|%")


@functools.lru_cache(maxsize=1024)
def translate_sql(sql: str) -> str:
    """sqlite3's placeholders (``?``, ``:name``) as psycopg's (``%s``, ``%(name)s``), and
    every literal ``%`` doubled; string literals and ``::`` casts are left alone."""

    def sub(m: re.Match[str]) -> str:
        tok = m.group(0)
        if tok == "?":
            return "%s"
        if tok == "%":
            return "%%"
        if tok.startswith(":") and tok != "::":
            return f"%({tok[1:]})s"
        return tok.replace("%", "%%") if tok[0] == "'" else tok

    return _TOKEN.sub(sub, sql)


class PgConnection:
    """A pooled psycopg connection with sqlite3's calling convention (what the store uses)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.raw = conn
        #: Statements :meth:`later` and :meth:`ahead` hold for the next one.
        self._later: list[str | tuple[str, Any, SentAhead]] = []

    def execute(self, sql: str, params: Any = ()) -> psycopg.Cursor[Any]:
        sent = self._sent_ahead()
        try:
            if self._later:
                with self.raw.pipeline():
                    self._send_later()
                    return self.raw.execute(translate_sql(sql), params if params else None)
            return self.raw.execute(translate_sql(sql), params if params else None)
        except psycopg.Error as e:
            raise self.translate(e, sent) from e

    def executemany(self, sql: str, rows: Any) -> psycopg.Cursor[Any]:
        cur = self.raw.cursor()
        sent = self._sent_ahead()
        try:
            if self._later:
                with self.raw.pipeline():
                    self._send_later()
                    cur.executemany(translate_sql(sql), rows)
            else:
                cur.executemany(translate_sql(sql), rows)
        except psycopg.Error as e:
            raise self.translate(e, sent) from e
        return cur

    def later(self, sql: str) -> None:
        """Send ``sql`` (a ``SAVEPOINT`` or a ``RELEASE``) with the next statement, in one
        round trip (psycopg's pipeline mode), instead of in a round trip of its own: the
        next statement needs it done, nothing before. One left unsent when the transaction
        ends is dropped, which changes nothing (COMMIT and ROLLBACK end every savepoint)."""
        if not sql.startswith(("SAVEPOINT ", "RELEASE ")):
            raise ValueError(f"only a SAVEPOINT or a RELEASE may wait: {sql!r}")
        self._later.append(sql)

    def ahead(self, sql: str, params: Any = ()) -> SentAhead:
        """Send ``sql`` (a write returning one row) with the next statement on this
        connection, in its round trip, without waiting for its result: the caller goes on
        at once (PostgreSQL runs the statements in the order sent, so the next one sees this
        one's writes). Its row is read by :meth:`SentAhead.row`, which sends it now if no
        statement has carried it yet (:meth:`flush`). Failing, it fails the statement that
        carried it with a :class:`StorageError` (never a refusal, which that statement's
        caller would take as its own): its transaction must be rolled back."""
        sent = SentAhead(self)
        self._later.append((sql, params, sent))
        return sent

    def flush(self) -> None:
        """Send what :meth:`ahead` and :meth:`later` hold now (one round trip, if any)."""
        if any(not isinstance(held, str) for held in self._later):
            sent = self._sent_ahead()
            try:
                with self.raw.pipeline():
                    self._send_later()
            except psycopg.Error as e:
                raise self.translate(e, sent) from e

    def _sent_ahead(self) -> bool:
        return any(not isinstance(held, str) for held in self._later)

    def _send_later(self) -> None:
        held, self._later = self._later, []
        for item in held:
            if isinstance(item, str):
                self.raw.execute(item)
            else:
                sql, params, sent = item
                sent.cursor = self.raw.execute(translate_sql(sql), params if params else None)

    def translate(self, e: psycopg.Error, sent_ahead: bool = False) -> Exception:
        """:func:`translate`, and :class:`ConnectionLost` when this connection broke; a
        :class:`StorageError` when a statement sent :meth:`ahead` went with it (whose
        failure it may be)."""
        if self.raw.broken or self.raw.closed:
            return ConnectionLost(f"the PostgreSQL database cannot be reached: {_message(e)}")
        if sent_ahead:
            return StorageError("a statement carrying a write sent ahead failed (either may "
                                f"be the cause): {_message(e)}")
        return translate(e)

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE


class SentAhead:
    """A statement sent by :meth:`PgConnection.ahead`, whose row is read later."""

    __slots__ = ("conn", "cursor", "_row")

    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn
        self.cursor: psycopg.Cursor[Any] | None = None
        self._row: Any = None

    def row(self) -> Any:
        """The statement's row (sent now if it has not been: a round trip). First read in
        the statement's transaction, on the thread that runs it.

        :raises StorageError: the statement failed."""
        if self._row is None:
            if self.cursor is None:
                self.conn.flush()
            assert self.cursor is not None
            try:
                self._row = self.cursor.fetchone()
            except psycopg.Error as e:
                raise self.conn.translate(e, True) from e
            if self._row is None:
                raise StorageError("a write sent ahead returned no row")
        return self._row


class ConnectionLost(StorageError):
    """The connection broke (a restart, a failover, an idle timeout, a network cut): a
    statement that had not begun a transaction is tried again on another connection."""


def _rollback(raw: psycopg.Connection[Any]) -> None:
    """End the transaction of ``raw`` (a failed one too), unless the connection broke (then
    the pool drops it)."""
    if raw.broken or raw.closed or \
            raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return
    with contextlib.suppress(psycopg.Error):  # broken now: the pool drops it
        raw.execute("ROLLBACK")


def _message(e: psycopg.Error) -> str:
    """PostgreSQL's one-line message (without the statement and caret it may append)."""
    diag = getattr(e, "diag", None)
    primary = diag.message_primary if diag is not None else None
    return primary or (str(e).strip().splitlines() or [type(e).__name__])[0]


def translate(e: psycopg.Error) -> Exception:
    """The memfs error for a PostgreSQL failure (the caller raises it ``from e``)."""
    if isinstance(e, psycopg.errors.DiskFull):
        return StorageFull("no space left for the database; the write was not saved")
    # A deadlock or a serialization failure (two transactions colliding) rolled this one
    # back: running it again succeeds, as after a lock wait given up.
    if isinstance(e, psycopg.errors.LockNotAvailable | psycopg.errors.QueryCanceled
                  | psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure
                  | psycopg_pool.PoolTimeout):
        return Busy("the database is busy; try again")
    if isinstance(e, psycopg.OperationalError):
        return StorageError(f"the PostgreSQL database cannot be reached: {_message(e)}")
    return StorageError(f"PostgreSQL: {_message(e)}")


# --------------------------------------------------------------------------------------------
# the database


def _configure(conn: psycopg.Connection[Any]) -> None:
    """Each new connection: a lock wait (the write lock) gives up after WRITE_PATIENCE."""
    conn.execute(f"SET lock_timeout = {int(WRITE_PATIENCE * 1000)}")


class PgDatabase:
    """A memfs PostgreSQL database (see the module's doc).

    :param url: a ``postgresql://`` URL (libpq's, https://www.postgresql.org/docs/current/
        libpq-connect.html#LIBPQ-CONNSTRING-URIS).
    :param max_size: connections this process may open.
    :param locks: ``store`` or ``global`` (see the module's doc); None: ``MEMFS_PG_LOCKS``'s,
        else ``store``.
    """

    dialect = "postgresql"
    position_sql = "strpos({0}, {1})"
    memory = False
    writer = None
    gone = None

    def __init__(self, url: str, *, max_size: int = POOL_MAX, locks: str | None = None,
                 **_ignored: Any) -> None:
        if locks is None:
            locks = os.environ.get("MEMFS_PG_LOCKS") or "store"
        if locks not in LOCK_MODES:
            raise DatabaseUnavailable(
                f"MEMFS_PG_LOCKS must be one of {', '.join(LOCK_MODES)}, not {locks!r}")
        #: ``store`` (a write serialises on its scopes) or ``global`` (on every write).
        self.locks = locks
        self.path = url
        self._max_size = max_size
        self._local = threading.local()
        #: Connections of the snapshots open now (:meth:`snapshot`).
        self._snapshots: set[PgConnection] = set()
        self._snapshots_lock = threading.Lock()
        # One connection first, for libpq's own one-line reason when the database cannot be
        # reached (refused, no such database, bad password, a malformed URL).
        try:
            psycopg.connect(url, connect_timeout=10).close()
        except psycopg.Error as e:
            reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise DatabaseUnavailable(
                f"cannot open the database {redact_url(url)}: {reason}") from None
        self._pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
            url, min_size=1, max_size=max_size, open=False, name="memfs",
            kwargs={"autocommit": True, "row_factory": _row_factory, "context": _ADAPTERS},
            configure=_configure, reconnect_timeout=POOL_PATIENCE,
        )
        try:
            self._pool.open(wait=True, timeout=10.0)
        except psycopg_pool.PoolTimeout as e:
            self._pool.close()
            raise DatabaseUnavailable(
                f"cannot open the database {redact_url(url)}: {e}") from None

    # -- transactions ------------------------------------------------------------------------

    @contextmanager
    def nowait(self) -> Iterator[None]:
        """Within this block every call raises :class:`WouldBlock` (each is a round trip)."""
        self._local.nowait = True
        try:
            yield
        finally:
            self._local.nowait = False

    @contextmanager
    def patience(self, seconds: float) -> Iterator[None]:
        """Within this block, this thread waits for the write lock and for a pooled
        connection at most ``seconds`` in all, then raises :class:`Busy`, having changed
        nothing (as :meth:`memfs.backends.sqlite.SQLiteDatabase.patience`)."""
        previous = getattr(self._local, "deadline", None)
        self._local.deadline = time.monotonic() + seconds
        try:
            yield
        finally:
            self._local.deadline = previous

    def _own_deadline(self) -> float | None:
        deadline: float | None = getattr(self._local, "deadline", None)
        return deadline

    def _check_wait(self) -> None:
        if getattr(self._local, "nowait", False):
            raise WouldBlock()

    def _unreachable(self) -> str | None:
        """Why the database cannot be reached now (libpq's reason), or None if it can."""
        try:
            psycopg.connect(self.path, connect_timeout=5).close()
        except psycopg.Error as e:
            return (str(e).strip().splitlines() or [type(e).__name__])[0]
        return None

    @contextmanager
    def _connection(self) -> Iterator[PgConnection]:
        """A pooled connection. When none comes within a second, one direct connection tells
        a busy pool (go on waiting, up to :data:`POOL_PATIENCE`: then :class:`Busy`) from a
        database that cannot be reached (:class:`StorageError` at once, not after the wait).
        Within :meth:`patience`, it waits no longer than that.
        """
        self._check_wait()
        deadline = time.monotonic() + POOL_PATIENCE
        own = self._own_deadline()
        if own is not None:
            deadline = min(deadline, own)
        while True:
            try:
                raw = self._pool.getconn(
                    timeout=max(0.001, min(1.0, deadline - time.monotonic())))
                break
            except psycopg_pool.PoolTimeout as e:
                reason = self._unreachable()
                if reason is not None:
                    raise StorageError(
                        f"the PostgreSQL database cannot be reached: {reason}") from e
                if time.monotonic() > deadline:
                    raise Busy("no database connection was free in time; try again") from e
        try:
            yield PgConnection(raw)
        finally:
            self._pool.putconn(raw)  # a broken one is dropped, a transaction left rolled back

    @contextmanager
    def _begun(self, begin: str,
               then: Callable[[psycopg.Connection[Any]], None] | None = None,
               ) -> Iterator[PgConnection]:
        """A connection in a transaction begun by ``begin`` (``BEGIN`` and what follows it, in
        one round trip: literal SQL, no parameters) and then ``then(raw)`` (if given),
        committed when the block ends, rolled back if it raises. A pooled connection found
        dead before anything was done on it (the server restarted, failed over, closed it)
        is dropped and the next one tried: nothing was done, so nothing is repeated."""
        for attempt in range(self._max_size + 2):
            with self._connection() as conn:
                raw = conn.raw
                try:
                    try:
                        raw.execute(begin)
                        if then is not None:
                            then(raw)
                    except psycopg.Error as e:
                        raise conn.translate(e) from e
                except ConnectionLost:
                    if attempt <= self._max_size:
                        continue
                    raise
                except BaseException:
                    _rollback(raw)
                    raise
                try:
                    yield conn
                except BaseException:
                    _rollback(raw)
                    raise
                # A write sent ahead that no statement carried yet goes now (what is left
                # held otherwise, a RELEASE, is dropped with the COMMIT): never lost while
                # the transaction reports success.
                try:
                    conn.flush()
                except BaseException:
                    _rollback(raw)
                    raise
                # A statement that failed and was passed over leaves the transaction in
                # error: PostgreSQL answers its COMMIT with ROLLBACK, not an error, so a
                # write would return as if saved. It fails instead.
                failed = "the transaction failed and was rolled back; nothing was saved"
                if raw.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
                    _rollback(raw)
                    raise StorageError(f"PostgreSQL: {failed}")
                try:
                    status = raw.execute("COMMIT").statusmessage
                except psycopg.Error as e:
                    _rollback(raw)
                    raise conn.translate(e) from e
                if status != "COMMIT":
                    raise StorageError(f"PostgreSQL: {failed} ({status})")
                return

    def _reading(self, fn: Callable[[PgConnection], T]) -> T:
        """``fn(conn)`` (reads only), run again on another connection if its own was dead."""
        for attempt in range(self._max_size + 2):
            with self._connection() as conn:
                try:
                    return fn(conn)
                except ConnectionLost:
                    if attempt > self._max_size:
                        raise
        raise AssertionError("unreachable")

    def write(self, *scopes: str) -> AbstractContextManager[PgConnection]:
        """One write transaction, serialised with every other writer of the database (any
        process) that shares one of ``scopes`` (:mod:`memfs.backends.scopes`), or with every
        writer when there are none (or in mode ``global``): committed when the block ends,
        rolled back if it raises. Within :meth:`patience`, the wait for the locks ends then,
        with :class:`Busy`: a ``lock_timeout`` for this transaction (each lock wait) and a
        ``statement_timeout`` for the statement taking them (all its waits together: it may
        take several locks), reset after it (the rest of the transaction is not cut short).

        A write without scopes in mode ``store`` (:meth:`_exclusive`) does not wait in
        PostgreSQL's lock queue at first: it tries the global lock, for half its patience."""
        own = self._own_deadline()
        if not scopes and self.locks == "store":
            deadline = own if own is not None else time.monotonic() + WRITE_PATIENCE
            return self._begun("BEGIN", lambda raw: self._exclusive(raw, deadline))
        locks = self.locks_sql(scopes)
        if own is None:
            return self._begun("BEGIN; " + locks)
        ms = max(1, int((own - time.monotonic()) * 1000))  # 0 would mean no timeout
        return self._begun(
            f"BEGIN; SELECT set_config('lock_timeout', '{ms}ms', true), "
            f"set_config('statement_timeout', '{ms}ms', true); {locks}; "
            "SET LOCAL statement_timeout TO DEFAULT")

    @staticmethod
    def _exclusive(raw: psycopg.Connection[Any], deadline: float) -> None:
        """Take the global lock exclusively (a write without scopes) by trying it, with a
        short backoff (1 ms doubling to 50 ms), until it is granted or ``deadline`` passes
        (then :class:`Busy`, as a ``lock_timeout`` would).

        Why not wait for it: PostgreSQL queues every later request for a lock behind one
        waiting for it exclusively, so an exclusive waiter would hold back every scoped write
        of every store (their shared requests) until the longest transaction open ends: one
        key created while store A's transaction is held 5 s would stall store B's writes too.
        Trying never queues. But under constant write load the shared holders overlap without
        a gap, and trying alone would never succeed (a migration at a rolling upgrade would
        fail to start): after trying for half the time it has, it queues for the rest (a
        ``lock_timeout``), holding scoped writes back only until the transactions open then
        end. These are rare administrative writes (migrations, ``db copy``), none periodic."""
        pause = 0.001
        give_up_trying = time.monotonic() + (deadline - time.monotonic()) / 2
        while True:
            row = raw.execute(f"SELECT pg_try_advisory_xact_lock({WRITE_LOCK_KEY})").fetchone()
            if row is not None and row[0]:
                return
            if time.monotonic() + pause > give_up_trying:
                break
            time.sleep(pause)
            pause = min(0.05, pause * 2)
        ms = int((deadline - time.monotonic()) * 1000)
        if ms < 1:
            raise Busy("the database is busy; try again")
        try:
            raw.execute(f"SELECT set_config('lock_timeout', '{ms}ms', true), "
                        f"pg_advisory_xact_lock({WRITE_LOCK_KEY})")
        except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as e:
            raise Busy("the database is busy; try again") from e

    def locks_sql(self, scopes: Sequence[str]) -> str:
        """The statement that takes a write's advisory locks: the global one, shared when the
        write names scopes (mode ``store``), then each scope's key exclusive, in ascending
        order (every writer takes them in one order: none waits for another in a cycle)."""
        if not scopes or self.locks == "global":
            return f"SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})"
        keys = sorted({lock_key(s) for s in scopes})
        return (f"SELECT pg_advisory_xact_lock_shared({WRITE_LOCK_KEY}), "
                + ", ".join(f"pg_advisory_xact_lock({k})" for k in keys))

    def read(self) -> AbstractContextManager[PgConnection]:
        """A consistent snapshot for several reads."""
        return self._begun("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")

    @contextmanager
    def snapshot(self) -> Iterator[PgConnection]:
        """The database as it is now, for a long read made in steps (an export, page by page):
        one REPEATABLE READ transaction on a connection of its own, usable from any thread
        (one user at a time), ended when the block ends however it ends. While it is open it
        holds a pooled connection and keeps VACUUM from removing rows it may still see."""
        with self.read() as conn:
            conn.execute("SELECT 1")  # the first statement takes the snapshot: now
            with self._snapshots_lock:
                self._snapshots.add(conn)
            try:
                yield conn
            finally:
                with self._snapshots_lock:
                    self._snapshots.discard(conn)

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, *args)`` outside a transaction (each statement reads a snapshot of its
        own); ``fn`` only reads."""
        return self._reading(lambda conn: fn(conn, *args))

    def one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._reading(lambda conn: conn.execute(sql, params).fetchone())

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._reading(lambda conn: conn.execute(sql, params).fetchall())

    # -- durability and life -----------------------------------------------------------------

    def sync(self) -> None:
        """Nothing to do: a commit is durable when it returns (``synchronous_commit``)."""

    def check_file(self) -> None:
        """Nothing to check: the server owns the files."""

    def commits_elsewhere(self) -> int | None:
        """Cannot tell: every connection is another session of the server (its watch,
        woken by NOTIFY for one store, already tells a follower when to look)."""
        return None

    def close(self) -> None:
        """Close every connection, those of snapshots still open included (an unfinished
        export fails on its next step instead of holding a transaction open)."""
        with self._snapshots_lock:
            held, self._snapshots = list(self._snapshots), set()
        for conn in held:
            conn.raw.close()
        self._pool.close()
