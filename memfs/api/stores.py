"""Memory stores (API.md §2): create, retrieve, update, list, delete, archive."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .call import Call


async def create_memory_store(c: Call) -> Any:
    b = c.body
    return await c.run(c.store.stores.create, b["name"], b.get("description"), b.get("metadata"),
                       workspace=c.workspace)


async def retrieve_memory_store(c: Call) -> Any:
    return await c.run(c.store.stores.get, c.p["memory_store_id"])


async def update_memory_store(c: Call) -> Any:
    b = c.body
    return await c.run(
        c.store.stores.update,
        c.p["memory_store_id"],
        name=b.get("name"),
        description=b.get("description"),
        metadata=b.get("metadata"),
    )


async def list_memory_stores(c: Call) -> Any:
    q = c.q
    return await c.run(
        c.store.stores.list,
        include_archived=q.flag("include_archived", False),
        created_at_gte=q.text("created_at[gte]"),
        created_at_lte=q.text("created_at[lte]"),
        limit=q.integer("limit", 20),
        page=q.text("page"),
        ids=None if c.grant.access is None else list(c.grant.access),
        workspace=c.workspace,
    )


async def delete_memory_store(c: Call) -> Any:
    await c.run(c.store.stores.delete, c.p["memory_store_id"])
    return {"id": c.p["memory_store_id"], "type": "memory_store_deleted"}


async def archive_memory_store(c: Call) -> Any:
    return await c.run(c.store.stores.archive, c.p["memory_store_id"])
