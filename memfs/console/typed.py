"""Typed memories in the Console (SPEC §8, issue 41): what a memory says about itself
(:attr:`~memfs.models.Memory.memfs_meta`: its type, tags, expiry, warnings) shown as chips and
a badge wherever memories are listed, a store's memories filtered by type and tag
(``/stores/{id}?type=&tag=``, :func:`filtered`), and the describe page
(``/stores/{id}/describe``: :meth:`Store.typed.describe`, each count a link to its memories).

All of it is read from the store: the Console derives nothing itself. Tags, descriptions and
warnings are what an agent wrote, so the templates only ever show them escaped.
"""

from __future__ import annotations

import urllib.parse
from datetime import UTC, datetime, timedelta
from typing import Any

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from .. import errors
from ..models import Memory, MemoryStore
from ..store.frontmatter import IMPORTANCE_LEVELS, registry
from .web import Console, page

#: The memories a filtered listing shows a page.
FILTER_PAGE = 50
#: Within this many days an expiry is "soon" (the badge stands out).
SOON_DAYS = 7
#: What the describe page calls memories without a type (its ``by_type`` key).
UNTYPED = "(none)"


def expiry_badge(expires_at: str | None, now: datetime | None = None) -> Markup:
    """A memory's expiry as a badge: ``expired``, ``expires today`` (within half a day), or
    ``expires in N days`` (rounded: a 7d memory just written says 7); the exact time in its
    title. Nothing for a memory that never expires."""
    if not expires_at:
        return Markup("")
    try:
        at = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    except ValueError:
        return Markup("")
    left = at - (now or datetime.now(UTC))
    days = round(left / timedelta(days=1))
    if left <= timedelta(0):
        text, kind = "expired", "expired"
    elif days == 0:
        text, kind = "expires today", "soon"
    else:
        text = f"expires in {days} day{'' if days == 1 else 's'}"
        kind = "soon" if days <= SOON_DAYS else "later"
    return Markup('<span class="tag expiry {}" title="expires at {}">{}</span>').format(
        kind, expires_at, text)


def importance_label(value: float | None) -> str:
    """``high (0.8)``, or the number alone when it is no named level."""
    if value is None:
        return ""
    for name, level in IMPORTANCE_LEVELS.items():
        if abs(level - value) < 1e-9:
            return f"{name} ({value:g})"
    return f"{value:g}"


def filter_url(store_id: str, **query: str | None) -> str:
    """The store page listing the memories of ``query`` (``type``, ``tag``, ``dir``,
    ``page``; empty values left out)."""
    kept = {k: v for k, v in query.items() if v}
    return f"/stores/{store_id}" + ("?" + urllib.parse.urlencode(kept) if kept else "")


def filters_of(request: Request) -> dict[str, str]:
    """The filters a store page's query asks for (``type``, ``tag``), empty ones left out."""
    return {k: v for k in ("type", "tag") if (v := request.query_params.get(k, "").strip())}


def type_names(store: MemoryStore) -> list[str]:
    """The store's types (its metadata's registry), what the filter offers."""
    return [t.name for t in registry(store.metadata).types]


async def filtered(console: Console, store: MemoryStore, directory: str,
                   filters: dict[str, str], cursor: str | None) -> dict[str, Any]:
    """The store page's context for a filtered listing: the memories of ``filters`` below
    ``directory``, a page of :data:`FILTER_PAGE`, with the link to the next page (the
    filters kept). A value the store refuses (too long, a stale page) is ``filter_error``
    (a 400 page that says why); a type the store does not have, ``filter_note`` beside the
    empty list."""
    context: dict[str, Any] = dict(files=[], folders=[], next_url=None, filter_error=None,
                                   filter_note=None)
    names = type_names(store)
    try:
        listing = await console.run(
            console.store.memories.list, store.id, path_prefix=directory,
            limit=FILTER_PAGE, page=cursor, memory_type=filters.get("type"),
            tag=filters.get("tag"))
    except errors.InvalidRequest as e:
        context["filter_error"] = e.message
        return context
    context["files"] = [m for m in listing.data if isinstance(m, Memory)]
    if listing.next_page:
        context["next_url"] = filter_url(
            store.id, dir=None if directory == "/" else directory, page=listing.next_page,
            **filters)
    if "type" in filters and filters["type"] not in names and not context["files"]:
        known = ", ".join(names) if names else "none: its types are off"
        context["filter_note"] = (f"{filters['type']!r} is not one of this store's types "
                                   f"({known})")
    return context


async def superseded(console: Console, store_id: str,
                     memory: Memory | None) -> list[tuple[str, str | None]]:
    """The paths a memory's ``supersedes:`` names, each with the id of the live memory there
    (None: none there now), for links on its page."""
    out: list[tuple[str, str | None]] = []
    meta = memory.memfs_meta if memory is not None else None
    for path in meta.supersedes if meta is not None else ():
        try:
            found = await console.run(console.store.memories.get_by_path, store_id, path,
                                      view="basic")
        except (errors.InvalidRequest, errors.NotFound):
            out.append((path, None))
        else:
            out.append((path, found.id))
    return out


# -- the describe page ---------------------------------------------------------------------

async def store_describe(console: Console, request: Request) -> Response:
    """What a store holds (:meth:`Store.typed.describe`): counts by type, directory and tag,
    each a link to its memories; what expires soon, what has expired and what the store does
    about it; the oldest and newest change; warnings; the store's types."""
    store = console.store
    sid = request.path_params["store_id"]
    current = await console.run(store.stores.get, sid)
    described = await console.run(store.typed.describe, sid)
    # The lists name memories by path: link each to its page.
    ids = {m.path: m.id for m in await console.run(store.memories.tree, sid)}
    return console.render(request, "describe.html", store=current, d=described, ids=ids,
                          untyped=UNTYPED)


routes: list[BaseRoute] = [
    page("/stores/{store_id}/describe", store_describe),
]
