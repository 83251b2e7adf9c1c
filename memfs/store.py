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
:data:`WRITE_PATIENCE` seconds does it give up with :class:`Busy` (:mod:`memfs.database`).

PostgreSQL (a ``postgresql://`` URL, :mod:`memfs.pgdatabase`): the same rules on the same SQL,
for several servers on one database. Its writers are serialised the same way (an advisory lock
taken first in every write transaction), so the checks above are as exact. The SQL here is
what both accept (placeholders ``?`` and ``:name``, ``RETURNING``, no ``IN ()``, no scalar
``max()``); where the two truly differ, the database object holds the fragment
(``position_sql``) and :attr:`Store.dialect` names it.

Known limitations:
- Version retention is enforced when a memory is written and by :meth:`Store.prune_versions`;
  the change feed and the events are bounded by it and by every
  :attr:`Store.feed_prune_every`-th write; nothing prunes in the background.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import contextlib
import functools
import hashlib
import itertools
import json
import logging
import os
import re
import secrets
import sqlite3
import stat
import threading
import time
import unicodedata
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import xxhash

from .database import Database, is_url, read_head, redact_url
from .errors import (
    Busy,
    Conflict,
    DatabaseUnavailable,
    DirectoryNotEmpty,
    FeedGap,
    ImportRejected,
    InvalidCursor,
    InvalidRequest,
    LimitExceeded,
    MemfsError,
    NotADirectory,
    NotFound,
    PathConflict,
    PreconditionFailed,
    ReadOnly,
    StorageError,
    StoreArchived,
    Unauthorized,
    WouldBlock,
)
from .models import (
    DREAM_FINAL,
    DREAM_STATUSES,
    DREAM_USAGE,
    Actor,
    Change,
    Dream,
    Event,
    Memory,
    MemoryPrefix,
    MemoryStore,
    MemoryVersion,
    Page,
    Session,
    SessionGrant,
    SessionResource,
    SessionToken,
    Snapshot,
    complete_tool_results,
)
from .rules import (  # noqa: F401  (re-exported: the store is where callers look for them)
    _SURROGATE_RE,
    Limits,
    _check_limit,
    _check_view,
    _dict_list,
    _patch_metadata,
    _validate_description,
    _validate_metadata,
    _validate_name,
    _validate_session_resource,
    _validate_text,
    encode_content,
    format_time,
    local_user_actor,
    new_id,
    parse_time,
    slugify,
    validate_path,
    validate_prefix,
)

if TYPE_CHECKING:
    import sqlite_utils
    from sqlite_utils.migrations import Migrations

    from .recall.embeddings import Provider
    from .recall.indexer import Progress as IndexProgress
    from .recall.search import Result as SearchResult

log = logging.getLogger(__name__)
T = TypeVar("T")


EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
#: A memory's columns without its content (``view=basic``), so the content is never read.
_BASIC_MEMORY_COLS = (
    "id, store_id, path, NULL AS content, content_sha256, content_size_bytes, version_id, "
    "created_at, updated_at"
)
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
#: ASCII's upper-case letters to lower case, nothing else (what SQL's lower() does here).
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
#: A cursor's integers are SQLite integers.
_INT64 = range(-(2**63), 2**63)
_OPERATIONS = ("created", "modified", "deleted")
_SESSION_STATUSES = ("rescheduling", "running", "idle", "terminated")
#: Event types a client may send to a session (API.md §4.1 events.send).
CLIENT_EVENT_TYPES = (
    "user.message",
    "user.interrupt",
    "user.tool_confirmation",
    "user.custom_tool_result",
    "user.define_outcome",
    "user.tool_result",
    "system.message",
)
#: Event types a mount records for the session it acts as (SPEC §4).
TOOL_EVENT_TYPES = ("agent.tool_use", "agent.tool_result")


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: "Leave this field as it is" in update calls (``None`` also means that, per API.md §8.2).
UNSET: Any = _Unset()


# --------------------------------------------------------------------------------------------
# ids and time


def _now() -> str:
    return format_time(datetime.now(UTC))


#: Session tokens (:meth:`Store.create_session_token`): the secret's prefix (which tells it
#: from a server key at a glance), and the life a token gets by default and at most, seconds.
SESSION_TOKEN_PREFIX = "memfs_session_"
SESSION_TOKEN_TTL = 24 * 3600.0
SESSION_TOKEN_MIN_TTL = 1
SESSION_TOKEN_MAX_TTL = 30 * 24 * 3600.0


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------------------------
# cursors


def _fingerprint(filters: Any) -> str:
    return xxhash.xxh64_hexdigest(json.dumps(filters, sort_keys=True).encode())


def _encode_cursor(kind: str, filters: Any, key: Any) -> str:
    """An opaque cursor: base64url of the listing kind, a fingerprint of its filters and the
    sort key of the last item returned."""
    raw = json.dumps({"k": kind, "f": _fingerprint(filters), "v": key}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, kind: str, filters: Any) -> Any:
    """The sort key of a cursor made by :func:`_encode_cursor` for this listing and filters.
    A cursor is client input: the key is only ever JSON of SQLite-safe values (strings of valid
    UTF-8, integers within 64 bits, booleans, lists); each listing checks its exact shape.

    :raises InvalidCursor: anything else, however forged.
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        obj = json.loads(raw)
        ok = isinstance(obj, dict) and obj.get("k") == kind and _cursor_safe(obj.get("v"))
    except (binascii.Error, ValueError, TypeError, RecursionError):
        ok = False
    if not ok:
        raise InvalidCursor("invalid page cursor")
    if obj.get("f") != _fingerprint(filters):
        raise InvalidCursor("page cursor does not belong to this listing's filters")
    return obj.get("v")

def _after_cursor(page: str, kind: str, filters: list[Any], where: list[str],
                  params: list[Any]) -> None:
    """Continue a newest-first listing (``created_at`` desc, then ``id`` desc) after the
    position in ``page``: its condition appended to ``where`` and ``params``.

    :raises InvalidCursor: not a cursor of this listing with these filters.
    """
    key = _decode_cursor(page, kind, filters)
    if not (isinstance(key, list) and len(key) == 2
            and all(isinstance(k, str) for k in key)):  # fmt: skip
        raise InvalidCursor("invalid page cursor")
    where.append("(created_at < ? OR (created_at = ? AND id < ?))")
    params += [key[0], key[0], key[1]]


def _newest_first_page(rows: Sequence[Any], limit: int, kind: str, filters: list[Any],
                       make: Callable[[Any], T]) -> Page[T]:
    """The page of ``rows`` (fetched with ``LIMIT limit + 1``) and the cursor to the next."""
    items = [make(r) for r in rows[:limit]]
    next_page = None
    if len(rows) > limit:
        last = items[-1]
        next_page = _encode_cursor(kind, filters, [last.created_at, last.id])
    return Page(items, next_page)



def _cursor_safe(key: Any) -> bool:
    """Whether a decoded cursor key holds only values SQLite can bind (see _decode_cursor)."""
    if isinstance(key, bool):
        return True
    if isinstance(key, int):
        return key in _INT64
    if isinstance(key, str):
        return not _SURROGATE_RE.search(key)
    if isinstance(key, list):
        return len(key) <= 2 and all(_cursor_safe(k) for k in key)
    return False


# --------------------------------------------------------------------------------------------
# schema

#: The schema migrations, in order (sqlite-utils migration set "memfs"). sqlite-utils, with
#: dateutil, pluggy and click behind it, is imported only when a database needs one of them:
#: every ``memfs`` command and mount daemon opens an up-to-date database, and its import was a
#: quarter of a session daemon's start (issue 11).
MIGRATION_SET = "memfs"
_MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = []


def _migration(
    fn: Callable[[sqlite_utils.Database], None],
) -> Callable[[sqlite_utils.Database], None]:
    _MIGRATIONS.append(fn)
    return fn


@functools.cache
def _migration_set() -> Migrations:
    from sqlite_utils.migrations import Migrations

    ms = Migrations(MIGRATION_SET)
    for fn in _MIGRATIONS:
        ms()(fn)
    return ms


def __getattr__(name: str) -> Any:
    if name == "migrations":  # the sqlite-utils Migrations (tests), built on first use
        return _migration_set()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@_migration
def m001_initial(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        -- A memory store. metadata is a JSON object of strings. archived_at is NULL until the
        -- store is archived, which cannot be undone. Deleting a store deletes its rows in
        -- memories, versions and changes (Store.delete_store), not its session resources.
        CREATE TABLE stores (
            id TEXT PRIMARY KEY,              -- memstore_…, time-ordered
            name TEXT NOT NULL,
            description TEXT NOT NULL,
            metadata TEXT NOT NULL,
            created_at TEXT NOT NULL,         -- RFC 3339 UTC with microseconds: sorts by time
            updated_at TEXT NOT NULL,
            archived_at TEXT
        );

        -- Live memories only: a deleted memory's row is gone, its history stays in versions.
        -- version_id names the version holding the current content (the only head marker).
        -- (store_id, path) is unique; the overlap rule (/a vs /a/b) is checked in code.
        CREATE TABLE memories (
            id TEXT PRIMARY KEY,              -- mem_…, stable across renames
            store_id TEXT NOT NULL REFERENCES stores(id),
            path TEXT NOT NULL,
            content TEXT NOT NULL,
            content_sha256 TEXT NOT NULL,
            content_size_bytes INTEGER NOT NULL,
            version_id TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE UNIQUE INDEX memories_store_path ON memories(store_id, path);

        -- Immutable versions, one per real change. path is NULL only when redacted; content,
        -- content_sha256 and content_size_bytes are NULL when redacted or operation='deleted'.
        -- created_by_* / redacted_by_* hold an actor as (type, id).
        CREATE TABLE versions (
            id TEXT PRIMARY KEY,              -- memver_…, time-ordered: the listing order
            store_id TEXT NOT NULL,
            memory_id TEXT NOT NULL,
            operation TEXT NOT NULL CHECK (operation IN ('created', 'modified', 'deleted')),
            created_at TEXT NOT NULL,
            path TEXT,
            content TEXT,
            content_sha256 TEXT,
            content_size_bytes INTEGER,
            created_by_type TEXT,
            created_by_id TEXT,
            redacted_at TEXT,
            redacted_by_type TEXT,
            redacted_by_id TEXT
        );
        CREATE INDEX versions_store ON versions(store_id, id);
        CREATE INDEX versions_memory ON versions(memory_id, id);

        -- The change feed of each store, written in the same transaction as the change: a
        -- mount polls it (a cheap indexed max(seq)) to invalidate its kernel caches, and the
        -- server streams it to remote mounts. op: put | delete | store.
        CREATE TABLE changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            store_id TEXT NOT NULL,
            op TEXT NOT NULL,
            memory_id TEXT,
            path TEXT,
            old_path TEXT,
            at TEXT NOT NULL
        );
        CREATE INDEX changes_store ON changes(store_id, seq);

        -- Sessions (API.md §4). agent is the JSON snapshot of the agent, metadata a JSON
        -- object. status: rescheduling | running | idle | terminated.
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,              -- sesn_…
            status TEXT NOT NULL,
            agent TEXT,
            environment_id TEXT,
            metadata TEXT NOT NULL,
            title TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            archived_at TEXT
        );

        -- Memory stores attached to a session, fixed at creation. name and description are
        -- snapshots taken at attach time; mount_path is unique within the session.
        CREATE TABLE session_resources (
            id TEXT PRIMARY KEY,              -- sesrsc_…
            session_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            memory_store_id TEXT NOT NULL,
            access TEXT NOT NULL,
            instructions TEXT,
            name TEXT NOT NULL,
            description TEXT NOT NULL,
            mount_path TEXT NOT NULL
        );
        CREATE INDEX session_resources_session ON session_resources(session_id, position);
        CREATE INDEX session_resources_store ON session_resources(memory_store_id);

        -- Session events (API.md §4.6), in seq order. body is the whole wire object. Tool
        -- events of a mount without a session have session_id NULL and store_id set.
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,          -- sevt_…
            session_id TEXT,
            store_id TEXT,
            type TEXT NOT NULL,
            processed_at TEXT NOT NULL,
            body TEXT NOT NULL
        );
        CREATE INDEX events_session ON events(session_id, seq);
        """
    )


