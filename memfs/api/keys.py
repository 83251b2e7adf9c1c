"""API keys (issue 22; memfs extensions, for admin keys): make one, list them, show one,
revoke one. An admin key manages its own workspace's keys; the server's own keys (the
operator's) may name another workspace."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import errors

if TYPE_CHECKING:
    from .call import Call


def _workspace(c: Call, asked: Any) -> str:
    """The workspace a call is about: the key's own, or (a server key only) the one asked."""
    if asked is None or asked == c.workspace:
        return c.workspace
    if not c.grant.server:
        raise errors.Forbidden(f"an admin key manages the keys of its own workspace "
                               f"({c.workspace}) only")
    if not isinstance(asked, str):
        raise errors.InvalidRequest("workspace_id must be a string")
    return asked


async def create_key(c: Call) -> Any:
    b = c.body
    return await c.run(c.store.keys.create, b["name"],
                       workspace=_workspace(c, b.get("workspace_id")),
                       role=b.get("role") or "read_write",
                       store_ids=b.get("memory_store_ids"), expires_in=b.get("expires_in"),
                       created_by=c.actor)


async def list_keys(c: Call) -> Any:
    keys = await c.run(c.store.keys.list,
                       workspace=_workspace(c, c.q.text("workspace_id")))
    return {"data": [k.to_dict() for k in keys]}


async def retrieve_key(c: Call) -> Any:
    return await c.run(c.store.keys.get, c.p["key_id"],
                       workspace=None if c.grant.server else c.workspace)


async def revoke_key(c: Call) -> Any:
    return await c.run(c.store.keys.revoke, c.p["key_id"],
                       workspace=None if c.grant.server else c.workspace)
