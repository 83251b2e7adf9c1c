"""The filesystem of a whole session: every store of the session in one FUSE filesystem.

pyfuse3 serves one FUSE mount per process, so instead of one ``memfs mount`` daemon per store
(each a Python process of about 40 MB that takes about 0.25 s to start) a session gets one
process whose filesystem has the session's stores as the directories of its root::

    <fuse root>/            inode 1, lists the stores by slug (read-only)
    <fuse root>/notes/      store 0: its own memfs.fuse.ops.Operations, tree, watcher, events
    <fuse root>/docs/       store 1: ...

:class:`SessionOperations` composes one unchanged :class:`memfs.fuse.ops.Operations` per store.
Each store's tree numbers its inodes from its own base (``(index + 1) << INODE_SHIFT``, its
root at the base itself), so an inode number says which store owns it without any translation:
the kernel, the store's :class:`~memfs.fuse.watch.Invalidator` and the open-descriptor checks
of :mod:`memfs.fuse.kernel` all see the same numbers. File handles are per store, so they are
translated: the store's index goes into the high bits of the handle the kernel gets. Each store
keeps its own access mode (a read-only store refuses writes with EROFS in its Operations, and
logs the refused call as an ``is_error`` tool result), event sink, change watcher and mutex.

The launcher (:mod:`memfs.launcher`, in its private mount namespace, as root) mounts this
filesystem at a hidden directory, bind-mounts ``<fuse root>/<slug>`` onto each store's mount
path and lazily detaches the hidden mount: the agent sees each store at its own path and never
the common root. A ``kill -9`` of the launcher ends the namespace's processes (the daemon gets
SIGTERM from its parent-death signal) and with them the namespace and its mounts.

The daemon that serves it is :mod:`memfs.daemons.sessionfs`.
"""


from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

import pyfuse3
import trio
from pyfuse3 import FileHandleT, FileNameT, FlagT, FUSEError, InodeT, ModeT, XAttrNameT

from .kernel import DOTS, reply_dots
from .ops import Operations
from .toolevents import EventSink
from .tree import Tree

#: Store ``i`` owns the inodes and file handles ``[(i + 1) << INODE_SHIFT, (i + 2) << ...)``;
#: below ``1 << INODE_SHIFT`` are the session root's. 2**40 inodes per store is far more than
#: a store can ever allocate (one per file or directory, plus one per re-creation).
INODE_SHIFT = 40
SESSION_ROOT = pyfuse3.ROOT_INODE
#: The content cache of all of a session's stores together (a single ``memfs mount`` keeps
#: memfs.fuse.tree.CONTENT_CACHE_BYTES): 8 stores of 2,000 files of 2 kB would otherwise hold
#: 32 MB of content that the kernel's page cache holds already. A pass over every file misses
#: anyway (the cache empties when full); only a re-read working set under 256 kB a store hits.
SESSION_CACHE_BYTES = 2 * 1024 * 1024
_ROOT_FH = 1


def rebase_tree(tree: Tree, base: int) -> None:
    """Renumber a fresh (empty, never loaded) tree so that its root is ``base`` and every
    inode it allocates comes after it."""
    if len(tree.nodes) != 1:
        raise ValueError("only an empty tree can be renumbered")
    root = tree.root
    tree.nodes.clear()
    root.ino = base
    tree.nodes[base] = root
    tree._next_ino = base + 1  # noqa: SLF001 - the tree's inode counter, set once before use


@dataclass
class Member:
    """One store of the session: its directory name in the root and its Operations."""

    slug: str
    ops: Operations
    sink: EventSink | None = None