@_migration
def m002_agents_environments(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        -- Minimal agents and environments (API.md §4: sessions.create needs their ids). body is
        -- the whole wire object as JSON (BetaManagedAgentsAgent / BetaEnvironment); a session
        -- keeps its own snapshot of the agent, so these rows are only read at session creation.
        CREATE TABLE agents (
            id TEXT PRIMARY KEY,              -- agent_…
            body TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE TABLE environments (
            id TEXT PRIMARY KEY,              -- env_…
            body TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        """
    )


@_migration
def m003_versions_by_time(db: sqlite_utils.Database) -> None:
    # Version listings order by (created_at, id) within a store.
    db.execute("CREATE INDEX versions_store_time ON versions(store_id, created_at, id)")


@_migration
def m004_memory_count(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        -- stores.memory_count: live memories in the store, kept by these triggers in the same
        -- transaction as every insert and delete, so the 2,000 check reads one row instead of
        -- counting an index on each create.
        ALTER TABLE stores ADD COLUMN memory_count INTEGER NOT NULL DEFAULT 0;
        UPDATE stores SET memory_count =
            (SELECT count(*) FROM memories WHERE memories.store_id = stores.id);
        CREATE TRIGGER memories_count_insert AFTER INSERT ON memories BEGIN
            UPDATE stores SET memory_count = memory_count + 1 WHERE id = NEW.store_id;
        END;
        CREATE TRIGGER memories_count_delete AFTER DELETE ON memories BEGIN
            UPDATE stores SET memory_count = memory_count - 1 WHERE id = OLD.store_id;
        END;
        -- versions_store_time (m003) serves every listing by store: one index less to write.
        DROP INDEX versions_store;
        """
    )


@_migration
def m005_session_launcher(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        -- sessions.launcher: JSON naming the local `memfs run` process that owns the session
        -- ({host, boot_id, pid, start}), so that a session whose launcher was killed can be
        -- found and ended; NULL for sessions created through the API.
        ALTER TABLE sessions ADD COLUMN launcher TEXT;
        """
    )


@_migration
def m006_indexes(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        -- Indexes for the filtered listings, each checked with EXPLAIN QUERY PLAN (the
        -- figures: scripts/bench_queries.py, 80,000 versions in one store). Without them every
        -- filter walked the store's whole history through versions_store_time.
        --
        -- list_versions(memory_id=): equality on the memory, in listing order, so LIMIT stops
        -- early; also serves retention (_prune_memory). Replaces versions_memory (memory_id,
        -- id): one index less to write per version.
        CREATE INDEX versions_memory_time ON versions(memory_id, created_at, id);
        DROP INDEX versions_memory;
        -- list_versions(session_id= / api_key_id= / user_id= / service_account_id=): actor
        -- ids are unique across actor types (their prefixes differ), so the id is the key and
        -- created_by_type is checked on the few rows found.
        CREATE INDEX versions_actor ON versions(store_id, created_by_id, created_at, id);
        -- list_versions(operation=): 'deleted' is rare, so a walk of the history to fill a page
        -- of them was the slowest listing.
        CREATE INDEX versions_operation ON versions(store_id, operation, created_at, id);
        -- resolve_store(name): every CLI command naming a store by name.
        CREATE INDEX stores_name ON stores(name);
        -- launched_sessions(): the few sessions a local launcher owns and has not ended,
        -- looked up at every `memfs run`; a partial index holds only those.
        CREATE INDEX sessions_launched ON sessions(id)
            WHERE launcher IS NOT NULL AND status != 'terminated';
        -- Pruning (Store.prune_versions, and every Store.feed_prune_every changes): the
        -- session.deleted event of each deleted session, by time, so that the events of
        -- sessions deleted long enough ago are found without reading the others.
        CREATE INDEX events_session_deleted ON events(processed_at)
            WHERE type = 'session.deleted';
        -- stores.changes_pruned_seq: the newest change seq of the store that pruning deleted
        -- (0: none). A follower at a position below it may have missed changes: changes_since
        -- raises FeedGap instead of skipping them silently.
        ALTER TABLE stores ADD COLUMN changes_pruned_seq INTEGER NOT NULL DEFAULT 0;
        """
    )


@_migration
def m007_dreams(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        -- A dream (API.md §5): a run that reads a store and some sessions' transcripts and
        -- writes a consolidated store. model, output_behavior and error are wire JSON;
        -- session_ids a sorted JSON list. runner: JSON naming the process running it
        -- ({host, pid, token}); heartbeat_at: when that process last said it was alive (a
        -- dream whose runner died is failed, never left running: memfs.dreams).
        CREATE TABLE dreams (
            id TEXT PRIMARY KEY,              -- drm_…
            status TEXT NOT NULL,
            memory_store_id TEXT NOT NULL,
            session_ids TEXT NOT NULL,
            model TEXT NOT NULL,
            instructions TEXT,
            output_behavior TEXT NOT NULL,
            output_store_id TEXT,
            session_id TEXT,
            error TEXT,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            cache_creation_input_tokens INTEGER NOT NULL DEFAULT 0,
            cache_read_input_tokens INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            ended_at TEXT,
            archived_at TEXT,
            runner TEXT,
            heartbeat_at TEXT NOT NULL
        );
        CREATE INDEX dreams_time ON dreams(created_at, id);
        -- The few dreams not ended: the sweep for dead runners, the update_existing check.
        CREATE INDEX dreams_live ON dreams(id) WHERE status IN ('pending', 'running');
        """
    )


@_migration
def m008_reverts(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        -- A revert (memfs session revert, memfs.revert): what it undid (target_type session |
        -- revert, target_id) and the versions it wrote (a JSON list), so that it can itself
        -- be reverted. forced: 1 when --force overwrote memories changed by someone else.
        CREATE TABLE reverts (
            id TEXT PRIMARY KEY,              -- memrevert_…
            target_type TEXT NOT NULL,
            target_id TEXT NOT NULL,
            forced INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            created_by_type TEXT,
            created_by_id TEXT,
            version_ids TEXT NOT NULL
        );
        CREATE INDEX reverts_target ON reverts(target_id);
        """
    )


@_migration
def m009_console_signouts(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        -- The Console's sign-outs (memfs.console): a sign-in cookie is signed, not stored, so
        -- signing out records its sign-in (SHA-256 of the cookie's nonce) until the cookie
        -- would have expired (Unix seconds), for every server on the database to refuse it.
        CREATE TABLE IF NOT EXISTS console_signouts (
            signin TEXT PRIMARY KEY,
            expires_at INTEGER NOT NULL
        );
        CREATE INDEX IF NOT EXISTS console_signouts_expiry ON console_signouts(expires_at);
        """
    )


@_migration
def m010_session_tokens(db: sqlite_utils.Database) -> None:
    # IF NOT EXISTS, here and in m009: main at 584d6b0 made this table as m009_session_tokens
    # (before the Console's sign-outs took that number), and its databases must still open.
    db.executescript(
        """
        -- The credential of a running session's commands (Store.create_session_token): only
        -- the SHA-256 of the secret is kept. It opens the session's attached stores with their
        -- access while the session runs, until expires_at; revoked_at is set when the session
        -- ends (a token is never valid again after that).
        CREATE TABLE IF NOT EXISTS session_tokens (
            id TEXT PRIMARY KEY,              -- sesstok_…
            session_id TEXT NOT NULL,
            token_sha256 TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            revoked_at TEXT
        );
        CREATE INDEX IF NOT EXISTS session_tokens_session ON session_tokens(session_id);
        """
    )


@_migration
def m011_recall(db: sqlite_utils.Database) -> None:
    # The words index (FTS5, kept by triggers), the vectors and the indexers' leases of
    # recall: memfs.recall.schema says what each holds.
    from memfs.recall import schema

    db.executescript(schema.SQLITE)


# --------------------------------------------------------------------------------------------
# row -> model


def _store(row: sqlite3.Row) -> MemoryStore:
    return MemoryStore(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        metadata=json.loads(row["metadata"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        archived_at=row["archived_at"],
    )


def _memory(row: sqlite3.Row, with_content: bool) -> Memory:
    return Memory(
        id=row["id"],
        memory_store_id=row["store_id"],
        path=row["path"],
        content=row["content"] if with_content else None,
        content_sha256=row["content_sha256"],
        content_size_bytes=row["content_size_bytes"],
        memory_version_id=row["version_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _actor(type_: str | None, id_: str | None) -> Actor | None:
    return Actor(type_, id_) if type_ and id_ else None


def _version(row: sqlite3.Row, with_content: bool) -> MemoryVersion:
    return MemoryVersion(
        id=row["id"],
        memory_id=row["memory_id"],
        memory_store_id=row["store_id"],
        operation=row["operation"],
        created_at=row["created_at"],
        path=row["path"],
        content=row["content"] if with_content else None,
        content_sha256=row["content_sha256"],
        content_size_bytes=row["content_size_bytes"],
        created_by=_actor(row["created_by_type"], row["created_by_id"]),
        redacted_at=row["redacted_at"],
        redacted_by=_actor(row["redacted_by_type"], row["redacted_by_id"]),
    )


def _resource(row: sqlite3.Row) -> SessionResource:
    return SessionResource(
        id=row["id"],
        session_id=row["session_id"],
        memory_store_id=row["memory_store_id"],
        access=row["access"],
        instructions=row["instructions"],
        name=row["name"],
        description=row["description"],
        mount_path=row["mount_path"],
    )


def _event(row: sqlite3.Row) -> Event:
    return Event(
        id=row["id"],
        session_id=row["session_id"],
        type=row["type"],
        processed_at=row["processed_at"],
        body=json.loads(row["body"]),
    )


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


def open_database(target: str, **kwargs: Any) -> Any:
    """The database ``target`` (``--db``, ``MEMFS_DB``) names: a
    :class:`memfs.pgdatabase.PgDatabase` for a ``postgresql://`` URL (psycopg is imported only
    then), else the SQLite :class:`~memfs.database.Database` at that path. ``kwargs`` are
    :class:`~memfs.database.Database`'s (SQLite's tuning: a PgDatabase ignores them)."""
    if is_url(target):
        from .pgdatabase import PgDatabase

        return PgDatabase(target, **kwargs)
    return Database(target, **kwargs)


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


# --------------------------------------------------------------------------------------------
# the store


@dataclass(frozen=True)
class ExportSnapshot:
    """A store as it was at one moment, for an export (:meth:`Store.export_snapshot`):
    ``store`` read then, ``conn`` the read transaction that shows the rest."""

    store: MemoryStore
    conn: sqlite3.Connection


#: The write transaction a thread runs a :meth:`Store.batch` in, by ``id(store)``.
_batching = threading.local()


def _outcome(fn: Callable[[], Any]) -> Any:
    """``fn()``, or the exception it raised (a :meth:`Store.batch` result)."""
    try:
        return fn()
    except WouldBlock:  # not an outcome: the caller runs the batch again where it may wait
        raise
    except Exception as e:
        return e


class Store:
    """A memfs database. Thread-safe: writes go through one writer connection, reads through a
    connection per thread that never waits on the writer (:class:`memfs.database.Database`).

    :param path: the database file (created with its directory if missing); default
        :func:`default_db_path`. ``":memory:"`` works for tests that use one process.
    :param limits: the limits to enforce; default :meth:`Limits.from_env`.
    :param synchronous: ``FULL`` (every commit on disk before it returns) or ``NORMAL``
        (commits survive a killed process; :meth:`sync` puts them on disk).
    :param checkpoint_pages: WAL pages between automatic checkpoints (SQLite's default 1000).
    :param create: make the database if the file is missing (else DatabaseUnavailable).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        limits: Limits | None = None,
        synchronous: str = "FULL",
        checkpoint_pages: int | None = None,
        create: bool = True,
    ):
        self.limits = limits or Limits.from_env()
        self.path = str(default_db_path() if path is None else path)
        #: Set by :meth:`close` (background work of this Store stops then).
        self.closed = False
        # Small pages for a new database (an existing one keeps its own): a commit appends
        # every page it dirtied to the WAL, and a memory write dirties about ten b-tree pages
        # (tables and indexes) for a few kB of data. 1 KiB pages made creates 25% and deletes
        # 20% faster than 4 KiB ones (2,000 memories of 2 kB, synchronous=NORMAL).
        # FULL (the default): a commit is on disk (WAL fsynced) before it returns, so an
        # acknowledged write survives a power cut as well as a killed process. NORMAL (what a
        # mount uses for close(), with sync() on fsync()): a commit survives a killed process
        # or daemon at once, and a power cut from the next sync() or checkpoint on; see
        # https://sqlite.org/pragma.html#pragma_synchronous and https://sqlite.org/wal.html.
        # A postgresql:// URL: PostgreSQL (memfs.pgdatabase), shared by any number of servers.
        self.database = open_database(
            self.path, synchronous=synchronous, checkpoint_pages=checkpoint_pages,
            page_size=1024, create=create,
        )
        #: The writer connection, and sqlite-utils over it (migrations, tests); None on
        #: PostgreSQL.
        self.conn = self.database.writer
        #: "sqlite" or "postgresql": which SQL the database speaks.
        self.dialect: str = self.database.dialect
        try:
            self._migrate()
        except BaseException:
            self.database.close()
            raise

    @functools.cached_property
    def db(self) -> sqlite_utils.Database:
        """sqlite-utils over the writer connection (migrations, tests)."""
        import sqlite_utils

        return sqlite_utils.Database(self.conn)

    def _migrate(self) -> None:
        if self.dialect == "postgresql":
            from .pgdatabase import migrate

            migrate(self.database, MIGRATION_SET)
            return
        # The applied ones as sqlite-utils records them, read without importing it.
        try:
            applied = {row[0] for row in self.conn.execute(
                "SELECT name FROM _sqlite_migrations WHERE migration_set = ?", [MIGRATION_SET])}
        except sqlite3.OperationalError:  # no such table: a new database
            applied = set()
        if all(fn.__name__ in applied for fn in _MIGRATIONS):
            return
        migrations = _migration_set()
        if migrations.pending(self.db):
            # Under the write lock (sqlite-utils nests its transactions as savepoints), so two
            # processes opening a fresh database at once do not both apply a migration.
            with self._write():
                migrations.apply(self.db)

    def sync(self) -> None:
        """Make every committed write durable on disk (fsync of the WAL and the database file,
        whatever other connections hold). Needed only with ``synchronous="NORMAL"``.

        :raises StorageError: the sync failed.
        """
        self.database.sync()

    def check_file(self) -> None:
        """:raises DatabaseGone: the database file was deleted or replaced while in use."""
        self.database.check_file()

    def ping(self) -> None:
        """Check that the database answers a query (a server's readiness probe).

        :raises DatabaseGone, StorageError: the file was replaced, or the database fails.
        """
        self.database.check_file()
        self._one("SELECT 1")

    def nowait(self) -> AbstractContextManager[None]:
        """Calls in this block never wait for a lock: they raise
        :class:`memfs.errors.WouldBlock` first (see :meth:`Database.nowait`)."""
        return self.database.nowait()

    def patience(self, seconds: float) -> AbstractContextManager[None]:
        """Calls in this block (this thread) wait for the write lock at most ``seconds`` in
        all, then raise :class:`memfs.errors.Busy`, having changed nothing (see
        :meth:`Database.patience`)."""
        patience: AbstractContextManager[None] = self.database.patience(seconds)
        return patience

    def close(self) -> None:
        self.closed = True
        self.database.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions ------------------------------------------------------------------------

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction, holding the database write lock from its first statement.
        Inside :meth:`batch` (same thread), the batch's transaction instead."""
        conn = _batching.conns.get(id(self)) if hasattr(_batching, "conns") else None
        if conn is not None:
            return nullcontext(conn)
        return self.database.write()

    def batch(
        self,
        calls: Sequence[Callable[[], Any]] | Callable[[], Sequence[Callable[[], Any]]],
    ) -> list[Any]:
        """Run several write calls of this store (``calls``: functions of no argument, e.g.
        ``partial(store.create_memory, …)``) in ONE write transaction: one lock, one commit
        and one fsync for all (group commit). Returns each call's result, or the exception it
        raised, in order; each result is durable when this returns, like the call's own.

        ``calls`` may also be a function returning the calls, called once: as soon as the
        write lock is held (or, if the transaction fails before, when it has failed), so that
        the writes arriving while another process holds the lock join this batch.

        Each call runs in a SAVEPOINT of its own: a call refused by a rule (a
        :class:`~memfs.errors.MemfsError` of the caller's: NotFound, a conflict, a limit, bad
        input) is rolled back alone and its exception returned in its place, and later calls
        see the earlier ones' writes. A failure of the database or a bug (an SQLite error,
        StorageError, Busy, anything else) rolls the whole transaction back and every call
        is run again alone in a transaction of its own, so no call fails for another's
        reason.
        """
        taken: Sequence[Callable[[], Any]] | None = None if callable(calls) else calls
        if taken is not None and len(taken) == 1:
            return [_outcome(taken[0])]
        outcomes: list[Any] = []
        try:
            with self._write() as conn:
                if taken is None:
                    taken = calls()  # type: ignore[operator]
                if not hasattr(_batching, "conns"):
                    _batching.conns = {}
                _batching.conns[id(self)] = conn
                try:
                    for fn in taken:
                        conn.execute("SAVEPOINT memfs_batch_call")
                        try:
                            outcomes.append(fn())
                        except MemfsError as e:
                            if isinstance(e, StorageError | Busy):
                                raise
                            conn.execute("ROLLBACK TO memfs_batch_call")
                            outcomes.append(e)
                        conn.execute("RELEASE memfs_batch_call")
                finally:
                    del _batching.conns[id(self)]
        except WouldBlock:  # nowait mode (calls given as a list), the write lock is taken:
            raise  # nothing was done
        except Exception as e:
            if taken is None:
                taken = calls()  # type: ignore[operator]
            if isinstance(e, Busy) and not outcomes:  # the lock never came: none ran
                return [e] * len(taken)
            log.info("a batch of %d writes failed (%r); running each alone", len(taken), e)
            return [_outcome(fn) for fn in taken]
        return outcomes

    def _read(self) -> AbstractContextManager[sqlite3.Connection]:
        """A consistent snapshot for several reads."""
        return self.database.read()

    def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, *args)`` outside a transaction (each statement reads a snapshot of its
        own), for a ``*_in`` helper that usually needs one statement."""
        return self.database.run(fn, *args)

    def _one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        return self.database.one(sql, params)

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return self.database.all(sql, params)

    def _change(
        self,
        conn: sqlite3.Connection,
        store_id: str,
        op: str,
        memory_id: str | None = None,
        path: str | None = None,
        old_path: str | None = None,
    ) -> int:
        """Append to the store's change feed; returns the change's sequence number."""
        # RETURNING (SQLite 3.35+ and PostgreSQL): the seq on both backends.
        seq = int(conn.execute(
            "INSERT INTO changes (store_id, op, memory_id, path, old_path, at) "
            "VALUES (?, ?, ?, ?, ?, ?) RETURNING seq",
            (store_id, op, memory_id, path, old_path, _now()),
        ).fetchone()[0])
        if seq % max(1, self.feed_prune_every) == 0:
            # Now and then a write also bounds the feed and the events (a few indexed
            # statements), so that they stay bounded without `memfs versions prune`.
            now = datetime.now(UTC)
            self._prune_changes_in(conn, store_id, now)
            self._prune_events_in(conn, now)
        return seq

    # -- memory stores -----------------------------------------------------------------------

    def create_store(
        self, name: str, description: str | None = None, metadata: dict[str, str] | None = None
    ) -> MemoryStore:
        lim = self.limits
        name = _validate_name(name, lim)
        description = _validate_description("" if description is None else description, lim)
        metadata = _validate_metadata({} if metadata is None else metadata, lim)
        now = _now()
        store = MemoryStore(new_id("memstore"), name, description, metadata, now, now, None)
        with self._write() as c:
            c.execute(
                "INSERT INTO stores (id, name, description, metadata, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (store.id, name, description, json.dumps(metadata), now, now),
            )
        log.debug("created store %s (%s)", store.id, name)
        return store

    def get_store(self, store_id: str) -> MemoryStore:
        """:raises NotFound: unknown or deleted."""
        row = self._one("SELECT * FROM stores WHERE id = ?", (store_id,))
        if row is None:
            raise _no_store(store_id)
        return _store(row)

    def resolve_store(self, ref: str, *, among: Collection[str] | None = None) -> MemoryStore:
        """A store by id, or else by exact name (the newest live store of that name wins over
        archived ones; two live stores with the name are ambiguous). ``among``: only these
        stores exist (a session token's attached stores).

        :raises NotFound: no such store. :raises InvalidRequest: an ambiguous name.
        """
        row = self._one("SELECT * FROM stores WHERE id = ?", (ref,))
        if row is not None and (among is None or ref in among):
            return _store(row)
        rows = self._all(
            "SELECT * FROM stores WHERE name = ? ORDER BY archived_at IS NOT NULL, id DESC", (ref,)
        )
        if among is not None:
            rows = [r for r in rows if r["id"] in among]
        if not rows:
            raise NotFound(f"no memory store with id or name {ref!r}")
        live = [r for r in rows if r["archived_at"] is None]
        if len(live) > 1:
            ids = ", ".join(r["id"] for r in live)
            raise InvalidRequest(
                f"{len(live)} memory stores are named {ref!r} ({ids}): use an id, or rename "
                "all but one"
            )
        return _store(rows[0])

    def namesakes(self, store_id: str) -> list[MemoryStore]:
        """The other live stores with this store's exact name, newest first (at most 100).
        Names need not be unique (the hosted API's rule), but a name two live stores share
        names neither of them (:meth:`resolve_store`): the CLI and Console say so when a
        store is created or renamed to a name in use.

        :raises NotFound: unknown store.
        """
        with self._read() as c:
            store = self._store_in(c, store_id)
            rows = c.execute(
                "SELECT * FROM stores WHERE name = ? AND id != ? AND archived_at IS NULL "
                "ORDER BY id DESC LIMIT 100",
                (store.name, store_id),
            ).fetchall()
        return [_store(r) for r in rows]

    def update_store(
        self,
        store_id: str,
        *,
        name: Any = UNSET,
        description: Any = UNSET,
        metadata: Any = UNSET,
    ) -> MemoryStore:
        """Update name, description, and patch metadata. ``None``/UNSET leave a field alone.

        :raises StoreArchived: the store is archived. :raises InvalidRequest: bad values.
        """
        lim = self.limits
        with self._write() as c:
            store = self._store_in(c, store_id)
            if store.archived_at is not None:
                raise StoreArchived(f"memory store {store_id} is archived and cannot be updated")
            new_name = store.name if name in (UNSET, None) else _validate_name(name, lim)
            new_desc = (
                store.description
                if description in (UNSET, None)
                else _validate_description(description, lim)
            )
            new_meta = (
                store.metadata
                if metadata in (UNSET, None)
                else _patch_metadata(store.metadata, metadata, lim)
            )
            if (new_name, new_desc, new_meta) == (store.name, store.description, store.metadata):
                return store
            now = _now()
            c.execute(
                "UPDATE stores SET name = ?, description = ?, metadata = ?, updated_at = ? "
                "WHERE id = ?",
                (new_name, new_desc, json.dumps(new_meta), now, store_id),
            )
            self._change(c, store_id, "store")
        return self.get_store(store_id)

    def archive_store(self, store_id: str) -> MemoryStore:
        """Archive (idempotent: an archived store is returned unchanged)."""
        with self._write() as c:
            store = self._store_in(c, store_id)
            if store.archived_at is None:
                now = _now()
                c.execute(
                    "UPDATE stores SET archived_at = ?, updated_at = ? WHERE id = ?",
                    (now, now, store_id),
                )
                self._change(c, store_id, "store")
        return self.get_store(store_id)

    def delete_store(self, store_id: str) -> None:
        """Delete the store with every memory and version in it, permanently."""
        with self._write() as c:
            self._delete_store_in(c, store_id)

    def _delete_store_in(self, c: sqlite3.Connection, store_id: str) -> None:
        self._store_in(c, store_id)
        c.execute("DELETE FROM memories WHERE store_id = ?", (store_id,))
        c.execute("DELETE FROM versions WHERE store_id = ?", (store_id,))
        c.execute("DELETE FROM changes WHERE store_id = ?", (store_id,))
        c.execute("DELETE FROM stores WHERE id = ?", (store_id,))
        self._change(c, store_id, "store")

    def list_stores(
        self,
        *,
        include_archived: bool = False,
        created_at_gte: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
        ids: Collection[str] | None = None,
    ) -> Page[MemoryStore]:
        """Stores, newest first (``created_at`` desc, then ``id`` desc); ``ids``: only these
        (a session token's attached stores)."""
        limit = _check_limit(limit, self.limits)
        where: list[str] = []
        params: list[Any] = []
        _only_ids(where, params, ids)
        if not include_archived:
            where.append("archived_at IS NULL")
        if created_at_gte is not None:
            where.append("created_at >= ?")
            params.append(format_time(parse_time(created_at_gte)))
        if created_at_lte is not None:
            where.append("created_at <= ?")
            params.append(format_time(parse_time(created_at_lte)))
        # A copy: the cursor condition appended to params is not a filter.
        filters = ["stores", include_archived, list(params)]
        return self._newest_first("stores", filters, where, params, limit, page, _store)

    def _newest_first(self, table: str, filters: list[Any], where: list[str],
                      params: list[Any], limit: int, page: str | None,
                      make: Callable[[Any], T]) -> Page[T]:
        """A page of the rows of ``table`` (stores, dreams) that match ``where``, newest
        first, after the position in ``page`` (a cursor of this listing with ``filters``)."""
        if page:
            _after_cursor(page, table, filters, where, params)
        sql = f"SELECT * FROM {table}"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
        rows = self._all(sql, [*params, limit + 1])
        return _newest_first_page(rows, limit, table, filters, make)

    def _store_in(self, c: sqlite3.Connection, store_id: str) -> MemoryStore:
        row = c.execute("SELECT * FROM stores WHERE id = ?", (store_id,)).fetchone()
        if row is None:
            raise _no_store(store_id)
        return _store(row)

    def _writable_store_in(self, c: sqlite3.Connection, store_id: str) -> sqlite3.Row:
        """The store's ``memory_count``, for a write to its memories.

        :raises NotFound: unknown store. :raises StoreArchived:
        """
        row = c.execute(
            "SELECT archived_at, memory_count FROM stores WHERE id = ?", (store_id,)
        ).fetchone()
        if row is None:
            raise _no_store(store_id)
        if row["archived_at"] is not None:
            raise _archived(store_id)
        return row

    # -- memories ----------------------------------------------------------------------------

    def _check_path_free(
        self, c: sqlite3.Connection, store_id: str, path: str, exclude: Collection[str] = ()
    ) -> None:
        """:raises PathConflict: ``path`` is taken, or is an ancestor or descendant of a
        memory's path (``/a`` and ``/a/b`` cannot both exist). Memories in ``exclude`` are
        ignored (the one being renamed, the one being replaced)."""
        segments = path[1:].split("/")
        candidates = [path] + ["/" + "/".join(segments[:i]) for i in range(1, len(segments))]
        marks = ",".join("?" * len(candidates))
        rows = c.execute(
            f"SELECT id, path FROM memories WHERE store_id = ? AND path IN ({marks})",
            (store_id, *candidates),
        ).fetchall()
        # Descendants: paths in [path + "/", path + "0"), "0" being the byte after "/". One
        # more than ``exclude`` holds, so that a blocker is found even when excluded memories
        # (a directory rename's own) sort before it.
        rows += c.execute(
            "SELECT id, path FROM memories WHERE store_id = ? AND path > ? AND path < ? "
            "ORDER BY path LIMIT ?",
            (store_id, path + "/", path + "0", len(exclude) + 1),
        ).fetchall()
        for row in rows:
            if row["id"] in exclude:
                continue
            raise PathConflict(_overlap(path, row["path"]), conflicting_memory_id=row["id"],
                               conflicting_path=row["path"])

    def _insert_version(
        self,
        c: sqlite3.Connection,
        store_id: str,
        memory_id: str,
        operation: str,
        path: str,
        content: str | None,
        sha: str | None,
        size: int | None,
        actor: Actor | None,
        now: str,
    ) -> str:
        vid = new_id("memver")
        c.execute(
            "INSERT INTO versions (id, store_id, memory_id, operation, created_at, path, "
            "content, content_sha256, content_size_bytes, created_by_type, created_by_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                vid,
                store_id,
                memory_id,
                operation,
                now,
                path,
                content,
                sha,
                size,
                actor.type if actor else None,
                actor.id if actor else None,
            ),
        )
        return vid

    def _prune_memory(self, c: sqlite3.Connection, memory_id: str) -> None:
        """Retention (SPEC §1): drop versions older than the window, keeping the newest few."""
        cutoff = format_time(datetime.now(UTC) - timedelta(days=self.limits.retention_days))
        c.execute(
            "DELETE FROM versions WHERE memory_id = ? AND created_at < ? AND id NOT IN "
            "(SELECT id FROM versions WHERE memory_id = ? ORDER BY created_at DESC, id DESC "
            "LIMIT ?)",
            # At least one: the newest version is a live memory's head and must stay.
            (memory_id, cutoff, memory_id, max(1, self.limits.retention_keep)),
        )

    def count_memories(self, store_id: str) -> int:
        row = self._one("SELECT memory_count FROM stores WHERE id = ?", (store_id,))
        if row is None:
            raise _no_store(store_id)
        return int(row[0])

    def check_can_create(self, store_id: str) -> None:
        """Would a new memory be accepted now? (The filesystem asks at ``open(O_CREAT)`` so the
        error comes at once; the insert itself checks again under the write lock.)

        :raises NotFound, StoreArchived, LimitExceeded:
        """
        # One statement (a snapshot of its own): this runs at every open(O_CREAT).
        row = self._run(self._writable_store_in, store_id)
        self._check_room(store_id, row["memory_count"])

    def _check_room(self, store_id: str, n: int) -> None:
        """:raises LimitExceeded: ``n`` live memories leave no room for one more."""
        if n >= self.limits.max_memories:
            raise LimitExceeded(
                f"memory store {store_id} already holds {n} memories; "
                f"the limit is {self.limits.max_memories}"
            )

    def create_memory(
        self, store_id: str, path: str | bytes, content: str | bytes | None, *, actor: Actor | None
    ) -> Memory:
        """Create a memory and its ``created`` version.

        :raises InvalidPath, InvalidContent, ContentTooLarge: bad input.
        :raises NotFound, StoreArchived, LimitExceeded, PathConflict:
        """
        path = validate_path(path, self.limits)
        text, data = encode_content(content, self.limits)
        with self._write() as c:
            return self._create_in(c, store_id, path, text, data, actor)

    def _create_in(
        self,
        c: sqlite3.Connection,
        store_id: str,
        path: str,
        text: str,
        data: bytes,
        actor: Actor | None,
        memory_id: str | None = None,
        now: str | None = None,
    ) -> Memory:
        """Create a memory inside a write transaction; ``path`` and content are validated.
        ``memory_id``: a deleted memory of this store comes back under its own id (restore,
        revert), its ``created`` version added to its history."""
        store = self._writable_store_in(c, store_id)
        # The path before the count: at the limit, a taken path still says so.
        self._check_path_free(c, store_id, path)
        self._check_room(store_id, store["memory_count"])
        sha = sha256_hex(data)
        now = now or _now()
        mid = memory_id or new_id("mem")
        vid = self._insert_version(
            c, store_id, mid, "created", path, text, sha, len(data), actor, now
        )
        c.execute(
            "INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (mid, store_id, path, text, sha, len(data), vid, now, now),
        )
        seq = self._change(c, store_id, "put", mid, path)
        if memory_id is not None:
            self._prune_memory(c, mid)
        return Memory(mid, store_id, path, text, sha, len(data), vid, now, now, seq=seq)

    def _memory_in(
        self, c: sqlite3.Connection, store_id: str, column: str, value: str
    ) -> sqlite3.Row:
        """The live memory of ``store_id`` whose ``column`` (``id`` or ``path``) is ``value``.
        The store is looked at only when the memory is missing: one query when it is there.

        :raises NotFound: unknown store, or no such memory in it.
        """
        row = c.execute(
            f"SELECT * FROM memories WHERE store_id = ? AND {column} = ?", (store_id, value)
        ).fetchone()
        if row is None:
            self._store_in(c, store_id)
            if column == "path":
                raise NotFound(f"no memory at {value} in {store_id}")
            raise NotFound(f"memory {value!r} not found in {store_id}")
        return row

    def _get_memory(self, store_id: str, column: str, value: str, view: str) -> Memory:
        view = _check_view(view)
        return _memory(self._run(self._memory_in, store_id, column, value), view == "full")

    def get_memory(self, store_id: str, memory_id: str, *, view: str = "full") -> Memory:
        """:raises NotFound: unknown store, or no live memory with that id in it."""
        return self._get_memory(store_id, "id", memory_id, view)

    def get_memory_by_path(self, store_id: str, path: str, *, view: str = "full") -> Memory:
        """:raises NotFound: unknown store, or no live memory at that path in it."""
        return self._get_memory(store_id, "path", path, view)

    def resolve_memory(self, store_id: str, ref: str, *, view: str = "full") -> Memory:
        """A memory by id or, when ``ref`` starts with ``/``, by path."""
        if ref.startswith("/"):
            return self.get_memory_by_path(store_id, ref, view=view)
        return self.get_memory(store_id, ref, view=view)

    def update_memory(
        self,
        store_id: str,
        memory_id: str,
        *,
        content: str | bytes | None = None,
        path: str | bytes | None = None,
        precondition_sha256: str | None = None,
        actor: Actor | None,
        replace: bool = False,
    ) -> Memory:
        """Change content and/or path (a rename keeps the id). ``None`` keeps a field.

        A change writes one ``modified`` version; a no-op writes none and returns the memory
        unchanged. The precondition is compared with the current content hash atomically with
        the write, and is checked on a no-op too.

        :param replace: when the new path is another memory's, delete that memory in the same
            transaction instead of raising PathConflict. This call names the memory that
            moves, so that one keeps its id; :meth:`rename_path` (the filesystem's rename)
            keeps the target's memory instead.
        :raises PreconditionFailed, PathConflict, NotFound, StoreArchived, InvalidRequest:
        """
        _check_sha256_arg(precondition_sha256, "precondition content_sha256")
        new_path = None if path is None else validate_path(path, self.limits)
        new = None if content is None else encode_content(content, self.limits)
        with self._write() as c:
            row = self._memory_in(c, store_id, "id", memory_id)
            _check_precondition(row, precondition_sha256)
            return self._modify_in(c, row, new, new_path, replace, actor)

    def _modify_in(
        self,
        c: sqlite3.Connection,
        row: sqlite3.Row,
        content: tuple[str, bytes] | None,
        new_path: str | None,
        replace: bool,
        actor: Actor | None,
        now: str | None = None,
    ) -> Memory:
        """Change a live memory's content and/or path inside a write transaction: one
        ``modified`` version, or none (and the memory unchanged) when nothing changes."""
        store_id, memory_id = row["store_id"], row["id"]
        text, sha, size = row["content"], row["content_sha256"], row["content_size_bytes"]
        if content is not None:
            text, sha, size = content[0], sha256_hex(content[1]), len(content[1])
        target = row["path"] if new_path is None else new_path
        if target == row["path"] and sha == row["content_sha256"] and text == row["content"]:
            return _memory(row, True)
        self._writable_store_in(c, store_id)
        now = now or _now()
        if target != row["path"]:
            self._make_room(c, store_id, target, memory_id, replace, actor, now)
        vid = self._insert_version(
            c, store_id, memory_id, "modified", target, text, sha, size, actor, now
        )
        c.execute(
            "UPDATE memories SET path = ?, content = ?, content_sha256 = ?, "
            "content_size_bytes = ?, version_id = ?, updated_at = ? WHERE id = ?",
            (target, text, sha, size, vid, now, memory_id),
        )
        old = row["path"] if target != row["path"] else None
        seq = self._change(c, store_id, "put", memory_id, target, old)
        self._prune_memory(c, memory_id)
        return Memory(
            memory_id, store_id, target, text, sha, size, vid, row["created_at"], now, seq=seq
        )

    def _make_room(
        self,
        c: sqlite3.Connection,
        store_id: str,
        target: str,
        memory_id: str,
        replace: bool,
        actor: Actor | None,
        now: str,
    ) -> None:
        """Before moving ``memory_id`` to ``target``: with ``replace``, delete the memory that
        holds exactly ``target``; then check that nothing else blocks it."""
        if replace:
            victim = c.execute(
                "SELECT * FROM memories WHERE store_id = ? AND path = ?", (store_id, target)
            ).fetchone()
            if victim is not None and victim["id"] != memory_id:
                self._delete_row(c, victim, actor, now)
        self._check_path_free(c, store_id, target, exclude=(memory_id,))

    def _delete_row(
        self, c: sqlite3.Connection, row: sqlite3.Row, actor: Actor | None, now: str
    ) -> None:
        self._insert_version(
            c, row["store_id"], row["id"], "deleted", row["path"], None, None, None, actor, now
        )
        c.execute("DELETE FROM memories WHERE id = ?", (row["id"],))
        self._change(c, row["store_id"], "delete", row["id"], row["path"])
        self._prune_memory(c, row["id"])

    def delete_memory(
        self,
        store_id: str,
        memory_id: str,
        *,
        expected_sha256: str | None = None,
        actor: Actor | None,
    ) -> None:
        """Delete a memory: its row goes, a ``deleted`` version (path kept) is written.
        Allowed on archived stores.

        :raises NotFound, PreconditionFailed, InvalidRequest:
        """
        _check_sha256_arg(expected_sha256, "expected_content_sha256")
        with self._write() as c:
            row = self._memory_in(c, store_id, "id", memory_id)
            _check_precondition(row, expected_sha256)
            self._delete_row(c, row, actor, _now())

    # -- path operations (the filesystem's view) ---------------------------------------------

    def write_path(self, store_id: str, path: str | bytes, content: str | bytes, *,
                   actor: Actor | None, events: list[dict[str, Any]] | None = None) -> Memory:
        """Create the memory at ``path``, or change its content: what a file's last close
        means. Returns the memory (unchanged, with no new version, if the content is equal).
        One transaction, so a racing writer of the same path cannot slip in between the
        look-up and the write.

        :param events: the tool events that report this write (SPEC §4), recorded in the same
            transaction (:meth:`_tool_events_in`): a version and its event exist together
            or not at all.
        :raises InvalidPath, InvalidContent, ContentTooLarge, StoreArchived, LimitExceeded,
            PathConflict, NotFound:
        """
        path = validate_path(path, self.limits)
        text, data = encode_content(content, self.limits)
        _check_tool_events(events, text=False)
        with self._write() as c:
            # No store look-up here: _create_in checks the store, and a memory implies it.
            row = c.execute(
                "SELECT * FROM memories WHERE store_id = ? AND path = ?", (store_id, path)
            ).fetchone()
            if row is None:
                m = self._create_in(c, store_id, path, text, data, actor)
            else:
                m = self._modify_in(c, row, (text, data), None, False, actor)
            self._tool_events_in(c, store_id, actor, events, m.id, m.memory_version_id)
            return m

    def _tool_events_in(
        self, c: sqlite3.Connection, store_id: str, actor: Actor | None,
        events: list[dict[str, Any]] | None, memory_id: str | None = None,
        version_id: str | None = None,
    ) -> None:
        """Record the tool events of a path operation inside its transaction. Each successful
        ``agent.tool_result`` is completed in place with the memory (and version) the operation
        produced, so the caller can log the very objects that were stored. The session is the
        actor's when it is a session, else the events belong to the store alone."""
        if not events:
            return
        complete_tool_results(events, memory_id, version_id)
        session_id = actor.id if actor is not None and actor.type == "session_actor" else None
        # One JSON encoding per event, which is also the UTF-8 check (_check_tool_events left
        # it to here: a lone surrogate fails the encode, and the transaction is rolled back),
        # and one statement for the pair: this runs at every close that commits.
        rows = []
        for body in events:
            e = _complete_event(session_id, body)
            text = json.dumps(e.body, ensure_ascii=False)
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                _validate_text(e.body, "event")  # raises, naming where the surrogate is
                raise
            rows.append((e.id, session_id, store_id, e.type, e.processed_at, text))
        c.executemany(
            "INSERT INTO events (id, session_id, store_id, type, processed_at, body) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )

    def delete_path(self, store_id: str, path: str, *, actor: Actor | None,
                    events: list[dict[str, Any]] | None = None) -> Memory:
        """Delete the memory at ``path`` (``unlink``); returns it as it was. ``events`` are
        recorded in the same transaction (see :meth:`write_path`).

        :raises NotFound:
        """
        path = validate_path(path, self.limits)
        _check_tool_events(events, text=False)
        with self._write() as c:
            row = self._memory_in(c, store_id, "path", path)
            self._delete_row(c, row, actor, _now())
            self._tool_events_in(c, store_id, actor, events, row["id"])
        return _memory(row, False)

    def rename_path(
        self,
        store_id: str,
        old: str | bytes,
        new: str | bytes,
        *,
        actor: Actor | None,
        replace: bool = True,
        events: list[dict[str, Any]] | None = None,
    ) -> Memory:
        """Rename the memory at ``old`` to ``new``: the memory moves (same id, a ``modified``
        version) and is returned.

        Over a memory at ``new`` with ``replace`` (POSIX rename, what ``sed -i`` and editors do
        with a temporary file), the path keeps its memory: in one transaction the memory at
        ``new`` gets a ``modified`` version with the content of the one at ``old`` (none if the
        content is the same), and the memory at ``old`` is deleted (a ``deleted`` version; its
        history stays). That returns the memory at ``new`` (its own id), and the change feed
        gets a ``put`` of it (only if its content changed) and a ``delete`` of the one at
        ``old``. Without ``replace`` a memory at ``new`` is a PathConflict
        (``RENAME_NOREPLACE``). (:meth:`update_memory` with ``replace`` names the memory to
        move, which keeps its id: there the memory at the target is the one deleted.) ``events``
        are recorded in the same transaction (see :meth:`write_path`).

        :raises NotFound, PathConflict, StoreArchived, InvalidPath:
        """
        old = validate_path(old, self.limits)
        new = validate_path(new, self.limits)
        _check_tool_events(events, text=False)
        # One transaction: the memories found at ``old`` and ``new`` are the ones changed, even
        # if another writer renames or replaces them at the same moment.
        with self._write() as c:
            row = self._memory_in(c, store_id, "path", old)
            kept: Memory | None = None
            if replace and new != old:
                target = c.execute(
                    "SELECT * FROM memories WHERE store_id = ? AND path = ?", (store_id, new)
                ).fetchone()
                if target is not None:
                    self._writable_store_in(c, store_id)
                    content = (row["content"], row["content"].encode("utf-8"))
                    now = _now()
                    kept = self._modify_in(c, target, content, None, False, actor, now)
                    self._delete_row(c, row, actor, now)
            if kept is None:
                kept = self._modify_in(c, row, None, new, replace, actor)
            self._tool_events_in(c, store_id, actor, events, kept.id, kept.memory_version_id)
            return kept

    def rename_prefix(
        self,
        store_id: str,
        old_prefix: str,
        new_prefix: str,
        *,
        actor: Actor | None,
        events: list[dict[str, Any]] | None = None,
    ) -> list[Memory]:
        """Move every memory below ``old_prefix`` (``/a/``) to ``new_prefix`` (``/b/``) in one
        transaction: a directory rename. Each moved memory gets one ``modified`` version.
        ``events`` are recorded in the same transaction (see :meth:`write_path`).

        Directories are never merged: the target directory must hold no memory (not even
        one of the move's own, as when moving ``/a/b/`` to ``/a/``), and must not be a
        memory's path nor lie below one.

        :raises DirectoryNotEmpty: a memory exists below ``new_prefix`` (POSIX ENOTEMPTY).
        :raises NotADirectory: ``new_prefix`` without its slash, or a parent of it, is a
            memory (POSIX ENOTDIR).
        :raises PathConflict: a destination path is blocked by a memory outside the move.
        :raises InvalidPath: a destination path breaks the path rules.
        """
        old_prefix = validate_prefix(old_prefix, self.limits)
        new_prefix = validate_prefix(new_prefix, self.limits)
        _check_tool_events(events, text=False)
        if old_prefix == "/" or new_prefix.startswith(old_prefix):
            raise InvalidRequest(f"cannot move {old_prefix} into itself")
        with self._write() as c:
            self._writable_store_in(c, store_id)
            rows = c.execute(
                "SELECT * FROM memories WHERE store_id = ? AND path >= ? AND path < ? "
                "ORDER BY path",
                (store_id, old_prefix, old_prefix[:-1] + "0"),
            ).fetchall()
            moving = {r["id"] for r in rows}
            self._check_empty_directory(c, store_id, new_prefix, moving)
            now = _now()
            targets = [new_prefix + r["path"][len(old_prefix):] for r in rows]
            for t in targets:
                validate_path(t, self.limits)
            # Every moved memory is out of the way (excluded) while each target is checked, so
            # that memories inside the move never conflict with each other.
            for target in targets:
                self._check_path_free(c, store_id, target, exclude=moving)
            result = []
            for row, target in zip(rows, targets, strict=True):
                sha, size = row["content_sha256"], row["content_size_bytes"]
                vid = self._insert_version(
                    c, store_id, row["id"], "modified", target, row["content"], sha, size,
                    actor, now,
                )
                c.execute(
                    "UPDATE memories SET path = ?, version_id = ?, updated_at = ? WHERE id = ?",
                    (target, vid, now, row["id"]),
                )
                seq = self._change(c, store_id, "put", row["id"], target, row["path"])
                self._prune_memory(c, row["id"])
                result.append(
                    Memory(row["id"], store_id, target, None, sha, size, vid, row["created_at"],
                           now, seq=seq)
                )
            self._tool_events_in(c, store_id, actor, events)
        return result

    def _check_empty_directory(
        self, c: sqlite3.Connection, store_id: str, prefix: str, moving: Collection[str]
    ) -> None:
        """:raises NotADirectory: ``prefix`` without its slash, or a parent of it, is a memory.
        :raises DirectoryNotEmpty: a memory exists below ``prefix`` (a memory outside
        ``moving`` is named as the conflict when there is one)."""
        if prefix != "/":
            segments = prefix[1:-1].split("/")
            parents = ["/" + "/".join(segments[:i]) for i in range(1, len(segments) + 1)]
            row = c.execute(
                f"SELECT id, path FROM memories WHERE store_id = ? "
                f"AND path IN ({','.join('?' * len(parents))}) ORDER BY path LIMIT 1",
                (store_id, *parents),
            ).fetchone()
            if row is not None:
                raise NotADirectory(
                    f"{row['path']} is a memory, not a directory: cannot move a directory to "
                    f"{prefix}",
                    conflicting_memory_id=row["id"], conflicting_path=row["path"],
                )
        rows = c.execute(
            "SELECT id, path FROM memories WHERE store_id = ? AND path >= ? AND path < ? "
            "ORDER BY path LIMIT ?",
            (store_id, prefix, prefix[:-1] + "0", len(moving) + 1),
        ).fetchall()
        if rows:
            row = next((r for r in rows if r["id"] not in moving), rows[0])
            raise DirectoryNotEmpty(
                f"{prefix} is not empty (e.g. {row['path']}): directories are not merged",
                conflicting_memory_id=row["id"], conflicting_path=row["path"],
            )

    def tree(self, store_id: str) -> list[Memory]:
        """Every live memory of the store, without content, in path order."""
        rows = self._all(
            f"SELECT {_BASIC_MEMORY_COLS} FROM memories WHERE store_id = ? ORDER BY path",
            (store_id,),
        )
        if not rows:
            self.get_store(store_id)
        return [_memory(r, False) for r in rows]

    def list_memories(
        self,
        store_id: str,
        *,
        path_prefix: str | None = None,
        depth: int = 0,
        limit: int = 20,
        page: str | None = None,
        view: str = "basic",
    ) -> Page[Memory | MemoryPrefix]:
        """Memories in ascending byte order of path, with ``depth`` roll-ups (API.md §2.10).

        ``depth`` 0 lists everything below the prefix; ``d >= 1`` lists memories at most ``d``
        segments below it and one ``memory_prefix`` per distinct deeper first-``d`` segments.
        """
        view = _check_view(view)
        limit = _check_limit(limit, self.limits, view)
        prefix = "/" if path_prefix is None else validate_prefix(path_prefix, self.limits)
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
            raise InvalidRequest("depth must be an integer >= 0")
        filters = [store_id, prefix, depth]
        lower, lower_incl = prefix, True
        if page:
            key = _decode_cursor(page, "memories", filters)
            if not (isinstance(key, list) and len(key) == 2 and isinstance(key[0], str)
                    and isinstance(key[1], bool)):  # fmt: skip
                raise InvalidCursor("invalid page cursor")
            lower, lower_incl = key[0], key[1]
        cols = "*" if view == "full" else _BASIC_MEMORY_COLS
        upper = prefix[:-1] + "0"
        with self._read() as c:
            self._store_in(c, store_id)
            items: list[Memory | MemoryPrefix] = []
            while len(items) <= limit:
                # Fetch in chunks; a roll-up jumps past everything below its prefix.
                rows = c.execute(
                    f"SELECT {cols} FROM memories WHERE store_id = ? "
                    f"AND path {'>=' if lower_incl else '>'} ? "
                    "AND path < ? ORDER BY path LIMIT ?",
                    (store_id, lower, upper, limit + 1),
                ).fetchall()
                if not rows:
                    break
                for row in rows:
                    rel = row["path"][len(prefix):].split("/")
                    if depth == 0 or len(rel) <= depth:
                        items.append(_memory(row, view == "full"))
                        lower, lower_incl = row["path"], False
                    else:
                        roll = prefix + "/".join(rel[:depth]) + "/"
                        items.append(MemoryPrefix(roll))
                        # resume after every path below the roll-up
                        lower, lower_incl = roll[:-1] + "0", True
                        break
                    if len(items) > limit:
                        break
        next_page = None
        if len(items) > limit:
            items = items[:limit]
            next_page = _encode_cursor("memories", filters, _sort_key(items[-1]))
        return Page(items, next_page)

    # -- versions ----------------------------------------------------------------------------

    #: The longest ``at`` :meth:`snapshot` looks at (an id or an RFC 3339 time is far shorter).
    max_at_chars = 100

    def snapshot(self, store_id: str, at: str | datetime, *, view: str = "basic",
                 viewer: str | None = None) -> Snapshot:
        """The store as it was at ``at`` (time travel, README "Time travel"): an RFC 3339 time
        (after every version created at or before it; a future time is now), a version id of
        this store (right after that version, versions ordered by ``created_at`` then ``id``
        as :meth:`list_versions` lists them), or a session id (just before that session's
        first version in this store; if it wrote none there, at the session's creation).

        Each memory shows the newest version at or before the boundary unless that one is
        ``deleted``. One read transaction, one query: for each memory of the store's history
        two index look-ups (``versions_memory_time``), its newest version at or before the
        boundary and its oldest retained one: a memory whose oldest retained version comes
        after the boundary and is not ``created`` lost its history before the boundary to
        pruning (:attr:`Snapshot.unknown_memory_ids`).

        ``viewer``: the session of a session token asking, to which a version of another
        store, or another session that wrote nothing here, is unknown like any other thing it
        was not given.

        :raises InvalidRequest: ``at`` is none of those forms, or a version of another store.
        :raises NotFound: unknown store, version or session.
        """
        view = _check_view(view)
        with self._read() as c:
            self._store_in(c, store_id)
            snap = self._snapshot_boundary(c, store_id, at, viewer)
            # The range on versions_memory_time first, the version at the boundary's instant
            # second: each memory's lookup is one index search.
            if snap.after_version_id is not None:
                cond, key = "created_at <= ? AND (created_at < ? OR id <= ?)", [
                    snap.time, snap.time, snap.after_version_id]
            elif snap.before_version_id is not None:
                cond, key = "created_at <= ? AND (created_at < ? OR id < ?)", [
                    snap.time, snap.time, snap.before_version_id]
            else:
                cond, key = "created_at <= ?", [snap.time]
            content = "v.content" if view == "full" else "NULL AS content"
            # Per memory of the store's history (live or deleted), two correlated look-ups on
            # versions_memory_time: its newest version at or before the boundary, and its
            # oldest retained one (its created_at; and if it is after the boundary and not
            # ``created``, retention pruned what was before).
            found = c.execute(
                "SELECT m.memory_id, v.id, v.operation, v.created_at, v.path, "
                f"v.content_sha256, v.content_size_bytes, v.redacted_at, {content}, "
                "f.created_at AS first_at, f.operation AS first_op, l.created_at AS live_at "
                "FROM (SELECT DISTINCT memory_id FROM versions WHERE store_id = ?) AS m "
                "LEFT JOIN memories l ON l.id = m.memory_id "
                "JOIN versions f ON f.id = (SELECT id FROM versions "
                " WHERE memory_id = m.memory_id ORDER BY created_at, id LIMIT 1) "
                "LEFT JOIN versions v ON v.id = (SELECT id FROM versions "
                f" WHERE memory_id = m.memory_id AND {cond} "
                " ORDER BY created_at DESC, id DESC LIMIT 1)",
                [store_id, *key],
            ).fetchall()
            rows = [r for r in found if r["id"] is not None and r["operation"] != "deleted"]
            # A live memory's row keeps its creation time: created after the boundary (and
            # not re-created by a revert after its oldest retained version), it did not exist.
            unknown = sorted(r["memory_id"] for r in found
                             if r["id"] is None and r["first_op"] != "created"
                             and not (r["live_at"] is not None and r["live_at"] <= r["first_at"]
                                      and r["live_at"] > snap.time))
            memories, redacted, taken = [], {}, set()
            for r in rows:
                path = r["path"]
                if r["redacted_at"] is not None:
                    redacted[r["id"]] = r["redacted_at"]
                    path = self._redacted_path(c, r["memory_id"], r["created_at"], r["id"])
                if path is None or path in taken:
                    # No retained version says where it was: keep it visible, by its id.
                    path = f"/redacted-{r['memory_id']}"
                taken.add(path)
                memories.append(Memory(
                    r["memory_id"], store_id, path,
                    (r["content"] or "") if view == "full" else None,
                    r["content_sha256"] or EMPTY_SHA256, r["content_size_bytes"] or 0, r["id"],
                    r["first_at"], r["created_at"],
                ))
        memories.sort(key=lambda m: m.path)
        return Snapshot(store_id, snap.at, snap.time, memories, snap.after_version_id,
                        snap.before_version_id, snap.session_id, redacted, unknown)

    def _redacted_path(self, c: sqlite3.Connection, memory_id: str, created_at: str,
                       version_id: str) -> str | None:
        """Where a memory whose version in effect was redacted (path erased) most likely was:
        the path of its next retained version that has one (a change of content or a deletion
        keeps the path), else of its previous one."""
        for cond, order in (("created_at > ? OR (created_at = ? AND id > ?)", "ASC"),
                            ("created_at < ? OR (created_at = ? AND id < ?)", "DESC")):
            row = c.execute(
                f"SELECT path FROM versions WHERE memory_id = ? AND path IS NOT NULL AND "
                f"({cond}) ORDER BY created_at {order}, id {order} LIMIT 1",
                (memory_id, created_at, created_at, version_id),
            ).fetchone()
            if row is not None:
                return str(row["path"])
        return None

    def _snapshot_boundary(self, c: sqlite3.Connection, store_id: str,
                           at: str | datetime, viewer: str | None = None) -> Snapshot:
        """:meth:`snapshot`'s boundary, without memories."""
        now = datetime.now(UTC)
        if isinstance(at, datetime):
            at = format_time(at)
        if not isinstance(at, str) or not at.strip():
            raise InvalidRequest("at must be an RFC 3339 time, a memory version id "
                                 "(memver_...) or a session id (sesn_...)")
        at = at.strip()
        if len(at) > self.max_at_chars or not at.isprintable():
            raise InvalidRequest(f"invalid at ({len(at)} characters): expected an RFC 3339 "
                                 "time, a memory version id or a session id")
        if at.startswith("memver_"):
            row = c.execute("SELECT store_id, created_at FROM versions WHERE id = ?",
                            (at,)).fetchone()
            if row is None or (viewer is not None and row["store_id"] != store_id):
                raise NotFound(f"memory version {at!r} not found in {store_id} (or pruned)")
            if row["store_id"] != store_id:
                raise InvalidRequest(f"memory version {at} is a version of another store, "
                                     f"not of {store_id}")
            return Snapshot(store_id, at, row["created_at"], [], after_version_id=at)
        if at.startswith("sesn_"):
            first = c.execute(
                "SELECT id, created_at FROM versions WHERE store_id = ? AND created_by_id = ? "
                "AND created_by_type = 'session_actor' ORDER BY created_at, id LIMIT 1",
                (store_id, at),
            ).fetchone()
            if first is not None:
                return Snapshot(store_id, at, first["created_at"], [],
                                before_version_id=first["id"], session_id=at)
            row = c.execute("SELECT created_at FROM sessions WHERE id = ?", (at,)).fetchone()
            if row is None or (viewer is not None and at != viewer):
                raise _no_session(at)
            return Snapshot(store_id, at, row["created_at"], [], session_id=at)
        try:
            when = parse_time(at)
            time = format_time(min(when, now))
        except (InvalidRequest, OverflowError, ValueError):
            raise InvalidRequest(
                f"invalid at {at!r}: expected an RFC 3339 time (2026-12-01T11:16:29Z), a "
                "memory version id (memver_...) or a session id (sesn_...)") from None
        if datetime.fromisoformat(at.replace("z", "Z")).tzinfo is None:
            # RFC 3339 requires a zone: taking a local-looking time as UTC would be hours off.
            raise InvalidRequest(f"at {at!r} has no time zone: add Z (UTC) or an offset such "
                                 "as +01:00 (RFC 3339)")
        return Snapshot(store_id, time, time, [])

    def list_versions(
        self,
        store_id: str,
        *,
        memory_id: str | None = None,
        operation: str | None = None,
        session_id: str | None = None,
        api_key_id: str | None = None,
        service_account_id: str | None = None,
        user_id: str | None = None,
        created_at_gte: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
        view: str = "basic",
    ) -> Page[MemoryVersion]:
        """Versions newest first; filters combine with AND (API.md §2.12)."""
        view = _check_view(view)
        limit = _check_limit(limit, self.limits, view)
        where, params = ["store_id = ?"], [store_id]
        if memory_id is not None:
            where.append("memory_id = ?")
            params.append(memory_id)
        if operation is not None:
            if operation not in _OPERATIONS:
                raise InvalidRequest("operation must be created, modified or deleted")
            where.append("operation = ?")
            params.append(operation)
        for type_, value in (
            ("session_actor", session_id),
            ("api_actor", api_key_id),
            ("service_account_actor", service_account_id),
            ("user_actor", user_id),
        ):
            if value is not None:
                where.append("created_by_type = ? AND created_by_id = ?")
                params += [type_, value]
        if created_at_gte is not None:
            where.append("created_at >= ?")
            params.append(format_time(parse_time(created_at_gte)))
        if created_at_lte is not None:
            where.append("created_at <= ?")
            params.append(format_time(parse_time(created_at_lte)))
        filters = ["versions", list(params)]  # a copy: see list_stores
        if page:
            _after_cursor(page, "versions", filters, where, params)
        cols = "*" if view == "full" else "*, NULL AS content"
        # created_at first: ids from two processes in the same millisecond need not be in
        # time order, and API.md §2.12 orders by created_at, then id.
        with self._read() as c:
            self._store_in(c, store_id)
            rows = c.execute(
                f"SELECT {cols} FROM versions WHERE {' AND '.join(where)} "
                "ORDER BY created_at DESC, id DESC LIMIT ?",
                [*params, limit + 1],
            ).fetchall()
        return _newest_first_page(rows, limit, "versions", filters,
                                  lambda r: _version(r, view == "full"))

    def get_version(self, store_id: str, version_id: str, *, view: str = "full") -> MemoryVersion:
        view = _check_view(view)
        row = self._one(
            "SELECT * FROM versions WHERE id = ? AND store_id = ?", (version_id, store_id)
        )
        if row is None:
            self.get_store(store_id)
            raise NotFound(f"memory version {version_id!r} not found in {store_id}")
        return _version(row, view == "full")

    def restore_version(self, store_id: str, version_id: str, *, path: str | bytes | None = None,
                        actor: Actor | None) -> Memory:
        """Bring back a version's content as a new version of its memory, in one transaction.
        A live memory gets that content (at ``path`` if given, else where it is; nothing is
        written when nothing changes). A deleted memory comes back under its own id, so its
        history stays one memory's (as after a session revert): a ``created`` version at
        ``path``, else the version's path, by create's rules (a taken path is a conflict),
        and a ``put`` on the change feed.

        :raises NotFound: unknown store or version. :raises InvalidRequest: the version was
            redacted or records a deletion: it has no content.
        :raises InvalidPath, PathConflict, StoreArchived, LimitExceeded, ContentTooLarge:
        """
        new_path = None if path is None else validate_path(path, self.limits)
        with self._write() as c:
            v = c.execute("SELECT * FROM versions WHERE id = ? AND store_id = ?",
                          (version_id, store_id)).fetchone()
            if v is None:
                self._store_in(c, store_id)
                raise NotFound(f"memory version {version_id!r} not found in {store_id}")
            if v["redacted_at"] is not None:
                raise InvalidRequest(f"version {version_id} was redacted: its content is gone "
                                     "and cannot be restored")
            if v["operation"] == "deleted" or v["content"] is None:
                raise InvalidRequest(
                    f"version {version_id} records the deletion of {v['path']}: it has no "
                    "content to restore (restore the version before it)")
            text, data = encode_content(v["content"], self.limits)
            row = c.execute("SELECT * FROM memories WHERE id = ? AND store_id = ?",
                            (v["memory_id"], store_id)).fetchone()
            if row is not None:
                return self._modify_in(c, row, (text, data), new_path, False, actor)
            return self._create_in(c, store_id, new_path or v["path"], text, data, actor,
                                   memory_id=v["memory_id"])

    def redact_version(
        self, store_id: str, version_id: str, *, actor: Actor | None
    ) -> MemoryVersion:
        """Erase a version's path and content for good (idempotent).

        :raises InvalidRequest: the version is the head of a live memory.
        """
        with self._write() as c:
            self._store_in(c, store_id)
            row = c.execute(
                "SELECT * FROM versions WHERE id = ? AND store_id = ?", (version_id, store_id)
            ).fetchone()
            if row is None:
                raise NotFound(f"memory version {version_id!r} not found in {store_id}")
            if row["redacted_at"] is None:
                # By primary key: memories.version_id has no index.
                head = c.execute(
                    "SELECT path FROM memories WHERE id = ? AND version_id = ?",
                    (row["memory_id"], version_id),
                ).fetchone()
                if head is not None:
                    raise InvalidRequest(
                        f"version {version_id} is the current content of the memory at "
                        f"{head['path']}: update or delete the memory first"
                    )
                c.execute(
                    "UPDATE versions SET path = NULL, content = NULL, content_sha256 = NULL, "
                    "content_size_bytes = NULL, redacted_at = ?, redacted_by_type = ?, "
                    "redacted_by_id = ? WHERE id = ?",
                    (_now(), actor.type if actor else None, actor.id if actor else None,
                     version_id),
                )
                # The memory's history changed (mounts show it in .history/).
                self._change(c, store_id, "history", row["memory_id"])
        return self.get_version(store_id, version_id)

    def prune_versions(self, *, now: datetime | None = None) -> int:
        """Delete versions past the retention window, keeping the newest ``retention_keep`` of
        every memory whatever their age. Returns how many were deleted.

        It also bounds the change feed of every store (:meth:`_prune_changes_in`; and the
        last change of a deleted store once it is older than :attr:`feed_keep_age`) and the
        events (:meth:`_prune_events_in`), which writes do too every :attr:`feed_prune_every`
        changes."""
        now = now or datetime.now(UTC)
        cutoff = format_time(now - timedelta(days=self.limits.retention_days))
        with self._write() as c:
            gone = c.execute(
                "DELETE FROM versions WHERE created_at < ? AND id IN ("
                " SELECT id FROM (SELECT id, row_number() OVER"
                "  (PARTITION BY memory_id ORDER BY id DESC) AS n FROM versions) AS ranked"
                " WHERE n > ?) RETURNING store_id, memory_id",
                (cutoff, max(1, self.limits.retention_keep)),  # keep live heads
            ).fetchall()
            pruned = len(gone)
            # Each memory whose history lost versions: one change (mounts' .history/).
            for store_id, memory_id in sorted({(r[0], r[1]) for r in gone}):
                self._change(c, store_id, "history", memory_id)
            changes = sum(
                self._prune_changes_in(c, r[0], now)
                for r in c.execute("SELECT id FROM stores").fetchall()
            )
            changes += c.execute(
                "DELETE FROM changes WHERE at < ? AND store_id NOT IN (SELECT id FROM stores)",
                (format_time(now - self.feed_keep_age),),
            ).rowcount
            events = self._prune_events_in(c, now)
        log.info("pruned %d versions, %d changes, %d events", pruned, changes, events)
        return pruned

    def _prune_events_in(self, c: sqlite3.Connection, now: datetime) -> int:
        """Bound the events (README "Retention"): a session's events are its audit log and
        stay as long as the session, then go :attr:`deleted_session_grace` after it is deleted
        (a live stream still ends on its ``session.deleted``); the events of mounts without a
        session go after the retention window (``retention_days``). Returns how many went."""
        n = 0
        grace = format_time(now - self.deleted_session_grace)
        for (session_id,) in c.execute(
            "SELECT session_id FROM events WHERE type = 'session.deleted' AND processed_at < ?",
            (grace,),
        ).fetchall():
            if session_id and c.execute(
                "SELECT 1 FROM sessions WHERE id = ?", (session_id,)
            ).fetchone() is None:
                n += c.execute("DELETE FROM events WHERE session_id = ?", (session_id,)).rowcount
        # In seq order up to the first event inside the window (events arrive about in time
        # order): the cost is the number of events deleted, not the size of the table.
        cutoff = format_time(now - timedelta(days=self.limits.retention_days))
        young = c.execute(
            "SELECT seq FROM events WHERE session_id IS NULL AND processed_at >= ? "
            "ORDER BY seq LIMIT 1",
            (cutoff,),
        ).fetchone()
        n += c.execute(
            "DELETE FROM events WHERE session_id IS NULL AND seq < ?",
            (young[0] if young else 2**63 - 1,),
        ).rowcount
        return n

    # -- change feed -------------------------------------------------------------------------

    #: The change feed of a store keeps at least its newest ``feed_keep`` changes, and every
    #: change younger than ``feed_keep_age``; older ones are pruned (a follower that far behind
    #: reloads the whole tree: :class:`FeedGap`).
    feed_keep = 10_000
    feed_keep_age = timedelta(hours=24)
    #: A write whose change seq is a multiple of this also prunes its store's feed and the
    #: events (a few indexed statements in its transaction).
    feed_prune_every = 1000
    #: How long the events of a deleted session outlive it.
    deleted_session_grace = timedelta(hours=1)

    def _prune_changes_in(self, c: sqlite3.Connection, store_id: str, now: datetime) -> int:
        """Delete the store's changes that are both older than :attr:`feed_keep_age` and not
        among its newest :attr:`feed_keep`, and record the newest seq deleted
        (``stores.changes_pruned_seq``) so that :meth:`changes_since` can tell a follower it
        missed some. Returns how many were deleted."""
        oldest_kept = c.execute(
            "SELECT seq FROM changes WHERE store_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?",
            (store_id, max(1, self.feed_keep) - 1),
        ).fetchone()
        if oldest_kept is None:
            return 0
        # Up to the first change inside the age window, in seq order: the cost is the number
        # of changes deleted (a clock that went back only keeps more).
        young = c.execute(
            "SELECT seq FROM changes WHERE store_id = ? AND seq < ? AND at >= ? "
            "ORDER BY seq LIMIT 1",
            (store_id, oldest_kept[0], format_time(now - self.feed_keep_age)),
        ).fetchone()
        top = c.execute(
            "SELECT seq FROM changes WHERE store_id = ? AND seq < ? ORDER BY seq DESC LIMIT 1",
            (store_id, young[0] if young else oldest_kept[0]),
        ).fetchone()
        if top is None:
            return 0
        c.execute(
            # CASE, not the two-argument max() that only SQLite has (greatest() elsewhere).
            "UPDATE stores SET changes_pruned_seq = CASE WHEN changes_pruned_seq > ? "
            "THEN changes_pruned_seq ELSE ? END WHERE id = ?",
            (top[0], top[0], store_id),
        )
        deleted: int = c.execute(
            "DELETE FROM changes WHERE store_id = ? AND seq <= ?", (store_id, top[0])
        ).rowcount
        return deleted

    def last_change(self, store_id: str) -> int:
        """The newest change sequence number of the store (0 if none)."""
        row = self._one("SELECT max(seq) FROM changes WHERE store_id = ?", (store_id,))
        return int(row[0] or 0) if row else 0

    def changes_since(self, store_id: str, seq: int, limit: int = 1000) -> list[Change]:
        """The store's changes after ``seq``, oldest first (at most ``limit``).

        :raises FeedGap: changes after ``seq`` were pruned (:attr:`feed_keep`): the follower
            must reload the whole tree and go on from :meth:`last_change`.
        """
        with self._read() as c:
            rows = c.execute(
                "SELECT * FROM changes WHERE store_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (store_id, seq, limit),
            ).fetchall()
            horizon = c.execute(
                "SELECT changes_pruned_seq FROM stores WHERE id = ?", (store_id,)
            ).fetchone()
        if horizon is not None and seq < horizon[0]:
            raise FeedGap(
                f"the change feed of {store_id} no longer holds the changes after {seq} (pruned "
                f"up to {horizon[0]}): reload the whole tree"
            )
        return [
            Change(r["seq"], r["store_id"], r["op"], r["memory_id"], r["path"], r["old_path"])
            for r in rows
        ]

    # -- sessions ----------------------------------------------------------------------------

    # -- undo a session (memfs.revert: the plan; README "Undo a session") ---------------------

    def revert(self, target: str, *, actor: Actor | None, dry_run: bool = False,
               force: bool = False) -> dict[str, Any]:
        """Undo a session (``target``: its ``sesn_`` id; every version its ``session_actor``
        wrote, in every store) or an earlier revert (its ``memrevert_`` id: the versions it
        wrote). Each memory they touched goes back to its state before them, as new versions
        by ``actor``, all in ONE transaction, and the revert is recorded under a new
        ``memrevert_`` id (none when nothing was written). The rules, conflicts and the
        result object: :mod:`memfs.revert`. With ``dry_run`` the same transaction runs and is
        rolled back: the same plan, conflicts and errors, nothing written.

        :raises NotFound: unknown session or revert. :raises InvalidRequest: a bad argument.
        :raises StoreArchived, LimitExceeded, PathConflict, InvalidPath, ContentTooLarge: the
            store refused a step; nothing was changed.
        """
        from . import revert as rv

        if not isinstance(target, str) or not re.fullmatch(r"[A-Za-z0-9_]{1,100}", target):
            raise InvalidRequest("the target must be a session id (sesn_…) or a revert id "
                                 f"({rv.REVERT_PREFIX}_…)")
        if not isinstance(dry_run, bool) or not isinstance(force, bool):
            raise InvalidRequest("dry_run and force must be true or false")
        out: dict[str, Any] = {}
        try:
            with self._write() as c:
                out = self._revert_in(c, rv, target, actor, dry_run, force)
                if dry_run:
                    raise rv.DryRun
        except rv.DryRun:
            pass
        except MemfsError as e:
            if not isinstance(e, StorageError | Busy | NotFound | WouldBlock):
                e.args = (f"the revert was refused and nothing was changed: {e.message}",
                          *e.args[1:])
            raise
        return out

    def _revert_in(self, c: sqlite3.Connection, rv: Any, target: str, actor: Actor | None,
                   dry_run: bool, force: bool) -> dict[str, Any]:
        kind = "revert" if target.startswith(rv.REVERT_PREFIX + "_") else "session"
        if kind == "revert":
            rec = c.execute("SELECT version_ids FROM reverts WHERE id = ?", (target,)).fetchone()
            if rec is None:
                raise NotFound(f"revert {target!r} not found")
            ids = json.loads(rec["version_ids"])
            rows = [r for i in range(0, len(ids), 500) for r in c.execute(
                "SELECT id, memory_id FROM versions WHERE id IN "
                f"({','.join('?' * len(ids[i:i + 500]))})", ids[i:i + 500]).fetchall()]
        else:
            rows = c.execute(
                "SELECT v.id, v.memory_id, v.store_id FROM stores s JOIN versions v ON "
                "v.store_id = s.id AND v.created_by_id = ? "
                "WHERE v.created_by_type = 'session_actor'", (target,)
            ).fetchall()
            if not rows:
                self._session_in(c, target)  # NotFound for an unknown session
            # Only the stores attached to the session (fixed at its creation; it can write
            # nowhere else): a copy of a store (memfs import --name) keeps its versions'
            # authors. A deleted session's attachments are gone: then every store.
            if c.execute("SELECT 1 FROM sessions WHERE id = ?", (target,)).fetchone():
                attached = {r["memory_store_id"] for r in c.execute(
                    "SELECT memory_store_id FROM session_resources WHERE session_id = ?",
                    (target,)).fetchall()}
                rows = [r for r in rows if r["store_id"] in attached]
        target_ids = {r["id"] for r in rows}
        mids = sorted({r["memory_id"] for r in rows})
        histories: dict[str, list[Any]] = {}
        for i in range(0, len(mids), 500):
            part = mids[i:i + 500]
            marks = ",".join("?" * len(part))
            for r in c.execute(f"SELECT * FROM versions WHERE memory_id IN ({marks}) "
                               "ORDER BY created_at, id", part).fetchall():
                histories.setdefault(r["memory_id"], []).append(rv.Version.from_row(r))
        live = {sid: {r["id"]: r["path"] for r in c.execute(
                    "SELECT id, path FROM memories WHERE store_id = ?", (sid,)).fetchall()}
                for sid in {vs[0].store_id for vs in histories.values()}}
        steps = rv.plan(target_ids, histories, live, force=force)
        now = _now()
        todo = [s for s in steps if s.action in ("delete", "recreate", "restore")]
        heads = {s.memory_id: self._memory_in(c, s.store_id, "id", s.memory_id)
                 for s in todo if s.action != "recreate"}
        # Removals and moves away first (a move to a placeholder outside the path space, in
        # this transaction only), then every placement: rename chains and swaps work.
        for s in todo:
            if s.action == "delete":
                self._writable_store_in(c, s.store_id)  # StoreArchived, as for the others
                row = heads[s.memory_id]
                s.version_id = self._insert_version(
                    c, s.store_id, s.memory_id, "deleted", row["path"], None, None, None, actor,
                    now)
                c.execute("DELETE FROM memories WHERE id = ?", (s.memory_id,))
                self._change(c, s.store_id, "delete", s.memory_id, row["path"])
                self._prune_memory(c, s.memory_id)
            elif s.moves:
                c.execute("UPDATE memories SET path = ? WHERE id = ?",
                          ("revert:" + s.memory_id, s.memory_id))
        for s in todo:
            if s.action == "delete":
                continue
            path = validate_path(s.path, self.limits)
            text, data = encode_content(s.content, self.limits)
            if s.action == "restore":
                m = self._modify_in(c, heads[s.memory_id], (text, data), path, False, actor, now)
                s.version_id = m.memory_version_id
                continue
            s.version_id = self._create_in(c, s.store_id, path, text, data, actor,
                                           memory_id=s.memory_id, now=now).memory_version_id
        revert_id = None
        if todo:
            revert_id = new_id(rv.REVERT_PREFIX)
            c.execute(
                "INSERT INTO reverts (id, target_type, target_id, forced, created_at, "
                "created_by_type, created_by_id, version_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (revert_id, kind, target, int(force), now, actor.type if actor else None,
                 actor.id if actor else None, json.dumps([s.version_id for s in todo])),
            )
        if dry_run:  # the versions of a rolled-back transaction do not exist
            for s in todo:
                s.version_id = None
        return rv.result(steps, revert_id=None if dry_run else revert_id,
                         target={"type": kind, "id": target}, dry_run=dry_run, force=force,
                         created_at=now, actor=actor.to_dict() if actor else None)

    def create_session(
        self,
        resources: Sequence[dict[str, Any]],
        *,
        root: str = "/mnt/memory",
        agent: dict[str, Any] | None = None,
        environment_id: str | None = None,
        metadata: dict[str, str] | None = None,
        title: str | None = None,
        status: str = "idle",
        launcher: dict[str, Any] | None = None,
    ) -> Session:
        """Create a session with memory stores attached (SPEC §3, API.md §4.2).

        Each resource is ``{"type": "memory_store", "memory_store_id", "access"?,
        "instructions"?}``. Validated: at most ``max_session_stores``, each store exists and is
        not archived, no store twice, ``access`` read_write (default) or read_only,
        instructions of at most ``max_instructions_chars``. ``name`` and ``description`` are
        snapshotted; ``mount_path`` is ``root/<slug>`` with ``-2``, ``-3``… on collisions.
        ``launcher`` identifies the local process that owns the session (opaque here; the
        launcher uses it to end sessions whose launcher died).

        :raises InvalidRequest, LimitExceeded, StoreArchived, NotFound:
        """
        lim = self.limits
        if not isinstance(resources, list | tuple):
            raise InvalidRequest("resources must be a list")
        _validate_text(resources, "resources")
        mem = [r for r in resources if isinstance(r, dict) and r.get("type") == "memory_store"]
        if len(mem) != len(resources):
            raise InvalidRequest("only resources of type 'memory_store' are supported")
        if len(mem) > lim.max_session_stores:
            raise LimitExceeded(
                f"a session can attach at most {lim.max_session_stores} memory stores "
                f"({len(mem)} given)"
            )
        if metadata is not None:
            metadata = _validate_metadata(metadata, lim)
        for what, value in (("title", title), ("environment_id", environment_id)):
            if value is not None and not isinstance(value, str):
                raise InvalidRequest(f"{what} must be a string")
            _validate_text(value, what)
        _validate_text(agent, "agent")
        _validate_text(root, "the mount root")
        _validate_text(launcher, "launcher")
        if status not in _SESSION_STATUSES:
            raise InvalidRequest(f"invalid session status {status!r}")
        if (not isinstance(root, str) or not root.startswith("/") or len(root) > 512
                or any(unicodedata.category(ch) == "Cc" for ch in root)):  # fmt: skip
            raise InvalidRequest("the mount root must be an absolute path")
        root = root.rstrip("/")
        sid = new_id("sesn")
        now = _now()
        with self._write() as c:
            seen: set[str] = set()
            used: set[str] = set()
            rows = []
            for pos, r in enumerate(mem):
                store_id, access, instructions = _validate_session_resource(r, lim)
                if store_id in seen:
                    raise InvalidRequest(f"memory store {store_id} is attached twice")
                seen.add(store_id)
                store = self._store_in(c, store_id)
                if store.archived_at is not None:
                    raise StoreArchived(
                        f"memory store {store_id} is archived and cannot be attached"
                    )
                base = slugify(store.name) or store.id
                slug, n = base, 1
                while slug in used:
                    n += 1
                    slug = f"{base}-{n}"
                used.add(slug)
                rows.append(
                    (new_id("sesrsc"), sid, pos, store.id, access, instructions, store.name,
                     store.description, f"{root}/{slug}")
                )
            c.execute(
                "INSERT INTO sessions (id, status, agent, environment_id, metadata, title, "
                "created_at, updated_at, launcher) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sid,
                    status,
                    json.dumps(agent) if agent is not None else None,
                    environment_id,
                    json.dumps(metadata or {}),
                    title,
                    now,
                    now,
                    json.dumps(launcher) if launcher is not None else None,
                ),
            )
            c.executemany("INSERT INTO session_resources VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        return self.get_session(sid)

    def get_session(self, session_id: str) -> Session:
        """:raises NotFound:"""
        with self._read() as c:
            found = self._sessions_in(c, [session_id])
        if not found:
            raise _no_session(session_id)
        return found[0]

    def _sessions_in(self, c: sqlite3.Connection, ids: Sequence[str]) -> list[Session]:
        """The sessions ``ids``, in that order, with their resources (two queries in all);
        an id with no session is left out."""
        if not ids:  # "IN ()" is SQLite's only
            return []
        marks = ",".join("?" * len(ids))
        rows = {
            r["id"]: r for r in c.execute(f"SELECT * FROM sessions WHERE id IN ({marks})", ids)
        }
        res: dict[str, list[sqlite3.Row]] = {}
        for r in c.execute(
            f"SELECT * FROM session_resources WHERE session_id IN ({marks}) "
            "ORDER BY session_id, position",
            ids,
        ):
            res.setdefault(r["session_id"], []).append(r)
        return [_session(rows[i], res.get(i, [])) for i in ids if i in rows]

    def _session_in(self, c: sqlite3.Connection, session_id: str) -> sqlite3.Row:
        """The session's row. :raises NotFound:"""
        row = c.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise _no_session(session_id)
        return row

    def list_sessions(
        self,
        *,
        memory_store_id: str | None = None,
        statuses: Sequence[str] | None = None,
        include_archived: bool = False,
        order: str = "desc",
        created_at_gt: str | datetime | None = None,
        created_at_gte: str | datetime | None = None,
        created_at_lt: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
        ids: Collection[str] | None = None,
    ) -> Page[Session]:
        """Sessions by id; ``ids``: only these (a session token sees its own session)."""
        limit = _check_limit(limit, self.limits)
        if order not in ("asc", "desc"):
            raise InvalidRequest("order must be 'asc' or 'desc'")
        where: list[str] = []
        params: list[Any] = []
        _only_ids(where, params, ids)
        if memory_store_id is not None:
            where.append(
                "id IN (SELECT session_id FROM session_resources WHERE memory_store_id = ?)"
            )
            params.append(memory_store_id)
        if statuses:
            for s in statuses:
                if s not in _SESSION_STATUSES:
                    raise InvalidRequest(f"invalid session status {s!r}")
            where.append(f"status IN ({','.join('?' * len(statuses))})")
            params += list(statuses)
        if not include_archived:
            where.append("archived_at IS NULL")
        for op, value in (
            (">", created_at_gt),
            (">=", created_at_gte),
            ("<", created_at_lt),
            ("<=", created_at_lte),
        ):
            if value is not None:
                where.append(f"created_at {op} ?")
                params.append(format_time(parse_time(value)))
        filters = ["sessions", order, list(params)]  # a copy: see list_stores
        # Bidirectional cursors (the SDK's BidirectionalPageCursor): a next_page is the id of
        # the last item (resume after it), a prev_page is ["before", id of the first item].
        after = before = None
        if page:
            key = _decode_cursor(page, "sessions", filters)
            if isinstance(key, str):
                after = key
            elif (isinstance(key, list) and len(key) == 2 and key[0] == "before"
                  and isinstance(key[1], str)):
                before = key[1]
            else:
                raise InvalidCursor("invalid page cursor")
        forward, backward = order.upper(), "ASC" if order == "desc" else "DESC"
        ahead, behind = ("<", ">") if order == "desc" else (">", "<")

        def page_ids(cond: str | None, anchor: str | None, sort: str, n: int) -> list[str]:
            conds = where + ([f"id {cond} ?"] if cond else [])
            sql = "SELECT id FROM sessions" + (" WHERE " + " AND ".join(conds) if conds else "")
            args = [*params, *([anchor] if cond else []), n]
            return [r["id"] for r in c.execute(sql + f" ORDER BY id {sort} LIMIT ?", args)]

        with self._read() as c:  # one snapshot: the page, its neighbours and their contents
            if before is None:
                found = page_ids(ahead if after else None, after, forward, limit + 1)
                more_ahead, found = len(found) > limit, found[:limit]
                more_behind = bool(found) and bool(page_ids(behind, found[0], backward, 1))
            else:
                found = page_ids(behind, before, backward, limit + 1)
                more_behind, found = len(found) > limit, found[:limit][::-1]
                more_ahead = bool(found) and bool(page_ids(ahead, found[-1], forward, 1))
            items = self._sessions_in(c, found)
        next_page = _encode_cursor("sessions", filters, found[-1]) if more_ahead else None
        prev_page = (
            _encode_cursor("sessions", filters, ["before", found[0]]) if more_behind else None
        )
        return Page(items, next_page, prev_page)

    def set_session_status(self, session_id: str, status: str) -> Session:
        """Move a session to ``status`` and record the matching ``session.status_*`` event."""
        if status not in _SESSION_STATUSES:
            raise InvalidRequest(f"invalid session status {status!r}")
        event_type = {
            "running": "session.status_running",
            "idle": "session.status_idle",
            "terminated": "session.status_terminated",
            "rescheduling": "session.status_rescheduled",
        }[status]
        extra: dict[str, Any] = {}
        if status == "idle":
            extra = {"stop_reason": {"type": "end_turn"}, "stop_details": None}
        with self._write() as c:
            row = self._session_in(c, session_id)
            if row["status"] != status:
                c.execute(
                    "UPDATE sessions SET status = ?, updated_at = ? WHERE id = ?",
                    (status, _now(), session_id),
                )
                self._insert_event(c, session_id, None, {"type": event_type, **extra})
            if status == "terminated":
                c.execute("UPDATE session_tokens SET revoked_at = ? "
                          "WHERE session_id = ? AND revoked_at IS NULL", (_now(), session_id))
        return self.get_session(session_id)

    def launched_sessions(self) -> list[tuple[str, dict[str, Any]]]:
        """``(session_id, launcher)`` of every session not terminated that a local launcher
        owns (see :meth:`create_session`'s ``launcher``)."""
        rows = self._all(
            "SELECT id, launcher FROM sessions WHERE launcher IS NOT NULL "
            "AND status != 'terminated' ORDER BY id"
        )
        return [(r["id"], json.loads(r["launcher"])) for r in rows]

    def update_session(
        self, session_id: str, *, metadata: Any = UNSET, title: Any = UNSET
    ) -> Session:
        with self._write() as c:
            row = self._session_in(c, session_id)
            meta = json.loads(row["metadata"])
            new_meta = meta if metadata in (UNSET, None) else _patch_metadata(
                meta, metadata, self.limits
            )
            new_title = row["title"] if title is UNSET else title
            if new_title is not None and not isinstance(new_title, str):
                raise InvalidRequest("title must be a string")
            _validate_text(new_title, "title")
            if (new_meta, new_title) != (meta, row["title"]):
                c.execute(
                    "UPDATE sessions SET metadata = ?, title = ?, updated_at = ? WHERE id = ?",
                    (json.dumps(new_meta), new_title, _now(), session_id),
                )
        return self.get_session(session_id)

    def archive_session(self, session_id: str) -> Session:
        with self._write() as c:
            row = self._session_in(c, session_id)
            if row["archived_at"] is None:
                now = _now()
                c.execute(
                    "UPDATE sessions SET archived_at = ?, updated_at = ? WHERE id = ?",
                    (now, now, session_id),
                )
        return self.get_session(session_id)

    def delete_session(self, session_id: str) -> None:
        with self._write() as c:
            self._session_in(c, session_id)
            self._insert_event(c, session_id, None, {"type": "session.deleted"})
            c.execute("DELETE FROM session_resources WHERE session_id = ?", (session_id,))
            c.execute("DELETE FROM session_tokens WHERE session_id = ?", (session_id,))
            c.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

    def get_session_resource(self, session_id: str, resource_id: str) -> SessionResource:
        """A resource by its ``sesrsc_`` id or by its ``memory_store_id``.

        :raises NotFound: unknown session, or no such resource in it.
        """
        for r in self.get_session(session_id).resources:
            if resource_id in (r.id, r.memory_store_id):
                return r
        raise NotFound(f"resource {resource_id!r} not found in session {session_id}")

    # -- session tokens ----------------------------------------------------------------------

    def create_session_token(self, session_id: str, *, ttl_seconds: Any = None) -> SessionToken:
        """Make a credential for the commands of a session (what ``memfs run`` hands its
        agent instead of a key): valid only for the session's attached stores with their
        access, only while the session is ``running``, and for ``ttl_seconds`` at most
        (default :data:`SESSION_TOKEN_TTL`, at most :data:`SESSION_TOKEN_MAX_TTL`). The
        secret is in the result this once; the store keeps its SHA-256 only.

        :raises NotFound: unknown session. :raises InvalidRequest: a terminated session, or
            a bad ``ttl_seconds``.
        """
        ttl = check_token_ttl(ttl_seconds)
        secret = SESSION_TOKEN_PREFIX + secrets.token_urlsafe(32)
        token_id = new_id("sesstok")
        created = datetime.now(UTC)
        now, expires = format_time(created), format_time(created + timedelta(seconds=ttl))
        with self._write() as c:
            if self._session_in(c, session_id)["status"] == "terminated":
                raise InvalidRequest(f"session {session_id} is terminated: no token can be "
                                     "made for it")
            c.execute(
                "INSERT INTO session_tokens (id, session_id, token_sha256, created_at, "
                "expires_at) VALUES (?, ?, ?, ?, ?)",
                (token_id, session_id, sha256_hex(secret.encode()), now, expires))
        return SessionToken(token_id, session_id, secret, now, expires)

    def session_grant(self, token: str) -> SessionGrant:
        """What the session token ``token`` may do now.

        :raises Unauthorized: not a token of this store, revoked (its session ended),
            expired, or its session is not running.
        """
        row = self._one(
            "SELECT t.id, t.session_id, t.expires_at, t.revoked_at, s.status "
            "FROM session_tokens t JOIN sessions s ON s.id = t.session_id "
            "WHERE t.token_sha256 = ?", (sha256_hex(token.encode()),))
        if row is None:
            raise Unauthorized("invalid session token: not a token of a session of this "
                               "server")
        sid = row["session_id"]
        if row["revoked_at"] is not None or row["status"] == "terminated":
            raise Unauthorized(f"the session token of {sid} is no longer valid: the session "
                               "ended")
        if row["status"] != "running":
            raise Unauthorized(f"the session token of {sid} is valid only while the session "
                               f"runs (it is {row['status']})")
        if row["expires_at"] <= _now():
            raise Unauthorized(f"the session token of {sid} expired at {row['expires_at']}")
        access = {r["memory_store_id"]: r["access"] for r in self._all(
            "SELECT memory_store_id, access FROM session_resources WHERE session_id = ?",
            (sid,))}
        return SessionGrant(sid, row["id"], access, row["expires_at"])

    # -- events ------------------------------------------------------------------------------

    def _insert_event(
        self, c: sqlite3.Connection, session_id: str | None, store_id: str | None,
        body: dict[str, Any],
    ) -> Event:
        e = _complete_event(session_id, body)
        c.execute(
            "INSERT INTO events (id, session_id, store_id, type, processed_at, body) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (e.id, session_id, store_id, e.type, e.processed_at, json.dumps(e.body)),
        )
        return e

    def add_events(
        self, session_id: str | None, events: Sequence[dict[str, Any]], *,
        store_id: str | None = None,
    ) -> list[Event]:
        """Append events (each a dict with at least ``type``); ``id`` and ``processed_at`` are
        filled in when missing. ``session_id`` None records a mount's events without a session.

        :raises NotFound: unknown session.
        """
        for e in events:
            if not isinstance(e, dict) or not isinstance(e.get("type"), str):
                raise InvalidRequest("every event needs a string 'type'")
            _validate_text(e, "event")
        done = [_complete_event(session_id, e) for e in events]
        self._insert_event_rows(
            session_id,
            [(e.id, session_id, store_id, e.type, e.processed_at, json.dumps(e.body))
             for e in done],
        )
        return done

    def _insert_event_rows(self, session_id: str | None,
                           values: Sequence[tuple[Any, ...]]) -> None:
        """Insert ``(id, session_id, store_id, type, processed_at, body)`` rows in one write
        (one executemany: a mount flushes hundreds of tool events at a time)."""
        with self._write() as c:
            if session_id is not None:
                self._session_in(c, session_id)
            c.executemany(
                "INSERT INTO events (id, session_id, store_id, type, processed_at, body) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                values,
            )

    def record_tool_events(
        self, session_id: str | None, rows: Sequence[tuple[str, str, str, str]], *,
        store_id: str | None = None,
    ) -> int:
        """Append tool events a mount of this process built itself, each as ``(id, type,
        processed_at, JSON body)`` (:func:`memfs.toolevents.tool_pair_rows`): the trusted
        counterpart of :meth:`add_events`, without its per-event checks, copies and encoding,
        for the event flusher's batches. What comes from outside (the API) goes through
        :meth:`add_events` and :meth:`add_tool_events`. A lone surrogate (which no memfs-built
        event should hold) is stored as ``?``. Returns how many were recorded.

        :raises NotFound: unknown session.
        """
        values = []
        for event_id, type_, processed_at, body in rows:
            if not body.isascii():
                try:
                    body.encode("utf-8")
                except UnicodeEncodeError:
                    body = body.encode("utf-8", "replace").decode("utf-8")
            values.append((event_id, session_id, store_id, type_, processed_at, body))
        self._insert_event_rows(session_id, values)
        return len(values)

    def list_events(
        self,
        session_id: str,
        *,
        types: Sequence[str] | None = None,
        order: str = "asc",
        created_at_gt: str | datetime | None = None,
        created_at_gte: str | datetime | None = None,
        created_at_lt: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
        after_seq: int | None = None,
    ) -> Page[Event]:
        """Session events in time order (``processed_at``, ``asc`` by default; events of the
        same time in the order they were recorded). Not in ``seq`` order: each mount of a
        session records its own batches of tool events, so one store's batch is recorded after
        another's although its events happened in between."""
        limit = _check_limit(limit, self.limits, maximum=1000)
        if order not in ("asc", "desc"):
            raise InvalidRequest("order must be 'asc' or 'desc'")
        self._run(self._session_in, session_id)
        where, params = ["session_id = ?"], [session_id]
        if types:
            where.append(f"type IN ({','.join('?' * len(types))})")
            params += list(types)
        for op, value in (
            (">", created_at_gt),
            (">=", created_at_gte),
            ("<", created_at_lt),
            ("<=", created_at_lte),
        ):
            if value is not None:
                where.append(f"processed_at {op} ?")
                params.append(format_time(parse_time(value)))
        if after_seq is not None:
            where.append("seq > ?")
            params.append(after_seq)
        filters = ["events", order, list(params)]  # a copy: see list_stores
        if page:
            key = _decode_cursor(page, "events", filters)
            if not (isinstance(key, list) and len(key) == 2 and isinstance(key[0], str)
                    and isinstance(key[1], int) and not isinstance(key[1], bool)):
                raise InvalidCursor("invalid page cursor")
            op = ">" if order == "asc" else "<"
            where.append(f"(processed_at {op} ? OR (processed_at = ? AND seq {op} ?))")
            params += [key[0], key[0], key[1]]
        rows = self._all(
            f"SELECT * FROM events WHERE {' AND '.join(where)} "
            f"ORDER BY processed_at {order.upper()}, seq {order.upper()} LIMIT ?",
            [*params, limit + 1],
        )
        items = [_event(r) for r in rows[:limit]]
        next_page = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_page = _encode_cursor("events", filters, [last["processed_at"], last["seq"]])
        return Page(items, next_page)

    def last_event_seq(self, session_id: str) -> int:
        row = self._one("SELECT max(seq) FROM events WHERE session_id = ?", (session_id,))
        return int(row[0] or 0) if row else 0

    def events_after(self, session_id: str, seq: int, limit: int = 500) -> list[tuple[int, Event]]:
        """Events of a session with a sequence number above ``seq`` (for live streams)."""
        rows = self._all(
            "SELECT * FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (session_id, seq, limit),
        )
        return [(r["seq"], _event(r)) for r in rows]

    def event_marks(self, after: int | None) -> tuple[int, dict[str, int]]:
        """The newest event seq of the database and, per session with events above ``after``,
        its newest seq (``after`` None: the position only). One call serves every live event
        stream of a server (:class:`memfs.api.EventHub`)."""
        with self._read() as c:
            last = int(c.execute("SELECT max(seq) FROM events").fetchone()[0] or 0)
            if after is None or last <= after:
                return last, {}
            rows = c.execute(
                "SELECT session_id, max(seq) FROM events WHERE seq > ? "
                "AND session_id IS NOT NULL GROUP BY session_id",
                (after,),
            ).fetchall()
        return last, {r[0]: int(r[1]) for r in rows}

    # -- API extras: agents, environments, resources, client events (API.md §4) -------------

    def create_agent(
        self,
        *,
        name: Any,
        model: Any,
        description: Any = None,
        system: Any = None,
        tools: Any = None,
        skills: Any = None,
        mcp_servers: Any = None,
        metadata: Any = None,
        execution_identity: Any = None,
        multiagent: Any = None,
    ) -> dict[str, Any]:
        """Create an agent (version 1) and return its wire object (``BetaManagedAgentsAgent``).

        memfs runs no model: an agent is a named configuration that sessions snapshot.
        ``model`` is a model id or ``{"id", ...}``; ``tools`` entries are dicts with a ``type``
        (the agent toolset gets its default config filled in).

        :raises InvalidRequest: a missing or ill-typed field.
        """
        lim = self.limits
        name = _validate_name(name, lim)
        if isinstance(model, str) and model:
            model_cfg: dict[str, Any] = {"id": model, "speed": "standard"}
        elif isinstance(model, dict) and isinstance(model.get("id"), str) and model["id"]:
            model_cfg = {"speed": "standard", **model}
        else:
            raise InvalidRequest("model must be a model id or an object with an 'id'")
        for what, value in (("description", description), ("system", system)):
            if value is not None and not isinstance(value, str):
                raise InvalidRequest(f"{what} must be a string")
        resolved_tools = []
        for tool in _dict_list(tools, "tools"):
            if not isinstance(tool.get("type"), str):
                raise InvalidRequest("every tool needs a string 'type'")
            if tool["type"] == "agent_toolset_20260401":
                tool = {
                    "configs": [],
                    "default_config": {
                        "enabled": True,
                        "permission_policy": {"type": "always_allow"},
                    },
                    **tool,
                }
            resolved_tools.append(tool)
        if execution_identity is None:
            execution_identity = {"type": "service_account"}
        elif not isinstance(execution_identity, dict) or not isinstance(
            execution_identity.get("type"), str
        ):
            raise InvalidRequest("execution_identity must be an object with a 'type'")
        if multiagent is not None and not isinstance(multiagent, dict):
            raise InvalidRequest("multiagent must be an object")
        now = _now()
        body = {
            "type": "agent",
            "id": new_id("agent"),
            "version": 1,
            "name": name,
            "description": description,
            "model": model_cfg,
            "system": system,
            "tools": resolved_tools,
            "skills": _dict_list(skills, "skills"),
            "mcp_servers": _dict_list(mcp_servers, "mcp_servers"),
            "metadata": _validate_metadata({} if metadata is None else metadata, lim),
            "execution_identity": execution_identity,
            "multiagent": multiagent,
            "created_at": now,
            "updated_at": now,
            "archived_at": None,
        }
        _validate_text(body, "agent")
        with self._write() as c:
            c.execute(
                "INSERT INTO agents VALUES (?, ?, ?)", (body["id"], json.dumps(body), now)
            )
        return body

    def get_agent(self, agent_id: str, *, version: int | None = None) -> dict[str, Any]:
        """The agent's wire object. :raises NotFound: unknown id, or a version it lacks."""
        row = self._one("SELECT body FROM agents WHERE id = ?", (agent_id,))
        if row is None:
            raise NotFound(f"agent {agent_id!r} not found")
        body: dict[str, Any] = json.loads(row["body"])
        if version is not None and version != body["version"]:
            raise NotFound(f"agent {agent_id} has no version {version}")
        return body

    def agent_snapshot(self, agent: Any) -> dict[str, Any]:
        """The session's copy of an agent (``BetaManagedAgentsSessionAgent``) from what
        ``sessions.create`` received: an id, or ``{"type": "agent", "id", "version"?}``.

        An id this database does not know is kept as an opaque reference ``{type, id,
        version}``: API.md accepts agent ids as opaque strings (agents may live elsewhere).

        :raises InvalidRequest: any other shape. :raises NotFound: a known agent's missing
            version.
        """
        version = None
        if isinstance(agent, dict):
            if agent.get("type") != "agent":
                raise InvalidRequest("agent must be an id or {'type': 'agent', 'id': ...}")
            version = agent.get("version")
            if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
                raise InvalidRequest("agent version must be an integer")
            agent = agent.get("id")
        if not isinstance(agent, str) or not agent:
            raise InvalidRequest("agent must be an agent id")
        _validate_text(agent, "agent")
        try:
            body = self.get_agent(agent, version=version)
        except NotFound:
            if self._one("SELECT 1 FROM agents WHERE id = ?", (agent,)) is not None:
                raise
            return {"type": "agent", "id": agent, "version": version}
        keys = ("type", "id", "version", "name", "description", "model", "system", "tools",
                "skills", "mcp_servers", "execution_identity", "multiagent")
        return {k: body[k] for k in keys}

    def create_environment(
        self,
        *,
        name: Any,
        config: Any = None,
        description: Any = None,
        metadata: Any = None,
        scope: Any = None,
    ) -> dict[str, Any]:
        """Create an environment and return its wire object (``BetaEnvironment``). ``config``
        defaults to ``{"type": "self_hosted"}``: memfs runs the agent's tools itself.

        :raises InvalidRequest:
        """
        lim = self.limits
        name = _validate_name(name, lim)
        if config is None:
            config = {"type": "self_hosted"}
        if not isinstance(config, dict) or config.get("type") not in ("cloud", "self_hosted"):
            raise InvalidRequest("config must be {'type': 'cloud' | 'self_hosted', ...}")
        if config["type"] == "cloud":
            packages = {k: [] for k in ("apt", "cargo", "gem", "go", "npm", "pip")}
            config = {"networking": {"type": "unrestricted"}, "packages": packages, **config}
        if description is not None and not isinstance(description, str):
            raise InvalidRequest("description must be a string")
        if scope not in (None, "organization", "account"):
            raise InvalidRequest("scope must be 'organization' or 'account'")
        now = _now()
        body = {
            "type": "environment",
            "id": new_id("env"),
            "name": name,
            "description": description,
            "config": config,
            "metadata": _validate_metadata({} if metadata is None else metadata, lim),
            "scope": scope or "organization",
            "created_at": now,
            "updated_at": now,
            "archived_at": None,
        }
        _validate_text(body, "environment")
        with self._write() as c:
            c.execute(
                "INSERT INTO environments VALUES (?, ?, ?)", (body["id"], json.dumps(body), now)
            )
        return body

    def get_environment(self, environment_id: str) -> dict[str, Any]:
        """:raises NotFound:"""
        row = self._one("SELECT body FROM environments WHERE id = ?", (environment_id,))
        if row is None:
            raise NotFound(f"environment {environment_id!r} not found")
        body: dict[str, Any] = json.loads(row["body"])
        return body

    def list_session_resources(
        self, session_id: str, *, limit: int | None = None, page: str | None = None
    ) -> Page[SessionResource]:
        """A session's resources in attach order; every one when ``limit`` is None
        (API.md §4.1: resources.list returns all when no limit is given), else 1-1,000.

        :raises NotFound, InvalidRequest, InvalidCursor:
        """
        items = list(self.get_session(session_id).resources)
        start = 0
        if page:
            key = _decode_cursor(page, "resources", [session_id])
            if isinstance(key, bool) or not isinstance(key, int) or key < 0:
                raise InvalidCursor("invalid page cursor")
            start = key
        if limit is None:
            return Page(items[start:], None)
        limit = _check_limit(limit, self.limits, maximum=1000)
        end = start + limit
        next_page = _encode_cursor("resources", [session_id], end) if end < len(items) else None
        return Page(items[start:end], next_page)

    def delete_session_resource(self, session_id: str, resource_id: str) -> None:
        """Always refused for memory stores: attachments are fixed at session creation
        (API.md §8.8).

        :raises NotFound: unknown session or resource. :raises InvalidRequest: otherwise.
        """
        res = self.get_session_resource(session_id, resource_id)
        raise InvalidRequest(
            f"memory store {res.memory_store_id} is attached for the life of session "
            f"{session_id}; memory store resources cannot be removed"
        )

    def send_events(self, session_id: str, events: Any) -> list[Event]:
        """Record events a client sends (API.md §4.1 ``events.send``): a non-empty list of
        objects whose ``type`` is one of :data:`CLIENT_EVENT_TYPES`. The store assigns ``id``
        and ``processed_at`` (any the client sent are ignored).

        :raises InvalidRequest: a bad list or event. :raises NotFound: unknown session.
        """
        if not isinstance(events, list) or not events:
            raise InvalidRequest("events must be a non-empty list")
        clean = []
        for e in events:
            if not isinstance(e, dict) or e.get("type") not in CLIENT_EVENT_TYPES:
                kind = e.get("type") if isinstance(e, dict) else e
                raise InvalidRequest(
                    f"cannot send an event of type {kind!r}; allowed: "
                    + ", ".join(CLIENT_EVENT_TYPES)
                )
            if e["type"] == "user.message" and not isinstance(e.get("content"), list):
                raise InvalidRequest("a user.message needs a 'content' list of blocks")
            clean.append({k: v for k, v in e.items() if k not in ("id", "processed_at")})
        return self.add_events(session_id, clean)

    # -- acting as a session: remote mounts (the memfs extension, README "Remote mounts") -------

    def session_writer(self, session_id: str, store_id: str) -> Actor:
        """The actor of a write to ``store_id`` made on behalf of ``session_id`` (a mount
        acting as its session through the API): ``session_actor``, once the session exists,
        is not terminated and has the store attached ``read_write``.

        :raises NotFound: unknown session.
        :raises ReadOnly: the session is terminated, or the store is not attached to it, or is
            attached ``read_only``.
        """
        session = self.get_session(session_id)
        if session.status == "terminated":
            raise ReadOnly(f"session {session_id} is terminated; it cannot write any more")
        res = next((r for r in session.resources if r.memory_store_id == store_id), None)
        if res is None:
            raise ReadOnly(f"memory store {store_id} is not attached to session {session_id}")
        if res.access != "read_write":
            raise ReadOnly(
                f"memory store {store_id} is attached read_only to session {session_id}"
            )
        return Actor.session(session_id)

    def add_tool_events(
        self, session_id: str | None, events: Any, *, store_id: str | None = None
    ) -> list[Event]:
        """Record a mount's tool events (SPEC §4): a non-empty list of
        :data:`TOOL_EVENT_TYPES` objects, each with the ``id`` (``sevt_…``) and
        ``processed_at`` the mount gave it (a result names its use by that id). Idempotent: an
        event whose id is already recorded is skipped, so a batch retried after a lost answer
        records nothing twice. ``session_id`` None records events of a mount without a session
        (under ``store_id``). Returns the events recorded now.

        :raises InvalidRequest: a bad list or event.
        :raises NotFound: unknown session or store.
        :raises ReadOnly: ``store_id`` is not attached to the session.
        """
        if not isinstance(events, list) or not events:
            raise InvalidRequest("events must be a non-empty list")
        _check_tool_events(events)
        if session_id is not None:
            session = self.get_session(session_id)
            if store_id is not None and store_id not in {
                r.memory_store_id for r in session.resources
            }:
                raise ReadOnly(f"memory store {store_id} is not attached to session {session_id}")
        elif store_id is None:
            raise InvalidRequest("tool events need a session or a memory store")
        with self._write() as c:
            if store_id is not None:
                self._store_in(c, store_id)
            ids = [e["id"] for e in events]
            known = {
                r[0] for r in c.execute(
                    f"SELECT id FROM events WHERE id IN ({','.join('?' * len(ids))})", ids
                )
            }
            fresh = []
            for e in events:
                if e["id"] not in known:
                    known.add(e["id"])
                    fresh.append(self._insert_event(c, session_id, store_id, e))
            return fresh

    # -- dreams (API.md §5) ------------------------------------------------------------------
    # The rows and their status changes; memfs.dreams runs them (the model, the memory tool).

    def create_dream(
        self,
        inputs: Any,
        model: Any,
        *,
        instructions: Any = None,
        output_behavior: Any = None,
        runner: dict[str, Any] | None = None,
    ) -> Dream:
        """A ``pending`` dream over one memory store and 1–100 sessions (API.md §5).

        :raises InvalidRequest: bad inputs, model, instructions or output_behavior.
        :raises NotFound: unknown store or session. :raises StoreArchived:
        :raises Conflict: an ``update_existing`` dream on the store has not ended.
        """
        lim = self.limits
        _validate_text([inputs, model, instructions, output_behavior, runner], "the dream")
        store_id, session_ids = _dream_inputs(inputs)
        model_obj = _dream_model(model)
        if instructions is not None and not (
                isinstance(instructions, str)
                and 1 <= len(instructions) <= lim.max_instructions_chars):
            raise InvalidRequest(
                f"instructions must be 1 to {lim.max_instructions_chars} characters, or null")
        behavior = _dream_output_behavior(output_behavior, store_id)
        did = new_id("drm")
        now = _now()
        with self._write() as c:
            store = self._store_in(c, store_id)
            if store.archived_at is not None:
                raise StoreArchived(f"memory store {store_id} is archived; a dream cannot read it")
            found = {r["id"] for r in c.execute(
                f"SELECT id FROM sessions WHERE id IN ({','.join('?' * len(session_ids))})",
                session_ids)}
            missing = [s for s in session_ids if s not in found]
            if missing:
                raise _no_session(missing[0])
            if behavior["type"] == "update_existing":
                busy = c.execute(
                    "SELECT id FROM dreams WHERE status IN ('pending', 'running') "
                    "AND memory_store_id = ? AND output_behavior LIKE ?",
                    (store_id, '%"update_existing"%')).fetchone()
                if busy is not None:
                    raise Conflict(f"dream {busy['id']} is still updating memory store "
                                   f"{store_id}; wait until it ends or cancel it")
            c.execute(
                "INSERT INTO dreams (id, status, memory_store_id, session_ids, model, "
                "instructions, output_behavior, created_at, runner, heartbeat_at) "
                "VALUES (?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?)",
                (did, store_id, json.dumps(session_ids), json.dumps(model_obj), instructions,
                 json.dumps(behavior), now, None if runner is None else json.dumps(runner),
                 now),
            )
        return self.get_dream(did)

    def get_dream(self, dream_id: str) -> Dream:
        """Archived dreams too. :raises NotFound:"""
        row = self._one("SELECT * FROM dreams WHERE id = ?", (dream_id,))
        if row is None:
            raise NotFound(f"no dream {dream_id!r}")
        return _dream(row)

    def list_dreams(
        self,
        *,
        statuses: Sequence[str] | None = None,
        include_archived: bool = False,
        created_at_gt: str | datetime | None = None,
        created_at_lt: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Page[Dream]:
        """Dreams, newest first (``created_at`` desc, then ``id`` desc)."""
        limit = _check_limit(limit, self.limits)
        where: list[str] = []
        params: list[Any] = []
        if statuses:
            for s in statuses:
                if s not in DREAM_STATUSES:
                    raise InvalidRequest(f"invalid dream status {s!r}")
            where.append(f"status IN ({','.join('?' * len(statuses))})")
            params += list(statuses)
        if not include_archived:
            where.append("archived_at IS NULL")
        for op, value in ((">", created_at_gt), ("<", created_at_lt)):
            if value is not None:
                where.append(f"created_at {op} ?")
                params.append(format_time(parse_time(value)))
        filters = ["dreams", include_archived, list(params)]  # a copy: see list_stores
        return self._newest_first("dreams", filters, where, params, limit, page, _dream)

    def _dream_row_in(self, c: sqlite3.Connection, dream_id: str) -> sqlite3.Row:
        row = c.execute("SELECT * FROM dreams WHERE id = ?", (dream_id,)).fetchone()
        if row is None:
            raise NotFound(f"no dream {dream_id!r}")
        return row

    def archive_dream(self, dream_id: str) -> Dream:
        """Archive an ended dream (idempotent, irreversible).

        :raises InvalidRequest: the dream is pending or running. :raises NotFound:
        """
        with self._write() as c:
            row = self._dream_row_in(c, dream_id)
            if row["status"] not in DREAM_FINAL:
                raise InvalidRequest(
                    f"dream {dream_id} is {row['status']}: only a completed, failed or "
                    "canceled dream can be archived (cancel it first)")
            if row["archived_at"] is None:
                c.execute("UPDATE dreams SET archived_at = ? WHERE id = ?", (_now(), dream_id))
        return self.get_dream(dream_id)

    def cancel_dream(self, dream_id: str) -> Dream:
        """Cancel a pending or running dream (a canceled one is returned unchanged); its
        runner stops at its next check (memfs.dreams).

        :raises InvalidRequest: the dream already completed or failed. :raises NotFound:
        """
        with self._write() as c:
            row = self._dream_row_in(c, dream_id)
            if row["status"] in ("completed", "failed"):
                raise InvalidRequest(
                    f"dream {dream_id} is {row['status']}: only a pending or running dream "
                    "can be canceled")
            if row["status"] != "canceled":
                c.execute("UPDATE dreams SET status = 'canceled', ended_at = ? WHERE id = ?",
                          (_now(), dream_id))
        dream = self.get_dream(dream_id)
        self._dream_ended(dream)
        return dream

    def start_dream(self, dream_id: str, *, runner: dict[str, Any] | None = None,
                    session: dict[str, Any] | None = None) -> Dream | None:
        """Move a pending dream to ``running``: its output store (``create_new``: a new store,
        a copy of the input whose versions are the dream session's) and its session (the
        output attached read_write, the input read_only; ``session``: more arguments of
        :meth:`create_session`, e.g. the ``root`` and ``launcher`` of ``memfs dream -- CMD``).
        None: the dream is not pending (canceled meanwhile, or another runner took it).
        """
        with self._write() as c:
            row = self._dream_row_in(c, dream_id)
            if row["status"] != "pending":
                return None
            # Taken: no other runner starts it too.
            c.execute("UPDATE dreams SET runner = ?, heartbeat_at = ? WHERE id = ?",
                      (json.dumps(runner) if runner is not None else row["runner"], _now(),
                       dream_id))
            behavior = json.loads(row["output_behavior"])
            source = self._store_in(c, row["memory_store_id"])
            if behavior["type"] == "create_new":
                suffix = f" (dream {dream_id})"
                name = source.name[: self.limits.max_name_chars - len(suffix)] + suffix
                now = _now()
                out_id = new_id("memstore")
                c.execute(
                    "INSERT INTO stores (id, name, description, metadata, created_at, "
                    "updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (out_id, name, f"The output of dream {dream_id} over {source.id}",
                     json.dumps({"memfs_dream_id": dream_id, "memfs_dream_status": "running"}),
                     now, now),
                )
            else:
                out_id = source.id
        guide = "The dream's output: consolidate the memories here."
        if row["instructions"]:
            guide = (guide + " " + row["instructions"])[: self.limits.max_instructions_chars]
        resources = [{"type": "memory_store", "memory_store_id": out_id, "access": "read_write",
                      "instructions": guide}]
        if out_id != source.id:
            resources.append({"type": "memory_store", "memory_store_id": source.id,
                              "access": "read_only",
                              "instructions": "The dream's input: never changed."})
        session_ = self.create_session(
            resources, **{"status": "running", "title": f"dream {dream_id}",
                          "metadata": {"memfs_dream_id": dream_id}, **(session or {})})
        actor = Actor.session(session_.id)
        with self._write() as c:
            if out_id != source.id:
                for m in c.execute(
                        "SELECT path, content, content_sha256, content_size_bytes FROM memories "
                        "WHERE store_id = ? ORDER BY path", (source.id,)).fetchall():
                    now = _now()
                    mid = new_id("mem")
                    vid = self._insert_version(c, out_id, mid, "created", m["path"],
                                               m["content"], m["content_sha256"],
                                               m["content_size_bytes"], actor, now)
                    c.execute("INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                              (mid, out_id, m["path"], m["content"], m["content_sha256"],
                               m["content_size_bytes"], vid, now, now))
                    self._change(c, out_id, "put", mid, m["path"])
            c.execute(
                "UPDATE dreams SET output_store_id = ?, session_id = ?, heartbeat_at = ? "
                "WHERE id = ?", (out_id, session_.id, _now(), dream_id))
            started = c.execute(
                "UPDATE dreams SET status = 'running' WHERE id = ? AND status = 'pending' "
                "RETURNING id", (dream_id,)).fetchone()
        dream = self.get_dream(dream_id)
        if started is None:  # canceled while its store was made
            self._dream_ended(dream)
            return None
        return dream

    def add_dream_usage(self, dream_id: str, usage: dict[str, int]) -> None:
        """Add a model call's token counts (after a cancel too; frozen once completed or
        failed) and mark the dream's runner alive."""
        counts = [int(usage.get(k) or 0) for k in DREAM_USAGE]
        with self._write() as c:
            c.execute(
                "UPDATE dreams SET " + ", ".join(f"{k} = {k} + ?" for k in DREAM_USAGE)
                + ", heartbeat_at = ? WHERE id = ? AND status IN ('pending', 'running', "
                "'canceled')", (*counts, _now(), dream_id))

    def dream_heartbeat(self, dream_id: str) -> str:
        """Mark the dream's runner alive; returns the dream's status."""
        with self._write() as c:
            c.execute("UPDATE dreams SET heartbeat_at = ? WHERE id = ? AND status IN "
                      "('pending', 'running')", (_now(), dream_id))
            return str(self._dream_row_in(c, dream_id)["status"])

    def finish_dream(self, dream_id: str, status: str, error: dict[str, str] | None = None,
                     *, discard_output: bool = False) -> Dream:
        """End a pending or running dream: ``completed``, or ``failed`` with ``error``
        ({type, message}); a dream that already ended keeps its status. Ends its session and
        marks its new output store with the status (metadata ``memfs_dream_status``).

        :param discard_output: the dream failed before its model ran: its new output store,
            a copy of the input nothing else wrote, is deleted in the same transaction (its
            ``outputs`` empty again), so that failed tries leave no copies behind. The input
            (``update_existing``) is never deleted.
        """
        if status not in ("completed", "failed"):
            raise InvalidRequest(f"a dream cannot end as {status!r}")
        with self._write() as c:
            ended = c.execute(
                "UPDATE dreams SET status = ?, error = ?, ended_at = ? WHERE id = ? "
                "AND status IN ('pending', 'running') RETURNING output_store_id, "
                "memory_store_id",
                (status, None if error is None else json.dumps(error), _now(), dream_id),
            ).fetchone()
            out = None if ended is None else ended["output_store_id"]
            if (discard_output and status == "failed" and out is not None
                    and out != ended["memory_store_id"]):
                with contextlib.suppress(NotFound):  # deleted meanwhile
                    self._delete_store_in(c, out)
                c.execute("UPDATE dreams SET output_store_id = NULL WHERE id = ?", (dream_id,))
        dream = self.get_dream(dream_id)
        self._dream_ended(dream)
        return dream

    def _dream_ended(self, dream: Dream) -> None:
        """An ended dream's session is terminated, its new output store marked."""
        if dream.status not in DREAM_FINAL:
            return
        if dream.session_id is not None:
            with contextlib.suppress(NotFound):  # deleted meanwhile
                self.set_session_status(dream.session_id, "terminated")
        out = dream.output_store_id
        if out is not None and out != dream.memory_store_id:
            mark = {"memfs_dream_status": dream.status}
            if dream.error is not None:
                mark["memfs_dream_error"] = (dream.error["type"] + ": "
                                             + dream.error["message"])[:512]
            with contextlib.suppress(NotFound, StoreArchived, LimitExceeded):  # gone meanwhile
                self.update_store(out, metadata=mark)

    def stale_dreams(self, *, older_than: float) -> list[tuple[str, dict[str, Any] | None]]:
        """``(dream_id, runner)`` of the dreams not ended whose runner has said nothing for
        ``older_than`` seconds."""
        cutoff = format_time(datetime.now(UTC) - timedelta(seconds=older_than))
        return [(r["id"], None if r["runner"] is None else json.loads(r["runner"]))
                for r in self._all(
                    "SELECT id, runner, heartbeat_at FROM dreams "
                    "WHERE status IN ('pending', 'running') ORDER BY id")
                if r["heartbeat_at"] < cutoff]

    def live_dreams(self) -> list[tuple[str, dict[str, Any] | None]]:
        """``(dream_id, runner)`` of every dream not ended."""
        return [(r["id"], None if r["runner"] is None else json.loads(r["runner"]))
                for r in self._all("SELECT id, runner FROM dreams "
                                   "WHERE status IN ('pending', 'running') ORDER BY id")]

    # -- import and export -------------------------------------------------------------------
    # The store's side of memfs/transfer.py (the archive format and the file walks live
    # there): an export reads a store one page at a time, so it never holds the whole store,
    # all pages through ONE snapshot (export_snapshot), so the archive is the store at one
    # moment however long it takes and whatever is written meanwhile; an import is ONE write
    # transaction that consumes a stream of records, checking every rule as it goes, so it is
    # all or nothing (a damaged archive found at its last line still leaves the database
    # untouched).

    @contextmanager
    def export_snapshot(self, store_id: str) -> Iterator[ExportSnapshot]:
        """The store as it is now, for an export read page by page (pass it as ``snapshot``
        to :meth:`export_memory_ids` and :meth:`export_memory`): every page then shows this
        moment, while writers go on. Held by a connection of its own, usable from any thread
        by one reader at a time, closed when the block ends (see :meth:`Database.snapshot`).

        :raises NotFound: unknown store.
        """
        with self.database.snapshot() as c:
            yield ExportSnapshot(self._store_in(c, store_id), c)

    def _export_read(
        self, snapshot: ExportSnapshot | None
    ) -> AbstractContextManager[sqlite3.Connection]:
        return nullcontext(snapshot.conn) if snapshot is not None else self._read()

    def export_memory_ids(
        self, store_id: str, *, history: bool, after: str = "", limit: int = 100,
        snapshot: ExportSnapshot | None = None,
    ) -> list[str]:
        """Ids of the store's memories after ``after``, in id order: the live ones, or with
        ``history`` every memory that has a version (deleted ones too). Read in ``snapshot``
        if given, else in a snapshot of this call alone.

        :raises NotFound: unknown store.
        """
        with self._export_read(snapshot) as c:
            self._store_in(c, store_id)
            if history:
                sql = ("SELECT DISTINCT memory_id FROM versions WHERE store_id = ? "
                       "AND memory_id > ? ORDER BY memory_id LIMIT ?")
            else:
                sql = ("SELECT id FROM memories WHERE store_id = ? AND id > ? "
                       "ORDER BY id LIMIT ?")
            return [r[0] for r in c.execute(sql, (store_id, after, limit))]

    def count_export(self, store_id: str, *, history: bool) -> int:
        """How many memories :meth:`export_memory_ids` lists (for a progress bar)."""
        if not history:
            return self.count_memories(store_id)
        row = self._one(
            "SELECT count(DISTINCT memory_id) FROM versions WHERE store_id = ?", (store_id,)
        )
        return int(row[0]) if row else 0

    def export_memory(
        self,
        store_id: str,
        memory_id: str,
        *,
        history: bool,
        after: tuple[str, str] | None = None,
        limit: int = 20,
        snapshot: ExportSnapshot | None = None,
    ) -> tuple[list[MemoryVersion], bool, Memory | None]:
        """One page of a memory for an export: ``(versions, done, memory)``.

        With ``history``: up to ``limit`` versions (full, redacted ones as they are) after
        ``after`` (a ``(created_at, id)``), oldest first. Without: only the version that holds
        the live memory's content. ``done`` says this was the last page; ``memory`` is then
        the live memory (full; None if deleted), read in the same snapshot as that page, so
        its head version is always in the pages returned. Read in ``snapshot`` if given (every
        page then agrees with every other), else in a snapshot of this call alone.
        """
        with self._export_read(snapshot) as c:
            if not history:
                rows = c.execute(
                    "SELECT v.* FROM memories m JOIN versions v ON v.id = m.version_id "
                    "WHERE m.id = ? AND m.store_id = ?", (memory_id, store_id)
                ).fetchall()
                page, done = rows, True
            else:
                ca, vid = after or ("", "")
                rows = c.execute(
                    "SELECT * FROM versions WHERE memory_id = ? AND store_id = ? "
                    "AND (created_at > ? OR (created_at = ? AND id > ?)) "
                    "ORDER BY created_at, id LIMIT ?",
                    (memory_id, store_id, ca, ca, vid, limit + 1),
                ).fetchall()
                page, done = rows[:limit], len(rows) <= limit
            memory = None
            if done:
                row = c.execute(
                    "SELECT * FROM memories WHERE id = ? AND store_id = ?", (memory_id, store_id)
                ).fetchone()
                memory = _memory(row, True) if row is not None else None
        return [_version(r, True) for r in page], done, memory

    def import_archive(
        self,
        store: dict[str, Any],
        records: Callable[[], Iterable[dict[str, Any]]],
        *,
        name: str | None = None,
        into: str | None = None,
        partial: bool = False,
    ) -> dict[str, Any]:
        """Restore an exported store (``store``: the archive's store object) from its
        records (``{"type": "version", ...}`` and ``{"type": "memory", ...}`` as the archive
        holds them, grouped by memory in ascending memory id, each group's versions oldest
        first, then the memory if it is live). ``records()`` reads them from the start, each
        time it is called; any error it raises (a truncated archive, a trailer that does not
        match) refuses the import.

        - Neither ``name`` nor ``into``: an exact restore, every id kept. An id this database
          already holds (the store's, a memory's or a version's) refuses the import
          (:class:`Conflict`), never overwriting anything.
        - ``name``: a copy, as a new store with that name; store, memory and version ids are
          new, timestamps, actors, history and redactions are kept.
        - ``into``: the memories (with their history) join that existing store, with new ids.

        A memory whose path is taken or overlaps one, or that finds the store full, is listed
        in ``skipped`` (with ``partial``), or refuses the whole import (:class:`ImportRejected`
        listing every such memory). Versions are not pruned here: retention applies at the
        next write or ``versions prune``.

        Never one long transaction (issue 19): the records are read and checked whole first
        (:mod:`memfs.restore`), with no lock and no write, then what the database holds (ids,
        paths, room) is checked against them, so that an import that is refused writes
        nothing; then the rows are written in short transactions of at most
        :data:`memfs.restore.BATCH_ROWS` rows. The memories show as they are written; an
        import that fails after its first write (a path taken meanwhile, the database gone)
        removes what it wrote before it raises.

        :returns: the summary (see :func:`memfs.transfer.import_archive`).
        :raises InvalidArchive, InvalidRequest, Conflict, ImportRejected, NotFound,
            StoreArchived:
        """
        from . import restore

        if name is not None and into is not None:
            raise InvalidRequest("give a new store name or a store to import into, not both")
        lim = self.limits
        src = restore.store_fields(store, lim)
        copy = name is not None or into is not None
        if name is not None:
            name = _validate_name(name, lim)
        # 1. The whole archive, checked (its trailer by the reader, at the end of the pass).
        checker = restore.Checker(lim, copy)
        groups: list[str] = []
        live: list[tuple[str, str]] = []
        for n, rec in enumerate(records(), 1):
            row = checker.check(n, rec)
            if isinstance(row, restore.MemoryRow):
                live.append((row.group.old_id, row.path))
            elif row.first:
                groups.append(row.group.old_id)
        # 2. Against the database as it is now (read, no lock): what the writes would refuse.
        sid = new_id("memstore") if name is not None else into or src["id"]
        skipped = self._import_plan(src["id"], into, copy, groups, live)
        if skipped and not partial:
            raise _rejected(skipped)
        # 3. The rows, in short transactions; undone if anything fails now.
        refused = {s["memory_id"]: s["reason"] for s in skipped}
        skipped = []
        counts = {"memories": 0, "versions": 0, "redacted": 0}
        written: list[str] = []  # the memories written to so far (ids here)
        created = False
        checker = restore.Checker(lim, copy)
        rows = (checker.check(n, rec) for n, rec in enumerate(records(), 1))
        try:
            for batch in restore.batches(rows):
                with self._write() as c:
                    if not created and into is None:
                        self._import_store(c, src, sid, name)
                        created = True
                    else:
                        self._imported_store_in(
                            c, sid, made_archived=not copy and src["archived_at"] is not None)
                    for row in batch:
                        self._import_row(c, sid, row, copy, refused, counts, skipped, written)
            if skipped and not partial:
                raise _rejected(skipped)
        except BaseException:
            if created or written:
                self._import_undo(sid, created, written)
            raise
        return {"store": self.get_store(sid).to_dict(), "ids": "new" if copy else "kept",
                "created_store": into is None, **counts, "skipped": skipped}

    def _import_plan(self, archive_store: str, into: str | None, copy: bool,
                     groups: list[str], live: list[tuple[str, str]]) -> list[dict[str, Any]]:
        """The memories an import would skip (their paths taken or overlapping, no room left)
        as the database is now, read without the write lock.

        :raises Conflict: an exact restore's store or memory id is taken.
        :raises NotFound, StoreArchived: ``into``.
        """
        skipped: list[dict[str, Any]] = []
        with self._read() as c:
            if into is None and not copy:
                taken = c.execute("SELECT name FROM stores WHERE id = ?",
                                  (archive_store,)).fetchone()
                if taken is not None:
                    raise Conflict(
                        f"memory store {archive_store} ({taken['name']!r}) already exists in "
                        "this database: nothing was imported; import a copy with new ids "
                        "(--name NEW), or add its memories to a store (--into STORE)")
                for i in range(0, len(groups), 400):
                    chunk = groups[i:i + 400]
                    marks = ",".join("?" * len(chunk))
                    row = c.execute(
                        f"SELECT id FROM memories WHERE id IN ({marks}) UNION ALL SELECT "
                        f"memory_id FROM versions WHERE memory_id IN ({marks}) LIMIT 1",
                        (*chunk, *chunk)).fetchone()
                    if row is not None:
                        raise _ids_taken("memory", row[0])
            count = 0  # a new store holds nothing yet
            if into is not None:
                target = self._store_in(c, into)
                if target.archived_at is not None:
                    raise _archived(into)
                count = c.execute("SELECT memory_count FROM stores WHERE id = ?",
                                  (into,)).fetchone()[0]
            placed: list[str] = []  # the archive's own, sorted: they may overlap too
            for memory_id, path in live:
                try:
                    if into is not None:
                        self._check_path_free(c, into, path)
                    other = _overlapping(path, placed)
                    if other is not None:
                        raise PathConflict(_overlap(path, other), conflicting_memory_id="",
                                           conflicting_path=other)
                    self._check_room(into or archive_store, count)
                    count += 1
                    bisect.insort(placed, path)
                except (PathConflict, LimitExceeded) as e:
                    skipped.append({"path": path, "memory_id": memory_id, "reason": e.message})
        return skipped

    def _imported_store_in(self, c: sqlite3.Connection, sid: str,
                           made_archived: bool = False) -> None:
        """Before each batch of an import after its first: the store it writes into is still
        there, and not archived (unless the import made it so: the exact restore of an
        archived store). Checked only once, an import went on writing into a store archived
        meanwhile, or rows for a store deleted meanwhile.

        :raises NotFound, StoreArchived:
        """
        row = c.execute("SELECT archived_at FROM stores WHERE id = ?", (sid,)).fetchone()
        if row is None:
            raise _no_store(sid)
        if row[0] is not None and not made_archived:
            raise _archived(sid)

    def _import_store(self, c: sqlite3.Connection, src: dict[str, Any], sid: str,
                      name: str | None) -> None:
        """The store of an import that makes one (in its first transaction): a copy named
        ``name``, else the archive's own (its id checked again)."""
        if name is not None:
            now = _now()
            row = (sid, name, src["description"], src["metadata"], now, now, None)
        else:
            if c.execute("SELECT 1 FROM stores WHERE id = ?", (sid,)).fetchone():
                raise _ids_taken("memory store", sid)
            row = (sid, src["name"], src["description"], src["metadata"], src["created_at"],
                   src["updated_at"], src["archived_at"])
        c.execute(
            "INSERT INTO stores (id, name, description, metadata, created_at, updated_at, "
            "archived_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (*row[:3], json.dumps(row[3]), *row[4:]),
        )

    def _import_row(
        self, c: sqlite3.Connection, sid: str, row: Any, copy: bool, refused: dict[str, str],
        counts: dict[str, int], skipped: list[dict[str, Any]], written: list[str],
    ) -> None:
        """Write one row of an import (:mod:`memfs.restore`). A live memory that cannot be
        placed (``refused`` by the plan, or its path taken since) goes with its history,
        listed in ``skipped``."""
        from .restore import VersionRow

        group = row.group
        if isinstance(row, VersionRow):
            if row.first:
                written.append(group.new_id)
                if not copy and c.execute(
                        "SELECT 1 FROM memories WHERE id = ? UNION ALL SELECT 1 FROM versions "
                        "WHERE memory_id = ? LIMIT 1", (group.old_id, group.old_id)).fetchone():
                    raise _ids_taken("memory", group.old_id)
            if not copy and c.execute("SELECT 1 FROM versions WHERE id = ?",
                                      (row.id,)).fetchone():
                raise _ids_taken("version", row.id)
            by, rby = row.created_by, row.redacted_by
            c.execute(
                "INSERT INTO versions (id, store_id, memory_id, operation, created_at, path, "
                "content, content_sha256, content_size_bytes, created_by_type, created_by_id, "
                "redacted_at, redacted_by_type, redacted_by_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (row.id, sid, group.new_id, row.operation, row.created_at, row.path,
                 row.content, row.sha256, row.size, by.type if by else None,
                 by.id if by else None, row.redacted_at, rby.type if rby else None,
                 rby.id if rby else None),
            )
            counts["versions"] += 1
            counts["redacted"] += row.redacted_at is not None
            return
        reason = refused.get(group.old_id)
        if reason is None:
            try:
                self._check_path_free(c, sid, row.path)
                count = c.execute("SELECT memory_count FROM stores WHERE id = ?",
                                  (sid,)).fetchone()
                self._check_room(sid, count[0])
            except (PathConflict, LimitExceeded) as e:
                reason = e.message
        if reason is not None:
            # This memory and its history go; the rest is still written and checked, so
            # that every problem is reported at once.
            gone = c.execute("DELETE FROM versions WHERE memory_id = ?",
                             (group.new_id,)).rowcount
            counts["versions"] -= gone
            counts["redacted"] -= group.redacted
            skipped.append({"path": row.path, "memory_id": group.old_id, "reason": reason})
            return
        text = c.execute("SELECT content FROM versions WHERE id = ?",
                         (row.head_id,)).fetchone()[0]
        c.execute(
            "INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (group.new_id, sid, row.path, text, row.sha256, row.size, row.head_id,
             row.created_at, row.updated_at),
        )
        self._change(c, sid, "put", group.new_id, row.path)
        counts["memories"] += 1

    def _import_undo(self, sid: str, created: bool, written: list[str]) -> None:
        """Remove what a failed import wrote, in short transactions: the store it created
        (as :meth:`delete_store` would), or the memories it added to ``into`` (each live one
        with a ``delete`` change, so that followers drop it). A failure here is logged: the
        import's own error is the one raised."""
        try:
            if created:
                for table, key in (("versions", "id"), ("memories", "id"), ("changes", "seq")):
                    gone = 1
                    while gone:
                        with self._write() as c:
                            gone = c.execute(
                                f"DELETE FROM {table} WHERE {key} IN (SELECT {key} FROM "
                                f"{table} WHERE store_id = ? LIMIT 5000)", (sid,)).rowcount
                with self._write() as c:
                    c.execute("DELETE FROM stores WHERE id = ?", (sid,))
                    self._change(c, sid, "store")
                return
            for i in range(0, len(written), 200):
                chunk = written[i:i + 200]
                marks = ",".join("?" * len(chunk))
                with self._write() as c:
                    for mid, path in c.execute(
                            f"SELECT id, path FROM memories WHERE id IN ({marks})",
                            chunk).fetchall():
                        c.execute("DELETE FROM memories WHERE id = ?", (mid,))
                        self._change(c, sid, "delete", mid, path)
                    c.execute(f"DELETE FROM versions WHERE memory_id IN ({marks})", chunk)
        except Exception:
            log.exception("a failed import of store %s could not remove what it wrote", sid)

    def import_files(
        self,
        files: Callable[[], Iterable[tuple[str, bytes | str | None, str | None]]],
        *,
        name: str | None = None,
        into: str | None = None,
        partial: bool = False,
        actor: Actor | None,
    ) -> dict[str, Any]:
        """Create a memory for each ``(path, content, reason)`` of ``files()`` (a directory or
        a zip, walked by :mod:`memfs.transfer`; each call walks it again from the start)
        into a new store named ``name`` or the existing store ``into``. Every rule applies
        (path, UTF-8, size, the memory limit, overlaps). An entry that breaks one, or that
        comes with a ``reason`` already (it could not be read), is listed in ``skipped``;
        without ``partial`` any such entry refuses the whole import (:class:`ImportRejected`,
        listing every one).

        As for :meth:`import_archive`, never one long transaction: the files are walked and
        checked first (against the store as it is, read without the lock), so that a refused
        import writes nothing, then walked again and written in short transactions; an
        import that fails after its first write removes what it wrote.

        :raises ImportRejected, InvalidRequest, NotFound, StoreArchived:
        """
        from .restore import BATCH_BYTES, BATCH_ROWS

        if (name is None) == (into is None):
            raise InvalidRequest("give a new store name or a store to import into")
        if name is not None:
            name = _validate_name(name, self.limits)
        sid = into if into is not None else new_id("memstore")
        refused = self._import_files_plan(files, sid, into)
        skipped = [{"path": _printable(p), "reason": r} for p, r in refused.items()]
        if skipped and not partial:
            raise _rejected(skipped)
        skipped, written, created = [], [], False
        try:
            batch: list[tuple[str, bytes | str | None, str | None]] = []
            size = 0
            for entry in itertools.chain(files(), [None]):  # None: the last batch is due
                if entry is not None:
                    batch.append(entry)
                    size += len(entry[1] or "")
                    if len(batch) < BATCH_ROWS and size < BATCH_BYTES:
                        continue
                elif batch == [] and (created or into is not None):
                    break
                with self._write() as c:
                    if not created and into is None:
                        now = _now()
                        c.execute(
                            "INSERT INTO stores (id, name, description, metadata, created_at, "
                            "updated_at) VALUES (?, ?, '', '{}', ?, ?)", (sid, name, now, now))
                        created = True
                    else:
                        self._imported_store_in(c, sid)
                    for path, content, reason in batch:
                        reason = refused.get(path, reason)
                        if reason is None:
                            try:
                                p = validate_path(path, self.limits)
                                text, data = encode_content(content, self.limits)
                                written.append(self._create_in(c, sid, p, text, data, actor).id)
                                continue
                            except (InvalidRequest, PathConflict) as e:
                                reason = e.message
                        skipped.append({"path": _printable(path), "reason": reason})
                batch, size = [], 0
            if skipped and not partial:
                raise _rejected(skipped)
        except BaseException:
            if created or written:
                self._import_undo(sid, created, written)
            raise
        return {"store": self.get_store(sid).to_dict(), "ids": "new",
                "created_store": into is None, "memories": len(written),
                "versions": len(written), "redacted": 0, "skipped": skipped}

    def _import_files_plan(
        self, files: Callable[[], Iterable[tuple[str, bytes | str | None, str | None]]],
        sid: str, into: str | None,
    ) -> dict[str, str]:
        """The files an import would skip (path -> why), as the store is now, read without
        the write lock: a rule broken, a path taken or overlapping, no room left.

        :raises NotFound, StoreArchived: ``into``.
        """
        refused: dict[str, str] = {}
        placed: list[str] = []  # the import's own, sorted: they may overlap too
        with self._read() as c:
            count = 0 if into is None else self._writable_store_in(c, into)["memory_count"]
            for path, content, reason in files():
                if reason is None:
                    try:
                        p = validate_path(path, self.limits)
                        encode_content(content, self.limits)
                        if into is not None:
                            self._check_path_free(c, into, p)
                        other = _overlapping(p, placed)
                        if other is not None:
                            raise PathConflict(_overlap(p, other), conflicting_memory_id="",
                                               conflicting_path=other)
                        self._check_room(sid, count)
                        count += 1
                        bisect.insort(placed, p)
                        continue
                    except (InvalidRequest, PathConflict) as e:
                        reason = e.message
                refused[path] = reason
        return refused

    # -- search (the Console) ----------------------------------------------------------------

    #: Characters of content shown on each side of a search hit.
    search_context = 60

    def search_memories(self, store_id: str, query: str, *, limit: int = 100) -> list[SearchHit]:
        """The live memories whose path or content contains ``query``, path hits first, then
        in path order, at most ``limit``. The match is a substring match, case-insensitive
        for ASCII letters (SQLite's ``LIKE``; ``%``, ``_`` and ``\\`` in ``query`` are
        literal). A content hit carries a snippet around its first occurrence.

        :raises InvalidRequest: an empty or overlong query, a bad limit.
        :raises NotFound: unknown store.
        """
        if not isinstance(query, str) or not query:
            raise InvalidRequest("search for at least one character")
        if len(query) > self.limits.max_path_bytes:
            raise InvalidRequest(
                f"a search is at most {self.limits.max_path_bytes} characters long")
        _validate_text({"query": query}, "search")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidRequest("limit must be between 1 and 1000")
        # ASCII letters folded here and by lower() in SQL (ASCII-only on SQLite, and on
        # PostgreSQL's "C" collation of every column): the same match on both backends.
        folded = query.translate(_ASCII_LOWER)
        pattern = "%" + re.sub(r"([\\%_])", r"\\\1", folded) + "%"
        n = self.search_context
        with self._read() as c:
            self._store_in(c, store_id)
            rows = c.execute(
                f"SELECT {_BASIC_MEMORY_COLS}, in_path, at, "
                "CASE WHEN at > 0 THEN substr(body, CASE WHEN at - :n > 1 THEN at - :n ELSE 1 "
                "END, CASE WHEN at - 1 < :n THEN at - 1 ELSE :n END + :qlen + :n) END "
                "AS snippet "
                "FROM (SELECT *, content AS body, lower(path) LIKE :p ESCAPE '\\' AS in_path, "
                + self.database.position_sql.format("lower(content)", ":q") + " AS at "
                "FROM memories WHERE store_id = :s AND (lower(path) LIKE :p ESCAPE '\\' OR "
                "lower(content) LIKE :p ESCAPE '\\')) AS hit ORDER BY in_path DESC, path "
                "LIMIT :limit",
                {"s": store_id, "p": pattern, "q": folded, "qlen": len(query), "n": n,
                 "limit": limit},
            ).fetchall()
        hits = []
        for r in rows:
            snippet = None
            if r["snippet"] is not None:
                text = r["snippet"]
                # The hit's offset in the snippet: its first occurrence there, the snippet
                # starting at most n characters before the first one in the content.
                start = text.translate(_ASCII_LOWER).find(folded)
                if start < 0:
                    start = r["at"] - 1 - max(0, r["at"] - 1 - n)
                snippet = (text[:start], text[start:start + len(query)],
                           text[start + len(query):])
            hits.append(SearchHit(_memory(r, False), bool(r["in_path"]), snippet))
        return hits

    # -- recall (memfs.recall) ----------------------------------------------------------------

    #: The longest question (characters).
    max_query_chars = 1000
    #: Hits of a search: the default and the most.
    search_default_limit, search_max_limit = 10, 100
    _embeddings: Any = None
    _embeddings_set = False

    @property
    def embeddings(self) -> Provider | None:
        """The provider of embeddings of this process's searches and indexers: the one
        :meth:`use_embeddings` chose, else ``$MEMFS_EMBEDDINGS``, else the local model."""
        if not self._embeddings_set:
            self.use_embeddings(None)
        provider: Provider | None = self._embeddings
        return provider

    def use_embeddings(self, setting: str | Provider | None) -> None:
        """Choose the provider (a setting as :func:`memfs.recall.embeddings.from_setting`
        reads it, or a provider). :raises InvalidRequest: a setting naming none."""
        from .recall import embeddings

        self._embeddings = (embeddings.from_setting(setting)
                            if setting is None or isinstance(setting, str) else setting)
        self._embeddings_set = True

    def search(self, store_id: str, query: str, *, limit: int | None = None,
               path_prefix: str | None = None, min_score: float = 0.0,
               fusion: str = "rrf", channels: tuple[str, ...] = ("words", "meaning"),
               ) -> SearchResult:
        """The store's memories that answer ``query`` best, by their words and their meaning
        (memfs.recall.search says how they are ranked), best first: at most ``limit``
        (default 10, at most 100), only under ``path_prefix`` if given, none scoring below
        ``min_score`` (0 to 1). A memory is found by its words as soon as its write has
        returned; by its meaning once an indexer has embedded it (:meth:`index_store`).

        :raises InvalidRequest: an empty or overlong query, a bad limit, prefix or score.
        :raises NotFound: unknown store.
        """
        from .recall import search

        if not isinstance(query, str) or not query.strip():
            raise InvalidRequest("search for at least one word")
        if len(query) > self.max_query_chars:
            raise InvalidRequest(f"a search is at most {self.max_query_chars} characters long")
        _validate_text({"query": query}, "search")
        if "\x00" in query:
            raise InvalidRequest("a search cannot hold a NUL character")
        if limit is None:
            limit = self.search_default_limit
        if isinstance(limit, bool) or not isinstance(limit, int) \
                or not 1 <= limit <= self.search_max_limit:
            raise InvalidRequest(f"limit must be between 1 and {self.search_max_limit}")
        if path_prefix is not None:
            if not isinstance(path_prefix, str) or not path_prefix.startswith("/") \
                    or len(path_prefix.encode("utf-8", "surrogatepass")) \
                    > self.limits.max_path_bytes:
                raise InvalidRequest("path_prefix must be a path beginning with /")
            _validate_text({"path_prefix": path_prefix}, "search")
            if "\x00" in path_prefix:
                raise InvalidRequest("path_prefix cannot hold a NUL character")
        if isinstance(min_score, bool) or not isinstance(min_score, int | float) \
                or not 0.0 <= min_score <= 1.0:
            raise InvalidRequest("min_score must be between 0 and 1")
        if fusion not in ("rrf", "weighted"):
            raise InvalidRequest("fusion must be rrf or weighted")
        with self._read() as c:
            self._store_in(c, store_id)
        return search.run(self, store_id, query, provider=self.embeddings, limit=limit,
                          path_prefix=path_prefix or None, min_score=float(min_score),
                          fusion=fusion, channels=channels)

    def index_store(self, store_id: str, *, seconds: float | None = None) -> IndexProgress:
        """Embed the store's memories that have no current vector (at most ``seconds``), as
        an indexer does in the background; with no provider, nothing.

        :raises NotFound: unknown store.
        """
        from .recall.indexer import Indexer, Progress

        with self._read() as c:
            self._store_in(c, store_id)
        provider = self.embeddings
        if provider is None:
            return Progress(reason="meaning is off (--embeddings none)")
        deadline = None if seconds is None else time.monotonic() + seconds
        return Indexer(self, provider).catch_up(store_id, deadline=deadline)

    def search_status(self, store_id: str) -> dict[str, Any]:
        """How far the store is indexed: ``memories``, ``indexed`` (by meaning, with the
        current provider's ``model``), ``indexing`` (the process holding the store's lease, if
        any) and ``reason`` when some are not (None once all are): catching up, the
        provider's last failure in this process, or no indexer running.

        :raises NotFound: unknown store.
        """
        from .recall.indexer import Indexer, last_failure, pending_count

        with self._read() as c:
            store = self._store_in(c, store_id)
        total = int(self._one("SELECT memory_count FROM stores WHERE id = ?",
                              (store_id,))[0])  # type: ignore[index]
        provider = self.embeddings
        if provider is None:
            return {"store_id": store.id, "name": store.name, "memories": total,
                    "indexed": 0, "model": None, "indexing": None,
                    "reason": "meaning is off (--embeddings none)"}
        pending = pending_count(self, store_id, provider.model)
        holder = Indexer(self, provider).lease_holder(store_id)
        reason = None
        if pending:
            reason = ("catching up" if holder else
                      last_failure(store_id, provider.model) or
                      "not indexed yet: no indexer is running for this store "
                      "(a mount, memfs serve or memfs search index it)")
        return {"store_id": store.id, "name": store.name, "memories": total,
                "indexed": total - pending, "model": provider.model, "indexing": holder,
                "reason": reason}

    # -- Console sign-outs (memfs.console.web) ------------------------------------------------

    def revoke_signin(self, signin: str, expires_at: int) -> None:
        """Record that the Console sign-in ``signin`` (a digest of its cookie's nonce) was
        signed out, until ``expires_at`` (Unix seconds, its cookie's expiry); sign-outs past
        their expiry are forgotten at the same time."""
        with self._write() as c:
            c.execute("DELETE FROM console_signouts WHERE expires_at < ?",
                      (int(datetime.now(UTC).timestamp()),))
            c.execute("INSERT INTO console_signouts (signin, expires_at) VALUES (?, ?) "
                      "ON CONFLICT (signin) DO NOTHING", (signin, expires_at))

    def signin_revoked(self, signin: str) -> bool:
        """Whether the Console sign-in ``signin`` was signed out (:meth:`revoke_signin`)."""
        return self._one("SELECT 1 FROM console_signouts WHERE signin = ?",
                         (signin,)) is not None

    # -- maintenance -------------------------------------------------------------------------

    def integrity_check(self) -> str:
        row = self._one("PRAGMA integrity_check")
        return str(row[0]) if row else "no answer"


