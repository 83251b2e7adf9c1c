"""History: a store's versions and a memory's versions (who, when, what), a version's page (its
content and its diff against the previous version of the same memory), restore a version,
redact a version.

Every version comes from :meth:`Store.versions.list` / :meth:`Store.versions.get`; a restore is
:meth:`Store.versions.restore` (a memory deleted since comes back under its own id at its path,
refused if another memory holds that path now) and a redaction is
:meth:`Store.versions.redact`, both attributed to the signed-in user. Who wrote a version is
shown with the name of the key behind it (:meth:`Console.key_names`). The store
keeps the rules (the head of a live memory cannot be redacted); the Console shows its refusals.

The store's version model has three operations (created, modified, deleted); a rename is a
``modified`` version whose path differs from the previous version's, which is how these pages
tell it apart.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from .. import errors
from ..models import Memory, MemoryVersion, Page
from .diff import MODES, changed, diff_html
from .web import Console, form, page, redirect

PAGE_SIZE = 50
OPERATIONS = ("created", "modified", "deleted")
#: The actor filter: an id's prefix -> the store's filter argument.
ACTOR_FILTERS = (("sesn_", "session_id"), ("apikey_", "api_key_id"), ("user_", "user_id"))


@dataclass(frozen=True)
class Row:
    """A version as a history row: the version, what it did (``created``, ``modified``,
    ``renamed``, ``modified, renamed``, ``deleted``) and the path it had before a rename."""

    version: MemoryVersion
    label: str
    old_path: str | None


def label(v: MemoryVersion, prev: MemoryVersion | None) -> tuple[str, str | None]:
    """What a version did, given the previous version of its memory (None: unknown or none)."""
    if v.operation != "modified" or prev is None or prev.redacted_at or v.redacted_at:
        return v.operation, None
    renamed = prev.path is not None and v.path is not None and prev.path != v.path
    if not renamed:
        return "modified", None
    if prev.content_sha256 == v.content_sha256:
        return "renamed", prev.path
    return "modified, renamed", prev.path


def actor_filter(text: str) -> dict[str, str]:
    """The store's filter for an actor id typed in the history's form."""
    text = text.strip()
    if not text:
        return {}
    for prefix, arg in ACTOR_FILTERS:
        if text.startswith(prefix):
            return {arg: text}
    return {"service_account_id": text}


async def _previous(console: Console, store_id: str, v: MemoryVersion) -> MemoryVersion | None:
    """The version of the same memory just before ``v`` (basic view), None for the first
    one still kept."""
    store = console.store
    cursor, seen = None, False
    while True:
        listing: Page[MemoryVersion] = await console.run(
            store.versions.list, store_id, memory_id=v.memory_id,
            created_at_lte=v.created_at, limit=PAGE_SIZE, page=cursor)
        for x in listing.data:
            if seen:
                return x
            seen = x.id == v.id
        if listing.next_page is None:
            return None
        cursor = listing.next_page


async def _rows(console: Console, store_id: str, versions: list[MemoryVersion]) -> list[Row]:
    """History rows; the previous version of each modified one is the next row of its
    memory on the page, else looked up."""
    out = []
    for i, v in enumerate(versions):
        prev = None
        if v.operation == "modified":
            prev = next((x for x in versions[i + 1:] if x.memory_id == v.memory_id), None)
            if prev is None:
                prev = await _previous(console, store_id, v)
        out.append(Row(v, *label(v, prev)))
    return out


async def _history(console: Console, request: Request, memory_id: str | None) -> Response:
    store = console.store
    sid = request.path_params["store_id"]
    q = request.query_params
    filters = {"operation": q.get("operation", ""), "actor": q.get("actor", "").strip()}
    args: dict[str, str] = actor_filter(filters["actor"])
    if filters["operation"]:
        args["operation"] = filters["operation"]
    current = await console.run(store.stores.get, sid)
    cursor = q.get("page") or None
    listing = await console.run(store.versions.list, sid, memory_id=memory_id,
                                limit=PAGE_SIZE, page=cursor, **args)
    memory = None
    if memory_id is not None:
        if not listing.data and cursor is None and not args:
            raise errors.NotFound(f"memory {memory_id!r} has no history in {sid}")
        memory = await _live(console, memory_id, sid)
    more = None
    if listing.next_page:
        more = relative(request.url.include_query_params(page=listing.next_page))
    names = await console.key_names(request.state.user,
                                    [v.created_by for v in listing.data])
    return console.render(
        request, "history.html", store=current, memory_id=memory_id, memory=memory,
        rows=await _rows(console, sid, listing.data), filters=filters, operations=OPERATIONS,
        names=names,
        more=more, first=relative(request.url.remove_query_params("page")) if cursor else None)


async def _live(console: Console, memory_id: str, store_id: str) -> Memory | None:
    store = console.store
    try:
        memory: Memory = await console.run(store.memories.get, store_id, memory_id,
                                           view="basic")
        return memory
    except errors.NotFound:
        return None


async def store_history(console: Console, request: Request) -> Response:
    return await _history(console, request, None)


async def memory_history(console: Console, request: Request) -> Response:
    return await _history(console, request, request.path_params["memory_id"])


async def _version_page(console: Console, request: Request, status: int = 200,
                        error: str | None = None, typed: str = "", at: str = "redact",
                        ) -> Response:
    """The version's page; ``error`` is shown next to the form ``at`` (restore, redact)."""
    store = console.store
    sid, vid = request.path_params["store_id"], request.path_params["version_id"]
    current = await console.run(store.stores.get, sid)
    v = await console.run(store.versions.get, sid, vid)
    prev_basic = await _previous(console, sid, v)
    prev = await console.run(store.versions.get, sid, prev_basic.id) if prev_basic else None
    mode = request.query_params.get("diff", "unified")
    if mode not in MODES:
        mode = "unified"
    diff = counts = None
    if not v.redacted_at and not (prev and prev.redacted_at):
        old = prev.content if prev else None
        new = v.content if v.operation != "deleted" else None
        diff, counts = diff_html(old, new, mode=mode), changed(old, new)
    memory = await _live(console, v.memory_id, sid)
    what, old_path = label(v, prev)
    names = await console.key_names(request.state.user, [v.created_by, v.redacted_by])
    return console.render(
        request, "version.html", status=status, store=current, v=v, prev=prev, names=names,
        what=what, old_path=old_path, diff=diff, counts=counts, mode=mode,
        memory=memory, head=memory is not None and memory.memory_version_id == v.id,
        error=error, error_at=at, typed=typed,
        toggle=relative(request.url.include_query_params(
            diff="unified" if mode == "split" else "split")))


