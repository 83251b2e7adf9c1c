"""Memories and the filesystem's path operations: create, update, delete, write, rename,
the tree and listings."""

from __future__ import annotations

import builtins
import dataclasses
import json
import logging
import time
from collections.abc import Collection
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..backends import Connection, Row
from ..backends.scopes import session_scope, store_scope
from ..errors import (
    DirectoryNotEmpty,
    InvalidCursor,
    InvalidRequest,
    LimitExceeded,
    NotADirectory,
    NotFound,
)
from ..models import Actor, Memory, MemoryPrefix, Page, ToolEvents, complete_tool_results
from ..rules import (
    check_limit,
    check_view,
    encode_content,
    format_ago,
    new_id,
    validate_path,
    validate_prefix,
)
from .base import Core, Part
from .common import (
    BASIC_MEMORY_COLS,
    DERIVED_SET,
    INSERT_MEMORY,
    check_precondition,
    check_sha256_arg,
    check_tool_events,
    no_store,
    sha256_hex,
    sort_key,
    tool_event_rows,
    utc_now,
)
from .frontmatter import derive, registry
from .look import Look, blockers_sql, conflict, look_in
from .paging import decode_cursor, encode_cursor
from .rows import SeqLater, memory_from_row

if TYPE_CHECKING:
    from .stores import Stores
log = logging.getLogger(__name__)


def _tags_of(row: Row) -> builtins.list[str]:
    tags: builtins.list[str] = json.loads(row["meta"]).get("tags", []) if row["meta"] else []
    return tags


