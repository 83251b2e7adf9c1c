"""``.history``, ``.search`` and ``.describe`` as a mount shows them: each its own handler
object, and the dispatch that hands it the requests about it, once per request.

:class:`HistoryDir` (``.history/``, over :class:`~memfs.fuse.history.History`),
:class:`SearchDir` (``.search/``, over :class:`~memfs.fuse.search.Search`) and
:class:`DescribeFile` (``.describe``, a file, over :class:`~memfs.fuse.describe.Describe`) have
the handlers of :class:`~memfs.fuse.ops.Operations`, with the same names and arguments, for
what is theirs.
Which object answers a request is decided once, before any handler runs, by the decorators of
the handlers in :mod:`memfs.fuse.ops`: :func:`by_inode` (the inode a request is about),
:func:`by_handle` (an open file or listing) and :func:`by_entry` (a name in a directory: one of
theirs, or their own name in the mount root). What no directory here claims goes to the tree's
handler; so the tree's handlers never see a node of ``.history``, ``.search`` or ``.describe``.

Their nodes are not the tree's: their inodes come from the tree's allocator, their file handles
from the mount's counter (:meth:`Host.new_fh`). All are hidden from the root's listing (a
lookup by name finds them, and shadows a memory ``/.history/...``, ``/.search/...`` or
``/.describe`` made through the API). All are read-only: every change under them (or of them)
is EROFS, logged as a failed tool call, like the refusals of a read-only mount. Listings,
reads and searches are tool events.

- ``.history/``: every retained version as a read-only file under its memory's final path.
  The change feed's ``put``, ``delete`` and ``history`` changes drop what it cached and queue
  the kernel invalidations of its names (:meth:`History.apply_changes`); its listings are never
  cached by the kernel, so new versions show at once.
- ``.search/``: a question as a file name, the store's best hits as its content. The kernel
  keeps no name or attribute of a question (timeouts 0): each lookup searches again (unless
  the same process looked it up within a second and the mount saw no change since), in a
  worker thread, and is a tool event; the open after it reads that answer.
- ``.describe``: the store's description, read from the store at each open (a ``read`` tool
  event at its close); the kernel keeps no name, attribute or page of it.
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, NoReturn, Protocol, TypeVar, cast

import pyfuse3
from pyfuse3 import FileHandleT, FileNameT, FUSEError, XAttrNameT

from .. import errors
from ..models import ToolEvents, ToolPair
from .describe import DESCRIBE, Describe, DNode
from .history import HISTORY, History, HNode, version_xattrs
from .kernel import DOTS, Failure
from .search import SEARCH, Answer, Refused, Search, SNode
from .sessionlog import SESSIONS


class Host(Protocol):
    """What ``.history`` and ``.search`` need of the mount they are in (the mount's
    :class:`~memfs.fuse.core.Mount` is one): all they know of it."""

    @property
    def root_ino(self) -> int:
        """The mount root's inode (the parent of both, and their ".."'s)."""
        ...

    def new_fh(self) -> FileHandleT:
        """A file handle number (the mount's counter: its own handles' and theirs)."""
        ...

    def entry(self, ino: int, is_dir: bool, nlink: int, size: int, mtime_ns: int,
              ctime_ns: int) -> pyfuse3.EntryAttributes:
        """The attributes of one of their nodes, with the mount's owner, modes and timeouts."""
        ...

    def root_reply(self) -> pyfuse3.EntryAttributes:
        """The reply to a lookup of the mount root (their "..")."""
        ...

    def reply_dots(self, token: pyfuse3.ReaddirToken, start_id: int, ino: int,
                   parent_ino: int) -> bool:
        """Send a listing's "." and ".."; False when the kernel's buffer is full."""
        ...

    def change_path(self, parent_inode: int, name: bytes) -> str:
        """The path of an entry a change names (theirs, or the tree's), for its event."""
        ...

    def display(self, path: str) -> str:
        """A path as the agent sees it (the mount path before it)."""
        ...

    def ctx_name(self, ctx: pyfuse3.RequestContext) -> tuple[str, int]:
        """The name and pid of the process that made a request."""
        ...

    def pair(self, name: str, pid: int, operation: str, file_path: str, *,
             failure: Failure | None = None, text: str = "",
             new_path: str | None = None) -> ToolPair | None:
        """A tool event pair (None: the mount logs no events)."""
        ...

    def emit(self, events: ToolEvents) -> None:
        """Record tool events."""
        ...


