"""Where the database is and whether a file is one: the default path, the header
check, opening a file or a URL."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any

from ..database import Backend, Database, is_url, read_head
from ..errors import DatabaseUnavailable

log = logging.getLogger(__name__)


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
    """Check, without opening or creating anything, that :class:`Store` can open ``path``
    (default :func:`default_db_path`); returns the path.

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


def open_database(target: str, **kwargs: Any) -> Backend:
    """The database ``target`` (``--db``, ``MEMFS_DB``) names: a
    :class:`memfs.pgdatabase.PgDatabase` for a ``postgresql://`` URL (psycopg is imported only
    then), else the SQLite :class:`~memfs.database.Database` at that path. ``kwargs`` are
    :class:`~memfs.database.Database`'s (SQLite's tuning: a PgDatabase ignores them)."""
    if is_url(target):
        from ..pgdatabase import PgDatabase

        return PgDatabase(target, **kwargs)
    return Database(target, **kwargs)
