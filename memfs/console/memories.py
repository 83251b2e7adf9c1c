"""A store's memories: its tree (folders by path, one folder a page: ``?dir=/a/b/``, with the
store's search-status line; the search itself is :mod:`.search`), a memory (rendered Markdown
and raw text; edit in place with the ``content_sha256`` precondition, a conflict shown as a
diff; rename; delete after a confirmation), a new memory, and the live feed
(``/stores/{id}/live``, the API's change hub behind the sign-in cookie) that keeps an open
page current.

Live regions (``data-live``) are re-rendered alone when the request carries
``x-memfs-fragment: 1`` (``static/console.js`` asks so after each change)."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from .. import errors
from ..models import Memory
from ..rules import parse_int
from . import typed
from .diff import diff_html
from .web import Console, SignedInStream, form, page, redirect


@dataclass
class Folder:
    """A folder of the tree: the memories below ``path`` (which ends with ``/``)."""

    name: str
    path: str
    count: int = 0
    size: int = 0
    updated_at: str = ""


def directory_of(query: str | None) -> str:
    """The folder a ``?dir=`` names, as ``/a/b/`` (``/`` when absent)."""
    d = (query or "/").strip()
    if not d.startswith("/"):
        d = "/" + d
    return d if d.endswith("/") else d + "/"


def parent_of(path: str) -> str:
    return path.rsplit("/", 1)[0] + "/"


def crumbs(directory: str) -> list[tuple[str, str]]:
    """``/a/b/`` -> ``[("a", "/a/"), ("b", "/a/b/")]``: each folder and its own ``dir``."""
    out, at = [], "/"
    for segment in directory.strip("/").split("/"):
        if segment:
            at += segment + "/"
            out.append((segment, at))
    return out


def folder_view(tree: list[Memory], directory: str) -> tuple[list[Folder], list[Memory]]:
    """The subfolders of ``directory`` (with how many memories, bytes and the last change
    below each) and the memories directly in it, both in path order."""
    folders: dict[str, Folder] = {}
    files = []
    for m in tree:
        if not m.path.startswith(directory):
            continue
        rest = m.path[len(directory):]
        if "/" not in rest:
            files.append(m)
            continue
        name = rest.split("/", 1)[0]
        f = folders.setdefault(name, Folder(name, directory + name + "/"))
        f.count += 1
        f.size += m.content_size_bytes
        f.updated_at = max(f.updated_at, m.updated_at)
    return list(folders.values()), files


def size(n: int | None) -> str:
    return "" if n is None else f"{n:,} B"


def store_url(store_id: str, directory: str = "/") -> str:
    if directory == "/":
        return f"/stores/{store_id}"
    return f"/stores/{store_id}?dir=" + urllib.parse.quote(directory, safe="/")


def normalize_newlines(text: str, like: str | None) -> str:
    """A browser sends a textarea's line breaks as CRLF; keep them as LF unless the memory
    it started from used CRLF throughout."""
    if like and "\r\n" in like and like.count("\r\n") == like.count("\n"):
        return text.replace("\r\n", "\n").replace("\n", "\r\n")
    return text.replace("\r\n", "\n")


def is_fragment(request: Request) -> bool:
    return request.headers.get("x-memfs-fragment") == "1"


# -- a store's tree ------------------------------------------------------------------------

async def store_page(console: Console, request: Request) -> Response:
    """A store's folder (``?dir=``), or its memories of a type or tag (``?type=&tag=``, a
    flat list a page at a time: :func:`typed.filtered`), each memory with its chips."""
    store = console.store
    sid = request.path_params["store_id"]
    directory = directory_of(request.query_params.get("dir"))
    filters = typed.filters_of(request)
    current = await console.run(store.stores.get, sid)
    last = await console.run(store.feed.last, sid)
    context: dict[str, Any] = dict(filters=filters, types=typed.type_names(current),
                                   next_url=None, filter_error=None, filter_note=None)
    if filters:
        context.update(await typed.filtered(console, current, directory, filters,
                                            request.query_params.get("page") or None))
        count = await console.run(store.memories.count, sid)
        refresh = typed.filter_url(sid, dir=None if directory == "/" else directory,
                                   page=request.query_params.get("page"), **filters)
    else:
        tree = await console.run(store.memories.tree, sid)
        context["folders"], context["files"] = folder_view(tree, directory)
        count, refresh = len(tree), store_url(sid, directory)
    status = await console.run(store.search.status, sid)
    context.update(store=current, directory=directory, crumbs=crumbs(directory), count=count,
                   last=last, refresh=refresh, query="", exact=False, search_status=status)
    code = 400 if context["filter_error"] else 200
    if is_fragment(request):
        return console.render(request, "_tree.html", code, **context)
    return console.render(request, "store.html", code, **context)


async def store_live(console: Console, request: Request) -> Response:
    """The store's change feed as SSE (what the API's ``/changes/stream`` sends), for the
    live regions of the Console's pages, while the sign-in lasts."""
    store = console.store
    sid = request.path_params["store_id"]
    last = await console.run(store.feed.last, sid)
    if last == 0:
        await console.run(store.stores.get, sid)  # NotFound for a store that never was
    # An EventSource reconnecting says where it got to (Last-Event-ID), past its ?after=.
    after_text = request.headers.get("last-event-id") or request.query_params.get("after")
    after = last
    if after_text:
        seq = parse_int(after_text)
        if seq is None or seq < 0:
            raise errors.InvalidRequest(
                f"after must be a change seq, not {after_text[:40]!r}")
        after = seq
    return SignedInStream(console, request.state.user,
                          console.changes.stream(sid, after, last),
                          media_type="text/event-stream",
                          headers={"cache-control": "no-cache", "x-accel-buffering": "no"})


