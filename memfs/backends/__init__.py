"""The databases under a store: what a store needs of one (:class:`Database`, typed in
:mod:`~memfs.backends.protocol`), its two implementations, SQLite
(:mod:`~memfs.backends.sqlite`, over the file handling of :mod:`~memfs.backends.files`) and
PostgreSQL (:mod:`~memfs.backends.postgresql`), what a ``--db`` value names and the checks
made before opening it (:mod:`~memfs.backends.targets`), a whole database copied between them
and verified (:mod:`~memfs.backends.copy`, the engine of ``memfs db copy``), the watches that
wake a process when another one commits (:mod:`~memfs.backends.pgwatch`, LISTEN/NOTIFY, and
:mod:`~memfs.backends.watch`, inotify, with the process's shared watch of each database), and
:func:`open_database`, the one place a database is opened. Backends know nothing of memory
stores, nor of the schema (:mod:`memfs.store.schema` migrates a database through the
connections given here): they may import :mod:`memfs.errors` and :mod:`memfs.models`, nothing
above them. Only the watches use trio (their waiters are trio tasks); this package's
``__init__`` imports neither them nor psycopg, which a database of the other kind never loads.
Inside the package a module imports only those before it: ``protocol``, ``scopes``, ``files``,
``targets``, ``sqlite``, ``postgresql``, ``copy``, ``pgwatch``, ``watch``.
"""

from __future__ import annotations

from typing import Any

from ..errors import DatabaseUnavailable
from .protocol import Connection, Cursor, Database, Row
from .sqlite import SQLiteDatabase
from .targets import (
    SQLITE_HEADER,
    check_database,
    check_target,
    default_db_path,
    is_url,
    redact_url,
)

__all__ = [
    "SQLITE_HEADER", "Connection", "Cursor", "Database", "Row", "SQLiteDatabase",
    "check_database", "check_target", "default_db_path", "is_url", "open_database",
    "redact_url",
]


def open_database(target: str, *, check: bool = False, **kwargs: Any) -> Database:
    """The database ``target`` (``--db``, ``MEMFS_DB``) names, as it is (never migrated: a
    :class:`~memfs.store.Store` migrates the one it opens): a
    :class:`~memfs.backends.postgresql.PgDatabase` for a ``postgresql://`` URL (psycopg is
    imported only then), else the :class:`SQLiteDatabase` at that path. ``kwargs`` are
    :class:`SQLiteDatabase`'s (``create``, and SQLite's tuning: a PgDatabase ignores them).

    With ``check`` (a database named by a user, opened without a Store: ``memfs db``), the
    target is checked first (:func:`check_target`; a path with :func:`check_database`), and
    whatever goes wrong opening an SQLite file is :class:`DatabaseUnavailable`.

    :raises DatabaseUnavailable: the database cannot be opened (PostgreSQL: reached).
    """
    if check:
        check_target(target)
    if is_url(target):
        from .postgresql import PgDatabase

        return PgDatabase(target, **kwargs)
    if not check:
        return SQLiteDatabase(target, **kwargs)
    path = check_database(target, create=kwargs.get("create", True))
    try:
        return SQLiteDatabase(path, **kwargs)
    except DatabaseUnavailable:
        raise
    except Exception as e:  # OSError, StorageError, sqlite3.DatabaseError (not a database)
        raise DatabaseUnavailable(f"cannot open the database {path}: {e}") from None
