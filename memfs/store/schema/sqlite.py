"""The migrations of an SQLite database (:class:`~memfs.backends.sqlite.SQLiteDatabase`), in
order, and :func:`migrate`, which a :class:`~memfs.store.Store` runs when it opens one. What
each one adds, and the PostgreSQL migration it matches: :data:`memfs.store.schema.VERSIONS`.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import MIGRATION_SET

if TYPE_CHECKING:
    import sqlite_utils
    from sqlite_utils.migrations import Migrations

    from ...backends import Database


#: The migrations, in order (sqlite-utils migration set "memfs"). sqlite-utils, with dateutil,
#: pluggy and click behind it, is imported only when a database needs one of them: every
#: ``memfs`` command and mount daemon opens an up-to-date database, and its import was a
#: quarter of a session daemon's start (issue 11).
MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = []


def _migration(
    fn: Callable[[sqlite_utils.Database], None],
) -> Callable[[sqlite_utils.Database], None]:
    MIGRATIONS.append(fn)
    return fn


@functools.cache
def migration_set() -> Migrations:
    """:data:`MIGRATIONS` as sqlite-utils' migration set (importing sqlite-utils)."""
    from sqlite_utils.migrations import Migrations

    ms = Migrations(MIGRATION_SET)
    for fn in MIGRATIONS:
        ms()(fn)
    return ms


def migrate(database: Database, utils: Callable[[], sqlite_utils.Database]) -> None:
    """Apply the migrations ``database`` lacks, under its write lock (two processes opening a
    new database at once do not both apply one). ``utils``: sqlite-utils over the database's
    writer connection, asked for only when a migration is pending."""
    conn = database.writer
    assert conn is not None  # SQLite's writer
    # The applied ones as sqlite-utils records them, read without importing it.
    try:
        applied = {row[0] for row in conn.execute(
            "SELECT name FROM _sqlite_migrations WHERE migration_set = ?", [MIGRATION_SET])}
    except sqlite3.OperationalError:  # no such table: a new database
        applied = set()
    if all(fn.__name__ in applied for fn in MIGRATIONS):
        return
    migrations = migration_set()
    db = utils()
    if migrations.pending(db):
        # Under the write lock (sqlite-utils nests its transactions as savepoints), so two
        # processes opening a fresh database at once do not both apply a migration.
        with database.write():
            migrations.apply(db)


# --------------------------------------------------------------------------------------------
# the migrations