# -- a new memory --------------------------------------------------------------------------

async def memory_new(console: Console, request: Request) -> Response:
    store = console.store
    sid = request.path_params["store_id"]
    current = await console.run(store.stores.get, sid)
    fields = {"path": directory_of(request.query_params.get("dir")), "content": ""}
    error, status = None, 200
    if request.method == "POST":
        fields = await form(request)
        content = normalize_newlines(fields.get("content", ""), None)
        try:
            made = await console.run(store.memories.create, sid, fields.get("path", ""),
                                     content, actor=request.state.user.actor)
            return redirect(f"/stores/{sid}/memories/{made.id}", f"created {made.path}")
        except (errors.InvalidRequest, errors.Conflict) as e:
            error, status = e.message, console.error_status(e)
    return console.render(request, "memory_new.html", status=status, store=current,
                          form=fields, error=error)


# -- a memory ------------------------------------------------------------------------------

async def _memory_page(console: Console, request: Request, status: int = 200, *,
                       edit: dict[str, str] | None = None, **context: Any) -> Response:
    """A memory's page; ``edit`` the editor's text, base sha256 and path when they are not
    the memory's own (a conflict, an error)."""
    store = console.store
    sid, mid = request.path_params["store_id"], request.path_params["memory_id"]
    current = await console.run(store.stores.get, sid)
    last = await console.run(store.feed.last, sid)
    view = "raw" if request.query_params.get("view") == "raw" else "rendered"
    try:
        memory = await console.run(store.memories.get, sid, mid)
    except errors.NotFound:
        if not is_fragment(request):
            raise
        memory = None  # deleted while the page was open: the fragment says so
    base = dict(store=current, memory=memory, view=view, last=last,
                superseded=await typed.superseded(console, sid, memory),
                refresh=f"/stores/{sid}/memories/{mid}" + ("?view=raw" if view == "raw"
                                                         else ""))
    if is_fragment(request):
        return console.render(request, "_memory_view.html", **base)
    assert memory is not None
    editor = edit or {"content": memory.content or "", "base": memory.content_sha256,
                      "path": memory.path}
    context.setdefault("rename", {"path": memory.path})
    for key in ("conflict", "edit_error", "rename_error"):
        context.setdefault(key, None)
    return console.render(request, "memory.html", status=status, edit=editor,
                          crumbs=crumbs(parent_of(memory.path)), **base, **context)


async def memory_view(console: Console, request: Request) -> Response:
    return await _memory_page(console, request)