class Memories(Part):
    """The store's memories (a part of :class:`memfs.store.Store`)."""

    def __init__(self, core: Core, stores: Stores) -> None:
        super().__init__(core)
        self.stores = stores

    # -- memories ----------------------------------------------------------------------------

    @staticmethod
    def scopes(store_id: str, actor: Actor | None = None,
               events: object = None) -> tuple[str, ...]:
        """What a write to the memories of ``store_id`` serialises on (:meth:`Core.write`):
        the store (its limit, its paths, its feed's order), and the session of ``actor``
        when the write records ``events`` for it (:meth:`_tool_events_in`: a session's
        events stay in order)."""
        if events and actor is not None and actor.type == "session_actor":
            return store_scope(store_id), session_scope(actor.id)
        return (store_scope(store_id),)

    def check_path_free(
        self, c: Connection, store_id: str, path: str, exclude: Collection[str] = ()
    ) -> None:
        """:raises PathConflict: ``path`` is taken, or is an ancestor or descendant of a
        memory's path (``/a`` and ``/a/b`` cannot both exist). Memories in ``exclude`` are
        ignored (the one being renamed, the one being replaced). One statement
        (:func:`~memfs.store.look.blockers_sql`); a write that also reads its store and
        memory reads this with them (:func:`~memfs.store.look.look_in`)."""
        sql, params = blockers_sql(store_id, path, len(exclude))
        for row in c.execute(f"{sql} ORDER BY o, path", params).fetchall():
            if row["id"] not in exclude:
                raise conflict(path, row["id"], row["path"])

    def insert_version(
        self,
        c: Connection,
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
        vid, (sql, params) = self.version_sql(store_id, memory_id, operation, path, content,
                                              sha, size, actor, now)
        c.execute(sql, params)
        return vid

    @staticmethod
    def version_sql(
        store_id: str,
        memory_id: str,
        operation: str,
        path: str,
        content: str | None,
        sha: str | None,
        size: int | None,
        actor: Actor | None,
        now: str,
    ) -> tuple[str, tuple[str, tuple[Any, ...]]]:
        """A new version's id, and the statement that inserts it (:meth:`Core.record
        <memfs.store.base.Core.record>` runs it with the write it records)."""
        vid = new_id("memver")
        return vid, (
            "INSERT INTO versions (id, store_id, memory_id, operation, created_at, path, "
            "content, content_sha256, content_size_bytes, created_by_type, created_by_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (vid, store_id, memory_id, operation, now, path, content, sha, size,
             actor.type if actor else None, actor.id if actor else None),
        )

    def prune_memory(self, c: Connection, memory_id: str) -> None:
        """Retention (SPEC §1): drop versions older than the window, keeping the newest few."""
        c.execute(*self.prune_sql(memory_id))

    def prune_sql(
        self, memory_id: str, newest: tuple[str, str] | None = None
    ) -> tuple[str, tuple[Any, ...]]:
        """The statement of :meth:`prune_memory`. ``newest``: the id and time of the version
        written in the same statement (:meth:`Core.record <memfs.store.base.Core.record>`),
        which the statement cannot see yet: counted among the newest as if it were there,
        and never deleted."""
        cutoff = format_ago(time.time_ns() // 1000, timedelta(days=self.limits.retention_days))
        # At least one: the newest version is a live memory's head and must stay.
        keep = max(1, self.limits.retention_keep)
        if newest is None or self.core.dialect == "sqlite":  # SQLite runs it after the insert
            return (
                "DELETE FROM versions WHERE memory_id = ? AND created_at < ? AND id NOT IN "
                "(SELECT id FROM versions WHERE memory_id = ? ORDER BY created_at DESC, "
                "id DESC LIMIT ?)",
                (memory_id, cutoff, memory_id, keep),
            )
        vid, at = newest
        # The newest ``keep`` of the others (the index's order, stopping there), with it.
        return (
            "DELETE FROM versions WHERE memory_id = ? AND created_at < ? AND id <> ? "
            "AND id NOT IN (SELECT id FROM (SELECT id, created_at FROM (SELECT id, created_at "
            "FROM versions WHERE memory_id = ? AND id <> ? ORDER BY created_at DESC, id DESC "
            "LIMIT ?) AS older UNION ALL SELECT ?, ?) AS kept ORDER BY created_at DESC, "
            "id DESC LIMIT ?)",
            (memory_id, cutoff, vid, memory_id, vid, keep, vid, at, keep),
        )

    def count(self, store_id: str) -> int:
        row = self.core.one("SELECT memory_count FROM stores WHERE id = ?", (store_id,))
        if row is None:
            raise no_store(store_id)
        return int(row[0])

    def check_can_create(self, store_id: str) -> None:
        """Would a new memory be accepted now? (The filesystem asks at ``open(O_CREAT)`` so the
        error comes at once; the insert itself checks again under the write lock.)

        :raises NotFound, StoreArchived, LimitExceeded:
        """
        # One statement (a snapshot of its own): this runs at every open(O_CREAT).
        row = self.core.run(self.core.writable_store_in, store_id)
        self.check_room(store_id, row["memory_count"])

    def check_room(self, store_id: str, n: int) -> None:
        """:raises LimitExceeded: ``n`` live memories leave no room for one more."""
        if n >= self.limits.max_memories:
            raise LimitExceeded(
                f"memory store {store_id} already holds {n} memories; "
                f"the limit is {self.limits.max_memories}"
            )

    def create(
        self, store_id: str, path: str | bytes, content: str | bytes | None, *, actor: Actor | None
    ) -> Memory:
        """Create a memory and its ``created`` version.

        :raises InvalidPath, InvalidContent, ContentTooLarge: bad input.
        :raises NotFound, StoreArchived, LimitExceeded, PathConflict:
        """
        path = validate_path(path, self.limits)
        text, data = encode_content(content, self.limits)
        with self.core.write(store_scope(store_id)) as c:
            return self.create_in(c, store_id, path, text, data, actor, ahead=True)

    def create_in(
        self,
        c: Connection,
        store_id: str,
        path: str,
        text: str,
        data: bytes,
        actor: Actor | None,
        memory_id: str | None = None,
        now: str | None = None,
        look: Look | None = None,
        ahead: bool = False,
    ) -> Memory:
        """Create a memory inside a write transaction; ``path`` and content are validated.
        ``memory_id``: a deleted memory of this store comes back under its own id (restore,
        revert), its ``created`` version added to its history. ``look``: the store and what
        blocks ``path``, read in this transaction (else read here). ``ahead``: in a batch,
        the write is sent with the batch's next statement (:meth:`Core.record_ahead`), and
        the memory's ``seq`` read when asked for."""
        if look is None:
            look = look_in(c, store_id, free=path)
        look.writable()
        # The path before the count: at the limit, a taken path still says so.
        look.check_free(path)
        self.check_room(store_id, look.memory_count)
        sha = sha256_hex(data)
        now = now or utc_now()
        mid = memory_id or new_id("mem")
        vid, version = self.version_sql(
            store_id, mid, "created", path, text, sha, len(data), actor, now
        )
        d = derive(path, text, registry(look.metadata), now)
        writes = [version, (INSERT_MEMORY, (mid, store_id, path, text, sha, len(data), vid, now,
                                            now, *d.columns()))]
        if memory_id is not None:
            writes.append(self.prune_sql(mid, (vid, now)))
        if ahead and memory_id is None:
            seq = self.core.record_ahead(c, writes, store_id, "put", mid, path)
            if not isinstance(seq, int):
                return SeqLater(mid, store_id, path, text, sha, len(data), vid, now, now,
                                 d.to_meta(), seq_of=seq)
        else:
            seq = self.core.record(c, writes, store_id, "put", mid, path)
        return Memory(mid, store_id, path, text, sha, len(data), vid, now, now, d.to_meta(),
                      seq=seq)

    def memory_in(
        self, c: Connection, store_id: str, column: str, value: str
    ) -> Row:
        """The live memory of ``store_id`` whose ``column`` (``id`` or ``path``) is ``value``.
        The store is looked at only when the memory is missing: one query when it is there.

        :raises NotFound: unknown store, or no such memory in it.
        """
        row: Row | None = c.execute(
            f"SELECT * FROM memories WHERE store_id = ? AND {column} = ?", (store_id, value)
        ).fetchone()
        if row is None:
            self.core.store_in(c, store_id)
            if column == "path":
                raise NotFound(f"no memory at {value} in {store_id}")
            raise NotFound(f"memory {value!r} not found in {store_id}")
        return row

    def _get_memory(self, store_id: str, column: str, value: str, view: str) -> Memory:
        view = check_view(view)
        row = self.core.run(self.memory_in, store_id, column, value)
        return memory_from_row(row, view == "full")

    def get(self, store_id: str, memory_id: str, *, view: str = "full") -> Memory:
        """:raises NotFound: unknown store, or no live memory with that id in it."""
        return self._get_memory(store_id, "id", memory_id, view)

    def get_by_path(self, store_id: str, path: str, *, view: str = "full") -> Memory:
        """:raises NotFound: unknown store, or no live memory at that path in it."""
        return self._get_memory(store_id, "path", path, view)

    def resolve(self, store_id: str, ref: str, *, view: str = "full") -> Memory:
        """A memory by id or, when ``ref`` starts with ``/``, by path."""
        if ref.startswith("/"):
            return self.get_by_path(store_id, ref, view=view)
        return self.get(store_id, ref, view=view)

    def update(
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
        check_sha256_arg(precondition_sha256, "precondition content_sha256")
        new_path = None if path is None else validate_path(path, self.limits)
        new = None if content is None else encode_content(content, self.limits)
        with self.core.write(store_scope(store_id)) as c:
            # The memory, its store and what blocks the new path: one statement.
            look = look_in(c, store_id, memory=("id", memory_id), free=new_path)
            row = look.the_memory("id", memory_id)
            check_precondition(row, precondition_sha256)
            return self.modify_in(c, row, new, new_path, replace, actor, look=look)

    def modify_in(
        self,
        c: Connection,
        row: Row,
        content: tuple[str, bytes] | None,
        new_path: str | None,
        replace: bool,
        actor: Actor | None,
        now: str | None = None,
        look: Look | None = None,
    ) -> Memory:
        """Change a live memory's content and/or path inside a write transaction: one
        ``modified`` version, or none (and the memory unchanged) when nothing changes.
        ``look``: its store and what blocks ``new_path`` (other than this memory), read in
        this transaction (else read here)."""
        store_id, memory_id = row["store_id"], row["id"]
        text, sha, size = row["content"], row["content_sha256"], row["content_size_bytes"]
        if content is not None:
            text, sha, size = content[0], sha256_hex(content[1]), len(content[1])
        target = row["path"] if new_path is None else new_path
        if target == row["path"] and sha == row["content_sha256"] and text == row["content"]:
            return memory_from_row(row, True)
        moved = target != row["path"]
        if look is None:
            look = look_in(c, store_id, free=target if moved else None, exclude=(memory_id,))
        look.writable()
        now = now or utc_now()
        if moved:
            self._make_room(c, store_id, target, memory_id, replace, actor, now, look)
        vid, version = self.version_sql(
            store_id, memory_id, "modified", target, text, sha, size, actor, now
        )
        d = derive(target, text, registry(look.metadata), now)
        seq = self.core.record(c, [
            version,
            ("UPDATE memories SET path = ?, content = ?, content_sha256 = ?, "
             "content_size_bytes = ?, version_id = ?, updated_at = ?, "
             f"{DERIVED_SET} WHERE id = ?",
             (target, text, sha, size, vid, now, *d.columns(), memory_id)),
            self.prune_sql(memory_id, (vid, now)),
        ], store_id, "put", memory_id, target, row["path"] if moved else None)
        return Memory(
            memory_id, store_id, target, text, sha, size, vid, row["created_at"], now,
            d.to_meta(), seq=seq
        )

    def _make_room(
        self,
        c: Connection,
        store_id: str,
        target: str,
        memory_id: str,
        replace: bool,
        actor: Actor | None,
        now: str,
        look: Look,
    ) -> None:
        """Before moving ``memory_id`` to ``target``: with ``replace``, delete the memory that
        holds exactly ``target``; then check that nothing else blocks it (``look``: what
        blocked ``target`` when the write began)."""
        if look.blocker is None:
            return
        victim_id, victim_path = look.blocker
        if not (replace and victim_path == target):
            look.check_free(target)
        self.delete_in(c, store_id, victim_id, victim_path, actor, now)
        # Nothing else can block it now (no two memories overlap); checked all the same.
        self.check_path_free(c, store_id, target, exclude=(memory_id,))

    def delete_row_in(
        self, c: Connection, row: Row, actor: Actor | None, now: str
    ) -> tuple[int, str]:
        """Delete a memory's row inside a write transaction: a ``deleted`` version. Returns
        the change-feed position of the delete and the version's id."""
        return self.delete_in(c, row["store_id"], row["id"], row["path"], actor, now)

    def delete_in(
        self, c: Connection, store_id: str, memory_id: str, path: str, actor: Actor | None,
        now: str,
    ) -> tuple[int, str]:
        """:meth:`delete_row_in` of the memory ``memory_id`` at ``path``: one statement."""
        vid, version = self.version_sql(
            store_id, memory_id, "deleted", path, None, None, None, actor, now
        )
        seq = self.core.record(c, [
            version,
            ("DELETE FROM memories WHERE id = ?", (memory_id,)),
            self.prune_sql(memory_id, (vid, now)),
        ], store_id, "delete", memory_id, path)
        return seq, vid

    def delete(
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
        check_sha256_arg(expected_sha256, "expected_content_sha256")
        with self.core.write(store_scope(store_id)) as c:
            row = look_in(c, store_id, memory=("id", memory_id)).the_memory("id", memory_id)
            check_precondition(row, expected_sha256)
            self.delete_row_in(c, row, actor, utc_now())

    # -- path operations (the filesystem's view) ---------------------------------------------

    def write_path(self, store_id: str, path: str | bytes, content: str | bytes, *,
                   actor: Actor | None, events: ToolEvents = None) -> Memory:
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
        check_tool_events(events, text=False)
        with self.core.write(*self.scopes(store_id, actor, events)) as c:
            # The memory at the path, its store and what blocks the path: one statement.
            look = look_in(c, store_id, memory=("path", path), free=path)
            if look.memory is None:
                m = self.create_in(c, store_id, path, text, data, actor, look=look)
            else:
                m = self.modify_in(c, look.memory, (text, data), None, False, actor, look=look)
            self._tool_events_in(c, store_id, actor, events, m.id, m.memory_version_id)
            return m

    def _tool_events_in(
        self, c: Connection, store_id: str, actor: Actor | None,
        events: ToolEvents, memory_id: str | None = None,
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
        # One statement for the pair: this runs at every close that commits.
        c.executemany(
            "INSERT INTO events (id, session_id, store_id, type, processed_at, body) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            tool_event_rows(events, session_id, store_id),
        )

    def delete_path(self, store_id: str, path: str, *, actor: Actor | None,
                    events: ToolEvents = None) -> Memory:
        """Delete the memory at ``path`` (``unlink``); returns it as it was, with the
        change-feed position of the delete (``seq``: a mount orders what the feed brings back
        of the memory by it). ``events`` are recorded in the same transaction (see
        :meth:`write_path`).

        :raises NotFound:
        """
        path = validate_path(path, self.limits)
        check_tool_events(events, text=False)
        with self.core.write(*self.scopes(store_id, actor, events)) as c:
            row = look_in(c, store_id, memory=("path", path)).the_memory("path", path)
            seq = self.delete_row_in(c, row, actor, utc_now())[0]
            self._tool_events_in(c, store_id, actor, events, row["id"])
        return memory_from_row(row, False, seq)

    def rename_path(
        self,
        store_id: str,
        old: str | bytes,
        new: str | bytes,
        *,
        actor: Actor | None,
        replace: bool = True,
        events: ToolEvents = None,
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
        (``RENAME_NOREPLACE``). (:meth:`update` with ``replace`` names the memory to
        move, which keeps its id: there the memory at the target is the one deleted.) ``events``
        are recorded in the same transaction (see :meth:`write_path`).

        :raises NotFound, PathConflict, StoreArchived, InvalidPath:
        """
        old = validate_path(old, self.limits)
        new = validate_path(new, self.limits)
        check_tool_events(events, text=False)
        # One transaction: the memories found at ``old`` and ``new`` are the ones changed, even
        # if another writer renames or replaces them at the same moment.
        with self.core.write(*self.scopes(store_id, actor, events)) as c:
            # The memory, its store and what blocks the new path: one statement.
            look = look_in(c, store_id, memory=("path", old), free=new)
            row = look.the_memory("path", old)
            kept: Memory | None = None
            if replace and new != old and look.blocker is not None and look.blocker[1] == new:
                # A memory at ``new`` (no two memories overlap: the blocker at the path
                # itself is the one there): it keeps the path and takes the content.
                target = self.memory_in(c, store_id, "id", look.blocker[0])
                look.writable()
                content = (row["content"], row["content"].encode("utf-8"))
                now = utc_now()
                kept = self.modify_in(c, target, content, None, False, actor, now, look)
                gone = self.delete_row_in(c, row, actor, now)[0]
                # The rename's feed position is its last change (the put is none when
                # the content is the same): a mount orders late states by it.
                kept = dataclasses.replace(kept, seq=max(kept.seq, gone))
            if kept is None:
                kept = self.modify_in(c, row, None, new, replace, actor, look=look)
            self._tool_events_in(c, store_id, actor, events, kept.id, kept.memory_version_id)
            return kept

    def rename_prefix(
        self,
        store_id: str,
        old_prefix: str,
        new_prefix: str,
        *,
        actor: Actor | None,
        events: ToolEvents = None,
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
        check_tool_events(events, text=False)
        if old_prefix == "/" or new_prefix.startswith(old_prefix):
            raise InvalidRequest(f"cannot move {old_prefix} into itself")
        with self.core.write(*self.scopes(store_id, actor, events)) as c:
            types = registry(self.core.writable_store_in(c, store_id)["metadata"])
            rows = c.execute(
                "SELECT * FROM memories WHERE store_id = ? AND path >= ? AND path < ? "
                "ORDER BY path",
                (store_id, old_prefix, old_prefix[:-1] + "0"),
            ).fetchall()
            moving = {r["id"] for r in rows}
            self._check_empty_directory(c, store_id, new_prefix, moving)
            now = utc_now()
            targets = [new_prefix + r["path"][len(old_prefix):] for r in rows]
            for t in targets:
                validate_path(t, self.limits)
            # Every moved memory is out of the way (excluded) while each target is checked, so
            # that memories inside the move never conflict with each other.
            for target in targets:
                self.check_path_free(c, store_id, target, exclude=moving)
            result = []
            for row, target in zip(rows, targets, strict=True):
                sha, size = row["content_sha256"], row["content_size_bytes"]
                vid, version = self.version_sql(
                    store_id, row["id"], "modified", target, row["content"], sha, size,
                    actor, now,
                )
                d = derive(target, row["content"], types, now)
                seq = self.core.record(c, [
                    version,
                    (f"UPDATE memories SET path = ?, version_id = ?, updated_at = ?, "
                     f"{DERIVED_SET} WHERE id = ?", (target, vid, now, *d.columns(), row["id"])),
                    self.prune_sql(row["id"], (vid, now)),
                ], store_id, "put", row["id"], target, row["path"])
                result.append(
                    Memory(row["id"], store_id, target, None, sha, size, vid, row["created_at"],
                           now, d.to_meta(), seq=seq)
                )
            self._tool_events_in(c, store_id, actor, events)
        return result

    def delete_prefix(
        self,
        store_id: str,
        prefix: str,
        *,
        actor: Actor | None,
        events: ToolEvents = None,
    ) -> list[Memory]:
        """Delete every memory below ``prefix`` (``/a/``) in one transaction: a directory
        deleted at once (``rm -r`` through a mount is a delete per file), all or nothing. Each
        memory gets a ``deleted`` version and a ``delete`` change, as :meth:`delete_path` gives
        it, and so leaves the words and meaning indexes; they are returned as they were (basic
        view), in path order, each with its delete's change-feed position. ``events`` are
        recorded in the same transaction (see :meth:`write_path`). Allowed on an archived
        store, as a single delete is.

        :raises NotFound: unknown store, or no memory below ``prefix``.
        :raises InvalidRequest: ``prefix`` is ``/``: a whole store is never deleted this way.
        :raises InvalidPath: ``prefix`` is not a path followed by ``/``.
        """
        prefix = validate_prefix(prefix, self.limits)
        check_tool_events(events, text=False)
        if prefix == "/":
            raise InvalidRequest("cannot delete the root directory: name a directory below it")
        with self.core.write(*self.scopes(store_id, actor, events)) as c:
            rows = c.execute(
                "SELECT * FROM memories WHERE store_id = ? AND path >= ? AND path < ? "
                "ORDER BY path",
                (store_id, prefix, prefix[:-1] + "0"),
            ).fetchall()
            if not rows:
                self.core.store_in(c, store_id)
                raise NotFound(f"no memory below {prefix} in {store_id}")
            now = utc_now()
            result = []
            for row in rows:
                seq = self.delete_row_in(c, row, actor, now)[0]
                result.append(memory_from_row(row, False, seq))
            self._tool_events_in(c, store_id, actor, events)
        return result

    def _check_empty_directory(
        self, c: Connection, store_id: str, prefix: str, moving: Collection[str]
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
        rows = self.core.all(
            f"SELECT {BASIC_MEMORY_COLS} FROM memories WHERE store_id = ? ORDER BY path",
            (store_id,),
        )
        if not rows:
            self.stores.get(store_id)
        return [memory_from_row(r, False) for r in rows]

    def list(
        self,
        store_id: str,
        *,
        path_prefix: str | None = None,
        depth: int = 0,
        limit: int = 20,
        page: str | None = None,
        view: str = "basic",
        memory_type: str | None = None,
        tag: str | None = None,
    ) -> Page[Memory | MemoryPrefix]:
        """Memories in ascending byte order of path, with ``depth`` roll-ups (API.md §2.10).

        ``depth`` 0 lists everything below the prefix; ``d >= 1`` lists memories at most ``d``
        segments below it and one ``memory_prefix`` per distinct deeper first-``d`` segments.
        ``memory_type``, ``tag``: only the memories of that type, with that tag (SPEC §8; no
        roll-ups then: ``depth`` must be 0).
        """
        view = check_view(view)
        limit = check_limit(limit, self.limits, view)
        prefix = "/" if path_prefix is None else validate_prefix(path_prefix, self.limits)
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
            raise InvalidRequest("depth must be an integer >= 0")
        for name, value in (("type", memory_type), ("tag", tag)):
            if value is not None and (not isinstance(value, str) or not 0 < len(value) <= 64):
                raise InvalidRequest(f"{name} must be 1 to 64 characters")
        if (memory_type is not None or tag is not None) and depth:
            raise InvalidRequest("a listing by type or tag lists memories, not directories: "
                                 "its depth must be 0")
        filters: builtins.list[Any] = [store_id, prefix, depth]
        if memory_type is not None or tag is not None:
            filters += [memory_type, tag]
        typed = "" if memory_type is None else "AND mtype = ? "
        kind = () if memory_type is None else (memory_type,)
        lower, lower_incl = prefix, True
        if page:
            key = decode_cursor(page, "memories", filters)
            if not (isinstance(key, list) and len(key) == 2 and isinstance(key[0], str)
                    and isinstance(key[1], bool)):  # fmt: skip
                raise InvalidCursor("invalid page cursor")
            lower, lower_incl = key[0], key[1]
        cols = "*" if view == "full" else BASIC_MEMORY_COLS
        upper = prefix[:-1] + "0"
        with self.core.read() as c:
            self.core.store_in(c, store_id)
            items: builtins.list[Memory | MemoryPrefix] = []
            while len(items) <= limit:
                # Fetch in chunks; a roll-up jumps past everything below its prefix.
                rows = c.execute(
                    f"SELECT {cols} FROM memories WHERE store_id = ? "
                    f"AND path {'>=' if lower_incl else '>'} ? "
                    f"AND path < ? {typed}ORDER BY path LIMIT ?",
                    (store_id, lower, upper, *kind, limit + 1),
                ).fetchall()
                if not rows:
                    break
                for row in rows:
                    if tag is not None and tag not in _tags_of(row):
                        lower, lower_incl = row["path"], False
                        continue
                    rel = row["path"][len(prefix):].split("/")
                    if depth == 0 or len(rel) <= depth:
                        items.append(memory_from_row(row, view == "full"))
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
            next_page = encode_cursor("memories", filters, sort_key(items[-1]))
        return Page(items, next_page)
