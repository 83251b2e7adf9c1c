"""Versions: snapshots, listing, restore, redaction and retention."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from ..backends import Connection
from ..backends.scopes import store_scope
from ..errors import InvalidRequest, NotFound
from ..models import Actor, Memory, MemoryVersion, Page, Snapshot
from ..rules import (
    check_limit,
    check_view,
    encode_content,
    format_time,
    parse_time,
    validate_path,
)
from .base import Core, Part
from .common import EMPTY_SHA256, OPERATIONS, no_session, utc_now
from .paging import after_cursor, newest_first_page
from .rows import version_from_row

if TYPE_CHECKING:
    from .memories import Memories
    from .stores import Stores
log = logging.getLogger(__name__)


class Versions(Part):
    """The store's versions (a part of :class:`memfs.store.Store`)."""

    def __init__(self, core: Core, stores: Stores, memories: Memories) -> None:
        super().__init__(core)
        self.stores = stores
        self.memories = memories

    # -- versions ----------------------------------------------------------------------------

    #: The longest ``at`` :meth:`snapshot` looks at (an id or an RFC 3339 time is far shorter).
    max_at_chars = 100

    def snapshot(self, store_id: str, at: str | datetime, *, view: str = "basic",
                 viewer: str | None = None) -> Snapshot:
        """The store as it was at ``at`` (time travel, README "Time travel"): an RFC 3339 time
        (after every version created at or before it; a future time is now), a version id of
        this store (right after that version, versions ordered by ``created_at`` then ``id``
        as :meth:`list` lists them), or a session id (just before that session's
        first version in this store; if it wrote none there, at the session's creation).

        Each memory shows the newest version at or before the boundary unless that one is
        ``deleted``. One read transaction, one query: for each memory of the store's history
        two index look-ups (``versions_memory_time``), its newest version at or before the
        boundary and its oldest retained one: a memory whose oldest retained version comes
        after the boundary and is not ``created`` lost its history before the boundary to
        pruning (:attr:`Snapshot.unknown_memory_ids`).

        ``viewer``: the session of a session token asking, to which a version of another
        store, or another session that wrote nothing here, is unknown like any other thing it
        was not given. A version or session of another workspace is unknown to everyone.

        :raises InvalidRequest: ``at`` is none of those forms, or a version of another store
            of this workspace.
        :raises NotFound: unknown store, version or session (or another workspace's).
        """
        view = check_view(view)
        with self.core.read() as c:
            self.core.store_in(c, store_id)
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

    def _redacted_path(self, c: Connection, memory_id: str, created_at: str,
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

    def _snapshot_boundary(self, c: Connection, store_id: str,
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
        # A version or session of another workspace is unknown here, as an unknown id (one
        # look-up either way, its workspace compared to this store's in it).
        if at.startswith("memver_"):
            row = c.execute(
                "SELECT v.store_id, v.created_at, o.workspace_id = h.workspace_id AS ours "
                "FROM versions v LEFT JOIN stores o ON o.id = v.store_id "
                "JOIN stores h ON h.id = ? WHERE v.id = ?", (store_id, at)).fetchone()
            if row is None or not row["ours"] or (viewer is not None
                                                  and row["store_id"] != store_id):
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
            row = c.execute(
                "SELECT s.created_at, s.workspace_id = h.workspace_id AS ours FROM sessions s "
                "JOIN stores h ON h.id = ? WHERE s.id = ?", (store_id, at)).fetchone()
            if row is None or not row["ours"] or (viewer is not None and at != viewer):
                raise no_session(at)
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

    def list(
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
        view = check_view(view)
        limit = check_limit(limit, self.limits, view)
        where, params = ["store_id = ?"], [store_id]
        if memory_id is not None:
            where.append("memory_id = ?")
            params.append(memory_id)
        if operation is not None:
            if operation not in OPERATIONS:
                raise InvalidRequest("operation must be created, modified or deleted")
            where.append("operation = ?")
            params.append(operation)
            if operation != "modified":
                # versions_operation's own condition (m023): a planner uses a partial index
                # only for a query whose WHERE says it, and cannot read it off a parameter.
                where.append("operation <> 'modified'")
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
            params.append(_bound(created_at_gte, "created_at_gte"))
        if created_at_lte is not None:
            where.append("created_at <= ?")
            params.append(_bound(created_at_lte, "created_at_lte"))
        filters = ["versions", list(params)]  # a copy: see list_stores
        if page:
            after_cursor(page, "versions", filters, where, params)
        cols = "*" if view == "full" else "*, NULL AS content"
        # created_at first: ids from two processes in the same millisecond need not be in
        # time order, and API.md §2.12 orders by created_at, then id.
        with self.core.read() as c:
            self.core.store_in(c, store_id)
            rows = c.execute(
                f"SELECT {cols} FROM versions WHERE {' AND '.join(where)} "
                "ORDER BY created_at DESC, id DESC LIMIT ?",
                [*params, limit + 1],
            ).fetchall()
        return newest_first_page(rows, limit, "versions", filters,
                                  lambda r: version_from_row(r, view == "full"))

    def get(self, store_id: str, version_id: str, *, view: str = "full") -> MemoryVersion:
        view = check_view(view)
        row = self.core.one(
            "SELECT * FROM versions WHERE id = ? AND store_id = ?", (version_id, store_id)
        )
        if row is None:
            self.stores.get(store_id)
            raise NotFound(f"memory version {version_id!r} not found in {store_id}")
        return version_from_row(row, view == "full")

    def restore(self, store_id: str, version_id: str, *, path: str | bytes | None = None,
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
        with self.core.write(store_scope(store_id)) as c:
            v = c.execute("SELECT * FROM versions WHERE id = ? AND store_id = ?",
                          (version_id, store_id)).fetchone()
            if v is None:
                self.core.store_in(c, store_id)
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
                return self.memories.modify_in(c, row, (text, data), new_path, False, actor)
            return self.memories.create_in(c, store_id, new_path or v["path"], text, data, actor,
                                   memory_id=v["memory_id"])

    def redact(
        self, store_id: str, version_id: str, *, actor: Actor | None
    ) -> MemoryVersion:
        """Erase a version's path and content for good (idempotent).

        :raises InvalidRequest: the version is the head of a live memory.
        """
        with self.core.write(store_scope(store_id)) as c:
            self.core.store_in(c, store_id)
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
                    (utc_now(), actor.type if actor else None, actor.id if actor else None,
                     version_id),
                )
                # The memory's history changed (mounts show it in .history/).
                self.core.change(c, store_id, "history", row["memory_id"])
        return self.get(store_id, version_id)

    def prune(self, *, now: datetime | None = None) -> int:
        """Delete versions past the retention window, keeping the newest ``retention_keep`` of
        every memory whatever their age. Returns how many were deleted.

        It also bounds the change feed of every store (:meth:`Core.prune_changes_in`; and the
        last change of a deleted store once it is older than :attr:`feed_keep_age`) and the
        events (:meth:`Core.prune_events_in`), which writes do too every :attr:`feed_prune_every`
        changes."""
        now = now or datetime.now(UTC)
        cutoff = format_time(now - timedelta(days=self.limits.retention_days))
        pruned = changes = 0
        # One store at a time, each in a transaction holding its scope: the prune waits
        # only for the store it prunes, and no store's writes wait for the whole prune.
        for row in self.core.all("SELECT id FROM stores ORDER BY id", ()):
            store_id = str(row[0])
            with self.core.write(store_scope(store_id)) as c:
                gone = c.execute(
                    "DELETE FROM versions WHERE store_id = ? AND created_at < ? AND id IN ("
                    " SELECT id FROM (SELECT id, row_number() OVER"
                    "  (PARTITION BY memory_id ORDER BY id DESC) AS n FROM versions"
                    "  WHERE store_id = ?) AS ranked"
                    " WHERE n > ?) RETURNING memory_id",
                    (store_id, cutoff, store_id, max(1, self.limits.retention_keep)),
                ).fetchall()  # keep live heads
                pruned += len(gone)
                # Each memory whose history lost versions: one change (mounts' .history/).
                for memory_id in sorted({r[0] for r in gone}):
                    self.core.change(c, store_id, "history", memory_id)
                changes += self.core.prune_changes_in(c, store_id, now)
        # The last changes of deleted stores (nothing writes to them: their scopes all the
        # same), and the events (their deletes skip rows a write is deleting).
        old = format_time(now - self.core.feed_keep_age)
        gone_stores = [r[0] for r in self.core.all(
            "SELECT DISTINCT store_id FROM changes WHERE at < ? "
            "AND store_id NOT IN (SELECT id FROM stores)", (old,))]
        with self.core.write("prune:events", *map(store_scope, gone_stores)) as c:
            changes += c.execute(
                "DELETE FROM changes WHERE at < ? AND store_id NOT IN (SELECT id FROM stores)",
                (old,),
            ).rowcount
            events = self.core.prune_events_in(c, now)
        log.info("pruned %d versions, %d changes, %d events", pruned, changes, events)
        return pruned


def _bound(value: str | datetime, name: str) -> str:
    """A time filter as the versions' ``created_at`` are written (UTC).

    :raises InvalidRequest: not RFC 3339, or outside the years 1 to 9999 in UTC
        (``0001-01-01T00:00:00+14:00``: Python cannot hold it, an OverflowError before).
    """
    try:
        return format_time(parse_time(value))
    except OverflowError:
        raise InvalidRequest(f"invalid {name} {value!s}: outside the years 1 to 9999 in UTC"
                             ) from None