async def memory_save(console: Console, request: Request) -> Response:
    """Save the editor: the new content, if the memory still has the content the user
    started from (``content_sha256``)."""
    store = console.store
    sid, mid = request.path_params["store_id"], request.path_params["memory_id"]
    fields = await form(request)
    base = fields.get("content_sha256", "")
    try:
        before = await console.run(store.memories.get, sid, mid)
    except errors.NotFound:
        before = None
    text = normalize_newlines(fields.get("content", ""), before.content if before else None)
    edit = {"content": text, "base": base, "path": fields.get("path", "")}
    if before is None:  # deleted meanwhile: offer to create it again, text kept
        current = await console.run(store.stores.get, sid)
        return console.render(
            request, "memory_new.html", status=409, store=current,
            form={"path": edit["path"], "content": text},
            error="this memory was deleted since you started editing it: "
                  "create it again with your text?")
    try:
        saved = await console.run(store.memories.update, sid, mid, content=text,
                                  precondition_sha256=base or None,
                                  actor=request.state.user.actor)
    except errors.PreconditionFailed:
        theirs = await console.run(store.memories.get, sid, mid)
        edit["base"] = theirs.content_sha256  # re-applying saves over what is there now
        return await _memory_page(console, request, 409, edit=edit,
                                  conflict=diff_html(theirs.content, text))
    except (errors.InvalidRequest, errors.Conflict) as e:
        return await _memory_page(console, request, console.error_status(e), edit=edit,
                                  edit_error=e.message)
    if saved.memory_version_id == before.memory_version_id:
        return redirect(f"/stores/{sid}/memories/{mid}", "no change: nothing saved")
    return redirect(f"/stores/{sid}/memories/{mid}",
                    f"saved {saved.path} (version {saved.memory_version_id})")


async def memory_rename(console: Console, request: Request) -> Response:
    store = console.store
    sid, mid = request.path_params["store_id"], request.path_params["memory_id"]
    fields = await form(request)
    new_path = fields.get("path", "")
    old = await console.run(store.memories.get, sid, mid, view="basic")
    try:
        moved = await console.run(store.memories.update, sid, mid, path=new_path,
                                  actor=request.state.user.actor)
    except (errors.InvalidRequest, errors.Conflict) as e:
        return await _memory_page(console, request, console.error_status(e),
                                  rename={"path": new_path}, rename_error=e.message)
    if moved.path == old.path:
        return redirect(f"/stores/{sid}/memories/{mid}", "same path: nothing renamed")
    return redirect(f"/stores/{sid}/memories/{mid}", f"renamed {old.path} to {moved.path}")


async def memory_delete(console: Console, request: Request) -> Response:
    """A confirmation page, then the delete, if the memory is still what was confirmed."""
    store = console.store
    sid, mid = request.path_params["store_id"], request.path_params["memory_id"]
    current = await console.run(store.stores.get, sid)
    memory = await console.run(store.memories.get, sid, mid)
    error = None
    if request.method == "POST":
        expected = (await form(request)).get("content_sha256") or None
        try:
            await console.run(store.memories.delete, sid, mid, expected_sha256=expected,
                              actor=request.state.user.actor)
            return redirect(store_url(sid, parent_of(memory.path)),
                            f"deleted {memory.path} (its history is kept)")
        except errors.PreconditionFailed:
            error = ("this memory changed since you asked to delete it: look at it "
                     "again below, and confirm again if it should still go")
        except (errors.InvalidRequest, errors.Conflict) as e:
            error = e.message
    return console.render(request, "memory_delete.html", status=409 if error else 200,
                          store=current, memory=memory, error=error,
                          crumbs=crumbs(parent_of(memory.path)))


routes: list[BaseRoute] = [
    page("/stores/{store_id}", store_page),
    page("/stores/{store_id}/live", store_live, gone_ok=True),
    page("/stores/{store_id}/new", memory_new, ("GET", "POST"), form_page=True),
    page("/stores/{store_id}/memories/{memory_id}", memory_view),
    page("/stores/{store_id}/memories/{memory_id}", memory_save, ("POST",)),
    page("/stores/{store_id}/memories/{memory_id}/rename", memory_rename, ("POST",)),
    page("/stores/{store_id}/memories/{memory_id}/delete", memory_delete, ("GET", "POST"),
         form_page=True),
]