class _TreeSide(Protocol):
    """What the dispatch asks the mount (:class:`~memfs.fuse.core.Mount`) first: is a
    request the tree's for sure? Almost every one is, and then no directory object is asked."""

    def tree_owns(self, inode: int) -> bool: ...

    def tree_owns_handle(self, fh: int) -> bool: ...

    def tree_owns_entry(self, parent_inode: int, name: bytes) -> bool: ...


class _Dispatching(Protocol):
    """The handlers' object (:class:`~memfs.fuse.ops.Operations`), as the dispatch sees it."""

    @property
    def dotdirs(self) -> tuple[DotDir[Any], ...]: ...

    @property
    def mount(self) -> _TreeSide: ...


class _Node(Protocol):
    @property
    def ino(self) -> int: ...

    @property
    def display(self) -> str: ...


_N = TypeVar("_N", bound=_Node)
_F = TypeVar("_F", bound=Callable[..., Coroutine[Any, Any, Any]])


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


def refuse(mount: Host, operation: str, path: str, new_path: str | None = None, *,
           ctx: pyfuse3.RequestContext) -> NoReturn:
    """EROFS for a change under ``.history``, ``.search``, ``.describe`` or ``.sessions``
    (``path``, or the other side of a rename, ``new_path``), logged like the refusals of a
    read-only mount."""
    def under(name: str) -> bool:
        return any(p is not None and (p == "/" + name or p.startswith(f"/{name}/"))
                   for p in (path, new_path))

    what = ("search results" if under(SEARCH) else "the store's description"
            if under(DESCRIBE) else "the sessions' transcripts" if under(SESSIONS)
            else "the store's history")
    f = Failure(errno.EROFS, f"{mount.display(path)} is read-only ({what})")
    comm_, pid = mount.ctx_name(ctx)
    mount.emit(mount.pair(comm_, pid, operation, path, failure=f, new_path=new_path))
    raise FUSEError(errno.EROFS)


