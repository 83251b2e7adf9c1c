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
for several servers on one database. Its writers are serialised the same way, each on what it
changes: every write names its scopes (``core.write(store_scope(id))``,
:mod:`memfs.backends.scopes`: the store, the session, the key...), an advisory lock each taken
first in the transaction, so the checks above, each a store's own, are as exact, and writes of
two stores commit side by side. A write naming none waits for every other. The SQL here is
what both accept (placeholders ``?`` and ``:name``, ``RETURNING``, no ``IN ()``, no scalar
``max()``); where the two truly differ, the database object holds the fragment
(``position_sql``) and :attr:`Store.dialect` names it.

Known limitations:
- Version retention is enforced when a memory is written and by ``store.versions.prune()``;
  the change feed and the events are bounded by it and by every
  :attr:`Store.feed_prune_every`-th write; nothing prunes in the background.

The package, one module per kind of object. :class:`Store` is made of parts, each an object
that holds what it needs: the store's :class:`~.base.Core` (the database, its transactions and
the change feed's bookkeeping) and the other parts it calls, handed to it when the store is
made (``Memories(core, stores)``). Callers name the part they use: ``store.memories.write_path
(...)``, ``store.versions.list(...)``, ``store.sessions.create(...)``. No part inherits from
another, so a call can be followed from its caller to the SQL with no inherited hop.

- :mod:`~memfs.store.common` (constants, ids, time, argument checks), :mod:`~.paging`
  (cursors), :mod:`~.schema` (the schema described, and both backends' migrations),
  :mod:`~.rows` (rows to models), :mod:`~.revert` (the plan of a revert), :mod:`~.restore`
  (an archive's records checked and made rows) and :mod:`~.look` (what a memory write reads
  first, in one statement, and the overlap rule's SQL): plain functions;
- :mod:`~.base`: :class:`~.base.Core` (the database, transactions, :meth:`Store.batch`) and
  :class:`~.base.Part`, what every part holds;
- the parts, each over the ones it is handed: :mod:`~.feed` (``store.feed``: a store's change
  feed), :mod:`~.stores` (``store.stores``), :mod:`~.memories` (``store.memories``, and the
  filesystem's path operations), :mod:`~.versions` (``store.versions``), :mod:`~.sessions`
  (``store.sessions``: sessions, tokens, resources), :mod:`~.agents` (``store.agents``: the
  API's agents and environments), :mod:`~.events` (``store.events``: events, acting as a
  session), :mod:`~.undo` (``store.undo``: reverting a session), :mod:`~.dreams`
  (``store.dreams``), :mod:`~.archive` (``store.archive``: import, export), :mod:`~.search`
  (``store.search``: recall, the Console's search), :mod:`~.keys` (``store.keys``: API keys,
  workspaces, Console sign-ins), :mod:`~.idempotency` (``store.idempotency``: writes applied
  once per client key, and their deadlines) and :mod:`~.typed` (``store.typed``: typed
  memories described, expired ones swept, a type cleared; what each memory says about itself is
  :mod:`~.frontmatter`'s, derived at its write);
- this module: :class:`Store`, which holds the parts, and the names callers import from here.

The store may import :mod:`memfs.backends` (its databases, and :func:`open_database`),
:mod:`memfs.errors`, :mod:`memfs.models`, :mod:`memfs.rules` and
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
from .agents import Agents
from .archive import Archive
from .base import Core, ExportSnapshot
from .common import (
    CLIENT_EVENT_TYPES,
    EMPTY_SHA256,
    MAX_MESSAGE_BLOCKS,
    MAX_MESSAGE_CHARS,
    MAX_SEND_EVENTS,
    MESSAGE_EVENT_TYPES,
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
from .dreams import Dreams
from .events import Events
from .feed import Feed
from .idempotency import Idempotency
from .keys import KEY_PREFIX, KeyCheck, Keys
from .memories import Memories
from .schema import MIGRATION_SET
from .search import Search, SearchHit
from .sessions import Sessions
from .stores import Stores
from .typed import EXPIRY_ACTOR, SweepReport, Typed
from .undo import Undo
from .versions import Versions

__all__ = [
    "CLIENT_EVENT_TYPES", "EMPTY_SHA256", "MAX_MESSAGE_BLOCKS", "MAX_MESSAGE_CHARS",
    "MAX_SEND_EVENTS",
    "MESSAGE_EVENT_TYPES", "EXPIRY_ACTOR", "KEY_PREFIX", "MIGRATION_SET",
    "SESSION_TOKEN_MAX_TTL", "SESSION_TOKEN_MIN_TTL", "SESSION_TOKEN_PREFIX", "SESSION_TOKEN_TTL",
    "TOOL_EVENT_TYPES", "UNSET", "Agents", "Archive", "Core", "Dreams", "Events", "ExportSnapshot",
    "Feed", "Idempotency", "KeyCheck", "Keys", "Limits", "Memories", "Search", "SearchHit",
    "Sessions", "Store", "Stores", "SweepReport", "Typed", "Undo", "Versions", "check_database",
    "check_token_ttl", "default_db_path", "encode_content", "format_time", "is_url",
    "local_user_actor", "new_id", "no_session", "no_store", "open_database", "open_store",
    "parse_time", "sha256_hex", "slugify", "validate_path", "validate_prefix",
]


class Store(Core):
    """A memfs database, made of parts (the module's docstring): the core it is (the database,
    transactions, lifecycle) and an attribute per part (``store.memories``, ...). Thread-safe:
    writes go through one writer connection, reads through a
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

    def __init__(self, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        # The parts, each handed the core (the database and its transactions) and the parts
        # it calls; a part never reaches one it was not given.
        #: The change feed of each store (what mounts, streams and the indexer follow).
        self.feed = Feed(self)
        #: Memory stores: create, get, resolve, update, archive, delete, list.
        self.stores = Stores(self)
        #: Memories, and the filesystem's path operations (write, delete, rename).
        self.memories = Memories(self, self.stores)
        #: Versions: list, get, restore, redact, prune, and a store as of a moment.
        self.versions = Versions(self, self.stores, self.memories)
        #: Sessions, their tokens and their resources.
        self.sessions = Sessions(self)
        #: The API's agents and environments, which sessions snapshot.
        self.agents = Agents(self, self.sessions)
        #: Session events (tool events, client events), and acting as a session.
        self.events = Events(self, self.sessions)
        #: Undoing a session (or a version's successors): a revert.
        self.undo = Undo(self, self.memories, self.sessions)
        #: Dreams: their lifecycle, and their output store.
        self.dreams = Dreams(self, self.stores, self.sessions, self.memories)
        #: Import and export.
        self.archive = Archive(self, self.stores, self.memories)
        #: Recall (words and meaning), the Console's search, the search index.
        self.search = Search(self, self.sessions)
        #: API keys, workspaces, Console sign-ins.
        self.keys = Keys(self)
        #: Writes applied once per client key, and their deadlines.
        self.idempotency = Idempotency(self)
        #: Typed memories: describe a store, sweep expired memories, clear a type.
        self.typed = Typed(self, self.stores, self.memories)
        # The memories written before typed memories existed, derived once (SPEC §8).
        self.typed.reindex_pending()


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
