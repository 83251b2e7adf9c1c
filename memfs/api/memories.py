"""Memories (API.md §2): create, retrieve, update, list, delete."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from .. import errors
from .auth import writer
from .call import requested_view, shown

if TYPE_CHECKING:
    from .call import Call


#: Pages of ``memories.list`` (basic view) up to this many read on the event loop
#: (:meth:`Call.read`); longer ones in a worker thread.
SHORT_PAGE = 100


async def create_memory(c: Call) -> Any:
    view = requested_view(c, "basic")
    return await c.answer(
        partial(shown, view=view), c.store.memories.create, c.p["memory_store_id"],
        c.body["path"], c.body["content"], actor=await writer(c), scopes=c.store_scopes(),
    )


async def retrieve_memory(c: Call) -> Any:
    view = requested_view(c, "full")
    return await c.read(c.store.memories.get, c.p["memory_store_id"], c.p["memory_id"], view=view)


def _precondition(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") != "content_sha256":
        raise errors.InvalidRequest(
            "precondition must be {'type': 'content_sha256', 'content_sha256': '<hex>'}"
        )
    sha = value.get("content_sha256")
    if not isinstance(sha, str):
        raise errors.InvalidRequest("precondition.content_sha256 is required")
    return sha


async def update_memory(c: Call) -> Any:
    view = requested_view(c, "basic")
    b = c.body
    return await c.answer(
        partial(shown, view=view),
        c.store.memories.update,
        c.p["memory_store_id"],
        c.p["memory_id"],
        content=b.get("content"),
        path=b.get("path"),
        precondition_sha256=_precondition(b.get("precondition")),
        actor=await writer(c),
        scopes=c.store_scopes(),
    )


async def list_memories(c: Call) -> Any:
    q = c.q
    limit, view = q.integer("limit", 20), requested_view(c, "basic")
    # A short page of the basic view is a quick read: on the loop; a long one in a thread.
    short = view == "basic" and limit is not None and limit <= SHORT_PAGE
    return await (c.read if short else c.run)(
        c.store.memories.list,
        c.p["memory_store_id"],
        path_prefix=q.text("path_prefix"),
        depth=q.integer("depth", 0),
        limit=limit,
        page=q.text("page"),
        view=view,
        memory_type=q.text("memfs_type"),
        tag=q.text("memfs_tag"),
    )


async def delete_memory(c: Call) -> Any:
    gone = {"id": c.p["memory_id"], "type": "memory_deleted"}
    return await c.answer(
        lambda _: gone,
        c.store.memories.delete,
        c.p["memory_store_id"],
        c.p["memory_id"],
        expected_sha256=c.q.text("expected_content_sha256"),
        actor=await writer(c),
        scopes=c.store_scopes(),
    )
