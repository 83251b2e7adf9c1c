"""Sessions (API.md §4): create, retrieve, update, list, delete, archive; their resources;
their events (list, send, stream); and the memfs extensions on a session (status, revert,
tokens)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import errors
from ..rules import DEFAULT_AROUND_CONTEXT, MAX_EVENTS_PAGE
from ..store import TOOL_EVENT_TYPES, UNSET
from ..store.events import check_context
from .auth import SESSION_HEADER, acting_session
from .streams import sse_response

if TYPE_CHECKING:
    from .call import Call


#: ``sessions.events.list`` accepts up to this ``limit`` and clamps above it (API.md §4.1:
#: the SDK's session runner asks for 1,000).
EVENTS_MAX_LIMIT = MAX_EVENTS_PAGE


#: ``initial_events`` of sessions.create (API.md §4.1): at most 50, of these types.
INITIAL_EVENT_TYPES = ("user.message", "user.define_outcome")
MAX_INITIAL_EVENTS = 50


def _refuse_features(body: Mapping[str, Any]) -> None:
    if body.get("vault_ids") not in (None, []):
        raise errors.InvalidRequest("vaults are not supported by memfs")
    if body.get("budget") is not None:
        raise errors.InvalidRequest("session budgets are not supported by memfs")


def _initial_events(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_INITIAL_EVENTS:
        raise errors.InvalidRequest(
            f"initial_events must be a list of at most {MAX_INITIAL_EVENTS} events"
        )
    for e in value:
        if not isinstance(e, dict) or e.get("type") not in INITIAL_EVENT_TYPES:
            raise errors.InvalidRequest(
                "initial_events may hold only " + " and ".join(INITIAL_EVENT_TYPES) + " events"
            )
    return value


def _own_sessions(c: Call) -> list[str] | None:
    """The only sessions a scoped credential sees: a session token its own, a store-scoped key
    none (None: every session of the workspace)."""
    if c.grant.access is None:
        return None
    return [] if c.grant.session_id is None else [c.grant.session_id]


async def create_session(c: Call) -> Any:
    b = c.body
    _refuse_features(b)
    initial = _initial_events(b.get("initial_events"))
    agent = b.get("agent")
    snapshot = (None if agent is None else
                await c.run(c.store.agents.snapshot, agent, workspace=c.workspace))
    # memfs extension: the launcher of a remote session (memfs run --url) mounts under its
    # own root, and the resources' mount_path must say where.
    root = b.get("memfs_mount_root")
    session = await c.run(
        c.store.sessions.create,
        b.get("resources") or [],
        agent=snapshot,
        environment_id=b.get("environment_id"),
        metadata=b.get("metadata"),
        title=b.get("title"),
        workspace=c.workspace,
        # The stored key that creates it may act as it (SESSION_HEADER): its launcher.
        created_by_key=None if c.grant.server else c.grant.key_id,
        **({} if root is None else {"root": root}),
    )
    if initial:
        try:
            await c.run(c.store.events.send, session.id, initial)
        except errors.MemfsError:
            # All or nothing: a session whose initial events were refused is not kept.
            await c.run(c.store.sessions.delete, session.id)
            raise
    return session


async def set_session_status(c: Call) -> Any:
    """memfs extension: the launcher of a remote session reports it running or terminated."""
    return await c.run(c.store.sessions.set_status, c.p["session_id"], c.body["status"])


async def revert_session(c: Call) -> Any:
    """memfs extension: undo a session, or an earlier revert (its ``memrevert_`` id in place
    of the session id): Store.undo.revert, attributed to the caller's key (README "Undo a
    session")."""
    if c.request.query_params:
        # Ignoring ?dry_run=true would revert for real.
        raise errors.InvalidRequest("this endpoint takes no query parameters: send dry_run and "
                                    "force in the JSON body")
    b = c.body
    return await c.run(c.store.undo.revert, c.p["session_id"], actor=c.actor,
                       dry_run=b.get("dry_run") or False, force=b.get("force") or False)


async def create_session_token(c: Call) -> Any:
    """memfs extension: a session token. One minted with a stored key is tied to that key
    (refused once it is, expiring no later): a server key's is not."""
    ttl = c.body.get("ttl_seconds")
    return await c.run(c.store.sessions.create_token, c.p["session_id"], ttl_seconds=ttl,
                       key_id=None if c.grant.server else c.grant.key_id)


async def retrieve_session(c: Call) -> Any:
    return await c.run(c.store.sessions.get, c.p["session_id"])


async def update_session(c: Call) -> Any:
    b = c.body
    _refuse_features(b)
    if b.get("agent") is not None:
        raise errors.InvalidRequest("a session's agent cannot be changed in memfs")
    title = b.get("title")
    return await c.run(
        c.store.sessions.update,
        c.p["session_id"],
        metadata=b.get("metadata"),
        title=UNSET if title is None else title,
    )


