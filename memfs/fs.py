"""The FUSE filesystem of one memory store: pyfuse3 handlers over a :class:`~memfs.tree.Tree`.

A store is shown as a directory tree (SPEC §2): a memory ``/a/b.md`` is the regular file
``MOUNT/a/b.md``; directories are the path prefixes shared by memories, plus empty directories
made with ``mkdir`` that live in this mount only until a file is written into them.

How it works:

* The whole tree (paths, sizes, hashes, no content) is loaded at start and kept in memory
  (:mod:`memfs.tree`); lookup, getattr and readdir never touch the store. The kernel may cache
  entries and attributes for a long time (``timeout``, 300 s by default) and keep page caches
  across opens, because every change made elsewhere is pushed to it (:mod:`memfs.watch`).
* **Nothing that can wait runs on the trio thread.** Every store call (SQLite, or HTTP for a
  remote mount) runs in a worker thread, so a mount keeps answering ``ls`` and cached reads
  while another process holds SQLite's write lock or a server is slow. Changes to the store
  (commits, unlink, rename) and the application of the change feed take one lock per mount
  (:attr:`Operations._mutex`), so the tree changes in the order the store did; reads never
  take it.
* **An unlink or rename waits for the database at most** :data:`DIRECTORY_PATIENCE`: the
  kernel runs them with their directory locked, so every lookup of a name it has not cached
  and every listing of that directory waits for them. Another process's transaction that
  holds the write lock for seconds makes them fail with EBUSY (nothing changed, the failure
  logged) instead of freezing ``ls`` and ``stat`` there meanwhile. Closes and fsyncs lock no
  directory and wait as long as the store does. (A remote mount's server call is not bounded
  so: it ends at the client's timeout.)
* Writes are buffered per file (one buffer per inode, shared by every handle) and committed
  with ``write_path`` at ``fsync`` and at ``close``: in ``flush``, the only close-time reply
  the kernel passes back to ``close(2)``, so what ``close`` returned is what was saved. The
  kernel sends a flush for *every* ``close`` of a descriptor, also for a copy closed by
  ``dup2`` or by a forked child; the flush commits only when the process that opened the file
  holds no descriptor of that open file any more (:func:`_fds_on`, from ``/proc``), so
  ``echo x > f`` saves one version and a child closing its copy saves nothing.
* A file deleted elsewhere (or whose path another memory took) while open for writing here
  leaves the tree, and its writes are still saved at its path at close/fsync: the memory is
  made again, or the one now at the path gets them (the last close wins), and the file is
  back in the tree under the inode the writer holds. Only this mount's own unlink or rename
  over an open file drops its unsaved writes (POSIX); the event says so.
* An open→close in which a write failed (EFBIG, EILSEQ) commits nothing: the file keeps its
  previous version, and ``close`` fails with that error. A commit the store refuses (or a full
  disk) is discarded the same way, and the kernel forgets the refused data before ``close``
  returns.
* Tool events: each file open→close, listing, unlink, rename, mkdir, rmdir and path truncate is
  an ``agent.tool_use`` / ``agent.tool_result`` pair (SPEC §4). The pair of a write is
  recorded by the store in the write's own transaction; the others go through the
  :class:`~memfs.toolevents.EventSink`.
* Inode numbers are stable while mounted (one per memory id, one per directory node); never
  reused, so ``generation`` is always 0. An open file keeps its content after it is unlinked,
  renamed over or deleted elsewhere, until its last close.
* Every listing (the tree's and ``.history``'s) begins with "." and ".." (readdir offsets 1
  and 2), which the kernel counts as no lookup; its event counts the real entries only.
* Every handler maps :mod:`memfs.errors` through :data:`ERRNO_BY_ERROR` and raises only
  ``FUSEError``; any other exception is logged with its traceback and answered with EIO.
* ``.history/`` (:mod:`memfs.historyfs`): every retained version as a read-only file under its
  memory's final path. Its nodes are not in the tree (their inodes come from the tree's
  allocator): each handler first asks :meth:`Operations._hist` and answers for them itself.
  The root's listing leaves ``.history`` out (a lookup by name finds it, and shadows a memory
  ``/.history/...`` made through the API); every change under it (or of ``.history`` itself) is
  EROFS, logged as a failed tool call; listings and reads are tool events. The change feed's
  ``put``, ``delete`` and ``history`` changes drop what it cached and queue the kernel
  invalidations of its names.
* ``.search/`` (:mod:`memfs.searchfs`): a question as a file name, the store's best hits as
  its content; hidden from the root's listing and read-only like ``.history``. The kernel
  keeps no name or attribute of a question (timeouts 0): each lookup searches again (unless
  the same process looked it up within a second and the mount saw no change since), in a
  worker thread, and is a tool event; the open after it reads that answer.

Known limitations:

* A failed write in one handle discards the whole shared buffer of that file, including
  uncommitted writes made through other descriptors of the same file in this mount.
* Two writers of one file in two different mounts: the last close wins (the store keeps the
  overwritten content in the history).
* The "does the opener still hold it" test at close reads ``/proc``; a process in another PID
  namespace (or a kernel without ``ino:`` in fdinfo) makes every flush commit, which can only
  add versions, never lose one.
* chmod/chown/utimes are accepted and not stored; modes are always 0644 / 0755.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import functools
import logging
import os
import stat
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Concatenate, ParamSpec, TypeVar

import pyfuse3
import trio
from pyfuse3 import FileHandleT, FileNameT, FlagT, FUSEError, InodeT, ModeT, XAttrNameT

from . import errors
from .historyfs import HISTORY, XATTR_REDACTED, History, HNode, version_xattrs
from .models import Actor, Change, Memory
from .protocol import StoreAPI
from .rules import local_user_actor, validate_path
from .searchfs import SEARCH, Answer, Refused, Search, SNode, question_of
from .toolevents import EventSink, WrittenVersion, comm, tool_pair
from .tree import FileState, Node, Tree

log = logging.getLogger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: The one translation of store errors to errno (SPEC §2); the first matching class wins.
ERRNO_BY_ERROR: list[tuple[type[errors.MemfsError], int]] = [
    (errors.NotFound, errno.ENOENT),
    (errors.PathTooLong, errno.ENAMETOOLONG),
    (errors.PathEncoding, errno.EILSEQ),
    (errors.InvalidPath, errno.EINVAL),
    (errors.InvalidContent, errno.EILSEQ),
    (errors.ContentTooLarge, errno.EFBIG),
    (errors.StoreArchived, errno.EROFS),
    (errors.LimitExceeded, errno.ENOSPC),
    (errors.InvalidRequest, errno.EINVAL),
    (errors.DirectoryNotEmpty, errno.ENOTEMPTY),
    (errors.NotADirectory, errno.ENOTDIR),
    (errors.PathConflict, errno.EEXIST),
    (errors.PreconditionFailed, errno.EBUSY),
    (errors.Conflict, errno.EEXIST),
    (errors.ReadOnly, errno.EROFS),
    (errors.Forbidden, errno.EACCES),
    (errors.Busy, errno.EBUSY),
    (errors.StorageFull, errno.ENOSPC),
    (errors.MemfsError, errno.EIO),
]

#: Read-only extended attributes of every committed file.
XATTRS = (b"user.memfs.memory_id", b"user.memfs.memory_version_id", b"user.memfs.content_sha256")

#: The longest file name, in bytes, that the mount accepts (what statfs says).
NAME_MAX = 255

#: Seconds an unlink or rename waits for the database's write lock (and this mount's earlier
#: changes) before it fails with EBUSY: the kernel makes every lookup and listing of its
#: directory wait for it (:meth:`Operations._directory_change`). Closes and fsyncs lock no
#: directory and wait as long as the store does.
DIRECTORY_PATIENCE = 0.5
#: The reason given for that EBUSY.
BUSY_TEXT = "the database stayed locked by another writer; try again"

_BLOCK = 4096
_HISTORY = HISTORY.encode()
_SEARCH = SEARCH.encode()


def errno_for(exc: errors.MemfsError) -> int:
    """The errno that stands for a store error (:data:`ERRNO_BY_ERROR`)."""
    return next(code for cls, code in ERRNO_BY_ERROR if isinstance(exc, cls))


class _Failure(Exception):
    """An expected failure of one handler: the errno, and the line for the event log."""

    def __init__(self, errno_: int, why: str) -> None:
        super().__init__(errno_, why)
        self.errno = errno_
        self.why = why

    @classmethod
    def of(cls, exc: errors.MemfsError) -> _Failure:
        code = errno_for(exc)
        if isinstance(exc, errors.StorageError):
            log.error("the database refused a write: %s", exc.message)
        elif code == errno.EIO:  # not a rule of the store: the database or server failed
            log.warning("answering EIO: %s", exc.message)
        return cls(code, exc.message)

    def text(self) -> str:
        return f"{errno.errorcode.get(self.errno, str(self.errno))}: {self.why}"


def _too_big(size: int, limit: int) -> _Failure:
    return _Failure(errno.EFBIG, f"content would be {size} bytes; the limit is {limit} bytes")


def _resize(buf: bytearray, size: int) -> None:
    """Cut ``buf`` to ``size`` bytes, or extend it with NUL bytes (a hole) to that size."""
    if size < len(buf):
        del buf[size:]
    else:
        buf.extend(b"\0" * (size - len(buf)))


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def utf8_possible(buf: bytes | bytearray, off: int, data: bytes) -> bool:
    """Could ``buf`` with ``data`` written at ``off`` still be completed into UTF-8 text?

    False when the written bytes hold a sequence no later write at the end can mend: a byte
    never used in UTF-8 (``\\xff``), a stray continuation byte, a surrogate, an overlong form,
    a sequence cut short by the next character. A sequence begun by an earlier write (up to
    three bytes back) is decoded with its start, and one left incomplete at the end of the
    file may be finished by the next write.
    """
    start = off
    for back in range(1, 4):
        p = off - back
        if p < 0 or p >= len(buf):
            break
        if not _is_continuation(buf[p]):
            if buf[p] >= 0xC0:
                start = p  # a lead byte whose sequence may continue in ``data``
            break
    end = off + len(data)
    region = bytes(buf[start:off]) + data + bytes(buf[end : end + 3])
    try:
        codecs.getincrementaldecoder("utf-8")("strict").decode(region, final=False)
    except UnicodeDecodeError:
        return False
    return True


def _fds_on(pid: int, mountpoint: str, ino: int) -> int:
    """How many descriptors of process ``pid`` refer to inode ``ino`` of the mount at
    ``mountpoint`` (read from ``/proc/<pid>/fd`` and ``fdinfo``, never through the mount)."""
    prefix = mountpoint.rstrip("/") + "/"
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    n = 0
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if not target.startswith(prefix):
            continue
        try:
            with open(f"/proc/{pid}/fdinfo/{name}", "rb") as f:
                info = f.read()
        except OSError:
            continue
        for line in info.splitlines():
            if line.startswith(b"ino:"):
                if int(line[4:]) == ino:
                    n += 1
                break
        else:
            n += 1  # no ino: in fdinfo (old kernel): count it, the safe side
    return n


#: "." and ".." come first in every listing (readdir offsets 1 and 2).
DOTS = 2


def reply_dots(token: pyfuse3.ReaddirToken, start_id: int,
               *dots: tuple[int, pyfuse3.EntryAttributes]) -> bool:
    """Send a listing's "." and ".." (``dots``: their inode numbers and attributes), those
    from offset ``start_id`` on; False when the kernel's buffer is full. Never a lookup: the
    kernel counts none for them (fuse_direntplus_link skips both names)."""
    for index in range(start_id, DOTS):
        ino, attrs = dots[index]
        assert attrs.st_ino == ino
        if not pyfuse3.readdir_reply(token, FileNameT(b"." * (index + 1)), attrs, index + 1):
            return False
    return True


def invalidate_inodes(inodes: list[int]) -> None:
    for ino in inodes:
        try:
            pyfuse3.invalidate_inode(InodeT(ino))
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOTCONN):
                log.warning("invalidate_inode(%d): %s", ino, e)


def invalidate_now(ino: int, entries: list[tuple[int, str, int]]) -> None:
    """Forget one inode's pages and names, waiting for the kernel (call it in a thread)."""
    for parent, name, deleted in entries:
        try:
            pyfuse3.invalidate_entry(InodeT(parent), FileNameT(name.encode("utf-8")),
                                     deleted=InodeT(deleted))
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOTCONN):
                log.warning("invalidate_entry(%d, %r): %s", parent, name, e)
    invalidate_inodes([ino])