async def version(console: Console, request: Request) -> Response:
    return await _version_page(console, request)


async def version_restore(console: Console, request: Request) -> Response:
    store = console.store
    sid, vid = request.path_params["store_id"], request.path_params["version_id"]
    v = await console.run(store.versions.get, sid, vid, view="basic")
    back = _history_url(sid, v.memory_id)
    memory = await _live(console, v.memory_id, sid)
    try:  # deleted since: back under its own id at its path, never over another memory
        m = await console.run(store.versions.restore, sid, vid,
                              actor=request.state.user.actor)
    except errors.Conflict as e:
        return await _version_page(console, request, console.error_status(e),
                                   f"{e.message}: restore it there from that "
                                   "memory's page, or move that memory first",
                                   at="restore")
    except errors.InvalidRequest as e:  # redacted, a deletion, an archived store, …
        return await _version_page(console, request, console.error_status(e), e.message,
                                   at="restore")
    if m.memory_version_id == (memory.memory_version_id if memory else None):
        return redirect(back, f"{m.path} already has this content: nothing to restore")
    return redirect(back, f"restored {m.path} to the content of {v.id} "
                          f"(new version {m.memory_version_id})")


async def version_redact(console: Console, request: Request) -> Response:
    store = console.store
    sid, vid = request.path_params["store_id"], request.path_params["version_id"]
    typed = (await form(request)).get("confirm", "").strip()
    if typed.lower() != "redact":
        return await _version_page(console, request, 400, "type redact to confirm", typed)
    try:
        v = await console.run(store.versions.redact, sid, vid,
                              actor=request.state.user.actor)
    except errors.InvalidRequest as e:
        return await _version_page(console, request, console.error_status(e), e.message, typed)
    return redirect(_history_url(sid, v.memory_id),
                    f"redacted {v.id}: its path and content are erased")


def _history_url(store_id: str, memory_id: str) -> str:
    q = urllib.parse.quote
    return f"/stores/{q(store_id)}/memories/{q(memory_id)}/history"


def relative(url: URL) -> str:
    """A link to ``url`` on this site (path and query: behind a proxy the host may differ)."""
    return url.path + (f"?{url.query}" if url.query else "")


routes: list[BaseRoute] = [
    page("/stores/{store_id}/history", store_history),
    page("/stores/{store_id}/memories/{memory_id}/history", memory_history),
    page("/stores/{store_id}/versions/{version_id}", version),
    page("/stores/{store_id}/versions/{version_id}/restore", version_restore, ("POST",)),
    page("/stores/{store_id}/versions/{version_id}/redact", version_redact, ("POST",),
         right="manage"),
]
