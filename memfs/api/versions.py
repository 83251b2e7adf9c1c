"""Memory versions (API.md §2): list, retrieve, redact, and restore (a memfs extension)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .auth import writer
from .call import requested_view
from .mounts import with_seq

if TYPE_CHECKING:
    from .call import Call


async def list_memory_versions(c: Call) -> Any:
    q = c.q
    return await c.run(
        c.store.versions.list,
        c.p["memory_store_id"],
        memory_id=q.text("memory_id"),
        operation=q.text("operation"),
        session_id=q.text("session_id"),
        api_key_id=q.text("api_key_id"),
        service_account_id=q.text("service_account_id"),
        user_id=q.text("user_id"),
        created_at_gte=q.text("created_at[gte]"),
        created_at_lte=q.text("created_at[lte]"),
        limit=q.integer("limit", 20),
        page=q.text("page"),
        view=requested_view(c, "basic"),
    )


async def retrieve_memory_version(c: Call) -> Any:
    return await c.run(
        c.store.versions.get, c.p["memory_store_id"], c.p["memory_version_id"],
        view=requested_view(c, "full"),
    )


async def restore_memory_version(c: Call) -> Any:
    """Bring back a version's content (:meth:`Store.versions.restore`: a deleted memory comes
    back under its own id), so that a remote CLI restores as a local one does."""
    m = await c.write(c.store.versions.restore, c.p["memory_store_id"],
                      c.p["memory_version_id"], path=c.body.get("path"),
                      actor=await writer(c), scopes=c.store_scopes())
    return with_seq(m)


async def redact_memory_version(c: Call) -> Any:
    return await c.run(
        c.store.versions.redact, c.p["memory_store_id"], c.p["memory_version_id"], actor=c.actor
    )
