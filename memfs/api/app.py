"""The ASGI app (:func:`create_app`): the route table made Starlette routes, each endpoint's
net (every failure leaves through :data:`memfs.errors.WIRE`), HEAD, and the split
between the API, the health probes and the Console."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import errors
from ..store import Store
from . import spec
from .auth import SESSION_HEADER, Gate, authorize, check_visible
from .batching import WriteBatcher
from .body import body_chunks, read_body, read_json
from .call import Call
from .errortable import error_body, error_response
from .grants import GrantWatch
from .health import PATHS as HEALTH_PATHS
from .health import Health
from .limits import AuthFailures, KeyRates
from .routes import OPS, Op
from .streams import ChangeHub, EventHub, grant_watch
from .uploads import Uploads

log = logging.getLogger("memfs.api")  # the API's one logger, whichever module logs


def _endpoint(
    op: Op, store: Store, hub: ChangeHub, events: EventHub, writes: WriteBatcher,
    grants: GrantWatch,
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            grant = request.state.grant
            try:
                authorize(op, grant, request)
                query = spec.Query(request.query_params, op.query,
                                   raw=request.scope.get("query_string", b""))
                body = {} if op.method == "GET" or op.raw_body else await read_json(request,
                                                                                       op.body)
                await check_visible(op, grant, request, store)
            except (errors.NotFound, errors.Forbidden, errors.ReadOnly) as e:
                log.info("refused %s %s to %s (%s): %s", request.method, request.url.path,
                         grant.session_id or grant.key_id, grant.workspace_id, e.message)
                raise
            result = await op.handler(Call(request, store, body, query, hub, events, writes,
                                           grants))
            if isinstance(result, Response):
                return result
            if hasattr(result, "to_dict"):
                result = result.to_dict()
            return JSONResponse(result)  # rendering can fail too: inside the net
        except Exception as e:  # every failure leaves through errors.WIRE
            if not isinstance(e, errors.MemfsError):
                log.exception("%s %s failed", request.method, request.url.path)
            return error_response(e, request.state.request_id)

    endpoint.__name__ = op.handler.__name__
    return endpoint


async def _http_error(request: Request, exc: Exception) -> Response:
    """Unrouted requests: an unknown path is 404, a known path with another method 405."""
    assert isinstance(exc, HTTPException)
    err: errors.MemfsError
    if exc.status_code == 405:
        err = errors.MethodNotAllowed(f"{request.method} is not allowed on {request.url.path}")
    elif exc.status_code == 404:
        err = errors.NotFound(f"no endpoint {request.method} {request.url.path}")
    else:
        err = errors.InvalidRequest(str(exc.detail))
    response = error_response(err, request.state.request_id)
    response.headers.update(exc.headers or {})  # a 405's Allow (RFC 9110 §15.5.6)
    return response


async def _head(get: Callable[[Request], Awaitable[Response]], request: Request) -> Response:
    """HEAD: the GET answer's status and headers (the server sends no body). A stream is
    not started: its generator is closed at once."""
    response = await get(request)
    if isinstance(response, StreamingResponse):
        iterator = response.body_iterator
        if hasattr(iterator, "aclose"):
            await iterator.aclose()
        head = Response(status_code=response.status_code, headers=dict(response.headers))
        del head.headers["content-length"]  # unknown, as for the GET
        return head
    return response


def create_app(store: Store, api_keys: Iterable[str], *, uploads: Uploads | None = None,
               console: bool = True, dreams: bool = True,
               only_session: str | None = None, rates: KeyRates | None = None,
               failures: AuthFailures | None = None,
               mcp: EndpointFactory | None = None) -> ASGIApp:
    """The ASGI app serving ``store`` to holders of ``api_keys`` and of its sessions' tokens
    (a credential is needed to call anything but ``/openapi.json``). ``uploads`` bounds the
    request bodies read at once (``memfs serve``: half its connections; default
    :class:`Uploads`' own). ``console``: serve the Console too (else its paths are 404s);
    ``dreams``: run the dream sweeper while serving (:mod:`memfs.launcher.sessionapi`, the
    API of one session for its commands, wants neither). ``only_session``: the tokens of that
    session are the only ones let in (the API of one session). ``rates``: each key's request
    rate (default :meth:`KeyRates.from_env`). ``failures``: the failed authentications of each
    client address, on the API and the Console's sign-in (default :class:`AuthFailures`').
    ``mcp``: makes the app's ``/mcp`` (:func:`memfs.mcp.http.endpoint`; not on the API of one
    session)."""
    hub = ChangeHub(store, watch_db=True)
    events = EventHub(store)
    writes = WriteBatcher(store)
    grants = grant_watch(store)  # the API's streams and the Console's live pages
    routes: dict[str, list[Op]] = {}
    for op in OPS:
        routes.setdefault(op.path, []).append(op)
    starlette_routes = []
    for path, ops in routes.items():
        by_method = {op.method: _endpoint(op, store, hub, events, writes, grants)
                     for op in ops}

        async def dispatch(
            request: Request,
            by_method: dict[str, Callable[[Request], Awaitable[Response]]] = by_method,
        ) -> Response:
            if request.method == "HEAD":  # Starlette routes HEAD wherever GET is
                return await _head(by_method["GET"], request)
            return await by_method[request.method](request)

        starlette_routes.append(Route(path, dispatch, methods=list(by_method)))
    starlette_routes.append(
        Route("/openapi.json", lambda request: JSONResponse(openapi()), methods=["GET"])
    )
    from ..dreams.dreamer import lifespan

    lifespans: list[Callable[[Any], AbstractAsyncContextManager[None]]] = []
    if dreams:
        lifespans.append(partial(lifespan, store))
    endpoint = mcp(grants, hub) if mcp is not None and only_session is None else None
    if endpoint is not None:  # behind the gate, and its tasks in the lifespan
        starlette_routes.append(Route(endpoint.path, endpoint,
                                      methods=["GET", "POST", "DELETE"]))
        lifespans.append(endpoint.lifespan)
    app = Starlette(routes=starlette_routes, exception_handlers={HTTPException: _http_error},
                    lifespan=partial(_lifespans, lifespans) if lifespans else None)
    # Paths exactly as declared: Starlette's redirect of a trailing slash names the Host the
    # request sent, and a forged one sent the client (with its key) elsewhere (issue 38 S5).
    app.router.redirect_slashes = False
    keys = list(api_keys)
    failures = failures or AuthFailures()
    gate = Gate(app, keys, store, only_session, rates, failures)
    if endpoint is not None:
        endpoint.api = gate  # its tools call the API in process, through the same gate
    paths = API_PATHS | ({endpoint.path} if endpoint is not None else set())
    if not console:  # every other path: the API's own 404
        return _Split(gate, gate, Health(store), uploads or Uploads(), paths)
    from ..console import create_console  # Jinja2 and markdown-it: only when served

    web = create_console(store, keys, error_status=lambda e: error_body(e, "")[0],
                         changes=hub, grants=grants, read_body=read_body,
                         body_chunks=body_chunks,
                         error_headers=lambda e: error_body(e, "")[2], failures=failures)
    return _Split(gate, web, Health(store), uploads or Uploads(), paths)


#: The paths the API serves besides ``/v1/…``.
API_PATHS = frozenset({"/v1", "/openapi.json"})


class Endpoint(Protocol):
    """An app served at one more path of the API, behind its gate (``/mcp``:
    :class:`memfs.mcp.http.McpEndpoint`, which ``memfs serve`` hands in: the API does not
    import the MCP server, which sits above it), with a lifespan of its own, and the gated API
    app to call in process (``api``, set once the gate is made)."""

    path: str
    api: ASGIApp | None

    def lifespan(self, app: Any) -> AbstractAsyncContextManager[None]: ...

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...


#: What makes an :class:`Endpoint` from the app's watch of stream credentials and its hub of
#: change feeds.
EndpointFactory = Callable[[GrantWatch, ChangeHub], Endpoint | None]


@asynccontextmanager
async def _lifespans(lifespans: list[Callable[[Any], AbstractAsyncContextManager[None]]],
                     app: Any) -> AsyncIterator[None]:
    """Several lifespans as one, entered in order and left in reverse."""
    async with AsyncExitStack() as stack:
        for each in lifespans:
            await stack.enter_async_context(each(app))
        yield


class _Split:
    """``/v1/…`` and the other ``paths`` (``/openapi.json``, ``/mcp``) go to the API (behind
    its key gate), ``/healthz`` and ``/readyz`` to the health probes (no key:
    :mod:`memfs.api.health`), every other path to the Console, which signs people in
    itself."""

    def __init__(self, api: ASGIApp, console: ASGIApp, health: ASGIApp,
                 uploads: Uploads, paths: frozenset[str] = API_PATHS) -> None:
        self.api = api
        self.paths = paths
        self.console = console
        self.health = health
        self.uploads = uploads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http":  # for the body reader (body_chunks), API and Console
            scope.setdefault("state", {})["uploads"] = self.uploads
        if scope["type"] == "lifespan" or path.startswith("/v1/") or path in self.paths:
            await self.api(scope, receive, send)
        elif scope["type"] == "http" and path in HEALTH_PATHS:
            await self.health(scope, receive, send)
        else:
            await self.console(scope, receive, send)


def openapi() -> dict[str, Any]:
    """``/openapi.json``: :data:`OPS` with their declared inputs (:mod:`memfs.openapi`)."""
    from . import openapi as doc

    return doc.document(OPS, errors.WIRE.values(), SESSION_HEADER)
