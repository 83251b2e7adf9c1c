"""The files of an SQLite database, handled without dropping SQLite's locks: the descriptors
the process holds already, a header read through one, a new file made private, and our WAL
and shared-memory files removed from beside a path only while they are still ours.

POSIX drops every lock a process holds on a file when ANY of its descriptors of that file is
closed (https://sqlite.org/howtocorrupt.html §2.2): so nothing here opens a database file that
SQLite may have open and closes it again.
"""

from __future__ import annotations

import logging
import os
from contextlib import suppress
from pathlib import Path

log = logging.getLogger(__name__)


def held_fd(path: str, file_id: tuple[int, int] | None = None) -> int | None:
    """A descriptor of the file at ``path`` (or of the file ``(device, inode)``) that this
    process holds already (SQLite's, say), or None.

    Never open a database file SQLite may have open in this process and close it again:
    closing ANY descriptor of a file drops every POSIX lock the process holds on it, SQLite's
    included (https://sqlite.org/howtocorrupt.html §2.2). Without its shared lock, another
    process closing its last connection believes it is the last one, checkpoints and deletes
    the WAL that this process still writes to: commits are lost.
    """
    try:
        if file_id is None:
            st = os.stat(path)
            file_id = (st.st_dev, st.st_ino)
        target = os.path.realpath(path)
        names = os.listdir("/proc/self/fd")
    except OSError:
        return None
    for name in names:
        try:
            if os.readlink(f"/proc/self/fd/{name}") != target:
                continue
            fd = int(name)
            st = os.fstat(fd)
        except (OSError, ValueError):
            continue
        if (st.st_dev, st.st_ino) == file_id:
            return fd
    return None


def read_head(path: str, size: int) -> bytes:
    """The first ``size`` bytes of the file at ``path``, read through a descriptor the process
    holds already if there is one (:func:`held_fd`): never dropping SQLite's locks."""
    fd = held_fd(path)
    if fd is not None:
        return os.pread(fd, size, 0)
    # No descriptor of this file in the process: no lock of ours on it to drop.
    with open(path, "rb") as f:
        return f.read(size)


def inode_of(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path`` (symbolic links followed), None if none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def unlink_if(path: str, file_id: tuple[int, int] | None) -> bool:
    """Remove ``path`` if it is still the file ``file_id`` (never a file put there since)."""
    if file_id is None or inode_of(path) != file_id:
        return False
    try:
        os.unlink(path)
    except OSError as e:
        log.warning("cannot remove %s: %s", path, e.strerror or e)
        return False
    return True


def create_private(path: str) -> None:
    """Make a new database file its owner's only: the directories made for it 0700, the file
    0600 (SQLite gives its WAL and shared-memory files the database file's mode). Every store
    of the database is in that file: no other user (an agent run as one) may read it. An
    existing file or directory is left as it is."""
    parent = Path(path).absolute().parent
    missing = []
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for d in reversed(missing):
        with suppress(FileExistsError):  # made by another process meanwhile
            d.mkdir(mode=0o700)
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))


def fsync_directory(path: str) -> None:
    """Make the removal of a file beside ``path`` durable (logged if it cannot be)."""
    try:
        fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        log.warning("cannot sync the directory of %s: %s", path, e.strerror or e)
