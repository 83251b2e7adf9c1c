"""``.sessions`` as a mount shows it (:mod:`memfs.fuse.sessionlog` says what it holds): the
handler object the dispatch of :mod:`memfs.fuse.dotdirs` hands the requests about it.

The kernel keeps no name or attribute under it (timeouts 0): which sessions are shown may
change with the store's setting, and every file grows while its session runs, so each path
lookup asks again (and so does each read of a file's content and each listing of a folder:
a descriptor or directory handle kept from a wider view reads ENOENT); a file's content is
read at its lookup (its size is right for ``stat``, ``ls -l``, ``cat`` and ``grep -r``) and
its open reads that content, or a new one with ``direct_io`` when its size is not what the
kernel was told. A listing or a read is a tool event; a change is EROFS
(:class:`~memfs.fuse.dotdirs.DotDir`), logged.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

import pyfuse3
from pyfuse3 import FileHandleT, FileNameT, FUSEError, XAttrNameT

from .. import errors
from .dotdirs import DotDir, Host, refuse
from .kernel import DOTS, Failure
from .sessionlog import SESSIONS, SessionLog, XNode


@dataclass(eq=False)
class _Handle:
    """An open file of ``.sessions`` (with its content) or a directory being listed."""

    node: XNode
    pid: int
    comm: str
    data: bytes = b""
    listing: list[XNode] | None = None


class SessionsDir(DotDir[XNode]):
    """``.sessions`` (:mod:`memfs.fuse.sessionlog`): read-only; the kernel caches none of it."""

    name = SESSIONS

    def __init__(self, mount: Host, log: SessionLog) -> None:
        super().__init__(mount)
        self.log = log
        self.handles: dict[int, _Handle] = {}

    def node(self, inode: int) -> XNode | None:
        return self.log.nodes.get(inode)

    def owns_handle(self, fh: int) -> bool:
        return fh in self.handles

    def attrs(self, node: XNode) -> pyfuse3.EntryAttributes:
        # The mount's own modes, as for .history (a change is refused by the daemon, logged).
        entry = self.mount.entry(node.ino, node.is_dir, 2 if node.is_dir else 1, node.size,
                                 node.mtime_ns, node.mtime_ns)
        entry.entry_timeout = entry.attr_timeout = 0
        if not node.is_dir:
            node.told = node.size
        return entry

    def attrs_of(self, inode: int) -> pyfuse3.EntryAttributes | None:
        node = self.node(inode)
        return None if node is None else self.attrs(node)

    def forget(self, inode: int, nlookup: int) -> None:
        self.log.forget(inode, nlookup)

    def _reply(self, node: XNode) -> pyfuse3.EntryAttributes:
        node.lookups += 1
        return self.attrs(node)

    async def _store(self, node: XNode, operation: str, ctx: pyfuse3.RequestContext,
                     read: bool) -> None:
        """Read from the store what a request needs (a file's content, or nothing); a refusal
        is the request's errno, logged as a failed ``operation``."""
        if not read:
            return
        try:
            await self.log.content(node)
        except errors.MemfsError as e:
            m = self.mount
            comm_, pid = m.ctx_name(ctx)
            f = Failure.of(e)
            m.emit(m.pair(comm_, pid, operation, node.display, failure=f))
            raise f from None

    # -- handlers -------------------------------------------------------------------------------

    async def lookup(self, parent_inode: int, name: bytes,
                     ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        parent = self.node(parent_inode)
        if parent is None:
            return self._reply(self.log.root)  # ".sessions" in the mount root: reserved
        if name == b".":
            return self._reply(parent)
        if name == b"..":
            return self.mount.root_reply() if parent.parent is None else self._reply(
                parent.parent)
        if not parent.is_dir:
            raise FUSEError(errno.ENOTDIR)
        try:
            child = await self.log.lookup(parent, name.decode("utf-8"))
        except UnicodeDecodeError:
            raise FUSEError(errno.ENOENT) from None
        except errors.MemfsError as e:
            m = self.mount
            comm_, pid = m.ctx_name(ctx)
            f = Failure.of(e)
            m.emit(m.pair(comm_, pid, "read", f"{parent.display}/{name.decode('utf-8')}",
                          failure=f))
            raise f from None
        if child is None:
            raise FUSEError(errno.ENOENT)
        return self._reply(child)

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        node = self._known(inode)
        await self._store(node, "read", ctx, not node.is_dir)
        return self.attrs(node)

    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        node = self._known(inode)
        if node.is_dir:
            raise FUSEError(errno.EISDIR)
        if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR) or flags & os.O_TRUNC:
            refuse(self.mount, "write", node.display, ctx=ctx)
        await self._store(node, "read", ctx, True)
        comm_, pid = self.mount.ctx_name(ctx)
        data = node.data or b""
        fh = self.mount.new_fh()
        self.handles[fh] = _Handle(node, pid, comm_, data)
        node.handles += 1
        # The kernel reads up to the size it was told: a content of another size (read again
        # since) is read past it, without the page cache.
        return pyfuse3.FileInfo(fh=fh, keep_cache=False, direct_io=len(data) != node.told)

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
        self.log.release_if_unused(h.node)

    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> FileHandleT:
        node = self._known(inode)
        if not node.is_dir:
            raise FUSEError(errno.ENOTDIR)
        m = self.mount
        comm_, pid = m.ctx_name(ctx)
        try:
            entries = await self.log.listing(node)
        except errors.MemfsError as e:
            f = Failure.of(e)
            m.emit(m.pair(comm_, pid, "list", node.display, failure=f))
            raise f from None
        fh = m.new_fh()
        self.handles[fh] = _Handle(node, pid, comm_, listing=entries)
        node.handles += 1
        return fh

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        # Offsets: 1 after ".", 2 after "..", 2 + n after the listing's n-th entry.
        h = self.handles[fh]
        if h.node.session_id is not None:  # a folder: ENOENT once no longer shown
            await self.log.shown(h.node.session_id)
        up = h.node.parent
        if not self.mount.reply_dots(token, start_id, h.node.ino,
                                     self.mount.root_ino if up is None else up.ino):
            return
        entries = h.listing or []
        for index in range(max(0, start_id - DOTS), len(entries)):
            e = entries[index]
            if not pyfuse3.readdir_reply(token, FileNameT(e.display.rsplit("/", 1)[1].encode()),
                                         self.attrs(e), DOTS + index + 1):
                return
            e.lookups += 1

    async def releasedir(self, fh: int) -> None:
        await self.release(fh)

    async def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        self._known(inode)
        raise FUSEError(pyfuse3.ENOATTR)

    async def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> list[XAttrNameT]:
        self._known(inode)
        return []
