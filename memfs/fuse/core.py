"""What every part of a mount's :class:`~memfs.fuse.ops.Operations` shares: :class:`Mount`, its
state (the tree, the open handles, ``.history``, ``.search`` and ``.describe`` and their handler
objects, the mutex), store calls that never wait on the trio thread, tool events, and
:class:`Attributes`, the entry attributes the kernel is told.

:class:`~memfs.fuse.ops.Operations` is made of parts, each an object it holds and calls by
name: the :class:`Mount` here, which every other part is given;
:class:`~memfs.fuse.feed.Feed` (``ops.feed``: loading the tree, the change feed) and
:class:`~memfs.fuse.buffers.Buffers` (``ops.buffers``: write buffers and commits, renames).
:class:`~memfs.fuse.ops.Operations` itself has the pyfuse3 handlers, and nothing else.
``.history`` and ``.search`` are objects of their own too (:mod:`memfs.fuse.dotdirs`), which the
handlers' dispatch hands their requests; they see the mount only through
:class:`~memfs.fuse.dotdirs.Host`, which :class:`Mount` is.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pyfuse3
import trio
from pyfuse3 import FileHandleT, FUSEError, InodeT, ModeT

from .. import errors
from ..models import Actor, Change, ToolEvents, ToolPair, tool_event_dicts
from ..protocol import DescribeAPI, SearchAPI, StoreAPI
from ..rules import local_user_actor, validate_path
from .describe import Describe
from .dotdirs import DescribeFile, DotDir, HistoryDir, SearchDir
from .history import History
from .kernel import DOTS, NAME_MAX, Failure, invalidate_inodes, invalidate_now, reply_dots
from .search import Search, SessionScope
from .sessionlog import SessionLog, Transcript
from .sessions_dir import SessionsDir
from .spin import Spinner
from .toolevents import EventSink, WrittenVersion, comm, new_tool_pair
from .tree import Node, Tree

log = logging.getLogger(__name__)

_R = TypeVar("_R")


#: Seconds an unlink or rename waits for the database's write lock (and this mount's earlier
#: changes) before it fails with EBUSY: the kernel makes every lookup and listing of its
#: directory wait for it (:meth:`Mount.directory_change`). Closes and fsyncs lock no
#: directory and wait as long as the store does.
DIRECTORY_PATIENCE = 0.5
#: The reason given for that EBUSY.
BUSY_TEXT = "the database stayed locked by another writer; try again"

#: The block size statfs and every file's attributes tell.
BLOCK = 4096


def _fill(entry: pyfuse3.EntryAttributes, ino: int, nlink: int, size: int, mtime_ns: int,
          ctime_ns: int) -> pyfuse3.EntryAttributes:
    """Set in ``entry`` what differs from one file or directory to the next."""
    entry.st_ino = InodeT(ino)
    entry.st_nlink = nlink
    entry.st_size = size
    entry.st_blocks = (size + 511) // 512
    entry.st_atime_ns = entry.st_mtime_ns = mtime_ns
    entry.st_ctime_ns = ctime_ns
    return entry


class Mutex:
    """A :class:`trio.Lock` (fair: first come, first served) whose uncontended ``acquire`` is
    no schedule point. trio's gives up a turn even then, and a turn costs the trio thread a
    pass of its scheduler and a look at the descriptors: about what a whole request costs.
    Every close, unlink and rename takes the mount's mutex, almost always free."""

    def __init__(self) -> None:
        self._lock = trio.Lock()

    async def acquire(self) -> None:
        if not self.acquire_nowait():
            await self._lock.acquire()

    def acquire_nowait(self) -> bool:
        """Take it if it is free and nobody waits for it; False otherwise."""
        try:
            self._lock.acquire_nowait()  # WouldBlock while held, or while others wait for it
        except trio.WouldBlock:
            return False
        return True

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()


