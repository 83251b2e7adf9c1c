"""Import and export: archives and files in, snapshots out."""

from __future__ import annotations

import bisect
import itertools
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from ..backends import Connection
from ..backends.scopes import store_scope
from ..errors import Conflict, ImportRejected, InvalidRequest, LimitExceeded, PathConflict
from ..models import DEFAULT_WORKSPACE, Actor, Memory, MemoryVersion
from ..rules import encode_content, new_id, validate_name, validate_path
from .base import Core, ExportSnapshot, Part
from .common import INSERT_MEMORY, archived, no_store, utc_now
from .frontmatter import derive, registry
from .look import overlap
from .rows import memory_from_row, version_from_row

if TYPE_CHECKING:
    from .memories import Memories
    from .stores import Stores
log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# import helpers (Store.archive.import_archive): an archive is client input, checked field by field


def _overlapping(path: str, placed: list[str]) -> str | None:
    """The path of ``placed`` (sorted) that ``path`` may not be placed beside, if any: the
    rule of :meth:`Memories.check_path_free`, without the database."""
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


class Archive(Part):
    """The store's archive (a part of :class:`memfs.store.Store`)."""

    def __init__(self, core: Core, stores: Stores, memories: Memories) -> None:
        super().__init__(core)
        self.stores = stores
        self.memories = memories

    # -- import and export -------------------------------------------------------------------
    # The store's side of memfs/transfer/ (the archive format and the file walks live
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
        with self.core.database.snapshot() as c:
            yield ExportSnapshot(self.core.store_in(c, store_id), c)

    def _export_read(
        self, snapshot: ExportSnapshot | None
    ) -> AbstractContextManager[Connection]:
        return nullcontext(snapshot.conn) if snapshot is not None else self.core.read()

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
            self.core.store_in(c, store_id)
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
            return self.memories.count(store_id)
        row = self.core.one(
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
                memory = memory_from_row(row, True) if row is not None else None
        return [version_from_row(r, True) for r in page], done, memory

    def import_archive(
        self,
        store: dict[str, Any],
        records: Callable[[], Iterable[dict[str, Any]]],
        *,
        name: str | None = None,
        into: str | None = None,
        partial: bool = False,
        workspace: str = DEFAULT_WORKSPACE,
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
        (:mod:`memfs.store.restore`), with no lock and no write, then what the database holds (ids,
        paths, room) is checked against them, so that an import that is refused writes
        nothing; then the rows are written in short transactions of at most
        :data:`memfs.store.restore.BATCH_ROWS` rows. The memories show as they are written; an
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
            name = validate_name(name, lim)
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
        skipped = self._import_plan(src["id"], into, copy, groups, live, workspace)
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
                with self.core.write(store_scope(sid)) as c:
                    if not created and into is None:
                        self._import_store(c, src, sid, name, workspace)
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
        return {"store": self.stores.get(sid).to_dict(), "ids": "new" if copy else "kept",
                "created_store": into is None, **counts, "skipped": skipped}

    def _import_plan(self, archive_store: str, into: str | None, copy: bool,
                     groups: list[str], live: list[tuple[str, str]],
                     workspace: str) -> list[dict[str, Any]]:
        """The memories an import would skip (their paths taken or overlapping, no room left)
        as the database is now, read without the write lock.

        :raises Conflict: an exact restore's store or memory id is taken (ids are the
            server's: in any workspace; the store's name is told only to its own).
        :raises NotFound, StoreArchived: ``into``.
        """
        skipped: list[dict[str, Any]] = []
        with self.core.read() as c:
            if into is None and not copy:
                taken = c.execute("SELECT name, workspace_id FROM stores WHERE id = ?",
                                  (archive_store,)).fetchone()
                if taken is not None:
                    named = (f" ({taken['name']!r})" if taken["workspace_id"] == workspace
                             else "")
                    raise Conflict(
                        f"memory store {archive_store}{named} already exists in this "
                        "database: nothing was imported; import a copy with new ids "
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
                target = self.core.store_in(c, into)
                if target.archived_at is not None:
                    raise archived(into)
                count = c.execute("SELECT memory_count FROM stores WHERE id = ?",
                                  (into,)).fetchone()[0]
            placed: list[str] = []  # the archive's own, sorted: they may overlap too
            for memory_id, path in live:
                try:
                    if into is not None:
                        self.memories.check_path_free(c, into, path)
                    other = _overlapping(path, placed)
                    if other is not None:
                        raise PathConflict(overlap(path, other), conflicting_memory_id="",
                                           conflicting_path=other)
                    self.memories.check_room(into or archive_store, count)
                    count += 1
                    bisect.insort(placed, path)
                except (PathConflict, LimitExceeded) as e:
                    skipped.append({"path": path, "memory_id": memory_id, "reason": e.message})
        return skipped

    def _imported_store_in(self, c: Connection, sid: str,
                           made_archived: bool = False) -> None:
        """Before each batch of an import after its first: the store it writes into is still
        there, and not archived (unless the import made it so: the exact restore of an
        archived store). Checked only once, an import went on writing into a store archived
        meanwhile, or rows for a store deleted meanwhile.

        :raises NotFound, StoreArchived:
        """
        row = c.execute("SELECT archived_at FROM stores WHERE id = ?", (sid,)).fetchone()
        if row is None:
            raise no_store(sid)
        if row[0] is not None and not made_archived:
            raise archived(sid)

    def _import_store(self, c: Connection, src: dict[str, Any], sid: str,
                      name: str | None, workspace: str) -> None:
        """The store of an import that makes one (in its first transaction), in
        ``workspace``: a copy named ``name``, else the archive's own (its id checked
        again)."""
        if name is not None:
            now = utc_now()
            row = (sid, name, src["description"], src["metadata"], now, now, None)
        else:
            if c.execute("SELECT 1 FROM stores WHERE id = ?", (sid,)).fetchone():
                raise _ids_taken("memory store", sid)
            row = (sid, src["name"], src["description"], src["metadata"], src["created_at"],
                   src["updated_at"], src["archived_at"])
        c.execute(
            "INSERT INTO stores (id, name, description, metadata, created_at, updated_at, "
            "archived_at, workspace_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (*row[:3], json.dumps(row[3]), *row[4:], workspace),
        )

    def _import_row(
        self, c: Connection, sid: str, row: Any, copy: bool, refused: dict[str, str],
        counts: dict[str, int], skipped: list[dict[str, Any]], written: list[str],
    ) -> None:
        """Write one row of an import (:mod:`memfs.store.restore`). A live memory that cannot be
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
                self.memories.check_path_free(c, sid, row.path)
                store = c.execute("SELECT memory_count, metadata FROM stores WHERE id = ?",
                                  (sid,)).fetchone()
                self.memories.check_room(sid, store["memory_count"])
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
        # The store's types, read with its count above.
        d = derive(row.path, text, registry(store["metadata"]), row.updated_at)
        c.execute(
            INSERT_MEMORY,
            (group.new_id, sid, row.path, text, row.sha256, row.size, row.head_id,
             row.created_at, row.updated_at, *d.columns()),
        )
        self.core.change(c, sid, "put", group.new_id, row.path)
        counts["memories"] += 1

    def _import_undo(self, sid: str, created: bool, written: list[str]) -> None:
        """Remove what a failed import wrote, in short transactions: the store it created
        (as :meth:`Stores.delete` would), or the memories it added to ``into`` (each live one
        with a ``delete`` change, so that followers drop it). A failure here is logged: the
        import's own error is the one raised."""
        try:
            if created:
                for table, key in (("versions", "id"), ("memories", "id"), ("changes", "seq")):
                    gone = 1
                    while gone:
                        with self.core.write(store_scope(sid)) as c:
                            gone = c.execute(
                                f"DELETE FROM {table} WHERE {key} IN (SELECT {key} FROM "
                                f"{table} WHERE store_id = ? LIMIT 5000)", (sid,)).rowcount
                with self.core.write(store_scope(sid)) as c:
                    c.execute("DELETE FROM stores WHERE id = ?", (sid,))
                    self.core.change(c, sid, "store")
                return
            for i in range(0, len(written), 200):
                chunk = written[i:i + 200]
                marks = ",".join("?" * len(chunk))
                with self.core.write(store_scope(sid)) as c:
                    for mid, path in c.execute(
                            f"SELECT id, path FROM memories WHERE id IN ({marks})",
                            chunk).fetchall():
                        c.execute("DELETE FROM memories WHERE id = ?", (mid,))
                        self.core.change(c, sid, "delete", mid, path)
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
        workspace: str = DEFAULT_WORKSPACE,
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
            name = validate_name(name, self.limits)
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
                with self.core.write(store_scope(sid)) as c:
                    if not created and into is None:
                        now = utc_now()
                        c.execute(
                            "INSERT INTO stores (id, name, description, metadata, created_at, "
                            "updated_at, workspace_id) VALUES (?, ?, '', '{}', ?, ?, ?)",
                            (sid, name, now, now, workspace))
                        created = True
                    else:
                        self._imported_store_in(c, sid)
                    for path, content, reason in batch:
                        reason = refused.get(path, reason)
                        if reason is None:
                            try:
                                p = validate_path(path, self.limits)
                                text, data = encode_content(content, self.limits)
                                written.append(self.memories.create_in(c, sid, p, text, data,
                                                                       actor).id)
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
        return {"store": self.stores.get(sid).to_dict(), "ids": "new",
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
        with self.core.read() as c:
            count = 0 if into is None else self.core.writable_store_in(c, into)["memory_count"]
            for path, content, reason in files():
                if reason is None:
                    try:
                        p = validate_path(path, self.limits)
                        encode_content(content, self.limits)
                        if into is not None:
                            self.memories.check_path_free(c, into, p)
                        other = _overlapping(p, placed)
                        if other is not None:
                            raise PathConflict(overlap(p, other), conflicting_memory_id="",
                                               conflicting_path=other)
                        self.memories.check_room(sid, count)
                        count += 1
                        bisect.insort(placed, p)
                        continue
                    except (InvalidRequest, PathConflict) as e:
                        reason = e.message
                refused[path] = reason
        return refused