class DotDir(Generic[_N]):
    """What ``.history`` and ``.search`` share: a read-only directory of the mount root whose
    nodes are not the tree's, the handlers that refuse every change under it, and what the
    dispatch asks of it."""

    #: Its name in the mount root.
    name: str

    def __init__(self, mount: Host) -> None:
        self.mount = mount

    # -- what the dispatch asks ---------------------------------------------------------------

    def node(self, inode: int) -> _N | None:
        """Its node numbered ``inode`` (None: not one of its)."""
        raise NotImplementedError

    def owns_handle(self, fh: int) -> bool:
        raise NotImplementedError

    def owns_entry(self, parent_inode: int, name: bytes) -> bool:
        """Is ``name`` in ``parent_inode`` its (in one of its directories, or its own name in
        the mount root)?"""
        return self.node(parent_inode) is not None or (
            parent_inode == self.mount.root_ino and name == self.name.encode())

    def path_of(self, parent_inode: int, name: bytes | None = None) -> str | None:
        """The path (below the mount root) of this directory or an entry in it that a request
        would change (None: neither). Its name in the mount root is reserved: it cannot be
        made, removed or renamed either."""
        node = self.node(parent_inode)
        if node is not None:
            return node.display + ("" if name is None else "/" + name.decode("utf-8", "replace"))
        if parent_inode == self.mount.root_ino and name == self.name.encode():
            return "/" + self.name
        return None

    def attrs_of(self, inode: int) -> pyfuse3.EntryAttributes | None:
        """The attributes of its node ``inode`` (None: not one of its)."""
        raise NotImplementedError

    def forget(self, inode: int, nlookup: int) -> None:
        raise NotImplementedError

    def _known(self, inode: int) -> _N:
        node = self.node(inode)
        if node is None:
            raise FUSEError(errno.ENOENT)
        return node

    # -- handlers: every change refused -------------------------------------------------------

    async def setattr(self, inode: int, attr: pyfuse3.EntryAttributes,
                      fields: pyfuse3.SetattrFields, fh: int | None,
                      ctx: pyfuse3.RequestContext) -> NoReturn:
        refuse(self.mount, "truncate" if fields.update_size else "chmod",
               self._known(inode).display, ctx=ctx)

    async def setxattr(self, inode: int, name: bytes, value: bytes,
                       ctx: pyfuse3.RequestContext) -> NoReturn:
        refuse(self.mount, "setxattr", self._known(inode).display, ctx=ctx)

    async def removexattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> NoReturn:
        refuse(self.mount, "removexattr", self._known(inode).display, ctx=ctx)

    def _refuse_entry(self, operation: str, parent_inode: int, name: bytes,
                      ctx: pyfuse3.RequestContext) -> NoReturn:
        path = self.path_of(parent_inode, name)
        assert path is not None  # the dispatch sent it here
        refuse(self.mount, operation, path, ctx=ctx)

    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
                     ctx: pyfuse3.RequestContext) -> NoReturn:
        self._refuse_entry("create", parent_inode, name, ctx)

    async def mkdir(self, parent_inode: int, name: bytes, mode: int,
                    ctx: pyfuse3.RequestContext) -> NoReturn:
        self._refuse_entry("mkdir", parent_inode, name, ctx)

    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> NoReturn:
        self._refuse_entry("rmdir", parent_inode, name, ctx)

    async def unlink(self, parent_inode: int, name: bytes,
                     ctx: pyfuse3.RequestContext) -> NoReturn:
        self._refuse_entry("delete", parent_inode, name, ctx)

    async def symlink(self, parent_inode: int, name: bytes, target: bytes,
                      ctx: pyfuse3.RequestContext) -> NoReturn:
        self._refuse_entry("symlink", parent_inode, name, ctx)

    async def link(self, inode: int, new_parent_inode: int, new_name: bytes,
                   ctx: pyfuse3.RequestContext) -> NoReturn:
        self._refuse_entry("link", new_parent_inode, new_name, ctx)

    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int,
                    ctx: pyfuse3.RequestContext) -> NoReturn:
        self._refuse_entry("mknod", parent_inode, name, ctx)

    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int,
                     name_new: bytes, flags: int, ctx: pyfuse3.RequestContext) -> NoReturn:
        # Either side may be the tree's, or the other directory's.
        m = self.mount
        refuse(m, "rename", *(m.change_path(p, n) for p, n in ((parent_inode_old, name_old),
                                                               (parent_inode_new, name_new))),
               ctx=ctx)


