"""memfs extensions for remote mounts (README "Remote mounts"; ``x-memfs-extension`` in
OpenAPI): the filesystem's store calls, each one store transaction, and the store's change
feed (a page of it, or live through :class:`~memfs.api.streams.ChangeHub`)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from .. import errors
from ..models import Memory
from ..rules import MAX_CHANGES_PAGE, parse_int
from .auth import acting_session, writer
from .streams import change_frames, sse_response

if TYPE_CHECKING:
    from .call import Call


async def get_limits(c: Call) -> Any:
    return dataclasses.asdict(c.store.limits)


async def resolve_store(c: Call) -> Any:
    """A store by id or name, by the store's own rule (:meth:`Store.stores.resolve`), so that a
    remote CLI names stores exactly as a local one does."""
    return await c.run(c.store.stores.resolve, c.q.text("ref"),
                       among=None if c.grant.access is None else list(c.grant.access),
                       workspace=c.workspace)


async def store_namesakes(c: Call) -> Any:
    """The other live stores with this store's name (:meth:`Store.stores.namesakes`), so that a
    remote CLI warns of a name in use as a local one does."""
    found = await c.run(c.store.stores.namesakes, c.p["memory_store_id"])
    return {"data": [s.to_dict() for s in found]}


async def get_tree(c: Call) -> Any:
    sid = c.p["memory_store_id"]
    # The feed position first: a change racing the read is replayed, harmlessly.
    seq = await c.run(c.store.feed.last, sid)
    tree = await c.run(c.store.memories.tree, sid)
    return {"data": [m.to_dict() for m in tree], "last_seq": seq}


async def get_snapshot(c: Call) -> Any:
    """The store as it was at ``at`` (README "Time travel"), basic view: a time-travel mount
    reads each version in effect with ``memory_versions.retrieve``."""
    snap = await c.run(c.store.versions.snapshot, c.p["memory_store_id"], c.q.text("at"),
                       viewer=c.grant.session_id)
    return snap.to_dict()


async def get_stats(c: Call) -> Any:
    sid = c.p["memory_store_id"]
    count = await c.run(c.store.memories.count, sid)
    return {"memory_count": count, "last_seq": await c.run(c.store.feed.last, sid)}


async def check_can_create(c: Call) -> Any:
    await writer(c)
    await c.run(c.store.memories.check_can_create, c.p["memory_store_id"])
    return {"ok": True}


def with_seq(m: Memory) -> dict[str, Any]:
    """A memory written through a path extension, with the change-feed position of the write
    (``memfs_seq``): a remote mount orders the states it sees by it."""
    return {**m.to_dict(), "memfs_seq": m.seq}


async def write_path(c: Call) -> Any:
    b, actor = c.body, await writer(c)
    return await c.answer(with_seq, c.store.memories.write_path, c.p["memory_store_id"], b["path"],
                          b["content"], actor=actor, events=b.get("events"),
                          scopes=c.store_scopes(actor, b.get("events")))


async def delete_path(c: Call) -> Any:
    b, actor = c.body, await writer(c)
    return await c.answer(with_seq, c.store.memories.delete_path, c.p["memory_store_id"],
                          b["path"], actor=actor, events=b.get("events"),
                          scopes=c.store_scopes(actor, b.get("events")))


async def rename_path(c: Call) -> Any:
    b, actor = c.body, await writer(c)
    replace = b.get("replace")
    return await c.answer(with_seq, c.store.memories.rename_path, c.p["memory_store_id"],
                          b["old_path"], b["new_path"], actor=actor,
                          replace=replace is not False, events=b.get("events"),
                          scopes=c.store_scopes(actor, b.get("events")))


async def rename_prefix(c: Call) -> Any:
    b, actor = c.body, await writer(c)
    return await c.answer(_moved, c.store.memories.rename_prefix, c.p["memory_store_id"],
                          b["old_prefix"], b["new_prefix"], actor=actor,
                          events=b.get("events"), scopes=c.store_scopes(actor, b.get("events")))


async def delete_prefix(c: Call) -> Any:
    b, actor = c.body, await writer(c)
    return await c.answer(_moved, c.store.memories.delete_prefix, c.p["memory_store_id"],
                          b["prefix"], actor=actor, events=b.get("events"),
                          scopes=c.store_scopes(actor, b.get("events")))


def _moved(moved: list[Memory]) -> dict[str, Any]:
    """Memories a directory operation changed (moved or deleted), each with its ``memfs_seq``."""
    return {"data": [with_seq(m) for m in moved]}


async def record_store_events(c: Call) -> Any:
    recorded = await c.run(c.store.events.add_tool_events, acting_session(c), c.body["events"],
                           store_id=c.p["memory_store_id"])
    return {"data": [e.to_dict() for e in recorded]}


def _after(c: Call) -> int | None:
    after = c.q.integer("after", None)
    if after is None:
        last_id = c.request.headers.get("last-event-id")  # an SSE client reconnecting
        if last_id:
            after = parse_int(last_id)
            if after is None:
                raise errors.InvalidRequest(
                    f"Last-Event-ID must be a change seq, not {last_id[:40]!r}")
    if after is not None and after < 0:
        raise errors.InvalidRequest("after must be a change seq (>= 0)")
    return after


async def _feed_position(c: Call) -> int:
    """The store's newest change seq; :raises NotFound: a store that never existed (a deleted
    store still has the change that says so)."""
    sid = c.p["memory_store_id"]
    last: int = await c.run(c.store.feed.last, sid)
    if last == 0:
        await c.run(c.store.stores.get, sid)
    return last


async def list_changes(c: Call) -> Any:
    sid = c.p["memory_store_id"]
    limit = c.q.integer("limit", MAX_CHANGES_PAGE)
    if limit is None or not 0 <= limit <= MAX_CHANGES_PAGE:
        raise errors.InvalidRequest(f"limit must be between 0 and {MAX_CHANGES_PAGE}")
    last = await _feed_position(c)
    after = _after(c)
    if after is None:
        after = last
    if after > last:  # a position this feed never had (another database): start over
        return {"data": [], "last_seq": last, "reset": True}
    try:
        frames = await c.run(change_frames, c.store, sid, after, limit) if limit else []
    except errors.FeedGap:  # changes after that position were pruned: start over too
        return {"data": [], "last_seq": last, "reset": True}
    return {"data": frames, "last_seq": last, "reset": False}


async def stream_changes(c: Call) -> Any:
    last = await _feed_position(c)
    after = _after(c)
    return sse_response(
        c, c.hub.stream(c.p["memory_store_id"], last if after is None else after, last)
    )