def _handler(fn: Callable[Concatenate[Operations, _P], Coroutine[Any, Any, _R]]
             ) -> Callable[Concatenate[Operations, _P], Coroutine[Any, Any, _R]]:
    """Make a handler keep pyfuse3's contract: only FUSEError leaves it.

    Store errors become their errno; anything else is a bug, logged with its traceback and
    answered with EIO for this call only (an exception escaping into pyfuse3's main loop would
    leave the request unanswered and the mount hung). Kernel invalidations the handler queued
    are sent right after.
    """

    @functools.wraps(fn)
    async def wrapper(ops: Operations, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return await fn(ops, *args, **kwargs)
        except FUSEError:
            raise
        except _Failure as e:
            raise FUSEError(e.errno) from None
        except errors.MemfsError as e:
            raise FUSEError(_Failure.of(e).errno) from None
        except Exception:
            log.exception("bug in %s; answering EIO", fn.__name__)
            raise FUSEError(errno.EIO) from None
        finally:
            ops.kick()

    return wrapper


def actor_for(session_id: str | None) -> Actor:
    """Who a mount's versions are attributed to: the session, else the local user."""
    return Actor.session(session_id) if session_id else local_user_actor()


@dataclass(eq=False)
class _Handle:
    """One open file (or directory) description, with what its event will say."""

    node: Node
    writable: bool
    pid: int
    comm: str
    created: bool = False
    wrote: bool = False
    truncated: bool = False
    #: Changed through this handle (a write, an ftruncate, an O_TRUNC that emptied the file,
    #: a create): its close commits, whoever else holds the file. A handle that changed
    #: nothing commits only as the last writer to close (SPEC §2: the last close wins).
    changed: bool = False
    file_path: str = ""
    failure: _Failure | None = None
    #: A tool event pair was logged for this handle (by a commit at flush or fsync).
    logged: bool = False
    listing: list[Node] | None = None


@dataclass(eq=False)
class _HistoryHandle:
    """An open version file or directory of ``.history`` (read-only)."""

    node: HNode
    pid: int
    comm: str
    data: bytes = b""
    listing: list[HNode] | None = None


@dataclass(eq=False)
class _SearchHandle:
    """An open question file, or ``.search`` itself, being listed (read-only)."""

    node: SNode
    pid: int
    comm: str
    data: bytes = b""


class Operations(pyfuse3.Operations):
    """pyfuse3 request handlers over one store.

    :param store: the store (a local :class:`~memfs.store.Store` or a server's client).
    :param store_id: the store to show.
    :param actor: who the versions are attributed to.
    :param read_only: refuse every change with EROFS.
    :param events: where tool events go (None: not logged).
    :param display_root: the mount path as the agent sees it (event ``file_path`` prefix).
    :param timeout: kernel entry/attribute cache timeout in seconds.
    :param mountpoint: the real mount point, as ``/proc/<pid>/fd`` links show it (None: every
        flush of a written file commits).
    :param owner: the ``(uid, gid)`` every file and directory shows (default: the daemon's).
    :param private: modes 0600/0700 (the owner only: what a mount with ``allow_other`` for
        one agent user shows) instead of 0644/0755. The kernel enforces them
        (``default_permissions``); the access mode of the store is the daemon's to enforce,
        so a read-only store shows the same modes and refuses changes with EROFS itself,
        every refusal logged.
    """

    supports_dot_lookup = True
    enable_writeback_cache = False

    def __init__(
        self,
        store: StoreAPI,
        store_id: str,
        *,
        actor: Actor,
        read_only: bool = False,
        events: EventSink | None = None,
        display_root: str = "/",
        timeout: float = 300.0,
        mountpoint: str | None = None,
        owner: tuple[int, int] | None = None,
        private: bool = False,
    ) -> None:
        super().__init__()
        self.store = store
        self.store_id = store_id
        self.actor = actor
        self.read_only = read_only
        self.events = events
        self.display_root = display_root.rstrip("/")
        self.timeout = timeout
        self.mountpoint = mountpoint
        self.uid, self.gid = owner if owner is not None else (os.getuid(), os.getgid())
        self.dir_mode, self.file_mode = (0o700, 0o600) if private else (0o755, 0o644)
        self.tree = Tree()
        self.root = self.tree.root
        self._handles: dict[int, _Handle] = {}
        self._history_handles: dict[int, _HistoryHandle] = {}
        #: The ``.history`` directory (None: a store that cannot list versions; a snapshot's
        #: lists those up to its boundary, so its ``.history`` ends there).
        self.history: History | None = (
            History(self.tree, store, store_id, self._call, self._in_thread)
            if callable(getattr(store, "list_versions", None)) else None)
        self._search_handles: dict[int, _SearchHandle] = {}
        #: The ``.search`` directory (None: a store that cannot search, as a snapshot's).
        search = getattr(store, "search", None)
        self.search: Search | None = (
            Search(self.tree, search, store_id, self._in_thread, self._display)
            if callable(search) else None)
        #: Names of the root that are not the tree's (hidden from its listing).
        self._reserved = {n for n, on in ((HISTORY, self.history), (SEARCH, self.search))
                          if on is not None}
        self._next_fh = 1
        self._mutex = trio.Lock()
        #: The inode the root's ".." lists (None: the root itself): the directory this tree
        #: is mounted in, when it is one (a session's root, :mod:`memfs.sessionfs`).
        self.root_parent_ino: int | None = None
        #: Called when kernel invalidations are queued (the daemon's invalidator).
        self.on_stale: Callable[[], None] | None = None

    # -- the tree's state, as the daemon and tests see it -------------------------------------

    @property
    def seq(self) -> int:
        return self.tree.seq

    @seq.setter
    def seq(self, value: int) -> None:
        self.tree.seq = value

    @property
    def archived(self) -> bool:
        return self.tree.archived

    @property
    def stale_entries(self) -> list[tuple[int, str, int]]:
        return self.tree.stale_entries

    @property
    def stale_inodes(self) -> list[int]:
        return self.tree.stale_inodes

    def kick(self) -> None:
        """Have the kernel told of queued invalidations now."""
        if self.on_stale is not None and (self.tree.stale_entries or self.tree.stale_inodes):
            self.on_stale()

    # -- loading and the change feed -----------------------------------------------------------

    def load(self) -> None:
        """Read the store's state and its whole tree (no content). Blocking: call it before
        serving."""
        # The feed position first: a change racing the load is applied again, harmlessly.
        seq, tree, archived = self._read_all()
        self.tree.load(tree, seq, archived)

    def _read_all(self) -> tuple[int, list[Memory], bool]:
        """The feed position, then every memory and the archive state (blocking)."""
        seq = self.store.last_change(self.store_id)
        archived = self.store.get_store(self.store_id).archived_at is not None
        return seq, self.store.tree(self.store_id), archived

    def read_changes(
        self,
        changes: Sequence[Change],
        known: Mapping[str, Memory | FileState | None] | None = None,
    ) -> tuple[dict[str, Memory | FileState | None], str | None]:
        """What applying ``changes`` needs from the store (blocking: run it in a thread):
        the current state of each memory a ``put`` names (``known`` ones are not read), and
        the store's state after a ``store`` change (``live``, ``archived`` or ``gone``)."""
        current: dict[str, Memory | FileState | None] = dict(known or {})
        for ch in changes:
            if ch.op == "put" and ch.memory_id is not None and ch.memory_id not in current:
                try:
                    current[ch.memory_id] = self.store.get_memory(
                        self.store_id, ch.memory_id, view="basic"
                    )
                except errors.NotFound:
                    current[ch.memory_id] = None
        state: str | None = None
        if any(ch.op == "store" for ch in changes):
            try:
                archived = self.store.get_store(self.store_id).archived_at is not None
                state = "archived" if archived else "live"
            except errors.NotFound:
                state = "gone"
        return current, state

    def apply_read_changes(
        self, changes: Sequence[Change], current: Mapping[str, Memory | FileState | None],
        store_state: str | None,
    ) -> None:
        """Apply changes with what :meth:`read_changes` returned (on the trio thread). A store
        that is gone empties the mount, which becomes read-only."""
        if store_state is not None:
            self.tree.archived = store_state != "live"
            if store_state == "gone":
                self.tree.delete_all()
        self.tree.apply_changes(changes, current)
        if self.history is not None:
            self.history.apply_changes(changes)
        if self.search is not None and changes:
            self.search.changed()
        self.kick()

    def apply_changes(
        self,
        changes: Sequence[Change],
        known: Mapping[str, Memory | FileState | None] | None = None,
    ) -> None:
        """Bring the tree up to date with changes from the store's feed (blocking version:
        reads the store on this thread). Idempotent."""
        current, state = self.read_changes(changes, known)
        self.apply_read_changes(changes, current, state)

    async def poll_changes(self) -> int:
        """Apply every change made to the store since the tree's position; returns how many.
        When the feed no longer holds that position (pruned), the whole tree is reloaded."""
        try:
            changes = await self._call(self.store.changes_since, self.store_id, self.tree.seq)
        except errors.FeedGap:
            log.info("change feed: position %d was pruned; reloading the tree", self.tree.seq)
            seq, tree, archived = await self._call(self._read_all)
            await self.reload(tree, seq, archived)
            return len(tree)
        if not changes:
            return 0
        async with self._mutex:
            # The states are read under the mutex: no commit of this mount runs meanwhile, so
            # what is read is at least as new as anything this mount holds.
            current, state = await self._call(self.read_changes, changes, self._held(changes))
            self.apply_read_changes(changes, current, state)
        return len(changes)

    def _held(self, changes: Sequence[Change]) -> dict[str, Memory | FileState | None]:
        """The memories whose every ``put`` in ``changes`` this mount's tree holds already
        (its own commits, read back from the feed): the tree skips those puts
        (:meth:`Tree.apply_put`), so they need no read. One store read per close saved."""
        last: dict[str, int] = {}
        for ch in changes:
            if ch.op == "put" and ch.memory_id is not None:
                last[ch.memory_id] = max(ch.seq, last.get(ch.memory_id, 0))
        held: dict[str, Memory | FileState | None] = {}
        for memory_id, seq in last.items():
            node = self.tree.by_memory.get(memory_id)
            if node is not None and node.attached and node.memory is not None \
                    and node.seq >= seq:
                held[memory_id] = node.memory
        return held

    async def apply_feed(self, change: Change, memory: Memory | None) -> None:
        """Apply one change pushed by a server (with the memory as the server sent it)."""
        known = {change.memory_id: memory} if change.op == "put" and change.memory_id else None
        async with self._mutex:
            current, state = await self._call(self.read_changes, [change], known)
            self.apply_read_changes([change], current, state)

    async def reload(self, tree: Sequence[Memory], seq: int, archived: bool) -> None:
        async with self._mutex:
            self.tree.reload(tree, seq, archived)
            if self.history is not None:
                self.history.reset()
            if self.search is not None:
                self.search.changed()
        self.kick()

    def discard_all(self) -> None:
        """At unmount: drop every uncommitted buffer (nothing half-written reaches the store)."""
        for path in self.tree.discard_all():
            log.warning("unmounting with %s unsaved (still open for writing)", path)

    # -- helpers ---------------------------------------------------------------------------

    async def _call(self, fn: Callable[..., _R], *args: Any, **kwargs: Any) -> _R:
        """Run a store call without ever waiting on the trio thread.

        A local store is asked first to do it at once (its ``nowait`` mode: no lock is waited
        for, and a commit with synchronous=NORMAL writes without syncing): most calls finish
        so in less time than a thread handoff takes. One that would wait (another process
        holds the write lock) and every call to a server run in a worker thread, while the
        trio thread keeps serving.
        """
        return await self._call_by(None, fn, *args, **kwargs)

    async def _call_by(self, deadline: float | None, fn: Callable[..., _R], *args: Any,
                       **kwargs: Any) -> _R:
        """:meth:`_call`, waiting for a lock only until ``deadline`` (trio time; None: as long
        as the store waits), then :class:`~memfs.errors.Busy` with nothing changed. A store
        that cannot bound its waits (a server's client) waits as it always does."""
        nowait = getattr(self.store, "nowait", None)
        if nowait is not None:
            try:
                with nowait():
                    return fn(*args, **kwargs)
            except errors.WouldBlock:
                pass
        patience = getattr(self.store, "patience", None)
        if deadline is None or patience is None:
            return await self._in_thread(fn, *args, **kwargs)
        seconds = max(0.0, deadline - trio.current_time())

        def bounded() -> _R:
            with patience(seconds):
                return fn(*args, **kwargs)

        return await self._in_thread(bounded)

    async def _in_thread(self, fn: Callable[..., _R], *args: Any, **kwargs: Any) -> _R:
        """Run a call that may wait (a disk sync, a lock) in a worker thread."""
        return await trio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    def _node(self, inode: int) -> Node:
        node = self.tree.nodes.get(inode)
        if node is None:
            raise FUSEError(errno.ENOENT)
        return node

    def _child(self, parent: Node, name: bytes) -> Node | None:
        if not parent.is_dir or not parent.attached:
            return None
        try:
            s = name.decode("utf-8")
        except UnicodeDecodeError:
            return None
        assert parent.children is not None
        return parent.children.get(s)

    @staticmethod
    def _entry_path(parent: Node, name: bytes) -> str:
        """The path of ``parent``'s entry ``name`` for messages and events: no rule checked
        (a name that is not UTF-8 is shown with replacement characters)."""
        return parent.path.rstrip("/") + "/" + name.decode("utf-8", "replace")

    def _new_path(self, parent: Node, name: bytes) -> str:
        """The memory path of a new entry, checked by the store's path rules.

        :raises _Failure: ENOENT (parent gone), ENAMETOOLONG, or the errno of the broken rule.
        """
        if not parent.is_dir:
            raise _Failure(errno.ENOTDIR, f"{parent.path} is not a directory")
        if not parent.attached:
            raise _Failure(errno.ENOENT, "the directory was removed")
        if len(name) > NAME_MAX:
            raise _Failure(errno.ENAMETOOLONG,
                           f"a file name is at most {NAME_MAX} bytes, not {len(name)}")
        base = parent.path.encode() if parent is not self.root else b""
        try:
            return validate_path(base + b"/" + name, self.store.limits)
        except errors.MemfsError as e:
            raise _Failure.of(e) from None

    def _check_writable(self) -> None:
        if self.read_only:
            raise _Failure(errno.EROFS, "the store is mounted read-only")
        if self.tree.archived:
            raise _Failure(errno.EROFS, "the memory store is archived")

    def _refuse_if_read_only(self, operation: str, path: str,
                             ctx: pyfuse3.RequestContext) -> None:
        """EROFS (the refusal logged as ``operation`` on ``path``) unless the store takes
        changes."""
        try:
            self._check_writable()
        except _Failure as f:
            comm_, pid = self._ctx_name(ctx)
            self._emit(self._pair(comm_, pid, operation, path, failure=f))
            raise FUSEError(f.errno) from None

    def _display(self, path: str) -> str:
        return (self.display_root + path) if path != "/" else (self.display_root or "/")

    def _attrs(self, node: Node) -> pyfuse3.EntryAttributes:
        if node.is_dir:
            # "." and the entry in its parent, plus each subdirectory's "..".
            nlink = 2 + sum(1 for c in (node.children or {}).values() if c.is_dir)
            return self._entry(node.ino, True, nlink, 4096, node.mtime_ns, node.ctime_ns)
        # An unlinked file still open has no name left.
        return self._entry(node.ino, False, 1 if node.attached else 0, node.size,
                           node.mtime_ns, node.ctime_ns)

    def _entry(self, ino: int, is_dir: bool, nlink: int, size: int, mtime_ns: int,
               ctime_ns: int) -> pyfuse3.EntryAttributes:
        """The attributes of a file or directory of this mount (the tree's or ``.history``'s):
        the mount's owner and modes, cached by the kernel for :attr:`timeout`."""
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = InodeT(ino)
        entry.generation = 0
        entry.entry_timeout = self.timeout
        entry.attr_timeout = self.timeout
        mode = (stat.S_IFDIR | self.dir_mode) if is_dir else (stat.S_IFREG | self.file_mode)
        entry.st_mode = ModeT(mode)
        entry.st_nlink = nlink
        entry.st_uid = self.uid
        entry.st_gid = self.gid
        entry.st_rdev = 0
        entry.st_size = size
        entry.st_blksize = _BLOCK
        entry.st_blocks = (size + 511) // 512
        entry.st_atime_ns = mtime_ns
        entry.st_mtime_ns = mtime_ns
        entry.st_ctime_ns = ctime_ns
        return entry

    def _lookup_reply(self, node: Node) -> pyfuse3.EntryAttributes:
        node.lookups += 1
        return self._attrs(node)

    # -- .history (memfs.historyfs): read-only; listings never cached by the kernel ------------

    def _hist(self, inode: int) -> HNode | None:
        return self.history.nodes.get(inode) if self.history is not None else None

    def _history_attrs(self, node: HNode) -> pyfuse3.EntryAttributes:
        # The kernel caches names and attributes as long as the mount's other entries; what
        # changes (a version redacted or pruned, a directory gone with a rename or a redacted
        # deletion) is invalidated by History.apply_changes. Directory listings are never
        # cached (no cache_readdir), so new versions show at once. The mount's own modes, as
        # a read-only store shows them: the kernel lets a change through to the daemon, which
        # refuses it with EROFS and logs the attempt (modes without write bits would have the
        # kernel answer an unprivileged agent EACCES, unlogged).
        return self._entry(node.ino, node.is_dir, 2 if node.is_dir else 1, node.size,
                           node.mtime_ns, node.mtime_ns)

    def _history_reply(self, node: HNode) -> pyfuse3.EntryAttributes:
        node.lookups += 1
        return self._history_attrs(node)

    async def _history_lookup(self, parent: HNode, name: bytes) -> pyfuse3.EntryAttributes:
        assert self.history is not None
        if name == b".":
            return self._history_reply(parent)
        if name == b"..":
            up = self.history.parent_of(parent)
            return self._lookup_reply(self.root) if up is None else self._history_reply(up)
        try:
            s = name.decode("utf-8")
        except UnicodeDecodeError:
            raise FUSEError(errno.ENOENT) from None
        child = await self.history.lookup(parent, s)
        if child is None:
            raise FUSEError(errno.ENOENT)
        return self._history_reply(child)

    def _history_path(self, parent_inode: int, name: bytes | None = None) -> str | None:
        """The path (below the mount root) of ``.history`` or ``.search`` or an entry in them
        that a request would change (None: in neither). Both names in the mount root are
        reserved: they cannot be made, removed or renamed either."""
        vp: HNode | SNode | None = self._hist(parent_inode) or self._srch(parent_inode)
        if vp is not None:
            return vp.display + ("" if name is None else "/" + name.decode("utf-8", "replace"))
        if parent_inode == self.root.ino and name is not None and \
                name.decode("utf-8", "replace") in self._reserved:
            return "/" + name.decode()
        return None

    def _refuse_history(self, operation: str, path: str | None, new_path: str | None = None,
                        *, ctx: pyfuse3.RequestContext) -> None:
        """EROFS for a change under ``.history`` or ``.search`` (``path`` not None), logged
        like the refusals of a read-only mount."""
        if path is None:
            return
        searched = any(p is not None and (p == "/" + SEARCH or p.startswith(f"/{SEARCH}/"))
                       for p in (path, new_path))
        what = "search results" if searched else "the store's history"
        f = _Failure(errno.EROFS, f"{self._display(path)} is read-only ({what})")
        comm_, pid = self._ctx_name(ctx)
        self._emit(self._pair(comm_, pid, operation, path, failure=f, new_path=new_path))
        raise FUSEError(errno.EROFS)

    def _history_saw(self, op: str, memory_id: str, path: str,
                     old_path: str | None = None) -> None:
        """This mount changed a memory: its history and its searches show it at once (not
        only once the change feed brings it back)."""
        if self.search is not None:
            self.search.changed()
        if self.history is not None:
            self.history.apply_changes(
                [Change(self.tree.seq, self.store_id, op, memory_id, path, old_path)])

    def _history_register(self, h: _HistoryHandle) -> FileHandleT:
        fh = self._next_fh
        self._next_fh += 1
        self._history_handles[fh] = h
        h.node.handles += 1
        return FileHandleT(fh)

    def _history_release(self, fh: int) -> None:
        h = self._history_handles.pop(fh)
        h.node.handles -= 1
        path = h.node.display
        if h.listing is None:
            self._emit(self._pair(h.comm, h.pid, "read", path, text=f"read {self._display(path)}"))
        else:
            n = len(h.listing)
            self._emit(self._pair(
                h.comm, h.pid, "list", path,
                text=f"listed {self._display(path)}: {n} entr{'y' if n == 1 else 'ies'}"))
        assert self.history is not None
        self.history.release_if_unused(h.node)

    # -- .search (memfs.searchfs): read-only; the kernel caches no question ---------------------

    def _srch(self, inode: int) -> SNode | None:
        return self.search.nodes.get(inode) if self.search is not None else None

    def _search_attrs(self, node: SNode) -> pyfuse3.EntryAttributes:
        # The mount's own modes, as for .history (a change is refused by the daemon, logged).
        entry = self._entry(node.ino, node.is_dir, 2 if node.is_dir else 1, node.size,
                            node.answer.mtime_ns if node.answer else node.mtime_ns,
                            node.mtime_ns)
        if not node.is_dir:
            # Never cached: every lookup (cat, stat) asks the question again.
            entry.entry_timeout = entry.attr_timeout = 0
            node.told = node.size
        return entry

    def _search_reply(self, node: SNode) -> pyfuse3.EntryAttributes:
        node.lookups += 1
        return self._search_attrs(node)

    async def _search_lookup(self, parent: SNode, name: bytes,
                             ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        if name == b".":
            return self._search_reply(parent)
        if name == b"..":
            return self._lookup_reply(self.root)
        if not parent.is_dir:
            raise FUSEError(errno.ENOTDIR)
        assert self.search is not None
        path = f"/{SEARCH}/{name.decode('utf-8', 'replace')}"
        try:
            node = self.search.file(question_of(name))
            if self.search.reusable(node, ctx.pid) is None:
                await self._ask(node, ctx)
        except Refused as r:
            comm_, pid = self._ctx_name(ctx)
            self._emit(self._pair(comm_, pid, "search", path,
                                  failure=_Failure(r.errno, r.why)))
            raise FUSEError(r.errno) from None
        return self._search_reply(node)

    async def _ask(self, node: SNode, ctx: pyfuse3.RequestContext) -> Answer:
        """Search for the node's question now: a tool event, failed or not."""
        assert self.search is not None and node.question is not None
        comm_, pid = self._ctx_name(ctx)
        try:
            answer = await self.search.ask(node, pid)
        except errors.MemfsError as e:
            self.search.release_if_unused(node)  # a refused question is not kept
            f = _Failure.of(e)
            self._emit(self._pair(comm_, pid, "search", node.display, failure=f))
            raise f from None
        self._emit(self._pair(comm_, pid, "search", node.display,
                              text=answer.summary(node.question)))
        return answer

    async def _search_answer(self, node: SNode, ctx: pyfuse3.RequestContext, *,
                             latest: bool = False) -> Answer:
        """The answer a lookup just gave the kernel (``latest``: the last one, however old),
        else a new one."""
        assert self.search is not None
        found = node.answer if latest else self.search.recent(node)
        return found or await self._ask(node, ctx)

    async def _search_open(self, node: SNode, flags: int,
                           ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        if node.is_dir:
            raise FUSEError(errno.EISDIR)
        if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR) or flags & os.O_TRUNC:
            self._refuse_history("write", node.display, ctx=ctx)
        answer = await self._search_answer(node, ctx)
        comm_, pid = self._ctx_name(ctx)
        fh = self._next_fh
        self._next_fh += 1
        self._search_handles[fh] = _SearchHandle(node, pid, comm_, answer.data)
        node.handles += 1
        # The kernel reads up to the size it was told: an answer of another size (asked again
        # since) is read past it, without the page cache.
        return pyfuse3.FileInfo(fh=FileHandleT(fh), keep_cache=False,
                                direct_io=len(answer.data) != node.told)

    def _search_release(self, fh: int) -> None:
        h = self._search_handles.pop(fh)
        h.node.handles -= 1
        if h.node.is_dir:
            self._emit(self._pair(h.comm, h.pid, "list", h.node.display,
                                  text=f"listed {self._display(h.node.display)}: 0 entries"))
        assert self.search is not None
        self.search.release_if_unused(h.node)

    async def _data(self, node: Node) -> bytes | bytearray:
        """The content this mount shows: the write buffer, else the committed content."""
        if node.buffer is not None:
            return node.buffer
        if node.memory is None:
            return node.content or b""
        if node.content is None or node.content_stale:
            await self._load_content(node)
            if node.buffer is not None:  # a writer came in meanwhile
                return node.buffer
        return node.content or b""

    async def _load_content(self, node: Node) -> None:
        """Read a file's committed content into the cache. A memory deleted meanwhile keeps
        the content an open file had.

        :raises _Failure: ENOENT (gone, and nothing cached), or the store's error.
        """
        assert node.memory is not None
        memory_id = node.memory.id
        try:
            m = await self._call(self.store.get_memory, self.store_id, memory_id)
        except errors.NotFound:
            if node.content is not None:
                node.content_stale = False
                return
            raise _Failure(errno.ENOENT, f"{node.path} was deleted") from None
        except errors.MemfsError as e:
            raise _Failure.of(e) from None
        if node.memory is None or node.memory.id != memory_id:
            return
        if node.content is not None and not node.content_stale:
            return  # a commit of this mount cached newer content meanwhile
        if m.memory_version_id != node.memory.memory_version_id:
            # Changed elsewhere and the feed has not brought it yet: take the new metadata
            # with the new content, and have the kernel refresh its attributes.
            self.tree.set_memory(node, replace(m, content=None), node.seq)
            self.tree.stale_inodes.append(node.ino)
        self.tree.cache_content(node, (m.content or "").encode("utf-8"))

    async def _buffer(self, node: Node) -> bytearray:
        if node.buffer is None:
            data = await self._data(node)
            if node.buffer is None:
                node.buffer = bytearray(data)
        return node.buffer

    async def _events_in_order(self, deadline: float | None = None) -> None:
        """Record the queued events before a write records its own, so that a session's events
        stay in the order they happened (a write's are recorded in its transaction, the others
        in batches). Failing, they stay queued: the write goes on. ``deadline``: as for
        :meth:`_call_by`."""
        if self.events is not None and self.events.pending:
            try:
                await self._call_by(deadline, self.events.flush, wait=False)
            except errors.MemfsError as e:
                log.debug("tool events stay queued: %s", e.message)

    @contextlib.asynccontextmanager
    async def _directory_change(self) -> AsyncIterator[float]:
        """The mutex for a change the kernel makes with its directory locked (unlink, rename):
        every lookup of a name not cached yet and every listing of that directory waits for
        it. So it waits at most :data:`DIRECTORY_PATIENCE` for the mutex and the database
        together (yields the deadline for its store calls, :meth:`_call_by`): a transaction
        of another process that holds the write lock for seconds makes it fail with EBUSY,
        having changed nothing, instead of freezing ``ls`` in that directory meanwhile.

        :raises _Failure: EBUSY, the mutex stayed held (a commit waiting for the database).
        """
        deadline = trio.current_time() + DIRECTORY_PATIENCE
        with trio.move_on_at(deadline) as waiting:
            await self._mutex.acquire()
        if waiting.cancelled_caught:
            log.info("a directory change gave up: an earlier change still waits for the "
                     "database's write lock")
            raise _Failure(errno.EBUSY, BUSY_TEXT)
        try:
            yield deadline
        finally:
            self._mutex.release()

    def _emit(self, events: list[dict[str, Any]] | None) -> None:
        """Record events that no write records (queued for the database)."""
        if self.events is not None and events:
            self.events.emit(events)

    def _logged(self, events: list[dict[str, Any]] | None) -> None:
        """Events the store recorded with their write: the JSON-lines file only."""
        if self.events is not None and events:
            self.events.log(events)

    def _pair(self, name: str, pid: int, operation: str, file_path: str, *,
              failure: _Failure | None = None, text: str = "", memory: WrittenVersion | None = None,
              memory_id: str | None = None, new_path: str | None = None,
              ) -> list[dict[str, Any]] | None:
        """A tool event pair (None when the mount logs no events)."""
        if self.events is None:
            return None
        return tool_pair(
            name, pid, operation, self._display(file_path),
            failure=failure.text() if failure is not None else None, text=text, memory=memory,
            memory_id=memory_id,
            new_path=self._display(new_path) if new_path is not None else None,
        )

    def _ctx_name(self, ctx: pyfuse3.RequestContext) -> tuple[str, int]:
        return comm(ctx.pid), ctx.pid

    async def _invalidate_now(self, node: Node) -> None:
        """Make the kernel forget a node's pages (and its name, if it left the tree) before
        the handler answers: a refused write must not stay visible for a moment."""
        if self.on_stale is None:  # no kernel (unit tests): the queues stay for inspection
            return
        tree = self.tree
        entries = [e for e in tree.stale_entries if e[2] == node.ino]
        tree.stale_entries[:] = [e for e in tree.stale_entries if e[2] != node.ino]
        tree.stale_inodes[:] = [i for i in tree.stale_inodes if i != node.ino]
        await trio.to_thread.run_sync(invalidate_now, node.ino, entries)

    # -- commits ---------------------------------------------------------------------------

    def _still_held(self, h: _Handle) -> bool:
        """Is this flush the close of a copy (a ``dup``, or a child's inherited descriptor),
        while the process that opened the file still holds it?"""
        if self.mountpoint is None:
            return False
        mine = sum(1 for x in self._handles.values() if x.node is h.node and x.pid == h.pid)
        return _fds_on(h.pid, self.mountpoint, h.node.ino) >= mine

    async def _commit(self, node: Node, pair: Callable[[int], list[dict[str, Any]] | None],
                      ) -> Memory | None:
        """Write the node's buffer to the store: one version, or none if unchanged. The tool
        events ``pair(size)`` makes are recorded in the same transaction.

        :returns: the memory; None if there is nothing left to save once the mutex is ours: a
            request that held it meanwhile (an unlink, a rename over the file) removed the file
            here, which drops its unsaved writes (POSIX), or a commit saved it already.
        :raises _Failure: the store refused; nothing was written, the buffer is discarded (the
            file shows its previous version again).
        """
        async with self._mutex:
            path = self._save_path(node)
            if path is None or not node.dirty:
                return None
            await self._events_in_order()
            data = bytes(await self._data(node))
            gen = node.gen
            path = self._save_path(node)
            if path is None:
                return None
            events = pair(len(data))
            try:
                m = await self._call(self.store.write_path, self.store_id, path, data,
                                     actor=self.actor, events=events)
            except errors.MemfsError as e:
                log.info("commit of %s refused: %s", path, e.message)
                self.tree.discard(node)
                failure = _Failure.of(e)
            else:
                self._logged(events)
                if node.attached:
                    self.tree.set_memory(node, m, m.seq)
                else:
                    # Deleted (or its path taken) elsewhere while written here: saved at its
                    # path all the same, it is the file there again.
                    log.info("%s: saved again after a change made elsewhere", path)
                    self.tree.restore(node, m, m.seq)
                self._history_saw("put", m.id, m.path)
                if node.gen == gen:
                    node.dirty = False
                self.tree.cache_content(node, data)
                return m
        # Outside the mutex: the kernel may hold the directory locked for a request (an
        # unlink) that waits for the mutex, and forgetting the name needs that lock.
        await self._invalidate_now(node)
        raise failure

    def _save_path(self, node: Node) -> str | None:
        """Where a file's writes are saved: its path, or the path it had when a change made
        elsewhere took it out of the tree (:attr:`Node.save_at`); None once this mount
        unlinked it or renamed over it (POSIX: its unsaved writes are dropped)."""
        return node.path if node.attached else node.save_at

    def _file_pair(self, h: _Handle, size: int | None = None,
                   memory: WrittenVersion | None = None,
                   failure: _Failure | None = None, removed: bool = False,
                   ) -> list[dict[str, Any]] | None:
        """The event pair of a file's open→close (or of a commit at fsync). ``removed``: its
        writes were dropped, the file unlinked or renamed over by this mount first."""
        op = "create" if h.created else ("write" if h.wrote or h.truncated else "read")
        path = h.file_path
        if failure is not None:
            return self._pair(h.comm, h.pid, op, path, failure=failure)
        if op == "read":
            return self._pair(h.comm, h.pid, op, path, text=f"read {self._display(path)}")
        if size is not None:
            saved = self._save_path(h.node) or h.node.path
            return self._pair(h.comm, h.pid, op, path, memory=memory,
                              text=f"wrote {size} bytes to {self._display(saved)}")
        if removed:
            return self._pair(h.comm, h.pid, op, path,
                              text=f"{self._display(path)} was removed before it was saved")
        return self._pair(h.comm, h.pid, op, path, text=f"{self._display(path)} unchanged",
                          memory=h.node.memory)

    async def _commit_handle(self, h: _Handle) -> None:
        """Commit for a handle, its event pair recorded with the version (or, refused, logged
        with the failure)."""
        try:
            saved = await self._commit(h.node, lambda size: self._file_pair(h, size))
        except _Failure as f:
            h.failure = f
            self._emit(self._file_pair(h, failure=f))
            h.logged = True
            raise
        # Nothing saved (removed here meanwhile, or saved by another close): the event pair is
        # the close's, at release, which tells which.
        h.logged = saved is not None

    async def _refuse(self, h: _Handle) -> None:
        """Close of an open→close in which a write failed: nothing is committed, the file
        shows its previous version, the close fails with the write's error."""
        f = h.failure
        assert f is not None
        node = h.node
        log.info("%s not saved: a write failed (%s)", node.path, f.text())
        self.tree.discard(node)
        await self._invalidate_now(node)
        if not h.logged:
            self._emit(self._file_pair(h, failure=f))
            h.logged = True
        raise f

    # -- handlers: names and attributes -----------------------------------------------------

    @_handler
    async def lookup(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        hp = self._hist(parent_inode)
        if hp is not None:
            return await self._history_lookup(hp, name)
        sp = self._srch(parent_inode)
        if sp is not None:
            return await self._search_lookup(sp, name, ctx)
        parent = self._node(parent_inode)
        if name == b".":
            return self._lookup_reply(parent)
        if name == b"..":
            return self._lookup_reply(parent.parent or self.root)
        if len(name) > NAME_MAX:
            raise FUSEError(errno.ENAMETOOLONG)
        if name == _HISTORY and parent is self.root and self.history is not None:
            # Reserved: a memory under /.history/ is shadowed in the mount (its history is
            # in .history/.history/).
            return self._history_reply(self.history.root)
        if name == _SEARCH and parent is self.root and self.search is not None:
            return self._search_reply(self.search.root)  # reserved too
        child = self._child(parent, name)
        if child is None:
            # ENOENT rather than a negative entry: a file created elsewhere must not stay
            # hidden for `timeout` seconds.
            raise FUSEError(errno.ENOENT)
        return self._lookup_reply(child)

    async def forget(self, inode_list: Sequence[tuple[InodeT, int]]) -> None:
        # forget has no reply to carry an error: a bug here is logged, never raised.
        try:
            for inode, nlookup in inode_list:
                node = self.tree.nodes.get(inode)
                if node is None and self.history is not None:
                    self.history.forget(inode, nlookup)
                if node is None and self.search is not None:
                    self.search.forget(inode, nlookup)
                if node is None or node is self.root:
                    continue
                node.lookups -= nlookup
                self.tree.forget_if_unused(node)
        except Exception:
            log.exception("bug in forget")

    @_handler
    async def getattr(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        hn = self._hist(inode)
        if hn is not None:
            assert self.history is not None
            return self._history_attrs(await self.history.refresh(hn))
        sn = self._srch(inode)
        if sn is not None:
            if not sn.is_dir:
                await self._search_answer(sn, ctx, latest=True)
            return self._search_attrs(sn)
        return self._attrs(self._node(inode))

    @_handler
    async def setattr(
        self,
        inode: InodeT,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: FileHandleT | None,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        hn = self._hist(inode)
        if hn is not None:
            self._refuse_history("truncate" if fields.update_size else "chmod", hn.display, ctx=ctx)
        sn = self._srch(inode)
        if sn is not None:
            self._refuse_history("truncate" if fields.update_size else "chmod", sn.display, ctx=ctx)
        node = self._node(inode)
        changes = [op for op, asked in (
            ("chmod", fields.update_mode), ("chown", fields.update_uid or fields.update_gid),
            ("utimes", fields.update_atime or fields.update_mtime or fields.update_ctime),
        ) if asked]
        if changes:
            # A store that takes no changes refuses these too (the mount has no kernel `ro`,
            # so that every refusal reaches the event log).
            self._refuse_if_read_only(changes[0], node.path, ctx)
        if fields.update_size:
            if node.is_dir:
                raise FUSEError(errno.EISDIR)
            h = self._handles.get(fh) if fh is not None else None
            if h is not None:
                await self._truncate_open(node, attr.st_size, h)
            else:
                await self._truncate_path(node, attr.st_size, ctx)
        # chmod, chown and utimes are accepted and not stored (SPEC §2), so `cp -p`, `touch`
        # and `rsync` work; modes and owners are fixed, times are the store's.
        return self._attrs(node)

    def _check_truncate(self, size: int) -> None:
        """:raises _Failure: EROFS, or EFBIG for a size over the content limit."""
        self._check_writable()
        limit = self.store.limits.max_content_bytes
        if size > limit:
            raise _too_big(size, limit)

    async def _truncate_open(self, node: Node, size: int, h: _Handle) -> None:
        """ftruncate(2): part of the handle's open→close (its event tells a failure)."""
        try:
            self._check_truncate(size)
        except _Failure as f:
            h.failure = f
            raise
        _resize(await self._buffer(node), size)
        node.dirty = h.truncated = h.changed = True
        node.gen += 1
        node.touch()

    async def _truncate_path(self, node: Node, size: int, ctx: pyfuse3.RequestContext) -> None:
        """truncate(2): an event pair of its own. Committed at once, unless the file is open
        for writing: then it changes the shared buffer that the writers' close commits."""
        comm_, pid = self._ctx_name(ctx)
        path = node.path
        try:
            self._check_truncate(size)
        except _Failure as f:
            self._emit(self._pair(comm_, pid, "truncate", path, failure=f))
            raise
        _resize(await self._buffer(node), size)
        node.dirty = True
        node.gen += 1
        node.touch()
        text = f"truncated {self._display(path)} to {size} bytes"
        if self._save_path(node) is None:
            # Unlinked here while still open (truncate(2) of /proc/PID/fd/N): POSIX, the open
            # file changes and nothing is saved.
            self._emit(self._pair(comm_, pid, "truncate", path, text=text))
            return
        if node.writers:
            self._emit(self._pair(comm_, pid, "truncate", path,
                                  text=text + " (saved when the file is closed)"))
            return
        try:
            saved = await self._commit(node, lambda _size: self._pair(comm_, pid, "truncate",
                                                                      path, text=text))
            if saved is None:  # removed here (or saved) while it waited for the mutex
                self._emit(self._pair(comm_, pid, "truncate", path, text=text))
        except _Failure as f:
            self._emit(self._pair(comm_, pid, "truncate", path, failure=f))
            raise
        finally:
            if not node.writers and not node.handles:
                node.buffer = None

    # -- handlers: files --------------------------------------------------------------------

    def _register(self, h: _Handle) -> FileHandleT:
        """Give an open file or directory its handle number; its path is taken now (for the
        event, which names the path at open time)."""
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = h
        h.node.handles += 1
        h.file_path = h.node.path
        return FileHandleT(fh)

    def _open_handle(self, h: _Handle) -> pyfuse3.FileInfo:
        fh = self._register(h)
        if h.writable:
            h.node.writers += 1
        # keep_cache: page caches stay valid across opens; changes made elsewhere reach the
        # kernel through the watcher's invalidate_inode.
        return pyfuse3.FileInfo(fh=fh, keep_cache=True)

    @_handler
    async def open(
        self, inode: InodeT, flags: FlagT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.FileInfo:
        hn = self._hist(inode)
        if hn is not None:
            return await self._history_open(hn, flags, ctx)
        sn = self._srch(inode)
        if sn is not None:
            return await self._search_open(sn, flags, ctx)
        node = self._node(inode)
        if node.is_dir:
            raise FUSEError(errno.EISDIR)
        if not node.attached:
            # The kernel still has a name for a file that is gone (unlinked or refused, and
            # not forgotten yet): ESTALE makes it look the name up again (LOOKUP_REVAL), so
            # `printf … > f` after a refused one creates a new file instead of writing to
            # the dead one.
            raise FUSEError(errno.ESTALE)
        writable = flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR)
        comm_, pid = self._ctx_name(ctx)
        h = _Handle(node, writable, pid, comm_)
        if writable or flags & os.O_TRUNC:
            try:
                self._check_writable()
            except _Failure as f:
                self._emit(self._pair(comm_, pid, "write", node.path, failure=f))
                raise
        if writable and flags & os.O_TRUNC:
            if node.size:
                # Emptying the file is this descriptor's change: saved at its close, whoever
                # else holds the file (an O_TRUNC of an empty file changes nothing).
                node.dirty = h.changed = True
            if node.buffer is None:
                node.buffer = bytearray()
            else:
                del node.buffer[:]  # shared with the other handles open on this file
            node.gen += 1
            h.truncated = True
        elif node.buffer is None and node.memory is not None and (
            node.content is None or node.content_stale
        ):
            # Read the content now: an open file keeps it, whatever happens to the memory.
            await self._load_content(node)
        return self._open_handle(h)

    async def _history_open(self, hn: HNode, flags: int,
                            ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        if hn.is_dir:
            raise FUSEError(errno.EISDIR)
        if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR) or flags & os.O_TRUNC:
            self._refuse_history("write", hn.display, ctx=ctx)
        assert self.history is not None
        comm_, pid = self._ctx_name(ctx)
        data = await self.history.content(hn)
        # No keep_cache: a version redacted since the last open reads empty at once.
        fh = self._history_register(_HistoryHandle(hn, pid, comm_, data=data))
        return pyfuse3.FileInfo(fh=fh, keep_cache=False)

    @_handler
    async def create(
        self,
        parent_inode: InodeT,
        name: FileNameT,
        mode: ModeT,
        flags: FlagT,
        ctx: pyfuse3.RequestContext,
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        self._refuse_history("create", self._history_path(parent_inode, name), ctx=ctx)
        parent = self._node(parent_inode)
        comm_, pid = self._ctx_name(ctx)
        entry = self._entry_path(parent, name)
        try:
            self._check_writable()
            path = self._new_path(parent, name)
            if not stat.S_ISREG(mode) and stat.S_IFMT(mode):
                raise _Failure(errno.EPERM, "only regular files can be stored")
            if self._child(parent, name) is not None:
                raise _Failure(errno.EEXIST, f"{path} exists")
            if len(self.tree.by_memory) + 1 >= self.store.limits.max_memories:
                # Near the limit, ask the store, so that open(O_CREAT) fails at once with
                # ENOSPC (the commit checks again under the write lock). Not otherwise: the
                # kernel holds the directory locked during CREATE, and a wait here (another
                # process's write lock, a hung server) would stall every listing of it.
                try:
                    await self._call(self.store.check_can_create, self.store_id)
                except errors.MemfsError as e:
                    raise _Failure.of(e) from None
                # Checked again: another request may have made the name while we waited.
                path = self._new_path(parent, name)
                if self._child(parent, name) is not None:
                    raise _Failure(errno.EEXIST, f"{path} exists")
        except _Failure as f:
            self._emit(self._pair(comm_, pid, "create", entry, failure=f))
            raise
        node = self.tree.new_file(parent, path.rpartition("/")[2])
        # The new file is this descriptor's change: saved at its close, whoever else opened it.
        h = _Handle(node, True, pid, comm_, created=True, changed=True)
        info = self._open_handle(h)
        return info, self._lookup_reply(node)

    @_handler
    async def read(self, fh: FileHandleT, off: int, size: int) -> bytes:
        hh = self._history_handles.get(fh)
        if hh is not None:
            return hh.data[off : off + size]
        sh = self._search_handles.get(fh)
        if sh is not None:
            return sh.data[off : off + size]
        h = self._handles.get(fh)
        if h is None:
            raise FUSEError(errno.EBADF)
        data = await self._data(h.node)
        return bytes(data[off : off + size])

    @_handler
    async def write(self, fh: FileHandleT, off: int, buf: bytes) -> int:
        h = self._handles.get(fh)
        if h is None:
            raise FUSEError(errno.EBADF)
        node = h.node
        limit = self.store.limits.max_content_bytes
        end = off + len(buf)
        if end > limit:
            h.failure = _too_big(end, limit)
            raise FUSEError(errno.EFBIG)
        data = await self._buffer(node)
        if not utf8_possible(data, off, buf):
            h.failure = _Failure(
                errno.EILSEQ, f"bytes written at offset {off} cannot be part of UTF-8 text")
            raise FUSEError(errno.EILSEQ)
        if off > len(data):
            data.extend(b"\0" * (off - len(data)))
        data[off:end] = buf
        node.dirty = True
        node.gen += 1
        node.touch()
        h.wrote = h.changed = True
        return len(buf)

    @_handler
    async def flush(self, fh: FileHandleT) -> None:
        h = self._handles.get(fh)
        if h is None or not h.writable:
            return
        if self._still_held(h):
            return  # a copy was closed (dup2, or a child): the opener's last close commits
        if h.failure is not None:
            await self._refuse(h)
        node = h.node
        if not h.changed and node.writers > 1:
            return  # nothing written through it: the writes of the others commit at theirs
        if node.dirty and self._save_path(node) is not None:
            await self._commit_handle(h)

    @_handler
    async def fsync(self, fh: FileHandleT, datasync: bool) -> None:
        h = self._handles.get(fh)
        if h is None:
            return
        if h.failure is not None:
            raise h.failure
        if h.node.dirty and self._save_path(h.node) is not None:
            await self._commit_handle(h)
        # The store commits with synchronous=NORMAL: fsync() is where the data must reach
        # the disk, this file's and every earlier commit's.
        await self._in_thread(self.store.sync)

    @_handler
    async def release(self, fh: FileHandleT) -> None:
        if fh in self._history_handles:
            return self._history_release(fh)
        if fh in self._search_handles:
            return self._search_release(fh)
        h = self._handles.pop(fh, None)
        if h is None:
            return
        node = h.node
        node.handles -= 1
        if h.writable:
            node.writers -= 1
        removed = False
        try:
            savable = self._save_path(node) is not None
            if node.writers == 0 and node.dirty and savable and h.failure is None:
                # No flush committed (the opener still held a copy at each close).
                try:
                    await self._commit_handle(h)
                except _Failure as f:
                    # The kernel ignores release() errors: the event log has to tell.
                    log.warning("%s not saved: %s", node.path, f.text())
            removed = node.dirty and self._save_path(node) is None
            if node.writers == 0 and node.dirty and (node.attached or not node.handles):
                # A failed write; or unlinked while open, once nobody holds it any more (until
                # then the data stays readable through the other descriptors, as POSIX says).
                self.tree.discard(node)
            if node.handles == 0 and not node.dirty:
                node.buffer = None
        finally:
            if not h.logged:
                if self.events is not None and h.failure is None and not (
                    h.created or h.wrote or h.truncated
                ):
                    # A read: only what the pair will say is queued (built by the flusher).
                    path = self._display(h.file_path)
                    self.events.emit_pair(h.comm, h.pid, "read", path, text=f"read {path}")
                else:
                    self._emit(self._file_pair(h, failure=h.failure, removed=removed))
            self.tree.forget_if_unused(node)

    # -- handlers: directories ---------------------------------------------------------------

    @_handler
    async def opendir(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> FileHandleT:
        hn = self._hist(inode)
        if hn is not None:
            if not hn.is_dir:
                raise FUSEError(errno.ENOTDIR)
            assert self.history is not None
            comm_, pid = self._ctx_name(ctx)
            entries = await self.history.listing(hn)
            return self._history_register(_HistoryHandle(hn, pid, comm_, listing=entries))
        sn = self._srch(inode)
        if sn is not None:
            if not sn.is_dir:
                raise FUSEError(errno.ENOTDIR)
            comm_, pid = self._ctx_name(ctx)
            fh = self._next_fh
            self._next_fh += 1
            self._search_handles[fh] = _SearchHandle(sn, pid, comm_)
            sn.handles += 1
            return FileHandleT(fh)
        node = self._node(inode)
        if not node.is_dir:
            raise FUSEError(errno.ENOTDIR)
        comm_, pid = self._ctx_name(ctx)
        assert node.children is not None
        # A snapshot, so that readdir offsets stay stable while entries come and go. The
        # root never lists .history nor .search (asked for by name only: `ls -a`, `grep -r`
        # skip them).
        listing = [node.children[k] for k in sorted(node.children)
                   if node is not self.root or k not in self._reserved]
        return self._register(_Handle(node, False, pid, comm_, listing=listing))

    @_handler
    async def readdir(self, fh: FileHandleT, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        # Offsets: 1 after ".", 2 after "..", 2 + n after the listing's n-th entry.
        hh = self._history_handles.get(fh)
        if hh is not None:
            above = self.history.parent_of(hh.node) if self.history is not None else None
            if not self._reply_dots(token, start_id, hh.node.ino,
                                    self.root.ino if above is None else above.ino):
                return
            entries = hh.listing or []
            for index in range(max(0, start_id - DOTS), len(entries)):
                e = entries[index]
                if not pyfuse3.readdir_reply(token, FileNameT(e.name.encode("utf-8")),
                                             self._history_attrs(e), DOTS + index + 1):
                    return
                e.lookups += 1
            return
        sh = self._search_handles.get(fh)
        if sh is not None:
            self._reply_dots(token, start_id, sh.node.ino, self.root.ino)
            return  # no question is listed
        h = self._handles.get(fh)
        if h is None or h.listing is None:
            raise FUSEError(errno.EBADF)
        node = h.node
        up = node.parent.ino if node.parent is not None else (
            self.root_parent_ino or self.root.ino)
        if not self._reply_dots(token, start_id, node.ino, up):
            return
        listing = h.listing
        for index in range(max(0, start_id - DOTS), len(listing)):
            child = listing[index]
            if not child.attached:
                continue
            if not pyfuse3.readdir_reply(
                token, FileNameT(child.name.encode("utf-8")), self._attrs(child),
                DOTS + index + 1,
            ):
                return
            # pyfuse3 answers READDIRPLUS: each entry counts as a lookup in the kernel.
            child.lookups += 1

    def _reply_dots(self, token: pyfuse3.ReaddirToken, start_id: int, ino: int,
                    parent_ino: int) -> bool:
        """Send "." and ".." (those from ``start_id`` on); False when the kernel's buffer is
        full. The kernel takes only their inode numbers and types from a READDIRPLUS reply: it
        caches no attributes for them and counts no lookup, so neither does the mount."""
        if start_id >= DOTS:
            return True
        return reply_dots(token, start_id, (ino, self._dot_attrs(ino)),
                          (parent_ino, self._dot_attrs(parent_ino)))

    def _dot_attrs(self, ino: int) -> pyfuse3.EntryAttributes:
        node = self.tree.nodes.get(ino)
        if node is not None:
            return self._attrs(node)
        hn = self._hist(ino)
        if hn is not None:
            return self._history_attrs(hn)
        sn = self._srch(ino)
        if sn is not None:
            return self._search_attrs(sn)
        return self._entry(ino, True, 2, 4096, 0, 0)  # outside this tree (a session's root)

    @_handler
    async def releasedir(self, fh: FileHandleT) -> None:
        if fh in self._history_handles:
            return self._history_release(fh)
        if fh in self._search_handles:
            return self._search_release(fh)
        h = self._handles.pop(fh, None)
        if h is None:
            return
        h.node.handles -= 1
        if not h.node.handles:
            # Emptied from elsewhere while it was being listed: the prune skipped it then
            # (the kernel sends RELEASEDIR after closedir returns, so this is common).
            self.tree.prune(h.node)
        n = len(h.listing or ())
        self._emit(self._pair(
            h.comm, h.pid, "list", h.file_path,
            text=f"listed {self._display(h.file_path)}: {n} entr{'y' if n == 1 else 'ies'}"))
        self.tree.forget_if_unused(h.node)

    async def fsyncdir(self, fh: FileHandleT, datasync: bool) -> None:
        return None

    @_handler
    async def mkdir(
        self, parent_inode: InodeT, name: FileNameT, mode: ModeT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        self._refuse_history("mkdir", self._history_path(parent_inode, name), ctx=ctx)
        parent = self._node(parent_inode)
        comm_, pid = self._ctx_name(ctx)
        entry = self._entry_path(parent, name)
        try:
            self._check_writable()
            path = self._new_path(parent, name)
            if self._child(parent, name) is not None:
                raise _Failure(errno.EEXIST, f"{path} exists")
        except _Failure as f:
            self._emit(self._pair(comm_, pid, "mkdir", entry, failure=f))
            raise
        node = self.tree.dir_for(path, pin=True)
        self._emit(self._pair(
            comm_, pid, "mkdir", path,
            text=f"created directory {self._display(path)} (kept in this mount until a file "
                 "is written into it)"))
        return self._lookup_reply(node)

    @_handler
    async def rmdir(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        self._refuse_history("rmdir", self._history_path(parent_inode, name), ctx=ctx)
        parent = self._node(parent_inode)
        comm_, pid = self._ctx_name(ctx)
        node = self._child(parent, name)
        entry = self._entry_path(parent, name)
        try:
            self._check_writable()
            if node is None:
                raise _Failure(errno.ENOENT, f"no directory {entry}")
            if not node.is_dir:
                raise _Failure(errno.ENOTDIR, f"{entry} is not a directory")
            if node.children:
                raise _Failure(errno.ENOTEMPTY, f"{entry} is not empty")
        except _Failure as f:
            self._emit(self._pair(comm_, pid, "rmdir", entry, failure=f))
            raise
        self.tree.detach(node, pin_parent=True)
        self._emit(self._pair(comm_, pid, "rmdir", entry,
                              text=f"removed directory {self._display(entry)}"))

    @_handler
    async def unlink(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        self._refuse_history("delete", self._history_path(parent_inode, name), ctx=ctx)
        parent = self._node(parent_inode)
        comm_, pid = self._ctx_name(ctx)
        entry = self._entry_path(parent, name)
        try:
            async with self._directory_change() as deadline:
                self._check_writable()
                node = self._child(parent, name)
                if node is None:
                    raise _Failure(errno.ENOENT, f"no file {entry}")
                if node.is_dir:
                    raise _Failure(errno.EISDIR, f"{entry} is a directory")
                recorded = False
                if node.memory is None:
                    pair = self._pair(comm_, pid, "delete", entry,
                                      text=f"deleted {self._display(entry)} (it was never saved)")
                else:
                    pair = self._pair(comm_, pid, "delete", entry, memory_id=node.memory.id,
                                      text=f"deleted {self._display(entry)}")
                    await self._events_in_order(deadline)
                    try:
                        await self._call_by(deadline, self.store.delete_path, self.store_id,
                                            node.path, actor=self.actor, events=pair)
                        recorded = True
                        self._history_saw("delete", node.memory.id, node.path)
                    except errors.NotFound:
                        pass  # deleted elsewhere meanwhile: the file is gone either way
                    except errors.MemfsError as e:
                        raise _Failure.of(e) from None
                self.tree.detach(node, pin_parent=True)
                (self._logged if recorded else self._emit)(pair)
        except _Failure as f:
            self._emit(self._pair(comm_, pid, "delete", entry, failure=f))
            raise

    @_handler
    async def rename(
        self,
        parent_inode_old: InodeT,
        name_old: FileNameT,
        parent_inode_new: InodeT,
        name_new: FileNameT,
        flags: FlagT,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        if self._history_path(parent_inode_old, name_old) is not None or \
                self._history_path(parent_inode_new, name_new) is not None:
            self._refuse_history("rename", *(
                self._history_path(p, n) or self._entry_path(self._node(p), n)
                for p, n in ((parent_inode_old, name_old), (parent_inode_new, name_new))),
                ctx=ctx)
        old_parent = self._node(parent_inode_old)
        new_parent = self._node(parent_inode_new)
        comm_, pid = self._ctx_name(ctx)
        old_entry = self._entry_path(old_parent, name_old)
        new_entry = self._entry_path(new_parent, name_new)

        def pair(memory: WrittenVersion | None = None) -> list[dict[str, Any]] | None:
            return self._pair(
                comm_, pid, "rename", old_entry, new_path=new_entry, memory=memory,
                text=f"renamed {self._display(old_entry)} to {self._display(new_entry)}")

        try:
            async with self._directory_change() as deadline:
                src = self._child(old_parent, name_old)
                events, recorded = await self._rename(src, old_entry, new_parent, name_new,
                                                      flags, pair, deadline)
        except _Failure as f:
            self._emit(self._pair(comm_, pid, "rename", old_entry, new_path=new_entry,
                                  failure=f))
            raise
        (self._logged if recorded else self._emit)(events)

    async def _rename(
        self, src: Node | None, old_path: str, new_parent: Node, name_new: bytes, flags: int,
        pair: Callable[[WrittenVersion | None], list[dict[str, Any]] | None],
        deadline: float,
    ) -> tuple[list[dict[str, Any]] | None, bool]:
        """Rename under the mutex, waiting for the database until ``deadline``; returns the
        events and whether the store recorded them."""
        self._check_writable()
        if flags & pyfuse3.RENAME_EXCHANGE:
            raise _Failure(errno.EINVAL, "RENAME_EXCHANGE is not supported")
        if src is None:
            raise _Failure(errno.ENOENT, f"no such file {old_path}")
        new_path = self._new_path(new_parent, name_new)
        if new_path == old_path:
            return pair(src.memory), False
        dst = self._child(new_parent, name_new)
        if dst is not None and flags & pyfuse3.RENAME_NOREPLACE:
            raise _Failure(errno.EEXIST, f"{new_path} exists")
        if src.is_dir:
            return await self._rename_dir(src, old_path, new_parent, new_path, dst, pair,
                                          deadline)
        if dst is not None and dst.is_dir:
            raise _Failure(errno.EISDIR, f"{new_path} is a directory")
        events = pair(None)
        gen = src.gen
        await self._events_in_order(deadline)
        try:
            if src.memory is None:
                # Never committed (a new file not closed yet): its content becomes the
                # content at the new path in one write, over the memory there if any.
                data = bytes(await self._data(src))
                moved = await self._call_by(deadline, self.store.write_path, self.store_id,
                                            new_path, data, actor=self.actor, events=events)
                if src.gen == gen:
                    src.dirty = False
            else:
                moved = await self._call_by(
                    deadline, self.store.rename_path, self.store_id, old_path, new_path,
                    actor=self.actor, replace=not flags & pyfuse3.RENAME_NOREPLACE,
                    events=events)
        except errors.MemfsError as e:
            raise _Failure.of(e) from None
        # Whatever holds the new name now (also one made while the store worked) is renamed
        # over: open descriptors keep its content, its unsaved data is never saved.
        dst = self._child(new_parent, name_new)
        if dst is not None and dst is not src:
            dst.dirty = False
            self.tree.detach(dst)
        self.tree.detach(src, pin_parent=True)
        self.tree.place(src, new_parent, new_path.rpartition("/")[2])
        self.tree.set_memory(src, moved, moved.seq)
        self._history_saw("put", moved.id, new_path, old_path)
        return events, True

    async def _rename_dir(
        self, src: Node, old_path: str, new_parent: Node, new_path: str, dst: Node | None,
        pair: Callable[[WrittenVersion | None], list[dict[str, Any]] | None],
        deadline: float,
    ) -> tuple[list[dict[str, Any]] | None, bool]:
        if dst is not None:
            if not dst.is_dir:
                raise _Failure(errno.ENOTDIR, f"{new_path} is not a directory")
            if dst.children:
                raise _Failure(errno.ENOTEMPTY, f"{new_path} is not empty")
        events = pair(None)
        await self._events_in_order(deadline)
        try:
            moved = await self._call_by(
                deadline, self.store.rename_prefix, self.store_id, old_path + "/", new_path + "/",
                actor=self.actor, events=events)
        except errors.MemfsError as e:
            raise _Failure.of(e) from None
        dst = self._child(new_parent, new_path.rpartition("/")[2].encode())
        if dst is not None and dst is not src:
            self.tree.detach(dst)
        self.tree.detach(src, pin_parent=True)
        self.tree.place(src, new_parent, new_path.rpartition("/")[2])
        for m in moved:
            node = self.tree.by_memory.get(m.id)
            if node is not None and node.path == m.path:
                self.tree.set_memory(node, m, m.seq)
            else:
                self.tree.attach_memory(m, m.seq)  # one this mount had not seen yet
        if self.search is not None:
            self.search.changed()
        return events, True

    # -- handlers: refused node types -------------------------------------------------------

    async def symlink(
        self, parent_inode: InodeT, name: FileNameT, target: FileNameT,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        self._refuse_history("symlink", self._history_path(parent_inode, name), ctx=ctx)
        self._refuse_if_read_only(
            "symlink", self._entry_path(self._node(parent_inode), name), ctx)
        raise FUSEError(errno.EPERM)

    async def link(
        self, inode: InodeT, new_parent_inode: InodeT, new_name: FileNameT,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        self._refuse_history("link", self._history_path(new_parent_inode, new_name), ctx=ctx)
        self._refuse_if_read_only(
            "link", self._entry_path(self._node(new_parent_inode), new_name), ctx)
        raise FUSEError(errno.EPERM)

    async def mknod(
        self, parent_inode: InodeT, name: FileNameT, mode: ModeT, rdev: int,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        self._refuse_history("mknod", self._history_path(parent_inode, name), ctx=ctx)
        self._refuse_if_read_only(
            "mknod", self._entry_path(self._node(parent_inode), name), ctx)
        raise FUSEError(errno.EPERM)

    async def readlink(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> FileNameT:
        raise FUSEError(errno.EINVAL)

    # -- handlers: filesystem and xattrs ------------------------------------------------------

    @_handler
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        lim = self.store.limits
        live = await self._call(self.store.count_memories, self.store_id)
        data = pyfuse3.StatvfsData()
        data.f_bsize = data.f_frsize = _BLOCK
        data.f_blocks = lim.max_memories * lim.max_content_bytes // _BLOCK
        used = sum(n.size for n in self.tree.by_memory.values() if n.attached) // _BLOCK
        data.f_bfree = data.f_bavail = max(0, data.f_blocks - used)
        data.f_files = lim.max_memories
        data.f_ffree = data.f_favail = max(0, lim.max_memories - live)
        data.f_namemax = NAME_MAX
        return data

    @_handler
    async def getxattr(
        self, inode: InodeT, name: XAttrNameT, ctx: pyfuse3.RequestContext
    ) -> bytes:
        hn = self._hist(inode)
        if hn is not None:
            assert self.history is not None
            await self.history.refresh(hn)
            value = version_xattrs(hn.version).get(name) if hn.version is not None else None
            if value is None:
                raise FUSEError(pyfuse3.ENOATTR)
            return value
        sn = self._srch(inode)
        if sn is not None:
            value = None
            if not sn.is_dir and name.startswith(b"user.memfs.search."):
                value = (await self._search_answer(sn, ctx, latest=True)).xattrs().get(name)
            if value is None:
                raise FUSEError(pyfuse3.ENOATTR)
            return value
        node = self._node(inode)
        m = node.memory
        if m is not None and not node.is_dir and name == XATTR_REDACTED:
            redacted = self._redacted(m)
            if redacted is not None:
                return redacted
        if m is None or node.is_dir or name not in XATTRS:
            raise FUSEError(pyfuse3.ENOATTR)
        if name == XATTRS[0]:
            return m.id.encode()
        if name == XATTRS[1]:
            return m.memory_version_id.encode()
        return m.content_sha256.encode()

    @_handler
    async def listxattr(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> Sequence[XAttrNameT]:
        hn = self._hist(inode)
        if hn is not None:
            assert self.history is not None
            await self.history.refresh(hn)
            names = version_xattrs(hn.version) if hn.version is not None else {}
            return [XAttrNameT(n) for n in names]
        sn = self._srch(inode)
        if sn is not None:
            if sn.is_dir:
                return []
            answer = await self._search_answer(sn, ctx, latest=True)
            return [XAttrNameT(n) for n in answer.xattrs()]
        node = self._node(inode)
        if node.is_dir or node.memory is None:
            return []
        redacted = [XATTR_REDACTED] if self._redacted(node.memory) is not None else []
        return [XAttrNameT(n) for n in (*XATTRS, *redacted)]

    def _redacted(self, m: FileState) -> bytes | None:
        """When the version a file shows was redacted (a time-travel mount's store knows:
        :meth:`memfs.snapshot.SnapshotStore.redacted_at`, a lookup in memory); None for a
        live store, whose files always show a memory's head, which cannot be redacted."""
        redacted_at = getattr(self.store, "redacted_at", None)
        at = redacted_at(m.memory_version_id) if redacted_at is not None else None
        return at.encode() if at else None

    async def setxattr(
        self, inode: InodeT, name: XAttrNameT, value: bytes, ctx: pyfuse3.RequestContext
    ) -> None:
        hn = self._hist(inode)
        if hn is not None:
            self._refuse_history("setxattr", hn.display, ctx=ctx)
        sn = self._srch(inode)
        if sn is not None:
            self._refuse_history("setxattr", sn.display, ctx=ctx)
        self._refuse_if_read_only("setxattr", self._node(inode).path, ctx)
        # EPERM for ours (read-only facts); ENOTSUP for the rest, which `cp -a` and rsync skip.
        raise FUSEError(errno.EPERM if name in XATTRS else errno.ENOTSUP)

    async def removexattr(
        self, inode: InodeT, name: XAttrNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        hn = self._hist(inode)
        if hn is not None:
            self._refuse_history("removexattr", hn.display, ctx=ctx)
        sn = self._srch(inode)
        if sn is not None:
            self._refuse_history("removexattr", sn.display, ctx=ctx)
        self._refuse_if_read_only("removexattr", self._node(inode).path, ctx)
        raise FUSEError(errno.EPERM if name in XATTRS else errno.ENOTSUP)
