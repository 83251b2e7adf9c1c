"""What the mount says to the kernel and reads of it: errnos, ``/proc``, the kernel's caches.

* :func:`errno_for`: the errno of a :mod:`memfs.errors` exception, its row's in the one table
  of errors (:data:`memfs.errors.WIRE`; SPEC §2), and :class:`Failure`, a handler's expected
  failure (its errno and why).
* :func:`fds_on`: how many descriptors a process holds of an inode of the mount, read from
  ``/proc`` (never through the mount).
* :func:`reply_dots`: a listing's "." and "..".
* :func:`invalidate_inodes` and :func:`invalidate_now`: what the kernel must forget.
* :func:`handler`: pyfuse3's contract kept by every handler (only ``FUSEError`` leaves one).
"""

from __future__ import annotations

import errno
import functools
import logging
import os
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import pyfuse3
from pyfuse3 import FileNameT, FUSEError, InodeT

from .. import errors
from .spin import Spinner

log = logging.getLogger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")


class _Kicks(Protocol):
    spinner: Spinner | None

    def kick(self) -> None: ...


class _Serves(Protocol):
    @property
    def mount(self) -> _Kicks: ...


#: The handlers' object (:class:`~memfs.fuse.ops.Operations`): its mount
#: (:class:`~memfs.fuse.core.Mount`) has queued kernel invalidations sent with
#: :meth:`~memfs.fuse.core.Mount.kick`, and tells its :class:`~memfs.fuse.spin.Spinner` when a
#: request starts and ends.
_O = TypeVar("_O", bound=_Serves)


#: The longest file name, in bytes, that the mount accepts (what statfs says).
NAME_MAX = 255


def errno_for(exc: errors.MemfsError) -> int:
    """The errno that stands for a store error (its row's in :data:`memfs.errors.WIRE`)."""
    return errors.wire(exc).errno


class Failure(Exception):
    """An expected failure of one handler: the errno, and the line for the event log."""

    def __init__(self, errno_: int, why: str) -> None:
        super().__init__(errno_, why)
        self.errno = errno_
        self.why = why

    @classmethod
    def of(cls, exc: errors.MemfsError) -> Failure:
        code = errno_for(exc)
        if isinstance(exc, errors.StorageError):
            log.error("the database refused a write: %s", exc.message)
        elif code == errno.EIO:  # not a rule of the store: the database or server failed
            log.warning("answering EIO: %s", exc.message)
        return cls(code, exc.message)

    def text(self) -> str:
        return f"{errno.errorcode.get(self.errno, str(self.errno))}: {self.why}"


def fds_on(pid: int, mountpoint: str, ino: int) -> int:
    """How many descriptors of process ``pid`` refer to inode ``ino`` of the mount at
    ``mountpoint`` (read from ``/proc/<pid>/fd`` and ``fdinfo``, never through the mount).

    Every writable close with something to save asks it, and a process may hold dozens of
    descriptors: each link is read relative to the directory, opened once (``readlinkat``),
    which spares the kernel the walk of ``/proc/<pid>/fd/`` for each one; only those into the
    mount have their ``fdinfo`` read. The directory is listed by its path: listing it through
    the descriptor costs more (Python duplicates it, and ``fdopendir`` checks it).
    """
    prefix = mountpoint.rstrip("/") + "/"
    path = f"/proc/{pid}/fd"
    try:
        names = os.listdir(path)
        fd_dir = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        n = 0
        for name in names:
            try:
                target = os.readlink(name, dir_fd=fd_dir)
            except OSError:
                continue
            if target.startswith(prefix):
                n += _fdinfo_on(pid, name, ino)
        return n
    finally:
        os.close(fd_dir)


def _fdinfo_on(pid: int, name: str, ino: int) -> int:
    """1 if descriptor ``name`` of ``pid`` (one into the mount) refers to inode ``ino``, or
    if its ``fdinfo`` has no ``ino:`` (an old kernel: counted, the safe side); else 0."""
    try:
        with open(f"/proc/{pid}/fdinfo/{name}", "rb") as f:
            info = f.read()
    except OSError:
        return 0
    for line in info.splitlines():
        if line.startswith(b"ino:"):
            return int(int(line[4:]) == ino)
    return 1


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


def invalidate_inodes(inodes: list[int], attr_only: bool = False) -> None:
    """Make the kernel forget these inodes' attributes, and their pages unless
    ``attr_only``."""
    for ino in inodes:
        try:
            pyfuse3.invalidate_inode(InodeT(ino), attr_only)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOTCONN):
                log.warning("invalidate_inode(%d, attr_only=%s): %s", ino, attr_only, e)


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


def handler(fn: Callable[Concatenate[_O, _P], Coroutine[Any, Any, _R]]
             ) -> Callable[Concatenate[_O, _P], Coroutine[Any, Any, _R]]:
    """Make a handler keep pyfuse3's contract: only FUSEError leaves it.

    Store errors become their errno; anything else is a bug, logged with its traceback and
    answered with EIO for this call only (an exception escaping into pyfuse3's main loop would
    leave the request unanswered and the mount hung). Kernel invalidations the handler queued
    are sent right after. The mount's :class:`~memfs.fuse.spin.Spinner` is told when it
    starts and ends.
    """

    @functools.wraps(fn)
    async def wrapper(ops: _O, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        mount = ops.mount
        spinner = mount.spinner
        if spinner is not None:
            spinner.started()
        try:
            return await fn(ops, *args, **kwargs)
        except FUSEError:
            raise
        except Failure as e:
            raise FUSEError(e.errno) from None
        except errors.MemfsError as e:
            raise FUSEError(Failure.of(e).errno) from None
        except Exception:
            log.exception("bug in %s; answering EIO", fn.__name__)
            raise FUSEError(errno.EIO) from None
        finally:
            mount.kick()
            if spinner is not None:
                spinner.ended()

    return wrapper