# --------------------------------------------------------------------------------------------
# import helpers (Store.import_archive): an archive is client input, checked field by field

def _overlap(path: str, other: str) -> str:
    """Why ``path`` cannot be placed beside ``other``: the same path, or one below the
    other (:meth:`Store._check_path_free`)."""
    if other == path:
        return f"a memory already exists at {path}"
    if len(other) < len(path):
        return f"{other} is a memory, so {path} cannot be below it"
    return f"{path} is a directory of memories (e.g. {other})"


def _overlapping(path: str, placed: list[str]) -> str | None:
    """The path of ``placed`` (sorted) that ``path`` may not be placed beside, if any: the
    rule of :meth:`Store._check_path_free`, without the database."""
    segments = path[1:].split("/")
    for i in range(1, len(segments) + 1):
        above = "/" + "/".join(segments[:i])
        at = bisect.bisect_left(placed, above)
        if at < len(placed) and placed[at] == above:
            return above
    at = bisect.bisect_left(placed, path + "/")
    if at < len(placed) and placed[at] < path + "0":
        return placed[at]
    return None


def _ids_taken(what: str, id_: str) -> Conflict:
    return Conflict(
        f"{what} {id_} already exists in this database: nothing was imported; import a copy "
        "with new ids (--name NEW), or add the memories to a store (--into STORE)")