class DirectoryChange:
    """:meth:`Mount.directory_change`: the mutex, taken for an unlink or a rename, waited for
    until a deadline. A class, not an ``asynccontextmanager``: that one's generator and the
    calls through it cost an unlink or a rename about 1.7 µs more (issue 45)."""

    __slots__ = ("_mutex",)

    def __init__(self, mutex: Mutex) -> None:
        self._mutex = mutex

    async def __aenter__(self) -> float:
        deadline = trio.current_time() + DIRECTORY_PATIENCE
        # The mutex is almost always free: then no cancel scope (about 6 µs of each unlink
        # and rename, issue 45), as taking it free is no schedule point either way.
        if not self._mutex.acquire_nowait():
            with trio.move_on_at(deadline) as waiting:
                await self._mutex.acquire()
            if waiting.cancelled_caught:
                log.info("a directory change gave up: an earlier change still waits for the "
                         "database's write lock")
                raise Failure(errno.EBUSY, BUSY_TEXT)
        return deadline

    async def __aexit__(self, *exc: object) -> None:
        self._mutex.release()


def actor_for(session_id: str | None) -> Actor:
    """Who a mount's versions are attributed to: the session, else the local user."""
    return Actor.session(session_id) if session_id else local_user_actor()


def _session_scope(store: StoreAPI, actor: Actor) -> SessionScope | None:
    """What ``.search/@session`` of a mount acting as a session asks: the session's stores
    (:meth:`memfs.store.Store.search.in_session`) and their mount paths (None: the mount acts
    as no session)."""
    if actor.type != "session_actor" or not isinstance(store, SearchAPI):
        return None
    session_id = actor.id

    def mounts() -> dict[str, str]:
        return {r.memory_store_id: r.mount_path
                for r in store.sessions.get(session_id).resources}

    return SessionScope(functools.partial(store.search.in_session, session_id), mounts)


@dataclass(eq=False)
class Handle:
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
    failure: Failure | None = None
    #: A tool event pair was logged for this handle (by a commit at flush or fsync).
    logged: bool = False
    listing: list[Node] | None = None


class Attributes:
    """The attributes the kernel is told of this mount's files and directories: the mount's
    owner and modes, cached by the kernel for ``timeout`` seconds."""

    def __init__(self, timeout: float, uid: int, gid: int, dir_mode: int,
                 file_mode: int) -> None:
        self.timeout = timeout
        self.uid, self.gid = uid, gid
        self.dir_mode, self.file_mode = dir_mode, file_mode
        #: What a listing's entries are put in (:meth:`put`): one object for a file, one for
        #: a directory and one for an unsaved file (whose attributes the kernel must not keep:
        #: see :meth:`of`), reused for every entry of every listing
        #: (``pyfuse3.readdir_reply`` copies them at once). The kernel asks for every entry's
        #: attributes at each listing (READDIRPLUS), and building a new object for each was
        #: most of what a listing cost the daemon; keeping one per node would cost 3 MB for a
        #: session's 16,000 files. Never for a reply made after an ``await``.
        unsaved = self.blank(False)
        unsaved.attr_timeout = 0
        self.reused = (self.blank(False), self.blank(True), unsaved)

    def of(self, node: Node) -> pyfuse3.EntryAttributes:
        """A node's attributes, in an object of their own."""
        entry = self.put(node, self.blank(node.is_dir))
        if node.dirty or node.scratch is not None:
            # An unsaved file's times are its last write's until its close saves it; then
            # they are the saved version's (its updated_at). The kernel must ask again then,
            # not keep what it is told now. (A create's reply is kept: see ``create``.) A
            # scratch file is never saved: the mount's word on it is always the latest.
            entry.attr_timeout = 0
        return entry

    @staticmethod
    def put(node: Node, entry: pyfuse3.EntryAttributes) -> pyfuse3.EntryAttributes:
        """Set in ``entry`` what the kernel is told of ``node`` that differs from one node
        to the next."""
        if node.is_dir:
            # "." and the entry in its parent, plus each subdirectory's "..".
            return _fill(entry, node.ino, 2 + node.subdirs, 4096, node.mtime_ns, node.ctime_ns)
        # An unlinked file still open has no name left.
        return _fill(entry, node.ino, 1 if node.attached else 0, node.size, node.mtime_ns,
                     node.ctime_ns)

    def blank(self, is_dir: bool) -> pyfuse3.EntryAttributes:
        """New attributes with what every file (or directory) of this mount shares: the
        mount's owner and modes, cached by the kernel for :attr:`timeout`."""
        entry = pyfuse3.EntryAttributes()
        entry.generation = 0
        entry.entry_timeout = self.timeout
        entry.attr_timeout = self.timeout
        mode = (stat.S_IFDIR | self.dir_mode) if is_dir else (stat.S_IFREG | self.file_mode)
        entry.st_mode = ModeT(mode)
        entry.st_uid = self.uid
        entry.st_gid = self.gid
        entry.st_rdev = 0
        entry.st_blksize = BLOCK
        return entry


