"""The schema of a memfs database, on both backends: what it is now (below), how it came to be
(:data:`VERSIONS`: each step, and the migration of each backend that makes it), and the
migrations themselves, :mod:`~memfs.store.schema.sqlite` (sqlite-utils functions) and
:mod:`~memfs.store.schema.postgresql` (SQL), which a :class:`~memfs.store.Store` applies when
it opens a database, through that database's own connections (``memfs db migrate`` opens a
Store for it; :mod:`memfs.cli.dbadmin` reads the lists). This package imports no backend's driver
or sqlite-utils at import time, and nothing of the store; its modules may import the backends,
recall's schema and this ``__init__``.

**The tables now.** Ids are prefixed and time-ordered (``memstore_…``, ``mem_…``,
``memver_…``, …); times are RFC 3339 UTC text with microseconds, which sorts by time; JSON is
text.

- ``stores``: ``id``, ``name`` (``stores_name``), ``description``, ``metadata``,
  ``created_at``/``updated_at``/``archived_at``; ``memory_count`` (its live memories, kept by
  triggers on ``memories`` in the same transaction) and ``changes_pruned_seq`` (the newest
  change pruning deleted: a follower behind it gets ``FeedGap``); ``expiry`` (``on``: its
  expired memories are deleted; ``report``, the stores made before typed memories: only
  reported), which the metadata key ``memfs_expiry`` overrides.
- ``memories``: live memories only (a deleted one's row is gone; its history stays in
  ``versions``). ``id`` (stable across renames), ``store_id``, ``path`` (unique per store:
  ``memories_store_path``), ``content``, ``content_sha256``, ``content_size_bytes``,
  ``version_id`` (the version holding the current content), ``created_at``, ``updated_at``;
  what it says about itself, derived at each write (:mod:`memfs.store.frontmatter`):
  ``mtype``, ``importance``, ``expires_at`` (``memories_expiry``), ``pinned``, ``meta`` (JSON:
  tags, description, supersedes, source, warnings) and ``meta_rev`` (NULL: to derive,
  ``memories_meta_pending``).
- ``versions``: immutable, one per real change. ``id``, ``store_id``, ``memory_id``,
  ``operation`` (``created`` | ``modified`` | ``deleted``), ``created_at``, ``path``,
  ``content``, ``content_sha256``, ``content_size_bytes`` (NULL when redacted or deleted),
  ``created_by_type``/``_id``, ``redacted_at``, ``redacted_by_type``/``_id``. Listed in
  ``(created_at, id)`` order through ``versions_store_time`` (by store),
  ``versions_memory_time`` (by memory; also retention), ``versions_actor`` (by the actor's id)
  and ``versions_operation`` (by operation).
- ``changes``: the change feed of every store, written in the change's own transaction.
  ``seq`` (a counter), ``store_id``, ``op`` (``put`` | ``delete`` | ``store``),
  ``memory_id``, ``path``, ``old_path``, ``at``; ``changes_store`` ``(store_id, seq)``. On
  PostgreSQL each commit to it notifies the channel ``memfs_changes``.
- ``sessions`` (``status``, the ``agent`` snapshot, ``metadata``, ``launcher``: the local
  ``memfs run`` owning it, under the partial index ``sessions_launched``; ``created_by_key``:
  the stored key that created it, which may act as it),
  ``session_resources`` (the stores attached to a session, by ``(session_id, position)`` and
  by ``memory_store_id``; each with its access and ``scope``, general or workflow),
  ``events`` (a session's events and the tool events of mounts: ``seq``, ``id``,
  ``session_id`` or ``store_id``, ``type``, ``processed_at``, ``body`` the wire object;
  ``events_session``, and ``events_session_deleted`` for pruning),
  ``session_tokens`` (the SHA-256 of each running session's credential, and the stored
  key that minted it, ``key_id``: the token is refused once that key is), ``agents`` and
  ``environments`` (a wire ``body`` each).
- ``dreams`` (a run of a model over a store and some sessions: its status, the model, the
  output store, token counts, the ``runner`` process and its ``heartbeat_at``; ``dreams_time``,
  and ``dreams_live`` for those not ended), ``reverts`` (what each revert undid and the
  versions it wrote), ``console_signouts`` (the Console's signed-out sign-ins until they
  expire).
- recall's words index, ``memory_words`` (each memory's length and terms) with
  ``memory_words_fts`` on SQLite, ``memory_words_terms`` on PostgreSQL
  (:mod:`memfs.recall.wordsindex`), filled from ``memory_words_queue``, where triggers queue
  each changed memory;
  ``memory_vectors`` and ``recall_leases``: :mod:`memfs.recall.schema` holds their SQL.
- ``api_keys``: the keys of :meth:`~memfs.store.Store.keys.create` (the SHA-256 of each
  secret, its ``workspace_id``, ``role``, ``store_ids`` scope, expiry, last use, revocation).
  Every store, session, dream, agent and environment has a ``workspace_id`` (issue 22);
  ``deleted_stores`` keeps a deleted store's, for its change feed; ``console_signins`` the
  Console's sign-ins made with a stored key (the SHA-256 of each cookie's nonce).
- ``idempotency_keys``: the answer of each write sent with an ``Idempotency-Key`` (by
  ``scope``, the caller's workspace, and ``key``; the request's ``fingerprint``), recorded
  in the write's transaction and kept a day (``idempotency_keys_time``).
- Bookkeeping: ``_sqlite_migrations`` (sqlite-utils') or ``_memfs_migrations`` (ours, the same
  columns): the migrations applied, by ``migration_set`` (:data:`MIGRATION_SET`) and name.

**Where the backends differ.** PostgreSQL's text columns are ``COLLATE "C"`` (byte order, as
SQLite's BINARY: a directory is the range ``[prefix + "/", prefix + "0")``), its integers
``BIGINT``, its counters identities (SQLite: ``AUTOINCREMENT``), ``memory_count`` is kept by one
trigger function (SQLite: two triggers), and so is the words queue (SQLite: three). SQLite's
``memories.store_id`` names ``stores`` as a foreign key, never enforced (``foreign_keys`` is
off); PostgreSQL's ``memory_vectors`` cascade from ``memories``.

**Adding a migration:** a function to :mod:`~memfs.store.schema.sqlite`, an entry to
:mod:`~memfs.store.schema.postgresql`'s list, and a row to :data:`VERSIONS` naming both
(``tests/unit/store/test_schema.py`` fails if the lists and the rows disagree). Never change or
renumber one that a released memfs applied: databases record them by name.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MIGRATION_SET", "VERSIONS", "Version", "migration_names"]

#: The name under which both backends record their applied migrations.
MIGRATION_SET = "memfs"


@dataclass(frozen=True)
class Version:
    """One step of the schema's history: what it adds, and the migration of each backend that
    makes it (the same name in several rows: one migration made several steps at once). A
    backend without one says why (``none_because``)."""

    adds: str
    sqlite: str | None
    postgresql: str | None
    none_because: str = ""

    def __post_init__(self) -> None:
        if (self.sqlite is None or self.postgresql is None) and not self.none_because:
            raise ValueError(f"schema step {self.adds!r}: a backend without a migration, "
                             "and no reason")

    def migration(self, dialect: str) -> str | None:
        """The migration of the backend ``dialect`` (``sqlite``, ``postgresql``)."""
        return self.sqlite if dialect == "sqlite" else self.postgresql


#: The schema's steps, oldest first. PostgreSQL came when SQLite was at m006: its m001 is
#: SQLite's first six in one.
VERSIONS: tuple[Version, ...] = (
    Version("stores, memories, versions, changes, sessions, session_resources, events",
            sqlite="m001_initial", postgresql="m001_initial"),
    Version("agents, environments",
            sqlite="m002_agents_environments", postgresql="m001_initial"),
    Version("versions_store_time: version listings by (created_at, id)",
            sqlite="m003_versions_by_time", postgresql="m001_initial"),
    Version("stores.memory_count, kept by triggers; versions_store dropped",
            sqlite="m004_memory_count", postgresql="m001_initial"),
    Version("sessions.launcher",
            sqlite="m005_session_launcher", postgresql="m001_initial"),
    Version("the filtered listings' indexes (versions_memory_time, versions_actor, "
            "versions_operation, stores_name, sessions_launched, events_session_deleted); "
            "stores.changes_pruned_seq",
            sqlite="m006_indexes", postgresql="m001_initial"),
    Version("a NOTIFY on memfs_changes for each commit to changes",
            sqlite=None, postgresql="m002_changes_notify",
            none_because="an SQLite database's files are watched instead (memfs.backends.watch)"),
    Version("dreams", sqlite="m007_dreams", postgresql="m003_dreams"),
    Version("reverts", sqlite="m008_reverts", postgresql="m004_reverts"),
    Version("console_signouts", sqlite="m009_console_signouts",
            postgresql="m005_console_signouts"),
    Version("session_tokens", sqlite="m010_session_tokens", postgresql="m006_session_tokens"),
    Version("recall: memory_words, memory_vectors, recall_leases (memfs.recall.schema)",
            sqlite="m011_recall", postgresql="m007_recall"),
    Version("workspaces: workspace_id on stores, sessions, dreams, agents, environments "
            "('default' for those before); api_keys; deleted_stores; console_signins",
            sqlite="m012_workspaces_keys", postgresql="m008_workspaces_keys"),
    Version("recall: memory_words_queue, the memories whose words are to be indexed",
            sqlite="m013_words_queue", postgresql=None,
            none_because="PostgreSQL's words (a tsvector) are indexed by their trigger, in "
                         "the write's transaction"),
    Version("session_tokens.key_id: the stored key that minted a token (issue 38 S1)",
            sqlite="m014_session_token_keys", postgresql="m009_session_token_keys"),
    Version("sessions.created_by_key: the stored key that created a session (issue 38 S3)",
            sqlite="m015_session_creator_keys", postgresql="m010_session_creator_keys"),
    Version("idempotency_keys: the answer of each write sent with an Idempotency-Key "
            "(issue 38 N6)",
            sqlite="m016_idempotency_keys", postgresql="m011_idempotency_keys"),
    Version("memory_vectors.passages: a memory's vectors are its passages' (issue 39)",
            sqlite="m017_vector_passages", postgresql="m012_vector_passages"),
    Version("recall: words ranked by BM25 alike on both backends, stemmed in English and "
            "French (memory_words: each memory's length and terms; memory_words_fts on SQLite, "
            "memory_words_terms on PostgreSQL: their index); "
            "PostgreSQL's words queued in memory_words_queue as SQLite's are; every memory "
            "queued to be indexed again (issue 39)",
            sqlite="m018_words_bm25", postgresql="m013_words_bm25"),
    Version("typed memories: memories.mtype, importance, expires_at, pinned, meta, meta_rev "
            "(what a memory says about itself, derived at each write; memories_expiry, "
            "memories_meta_pending); stores.expiry ('report' for the stores made before, "
            "'on' after) (issue 41)",
            sqlite="m019_typed_memories", postgresql="m014_typed_memories"),
    Version("session_resources.scope: an attachment is general or workflow ('general' for "
            "those before) (issue 41)",
            sqlite="m020_session_resource_scope", postgresql="m015_session_resource_scope"),
    Version("session_resources.pinned_budget and session_pinned: the pinned memories each "
            "attachment put in the session's prompt, shown or listed as not shown; "
            "memories_pinned (issue 43)",
            sqlite="m021_session_pinned", postgresql="m016_session_pinned"),
    Version("session_resources.pinned_more: how many pinned memories an attachment had past "
            "the first 100, said as a count in the prompt (issue 43's review)",
            sqlite="m022_session_pinned_more", postgresql="m017_session_pinned_more"),
    Version("versions_operation holds the created and deleted versions alone: an overwrite "
            "or a rename writes one index less (issue 45)",
            sqlite="m023_versions_operation_partial",
            postgresql="m018_versions_operation_partial"),
)


def migration_names(dialect: str) -> list[str]:
    """The migrations this memfs knows for the backend ``dialect``, in the order they apply
    (read from its module: what a Store applies)."""
    if dialect == "postgresql":
        from . import postgresql

        return [name for name, _ in postgresql.MIGRATIONS]
    from . import sqlite

    return [fn.__name__ for fn in sqlite.MIGRATIONS]