class HistoryDir(DotDir[HNode]):
    """``.history`` (:mod:`memfs.fuse.history`): read-only; its listings are never cached by
    the kernel."""

    name = HISTORY

    def __init__(self, mount: Host, history: History) -> None:
        super().__init__(mount)
        self.history = history
        self.handles: dict[int, _HistoryHandle] = {}

    def node(self, inode: int) -> HNode | None:
        return self.history.nodes.get(inode)

    def owns_handle(self, fh: int) -> bool:
        return fh in self.handles

    def attrs(self, node: HNode) -> pyfuse3.EntryAttributes:
        # The kernel caches names and attributes as long as the mount's other entries; what
        # changes (a version redacted or pruned, a directory gone with a rename or a redacted
        # deletion) is invalidated by History.apply_changes. Directory listings are never
        # cached (no cache_readdir), so new versions show at once. The mount's own modes, as
        # a read-only store shows them: the kernel lets a change through to the daemon, which
        # refuses it with EROFS and logs the attempt (modes without write bits would have the
        # kernel answer an unprivileged agent EACCES, unlogged).
        return self.mount.entry(node.ino, node.is_dir, 2 if node.is_dir else 1, node.size,
                                node.mtime_ns, node.mtime_ns)

    def attrs_of(self, inode: int) -> pyfuse3.EntryAttributes | None:
        node = self.node(inode)
        return None if node is None else self.attrs(node)

    def forget(self, inode: int, nlookup: int) -> None:
        self.history.forget(inode, nlookup)

    def _reply(self, node: HNode) -> pyfuse3.EntryAttributes:
        node.lookups += 1
        return self.attrs(node)

    def _register(self, h: _HistoryHandle) -> FileHandleT:
        fh = self.mount.new_fh()
        self.handles[fh] = h
        h.node.handles += 1
        return fh

    # -- handlers -------------------------------------------------------------------------------

    async def lookup(self, parent_inode: int, name: bytes,
                     ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        parent = self.node(parent_inode)
        if parent is None:
            # ".history" in the mount root. Reserved: a memory under /.history/ is shadowed in
            # the mount (its history is in .history/.history/).
            return self._reply(self.history.root)
        if name == b".":
            return self._reply(parent)
        if name == b"..":
            up = self.history.parent_of(parent)
            m = self.mount
            return m.root_reply() if up is None else self._reply(up)
        try:
            s = name.decode("utf-8")
        except UnicodeDecodeError:
            raise FUSEError(errno.ENOENT) from None
        child = await self.history.lookup(parent, s)
        if child is None:
            raise FUSEError(errno.ENOENT)
        return self._reply(child)

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        return self.attrs(await self.history.refresh(self._known(inode)))

    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        hn = self._known(inode)
        if hn.is_dir:
            raise FUSEError(errno.EISDIR)
        if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR) or flags & os.O_TRUNC:
            refuse(self.mount, "write", hn.display, ctx=ctx)
        comm_, pid = self.mount.ctx_name(ctx)
        data = await self.history.content(hn)
        # No keep_cache: a version redacted since the last open reads empty at once.
        fh = self._register(_HistoryHandle(hn, pid, comm_, data=data))
        return pyfuse3.FileInfo(fh=fh, keep_cache=False)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        return self.handles[fh].data[off : off + size]

    async def release(self, fh: int) -> None:
        h = self.handles.pop(fh)
        h.node.handles -= 1
        m = self.mount
        path = h.node.display
        if h.listing is None:
            m.emit(m.pair(h.comm, h.pid, "read", path, text=f"read {m.display(path)}"))
        else:
            n = len(h.listing)
            m.emit(m.pair(
                h.comm, h.pid, "list", path,
                text=f"listed {m.display(path)}: {n} entr{'y' if n == 1 else 'ies'}"))
        self.history.release_if_unused(h.node)

    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> FileHandleT:
        hn = self._known(inode)
        if not hn.is_dir:
            raise FUSEError(errno.ENOTDIR)
        comm_, pid = self.mount.ctx_name(ctx)
        entries = await self.history.listing(hn)
        return self._register(_HistoryHandle(hn, pid, comm_, listing=entries))

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        # Offsets: 1 after ".", 2 after "..", 2 + n after the listing's n-th entry.
        hh = self.handles[fh]
        above = self.history.parent_of(hh.node)
        if not self.mount.reply_dots(token, start_id, hh.node.ino,
                                     self.mount.root_ino if above is None else above.ino):
            return
        entries = hh.listing or []
        for index in range(max(0, start_id - DOTS), len(entries)):
            e = entries[index]
            if not pyfuse3.readdir_reply(token, FileNameT(e.name.encode("utf-8")),
                                         self.attrs(e), DOTS + index + 1):
                return
            e.lookups += 1

    async def releasedir(self, fh: int) -> None:
        await self.release(fh)

    async def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        hn = await self.history.refresh(self._known(inode))
        value = version_xattrs(hn.version).get(name) if hn.version is not None else None
        if value is None:
            raise FUSEError(pyfuse3.ENOATTR)
        return value

    async def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> list[XAttrNameT]:
        hn = await self.history.refresh(self._known(inode))
        names = version_xattrs(hn.version) if hn.version is not None else {}
        return [XAttrNameT(n) for n in names]


