#!/usr/bin/env python3
"""Minimal pyfuse3 passthrough filesystem: the "Python FUSE floor" for scripts/bench.

Mirrors SOURCE at MOUNTPOINT. It does the least work a correct pyfuse3 + trio filesystem can
do per request (one or two syscalls on the backing directory), so the benchmark can tell the
cost of FUSE plus a Python daemon apart from the cost of memfs' own logic (SQLite, versions,
events). Structure after pyfuse3's examples/passthroughfs.py; the code is our own.

Usage: passthroughfs.py SOURCE MOUNTPOINT [--timeout S] [--writeback-cache] [--debug]

Kernel caching is set up the way memfs is expected to use it: entry and attribute timeouts of
300 s (every change goes through this mount, so the kernel's view never goes stale) and
``keep_cache`` on open, so page-cache contents survive close/open.

Known limitations (acceptable for a benchmark floor, listed as pyfuse3's examples do):

* FUSE inode numbers are allocated per *path*, not per backing inode: hard links in SOURCE show
  up as separate files (same data, separate kernel caches), and ``link()`` is not supported.
* Changes made to SOURCE behind the mount's back are not noticed until the 300 s timeouts
  expire (there is no invalidation).
* No xattrs, mknod, symlink creation, locks or ``access()`` (``default_permissions`` lets the
  kernel check permissions instead).
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import functools
import logging
import os
import signal
import stat
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, ParamSpec, TypeVar

import pyfuse3
import trio
from pyfuse3 import FileHandleT, FileNameT, FlagT, FUSEError, InodeT, ModeT

log = logging.getLogger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")

# Flags the kernel may pass to open() that must not reach the backing open(): the kernel has
# already resolved creation, and O_NOCTTY is meaningless here.
_OPEN_FLAGS_DROPPED = os.O_CREAT | os.O_EXCL | os.O_NOCTTY

_AT_FDCWD = -100


def _oserror_to_fuse(
    fn: Callable[_P, Coroutine[Any, Any, _R]],
) -> Callable[_P, Coroutine[Any, Any, _R]]:
    """Turn an OSError raised by a handler into the FUSEError pyfuse3 expects.

    pyfuse3 only catches FUSEError (handlers.pxi); anything else escapes into main()'s nursery
    and takes the mount down. Other exceptions are bugs and are left to do exactly that.
    """

    @functools.wraps(fn)
    async def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return await fn(*args, **kwargs)
        except OSError as exc:
            raise FUSEError(exc.errno or errno.EIO) from None

    return wrapper


def _load_renameat2() -> Callable[[bytes, bytes, int], None] | None:
    """Return a renameat2(2) wrapper, or None when libc lacks it (glibc < 2.28).

    The os module has no renameat2, and RENAME_NOREPLACE / RENAME_EXCHANGE cannot be emulated
    atomically with rename(2).
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        func = libc.renameat2
    except (OSError, AttributeError):
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    func.restype = ctypes.c_int

    def renameat2(old: bytes, new: bytes, flags: int) -> None:
        if func(_AT_FDCWD, old, _AT_FDCWD, new, flags) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    return renameat2


_renameat2 = _load_renameat2()


