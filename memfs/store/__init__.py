"""The store: every rule of a memory store, on one SQLite database (or on PostgreSQL).

This is the single source of truth (SPEC §1). Validation, limits and versioning live here and
nowhere else; the filesystem, the HTTP API and the CLI call these methods and translate the
:mod:`memfs.errors` they raise.

Concurrency: any number of processes (mounts, the server, the CLI) may open the same database.
It runs in WAL mode, so readers never block. Every mutation is one ``BEGIN IMMEDIATE``
transaction: the write lock is taken *before* anything is read, so a check such as "fewer than
2,000 memories" and the insert that relies on it cannot interleave with another writer's.
(A deferred ``BEGIN`` that later upgrades to a write fails at once with SQLITE_BUSY when another
writer committed in between; see https://sqlite.org/lang_transaction.html.) A writer that finds
the lock taken sleeps and retries with backoff, holding no lock of ours meanwhile, so "database
is locked" never reaches a user and nothing else in the process waits behind it; only after
:data:`WRITE_PATIENCE` seconds does it give up with :class:`Busy` (:mod:`memfs.backends.sqlite`).

PostgreSQL (a ``postgresql://`` URL, :mod:`memfs.backends`): the same rules on the same SQL,
for several servers on one database. Its writers are serialised the same way (an advisory lock
taken first in every write transaction), so the checks above are as exact. The SQL here is
what both accept (placeholders ``?`` and ``:name``, ``RETURNING``, no ``IN ()``, no scalar
``max()``); where the two truly differ, the database object holds the fragment
(``position_sql``) and :attr:`Store.dialect` names it.

Known limitations:
- Version retention is enforced when a memory is written and by :meth:`Store.prune_versions`;
  the change feed and the events are bounded by it and by every
  :attr:`Store.feed_prune_every`-th write; nothing prunes in the background.

The package, one module per kind of object, each a part of :class:`Store` that builds on
the parts before it (it may call their methods; never the other way round):

- :mod:`~memfs.store.common` (constants, ids, time, argument checks), :mod:`~.paging`
  (cursors), :mod:`~.schema` (the schema described, and both backends' migrations),
  :mod:`~.rows` (rows to models): plain functions;
- :mod:`~.base` (the database, transactions, the change feed), :mod:`~.stores`,
  :mod:`~.memories` (and the filesystem's path operations), :mod:`~.versions`,
  :mod:`~.sessions` (and tokens), :mod:`~.events` (and agents, environments), :mod:`~.undo`
  (reverting a session), :mod:`~.dreams`, :mod:`~.archive` (import, export),
  :mod:`~.search` (the Console's search, recall), :mod:`~.keys` (API keys, workspaces) and
  :mod:`~.idempotency` (writes applied once per client key, and their deadlines): the parts,
  in that order;
- this module: :class:`Store`, the last part, and the names callers import from here.

The store may import :mod:`memfs.backends` (its databases, and :func:`open_database`),
:mod:`memfs.errors`, :mod:`memfs.models`, :mod:`memfs.rules`, :mod:`memfs.revert` and
:mod:`memfs.recall`; nothing above it (the filesystem, the API, the CLI).
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from ..backends import check_database, default_db_path, is_url, open_database, redact_url
from ..errors import DatabaseUnavailable, StorageError
from ..rules import (
    Limits,
    encode_content,
    format_time,
    local_user_actor,
    new_id,
    parse_time,
    slugify,
    validate_path,
    validate_prefix,
)
from .base import ExportSnapshot
from .common import (
    CLIENT_EVENT_TYPES,
    EMPTY_SHA256,
    SESSION_TOKEN_MAX_TTL,
    SESSION_TOKEN_MIN_TTL,
    SESSION_TOKEN_PREFIX,
    SESSION_TOKEN_TTL,
    TOOL_EVENT_TYPES,
    UNSET,
    check_token_ttl,
    no_session,
    no_store,
    sha256_hex,
)
from .idempotency import IdempotencyPart
from .keys import KEY_PREFIX, KeyCheck
from .schema import MIGRATION_SET
from .search import SearchHit

__all__ = [
    "CLIENT_EVENT_TYPES", "EMPTY_SHA256", "KEY_PREFIX", "MIGRATION_SET", "SESSION_TOKEN_MAX_TTL",
    "SESSION_TOKEN_MIN_TTL", "SESSION_TOKEN_PREFIX", "SESSION_TOKEN_TTL", "TOOL_EVENT_TYPES",
    "UNSET", "ExportSnapshot", "KeyCheck", "Limits", "SearchHit", "Store", "check_database",
    "check_token_ttl", "default_db_path", "encode_content", "format_time", "is_url",
    "local_user_actor", "new_id", "no_session", "no_store", "open_database", "open_store",
    "parse_time", "sha256_hex", "slugify", "validate_path", "validate_prefix",
]


class Store(IdempotencyPart):
    """A memfs database. Thread-safe: writes go through one writer connection, reads through a
    connection per thread that never waits on the writer
    (:class:`memfs.backends.SQLiteDatabase`).

    :param path: the database file (created with its directory if missing, unless
        ``create=False``); default :func:`default_db_path` (never created unless
        ``create=True``). ``":memory:"`` works for tests that use one process.
    :param limits: the limits to enforce; default :meth:`Limits.from_env`.
    :param synchronous: ``FULL`` (every commit on disk before it returns) or ``NORMAL``
        (commits survive a killed process; :meth:`sync` puts them on disk).
    :param checkpoint_pages: WAL pages between automatic checkpoints (SQLite's default 1000).
    :param checkpoint_behind: checkpoint in a thread of its own, not in the commits
        (:mod:`memfs.backends.checkpoint`; SQLite only).
    :param create: make the database if the file is missing (else DatabaseUnavailable).
        Default: only when ``path`` is given; the database of ``MEMFS_DB`` or the default path
        must exist (a mistyped ``MEMFS_DB`` is an error, not a new empty database).
    """


def open_store(path: str | os.PathLike[str] | None = None, *, create: bool,
               **kwargs: Any) -> Store:
    """:func:`check_database`, then ``Store(path, **kwargs)``: what every command opens its
    database with. An error SQLite or the OS raises while opening it (``/proc/x.db``, a
    read-only file system) becomes :class:`DatabaseUnavailable` too.

    :raises DatabaseUnavailable: see :func:`check_database`.
    """
    path = check_database(path, create=create)
    try:
        return Store(path, create=create, **kwargs)
    except DatabaseUnavailable:
        raise
    except (sqlite3.DatabaseError, OSError, StorageError) as e:
        if isinstance(e, StorageError):
            reason = e.message
        else:
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise DatabaseUnavailable(
            f"cannot open the database {redact_url(path)}: {reason}") from None


def __getattr__(name: str) -> Any:
    if name == "migrations":  # the sqlite-utils Migrations (tests), built on first use
        from .schema import sqlite

        return sqlite.migration_set()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
