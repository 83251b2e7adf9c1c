"""The SQLite database under a :class:`~memfs.store.Store`: connections, transactions,
durability (:class:`SQLiteDatabase`).

One writer and many readers, after datasette's ``database.py``:

* **One writer connection**, used for every write transaction (``BEGIN IMMEDIATE`` …
  ``COMMIT``). Its busy timeout is zero: when another process holds SQLite's write lock,
  ``BEGIN IMMEDIATE`` fails at once and :meth:`SQLiteDatabase.write` sleeps and retries
  *without holding any lock of ours*, so nothing else in this process ever waits behind a
  writer that is waiting.
* **Reader connections**, one per thread, which never wait on the writer: in WAL mode a reader
  sees the last committed snapshot while another connection writes
  (https://sqlite.org/wal.html#concurrency).
* **Snapshots** (:meth:`SQLiteDatabase.snapshot`): a connection of its own in one read
  transaction, for a long read made in steps (an export): it sees the database as it was when
  it began, from whichever thread reads it next, while writers go on.
* **Durable sync**: :meth:`SQLiteDatabase.sync` fsyncs the WAL and the database file
  themselves, so everything committed so far survives a power cut, whatever other connections
  are doing (a PASSIVE checkpoint, used before, syncs nothing while a reader holds an old
  snapshot).
* **Identity**: the database carries a random id in its header (``PRAGMA user_version``).
  Before and after every write the file at :attr:`SQLiteDatabase.path` is checked to still be
  this database, so a database deleted, renamed over or overwritten under a running process is
  noticed (:class:`~memfs.errors.DatabaseGone`) instead of swallowing writes that nobody will
  ever read (https://sqlite.org/howtocorrupt.html §1.3, §2.4). Noticed, the database is
  *disowned* (:meth:`SQLiteDatabase._disown`): SQLite finds a WAL and its ``-shm`` index by
  their names only, so ours must neither stay beside the new file nor be checkpointed into it
  (the files themselves are handled by :mod:`memfs.backends.files`).
* **Errors**: SQLite's failures become memfs errors a caller can map: a full disk is
  :class:`~memfs.errors.StorageFull` (ENOSPC), an I/O error or a damaged file
  :class:`~memfs.errors.StorageError` (EIO), a lock held past :data:`WRITE_PATIENCE`
  :class:`~memfs.errors.Busy`.

This module knows nothing of memory stores; :mod:`memfs.store` runs its rules on it. It never
imports trio, pyfuse3 or httpx: callers on an event loop run its methods in a worker thread.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

from ..errors import (
    Busy,
    DatabaseGone,
    DatabaseUnavailable,
    StorageError,
    StorageFull,
    WouldBlock,
)
from .checkpoint import SAFETY, WAL_KEPT, WAL_SHRUNK, Checkpointer
from .files import create_private, fsync_directory, held_fd, inode_of, unlink_if
from .protocol import Row

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Seconds a writer keeps retrying a locked database before it raises :class:`Busy`.
WRITE_PATIENCE = 60.0
#: Longest sleep between two tries of a locked database (the first is 2 ms, then doubling).
#: Short: the lock is another process's commit, usually a few ms long (``memfs serve
#: --workers``, a mount beside a server); 100 ms, as before, left it idle most of a wait.
WRITE_RETRY_MAX_DELAY = 0.004
#: Seconds a reader lets SQLite wait for a lock (readers wait only in rare cases: WAL recovery,
#: a checkpoint that restarts the WAL).
READ_PATIENCE = 10.0
#: Page cache of each reader connection (one per thread that reads), in KiB. Readers do point
#: lookups and the OS page cache holds the file: SQLite's default 2 MB per connection, times a
#: daemon's worker threads, was mostly duplicate memory.
READER_CACHE_KIB = 256
#: Where SQLite keeps ``PRAGMA user_version`` in the database header
#: (https://sqlite.org/fileformat.html#the_database_header).
_USER_VERSION_OFFSET = 60
#: ``sqlite3.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE`` (Python 3.12+; sqlite3.h).
_NO_CKPT_ON_CLOSE = 1006


def _is_busy(e: sqlite3.Error) -> bool:
    text = str(e)
    return "locked" in text or "busy" in text


def translate(e: sqlite3.Error, path: str) -> Exception:
    """The memfs error for an SQLite failure (the caller raises it ``from e``)."""
    text = str(e)
    if "full" in text:  # SQLITE_FULL: "database or disk is full"
        return StorageFull(f"no space left for the database {path}; the write was not saved")
    if _is_busy(e):
        return Busy("the database stayed locked by other writers; try again")
    return StorageError(f"database {path}: {text}")


class SQLiteDatabase:
    """A memfs SQLite database file.

    :param path: the file, or ``":memory:"`` (one connection shared by readers and the
        writer, for tests in one process).
    :param synchronous: ``FULL`` (a commit is on disk when it returns) or ``NORMAL`` (a commit
        survives a killed process at once, and a power cut from the next :meth:`sync`).
    :param checkpoint_pages: WAL pages between automatic checkpoints (SQLite's default 1000).
    :param checkpoint_behind: checkpoint in a thread of its own, after the commits, not in
        them (:mod:`memfs.backends.checkpoint`); the writer's own automatic checkpoint is
        then only a safety net, at :data:`~memfs.backends.checkpoint.SAFETY` times
        ``checkpoint_pages``.
    :param page_size: page size of a new database (an existing one keeps its own).
    :param create: make the file if it is missing (else :class:`DatabaseUnavailable`), its
        owner's only (:func:`~memfs.backends.files.create_private`).
    """

    #: Which SQL this database speaks (:class:`~memfs.backends.postgresql.PgDatabase`:
    #: "postgresql").
    dialect = "sqlite"
    #: SQL for the 1-based position of the text {1} in the text {0} (0: not there).
    position_sql = "instr({0}, {1})"

    def __init__(
        self,
        path: str,
        *,
        synchronous: str = "FULL",
        checkpoint_pages: int | None = None,
        checkpoint_behind: bool = False,
        page_size: int = 1024,
        create: bool = True,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError("synchronous must be FULL or NORMAL")
        self.path = path
        self.memory = path == ":memory:"
        if create and not self.memory:
            create_private(path)
        # mode=rw: a missing file is an error, never a new empty database.
        self._target = path if create or self.memory else (
            "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=rw")
        self._uri = not create and not self.memory
        # isolation_level=None: autocommit, we issue BEGIN ourselves. timeout=0: the writer
        # never sleeps inside SQLite (and so inside our lock) waiting for another process.
        self.writer = self._connect(timeout=0.0)
        self._wlock = threading.RLock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        #: Readers in use, how many times over (a read may nest in another on its thread),
        #: and those :meth:`close` left to their thread to close when it is done with them.
        self._in_use: dict[sqlite3.Connection, int] = {}
        self._orphans: set[sqlite3.Connection] = set()
        #: Connections of the snapshots open now (:meth:`snapshot`), closed by :meth:`close`.
        self._snapshots: set[sqlite3.Connection] = set()
        self._readers_lock = threading.Lock()
        self._closed = False
        #: Set by :meth:`stop_waiting`: every wait for a lock gives up.
        self._stop_waiting = False
        #: Set once the file at :attr:`path` is no longer this database: writes are refused.
        self.gone: str | None = None
        self._file_id: tuple[int, int] | None = None
        self._fd: int | None = None
        #: The WAL and -shm files SQLite opened beside the database (see :meth:`_disown`):
        #: their names, (device, inode)s, and a descriptor of our own of the WAL.
        self._beside = ""
        self._wal_id: tuple[int, int] | None = None
        self._shm_id: tuple[int, int] | None = None
        self._wal_fd: int | None = None
        self._identity = 0
        self._header_confirmed = False
        #: The checkpointer's thread and connection (see :meth:`checkpoint_passive`).
        self._checkpointer = (Checkpointer(self) if checkpoint_behind and not self.memory
                              else None)
        self._ckpt_conn: sqlite3.Connection | None = None
        self._ckpt_lock = threading.Lock()
        #: A checkpoint was held back (by a reader) since the WAL was last truncated.
        self._ckpt_held = False
        w = self.writer
        w.execute(f"PRAGMA page_size = {int(page_size)}")
        self._retry(lambda: w.execute("PRAGMA journal_mode = WAL"))
        w.execute(f"PRAGMA synchronous = {synchronous}")
        if checkpoint_pages is not None:
            # A checkpoint is where a NORMAL connection fsyncs: a longer WAL between them makes
            # small commits cheaper (https://sqlite.org/wal.html#ckpt).
            pages = checkpoint_pages * (SAFETY if self._checkpointer is not None else 1)
            w.execute(f"PRAGMA wal_autocheckpoint = {int(pages)}")
        # The first commit after a complete checkpoint truncates a WAL larger than this.
        w.execute(f"PRAGMA journal_size_limit = {WAL_KEPT}")
        w.execute("PRAGMA foreign_keys = OFF")
        if not self.memory:
            self._take_identity()

    def _connect(self, timeout: float) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self._target, isolation_level=None, check_same_thread=False, timeout=timeout,
                uri=self._uri,
            )
        except sqlite3.Error as e:
            if self._uri and not os.path.exists(self.path):
                raise DatabaseUnavailable(f"no database at {self.path}") from e
            raise translate(e, self.path) from e
        conn.row_factory = sqlite3.Row
        return conn

    # -- identity ----------------------------------------------------------------------------

    def _take_identity(self) -> None:
        """Give the database its random id (once in its life) and remember the file."""
        # Even this read can find the file locked while another process turns a new
        # database to WAL or recovers its WAL.
        ident = self._retry(lambda: self.writer.execute("PRAGMA user_version").fetchone()[0])
        if not ident:
            with self.write() as c:
                ident = c.execute("PRAGMA user_version").fetchone()[0]
                if not ident:
                    ident = random.randint(1, 2**31 - 1)
                    c.execute(f"PRAGMA user_version = {ident}")
            # Into the main file now, where check_file() reads it (a checkpoint that cannot
            # finish because of a reader is done by a later one: see _header_confirmed).
            self._retry(lambda: self.writer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall())
        self._identity = int(ident)
        self._file_id = self._stat()
        self._fd = self._sqlite_fd()
        self._header_confirmed = self._header() == self._identity
        # SQLite opened "<file>-wal" and "<file>-shm" beside the file (links followed), and
        # while our writer holds its shared lock nobody removes them. A descriptor of our own
        # of the WAL is safe to hold and to close: SQLite's POSIX locks are on the database
        # file and the -shm file, never on the WAL (os_unix.c: xLock, xShmLock).
        self._beside = os.path.realpath(self.path)
        self._shm_id = inode_of(self._beside + "-shm")
        try:
            self._wal_fd = os.open(self._beside + "-wal", os.O_RDWR | os.O_CLOEXEC)
        except OSError:  # no WAL (not in WAL mode)
            self._wal_fd = None
        else:
            st = os.fstat(self._wal_fd)
            self._wal_id = (st.st_dev, st.st_ino)

    def _stat(self) -> tuple[int, int] | None:
        """(device, inode) of the file now at :attr:`path`, None if there is none.

        :raises StorageError: the path cannot be looked at (EIO, EACCES on a directory): that
            says nothing of what became of the file, and must never disown it.
        """
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            raise StorageError(f"cannot look at {self.path}: {e.strerror or e}") from e
        return st.st_dev, st.st_ino

    def _sqlite_fd(self) -> int | None:
        """SQLite's own descriptor of the database file, to read its header through."""
        return held_fd(self.path, self._file_id)

    def _header(self) -> int | None:
        """The database id in the header of the file SQLite has open (None: unreadable)."""
        if self._fd is None:
            return None
        try:
            raw = os.pread(self._fd, 4, _USER_VERSION_OFFSET)
        except OSError:
            return None
        return int.from_bytes(raw, "big") if len(raw) == 4 else None

    def commits_elsewhere(self) -> int | None:
        """SQLite's ``PRAGMA data_version`` of the writer connection: it changes when another
        connection commits, never for the writer's own commits. None while the writer is busy
        (never waited for) or the database is in memory or disowned."""
        if self.memory or self.gone is not None or not self._wlock.acquire(blocking=False):
            return None
        try:
            if self._closed or self.writer.in_transaction:
                return None
            return int(self.writer.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error:
            return None
        finally:
            self._wlock.release()

    def check_file(self) -> None:
        """Make sure the file at :attr:`path` is still this database.

        :raises DatabaseGone: it was deleted, renamed over or overwritten. It stays so: the
            database is disowned (:meth:`_disown`), and every later call fails the same way.
        """
        if self.gone is not None:
            raise DatabaseGone(self.gone)
        why = self._what_happened()
        if why is not None:
            if not self._waiting_allowed():
                raise WouldBlock()  # disowning waits for our writer and syncs: in a thread
            self._disown(
                f"the database file {self.path} {why} while in use; writes are refused "
                "(restart with the right database)", ours_elsewhere=why != "was overwritten")
            raise DatabaseGone(self.gone or why)

    def _what_happened(self) -> str | None:
        """None while the file at :attr:`path` is this database, else what became of it."""
        if self.memory or self._file_id is None or self._closed:
            return None  # closed: our descriptors are gone, their numbers maybe reused
        file_id = self._stat()
        header = self._header() if file_id == self._file_id else None
        why = None
        if file_id is None:
            why = "was deleted"
        elif file_id != self._file_id:
            why = "was replaced by another file"
        elif header == self._identity:
            self._header_confirmed = True
        elif self._fd is not None and (self._header_confirmed or header != 0):
            why = "was overwritten"
        return why

    def _disown(self, message: str, ours_elsewhere: bool) -> None:
        """Stop using this database for good, once the file at :attr:`path` is no longer it,
        leaving nothing of ours beside that file and writing nothing into it.

        SQLite finds a WAL and its -shm index by name only (``<file>-wal``, ``<file>-shm``)
        and never checks that they belong to the file beside them: another process opening
        the new file would read our frames as its pages, and so would the next open after
        we exit. And the last connection to close checkpoints the WAL into the file it has
        open, which after ``cp other.db x.db`` (the same inode) holds the other database,
        then deletes ``<file>-wal`` and ``<file>-shm`` by name, whoever's they are by then
        (sqlite3WalClose). So, under the writer lock (no commit of ours half-written):

        0. If the file we have open is no longer at the path (``ours_elsewhere``: moved away,
           or deleted), it is still our database, maybe under another name: our WAL is
           checkpointed into it, through SQLite's descriptor of it, never by name; without
           this, every commit made since the last checkpoint would be lost from it.
        1. Our WAL is emptied, through our own descriptor of it: a checkpoint of ours stops
           at its first frame, which it cannot read, before writing anything, and a close
           whose checkpoint fails deletes nothing.
        2. Our -shm and WAL files are removed from beside the path, if they are still ours
           (the new database's own are left alone); then no other process finds them.
        3. Every connection is closed now (where Python has ``setconfig``, with SQLite's
           checkpoint on close turned off first), while the names beside the file are
           nobody's: a checkpoint that does find nothing to copy and succeeds deletes
           nothing of anyone's. Everything after this fails with :class:`DatabaseGone`.
        """
        with self._wlock:
            if self.gone is not None:
                return
            self.gone = message
            log.error("%s", message)
            if ours_elsewhere:
                self._checkpoint_into_our_file()
            if self._wal_fd is not None:
                try:
                    os.ftruncate(self._wal_fd, 0)
                    os.fsync(self._wal_fd)
                except OSError as e:
                    log.warning("cannot empty %s-wal: %s", self._beside, e.strerror or e)
            removed = unlink_if(self._beside + "-shm", self._shm_id)
            removed = unlink_if(self._beside + "-wal", self._wal_id) or removed
            if removed:
                fsync_directory(self._beside)
            self._close_connections()

    def _checkpoint_into_our_file(self) -> None:
        """Copy our WAL into the database file SQLite has open (see :meth:`_disown`), then
        sync it. Readers of other processes can hold a checkpoint back for a while: it is
        tried for up to a second, and what it could not copy is said."""
        deadline = time.monotonic() + 1.0
        while True:
            try:
                busy, frames, copied = self.writer.execute(
                    "PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except sqlite3.Error as e:
                log.error("cannot save the last commits into the moved database: %s", e)
                return
            if frames <= copied or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        if frames > copied:
            log.error("%d of %d pages of the last commits could not be copied into the "
                      "moved database (readers held them back)", frames - copied, frames)
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            except OSError as e:
                log.error("cannot sync the moved database: %s", e.strerror or e)

    # -- transactions ------------------------------------------------------------------------

    @contextmanager
    def nowait(self) -> Iterator[None]:
        """Within this block, this thread never waits: where a call would wait for a lock
        (another process's write lock, our writer busy in another thread) it raises
        :class:`WouldBlock` before changing anything, so the caller can run it again where
        waiting is fine. An event loop runs store calls this way first: most never wait, and
        a worker thread costs more than a whole commit."""
        self._local.nowait = True
        try:
            yield
        finally:
            self._local.nowait = False

    @contextmanager
    def patience(self, seconds: float) -> Iterator[None]:
        """Within this block, this thread waits for a lock (another process's write lock, our
        writer busy in another thread) at most ``seconds`` in all, instead of
        :data:`WRITE_PATIENCE` each time, and then raises :class:`Busy`, having changed
        nothing: for a caller that holds others up while it waits (a filesystem request the
        kernel runs with a directory locked)."""
        previous = getattr(self._local, "deadline", None)
        self._local.deadline = time.monotonic() + seconds
        try:
            yield
        finally:
            self._local.deadline = previous

    def stop_waiting(self) -> None:
        """From now on no call waits for a lock: one waiting gives up at its next try (within
        :data:`WRITE_RETRY_MAX_DELAY`), and later ones at their first, with :class:`Busy`,
        having changed nothing. For a process that is stopping: a mount daemon whose stop
        signal's grace ran out while a close waited for another process's write lock must
        unmount, not wait up to :data:`WRITE_PATIENCE` (issue 38). A transaction that has the
        lock already ends as it would have."""
        self._stop_waiting = True

    def _waiting_allowed(self) -> bool:
        return not getattr(self._local, "nowait", False)

    def _error(self, e: sqlite3.Error) -> Exception:
        """The memfs error for an SQLite failure: :class:`DatabaseGone` once disowned (its
        connections are closed, or its WAL emptied under a statement)."""
        if self.gone is not None:
            return DatabaseGone(self.gone)
        return translate(e, self.path)

    def _deadline(self) -> float:
        """Until when a lock may be waited for now (:meth:`patience`, else WRITE_PATIENCE)."""
        deadline = time.monotonic() + WRITE_PATIENCE
        own: float | None = getattr(self._local, "deadline", None)
        return deadline if own is None else min(deadline, own)

    def _retry(self, fn: Callable[[], T]) -> T:
        """``fn()``, retried while SQLite reports a lock, sleeping outside any lock of ours."""
        deadline = self._deadline()
        delay = 0.002
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as e:
                if not _is_busy(e):
                    raise self._error(e) from e
                if not self._waiting_allowed():
                    raise WouldBlock() from e
                if self._stop_waiting:
                    raise Busy("the database is locked by another writer, and this process "
                               "is stopping: nothing was changed") from e
                if time.monotonic() > deadline:
                    raise Busy("the database stayed locked by other writers; try again") from e
            except sqlite3.Error as e:
                raise self._error(e) from e
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, WRITE_RETRY_MAX_DELAY)

    def _begin(self) -> None:
        """Take SQLite's write lock with ``BEGIN IMMEDIATE``, holding our writer lock only for
        each attempt: between attempts (:meth:`_retry` sleeps) nothing of ours is held."""

        def attempt() -> None:
            if not self._waiting_allowed():
                if not self._wlock.acquire(blocking=False):
                    raise WouldBlock()
            else:
                own: float | None = getattr(self._local, "deadline", None)
                wait = -1.0 if own is None else max(0.0, own - time.monotonic())
                if not self._wlock.acquire(timeout=wait):
                    raise Busy("the database stayed locked by another write; try again")
            try:
                self.writer.execute("BEGIN IMMEDIATE")
            except BaseException:
                self._wlock.release()
                raise
            # The writer lock stays ours until write() ends.

        self._retry(attempt)

    @contextmanager
    def write(self, *scopes: str) -> Iterator[sqlite3.Connection]:
        """One write transaction on the writer connection: committed when the block ends, rolled
        back if it raises. ``scopes`` are ignored: the one writer serialises every write. The
        file is checked before and after (:meth:`check_file`): a commit that landed in a file
        no longer at :attr:`path` is reported as failed.

        :raises Busy, StorageFull, StorageError, DatabaseGone:
        """
        self.check_file()
        self._begin()
        try:
            conn = self.writer
            try:
                yield conn
                conn.execute("COMMIT")
            except sqlite3.Error as e:
                self._rollback()
                raise self._error(e) from e
            except BaseException:
                self._rollback()
                raise
        finally:
            self._wlock.release()
        self.check_file()
        if self._checkpointer is not None:
            self._checkpointer.committed()

    def checkpoint_passive(self) -> tuple[int, int, int] | None:
        """One PASSIVE checkpoint, on a connection of the checkpointer's own
        (:mod:`memfs.backends.checkpoint`): the WAL's pages are copied into the database file
        as far as readers allow, while the writer goes on, and no lock is waited for. Returns
        SQLite's (busy, frames in the WAL, frames copied), or None when none was made: the
        database is closed or disowned, the file at :attr:`path` is no longer it (the next
        write disowns it; a checkpoint now would copy our pages into another database), or
        another connection is checkpointing.

        A WAL all copied is then truncated (a TRUNCATE checkpoint, which waits for nobody
        either) when it is larger than :data:`~memfs.backends.checkpoint.WAL_SHRUNK` after a
        checkpoint was held back (a long reader let it grow), or larger than
        :data:`~memfs.backends.checkpoint.WAL_KEPT`; busy is 1 when it could not be yet (a
        writer or a reader in the WAL now): the checkpointer tries again. A WAL that grew
        only between two checkpoints is kept, and written over from its start.

        :raises StorageError: the file cannot be looked at, or SQLite failed.
        """
        with self._ckpt_lock:
            if self._closed or self.gone is not None or self._what_happened() is not None:
                return None
            if self._ckpt_conn is None:
                self._ckpt_conn = self._connect(timeout=0.0)
            try:
                busy, frames, copied = self._ckpt_conn.execute(
                    "PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                if busy or copied < frames:
                    self._ckpt_held = True
                elif self._wal_size() > (WAL_SHRUNK if self._ckpt_held else WAL_KEPT):
                    busy = self._ckpt_conn.execute(
                        "PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                    self._ckpt_held = bool(busy)
            except sqlite3.OperationalError as e:
                if e.sqlite_errorcode == sqlite3.SQLITE_BUSY:
                    return None
                raise self._error(e) from e
            return int(busy), int(frames), int(copied)

    def _wal_size(self) -> int:
        """The size of our WAL, through our own descriptor of it (0: none)."""
        if self._wal_fd is None:
            return 0
        return os.fstat(self._wal_fd).st_size

    def _rollback(self) -> None:
        try:
            if self.writer.in_transaction:
                self.writer.execute("ROLLBACK")
        except sqlite3.Error as e:  # rolled back already (after SQLITE_FULL), or disowned
            log.debug("rollback: %s", e)

    def reader(self) -> sqlite3.Connection:
        """This thread's reader connection (made on first use)."""
        if self.memory:
            return self.writer
        if self.gone is not None:
            raise DatabaseGone(self.gone)
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StorageError(f"database {self.path} is closed")
            # A new connection opens whatever file is at the path now, and the WAL and -shm
            # beside it: never another database's.
            self.check_file()
            conn = self._connect(timeout=READ_PATIENCE)
            conn.execute("PRAGMA query_only = 1")
            conn.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        if self.memory:  # one connection: readers take the writer's lock
            if not self._wlock.acquire(blocking=self._waiting_allowed()):
                raise WouldBlock()
            try:
                yield self.writer
            finally:
                self._wlock.release()
        else:
            conn = self.reader()
            with self._readers_lock:
                self._in_use[conn] = self._in_use.get(conn, 0) + 1
            try:
                yield conn
            finally:
                with self._readers_lock:
                    left = self._in_use.pop(conn) - 1
                    if left:
                        self._in_use[conn] = left
                    last = not left and conn in self._orphans
                    if last:
                        self._orphans.discard(conn)
                if last:  # the database closed while this thread read: its turn to close it
                    self._close_one(conn)

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot for several reads (never waits on a writer)."""
        with self._reading() as conn:
            self._retry(lambda: conn.execute("BEGIN"))
            try:
                yield conn
            except sqlite3.Error as e:
                raise self._error(e) from e
            finally:
                try:
                    if conn.in_transaction:
                        conn.execute("COMMIT")
                except sqlite3.Error:
                    if self.gone is None:
                        raise

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """The database as it is now, for a long read made in steps (an export, page by page):
        a connection of its own in ONE read transaction, which WAL keeps on the snapshot it
        began with while writers go on (https://sqlite.org/isolation.html). It may be used
        from any thread, by one user at a time (each step of a streamed response can run in
        a different worker thread, so a per-thread :meth:`reader` cannot hold it), and is
        closed when the block ends, however it ends (a generator holding it is closed when
        it finishes, fails, or is closed or dropped unfinished).

        While it is open, checkpoints cannot move the WAL's content past its snapshot into the
        database file, so the WAL grows with what is written meanwhile: keep it for one read.
        ``:memory:``: the one connection cannot hold a snapshot without blocking writers, so
        this is a private copy of the database, made under the writer's lock (memory as large
        as the database: tests only).
        """
        if self._closed:
            raise StorageError(f"database {self.path} is closed")
        if self.memory:
            conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            conn.row_factory = sqlite3.Row
        else:
            self.check_file()  # see reader()
            conn = self._connect(timeout=READ_PATIENCE)
        with self._readers_lock:
            self._snapshots.add(conn)
        try:
            if self.memory:
                with self._reading() as source:  # under the writer's lock: no write half done
                    self._retry(lambda: source.backup(conn))
            else:
                conn.execute("PRAGMA query_only = 1")

                def pin() -> None:
                    # BEGIN is deferred: the first read starts the read transaction, and with
                    # it the snapshot every later statement sees.
                    if not conn.in_transaction:
                        conn.execute("BEGIN")
                    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()

                self._retry(pin)
            yield conn
        except sqlite3.Error as e:
            raise self._error(e) from e
        finally:
            with self._readers_lock:
                self._snapshots.discard(conn)
            conn.close()  # ends its read transaction: checkpoints may pass it again

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, *args)`` on a reader outside a transaction (each statement reads a
        snapshot of its own)."""
        with self._reading() as conn:
            return self._retry(lambda: fn(conn, *args))

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        with self._reading() as conn:
            row: sqlite3.Row | None = self._retry(lambda: conn.execute(sql, params).fetchone())
            return row

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        with self._reading() as conn:
            rows: list[Row] = self._retry(lambda: conn.execute(sql, params).fetchall())
            return rows

    # -- durability and life -----------------------------------------------------------------

    def sync(self) -> None:
        """Put every commit made so far on disk: fsync of the WAL, the database file and their
        directory. Works whatever other connections hold (a checkpoint would not).

        :raises StorageError: an fsync failed (the data may not be on disk).
        :raises DatabaseGone: the file is no longer this database (nothing is synced).
        """
        if self.memory:
            return
        self.check_file()
        # The database file through SQLite's own descriptor, never one of ours: closing it
        # would drop SQLite's locks (see held_fd, memfs.backends.files). The WAL and the
        # directory are never locked.
        main = self._fd if self._fd is not None else held_fd(self.path)
        if main is not None:
            try:
                os.fsync(main)
            except OSError as e:
                raise StorageError(f"cannot sync {self.path}: {e.strerror}") from e
        for p in (self.path + "-wal", os.path.dirname(os.path.abspath(self.path))):
            try:
                fd = os.open(p, os.O_RDONLY)
            except FileNotFoundError:
                continue
            except OSError as e:
                raise StorageError(f"cannot sync {p}: {e.strerror}") from e
            try:
                os.fsync(fd)
            except OSError as e:
                raise StorageError(f"cannot sync {p}: {e.strerror}") from e
            finally:
                os.close(fd)

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        if not self._closed and self.gone is None:
            # A last look: SQLite's last close checkpoints into the file it has open and
            # deletes the WAL beside the path, so a file replaced since the last look must be
            # disowned first.
            with suppress(DatabaseGone):
                self.check_file()
        self._closed = True
        self._close_connections()
        if self._wal_fd is not None:
            os.close(self._wal_fd)
            self._wal_fd = None

    def _close_connections(self) -> None:
        """Close every connection: the readers, then the writer (the last one to close
        checkpoints: see :meth:`_disown`), and the snapshots. A reader that another thread is
        using is left to that thread, which closes it once its read is done (SQLite must never run
        on a connection closed under it: that crashes the process)."""
        with self._readers_lock:
            readers, self._readers = self._readers, []
            busy = {c for c in readers if c in self._in_use}
            self._orphans |= busy
            conns = [c for c in readers if c not in busy]
            conns.extend(self._snapshots)  # an export's: closed under it, as it asks
            self._snapshots.clear()
        with self._ckpt_lock:  # after the checkpoint under way, and none after
            if self._ckpt_conn is not None:
                conns.append(self._ckpt_conn)
                self._ckpt_conn = None
        with self._wlock:
            conns.append(self.writer)
            for conn in conns:
                self._close_one(conn)

    def _close_one(self, conn: sqlite3.Connection) -> None:
        if self.gone is not None:
            _no_checkpoint_on_close(conn)
        conn.close()


def _no_checkpoint_on_close(conn: sqlite3.Connection) -> None:
    """Where Python can say so (3.12+), tell SQLite not to checkpoint when ``conn`` closes
    (on 3.11, :meth:`SQLiteDatabase._disown` makes that checkpoint fail before it writes)."""
    setconfig = getattr(conn, "setconfig", None)
    if setconfig is None:
        return
    try:
        setconfig(_NO_CKPT_ON_CLOSE, True)
    except sqlite3.Error as e:  # closed already
        log.debug("no checkpoint on close: %s", e)