class SearchDir(DotDir[SNode]):
    """``.search`` (:mod:`memfs.fuse.search`): read-only; the kernel caches no question."""

    name = SEARCH

    def __init__(self, mount: Host, search: Search) -> None:
        super().__init__(mount)
        self.search = search
        self.handles: dict[int, _SearchHandle] = {}

    def node(self, inode: int) -> SNode | None:
        return self.search.nodes.get(inode)

    def owns_handle(self, fh: int) -> bool:
        return fh in self.handles

    def attrs(self, node: SNode) -> pyfuse3.EntryAttributes:
        # The mount's own modes, as for .history (a change is refused by the daemon, logged).
        entry = self.mount.entry(node.ino, node.is_dir, 2 if node.is_dir else 1, node.size,
                                 node.answer.mtime_ns if node.answer else node.mtime_ns,
                                 node.mtime_ns)
        if not node.is_dir:
            # Never cached: every lookup (cat, stat) asks the question again.
            entry.entry_timeout = entry.attr_timeout = 0
            node.told = node.size
        return entry

    def attrs_of(self, inode: int) -> pyfuse3.EntryAttributes | None:
        node = self.node(inode)
        return None if node is None else self.attrs(node)

    def forget(self, inode: int, nlookup: int) -> None:
        self.search.forget(inode, nlookup)

    def _reply(self, node: SNode) -> pyfuse3.EntryAttributes:
        node.lookups += 1
        return self.attrs(node)

    def _register(self, h: _SearchHandle) -> FileHandleT:
        fh = self.mount.new_fh()
        self.handles[fh] = h
        h.node.handles += 1
        return fh

    async def _ask(self, node: SNode, ctx: pyfuse3.RequestContext) -> Answer:
        """Search for the node's question now: a tool event, failed or not."""
        assert node.question is not None
        m = self.mount
        comm_, pid = m.ctx_name(ctx)
        try:
            answer = await self.search.ask(node, pid)
        except errors.MemfsError as e:
            self.search.release_if_unused(node)  # a refused question is not kept
            f = Failure.of(e)
            m.emit(m.pair(comm_, pid, "search", node.display, failure=f))
            raise f from None
        m.emit(m.pair(comm_, pid, "search", node.display,
                      text=answer.summary(node.question)))
        return answer

    async def _answer(self, node: SNode, ctx: pyfuse3.RequestContext, *,
                      latest: bool = False) -> Answer:
        """The answer a lookup just gave the kernel (``latest``: the last one, however old),
        else a new one."""
        found = node.answer if latest else self.search.recent(node)
        return found or await self._ask(node, ctx)

    # -- handlers -------------------------------------------------------------------------------

    async def lookup(self, parent_inode: int, name: bytes,
                     ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        parent = self.node(parent_inode)
        if parent is None:
            return self._reply(self.search.root)  # ".search" in the mount root: reserved too
        if name == b".":
            return self._reply(parent)
        m = self.mount
        if name == b"..":
            return m.root_reply() if parent.parent is None else self._reply(
                parent.parent)
        if not parent.is_dir:
            raise FUSEError(errno.ENOTDIR)
        path = f"{parent.display}/{name.decode('utf-8', 'replace')}"
        try:
            node = self.search.entry(parent, name)
            if not node.is_dir and self.search.reusable(node, ctx.pid) is None:
                await self._ask(node, ctx)
        except Refused as r:
            comm_, pid = m.ctx_name(ctx)
            m.emit(m.pair(comm_, pid, "search", path, failure=Failure(r.errno, r.why)))
            raise FUSEError(r.errno) from None
        return self._reply(node)

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        sn = self._known(inode)
        if not sn.is_dir:
            await self._answer(sn, ctx, latest=True)
        return self.attrs(sn)

    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        node = self._known(inode)
        if node.is_dir:
            raise FUSEError(errno.EISDIR)
        if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR) or flags & os.O_TRUNC:
            refuse(self.mount, "write", node.display, ctx=ctx)
        answer = await self._answer(node, ctx)
        comm_, pid = self.mount.ctx_name(ctx)
        fh = self._register(_SearchHandle(node, pid, comm_, answer.data))
        # The kernel reads up to the size it was told: an answer of another size (asked again
        # since) is read past it, without the page cache.
        return pyfuse3.FileInfo(fh=fh, keep_cache=False, direct_io=len(answer.data) != node.told)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        return self.handles[fh].data[off : off + size]

    async def release(self, fh: int) -> None:
        h = self.handles.pop(fh)
        h.node.handles -= 1
        if h.node.is_dir:
            m = self.mount
            m.emit(m.pair(h.comm, h.pid, "list", h.node.display,
                          text=f"listed {m.display(h.node.display)}: 0 entries"))
        self.search.release_if_unused(h.node)

    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> FileHandleT:
        sn = self._known(inode)
        if not sn.is_dir:
            raise FUSEError(errno.ENOTDIR)
        comm_, pid = self.mount.ctx_name(ctx)
        return self._register(_SearchHandle(sn, pid, comm_))

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        node = self.handles[fh].node
        self.mount.reply_dots(token, start_id, node.ino,
                              self.mount.root_ino if node.parent is None else node.parent.ino)
        # no question is listed

    async def releasedir(self, fh: int) -> None:
        await self.release(fh)

    async def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        sn = self._known(inode)
        value = None
        if not sn.is_dir and name.startswith(b"user.memfs.search."):
            value = (await self._answer(sn, ctx, latest=True)).xattrs().get(name)
        if value is None:
            raise FUSEError(pyfuse3.ENOATTR)
        return value

    async def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> list[XAttrNameT]:
        sn = self._known(inode)
        if sn.is_dir:
            return []
        answer = await self._answer(sn, ctx, latest=True)
        return [XAttrNameT(n) for n in answer.xattrs()]


