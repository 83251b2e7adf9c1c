"""The typed-memory endpoints of the HTTP API (SPEC §8, issue 41; memfs extensions that
:mod:`memfs.api.routes` routes):

- ``GET /v1/memory_stores/{id}/memfs/describe``: what the store holds, by type, directory and
  tag, what expires soon or has expired (:meth:`memfs.store.Store.typed.describe`), as a
  ``memfs_store_description``. Read access is enough: an agent may look before it searches;
- ``POST /v1/memory_stores/{id}/memfs/expire`` ``{"dry_run"}``: delete the store's expired
  memories as versions by the expiry actor (:meth:`memfs.store.Store.typed.sweep`), as a
  ``memfs_expiry_sweep``. A person's action: no session token nor store-scoped key may (its
  route's ``token`` is empty);
- ``POST /v1/memory_stores/{id}/memfs/clear_type`` ``{"memory_type", "dry_run"}``: delete every
  memory of a type in one transaction, undoable as a revert
  (:meth:`memfs.store.Store.typed.clear_type`), as a ``memfs_type_cleared``, attributed to the
  caller (a session token with read_write on the store: to its session).

And the listing's filters, ``memfs_type`` and ``memfs_tag`` (:data:`LIST_FILTERS`), which
``memories.list`` reads. Every rule about the values is the store's; the answers are the
store's dicts as they are, so that a Client (:mod:`memfs.client`) hands the CLI the same
objects a local Store does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .auth import writer
from .spec import boolean, string

if TYPE_CHECKING:
    from .call import Call

__all__ = ["CLEAR_BODY", "EXPIRE_BODY", "LIST_FILTERS", "clear_type", "describe_store",
           "expire_store"]

#: The most characters of a type or tag a listing filters by (the store's check).
MAX_FILTER_CHARS = 64

#: The query parameters of ``memories.list`` that filter by what memories say of themselves.
LIST_FILTERS = (
    string("memfs_type", max_length=MAX_FILTER_CHARS,
           description="memfs extension: only the memories of this type (with depth 0)"),
    string("memfs_tag", max_length=MAX_FILTER_CHARS,
           description="memfs extension: only the memories with this tag (with depth 0)"),
)

_DRY_RUN = boolean("dry_run", description="only say what would be deleted")
EXPIRE_BODY = (_DRY_RUN,)
CLEAR_BODY = (string("memory_type!", description="one of the store's types"), _DRY_RUN)

DESCRIBE_SUMMARY = (
    "what the store holds: its live memories counted by type, top directory and tag, those "
    "that expire within 7 days or have expired, the oldest and newest change, the memories "
    "with front-matter warnings, its types and its expiry mode (on or report)")
EXPIRE_SUMMARY = (
    "delete the store's expired memories, each as a deleted version by the expiry actor "
    "(service_account_actor svac_memfs_expiry), in bounded transactions, each undoable as a "
    "revert (reverts); a store whose expiry is report only reports them; dry_run: the plan "
    "only. Not for a session token: expiry is a person's action")
CLEAR_SUMMARY = (
    "delete every memory of a type, in one transaction, attributed to the caller and "
    "undoable as a revert (revert_id); dry_run: the paths only")


async def describe_store(c: Call) -> Any:
    return await c.run(c.store.typed.describe, c.p["memory_store_id"])


async def expire_store(c: Call) -> Any:
    # Not in the group commit: a sweep commits its own bounded transactions, one by one, so
    # that it never holds the write lock for a whole store's expired memories at once.
    return await c.run(c.store.typed.sweep, c.p["memory_store_id"],
                       dry_run=c.body.get("dry_run") is True)


async def clear_type(c: Call) -> Any:
    b = c.body
    return await c.answer(lambda done: done, c.store.typed.clear_type, c.p["memory_store_id"],
                          b["memory_type"], actor=await writer(c),
                          dry_run=b.get("dry_run") is True, scopes=c.store_scopes())