def _rejected(skipped: list[dict[str, Any]]) -> ImportRejected:
    first = skipped[0]
    more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
    return ImportRejected(
        f"nothing was imported: {len(skipped)} "
        f"{'entry' if len(skipped) == 1 else 'entries'} cannot be imported, e.g. "
        f"{first['path']}: {first['reason']}{more}; --partial imports the others",
        entries=skipped)


def _printable(path: str) -> str:
    """A path for a report: undecodable bytes (a file name's) as ``\\xNN`` escapes."""
    try:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return path.encode("utf-8", "backslashreplace").decode("utf-8")


def _check_tool_events(events: Any, *, text: bool = True) -> None:
    """:raises InvalidRequest: ``events`` is not a list of tool events with their ids.

    :param text: also check that every string is valid UTF-8 text (False: the caller's
        :meth:`Store._tool_events_in` does it as it encodes them).
    """
    if events is None:
        return
    if not isinstance(events, list):
        raise InvalidRequest("events must be a list")
    for e in events:
        if not isinstance(e, dict) or e.get("type") not in TOOL_EVENT_TYPES:
            kind = e.get("type") if isinstance(e, dict) else e
            raise InvalidRequest(
                f"a mount records only {' and '.join(TOOL_EVENT_TYPES)} events, not {kind!r}"
            )
        if not isinstance(e.get("id"), str) or not e["id"].startswith("sevt_"):
            raise InvalidRequest("every tool event needs its 'sevt_' id")
        if text:
            _validate_text(e, "event")
        parse_time(e.get("processed_at") or "")