@dataclass(eq=False)
class _DescribeHandle:
    """``.describe`` open, with the answer read at its open."""

    pid: int
    comm: str
    data: bytes


class DescribeFile(DotDir[DNode]):
    """``.describe`` (:mod:`memfs.fuse.describe`): a read-only file of the mount root, read
    from the store at each open; the kernel caches none of it."""

    name = DESCRIBE

    def __init__(self, mount: Host, describe: Describe) -> None:
        super().__init__(mount)
        self.describe = describe
        self.handles: dict[int, _DescribeHandle] = {}

    def node(self, inode: int) -> DNode | None:
        return self.describe.known(inode)

    def owns_handle(self, fh: int) -> bool:
        return fh in self.handles

    def attrs(self, node: DNode) -> pyfuse3.EntryAttributes:
        # The mount's own modes, as for .history (a change is refused by the daemon, logged);
        # never cached: its size is the last answer's, and the next one may differ.
        entry = self.mount.entry(node.ino, False, 1, node.size, node.mtime_ns, node.mtime_ns)
        entry.entry_timeout = entry.attr_timeout = 0
        node.told = node.size
        return entry

    def attrs_of(self, inode: int) -> pyfuse3.EntryAttributes | None:
        node = self.node(inode)
        return None if node is None else self.attrs(node)

    def forget(self, inode: int, nlookup: int) -> None:
        node = self.node(inode)
        if node is not None:
            node.lookups -= nlookup

    # -- handlers -------------------------------------------------------------------------------

    async def lookup(self, parent_inode: int, name: bytes,
                     ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        if self.node(parent_inode) is not None:
            raise FUSEError(errno.ENOTDIR)  # a name under .describe
        node = self.describe.node
        node.lookups += 1
        return self.attrs(node)

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        return self.attrs(self._known(inode))

    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        node = self._known(inode)
        if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR) or flags & os.O_TRUNC:
            refuse(self.mount, "write", node.display, ctx=ctx)
        m = self.mount
        comm_, pid = m.ctx_name(ctx)
        try:
            data = await self.describe.read()
        except errors.MemfsError as e:
            f = Failure.of(e)
            m.emit(m.pair(comm_, pid, "read", node.display, failure=f))
            raise f from None
        fh = m.new_fh()
        self.handles[fh] = _DescribeHandle(pid, comm_, data)
        node.handles += 1
        # The kernel reads up to the size it was told: an answer of another size is read past
        # it, without the page cache.
        return pyfuse3.FileInfo(fh=fh, keep_cache=False, direct_io=len(data) != node.told)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        return self.handles[fh].data[off : off + size]

    async def release(self, fh: int) -> None:
        h = self.handles.pop(fh)
        node = self.describe.node
        node.handles -= 1
        m = self.mount
        m.emit(m.pair(h.comm, h.pid, "read", node.display,
                      text=f"read {m.display(node.display)}"))

    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> FileHandleT:
        self._known(inode)
        raise FUSEError(errno.ENOTDIR)

    async def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        self._known(inode)
        raise FUSEError(pyfuse3.ENOATTR)

    async def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> list[XAttrNameT]:
        self._known(inode)
        return []