class Mount:
    """The state of one mount and the helpers every part of :class:`~memfs.fuse.ops.Operations`
    uses (its parameters are those of :class:`~memfs.fuse.ops.Operations`). It is the
    :class:`~memfs.fuse.dotdirs.Host` of ``.history`` and ``.search``."""

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
        transcript: Transcript | None = None,
    ) -> None:
        self.store = store
        self.store_id = store_id
        self.actor = actor
        self.read_only = read_only
        self.events = events
        self.display_root = display_root.rstrip("/")
        self.timeout = timeout
        self.mountpoint = mountpoint
        uid, gid = owner if owner is not None else (os.getuid(), os.getgid())
        #: The attributes the kernel is told.
        self.attrs = Attributes(timeout, uid, gid, *((0o700, 0o600) if private
                                                     else (0o755, 0o644)))
        self.tree = Tree()
        self.root = self.tree.root
        #: The open files and listings of the tree, by file handle number.
        self.handles: dict[int, Handle] = {}
        #: The ``.history`` directory (a snapshot's store lists the versions up to its
        #: boundary, so its ``.history`` ends there).
        self.history: History = History(self.tree, store, store_id, self.call,
                                        self.in_thread)
        #: The ``.search`` directory (None: a store that cannot search, as a snapshot's).
        self.search: Search | None = (
            Search(self.tree, store.search.in_store, store_id, self.in_thread, self.display,
                   _session_scope(store, actor))
            if isinstance(store, SearchAPI) else None)
        #: The ``.describe`` file (None: a store that does not describe, as a snapshot's).
        self.describe: Describe | None = (
            Describe(self.tree, store.typed.describe, store_id, self.call)
            if isinstance(store, DescribeAPI) else None)
        #: The ``.sessions`` directory (None: not a live store, as a snapshot's).
        self.session_log: SessionLog | None = (
            SessionLog(self.tree, store, store_id, self.in_thread,
                       actor.id if actor.type == "session_actor" else None, transcript)
            if isinstance(store, DescribeAPI) else None)
        #: Their handler objects, which the handlers' dispatch hands their requests
        #: (:mod:`memfs.fuse.dotdirs`).
        self.dotdirs: tuple[DotDir[Any], ...] = (
            HistoryDir(self, self.history),
            *((SearchDir(self, self.search),) if self.search is not None else ()),
            *((DescribeFile(self, self.describe),) if self.describe is not None else ()),
            *((SessionsDir(self, self.session_log),) if self.session_log is not None else ()))
        #: Names of the root that are not the tree's (hidden from its listing).
        self.reserved = {d.name for d in self.dotdirs}
        self._reserved_names = frozenset(n.encode() for n in self.reserved)
        self._next_fh = 1
        #: Taken by every change to the store (commits, unlink, rename) and by the change
        #: feed's application, so that the tree changes in the order the store did.
        self.mutex = Mutex()
        #: Why the store's database was last found down (a store call failed with a
        #: StorageError), until a call succeeds again; None while it answers.
        self.outage: str | None = None
        #: The inode the root's ".." lists (None: the root itself): the directory this tree
        #: is mounted in, when it is one (a session's root, :mod:`memfs.daemons.sessionfs`).
        self.root_parent_ino: int | None = None
        #: Called when kernel invalidations are queued (the daemon's invalidator).
        self.on_stale: Callable[[], None] | None = None
        #: Told of every request (the daemon's; None: no kernel, as in unit tests).
        self.spinner: Spinner | None = None

    @property
    def root_ino(self) -> int:
        return self.root.ino

    def kick(self) -> None:
        """Have the kernel told of queued invalidations now."""
        if self.on_stale is not None and (self.tree.stale_entries or self.tree.stale_inodes):
            self.on_stale()

    # -- store calls -----------------------------------------------------------------------

    async def call(self, fn: Callable[..., _R], *args: Any, **kwargs: Any) -> _R:
        """Run a store call without ever waiting on the trio thread.

        A local store is asked first to do it at once (its ``nowait`` mode: no lock is waited
        for, and a commit with synchronous=NORMAL writes without syncing): most calls finish
        so in less time than a thread handoff takes. One that would wait (another process
        holds the write lock) and every call to a server run in a worker thread, while the
        trio thread keeps serving.
        """
        return await self.call_by(None, fn, *args, **kwargs)

    async def call_by(self, deadline: float | None, fn: Callable[..., _R], *args: Any,
                      **kwargs: Any) -> _R:
        """:meth:`call`, waiting for a lock only until ``deadline`` (trio time; None: as long
        as the store waits), then :class:`~memfs.errors.Busy` with nothing changed. A store
        that cannot bound its waits (a server's client) waits as it always does."""
        try:
            result = await self._store_call(deadline, fn, *args, **kwargs)
        except errors.StorageError as e:
            self.outage = e.message
            raise
        self.outage = None
        return result

    async def _store_call(self, deadline: float | None, fn: Callable[..., _R], *args: Any,
                          **kwargs: Any) -> _R:
        nowait = getattr(self.store, "nowait", None)
        if nowait is not None:
            try:
                with nowait():
                    return fn(*args, **kwargs)
            except errors.WouldBlock:
                pass
        patience = getattr(self.store, "patience", None)
        if deadline is None or patience is None:
            return await self.in_thread(fn, *args, **kwargs)
        seconds = max(0.0, deadline - trio.current_time())

        def bounded() -> _R:
            with patience(seconds):
                return fn(*args, **kwargs)

        return await self.in_thread(bounded)

    async def check_backend(self) -> None:
        """Before a file is opened for writing: while the store's database is known to be
        down (:attr:`outage`), ask it once whether it is back (a cheap read), and fail with
        its error (EIO) if not. A shell's ``echo x > f`` ignores the error of its close, so
        the write would be lost with exit status 0; the open's error it reports."""
        if self.outage is None:
            return
        try:
            await self.call(self.store.feed.last, self.store_id)
        except errors.MemfsError as e:
            raise Failure.of(e) from None

    async def in_thread(self, fn: Callable[..., _R], *args: Any, **kwargs: Any) -> _R:
        """Run a call that may wait (a disk sync, a lock) in a worker thread."""
        return await trio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    def stop_waiting(self) -> None:
        """At a stop signal's end of grace: the store's calls waiting for a lock (a close
        waiting for another process's write lock, in a worker thread that no cancellation
        reaches) give up, having changed nothing, so that the unmount follows."""
        stop = getattr(self.store, "stop_waiting", None)
        if stop is not None:
            stop()

    # -- the tree --------------------------------------------------------------------------

    def new_fh(self) -> FileHandleT:
        """A new file handle number (one counter for the tree's and the dot directories')."""
        fh = self._next_fh
        self._next_fh += 1
        return FileHandleT(fh)

    # -- the dispatch's first question (memfs.fuse.dotdirs): the tree's request for sure? ----
    # Exact: the tree and the dot directories number their nodes from one counter
    # (Tree.new_ino) and their handles from another (new_fh), never twice, and no node of
    # theirs is ever in the tree's table.

    def tree_owns(self, inode: int) -> bool:
        """Is ``inode`` a node of the tree (so none of a dot directory's)?"""
        return inode in self.tree.nodes

    def tree_owns_handle(self, fh: int) -> bool:
        """Is ``fh`` an open file or listing of the tree's?"""
        return fh in self.handles

    def tree_owns_entry(self, parent_inode: int, name: bytes) -> bool:
        """Is ``name`` in ``parent_inode`` the tree's: its parent a directory of the tree, and
        not a dot directory's own name in the mount root?"""
        return parent_inode in self.tree.nodes and (
            parent_inode != self.root.ino or name not in self._reserved_names)

    def node(self, inode: int) -> Node:
        node = self.tree.nodes.get(inode)
        if node is None:
            raise FUSEError(errno.ENOENT)
        return node

    def child(self, parent: Node, name: bytes) -> Node | None:
        if not parent.is_dir or not parent.attached:
            return None
        try:
            s = name.decode("utf-8")
        except UnicodeDecodeError:
            return None
        assert parent.children is not None
        return parent.children.get(s)

    @staticmethod
    def entry_path(parent: Node, name: bytes) -> str:
        """The path of ``parent``'s entry ``name`` for messages and events: no rule checked
        (a name that is not UTF-8 is shown with replacement characters)."""
        return parent.path.rstrip("/") + "/" + name.decode("utf-8", "replace")

    def new_path(self, parent: Node, name: bytes) -> str:
        """The memory path of a new entry, checked by the store's path rules.

        :raises Failure: ENOENT (parent gone), ENAMETOOLONG, or the errno of the broken rule.
        """
        if not parent.is_dir:
            raise Failure(errno.ENOTDIR, f"{parent.path} is not a directory")
        if not parent.attached:
            raise Failure(errno.ENOENT, "the directory was removed")
        if len(name) > NAME_MAX:
            raise Failure(errno.ENAMETOOLONG,
                           f"a file name is at most {NAME_MAX} bytes, not {len(name)}")
        base = parent.path.encode() if parent is not self.root else b""
        try:
            return validate_path(base + b"/" + name, self.store.limits)
        except errors.MemfsError as e:
            raise Failure.of(e) from None

    def change_path(self, parent_inode: int, name: bytes) -> str:
        """The path (below the mount root) of the entry a change names: in ``.history`` or
        ``.search``, or the tree's.

        :raises FUSEError: ENOENT, ``parent_inode`` is no directory of the mount.
        """
        return self.dot_path(parent_inode, name) or self.entry_path(self.node(parent_inode),
                                                                    name)

    def dot_path(self, parent_inode: int, name: bytes | None = None) -> str | None:
        """The path (below the mount root) of ``.history`` or ``.search`` or an entry in them
        that a request would change (None: in neither)."""
        return next((p for d in self.dotdirs if (p := d.path_of(parent_inode, name))), None)

    def check_writable(self) -> None:
        if self.read_only:
            raise Failure(errno.EROFS, "the store is mounted read-only")
        if self.tree.archived:
            raise Failure(errno.EROFS, "the memory store is archived")

    def refuse_if_read_only(self, operation: str, path: str,
                            ctx: pyfuse3.RequestContext) -> None:
        """EROFS (the refusal logged as ``operation`` on ``path``) unless the store takes
        changes."""
        try:
            self.check_writable()
        except Failure as f:
            comm_, pid = self.ctx_name(ctx)
            self.emit(self.pair(comm_, pid, operation, path, failure=f))
            raise FUSEError(f.errno) from None

    def history_saw(self, op: str, memory_id: str, path: str,
                    old_path: str | None = None) -> None:
        """This mount changed a memory: its history and its searches show it at once (not
        only once the change feed brings it back)."""
        if self.search is not None:
            self.search.changed()
        if self.history is not None:
            self.history.apply_changes(
                [Change(self.tree.seq, self.store_id, op, memory_id, path, old_path)])

    # -- entry attributes ------------------------------------------------------------------

    def entry(self, ino: int, is_dir: bool, nlink: int, size: int, mtime_ns: int,
              ctime_ns: int) -> pyfuse3.EntryAttributes:
        """The attributes of a file or directory of this mount that is no node of the tree
        (``.history``'s, ``.search``'s, a session's root)."""
        return _fill(self.attrs.blank(is_dir), ino, nlink, size, mtime_ns, ctime_ns)

    def lookup_reply(self, node: Node) -> pyfuse3.EntryAttributes:
        node.lookups += 1
        return self.attrs.of(node)

    def root_reply(self) -> pyfuse3.EntryAttributes:
        """The reply to a lookup of the mount root (a ".." leaving ``.history``)."""
        return self.lookup_reply(self.root)

    def reply_dots(self, token: pyfuse3.ReaddirToken, start_id: int, ino: int,
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
            return self.attrs.of(node)
        for d in self.dotdirs:
            attrs = d.attrs_of(ino)
            if attrs is not None:
                return attrs
        return self.entry(ino, True, 2, 4096, 0, 0)  # outside this tree (a session's root)

    # -- changes ---------------------------------------------------------------------------

    async def events_in_order(self, deadline: float | None = None) -> None:
        """Record the queued events before a write records its own, so that a session's events
        stay in the order they happened (a write's are recorded in its transaction, the others
        in batches). Failing, they stay queued: the write goes on. ``deadline``: as for
        :meth:`call_by`."""
        if self.events is not None and self.events.pending:
            try:
                await self.call_by(deadline, self.events.flush, wait=False)
            except errors.MemfsError as e:
                log.debug("tool events stay queued: %s", e.message)

    def directory_change(self) -> DirectoryChange:
        """The mutex for a change the kernel makes with its directory locked (unlink, rename):
        every lookup of a name not cached yet and every listing of that directory waits for
        it. So it waits at most :data:`DIRECTORY_PATIENCE` for the mutex and the database
        together (``async with`` yields the deadline for its store calls, :meth:`call_by`): a
        transaction of another process that holds the write lock for seconds makes it fail
        with EBUSY, having changed nothing, instead of freezing ``ls`` in that directory
        meanwhile.

        :raises Failure: EBUSY (entering it), the mutex stayed held (a commit waiting for the
            database).
        """
        return DirectoryChange(self.mutex)

    # -- tool events -----------------------------------------------------------------------

    def display(self, path: str) -> str:
        """A path below the mount root as the agent sees it (the mount path before it)."""
        return (self.display_root + path) if path != "/" else (self.display_root or "/")

    def emit(self, events: ToolEvents) -> None:
        """Record events that no write records (queued for the database)."""
        if self.events is not None and events:
            self.events.emit(tool_event_dicts(events) or [])

    def logged(self, events: ToolEvents) -> None:
        """Events the store recorded with their write: the JSON-lines file only."""
        if self.events is not None and events:
            self.events.log(events)

    def pair(self, name: str, pid: int, operation: str, file_path: str, *,
             failure: Failure | None = None, text: str = "", memory: WrittenVersion | None = None,
             memory_id: str | None = None, new_path: str | None = None,
             ) -> ToolPair | None:
        """A tool event pair (None when the mount logs no events), for ``events=`` of a write
        or :meth:`emit`."""
        if self.events is None:
            return None
        return new_tool_pair(
            name, pid, operation, self.display(file_path),
            failure=failure.text() if failure is not None else None, text=text, memory=memory,
            memory_id=memory_id,
            new_path=self.display(new_path) if new_path is not None else None,
        )

    @staticmethod
    def ctx_name(ctx: pyfuse3.RequestContext) -> tuple[str, int]:
        """The name and pid of the process that made a request."""
        return comm(ctx.pid), ctx.pid

    # -- the kernel's caches ---------------------------------------------------------------

    def forget_attrs(self, node: Node) -> None:
        """Make the kernel forget a node's attributes (not its pages) before the handler
        answers. At once, on the trio thread: with no writeback cache this waits for nothing
        in the kernel (no page, no request), unlike :meth:`invalidate_now`."""
        if self.on_stale is not None:  # no kernel (unit tests) otherwise
            invalidate_inodes([node.ino], attr_only=True)

    async def invalidate_now(self, node: Node) -> None:
        """Make the kernel forget a node's pages (and its name, if it left the tree) before
        the handler answers: a refused write must not stay visible for a moment."""
        if self.on_stale is None:  # no kernel (unit tests): the queues stay for inspection
            return
        tree = self.tree
        entries = [e for e in tree.stale_entries if e[2] == node.ino]
        tree.stale_entries[:] = [e for e in tree.stale_entries if e[2] != node.ino]
        tree.stale_inodes[:] = [i for i in tree.stale_inodes if i != node.ino]
        # Abandoned if cancelled (a stop whose grace ran out): the kernel may hold it until a
        # request is answered that nobody reads any more.
        await trio.to_thread.run_sync(invalidate_now, node.ino, entries, abandon_on_cancel=True)
