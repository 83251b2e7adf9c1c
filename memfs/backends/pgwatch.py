"""Waking on a PostgreSQL database's change feed, instead of polling it: LISTEN/NOTIFY.

Every insert into ``changes`` notifies the channel :data:`CHANNEL` with the store's id as the
payload (a trigger of PostgreSQL's migration ``m002_changes_notify``, :mod:`memfs.store.schema`).
PostgreSQL delivers a notification only when its transaction commits, so a listener woken by
one finds the change in the feed, whichever process or machine wrote it.

A :class:`PgWatch` is the process's one dedicated ``LISTEN`` connection to a database
(:func:`memfs.backends.watch.acquire` / :func:`~memfs.backends.watch.release` share it, as
they share an inotify watch): a thread blocks in ``poll()`` on its socket (no CPU while
nothing changes) and wakes the trio tasks waiting in :meth:`PgWatch.wait` (any store) or in
the :meth:`PgWatch.narrow` view of one store (the interface of
:class:`memfs.backends.watch.DbWatch`: ``changes`` and ``wait(seen)``), so the subscribers of
other stores are not woken at all.

A lost connection (the server restarted, the backend terminated, the network gone) is
reconnected with a backoff (:data:`BACKOFF`); every (re)connection, the first included,
wakes every waiter, which polls the feed from its last position: the feed is in the
database, so a change committed while nobody listened is found then. The callers keep a slow
safety poll as with inotify (a connection silently gone is only noticed by TCP keepalives).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
from typing import Any, TypedDict

import trio

from .targets import redact_url

log = logging.getLogger(__name__)

#: The channel every change is notified on (payload: the store's id).
CHANNEL = "memfs_changes"
#: Seconds before reconnecting: the first retry, doubled after each failure up to the last.
BACKOFF = (0.05, 5.0)


class Keepalives(TypedDict):
    """libpq's keepalive connection parameters: on (1), idle and interval seconds, probes."""

    keepalives: int
    keepalives_idle: int
    keepalives_interval: int
    keepalives_count: int


#: libpq keepalives of the listening connection: a dead TCP peer is noticed in about a
#: minute (a unix socket ignores them).
KEEPALIVES: Keepalives = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10,
                          "keepalives_count": 3}


class _Waiter:
    __slots__ = ("store", "token", "event")

    def __init__(self, store: str | None) -> None:
        self.store = store
        self.token = trio.lowlevel.current_trio_token()
        self.event = trio.Event()


