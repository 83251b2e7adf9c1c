"""Waking on a SQLite database changing, instead of polling it.

A :class:`DbWatch` is one Linux inotify watch of the directory holding a database, reporting
only what happens to the database's own files: ``<db>`` (a checkpoint, a rollback-journal
commit, the file overwritten), ``<db>-wal`` (every commit in WAL mode) and ``<db>-journal``,
each written, created, deleted or renamed. So a database replaced (renamed over) or deleted
wakes its waiters too. A waiter sleeps in :meth:`DbWatch.wait` until the database changed
after the generation it last saw: no CPU at all while nothing changes.

One watch per database file per process (:func:`acquire` / :func:`release`): a session
daemon's stores, or a server's change streams, share it however many wait on it.

inotify does not see everything: a database on a network filesystem changed by another
machine, a write through ``mmap``, or an overflowing event queue (which wakes every waiter).
Callers therefore keep a slow safety poll (every few seconds), which costs next to nothing.
:func:`acquire` returns ``None`` where inotify is not available (not Linux, the per-user
watch or instance limit reached, ``:memory:``): the caller then polls as before.

Waiting is done with trio (``trio.lowlevel.wait_readable`` on the inotify descriptor); both
the FUSE daemons and ``memfs serve`` run on trio.

A PostgreSQL database (a ``postgresql://`` URL) has no file to watch: :func:`acquire` gives
the process's LISTEN connection to it instead (:class:`memfs.backends.pgwatch.PgWatch`, the
same interface, and :meth:`narrow` to wake for one store only).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import logging
import os
import struct
import threading
from typing import TYPE_CHECKING, Protocol

import trio

from .targets import is_url

if TYPE_CHECKING:
    from .pgwatch import PgWatch

log = logging.getLogger(__name__)

# <sys/inotify.h>
IN_MODIFY = 0x00000002
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

#: What is watched on the directory: a file in it written, created, deleted or renamed, and
#: the directory itself going away.
MASK = (IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF
        | IN_MOVE_SELF | IN_ONLYDIR)
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)

_libc: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        _libc = libc
    return _libc


class Watch(Protocol):
    """What a waiter uses of a watch: a :class:`DbWatch`, a
    :class:`~memfs.backends.pgwatch.PgWatch` or one store's view of it (:meth:`narrow`)."""

    @property
    def changes(self) -> int: ...

    async def wait(self, seen: int) -> int: ...

    def narrow(self, store: str) -> Watch: ...


class DbWatch:
    """One inotify watch of a database's files (see the module's documentation).

    :attr:`changes` counts the wake-ups seen: a waiter keeps the count it last saw and
    :meth:`wait` returns as soon as it moved on. Whichever waiter finds nobody reading the
    descriptor reads it; the others wait for it to tell them (trio lets only one task wait on
    a descriptor).
    """

    def __init__(self, path: str) -> None:
        """:raises OSError: inotify is not available, or the directory cannot be watched."""
        real = os.path.realpath(path)
        self.path = real
        self.directory, name = os.path.split(real)
        self.names = {os.fsencode(n) for n in (name, name + "-wal", name + "-journal")}
        libc = _lib()
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        if libc.inotify_add_watch(fd, os.fsencode(self.directory), MASK) < 0:
            e = ctypes.get_errno()
            os.close(fd)
            raise OSError(e, f"cannot watch {self.directory}: {os.strerror(e)}")
        self.fd = fd
        #: Wake-ups seen (a batch of events that concern the database counts once).
        self.changes = 0
        #: Batches of inotify events read (relevant or not), for tests and statistics.
        self.reads = 0
        self.users = 0
        self._reading = False
        self._tick: trio.Event | None = None

    def drain(self) -> bool:
        """Read every pending event; whether one concerns the database (or may have: a queue
        overflow, the directory itself moved or deleted)."""
        relevant = False
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return relevant
            except OSError as e:
                if e.errno == errno.EINTR:
                    continue
                raise
            if not buf:
                return relevant
            self.reads += 1
            pos = 0
            while pos + _HEADER.size <= len(buf):
                _wd, mask, _cookie, length = _HEADER.unpack_from(buf, pos)
                name = buf[pos + _HEADER.size:pos + _HEADER.size + length].rstrip(b"\0")
                pos += _HEADER.size + length
                if name in self.names or not name and mask & ~IN_IGNORED:
                    relevant = True

    async def wait(self, seen: int) -> int:
        """Wait until :attr:`changes` is past ``seen`` (at once if it is already); returns it.
        Cancel it (``trio.move_on_after``) to wait at most so long."""
        while self.changes == seen:
            if self._reading:
                if self._tick is None:
                    self._tick = trio.Event()
                await self._tick.wait()
                continue
            self._reading = True
            try:
                if not self.drain():  # what came while nobody was reading, at once
                    await trio.lowlevel.wait_readable(self.fd)
                    if not self.drain():
                        continue
                self.changes += 1
            finally:
                self._reading = False
                tick, self._tick = self._tick, None
                if tick is not None:
                    tick.set()
        return self.changes

    def narrow(self, store: str) -> DbWatch:
        """The watch for one store: itself (inotify cannot tell the stores of a database
        apart; :class:`memfs.backends.pgwatch.PgWatch` can)."""
        return self

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            with contextlib.suppress(RuntimeError):  # RuntimeError: not in trio
                trio.lowlevel.notify_closing(fd)
            os.close(fd)


#: The process's watches, inotify and PostgreSQL alike, by real path or URL (shared by
#: every user in the process: :func:`acquire` counts them, :func:`release` closes the last).
_watches: dict[str, DbWatch | PgWatch] = {}
_lock = threading.Lock()
_failed: set[str] = set()


def acquire(path: str) -> DbWatch | PgWatch | None:
    """The process's watch of the database at ``path`` (shared; :func:`release` it when
    done), or ``None`` where it cannot be watched (the caller polls instead). A
    ``postgresql://`` URL: its :class:`~memfs.backends.pgwatch.PgWatch`, which connects in the
    background (until then, and while reconnecting, the callers' safety poll is all they
    get; the connection wakes them all)."""
    if is_url(path):
        from .pgwatch import PgWatch

        with _lock:
            watch = _watches.get(path)
            if watch is None:
                watch = _watches[path] = PgWatch(path)
            watch.users += 1
            return watch
    if path == ":memory:" or path.startswith("file:"):
        return None
    real = os.path.realpath(path)
    with _lock:
        watch = _watches.get(real)
        if watch is None:
            try:
                watch = DbWatch(real)
            except (OSError, AttributeError) as e:
                # AttributeError: a libc without inotify.
                if real not in _failed:
                    _failed.add(real)
                    log.warning("cannot watch %s for changes (%s); polling it instead", real, e)
                return None
            _watches[real] = watch
        watch.users += 1
        return watch


def release(watch: DbWatch | PgWatch | None) -> None:
    if watch is None:
        return
    with _lock:
        watch.users -= 1
        if watch.users <= 0:
            if _watches.get(watch.path) is watch:
                del _watches[watch.path]
            watch.close()