def _check_sha256_arg(value: Any, what: str) -> None:
    """:raises InvalidRequest: ``value`` is neither None nor 64 lowercase hex digits."""
    if value is not None and (not isinstance(value, str) or not _SHA256_RE.match(value)):
        raise InvalidRequest(f"{what} must be 64 lowercase hex digits")


def _check_precondition(row: sqlite3.Row, expected_sha256: str | None) -> None:
    """:raises PreconditionFailed: the memory's content hash is not ``expected_sha256``."""
    if expected_sha256 is not None and expected_sha256 != row["content_sha256"]:
        raise PreconditionFailed(
            f"memory {row['id']} has content_sha256 {row['content_sha256']}, "
            f"not {expected_sha256}"
        )


def _dream_inputs(inputs: Any) -> tuple[str, list[str]]:
    """(store id, sorted session ids) of a dream's ``inputs``: exactly one memory_store and
    one sessions entry."""
    if not isinstance(inputs, list | tuple) or not all(isinstance(i, dict) for i in inputs):
        raise InvalidRequest("inputs must be a list of objects")
    stores = [i for i in inputs if i.get("type") == "memory_store"]
    sessions = [i for i in inputs if i.get("type") == "sessions"]
    if len(stores) != 1 or len(sessions) != 1 or len(inputs) != 2:
        raise InvalidRequest("inputs must hold exactly one 'memory_store' entry and exactly one "
                             "'sessions' entry")
    store_id = stores[0].get("memory_store_id")
    if not isinstance(store_id, str) or not store_id or set(stores[0]) - {
            "type", "memory_store_id"}:
        raise InvalidRequest("the memory_store input needs a memory_store_id (and nothing else)")
    ids = sessions[0].get("session_ids")
    if not isinstance(ids, list) or not all(isinstance(s, str) and s for s in ids) or set(
            sessions[0]) - {"type", "session_ids"}:
        raise InvalidRequest("the sessions input needs session_ids, a list of session ids")
    if not 1 <= len(ids) <= 100:
        raise InvalidRequest(f"session_ids must hold 1 to 100 ids ({len(ids)} given)")
    if len(set(ids)) != len(ids):
        raise InvalidRequest("session_ids holds an id twice")
    return store_id, sorted(ids)


