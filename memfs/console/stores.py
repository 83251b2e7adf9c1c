"""The stores: list (archived on request), create, edit, archive, delete."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from .. import errors
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


def routes(console: Console) -> list[BaseRoute]:
    store = console.store

    async def home(request: Request) -> Response:
        return RedirectResponse("/stores", status_code=303)

    @page(console, "/stores")
    async def store_list(request: Request) -> Response:
        archived = request.query_params.get("archived") == "1"
        cursor = request.query_params.get("page") or None
        listing = await console.run(store.list_stores, include_archived=archived, limit=50,
                                    page=cursor)
        counts = {s.id: await console.run(store.count_memories, s.id) for s in listing.data}
        return console.render(request, "stores.html", stores=listing.data, counts=counts,
                              archived=archived, next_page=listing.next_page,
                              form={}, error=None)

    @page(console, "/stores", ("POST",), name="store_create")
    async def store_create(request: Request) -> Response:
        fields = await form(request)
        try:
            created = await console.run(
                store.create_store, fields.get("name", ""), fields.get("description") or None,
                parse_metadata(fields.get("metadata", "")) or None)
        except errors.InvalidRequest as e:
            listing = await console.run(store.list_stores, limit=50)
            counts = {s.id: await console.run(store.count_memories, s.id)
                      for s in listing.data}
            return console.render(request, "stores.html", status=console.error_status(e),
                                  stores=listing.data, counts=counts, archived=False,
                                  next_page=listing.next_page, form=fields, error=e.message)
        return redirect(f"/stores/{created.id}", f"created the store {created.name}")

    @page(console, "/stores/{store_id}/settings", ("GET", "POST"))
    async def store_settings(request: Request) -> Response:
        sid = request.path_params["store_id"]
        current = await console.run(store.get_store, sid)
        error = None
        fields = {"name": current.name, "description": current.description,
                  "metadata": format_metadata(current.metadata)}
        if request.method == "POST":
            fields = await form(request)
            try:
                updated = await console.run(
                    store.update_store, sid, name=fields.get("name", ""),
                    description=fields.get("description", ""),
                    metadata=_metadata_patch(current.metadata,
                                             parse_metadata(fields.get("metadata", ""))))
                return redirect(f"/stores/{sid}/settings", f"saved {updated.name}")
            except errors.InvalidRequest as e:
                error = e.message
        count = await console.run(store.count_memories, sid)
        return console.render(request, "store_settings.html", status=400 if error else 200,
                              store=current, count=count, form=fields, error=error)

    @page(console, "/stores/{store_id}/archive", ("POST",))
    async def store_archive(request: Request) -> Response:
        archived = await console.run(store.archive_store, request.path_params["store_id"])
        return redirect(f"/stores/{archived.id}/settings",
                        f"archived {archived.name}: it is read-only from now on")

    @page(console, "/stores/{store_id}/delete", ("POST",))
    async def store_delete(request: Request) -> Response:
        sid = request.path_params["store_id"]
        current = await console.run(store.get_store, sid)
        typed = (await form(request)).get("confirm", "")
        if typed != current.name:
            count = await console.run(store.count_memories, sid)
            fields = {"name": current.name, "description": current.description,
                      "metadata": format_metadata(current.metadata)}
            return console.render(
                request, "store_settings.html", status=400, store=current, count=count,
                form=fields, error=None,
                delete_error=f"type the store's name, {current.name}, to delete it")
        await console.run(store.delete_store, sid)
        return redirect("/stores", f"deleted {current.name} and all its memories")

    return [Route("/", home, name="home"), store_list, store_create, store_settings,
            store_archive, store_delete]


def _metadata_patch(old: dict[str, str], new: dict[str, str]) -> dict[str, str | None]:
    """The update that turns ``old`` into ``new`` (API.md: a key set to null is removed)."""
    patch: dict[str, str | None] = {k: None for k in old if k not in new}
    patch.update(new)
    return patch