# -- the dispatch: once per request, before any handler runs ---------------------------------


def by_inode(handler: _F) -> _F:
    """Dispatch by the inode a request is about (its first argument): a node of ``.history``
    or ``.search`` goes to the handler of the same name of that directory's object; any other
    to ``handler`` (the tree's)."""
    name = handler.__name__.lstrip("_")  # _getxattr: the dispatched half of getxattr

    @functools.wraps(handler)
    async def route(mount: _Dispatching, inode: int, *args: Any) -> Any:
        if mount.mount.tree_owns(inode):
            return await handler(mount, inode, *args)
        for d in mount.dotdirs:
            if d.node(inode) is not None:
                return await getattr(d, name)(inode, *args)
        return await handler(mount, inode, *args)

    return cast(_F, route)


def by_handle(handler: _F) -> _F:
    """Dispatch by the file handle of an open file or listing (its first argument), as
    :func:`by_inode` does by inode."""
    name = handler.__name__

    @functools.wraps(handler)
    async def route(mount: _Dispatching, fh: int, *args: Any) -> Any:
        if mount.mount.tree_owns_handle(fh):
            return await handler(mount, fh, *args)
        for d in mount.dotdirs:
            if d.owns_handle(fh):
                return await getattr(d, name)(fh, *args)
        return await handler(mount, fh, *args)

    return cast(_F, route)


def by_entry(*at: int) -> Callable[[_F], _F]:
    """Dispatch by the entries a request names (a parent inode and a name, at positions
    ``at`` of its arguments; default: the first two), as :func:`by_inode` does by inode: an
    entry in ``.history`` or ``.search``, or either name in the mount root, is theirs."""
    spots = at or (0,)

    def wrap(handler: _F) -> _F:
        name = handler.__name__

        @functools.wraps(handler)
        async def route(mount: _Dispatching, *args: Any) -> Any:
            tree = mount.mount
            for p in spots:
                if not tree.tree_owns_entry(args[p], args[p + 1]):
                    break
            else:
                return await handler(mount, *args)
            for p in spots:
                for d in mount.dotdirs:
                    if d.owns_entry(args[p], args[p + 1]):
                        return await getattr(d, name)(*args)
            return await handler(mount, *args)

        return cast(_F, route)

    return wrap
