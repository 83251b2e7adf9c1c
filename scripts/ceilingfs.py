#!/usr/bin/env python3
"""A zero-work in-memory pyfuse3 filesystem: the ceiling of any Python FUSE daemon.

Usage: ceilingfs.py MOUNTPOINT [--timeout 300] [--ack FILE]

Everything lives in dicts of this process (contents as bytearrays, attributes as the very
``EntryAttributes`` objects handed to the kernel), every open file gets ``keep_cache`` and
every entry and attribute the kernel may cache for --timeout seconds (300). No request does
more than a dict lookup or a bytearray copy, so whatever a pyfuse3 daemon that does real work
(memfs: an SQLite version at each close) takes beyond this is the cost of its work; what this
takes is the cost of the kernel round trips through pyfuse3 and trio. It implements what
scripts/bench's workload needs (create, write, read, truncate, rename, unlink, mkdir, rmdir,
readdir, statfs) and answers FLUSH and RELEASE like any daemon that must see a close (a daemon
answering ENOSYS to FLUSH would be spared them, which memfs cannot be).

SIGUSR1 makes the kernel forget this mount's cached entries, attributes and pages (the
daemon keeps its data), then writes the number of inodes to --ack: scripts/bench's "cold"
for a filesystem whose restart would lose its contents. SIGTERM/SIGINT unmount.

Content is lost when the daemon exits: a benchmark fixture, not a filesystem to keep data in.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import signal
import stat
import sys
import time
from collections.abc import Sequence

import pyfuse3
import trio
from pyfuse3 import FileHandleT, FileNameT, FlagT, FUSEError, InodeT, ModeT

log = logging.getLogger("ceilingfs")


class CeilingOperations(pyfuse3.Operations):
    """The tree as dicts: attributes, children (directories) and contents (files)."""

    supports_dot_lookup = False
    enable_writeback_cache = False

    def __init__(self, timeout: float) -> None:
        super().__init__()
        self.timeout = timeout
        self._attrs: dict[int, pyfuse3.EntryAttributes] = {}
        self._children: dict[int, dict[bytes, int]] = {}
        self._data: dict[int, bytearray] = {}
        self._next_inode = pyfuse3.ROOT_INODE
        self._new_inode(stat.S_IFDIR | 0o755, os.getuid(), os.getgid())

    def _new_inode(self, mode: int, uid: int, gid: int) -> pyfuse3.EntryAttributes:
        inode = self._next_inode
        self._next_inode += 1
        now = time.time_ns()
        attr = pyfuse3.EntryAttributes()
        attr.st_ino = InodeT(inode)
        attr.generation = 0
        attr.entry_timeout = self.timeout
        attr.attr_timeout = self.timeout
        attr.st_mode = ModeT(mode)
        attr.st_nlink = 2 if stat.S_ISDIR(mode) else 1
        attr.st_uid = uid
        attr.st_gid = gid
        attr.st_rdev = 0
        attr.st_size = 0
        attr.st_blksize = 4096
        attr.st_blocks = 0
        attr.st_atime_ns = attr.st_mtime_ns = attr.st_ctime_ns = now
        self._attrs[inode] = attr
        if stat.S_ISDIR(mode):
            self._children[inode] = {}
        else:
            self._data[inode] = bytearray()
        return attr

    def _dir(self, inode: int) -> dict[bytes, int]:
        try:
            return self._children[inode]
        except KeyError:
            raise FUSEError(errno.ENOTDIR) from None

    def _set_size(self, inode: int, size: int) -> None:
        data = self._data[inode]
        if size < len(data):
            del data[size:]
        else:
            data.extend(bytes(size - len(data)))
        attr = self._attrs[inode]
        attr.st_size = size
        attr.st_blocks = (size + 511) // 512
        attr.st_mtime_ns = attr.st_ctime_ns = time.time_ns()

    # -- names ----------------------------------------------------------------------------

    async def lookup(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        inode = self._dir(parent_inode).get(name)
        if inode is None:
            raise FUSEError(errno.ENOENT)
        return self._attrs[inode]

    async def getattr(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        try:
            return self._attrs[inode]
        except KeyError:
            raise FUSEError(errno.ENOENT) from None

    async def setattr(
        self,
        inode: InodeT,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: FileHandleT | None,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        mine = self._attrs[inode]
        if fields.update_size:
            if inode not in self._data:
                raise FUSEError(errno.EISDIR)
            self._set_size(inode, attr.st_size)
        if fields.update_mode:
            mine.st_mode = ModeT(stat.S_IFMT(mine.st_mode) | stat.S_IMODE(attr.st_mode))
        if fields.update_uid:
            mine.st_uid = attr.st_uid
        if fields.update_gid:
            mine.st_gid = attr.st_gid
        if fields.update_atime:
            mine.st_atime_ns = attr.st_atime_ns
        if fields.update_mtime:
            mine.st_mtime_ns = attr.st_mtime_ns
        mine.st_ctime_ns = time.time_ns()
        return mine

    async def mkdir(
        self, parent_inode: InodeT, name: FileNameT, mode: ModeT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        children = self._dir(parent_inode)
        if name in children:
            raise FUSEError(errno.EEXIST)
        attr = self._new_inode(stat.S_IFDIR | (mode & ~ctx.umask & 0o7777), ctx.uid, ctx.gid)
        children[name] = attr.st_ino
        self._attrs[parent_inode].st_nlink += 1
        return attr

    async def create(
        self,
        parent_inode: InodeT,
        name: FileNameT,
        mode: ModeT,
        flags: FlagT,
        ctx: pyfuse3.RequestContext,
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        children = self._dir(parent_inode)
        inode = children.get(name)
        if inode is not None:
            # The kernel sends CREATE only for a name it does not know, but it may be stale.
            if flags & os.O_EXCL:
                raise FUSEError(errno.EEXIST)
            return await self.open(InodeT(inode), flags, ctx), self._attrs[inode]
        attr = self._new_inode(stat.S_IFREG | (mode & ~ctx.umask & 0o7777), ctx.uid, ctx.gid)
        children[name] = attr.st_ino
        return pyfuse3.FileInfo(fh=FileHandleT(attr.st_ino), keep_cache=True), attr

    async def unlink(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        children = self._dir(parent_inode)
        inode = children.get(name)
        if inode is None:
            raise FUSEError(errno.ENOENT)
        if inode in self._children:
            raise FUSEError(errno.EISDIR)
        del children[name]
        # The contents stay until the kernel forgets the inode: an open file still reads.
        self._attrs[inode].st_nlink = 0

    async def rmdir(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        children = self._dir(parent_inode)
        inode = children.get(name)
        if inode is None:
            raise FUSEError(errno.ENOENT)
        if inode not in self._children:
            raise FUSEError(errno.ENOTDIR)
        if self._children[inode]:
            raise FUSEError(errno.ENOTEMPTY)
        del children[name]
        del self._children[inode]
        self._attrs[inode].st_nlink = 0
        self._attrs[parent_inode].st_nlink -= 1

    async def rename(
        self,
        parent_inode_old: InodeT,
        name_old: FileNameT,
        parent_inode_new: InodeT,
        name_new: FileNameT,
        flags: FlagT,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        if flags & pyfuse3.RENAME_EXCHANGE:
            raise FUSEError(errno.EINVAL)
        old_dir, new_dir = self._dir(parent_inode_old), self._dir(parent_inode_new)
        inode = old_dir.get(name_old)
        if inode is None:
            raise FUSEError(errno.ENOENT)
        displaced = new_dir.get(name_new)
        if displaced is not None:
            if flags & pyfuse3.RENAME_NOREPLACE:
                raise FUSEError(errno.EEXIST)
            if displaced in self._children:
                if inode not in self._children:
                    raise FUSEError(errno.EISDIR)
                if self._children[displaced]:
                    raise FUSEError(errno.ENOTEMPTY)
                del self._children[displaced]
                self._attrs[parent_inode_new].st_nlink -= 1
            elif inode in self._children:
                raise FUSEError(errno.ENOTDIR)
            self._attrs[displaced].st_nlink = 0
        del old_dir[name_old]
        new_dir[name_new] = inode
        if inode in self._children and parent_inode_old != parent_inode_new:
            self._attrs[parent_inode_old].st_nlink -= 1
            self._attrs[parent_inode_new].st_nlink += 1

    async def forget(self, inode_list: Sequence[tuple[InodeT, int]]) -> None:
        # Zero work: an unlinked inode's few bytes stay until the daemon exits.
        return

    # -- files ----------------------------------------------------------------------------

    async def open(
        self, inode: InodeT, flags: FlagT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.FileInfo:
        if inode not in self._data:
            raise FUSEError(errno.EISDIR)
        if flags & os.O_TRUNC and self._data[inode]:
            self._set_size(inode, 0)
        return pyfuse3.FileInfo(fh=FileHandleT(inode), keep_cache=True)

    async def read(self, fh: FileHandleT, off: int, size: int) -> bytes:
        return bytes(self._data[fh][off : off + size])

    async def write(self, fh: FileHandleT, off: int, buf: bytes) -> int:
        data = self._data[fh]
        end = off + len(buf)
        if off > len(data):
            data.extend(bytes(off - len(data)))
        data[off:end] = buf
        attr = self._attrs[fh]
        attr.st_size = len(data)
        attr.st_blocks = (len(data) + 511) // 512
        attr.st_mtime_ns = attr.st_ctime_ns = time.time_ns()
        return len(buf)

    async def flush(self, fh: FileHandleT) -> None:
        return

    async def fsync(self, fh: FileHandleT, datasync: bool) -> None:
        return

    async def release(self, fh: FileHandleT) -> None:
        return

    # -- directories ----------------------------------------------------------------------

    async def opendir(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> FileHandleT:
        self._dir(inode)
        return FileHandleT(inode)

    async def readdir(self, fh: FileHandleT, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        # start_id indexes the current listing; the workload never changes a directory while
        # it lists it.
        entries = list(self._children.get(fh, {}).items())
        for index in range(start_id, len(entries)):
            name, inode = entries[index]
            if not pyfuse3.readdir_reply(token, FileNameT(name), self._attrs[inode], index + 1):
                return

    async def releasedir(self, fh: FileHandleT) -> None:
        return

    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        data = pyfuse3.StatvfsData()
        data.f_bsize = data.f_frsize = 4096
        data.f_blocks = data.f_bfree = data.f_bavail = 1 << 20
        data.f_files = data.f_ffree = data.f_favail = 1 << 20
        data.f_namemax = 255
        return data

    # -- forgetting (SIGUSR1) -------------------------------------------------------------

    def forget_kernel_caches(self) -> int:
        """Make the kernel drop this mount's entries, attributes and pages (blocking: call it
        from a worker thread, never from a request handler)."""
        for parent, children in list(self._children.items()):
            for name in list(children):
                # OSError: the kernel does not hold it.
                with contextlib.suppress(OSError):
                    pyfuse3.invalidate_entry(parent, FileNameT(name))
        for inode in list(self._attrs):
            with contextlib.suppress(OSError):
                pyfuse3.invalidate_inode(InodeT(inode), attr_only=False)
        return len(self._attrs)


def _write_ack(path: str, count: int) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(f"{count}\n")
    os.replace(tmp, path)


async def _serve(ops: CeilingOperations, ack: str | None) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_on_signals, ops, ack)
        await pyfuse3.main()
        nursery.cancel_scope.cancel()


async def _on_signals(ops: CeilingOperations, ack: str | None) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGUSR1) as signals:
        async for signum in signals:
            if signum == signal.SIGUSR1:
                count = await trio.to_thread.run_sync(ops.forget_kernel_caches)
                if ack:
                    await trio.to_thread.run_sync(_write_ack, ack, count)
                continue
            log.info("got %s, unmounting", signal.Signals(signum).name)
            pyfuse3.terminate()
            return


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mountpoint")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="kernel entry/attr cache timeout in seconds (default: 300)")
    parser.add_argument("--ack", help="file written after SIGUSR1 dropped the kernel caches")
    parser.add_argument("--debug-fuse", action="store_true", help="libfuse request tracing")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s ceilingfs %(message)s")
    ops = CeilingOperations(args.timeout)
    options = set(pyfuse3.default_options)
    options |= {"fsname=ceiling", "subtype=ceiling"}
    if args.debug_fuse:
        options.add("debug")
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        pyfuse3.init(ops, args.mountpoint, options)
    except RuntimeError as exc:
        log.error("cannot mount %s: %s", args.mountpoint, exc)
        return 1
    try:
        trio.run(_serve, ops, args.ack)
    except KeyboardInterrupt:
        log.info("interrupted, unmounting")
    finally:
        pyfuse3.close(unmount=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