async def list_sessions(c: Call) -> Any:
    q = c.q
    for name in ("agent_id", "agent_version", "deployment_id"):
        if q.text(name) is not None:
            raise errors.InvalidRequest(f"memfs cannot filter sessions by {name}")
    page = await c.run(
        c.store.sessions.list,
        memory_store_id=q.text("memory_store_id"),
        statuses=q.texts("statuses"),
        include_archived=q.flag("include_archived", False),
        order=q.text("order") or "desc",
        created_at_gt=q.text("created_at[gt]"),
        created_at_gte=q.text("created_at[gte]"),
        created_at_lt=q.text("created_at[lt]"),
        created_at_lte=q.text("created_at[lte]"),
        limit=q.integer("limit", 20),
        page=q.text("page"),
        ids=_own_sessions(c),
        workspace=c.workspace,
    )
    return {**page.to_dict(), "prev_page": page.prev_page}


async def delete_session(c: Call) -> Any:
    await c.run(c.store.sessions.delete, c.p["session_id"])
    return {"id": c.p["session_id"], "type": "session_deleted"}


async def archive_session(c: Call) -> Any:
    return await c.run(c.store.sessions.archive, c.p["session_id"])


async def list_session_resources(c: Call) -> Any:
    return await c.run(
        c.store.sessions.list_resources,
        c.p["session_id"],
        limit=c.q.integer("limit", None),
        page=c.q.text("page"),
    )


async def retrieve_session_resource(c: Call) -> Any:
    return await c.run(c.store.sessions.get_resource, c.p["session_id"], c.p["resource_id"])


async def delete_session_resource(c: Call) -> Any:
    await c.run(c.store.sessions.delete_resource, c.p["session_id"], c.p["resource_id"])


async def add_session_resource(c: Call) -> Any:
    await c.run(c.store.sessions.get, c.p["session_id"])
    raise errors.InvalidRequest(
        "memfs sessions hold only the memory stores attached at creation; "
        "file resources are not supported"
    )


async def update_session_resource(c: Call) -> Any:
    await c.run(c.store.sessions.get_resource, c.p["session_id"], c.p["resource_id"])
    raise errors.InvalidRequest("memory store resources cannot be updated")


async def list_session_events(c: Call) -> Any:
    q = c.q
    around = q.text("memfs_around")
    if around is not None:
        return await _events_around(c, around)
    context = q.integer("memfs_context", None)
    if context is not None:
        check_context(context)  # what it would be with memfs_around: refused the same
    limit = q.integer("limit", 20)
    return await c.run(
        c.store.events.list,
        c.p["session_id"],
        types=q.texts("types"),
        order=q.text("order") or "asc",
        created_at_gt=q.text("created_at[gt]"),
        created_at_gte=q.text("created_at[gte]"),
        created_at_lt=q.text("created_at[lt]"),
        created_at_lte=q.text("created_at[lte]"),
        limit=min(limit, EVENTS_MAX_LIMIT) if limit is not None else 20,
        page=q.text("page"),
    )


async def _events_around(c: Call, event_id: str) -> Any:
    """memfs extension: the event ``memfs_around`` with ``memfs_context`` events before and
    after it (Store.events.around), as one page. A listing's own order, page and times do not
    apply to it: given with it, a 400 rather than an answer that ignores them."""
    q = c.q
    for name in ("order", "page", "limit", "created_at[gt]", "created_at[gte]",
                 "created_at[lt]", "created_at[lte]"):
        if c.request.query_params.get(name) is not None:
            raise errors.InvalidRequest(f"{name} does not apply with memfs_around (the events "
                                        "around one event, in time order)")
    context = q.integer("memfs_context", DEFAULT_AROUND_CONTEXT)
    events = await c.run(c.store.events.around, c.p["session_id"], event_id,
                         context=context, types=q.texts("types"))
    return {"data": [e.to_dict() for e in events], "next_page": None}


async def send_session_events(c: Call) -> Any:
    session_id = c.p["session_id"]
    events = c.body["events"]
    store_id = c.body.get("memory_store_id")
    if acting_session(c) == session_id and _all_tool_events(events):
        # A mount acting as this session (memfs extension): its tool events, ids kept.
        recorded = await c.run(c.store.events.add_tool_events, session_id, events,
                               store_id=store_id)
    else:
        if store_id is not None:
            raise errors.InvalidRequest(
                f"memory_store_id is accepted only with tool events sent by a mount acting as "
                f"this session ({SESSION_HEADER}: {session_id})"
            )
        recorded = await c.run(c.store.events.send, session_id, events,
                               as_session=acting_session(c))
    return {"data": [e.to_dict() for e in recorded]}


def _all_tool_events(events: Any) -> bool:
    return isinstance(events, list) and bool(events) and all(
        isinstance(e, dict) and e.get("type") in TOOL_EVENT_TYPES for e in events
    )


async def stream_session_events(c: Call) -> Any:
    session_id = c.p["session_id"]
    await c.run(c.store.sessions.get, session_id)
    start = await c.run(c.store.events.last_seq, session_id)
    return sse_response(c, c.events.stream(session_id, start))