class PgWatch:
    """The process's LISTEN connection to one database (see the module's documentation).

    :attr:`changes` counts the wake-ups seen for any store (a notification, or a
    (re)connection); :meth:`narrow` gives one store's count. A waiter keeps the count it last
    saw and :meth:`wait` returns as soon as it moved on.
    """

    def __init__(self, url: str) -> None:
        self.path = url
        #: Wake-ups of any store: notifications received plus (re)connections.
        self.changes = 0
        #: (Re)connections (each wakes every waiter, of every store).
        self.connects = 0
        #: Batches of notifications read, for tests and statistics.
        self.reads = 0
        self.users = 0
        #: The listening backend's process id (None: not connected), for tests.
        self.backend_pid: int | None = None
        self._counts: dict[str, int] = {}
        self._waiters: set[_Waiter] = set()
        self._lock = threading.Lock()
        self._stopping = False
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.thread = threading.Thread(target=self._run, name="memfs-pgwatch", daemon=True)
        self.thread.start()

    # -- for the waiters ---------------------------------------------------------------------

    def count(self, store: str | None) -> int:
        """Wake-ups of ``store`` (None: of any store)."""
        if store is None:
            return self.changes
        return self.connects + self._counts.get(store, 0)

    def narrow(self, store: str) -> _StoreWatch:
        """A view of this watch that wakes only for ``store`` (and at every reconnection)."""
        return _StoreWatch(self, store)

    async def wait(self, seen: int, store: str | None = None) -> int:
        """Wait until :meth:`count` of ``store`` is past ``seen`` (at once if it is already);
        returns it. Cancel it (``trio.move_on_after``) to wait at most so long."""
        while True:
            with self._lock:
                now = self.count(store)
                if now != seen:
                    return now
                waiter = _Waiter(store)
                self._waiters.add(waiter)
            try:
                await waiter.event.wait()
            finally:
                with self._lock:
                    self._waiters.discard(waiter)

    def _wake(self, stores: set[str] | None) -> None:
        """Count a wake-up of ``stores`` (None: every store, a (re)connection) and wake their
        waiters. From the listening thread."""
        with self._lock:
            self.changes += 1
            if stores is None:
                self.connects += 1
            else:
                for s in stores:
                    self._counts[s] = self._counts.get(s, 0) + 1
            due = [w for w in self._waiters
                   if stores is None or w.store is None or w.store in stores]
        for w in due:
            with contextlib.suppress(trio.RunFinishedError):  # its trio run is over
                w.token.run_sync_soon(w.event.set)

    # -- the listening thread ----------------------------------------------------------------

    def _sleep(self, seconds: float) -> bool:
        """Sleep ``seconds`` or until :meth:`close`; whether to go on."""
        p = select.poll()
        p.register(self._wake_r, select.POLLIN)
        p.poll(seconds * 1000)
        return not self._stopping

    def _run(self) -> None:
        delay = BACKOFF[0]
        failing = False
        while not self._stopping:
            conn = None
            try:
                conn = _connect(self.path)
                conn.execute(f"LISTEN {CHANNEL}")
                self.backend_pid = conn.info.backend_pid
                if failing:
                    log.info("listening to %s for changes again", redact_url(self.path))
                failing, delay = False, BACKOFF[0]
                self._wake(None)  # what was committed while nobody listened
                self._listen(conn)
            except Exception as e:
                if self._stopping:
                    break
                reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
                (log.debug if failing else log.warning)(
                    "lost the change notifications of %s (%s); reconnecting",
                    redact_url(self.path), reason)
                failing = True
            finally:
                self.backend_pid = None
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()
            if not self._sleep(delay):
                break
            delay = min(delay * 2, BACKOFF[1])
        os.close(self._wake_r)

    def _listen(self, conn: Any) -> None:
        """Read notifications until the connection fails (raises) or :meth:`close`."""
        import psycopg.pq

        pgconn = conn.pgconn
        p = select.poll()
        p.register(pgconn.socket, select.POLLIN | select.POLLERR | select.POLLHUP)
        p.register(self._wake_r, select.POLLIN)
        while True:
            # What libpq already holds first (read along with LISTEN's answer, say): the
            # socket would not tell of it again.
            stores: set[str] = set()
            while (n := pgconn.notifies()) is not None:
                stores.add(n.extra.decode())
            if stores:
                self.reads += 1
                self._wake(stores)
            if pgconn.status != psycopg.pq.ConnStatus.OK:
                raise ConnectionError("the connection was closed")
            p.poll()
            if self._stopping:
                return
            pgconn.consume_input()  # raises on a connection gone

    def close(self) -> None:
        """Stop listening (the thread closes its connection and ends)."""
        if not self._stopping:
            self._stopping = True
            os.write(self._wake_w, b"x")
            os.close(self._wake_w)


class _StoreWatch:
    """One store's view of a :class:`PgWatch` (:meth:`PgWatch.narrow`)."""

    def __init__(self, watch: PgWatch, store: str) -> None:
        self.watch = watch
        self.store = store

    @property
    def changes(self) -> int:
        return self.watch.count(self.store)

    async def wait(self, seen: int) -> int:
        return await self.watch.wait(seen, self.store)

    def narrow(self, store: str) -> _StoreWatch:
        return self.watch.narrow(store)


def _connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=10, **KEEPALIVES)