def _dream_model(model: Any) -> dict[str, Any]:
    """A dream's model as its wire object ``{id, speed}``."""
    if isinstance(model, str):
        model = {"id": model}
    if not isinstance(model, dict) or set(model) - {"id", "speed"}:
        raise InvalidRequest("model must be a model id or an object {id, speed}")
    mid, speed = model.get("id"), model.get("speed")
    if not isinstance(mid, str) or not 1 <= len(mid) <= 256:
        raise InvalidRequest("the model id must be 1 to 256 characters")
    if speed not in (None, "standard"):
        raise InvalidRequest(f"dreams accept only the 'standard' speed, not {speed!r}")
    return {"id": mid, "speed": "standard"}


def _dream_output_behavior(value: Any, store_id: str) -> dict[str, Any]:
    if value is None:
        return {"type": "create_new"}
    if isinstance(value, dict) and value.get("type") == "create_new" and set(value) == {"type"}:
        return {"type": "create_new"}
    if isinstance(value, dict) and value.get("type") == "update_existing" and set(value) == {
            "type", "memory_store_id"}:
        if value["memory_store_id"] != store_id:
            raise InvalidRequest("update_existing must name the input memory store "
                                 f"({store_id})")
        return {"type": "update_existing", "memory_store_id": store_id}
    raise InvalidRequest("output_behavior must be {type: create_new} or {type: update_existing, "
                         "memory_store_id}")


