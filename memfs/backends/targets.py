"""What a ``--db`` / ``MEMFS_DB`` value names, checked without opening anything: a
PostgreSQL URL or the path of an SQLite file (:func:`is_url`, :func:`check_target`), the
default path, whether a file there is an SQLite database (the header check), and a URL
without its password to print."""

from __future__ import annotations

import logging
import os
import stat
import urllib.parse
from pathlib import Path

from ..errors import DatabaseUnavailable
from .files import read_head

log = logging.getLogger(__name__)


def is_url(target: str) -> bool:
    """Whether a ``--db`` / ``MEMFS_DB`` value names a PostgreSQL database (else it is the
    path of an SQLite file)."""
    return target.startswith(("postgresql://", "postgres://"))


def redact_url(target: str) -> str:
    """``target`` without a password it may hold (a PostgreSQL URL's), to print or log."""
    parts = urllib.parse.urlsplit(target)
    if not is_url(target) or parts.password is None:
        return target
    user, host = parts.netloc.rsplit("@", 1)
    return urllib.parse.urlunsplit(
        parts._replace(netloc=f"{user.split(':', 1)[0]}:***@{host}"))


def check_target(target: str) -> str:
    """``target`` if it names a database memfs can open: a ``postgresql://`` URL or a file
    path (another scheme, ``mysql://…``, is an error, not a file to create)."""
    if "://" in target and not is_url(target):
        raise DatabaseUnavailable(
            f"cannot use {redact_url(target)}: not a postgresql:// URL or a file path")
    return target


def default_db_path() -> Path:
    """``$MEMFS_DB``, else ``$XDG_DATA_HOME/memfs/memfs.db`` (``~/.local/share/memfs/``).

    As the XDG spec says, a relative ``XDG_DATA_HOME`` is ignored; so is a ``HOME`` that is
    empty or relative (an empty one would put the database under ``/``). Without ``HOME`` the
    user's home directory from the password database is used.

    :raises DatabaseUnavailable: neither gives an absolute directory.
    """
    if os.environ.get("MEMFS_DB"):
        return Path(os.environ["MEMFS_DB"])
    base = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):
        home = os.environ["HOME"] if "HOME" in os.environ else _passwd_home()
        if not os.path.isabs(home):
            raise DatabaseUnavailable(
                "no place for the database: neither XDG_DATA_HOME nor HOME is an absolute "
                "directory; set MEMFS_DB or pass --db"
            )
        base = os.path.join(home, ".local", "share")
    return Path(base) / "memfs" / "memfs.db"


def _passwd_home() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return ""


#: The first 16 bytes of every SQLite 3 database file (https://sqlite.org/fileformat.html).
SQLITE_HEADER = b"SQLite format 3\x00"


def check_database(path: str | os.PathLike[str] | None, *, create: bool) -> str:
    """Check, without opening or creating anything, that :class:`~memfs.store.Store` can open
    ``path`` (default :func:`default_db_path`); returns the path.

    With ``create=False`` the file must exist and be an SQLite database: a command that only
    reads never creates a database (a mistyped path is an error, not a new empty database).
    With ``create=True`` a missing file is fine when its directory exists (or can be made) and
    is writable; an empty file is fine too (SQLite makes it a database).

    :raises DatabaseUnavailable: one line naming the path and what is wrong with it.
    """
    path = os.fspath(default_db_path() if path is None else path)
    if path == ":memory:" or is_url(path):  # a PostgreSQL URL: checked when connecting
        return path
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:  # a file on the way (ENOTDIR), no permission, a loop...
        raise DatabaseUnavailable(f"cannot use the database {path}: {e.strerror}") from None
    if st is None:
        if not create:
            raise DatabaseUnavailable(
                f"no database at {path} (check --db / MEMFS_DB; `memfs stores create NAME` "
                "creates one)"
            )
        parent = os.path.dirname(os.path.abspath(path))
        while not os.path.lexists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):
            raise DatabaseUnavailable(f"cannot create the database {path}: {parent} is not a "
                                      "directory")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise DatabaseUnavailable(f"cannot create the database {path}: {parent} is not "
                                      "writable")
        return path
    if stat.S_ISDIR(st.st_mode):
        raise DatabaseUnavailable(f"the database {path} is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise DatabaseUnavailable(f"the database {path} is not a regular file")
    try:
        header = read_head(path, len(SQLITE_HEADER))
    except OSError as e:
        raise DatabaseUnavailable(f"cannot read the database {path}: {e.strerror}") from None
    if not header and create:
        return path
    if not header:
        raise DatabaseUnavailable(f"the database {path} is an empty file, not a memfs database")
    if header != SQLITE_HEADER:
        raise DatabaseUnavailable(f"{path} is not an SQLite database")
    return path