class PassthroughOperations(pyfuse3.Operations):
    """pyfuse3 operations that forward every request to a backing directory.

    Invariants:
      * ``_paths[ino]`` is the backing path of every inode the kernel knows (lookup count > 0),
        or None once it was unlinked or replaced while the kernel still holds it.
      * ``_inodes`` is the reverse map for entries that still have a path.
      * ``_lookups[ino]`` mirrors the kernel's lookup count; forget() drops the inode at zero.
    """

    supports_dot_lookup = True

    def __init__(self, source: str, timeout: float, writeback_cache: bool = False) -> None:
        super().__init__()
        self._source = os.path.realpath(source)
        self._timeout = timeout
        # Read by pyfuse3's init handler from the instance, so it can be set per mount.
        self.enable_writeback_cache = writeback_cache
        self._paths: dict[InodeT, str | None] = {pyfuse3.ROOT_INODE: self._source}
        self._inodes: dict[str, InodeT] = {self._source: pyfuse3.ROOT_INODE}
        self._lookups: dict[InodeT, int] = {pyfuse3.ROOT_INODE: 1}
        self._next_inode = pyfuse3.ROOT_INODE + 1
        # Open file handles are the backing fds; one per open() so access modes never mix.
        self._open_fds: dict[InodeT, set[int]] = {}
        self._fd_inode: dict[int, InodeT] = {}
        # Directory handles hold a listing snapshot taken at opendir(), so that readdir offsets
        # stay stable while entries are added or removed (no skipped or repeated entries).
        self._dirs: dict[int, tuple[str, list[str]]] = {}
        self._next_dir_fh = 1

    # -- inode bookkeeping ---------------------------------------------------------------

    def _path(self, inode: InodeT) -> str:
        path = self._paths.get(inode)
        if path is None:
            raise FUSEError(errno.ENOENT)
        return path

    def _child(self, parent_inode: InodeT, name: FileNameT) -> str:
        parent = self._path(parent_inode)
        name_s = os.fsdecode(name)
        if name_s == ".":
            return parent
        if name_s == "..":
            # Never step above the source: the root's parent is the root, as in a chroot.
            return parent if parent == self._source else os.path.dirname(parent)
        return os.path.join(parent, name_s)

    def _inode_for(self, path: str) -> InodeT:
        """Return the inode for path, allocating one (with lookup count 0) if needed."""
        inode = self._inodes.get(path)
        if inode is None:
            inode = InodeT(self._next_inode)
            self._next_inode += 1
            self._inodes[path] = inode
            self._paths[inode] = path
            self._lookups[inode] = 0
        return inode

    def _drop_if_unused(self, inode: InodeT) -> None:
        if inode == pyfuse3.ROOT_INODE or self._lookups.get(inode, 0) > 0:
            return
        self._lookups.pop(inode, None)
        path = self._paths.pop(inode, None)
        if path is not None and self._inodes.get(path) == inode:
            del self._inodes[path]

    def _detach_path(self, path: str) -> None:
        """Forget which inode lives at path (after unlink/rmdir or being renamed over).

        The inode itself stays until forget(): the kernel may still stat it through an open
        file, which getattr() serves with fstat().
        """
        inode = self._inodes.pop(path, None)
        if inode is not None:
            self._paths[inode] = None

    def _attributes(self, st: os.stat_result, inode: InodeT) -> pyfuse3.EntryAttributes:
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = inode
        entry.generation = 0  # inode numbers are never reused within a mount
        entry.entry_timeout = self._timeout
        entry.attr_timeout = self._timeout
        entry.st_mode = ModeT(st.st_mode)
        entry.st_nlink = st.st_nlink
        entry.st_uid = st.st_uid
        entry.st_gid = st.st_gid
        entry.st_rdev = st.st_rdev
        entry.st_size = st.st_size
        entry.st_blksize = st.st_blksize
        entry.st_blocks = st.st_blocks
        entry.st_atime_ns = st.st_atime_ns
        entry.st_mtime_ns = st.st_mtime_ns
        entry.st_ctime_ns = st.st_ctime_ns
        return entry

    def _stat(self, inode: InodeT) -> os.stat_result:
        fds = self._open_fds.get(inode)
        if fds:
            # fstat also works for files that were unlinked while open.
            return os.fstat(next(iter(fds)))
        return os.lstat(self._path(inode))

    def _lookup_path(self, path: str) -> pyfuse3.EntryAttributes:
        st = os.lstat(path)
        inode = self._inode_for(path)
        self._lookups[inode] += 1
        return self._attributes(st, inode)

    def _chown_to_caller(self, path_or_fd: str | int, ctx: pyfuse3.RequestContext) -> None:
        # The daemon runs as root in the benchmark; new files must belong to the caller for
        # default_permissions to judge later requests correctly.
        if os.geteuid() == 0 and (ctx.uid, ctx.gid) != (0, 0):
            os.chown(path_or_fd, ctx.uid, ctx.gid)

    # -- handlers ------------------------------------------------------------------------

    @_oserror_to_fuse
    async def lookup(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        # ENOENT (rather than st_ino=0) keeps negative entries out of the kernel cache, so a
        # file created later is never hidden for entry_timeout seconds.
        return self._lookup_path(self._child(parent_inode, name))

    async def forget(self, inode_list: Sequence[tuple[InodeT, int]]) -> None:
        for inode, nlookup in inode_list:
            if inode not in self._lookups:
                continue
            self._lookups[inode] -= nlookup
            self._drop_if_unused(inode)

    @_oserror_to_fuse
    async def getattr(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        return self._attributes(self._stat(inode), inode)

    @_oserror_to_fuse
    async def setattr(
        self,
        inode: InodeT,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: FileHandleT | None,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        # Prefer the open fd: it works for unlinked files and matches ftruncate() semantics.
        target: str | int = self._path(inode) if fh is None else int(fh)
        if fields.update_size:
            os.truncate(target, attr.st_size)
        if fields.update_mode:
            os.chmod(target, stat.S_IMODE(attr.st_mode))
        if fields.update_uid or fields.update_gid:
            os.chown(
                target,
                attr.st_uid if fields.update_uid else -1,
                attr.st_gid if fields.update_gid else -1,
            )
        if fields.update_atime or fields.update_mtime:
            # utime() sets both; keep the one the caller did not ask to change.
            old = os.stat(target)
            atime = attr.st_atime_ns if fields.update_atime else old.st_atime_ns
            mtime = attr.st_mtime_ns if fields.update_mtime else old.st_mtime_ns
            os.utime(target, ns=(atime, mtime))
        return self._attributes(self._stat(inode), inode)

    @_oserror_to_fuse
    async def readlink(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> FileNameT:
        return FileNameT(os.fsencode(os.readlink(self._path(inode))))

    @_oserror_to_fuse
    async def mkdir(
        self, parent_inode: InodeT, name: FileNameT, mode: ModeT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        path = self._child(parent_inode, name)
        os.mkdir(path, mode & ~ctx.umask)
        self._chown_to_caller(path, ctx)
        return self._lookup_path(path)

    @_oserror_to_fuse
    async def unlink(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        path = self._child(parent_inode, name)
        os.unlink(path)
        self._detach_path(path)

    @_oserror_to_fuse
    async def rmdir(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        path = self._child(parent_inode, name)
        os.rmdir(path)
        self._detach_path(path)

    @_oserror_to_fuse
    async def rename(
        self,
        parent_inode_old: InodeT,
        name_old: FileNameT,
        parent_inode_new: InodeT,
        name_new: FileNameT,
        flags: FlagT,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        old = self._child(parent_inode_old, name_old)
        new = self._child(parent_inode_new, name_new)
        if flags:
            if _renameat2 is None:
                raise FUSEError(errno.EINVAL)
            _renameat2(os.fsencode(old), os.fsencode(new), int(flags))
        else:
            os.rename(old, new)

        exchange = bool(flags & pyfuse3.RENAME_EXCHANGE)
        moved = self._inodes.pop(old, None)
        displaced = self._inodes.pop(new, None)
        if displaced is not None:
            if exchange:
                self._inodes[old] = displaced
                self._paths[displaced] = old
            else:
                self._paths[displaced] = None
        if moved is not None:
            self._inodes[new] = moved
            self._paths[moved] = new
        # Known inodes below a renamed directory must follow it. Only directories can have
        # such children, so plain file renames skip this O(known inodes) pass.
        is_dir = stat.S_ISDIR(os.lstat(new).st_mode)
        if is_dir or (exchange and stat.S_ISDIR(os.lstat(old).st_mode)):
            self._rebase_children(old, new, exchange)

    def _rebase_children(self, old: str, new: str, exchange: bool) -> None:
        moves: dict[str, str] = {}
        for path in self._inodes:
            if path.startswith(old + os.sep):
                moves[path] = new + path[len(old) :]
            elif exchange and path.startswith(new + os.sep):
                moves[path] = old + path[len(new) :]
        inodes = {path: self._inodes.pop(path) for path in moves}
        for path, target in moves.items():
            self._inodes[target] = inodes[path]
            self._paths[inodes[path]] = target

    @_oserror_to_fuse
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        st = os.statvfs(self._source)
        data = pyfuse3.StatvfsData()
        for field in (
            "f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
            "f_files", "f_ffree", "f_favail", "f_namemax",
        ):  # fmt: skip
            setattr(data, field, getattr(st, field))
        return data

    def _opened(self, inode: InodeT, fd: int) -> pyfuse3.FileInfo:
        self._open_fds.setdefault(inode, set()).add(fd)
        self._fd_inode[fd] = inode
        # keep_cache: the page cache stays valid across opens, because every write goes
        # through this mount (the kernel updates or invalidates it itself).
        return pyfuse3.FileInfo(fh=FileHandleT(fd), keep_cache=True)

    def _backing_flags(self, flags: int) -> int:
        flags &= ~_OPEN_FLAGS_DROPPED
        if self.enable_writeback_cache:
            # With the writeback cache the kernel reads pages of write-only files (partial
            # page writes) and computes append offsets itself (as libfuse's passthrough_ll).
            if flags & os.O_ACCMODE == os.O_WRONLY:
                flags = (flags & ~os.O_ACCMODE) | os.O_RDWR
            flags &= ~os.O_APPEND
        return flags

    @_oserror_to_fuse
    async def open(
        self, inode: InodeT, flags: FlagT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.FileInfo:
        fd = os.open(self._path(inode), self._backing_flags(flags))
        return self._opened(inode, fd)

    @_oserror_to_fuse
    async def create(
        self,
        parent_inode: InodeT,
        name: FileNameT,
        mode: ModeT,
        flags: FlagT,
        ctx: pyfuse3.RequestContext,
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        path = self._child(parent_inode, name)
        fd = os.open(path, self._backing_flags(flags) | os.O_CREAT, mode & ~ctx.umask)
        try:
            self._chown_to_caller(fd, ctx)
            entry = self._lookup_path(path)
        except BaseException:
            os.close(fd)
            raise
        return self._opened(entry.st_ino, fd), entry

    @_oserror_to_fuse
    async def read(self, fh: FileHandleT, off: int, size: int) -> bytes:
        return os.pread(fh, size, off)

    @_oserror_to_fuse
    async def write(self, fh: FileHandleT, off: int, buf: bytes) -> int:
        # FUSE without direct_io requires the whole buffer to be written; pwrite to a
        # local filesystem may still return short, so loop.
        view = memoryview(buf)
        done = 0
        while done < len(view):
            done += os.pwrite(fh, view[done:], off + done)
        return done

    @_oserror_to_fuse
    async def flush(self, fh: FileHandleT) -> None:
        # close(2) on a duplicate reports deferred write errors, as libfuse's passthrough does.
        os.close(os.dup(fh))

    @_oserror_to_fuse
    async def fsync(self, fh: FileHandleT, datasync: bool) -> None:
        if datasync:
            os.fdatasync(fh)
        else:
            os.fsync(fh)

    @_oserror_to_fuse
    async def release(self, fh: FileHandleT) -> None:
        inode = self._fd_inode.pop(fh)
        fds = self._open_fds[inode]
        fds.discard(fh)
        if not fds:
            del self._open_fds[inode]
        os.close(fh)

    @_oserror_to_fuse
    async def opendir(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> FileHandleT:
        path = self._path(inode)
        names = sorted(os.listdir(path))
        fh = self._next_dir_fh
        self._next_dir_fh += 1
        self._dirs[fh] = (path, names)
        return FileHandleT(fh)

    @_oserror_to_fuse
    async def readdir(self, fh: FileHandleT, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        path, names = self._dirs[fh]
        # start_id is an index into the snapshot: the next_id we passed is "index + 1".
        for index in range(start_id, len(names)):
            child = os.path.join(path, names[index])
            try:
                st = os.lstat(child)
            except FileNotFoundError:
                continue  # removed since opendir(); simply not listed
            inode = self._inode_for(child)
            if not pyfuse3.readdir_reply(
                token, FileNameT(os.fsencode(names[index])), self._attributes(st, inode), index + 1
            ):
                self._drop_if_unused(inode)
                return
            # pyfuse3 always answers with READDIRPLUS, so the kernel now holds a lookup.
            self._lookups[inode] += 1

    async def releasedir(self, fh: FileHandleT) -> None:
        self._dirs.pop(fh, None)


def _init_logging(debug: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="%(asctime)s.%(msecs)03d %(name)s %(levelname)s: %(message)s",
        datefmt="%H:%M:%S",
    )


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="directory to mirror")
    parser.add_argument("mountpoint", help="where to mount it")
    parser.add_argument(
        "--timeout", type=float, default=300.0,
        help="kernel entry/attr cache timeout in seconds (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--writeback-cache", action="store_true",
        help="enable the kernel writeback cache (off by default, as in pyfuse3)",
    )  # fmt: skip
    parser.add_argument("--debug", action="store_true", help="debug logging")
    parser.add_argument("--debug-fuse", action="store_true", help="libfuse request tracing")
    return parser.parse_args(argv)


async def _serve() -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_terminate_on_signal)
        await pyfuse3.main()
        # main() also returns when the mount goes away (fusermount3 -u); stop the watcher.
        nursery.cancel_scope.cancel()


async def _terminate_on_signal() -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("got %s, unmounting", signal.Signals(signum).name)
            pyfuse3.terminate()
            return


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    _init_logging(args.debug)
    if not os.path.isdir(args.source):
        log.error("source %s is not a directory", args.source)
        return 2
    ops = PassthroughOperations(args.source, args.timeout, args.writeback_cache)
    options = set(pyfuse3.default_options)  # default_permissions
    options |= {"fsname=passthrough", "subtype=passthrough"}
    if args.debug_fuse:
        options.add("debug")
    # Until trio's signal receiver is installed, let SIGTERM raise KeyboardInterrupt like SIGINT
    # so that the finally below still unmounts (the default action would leave a dead mount).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        pyfuse3.init(ops, args.mountpoint, options)
    except RuntimeError as exc:
        log.error("cannot mount %s: %s", args.mountpoint, exc)
        return 1
    log.debug("mounted %s on %s", args.source, args.mountpoint)
    try:
        trio.run(_serve)
    except KeyboardInterrupt:
        log.info("interrupted, unmounting")
    finally:
        pyfuse3.close(unmount=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