def _dream(row: sqlite3.Row) -> Dream:
    return Dream(
        id=row["id"],
        status=row["status"],
        inputs=[{"type": "memory_store", "memory_store_id": row["memory_store_id"]},
                {"type": "sessions", "session_ids": json.loads(row["session_ids"])}],
        model=json.loads(row["model"]),
        instructions=row["instructions"],
        output_behavior=json.loads(row["output_behavior"]),
        outputs=[] if row["output_store_id"] is None else [
            {"type": "memory_store", "memory_store_id": row["output_store_id"]}],
        session_id=row["session_id"],
        error=None if row["error"] is None else json.loads(row["error"]),
        usage={k: int(row[k]) for k in DREAM_USAGE},
        created_at=row["created_at"],
        ended_at=row["ended_at"],
        archived_at=row["archived_at"],
    )


def check_token_ttl(ttl_seconds: Any) -> float:
    """The life of a new session token: ``ttl_seconds`` (None: the default).

    :raises InvalidRequest: not a number of seconds within the bounds.
    """
    ttl = SESSION_TOKEN_TTL if ttl_seconds is None else ttl_seconds
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not (
            SESSION_TOKEN_MIN_TTL <= ttl <= SESSION_TOKEN_MAX_TTL):
        raise InvalidRequest(f"a session token's life (ttl_seconds, memfs run --token-ttl) "
                             f"must be {SESSION_TOKEN_MIN_TTL} to {SESSION_TOKEN_MAX_TTL:.0f} "
                             "seconds")
    return float(ttl)


