"""Typed memories (SPEC §8): what a store holds described, expired memories swept as versions,
a type cleared in one transaction, and the index of memories written before it existed.

What each memory says about itself is derived at its write (:mod:`memfs.store.frontmatter`,
:meth:`memfs.store.Memories.create_in`); this part reads that index and acts on it.

**Expiry.** A memory whose ``expires_at`` has passed is *expired*. In a store whose expiry is
``on`` (:func:`~memfs.store.frontmatter.expiry_mode`) it leaves search and the counts at once,
and :meth:`Typed.sweep` deletes it as a version by :data:`EXPIRY_ACTOR`, in bounded
transactions that leave alone a memory rewritten since the sweep read it. Each transaction's
deletions are recorded as a revert target (``memrevert_…``), so ``memfs session revert`` of it
brings them all back, as ``memfs versions restore`` brings back one. A store made before typed
memories (``report``) is only reported until a person turns its expiry on.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..backends import Connection, Row
from ..backends.scopes import store_scope
from ..errors import InvalidRequest
from ..models import Actor
from ..rules import format_time, new_id
from .base import Core, Part
from .common import utc_now
from .frontmatter import expiry_mode, registry

if TYPE_CHECKING:
    from .memories import Memories
    from .stores import Stores

log = logging.getLogger(__name__)

#: Who deletes an expired memory: a reserved workload identity (the SDK's
#: ``service_account_actor``), so that its ``deleted`` version says what it is.
EXPIRY_ACTOR = Actor("service_account_actor", "svac_memfs_expiry")
#: Memories deleted per sweep transaction: a sweep never holds the write lock long.
SWEEP_BATCH = 100
#: What "expires soon" means in a description.
SOON = timedelta(days=7)
#: At most this many memories named in each list of a description.
LISTED = 20


@dataclass
class SweepReport:
    """What a sweep did, or would do (``dry_run``, or a store that only reports)."""

    deleted: list[dict[str, Any]] = field(default_factory=list)
    reported: list[dict[str, Any]] = field(default_factory=list)
    #: Memories rewritten since the sweep read them: left alone.
    skipped: list[dict[str, Any]] = field(default_factory=list)
    #: The revert ids that bring back each transaction's deletions.
    reverts: list[str] = field(default_factory=list)
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"type": "memfs_expiry_sweep", "dry_run": self.dry_run, "deleted": self.deleted,
                "reported": self.reported, "skipped": self.skipped, "reverts": self.reverts}


class Typed(Part):
    """Typed memories (a part of :class:`memfs.store.Store`): describe, sweep, clear."""

    def __init__(self, core: Core, stores: Stores, memories: Memories) -> None:
        super().__init__(core)
        self.stores = stores
        self.memories = memories

    # -- what a store holds ------------------------------------------------------------------

    def describe(self, store_id: str, *, now: datetime | None = None) -> dict[str, Any]:
        """What the store holds (SPEC §8 ``describe``): its live memories counted by type,
        top directory and tag; those that expire soon, or have expired (``expired``: left out
        of the counts when the store's expiry is on); the oldest and newest change; the
        memories with warnings; the store's types and expiry mode. One read transaction.

        :raises NotFound: unknown store.
        """
        at = format_time(now or datetime.now(UTC))
        soon = format_time((now or datetime.now(UTC)) + SOON)
        with self.core.read() as c:
            store = c.execute("SELECT * FROM stores WHERE id = ?", (store_id,)).fetchone()
            if store is None:
                self.core.store_in(c, store_id)  # NotFound
            rows = c.execute(
                "SELECT id, path, updated_at, content_size_bytes, mtype, importance, "
                "expires_at, pinned, meta FROM memories WHERE store_id = ? ORDER BY path",
                (store_id,),
            ).fetchall()
        metadata = json.loads(store["metadata"])
        mode = expiry_mode(metadata, store["expiry"])
        by_type: Counter[str] = Counter()
        by_dir: Counter[str] = Counter()
        by_tag: Counter[str] = Counter()
        expired: list[Row] = []
        expiring: list[Row] = []
        warned: list[dict[str, Any]] = []
        live: list[Row] = []
        pinned = 0
        size = 0
        for r in rows:
            if r["expires_at"] is not None and r["expires_at"] <= at:
                expired.append(r)
                if mode == "on":
                    continue
            elif r["expires_at"] is not None and r["expires_at"] <= soon:
                expiring.append(r)
            live.append(r)
            size += r["content_size_bytes"]
            by_type[r["mtype"] or "(none)"] += 1
            top = r["path"].split("/")[1]
            by_dir["/" + top + "/" if r["path"].count("/") > 1 else "/"] += 1
            pinned += bool(r["pinned"])
            extra = json.loads(r["meta"]) if r["meta"] else {}
            for tag in extra.get("tags", ()):
                by_tag[tag] += 1
            if extra.get("warnings"):
                warned.append({"path": r["path"], "warnings": extra["warnings"]})
        oldest = min(live, key=lambda r: (r["updated_at"], r["path"]), default=None)
        newest = max(live, key=lambda r: (r["updated_at"], r["path"]), default=None)

        def brief(r: Row | None) -> dict[str, Any] | None:
            return None if r is None else {"path": r["path"], "updated_at": r["updated_at"]}

        def expiry(r: Row) -> dict[str, Any]:
            return {"path": r["path"], "memory_type": r["mtype"], "expires_at": r["expires_at"]}

        expiring.sort(key=lambda r: (r["expires_at"], r["path"]))
        expired.sort(key=lambda r: (r["expires_at"], r["path"]))
        return {
            "type": "memfs_store_description",
            "memory_store_id": store_id,
            "name": store["name"],
            "at": at,
            "memories": len(live),
            "content_size_bytes": size,
            "pinned": pinned,
            "by_type": dict(sorted(by_type.items())),
            "by_directory": dict(sorted(by_dir.items())),
            "by_tag": dict(sorted(by_tag.items(), key=lambda kv: (-kv[1], kv[0]))),
            "expiring_soon": {"count": len(expiring), "within_days": SOON.days,
                              "memories": [expiry(r) for r in expiring[:LISTED]]},
            "expired": {"count": len(expired),
                        "memories": [expiry(r) for r in expired[:LISTED]]},
            "oldest_change": brief(oldest),
            "newest_change": brief(newest),
            "warnings": {"count": len(warned), "memories": warned[:LISTED]},
            "expiry": mode,
            "types": registry(metadata).to_dict(),
        }

    # -- expiry ------------------------------------------------------------------------------

    def expired(self, store_id: str | None = None, *, now: datetime | None = None,
                limit: int = SWEEP_BATCH) -> list[dict[str, Any]]:
        """Expired memories (of ``store_id``, or of every store), oldest expiry first, each
        with the store's ``expiry`` mode and the ``memory_version_id`` it was read at: what
        :meth:`delete_expired` is handed. Archived stores are left out (nothing changes
        there)."""
        at = format_time(now or datetime.now(UTC))
        sql = ("SELECT m.id, m.store_id, m.path, m.version_id, m.expires_at, m.mtype, "
               "s.metadata, s.expiry FROM memories m JOIN stores s ON s.id = m.store_id "
               "WHERE m.expires_at IS NOT NULL AND m.expires_at <= ? AND s.archived_at IS NULL")
        params: list[Any] = [at]
        if store_id is not None:
            sql += " AND m.store_id = ?"
            params.append(store_id)
        sql += " ORDER BY m.expires_at, m.id LIMIT ?"
        params.append(int(limit))
        out = []
        for r in self.core.all(sql, params):
            out.append({
                "memory_id": r["id"], "memory_store_id": r["store_id"], "path": r["path"],
                "memory_version_id": r["version_id"], "memory_type": r["mtype"],
                "expires_at": r["expires_at"],
                "expiry": expiry_mode(json.loads(r["metadata"]), r["expiry"]),
            })
        return out

    def delete_expired(self, seen: list[dict[str, Any]], *, now: datetime | None = None,
                       report: SweepReport | None = None) -> SweepReport:
        """Delete, in one transaction, the memories of ``seen`` (:meth:`expired`) whose store's
        expiry is ``on``, as ``deleted`` versions by :data:`EXPIRY_ACTOR`; a memory rewritten
        since it was seen (another version, or no longer expired) is left alone. The others
        are reported only."""
        report = report or SweepReport()
        at = format_time(now or datetime.now(UTC))
        todo = [s for s in seen if s["expiry"] == "on"]
        report.reported += [s for s in seen if s["expiry"] != "on"]
        if not todo:
            return report
        written: list[str] = []
        # Every store of these memories, known up front (the backend takes them in order).
        scopes = sorted({store_scope(s["memory_store_id"]) for s in todo})
        with self.core.write(*scopes) as c:
            stamp = utc_now()
            # The stores as they are now: one archived, or turned to report, since the
            # memories were seen keeps them.
            still_on = {sid for sid in {s["memory_store_id"] for s in todo}
                        if self._mode_in(c, sid) == "on"}
            for s in todo:
                row = c.execute("SELECT * FROM memories WHERE id = ?",
                                (s["memory_id"],)).fetchone()
                if (row is None or row["version_id"] != s["memory_version_id"]
                        or row["expires_at"] is None or row["expires_at"] > at
                        or row["store_id"] not in still_on):
                    report.skipped.append(s)
                    continue
                written.append(self.memories.delete_row_in(c, row, EXPIRY_ACTOR, stamp)[1])
                log.info("expired %s %s in %s", row["id"], row["path"], row["store_id"])
                report.deleted.append(s)
            if written:
                report.reverts.append(self._record(c, "expiry", "expiry", written, stamp))
        return report

    def sweep(self, store_id: str | None = None, *, dry_run: bool = False,
              now: datetime | None = None, batch: int = SWEEP_BATCH) -> dict[str, Any]:
        """Delete every expired memory of ``store_id`` (or of every store) whose store's
        expiry is ``on``, :data:`SWEEP_BATCH` per transaction; report the rest. With
        ``dry_run``, report what would go and delete nothing. Returns
        :meth:`SweepReport.to_dict` (``memfs_expiry_sweep``, what the API sends).

        :raises NotFound: an unknown ``store_id``.
        """
        if store_id is not None:
            self.stores.get(store_id)
        at = now or datetime.now(UTC)
        report = SweepReport(dry_run=dry_run)
        on = []
        # Store by store: one that only reports is read once (its expired memories stay, and a
        # loop over them would read them again at every batch).
        for sid, mode in self._expiring_stores(store_id, at).items():
            if mode == "on" and not dry_run:
                on.append(sid)
            else:
                everything = self.expired(sid, now=at, limit=10_000_000)
                (report.deleted if mode == "on" else report.reported).extend(everything)
        for sid in on:
            left: set[str] = set()  # seen, and left alone: not read again this sweep
            while True:
                seen = [s for s in self.expired(sid, now=at, limit=batch + len(left))
                        if s["memory_id"] not in left][:batch]
                if not seen:
                    break
                deleted = len(report.deleted)
                self.delete_expired(seen, now=at, report=report)
                gone = {s["memory_id"] for s in report.deleted[deleted:]}
                left.update(s["memory_id"] for s in seen if s["memory_id"] not in gone)
        return report.to_dict()

    def _mode_in(self, c: Connection, store_id: str) -> str | None:
        """A live store's expiry mode, read in ``c`` (None: archived or gone)."""
        row = c.execute("SELECT metadata, expiry, archived_at FROM stores WHERE id = ?",
                        (store_id,)).fetchone()
        if row is None or row["archived_at"] is not None:
            return None
        return expiry_mode(json.loads(row["metadata"]), row["expiry"])

    def _expiring_stores(self, store_id: str | None, at: datetime) -> dict[str, str]:
        """The live stores (``store_id``, or any) holding an expired memory, with their
        expiry mode (``on`` or ``report``)."""
        sql = ("SELECT DISTINCT s.id, s.metadata, s.expiry FROM memories m JOIN stores s ON "
               "s.id = m.store_id WHERE m.expires_at IS NOT NULL AND m.expires_at <= ? "
               "AND s.archived_at IS NULL")
        params: list[Any] = [format_time(at)]
        if store_id is not None:
            sql += " AND m.store_id = ?"
            params.append(store_id)
        return {r["id"]: expiry_mode(json.loads(r["metadata"]), r["expiry"])
                for r in self.core.all(sql + " ORDER BY s.id", params)}

    # -- a type cleared ----------------------------------------------------------------------

    def clear_type(self, store_id: str, type_: str, *, actor: Actor | None,
                   dry_run: bool = False) -> dict[str, Any]:
        """Delete every memory of type ``type_`` in ``store_id``, in one transaction, as
        ``deleted`` versions by ``actor``; recorded as a revert target, so that ``memfs session
        revert`` of the returned ``revert_id`` brings them all back.

        :raises NotFound, StoreArchived: :raises InvalidRequest: not one of the store's types.
        """
        if not isinstance(type_, str) or not type_:
            raise InvalidRequest("type must be one of the store's types")
        with self.core.write(store_scope(store_id)) as c:
            store = self.core.writable_store_in(c, store_id)
            types = registry(store["metadata"])
            if types.named(type_) is None:
                known = ", ".join(t.name for t in types.types) or "none: its types are off"
                raise InvalidRequest(f"{type_!r} is not a type of {store_id} ({known})")
            rows = c.execute("SELECT * FROM memories WHERE store_id = ? AND mtype = ? "
                             "ORDER BY path", (store_id, type_)).fetchall()
            paths = [r["path"] for r in rows]
            if dry_run or not rows:
                return {"type": "memfs_type_cleared", "memory_store_id": store_id,
                        "memory_type": type_, "deleted": paths, "revert_id": None,
                        "dry_run": dry_run}
            now = utc_now()
            written = [self.memories.delete_row_in(c, r, actor, now)[1] for r in rows]
            revert_id = self._record(c, "clear", store_id, written, now, actor)
        return {"type": "memfs_type_cleared", "memory_store_id": store_id,
                "memory_type": type_, "deleted": paths, "revert_id": revert_id,
                "dry_run": False}

    # -- the index of memories written before it ---------------------------------------------

    def reindex_pending(self, *, batch: int = 500) -> int:
        """Derive what the memories written before typed memories say about themselves
        (``meta_rev`` NULL), a store at a time in bounded transactions. Cheap when none is
        (a partial index): every Store runs it when it opens a database."""
        n = 0
        while True:
            row = self.core.one("SELECT store_id FROM memories WHERE meta_rev IS NULL LIMIT 1")
            if row is None:
                return n
            with self.core.write(store_scope(row["store_id"])) as c:
                n += self.stores.reindex_in(c, row["store_id"], only_pending=True, limit=batch)

    # -- helpers -----------------------------------------------------------------------------

    def _record(self, c: Connection, kind: str, target: str, version_ids: list[str], now: str,
                actor: Actor | None = EXPIRY_ACTOR) -> str:
        """Record versions written together as a revert target (``memfs session revert``)."""
        from .revert import REVERT_PREFIX

        revert_id = new_id(REVERT_PREFIX)
        c.execute(
            "INSERT INTO reverts (id, target_type, target_id, forced, created_at, "
            "created_by_type, created_by_id, version_ids) VALUES (?, ?, ?, 0, ?, ?, ?, ?)",
            (revert_id, kind, target, now, actor.type if actor else None,
             actor.id if actor else None, json.dumps(version_ids)),
        )
        return revert_id
