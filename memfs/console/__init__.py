"""The Console: a web interface on ``memfs serve`` for the people around the agent, to review
and fix what agents remember (issue 10).

Server-rendered with Jinja2 templates (``templates/``), a stylesheet and a little plain
JavaScript (``static/``, vendored: it works offline). Every action goes through the
:class:`~memfs.store.Store` like the API; the Console re-checks no rule, it only translates
(:mod:`memfs.console.web` holds the translation: sign-in, CSRF, errors, rendering).

Modules, one per area of the interface (datasette's one view per resource): each view is a
function at the top of its module, ``async def view(console, request)``, handed the app's
:class:`~memfs.console.web.Console` (the store, the keys, the templates, the watch of the live
pages' sign-ins: what every view needs, held once on ``app.state``, never a global), and each
module ends with its ``routes``, the table of its paths (:func:`~memfs.console.web.page`
checks the sign-in, the right, the CSRF token and the visibility before the view runs):

- :mod:`.auth`: sign-in with an API key (the server's, or one kept in the database), sign-out;
- :mod:`.stores`: the stores: list, create, edit, archive, delete;
- :mod:`.memories`: a store's tree, a memory (view, edit, rename, delete), live updates;
- :mod:`.typed`: typed memories (issue 41): chips and expiry badges, a store's memories
  filtered by type and tag, the describe page;
- :mod:`.search`: a store's search, ranked by words and meaning (or exact text);
- :mod:`.history`: versions, diffs, restore, redact;
- :mod:`.sessions`: sessions and their timelines;
- :mod:`.archive`: export (download) and import (upload an archive or a zip of files);
- :mod:`.keys`: the workspace's API keys, for admins: list, make, revoke.

What a signed-in person sees is their key's workspace (a store-scoped key: its stores), and
what they may do its role, as in the API (:mod:`memfs.console.web`). The templates' filters
are :mod:`.filters`' and a few of the pages' own (registered here).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from ..models import ROLES
from ..store import Store
from . import archive, auth, history, keys, memories, search, sessions, stores, typed, web

if TYPE_CHECKING:  # the app's, handed in: the Console never imports the API at run time
    from ..api.grants import GrantWatch


def create_console(
    store: Store,
    api_keys: Iterable[str],
    *,
    error_status: Callable[[BaseException], int],
    changes: Any,
    grants: GrantWatch,
    read_body: Callable[[Request], Awaitable[bytes]],
    body_chunks: Callable[[Request, int, float, str], AsyncIterator[bytes]],
    error_headers: Callable[[BaseException], dict[str, str]],
    failures: web.Throttle | None = None,
) -> ASGIApp:
    """The Console's ASGI app.

    :param api_keys: the server's keys, which may sign in (the API's own), besides the keys
        kept in the database.
    :param error_status: the HTTP status of an exception (the API's table, so both agree).
    :param changes: the API's change hub (:class:`memfs.api.ChangeHub`), for live pages.
    :param grants: the API's watch of its streams' credentials, which the live pages' sign-ins
        share.
    :param read_body: the API's bounded body reader (size and time limits).
    :param body_chunks: the same, chunk by chunk: ``(request, max_bytes, seconds, what)``.
    :param error_headers: the API's headers for an exception (``connection``, ...).
    :param failures: the API's count of failed authentications per client address, which
        failed sign-ins add to (429 past it).
    """
    console = web.Console(store, api_keys, error_status=error_status, changes=changes,
                          grants=grants, read_body=read_body, body_chunks=body_chunks,
                          error_headers=error_headers, failures=failures)
    console.templates.filters.update(size=memories.size, marked=search.marked,
                                     sentence=search.sentence, expiry=typed.expiry_badge,
                                     importance=typed.importance_label)
    console.templates.globals["filter_url"] = typed.filter_url
    console.templates.globals["roles"] = ROLES
    routes: list[BaseRoute] = []
    for module in (auth, stores, memories, typed, search, history, sessions, archive, keys):
        routes += module.routes
    routes.append(Mount("/static", StaticFiles(packages=[("memfs.console", "static")]),
                        name="static"))
    app = Starlette(routes=routes, exception_handlers=web.EXCEPTION_HANDLERS)
    app.router.redirect_slashes = False  # Starlette's names the request's Host: ours do not
    app.router.default = web.SlashRedirects(app.router)
    app.state.console = console
    return web.SecurityHeaders(app)