@_migration
def m001_initial(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        -- A memory store. metadata is a JSON object of strings. archived_at is NULL until the
        -- store is archived, which cannot be undone. Deleting a store deletes its rows in
        -- memories, versions and changes (Store.stores.delete), not its session resources.
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
        -- Pruning (Store.versions.prune, and every Store.feed_prune_every changes): the
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
        -- A revert (memfs session revert, memfs.store.revert): what it undid (target_type session |
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
        -- The credential of a running session's commands (Store.sessions.create_token): only
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


@_migration
def m012_workspaces_keys(db: sqlite_utils.Database) -> None:
    # Many teams on one server (issue 22): every store, session, dream, agent and environment
    # belongs to a workspace (those made before: "default"), and API keys live here.
    db.executescript(WORKSPACES_KEYS_SQL.format(T="TEXT"))


@_migration
def m013_words_queue(db: sqlite_utils.Database) -> None:
    # A write queues its memory for the words index instead of tokenizing its text in its
    # own transaction (issue 23): memfs.recall.wordsqueue takes the queue in.
    from memfs.recall import schema

    db.executescript(schema.SQLITE_WORDS_QUEUE)


@_migration
def m014_session_token_keys(db: sqlite_utils.Database) -> None:
    # Issue 38 S1: a session token minted with a stored key is tied to it (refused once the
    # key is revoked or expired); NULL: minted by a server key or a local launcher.
    db.executescript(SESSION_TOKEN_KEYS_SQL)


#: The SQL of m014 (and of PostgreSQL's m009).
SESSION_TOKEN_KEYS_SQL = "ALTER TABLE session_tokens ADD COLUMN key_id TEXT;"


@_migration
def m015_session_creator_keys(db: sqlite_utils.Database) -> None:
    # Issue 38 S3: the stored key that created a session, the one key (with a server key and
    # the session's own token) that may act as it; NULL: a server key or a local launcher.
    db.executescript(SESSION_CREATOR_KEYS_SQL)


#: The SQL of m015 (and of PostgreSQL's m010).
SESSION_CREATOR_KEYS_SQL = "ALTER TABLE sessions ADD COLUMN created_by_key TEXT;"


@_migration
def m016_idempotency_keys(db: sqlite_utils.Database) -> None:
    # Issue 38 N6: the outcome of each write sent with an Idempotency-Key, recorded in the
    # write's own transaction, so that the same request sent again is answered with it.
    db.executescript(IDEMPOTENCY_KEYS_SQL.format(T="TEXT", I="INTEGER"))


@_migration
def m017_vector_passages(db: sqlite_utils.Database) -> None:
    # Issue 39: a memory's vectors are those of its passages (memfs.recall.passages), one row
    # still; a row from before (passages '') ranks until the indexer embeds it again.
    from memfs.recall import schema

    db.executescript(schema.SQLITE_VECTOR_PASSAGES)


@_migration
def m018_words_bm25(db: sqlite_utils.Database) -> None:
    # Issue 39: the words ranked by BM25 alike on both backends, stemmed in English and
    # French; every memory queued to be indexed again (memfs.recall.schema.SQLITE_BM25).
    from memfs.recall import schema

    db.executescript(schema.SQLITE_BM25)


@_migration
def m019_typed_memories(db: sqlite_utils.Database) -> None:
    # Issue 41: what a memory says about itself (memfs.store.frontmatter), derived at each
    # write; the memories there before are derived when a Store next opens the database
    # (meta_rev NULL: memfs.store.typed.Typed.reindex). Stores made before expire nothing
    # until a person says so (expiry 'report'); a new store is made with 'on'.
    db.executescript(TYPED_MEMORIES_SQL.format(T="TEXT", I="INTEGER", R="REAL"))


@_migration
def m020_session_resource_scope(db: sqlite_utils.Database) -> None:
    # Issue 41: a session's attachment is general or workflow (SPEC §8); those made before
    # are general.
    db.executescript(SESSION_RESOURCE_SCOPE_SQL)


#: The SQL of m020 (and of PostgreSQL's m015, with its text type).
SESSION_RESOURCE_SCOPE_SQL = (
    "ALTER TABLE session_resources ADD COLUMN scope TEXT NOT NULL DEFAULT 'general';")


@_migration
def m021_session_pinned(db: sqlite_utils.Database) -> None:
    # Issue 43: what each attachment's pinned memories put in a session's prompt (SPEC §9),
    # so that memfs session prompt renders it again from the versions that went in.
    db.executescript(SESSION_PINNED_SQL.format(T="TEXT", I="INTEGER"))


@_migration
def m022_session_pinned_more(db: sqlite_utils.Database) -> None:
    # Review 43: how many pinned memories an attachment had past the first MOST_PINNED,
    # which its prompt says as a count (NULL: none, or attached before).
    db.executescript(SESSION_PINNED_MORE_SQL.format(I="INTEGER"))


@_migration
def m023_versions_operation_partial(db: sqlite_utils.Database) -> None:
    # Issue 45: versions_operation without the modified versions.
    db.executescript(VERSIONS_OPERATION_PARTIAL_SQL)


#: The SQL of m023 (and of PostgreSQL's m018): versions_operation holds the created and
#: deleted versions alone. The modified ones are most of a history (every overwrite and
#: rename), so list_versions(operation=modified) finds a page of them walking
#: versions_store_time, and an overwrite or a rename writes one index less (about 2 of the
#: 30 pages it dirties: docs/performance-history.md). A listing uses the index only with the
#: index's condition among its own (memfs.store.versions.Versions.list adds it).
VERSIONS_OPERATION_PARTIAL_SQL = """
DROP INDEX versions_operation;
CREATE INDEX versions_operation ON versions(store_id, operation, created_at, id)
    WHERE operation <> 'modified';
"""


#: The SQL of m022 (and of PostgreSQL's m017, with its integer type for ``{I}``).
SESSION_PINNED_MORE_SQL = "ALTER TABLE session_resources ADD COLUMN pinned_more {I};"


#: The SQL of m021 (and of PostgreSQL's m016, with its types for ``{T}`` and ``{I}``): an
#: attachment's budget of pinned characters (NULL: attached before pinned memories), and per
#: attachment (``resource_id``), in the prompt's order, each pinned memory's version shown or
#: listed as not shown (``shown`` 0) with why (``reason``); ``size`` in characters; and the
#: memories pinned by their front matter, by store (a session's start reads them).
SESSION_PINNED_SQL = """
ALTER TABLE session_resources ADD COLUMN pinned_budget {I};
CREATE TABLE session_pinned (
    session_id {T} NOT NULL,
    resource_id {T} NOT NULL,
    position {I} NOT NULL,
    memory_id {T} NOT NULL,
    version_id {T} NOT NULL,
    path {T} NOT NULL,
    size {I} NOT NULL,
    shown {I} NOT NULL,
    reason {T},
    PRIMARY KEY (session_id, resource_id, position)
);
CREATE INDEX memories_pinned ON memories(store_id) WHERE pinned = 1;
"""


#: The SQL of m019 (and of PostgreSQL's m014, with its types for ``{T}``, ``{I}``, ``{R}``):
#: a memory's type, importance (0..1), expiry time, pinned flag and the rest as JSON
#: (``meta``: tags, description, supersedes, source, warnings), and the version of the
#: derivation that made them (``meta_rev``; NULL: to derive); the memories that expire, by
#: time; the store's expiry mode when its metadata says none.
TYPED_MEMORIES_SQL = """
ALTER TABLE memories ADD COLUMN mtype {T};
ALTER TABLE memories ADD COLUMN importance {R};
ALTER TABLE memories ADD COLUMN expires_at {T};
ALTER TABLE memories ADD COLUMN pinned {I} NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN meta {T};
ALTER TABLE memories ADD COLUMN meta_rev {I};
CREATE INDEX memories_expiry ON memories(expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX memories_meta_pending ON memories(store_id) WHERE meta_rev IS NULL;
ALTER TABLE stores ADD COLUMN expiry {T} NOT NULL DEFAULT 'report';
"""


#: The SQL of m016 (and of PostgreSQL's m011, with its types for ``{T}`` and ``{I}``): per
#: ``scope`` (the caller's workspace) and client ``key``, the SHA-256 of the request
#: (``fingerprint``: the key sent with another request is refused) and its answer (``status``,
#: ``body`` as JSON); kept for memfs.store.idempotency.KEEP_KEYS after ``created_at``.
IDEMPOTENCY_KEYS_SQL = """
CREATE TABLE idempotency_keys (
    scope {T} NOT NULL,
    key {T} NOT NULL,
    fingerprint {T} NOT NULL,
    status {I} NOT NULL,
    body {T} NOT NULL,
    created_at {T} NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_time ON idempotency_keys(created_at);
"""


#: The SQL of m012 (and of PostgreSQL's m008, with its text type for ``{T}``).
WORKSPACES_KEYS_SQL = """
ALTER TABLE stores ADD COLUMN workspace_id {T} NOT NULL DEFAULT 'default';
ALTER TABLE sessions ADD COLUMN workspace_id {T} NOT NULL DEFAULT 'default';
ALTER TABLE dreams ADD COLUMN workspace_id {T} NOT NULL DEFAULT 'default';
ALTER TABLE agents ADD COLUMN workspace_id {T} NOT NULL DEFAULT 'default';
ALTER TABLE environments ADD COLUMN workspace_id {T} NOT NULL DEFAULT 'default';
CREATE INDEX stores_workspace ON stores(workspace_id, created_at, id);
CREATE INDEX sessions_workspace ON sessions(workspace_id, created_at, id);
CREATE INDEX dreams_workspace ON dreams(workspace_id, created_at, id);
-- The API keys (Store.keys.create): only the SHA-256 of a secret is kept. store_ids: a JSON
-- list of the only stores the key opens (NULL: every store of its workspace).
CREATE TABLE api_keys (
    id {T} PRIMARY KEY,
    name {T} NOT NULL,
    workspace_id {T} NOT NULL,
    role {T} NOT NULL,
    store_ids {T},
    secret_sha256 {T} NOT NULL UNIQUE,
    created_at {T} NOT NULL,
    expires_at {T},
    last_used_at {T},
    revoked_at {T},
    created_by_type {T},
    created_by_id {T}
);
CREATE INDEX api_keys_workspace ON api_keys(workspace_id, created_at);
-- The workspace of each deleted store: its change feed still says it was deleted, to its own
-- workspace alone (Store.keys.check_visible).
-- The Console's sign-ins made with a stored key: the SHA-256 of each cookie's nonce, until
-- the cookie expires (Unix seconds). A cookie is good only if its sign-in is here, so that
-- reading the database (which holds the keys' digests the cookies are signed under) is not
-- enough to make one.
CREATE TABLE console_signins (
    signin {T} PRIMARY KEY,
    key_id {T} NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX console_signins_expiry ON console_signins(expires_at);
CREATE TABLE deleted_stores (
    id {T} PRIMARY KEY,
    workspace_id {T} NOT NULL,
    deleted_at {T} NOT NULL
);
"""
