"""Memory stores: create, get, resolve, update, archive, delete, list."""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Collection
from datetime import datetime
from typing import Any

from ..backends import Connection
from ..backends.scopes import store_scope
from ..errors import InvalidRequest, NotFound, StoreArchived
from ..models import DEFAULT_WORKSPACE, MemoryStore, Page
from ..rules import (
    SESSIONS_VISIBILITY_KEY,
    check_limit,
    format_time,
    new_id,
    parse_time,
    patch_metadata,
    validate_description,
    validate_metadata,
    validate_name,
    validate_workspace,
)
from .base import Part
from .common import DERIVED_SET, UNSET, no_store, only_ids, only_workspace, utc_now
from .frontmatter import EXPIRY_KEY, TYPES_KEY, check_metadata, derive, registry
from .rows import store_from_row

log = logging.getLogger(__name__)


class Stores(Part):
    """The store's stores (a part of :class:`memfs.store.Store`)."""

    # -- memory stores -----------------------------------------------------------------------

    def create(
        self, name: str, description: str | None = None, metadata: dict[str, str] | None = None,
        *, workspace: str = DEFAULT_WORKSPACE,
    ) -> MemoryStore:
        """A new, empty store of ``workspace``. :raises InvalidRequest: bad values."""
        lim = self.limits
        workspace = validate_workspace(workspace)
        name = validate_name(name, lim)
        description = validate_description("" if description is None else description, lim)
        metadata = validate_metadata({} if metadata is None else metadata, lim)
        check_metadata(metadata)
        now = utc_now()
        store = MemoryStore(new_id("memstore"), name, description, metadata, now, now, None)
        # A new store: no rule spans stores (their names need not be unique), so only its own.
        with self.core.write(store_scope(store.id)) as c:
            # A new store deletes its expired memories (a store made before typed memories
            # only reports them: its ``expiry`` is 'report').
            c.execute(
                "INSERT INTO stores (id, name, description, metadata, created_at, updated_at, "
                "workspace_id, expiry) VALUES (?, ?, ?, ?, ?, ?, ?, 'on')",
                (store.id, name, description, json.dumps(metadata), now, now, workspace),
            )
        log.debug("created store %s (%s)", store.id, name)
        return store

    def get(self, store_id: str) -> MemoryStore:
        """:raises NotFound: unknown or deleted."""
        row = self.core.one("SELECT * FROM stores WHERE id = ?", (store_id,))
        if row is None:
            raise no_store(store_id)
        return store_from_row(row)

    def resolve(self, ref: str, *, among: Collection[str] | None = None,
                      workspace: str | None = None) -> MemoryStore:
        """A store by id, or else by exact name (the newest live store of that name wins over
        archived ones; two live stores with the name are ambiguous). ``among``: only these
        stores exist (a session token's attached stores); ``workspace``: only that
        workspace's (None: every store).

        :raises NotFound: no such store. :raises InvalidRequest: an ambiguous name.
        """

        def seen(r: Any) -> bool:
            return ((among is None or r["id"] in among)
                    and (workspace is None or r["workspace_id"] == workspace))

        row = self.core.one("SELECT * FROM stores WHERE id = ?", (ref,))
        if row is not None and seen(row):
            return store_from_row(row)
        rows = self.core.all(
            "SELECT * FROM stores WHERE name = ? ORDER BY archived_at IS NOT NULL, id DESC", (ref,)
        )
        rows = [r for r in rows if seen(r)]
        if not rows:
            raise NotFound(f"no memory store with id or name {ref!r}")
        live = [r for r in rows if r["archived_at"] is None]
        if len(live) > 1:
            ids = ", ".join(r["id"] for r in live)
            raise InvalidRequest(
                f"{len(live)} memory stores are named {ref!r} ({ids}): use an id, or rename "
                "all but one"
            )
        return store_from_row(rows[0])

    def namesakes(self, store_id: str) -> list[MemoryStore]:
        """The other live stores with this store's exact name, newest first (at most 100).
        Only stores of its workspace: names are a workspace's. Names need not be unique
        (the hosted API's rule), but a name two live stores share
        names neither of them (:meth:`resolve_store`): the CLI and Console say so when a
        store is created or renamed to a name in use.

        :raises NotFound: unknown store.
        """
        with self.core.read() as c:
            self.core.store_in(c, store_id)
            row = c.execute("SELECT name, workspace_id FROM stores WHERE id = ?",
                            (store_id,)).fetchone()
            rows = c.execute(
                "SELECT * FROM stores WHERE name = ? AND id != ? AND archived_at IS NULL "
                "AND workspace_id = ? ORDER BY id DESC LIMIT 100",
                (row["name"], store_id, row["workspace_id"]),
            ).fetchall()
        return [store_from_row(r) for r in rows]

    def update(
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
        with self.core.write(store_scope(store_id)) as c:
            store = self.core.store_in(c, store_id)
            if store.archived_at is not None:
                raise StoreArchived(f"memory store {store_id} is archived and cannot be updated")
            new_name = store.name if name in (UNSET, None) else validate_name(name, lim)
            new_desc = (
                store.description
                if description in (UNSET, None)
                else validate_description(description, lim)
            )
            new_meta = (
                store.metadata
                if metadata in (UNSET, None)
                else patch_metadata(store.metadata, metadata, lim)
            )
            if (new_name, new_desc, new_meta) == (store.name, store.description, store.metadata):
                return store
            # Only what changes: a value kept from before memfs read it never blocks a rename.
            check_metadata({k: v for k, v in new_meta.items()
                            if k in (TYPES_KEY, EXPIRY_KEY, SESSIONS_VISIBILITY_KEY)
                            and v != store.metadata.get(k)})
            now = utc_now()
            c.execute(
                "UPDATE stores SET name = ?, description = ?, metadata = ?, updated_at = ? "
                "WHERE id = ?",
                (new_name, new_desc, json.dumps(new_meta), now, store_id),
            )
            if new_meta.get(TYPES_KEY) != store.metadata.get(TYPES_KEY):
                # Other types: every memory's type, importance and expiry, again.
                self.reindex_in(c, store_id)
            self.core.change(c, store_id, "store")
        return self.get(store_id)

    def reindex_in(self, c: Connection, store_id: str, *, only_pending: bool = False,
                   limit: int | None = None) -> int:
        """Derive again what the memories of ``store_id`` say about themselves (SPEC §8), as
        of their last change, with the store's types now; ``only_pending``: only those never
        derived (``meta_rev`` NULL: there before the migration that added it). Returns how
        many were. Their versions and the change feed are untouched: the text is the same."""
        row = c.execute("SELECT metadata FROM stores WHERE id = ?", (store_id,)).fetchone()
        if row is None:
            return 0
        types = registry(row["metadata"])
        sql = ("SELECT id, path, content, updated_at FROM memories WHERE store_id = ?"
               + (" AND meta_rev IS NULL" if only_pending else "")
               + ("" if limit is None else f" LIMIT {int(limit)}"))
        rows = c.execute(sql, (store_id,)).fetchall()
        c.executemany(
            f"UPDATE memories SET {DERIVED_SET} WHERE id = ?",
            [(*derive(r["path"], r["content"], types, r["updated_at"]).columns(), r["id"])
             for r in rows],
        )
        return len(rows)

    def archive(self, store_id: str) -> MemoryStore:
        """Archive (idempotent: an archived store is returned unchanged)."""
        with self.core.write(store_scope(store_id)) as c:
            store = self.core.store_in(c, store_id)
            if store.archived_at is None:
                now = utc_now()
                c.execute(
                    "UPDATE stores SET archived_at = ?, updated_at = ? WHERE id = ?",
                    (now, now, store_id),
                )
                self.core.change(c, store_id, "store")
        return self.get(store_id)

    def delete(self, store_id: str) -> None:
        """Delete the store with every memory and version in it, permanently."""
        with self.core.write(store_scope(store_id)) as c:
            self.delete_in(c, store_id)

    def delete_in(self, c: Connection, store_id: str) -> None:
        self.core.store_in(c, store_id)
        c.execute("DELETE FROM memories WHERE store_id = ?", (store_id,))
        from ..recall.wordsqueue import forget_store

        forget_store(c, self.core.dialect, store_id)
        c.execute("DELETE FROM versions WHERE store_id = ?", (store_id,))
        c.execute("DELETE FROM changes WHERE store_id = ?", (store_id,))
        c.execute("INSERT INTO deleted_stores (id, workspace_id, deleted_at) "
                  "SELECT id, workspace_id, ? FROM stores WHERE id = ?", (utc_now(), store_id))
        c.execute("DELETE FROM stores WHERE id = ?", (store_id,))
        self.core.change(c, store_id, "store")

    def list(
        self,
        *,
        include_archived: bool = False,
        created_at_gte: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
        ids: Collection[str] | None = None,
        workspace: str | None = None,
    ) -> Page[MemoryStore]:
        """Stores, newest first (``created_at`` desc, then ``id`` desc); ``ids``: only these
        (a session token's attached stores); ``workspace``: only that workspace's."""
        limit = check_limit(limit, self.limits)
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        only_ids(where, params, ids)
        only_workspace(where, params, workspace)
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
        return self.core.newest_first("stores", filters, where, params, limit, page, store_from_row)