class SessionOperations(pyfuse3.Operations):
    """The FUSE handlers of a session: the root lists the stores; every other request goes to
    the Operations of the store that owns its inode (or file handle).

    :param members: the stores, in the order of their inode ranges (each Operations' tree is
        renumbered here, so they must be fresh: not loaded yet).
    :param owner: the ``(uid, gid)`` the root shows (default: the daemon's).
    :param private: the root's mode is 0700 instead of 0755.
    """

    supports_dot_lookup = True
    enable_writeback_cache = False

    def __init__(self, members: Sequence[Member], *, owner: tuple[int, int] | None = None,
                 private: bool = False, timeout: float = 300.0) -> None:
        super().__init__()
        if not members:
            raise ValueError("a session filesystem needs at least one store")
        self.members = list(members)
        self.by_slug: dict[bytes, int] = {}
        for i, m in enumerate(self.members):
            if m.slug.encode() in self.by_slug or "/" in m.slug or m.slug in ("", ".", ".."):
                raise ValueError(f"bad or repeated store directory name {m.slug!r}")
            self.by_slug[m.slug.encode()] = i
            rebase_tree(m.ops.tree, self.base(i))
            m.ops.mount.root_parent_ino = SESSION_ROOT
        self.uid, self.gid = owner if owner is not None else (os.getuid(), os.getgid())
        self.dir_mode = 0o700 if private else 0o755
        self.timeout = timeout
        self._loaded = [trio.Event() for _ in self.members]

    @staticmethod
    def base(index: int) -> int:
        return (index + 1) << INODE_SHIFT

    # -- routing ------------------------------------------------------------------------------

    def _index(self, number: int) -> int:
        """The store owning an inode or handle number (-1: the session root's)."""
        return (number >> INODE_SHIFT) - 1

    async def _ops(self, inode: int) -> Operations:
        """The Operations of the store owning ``inode``, once its tree is loaded."""
        i = self._index(inode)
        if i < 0 or i >= len(self.members):
            if inode == SESSION_ROOT:
                raise FUSEError(errno.EPERM)  # the root itself is the launcher's, fixed
            raise FUSEError(errno.ENOENT)
        if not self._loaded[i].is_set():
            await self._loaded[i].wait()
        return self.members[i].ops

    def mark_loaded(self, index: int) -> None:
        """Store ``index``'s tree is loaded: its requests may run."""
        self._loaded[index].set()

    async def load(self, index: int) -> None:
        """Load store ``index``'s tree in a worker thread (no request of that store runs
        meanwhile: they wait for it), then let its requests in."""
        ops = self.members[index].ops
        await trio.to_thread.run_sync(ops.load)
        self.mark_loaded(index)
        # The kernel may hold the store root's attributes from before (its link count).
        ops.tree.stale_inodes.append(ops.root.ino)
        ops.mount.kick()

    def _fh(self, fh: int) -> tuple[Operations, FileHandleT]:
        i = self._index(fh)
        if i < 0 or i >= len(self.members):
            raise FUSEError(errno.EBADF)
        return self.members[i].ops, FileHandleT(fh - self.base(i))

    def _global_fh(self, ops: Operations, fh: int) -> FileHandleT:
        i = next(i for i, m in enumerate(self.members) if m.ops is ops)
        return FileHandleT(self.base(i) + fh)

    def _root_attrs(self) -> pyfuse3.EntryAttributes:
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = InodeT(SESSION_ROOT)
        entry.generation = 0
        entry.entry_timeout = self.timeout
        entry.attr_timeout = self.timeout
        entry.st_mode = ModeT(stat.S_IFDIR | self.dir_mode)
        entry.st_nlink = 2 + len(self.members)
        entry.st_uid = self.uid
        entry.st_gid = self.gid
        entry.st_size = 4096
        entry.st_blksize = 4096
        entry.st_blocks = 8
        return entry

    async def _store_root(self, i: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        ops = self.members[i].ops
        return await ops.getattr(InodeT(ops.root.ino), ctx)

    # -- handlers -----------------------------------------------------------------------------

    async def lookup(self, parent_inode: InodeT, name: FileNameT,
                     ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        if parent_inode == SESSION_ROOT:
            if name in (b".", b".."):
                return self._root_attrs()
            i = self.by_slug.get(bytes(name))
            if i is None:
                raise FUSEError(errno.ENOENT)
            return await self._store_root(i, ctx)
        ops = await self._ops(parent_inode)
        if name == b".." and parent_inode == ops.root.ino:
            return self._root_attrs()
        return await ops.lookup(parent_inode, name, ctx)

    async def forget(self, inode_list: Sequence[tuple[InodeT, int]]) -> None:
        per: dict[int, list[tuple[InodeT, int]]] = {}
        for inode, n in inode_list:
            i = self._index(inode)
            if 0 <= i < len(self.members):
                per.setdefault(i, []).append((inode, n))
        for i, items in per.items():
            await self.members[i].ops.forget(items)

    async def getattr(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        if inode == SESSION_ROOT:
            return self._root_attrs()
        return await (await self._ops(inode)).getattr(inode, ctx)

    async def setattr(self, inode: InodeT, attr: pyfuse3.EntryAttributes,
                      fields: pyfuse3.SetattrFields, fh: FileHandleT | None,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        ops = await self._ops(inode)
        local = None if fh is None else self._fh(fh)[1]
        return await ops.setattr(inode, attr, fields, local, ctx)

    async def open(self, inode: InodeT, flags: FlagT,
                   ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        ops = await self._ops(inode)
        fi = await ops.open(inode, flags, ctx)
        fi.fh = self._global_fh(ops, fi.fh)
        return fi

    async def create(self, parent_inode: InodeT, name: FileNameT, mode: ModeT, flags: FlagT,
                     ctx: pyfuse3.RequestContext
                     ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        ops = await self._ops(parent_inode)
        fi, attrs = await ops.create(parent_inode, name, mode, flags, ctx)
        fi.fh = self._global_fh(ops, fi.fh)
        return fi, attrs

    async def read(self, fh: FileHandleT, off: int, size: int) -> bytes:
        ops, local = self._fh(fh)
        return await ops.read(local, off, size)

    async def write(self, fh: FileHandleT, off: int, buf: bytes) -> int:
        ops, local = self._fh(fh)
        return await ops.write(local, off, buf)

    async def flush(self, fh: FileHandleT) -> None:
        ops, local = self._fh(fh)
        await ops.flush(local)

    async def fsync(self, fh: FileHandleT, datasync: bool) -> None:
        ops, local = self._fh(fh)
        await ops.fsync(local, datasync)

    async def release(self, fh: FileHandleT) -> None:
        ops, local = self._fh(fh)
        await ops.release(local)

    async def opendir(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> FileHandleT:
        if inode == SESSION_ROOT:
            return FileHandleT(_ROOT_FH)
        ops = await self._ops(inode)
        return self._global_fh(ops, await ops.opendir(inode, ctx))

    async def readdir(self, fh: FileHandleT, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        if fh == _ROOT_FH:
            if not reply_dots(token, start_id, (SESSION_ROOT, self._root_attrs()),
                              (SESSION_ROOT, self._root_attrs())):
                return
            for i in range(max(0, start_id - DOTS), len(self.members)):
                m = self.members[i]
                # No lookup count: the store roots are pinned and never forgotten.
                if not pyfuse3.readdir_reply(token, FileNameT(m.slug.encode()),
                                             m.ops.mount.attrs.of(m.ops.root),
                                             DOTS + i + 1):
                    return
            return
        ops, local = self._fh(fh)
        await ops.readdir(local, start_id, token)

    async def releasedir(self, fh: FileHandleT) -> None:
        if fh == _ROOT_FH:
            return
        ops, local = self._fh(fh)
        await ops.releasedir(local)

    async def fsyncdir(self, fh: FileHandleT, datasync: bool) -> None:
        return None

    async def mkdir(self, parent_inode: InodeT, name: FileNameT, mode: ModeT,
                    ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        return await (await self._ops(parent_inode)).mkdir(parent_inode, name, mode, ctx)

    async def rmdir(self, parent_inode: InodeT, name: FileNameT,
                    ctx: pyfuse3.RequestContext) -> None:
        await (await self._ops(parent_inode)).rmdir(parent_inode, name, ctx)

    async def unlink(self, parent_inode: InodeT, name: FileNameT,
                     ctx: pyfuse3.RequestContext) -> None:
        await (await self._ops(parent_inode)).unlink(parent_inode, name, ctx)

    async def rename(self, parent_inode_old: InodeT, name_old: FileNameT,
                     parent_inode_new: InodeT, name_new: FileNameT, flags: FlagT,
                     ctx: pyfuse3.RequestContext) -> None:
        ops = await self._ops(parent_inode_old)
        if await self._ops(parent_inode_new) is not ops:
            raise FUSEError(errno.EXDEV)  # two stores: as between two mounts
        await ops.rename(parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx)

    async def symlink(self, parent_inode: InodeT, name: FileNameT, target: FileNameT,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        return await (await self._ops(parent_inode)).symlink(parent_inode, name, target, ctx)

    async def link(self, inode: InodeT, new_parent_inode: InodeT, new_name: FileNameT,
                   ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        ops = await self._ops(new_parent_inode)
        if await self._ops(inode) is not ops:
            raise FUSEError(errno.EXDEV)
        return await ops.link(inode, new_parent_inode, new_name, ctx)

    async def mknod(self, parent_inode: InodeT, name: FileNameT, mode: ModeT, rdev: int,
                    ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        return await (await self._ops(parent_inode)).mknod(parent_inode, name, mode, rdev, ctx)

    async def readlink(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> FileNameT:
        return await (await self._ops(inode)).readlink(inode, ctx)

    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        """FUSE does not say which directory a statfs is about (pyfuse3 passes no inode):
        the whole session's, every store's counts added up."""
        total = pyfuse3.StatvfsData()
        for i, m in enumerate(self.members):
            one = await m.ops.statfs(ctx)
            if i == 0:
                total = one
                continue
            for name in ("f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail"):
                setattr(total, name, getattr(total, name) + getattr(one, name))
        return total

    async def getxattr(self, inode: InodeT, name: XAttrNameT,
                       ctx: pyfuse3.RequestContext) -> bytes:
        if inode == SESSION_ROOT:
            raise FUSEError(pyfuse3.ENOATTR)
        return await (await self._ops(inode)).getxattr(inode, name, ctx)

    async def listxattr(self, inode: InodeT,
                        ctx: pyfuse3.RequestContext) -> Sequence[XAttrNameT]:
        if inode == SESSION_ROOT:
            return []
        return await (await self._ops(inode)).listxattr(inode, ctx)

    async def setxattr(self, inode: InodeT, name: XAttrNameT, value: bytes,
                       ctx: pyfuse3.RequestContext) -> None:
        await (await self._ops(inode)).setxattr(inode, name, value, ctx)

    async def removexattr(self, inode: InodeT, name: XAttrNameT,
                          ctx: pyfuse3.RequestContext) -> None:
        await (await self._ops(inode)).removexattr(inode, name, ctx)
