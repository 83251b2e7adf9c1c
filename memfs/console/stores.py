"""The stores of the signed-in key's workspace (a store-scoped key: its stores): list (archived
on request), create, edit, archive, delete."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from .. import errors
from ..models import MemoryStore
from .web import Console, form, page, redirect


def parse_metadata(text: str) -> dict[str, str]:
    """``key: value`` lines (blank lines ignored) as a metadata dict; the store checks keys,
    values and their number."""
    metadata: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise errors.InvalidRequest(f"metadata line {n}: expected 'key: value'")
        metadata[key.strip()] = value.strip()
    return metadata


def format_metadata(metadata: dict[str, str]) -> str:
    return "\n".join(f"{k}: {v}" for k, v in metadata.items())


def namesakes_note(name: str, others: list[MemoryStore]) -> str:
    """After a store was created or renamed: that other live stores have its name too
    (``store.stores.namesakes``), which then names none of them; else ``""``."""
    if not others:
        return ""
    who = ("another live store is" if len(others) == 1
           else f"{len(others)} other live stores are")
    ids = ", ".join(o.id for o in others[:5]) + (
        f" and {len(others) - 5} more" if len(others) > 5 else "")
    return f"Note: {who} also named {name} ({ids}): refer to each by its id, or rename one."


async def home(request: Request) -> Response:
    return RedirectResponse("/stores", status_code=303)


async def _list_page(console: Console, request: Request, *, archived: bool = False,
                     cursor: str | None = None, status: int = 200,
                     fields: dict[str, str] | None = None, error: str | None = None) -> Response:
    """The stores list (a page of 50, each with its memory count) and the new-store form
    (as typed, with the store's error, after a refused create)."""
    store = console.store
    user = request.state.user
    listing = await console.run(store.stores.list, include_archived=archived, limit=50,
                                page=cursor, ids=user.stores, workspace=user.workspace)
    counts = {s.id: await console.run(store.memories.count, s.id) for s in listing.data}
    return console.render(request, "stores.html", status=status, stores=listing.data,
                          counts=counts, archived=archived, next_page=listing.next_page,
                          form=fields or {}, error=error)


async def store_list(console: Console, request: Request) -> Response:
    return await _list_page(console, request,
                            archived=request.query_params.get("archived") == "1",
                            cursor=request.query_params.get("page") or None)


async def store_create(console: Console, request: Request) -> Response:
    store = console.store
    fields = await form(request)
    try:
        created = await console.run(
            store.stores.create, fields.get("name", ""), fields.get("description") or None,
            parse_metadata(fields.get("metadata", "")) or None,
            workspace=request.state.user.workspace)
    except errors.InvalidRequest as e:
        return await _list_page(console, request, status=console.error_status(e),
                                fields=fields, error=e.message)
    note = namesakes_note(created.name, await console.run(store.stores.namesakes, created.id))
    return redirect(f"/stores/{created.id}",
                    f"created the store {created.name}" + (f". {note}" if note else ""))


async def _settings_page(console: Console, request: Request, current: MemoryStore, *,
                         status: int = 200, fields: dict[str, str] | None = None,
                         error: str | None = None, delete_error: str | None = None) -> Response:
    """A store's settings: the edit form (the store's values unless ``fields`` has what
    was typed), archive, delete."""
    store = console.store
    count = await console.run(store.memories.count, current.id)
    if fields is None:
        fields = {"name": current.name, "description": current.description,
                  "metadata": format_metadata(current.metadata)}
    return console.render(request, "store_settings.html", status=status, store=current,
                          count=count, form=fields, error=error,
                          delete_error=delete_error)


async def store_settings(console: Console, request: Request) -> Response:
    store = console.store
    sid = request.path_params["store_id"]
    current = await console.run(store.stores.get, sid)
    if request.method == "GET":
        return await _settings_page(console, request, current)
    fields = await form(request)
    try:
        updated = await console.run(
            store.stores.update, sid, name=fields.get("name", ""),
            description=fields.get("description", ""),
            metadata=_metadata_patch(current.metadata,
                                     parse_metadata(fields.get("metadata", ""))))
    except errors.InvalidRequest as e:
        return await _settings_page(console, request, current, status=400, fields=fields,
                                    error=e.message)
    note = namesakes_note(updated.name, await console.run(store.stores.namesakes, sid)
                          ) if updated.name != current.name else ""
    return redirect(f"/stores/{sid}/settings",
                    f"saved {updated.name}" + (f". {note}" if note else ""))


async def store_archive(console: Console, request: Request) -> Response:
    store = console.store
    archived = await console.run(store.stores.archive, request.path_params["store_id"])
    return redirect(f"/stores/{archived.id}/settings",
                    f"archived {archived.name}: it is read-only from now on")


async def store_delete(console: Console, request: Request) -> Response:
    store = console.store
    sid = request.path_params["store_id"]
    current = await console.run(store.stores.get, sid)
    typed = (await form(request)).get("confirm", "")
    if typed != current.name:
        return await _settings_page(
            console, request, current, status=400,
            delete_error=f"type the store's name, {current.name}, to delete it")
    await console.run(store.stores.delete, sid)
    return redirect("/stores", f"deleted {current.name} and all its memories")


def _metadata_patch(old: dict[str, str], new: dict[str, str]) -> dict[str, str | None]:
    """The update that turns ``old`` into ``new`` (API.md: a key set to null is removed)."""
    patch: dict[str, str | None] = {k: None for k in old if k not in new}
    patch.update(new)
    return patch


routes: list[BaseRoute] = [
    Route("/", home, name="home"),
    page("/stores", store_list),
    page("/stores", store_create, ("POST",), name="store_create", right="manage"),
    page("/stores/{store_id}/settings", store_settings, ("GET", "POST"), right="manage"),
    page("/stores/{store_id}/archive", store_archive, ("POST",), right="manage"),
    page("/stores/{store_id}/delete", store_delete, ("POST",), right="manage"),
]
