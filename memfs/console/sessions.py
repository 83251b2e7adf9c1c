"""Sessions of the signed-in key's workspace (none for a store-scoped key, as in the API): the
list (status, title, the stores attached), and a session's timeline: every
event in order, each tool call (an ``agent.tool_use`` and its ``agent.tool_result``, SPEC §4)
as one row, a write linked to the version it produced, so a reviewer sees what an agent read
and wrote.

A tool event names the path as the agent saw it (below a resource's ``mount_path``) and, for a
write, the memory and version the store recorded with it (:func:`memfs.models.
complete_tool_results`); the store of a version is the resource whose mount path holds the file,
else the attached store that has the version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from .. import errors
from ..models import Event, Session
from .history import relative
from .web import Console, form, page

PAGE_SIZE = 50
EVENTS_PER_PAGE = 200
STATUSES = ("idle", "running", "rescheduling", "terminated")


@dataclass
class Item:
    """One row of a timeline: a tool call (``use`` and its ``result``, either may be missing
    at a page's edge) or another event (``event``). ``store_id`` is the store the call's file
    is in, when known."""

    use: Event | None = None
    result: Event | None = None
    event: Event | None = None
    store_id: str | None = None

    @property
    def first(self) -> Event:
        found = self.use or self.result or self.event
        assert found is not None
        return found

    @property
    def input(self) -> dict[str, Any]:
        return (self.use.body.get("input") or {}) if self.use else {}

    @property
    def ok(self) -> bool | None:
        return None if self.result is None else not self.result.body.get("is_error")

    @property
    def text(self) -> str:
        """The result's text (an error's message), or an event's text content."""
        shown = self.result or self.event
        body = shown.body if shown else {}
        content = body.get("content")
        if isinstance(content, list):
            return " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        if isinstance(content, str):
            return content
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("message", ""))
        return ""


def pair_events(events: list[Event]) -> list[Item]:
    """The events as timeline rows, in order: a tool_result joins its tool_use's row (a
    result whose use is not on this page gets a row of its own)."""
    items: list[Item] = []
    open_uses: dict[str, Item] = {}
    for e in events:
        if e.type == "agent.tool_use":
            item = Item(use=e)
            open_uses[e.id] = item
            items.append(item)
        elif e.type == "agent.tool_result":
            pending = open_uses.pop(str(e.body.get("tool_use_id", "")), None)
            if pending is not None and pending.result is None:
                pending.result = e
            else:
                items.append(Item(result=e))
        else:
            items.append(Item(event=e))
    return items


def store_of_path(session: Session, file_path: str) -> str | None:
    """The store whose mount path holds ``file_path`` (the longest that matches)."""
    best = None
    for r in session.resources:
        root = r.mount_path.rstrip("/")
        if (file_path == root or file_path.startswith(root + "/")) and (
                best is None or len(root) > len(best[0])):
            best = (root, r.memory_store_id)
    return best[1] if best else None


async def session_list(console: Console, request: Request) -> Response:
    store = console.store
    q = request.query_params
    user = request.state.user
    store_id = q.get("store") or None
    status = q.get("status") or None
    archived = q.get("archived") == "1"
    if store_id is not None:
        await console.check_store(user, store_id)
    # A store-scoped key sees no session (as in the API).
    listing = await console.run(
        store.sessions.list, memory_store_id=store_id,
        statuses=[status] if status else None, include_archived=archived,
        limit=PAGE_SIZE, page=q.get("page") or None,
        ids=None if user.stores is None else [], workspace=user.workspace)
    stores = (await console.run(store.stores.list, include_archived=True, limit=100,
                                ids=user.stores, workspace=user.workspace)).data
    filtered = None
    if store_id is not None:
        filtered = await console.run(store.stores.get, store_id)
    links = {}
    for key, cursor in (("next", listing.next_page), ("prev", listing.prev_page)):
        if cursor:
            links[key] = relative(request.url.include_query_params(page=cursor))
    return console.render(
        request, "sessions.html", sessions=listing.data, stores=stores, filtered=filtered,
        filters={"store": store_id or "", "status": status or "", "archived": archived},
        statuses=STATUSES, links=links)


async def _has_version(console: Console, store_id: str, version_id: str) -> bool:
    store = console.store
    try:
        await console.run(store.versions.get, store_id, version_id, view="basic")
    except errors.NotFound:
        return False
    return True


async def _locate(console: Console, session: Session, items: list[Item]) -> None:
    """Set the store of each tool call: by its path, else by its version."""
    for item in items:
        path = str(item.input.get("file_path", ""))
        item.store_id = store_of_path(session, path) if path else None
        vid = item.result.body.get("memory_version_id") if item.result else None
        if item.store_id is None and isinstance(vid, str):
            for r in session.resources:
                if await _has_version(console, r.memory_store_id, vid):
                    item.store_id = r.memory_store_id
                    break
        if item.store_id is None and item.result and len(session.resources) == 1:
            item.store_id = session.resources[0].memory_store_id


async def timeline(console: Console, request: Request) -> Response:
    store = console.store
    sid = request.path_params["session_id"]
    session = await console.run(store.sessions.get, sid)
    cursor = request.query_params.get("page") or None
    listing = await console.run(store.events.list, sid, limit=EVENTS_PER_PAGE,
                                page=cursor)
    items = pair_events(listing.data)
    await _locate(console, session, items)
    more = None
    if listing.next_page:
        more = relative(request.url.include_query_params(page=listing.next_page))
    return console.render(
        request, "session.html", session=session, items=items, more=more,
        first=relative(request.url.remove_query_params("page")) if cursor else None,
        names={r.memory_store_id: r.name for r in session.resources})


async def revert(console: Console, request: Request) -> Response:
    """Undo a session (or a revert: its memrevert_ id): GET shows the dry run's plan and
    conflicts with a confirm form; the POST performs it and shows the result."""
    store = console.store
    target = request.path_params["target"]
    done = request.method == "POST"
    if done:
        force = (await form(request)).get("force") == "1"
    else:
        force = request.query_params.get("force") == "1"
    result = await console.run(store.undo.revert, target, actor=request.state.user.actor,
                               dry_run=not done, force=force)
    user = request.state.user
    names = {s.id: s.name for s in (await console.run(
        store.stores.list, include_archived=True, limit=100,
        workspace=user.workspace)).data}
    keys = await console.key_names(user, [
        v.get("created_by") for c in result["conflicts"]
        for v in (c.get("reverted_version"), c.get("current_version")) if v])
    return console.render(request, "revert.html", r=result, names=names, force=force,
                          keys=keys)


routes: list[BaseRoute] = [
    page("/sessions", session_list),
    page("/sessions/{session_id}", timeline),
    page("/sessions/{target}/revert", revert, ("GET", "POST"), right="manage"),
]