def _only_ids(where: list[str], params: list[Any], ids: Collection[str] | None) -> None:
    """Restrict a listing to the rows ``ids`` (none at all for an empty collection)."""
    if ids is None:
        return
    if not ids:
        where.append("1 = 0")  # no "IN ()": PostgreSQL refuses it
        return
    where.append(f"id IN ({','.join('?' * len(ids))})")
    params.extend(sorted(ids))


def no_store(store_id: str) -> NotFound:
    """What a store that does not exist (or that the caller may not see) answers."""
    return _no_store(store_id)


def no_session(session_id: str) -> NotFound:
    """What a session that does not exist (or that the caller may not see) answers."""
    return _no_session(session_id)


def _no_session(session_id: str) -> NotFound:
    return NotFound(f"session {session_id!r} not found")


def _no_store(store_id: str) -> NotFound:
    return NotFound(f"memory store {store_id!r} not found")


def _complete_event(session_id: str | None, body: dict[str, Any]) -> Event:
    """An event with its ``id`` and ``processed_at`` filled in when missing."""
    body = dict(body)
    body["id"] = body.get("id") or new_id("sevt")
    body["processed_at"] = body.get("processed_at") or _now()
    return Event(body["id"], session_id, body["type"], body["processed_at"], body)


def _archived(store_id: str) -> StoreArchived:
    return StoreArchived(f"memory store {store_id} is archived: its memories are read-only")


def _sort_key(item: Memory | MemoryPrefix) -> list[Any]:
    """Where the next page starts: ``[path, inclusive]``. A roll-up resumes at the first path
    past everything below it ("/a/" -> "/a0", "0" being the byte after "/")."""
    if isinstance(item, MemoryPrefix):
        return [item.path[:-1] + "0", True]
    return [item.path, False]


def _session(row: sqlite3.Row, res: list[sqlite3.Row]) -> Session:
    return Session(
        id=row["id"],
        status=row["status"],
        resources=tuple(_resource(r) for r in res),
        agent=json.loads(row["agent"]) if row["agent"] else None,
        environment_id=row["environment_id"],
        metadata=json.loads(row["metadata"]),
        title=row["title"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        archived_at=row["archived_at"],
    )


@dataclass(frozen=True)
class SearchHit:
    """A memory found by :meth:`Store.search_memories`: the memory (without content), whether
    its path matched, and for a content match ``(before, match, after)`` around the first hit
    (the match as written in the memory)."""

    memory: Memory
    in_path: bool
    snippet: tuple[str, str, str] | None
