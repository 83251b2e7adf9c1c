"""``/mcp`` on ``memfs serve``: the MCP server (:func:`memfs.mcp.create_server`) over
Streamable HTTP, on the same port as the API and behind the same gate.

How it runs: the official SDK's :class:`~mcp.server.streamable_http_manager.
StreamableHTTPSessionManager` (stateful sessions, so that a client's resource subscriptions
live as long as its session) is an ASGI app written on anyio; under ``memfs serve`` anyio runs
on trio, hypercorn's loop, with no thread or second loop. Its ``run()`` (the task group every
session's server task lives in) is entered in the API app's lifespan
(:meth:`McpEndpoint.lifespan`): an app whose lifespan never ran (a test's bare transport)
answers 503.

One place for every rule. A request to ``/mcp`` passes the API's :class:`~memfs.api.auth.Gate`
like any other: the same credentials (a server key, a stored key, a session token), its
workspace, the key's request rate, the refusal logging. A tool then acts through a
:class:`memfs.client.AsyncClient` whose transport is the API app itself, in process
(``httpx.ASGITransport`` into the gate), as the caller (its credential, and its
``x-memfs-session-id`` / ``anthropic-workspace-id`` headers): every grant rule (roles, store
scopes, read_only attachments, another workspace's objects) is enforced where it already is,
by the API's routes. Those inner requests carry the ``/mcp`` request's grant in their ASGI
scope (:data:`~memfs.api.auth.INNER_CALL`, which only code in this process can set): the gate
authenticated it at the ``/mcp`` request. Each counts against the key's rate but the first
(:data:`~memfs.api.auth.INNER_CHARGED`: the ``/mcp`` request paid for it), and one ``/mcp``
request makes at most :data:`INNER_CALLS_PER_REQUEST` (past it, a ``rate_limit_error``,
whatever the key): a tool costs what the API requests it makes cost.

Answers. A request's answer is one JSON body (the manager's ``json_response``), not an SSE
stream of one event: the tools send no progress, and a stream per call cost a quarter of a call
(scripts/bench_mcp.py). What the server says unasked (resource updates) comes on the session's
GET stream, as ever.

Sessions and hostile clients:

- an MCP session is bound to the credential (and workspace) that opened it: another one
  using its id gets the 404 of an unknown session (the SDK's owner check, fed our grant);
- at most :data:`MAX_SESSIONS_PER_CREDENTIAL` live sessions per holder (then 429): a key, with
  the session tokens of the sessions it created (:attr:`~memfs.models.Grant.holder`: minting
  tokens makes no more); :data:`MAX_SESSIONS_PER_WORKSPACE` per workspace and
  :data:`MAX_SESSIONS` in all, past which the oldest idle session of the holder with most
  ends to make room (none idle: 429 for a workspace, 503 for the server; the server's own
  key may end a busy one): so no holder, nor workspace, locks the others out; a session
  without a request for :data:`SESSION_IDLE_SECONDS` ends;
- a request body is read by the API's own reader (:func:`memfs.api.body.read_body`: at most
  :data:`memfs.api.body.MAX_BODY_BYTES`, within its time and rate bounds, one of the server's
  upload slots while it comes): the JSON envelope's 413 / 408 / 429, as on ``/v1``;
- JSON that is no JSON-RPC message is the SDK's JSON-RPC error (400), arguments that break a
  tool's schema a tool error, never a 5xx;
- a revoked or expired stored key or session token ends its open requests and streams within
  :data:`memfs.api.streams.GRANT_RECHECK_SECONDS` (the app's
  :class:`~memfs.api.grants.GrantWatch`, as the API's SSE streams) and its MCP sessions with
  them; its next request is the gate's 401;
- a client that never reads its stream stalls its own session only: every session has its own
  tasks and streams.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx
import mcp
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, AuthorizationContext
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel.server import Server, request_ctx
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types import INVALID_REQUEST
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import errors
from ..api import grants as grant_kinds
from ..api.auth import (
    INNER_CALL,
    INNER_CHARGED,
    SESSION_HEADER,
    WORKSPACE_HEADER,
    check_workspace,
)
from ..api.body import MAX_BODY_BYTES, read_body
from ..api.errortable import error_response
from ..api.grants import GrantWatch
from ..api.streams import ChangeHub
from ..client import AsyncClient
from ..models import Grant
from .reach import Reach

log = logging.getLogger(__name__)


#: Characters of a line the SDK logs that are kept (the rest is said to be cut).
LOG_CHARS = 300
#: Where the SDK's modules are: what they log goes through the filter, whichever logger
#: (its own, or the root logger, which ``mcp.shared.session`` logs through).
_SDK_DIR = os.path.dirname(mcp.__file__) + os.sep
#: What the SDK logs when it finds an ended session's queue closed (with that exception).
_SESSION_ENDED = ("Error in standalone SSE writer", "Error handling POST request",
                  "Error processing JSON response")
#: And when a request's queue was closed before its answer came (no exception).
_NO_RESPONSE = "No response message received before stream closed"
#: The beginnings of what the SDK logs of what a client sent (at WARNING or ERROR): the
#: client's doing, logged at INFO.
_CLIENTS_DOING = ("Received exception from stream", "Failed to validate",
                  "Response ID ", "Rejecting request for session", "Tool '",
                  "Missing Host header", "Invalid Host header", "Invalid Origin header",
                  "Missing Content-Type header", "Invalid Content-Type header")


class _SdkLog(logging.Filter):
    """What the SDK logs, made fit for the server's log: every line cut to
    :data:`LOG_CHARS` (the SDK puts whole messages of a client in some: 4 MiB a request),
    what a client caused (:data:`_CLIENTS_DOING`: a JSON-RPC response to nothing, a request
    that is none, an unknown tool) lowered to INFO, and dropped: an ended session found
    closed. The SDK logs a traceback at ERROR when a session ends (the client's DELETE, its
    idle expiry, a revoked credential) while its GET stream is open, or while one of its
    requests comes in: the stream's writer, or the request's, finds the session's queue
    closed, which is how it is told the session ended. That is no error
    (:meth:`McpEndpoint._serve` answers such a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not (record.pathname.startswith(_SDK_DIR) or record.name.startswith("mcp.")):
            return True  # the root logger's own, not the SDK's
        exc = record.exc_info[1] if record.exc_info else None
        message = record.getMessage()
        if message == _NO_RESPONSE or (
                message in _SESSION_ENDED
                and isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError)):
            return False
        if len(message) > LOG_CHARS:
            message = f"{message[:LOG_CHARS]}… (cut: {len(message)} characters)"
        if exc is not None and len(str(exc)) > LOG_CHARS:  # its text is the client's too
            message += f" ({type(exc).__name__}: {str(exc)[:LOG_CHARS]}…)"
            record.exc_info = record.exc_text = None
        record.msg, record.args = message, None
        if record.levelno > logging.INFO and message.startswith(_CLIENTS_DOING):
            record.levelno, record.levelname = logging.INFO, "INFO"
            logger = logging.getLogger(None if record.name == "root" else record.name)
            return logger.isEnabledFor(logging.INFO)
        return True


def _filter_sdk_logs() -> None:
    """Put :class:`_SdkLog` on the SDK's loggers (those made so far) and the root logger."""
    names = [n for n in list(logging.root.manager.loggerDict) if n.split(".")[0] == "mcp"]
    for logger in [logging.getLogger(), *map(logging.getLogger, names)]:
        if not any(isinstance(f, _SdkLog) for f in logger.filters):
            logger.addFilter(_SdkLog())


_filter_sdk_logs()


#: The path of the endpoint.
PATH = "/mcp"
#: Live MCP sessions of one server process: in all, per workspace, and per holder (a key
#: with the session tokens of its sessions).
MAX_SESSIONS = 1000
MAX_SESSIONS_PER_WORKSPACE = 200
MAX_SESSIONS_PER_CREDENTIAL = 32
#: Seconds a session may go without a request (nor an open stream) before it ends.
SESSION_IDLE_SECONDS = 600.0
#: The inner clients kept (one per credential id and headers): the oldest unused go first,
#: and a credential's once it is refused.
CLIENTS_KEPT = 256
#: Requests into the API one ``/mcp`` request may make (the most a tool needs: a page of 100
#: stores with their counts).
INNER_CALLS_PER_REQUEST = 128
#: Where (in the ``/mcp`` request's ``scope["state"]``) its requests into the API are counted.
_INNER_CALLS = "memfs.mcp.inner_calls"
#: The base URL of the inner clients (never resolved: their transport is the app).
INNER_URL = "http://memfs.in-process"


#: The request being served, as the MCP session it opens sees it: a session's server task is
#: started from its opening request, and inherits this (the SDK's request context is set for
#: each request's handlers only), so that the session's instructions are its credential's.
_OPENING: contextvars.ContextVar[Request] = contextvars.ContextVar("memfs_mcp_opening")


#: Whose share a session being opened in this context is: (holder, workspace, a server
#: key's?). Set by :meth:`McpEndpoint.__call__` around the SDK's admission
#: (:meth:`_Manager._admit_session`).
_ADMITTING: contextvars.ContextVar[tuple[str, str, bool]] = \
    contextvars.ContextVar("memfs_mcp_admit")


def owner_of(grant: Grant) -> AuthorizationContext:
    """Who an MCP session belongs to: the credential (its key or token id) in its workspace
    (a server key may act in several)."""
    return AuthorizationContext(client_id=grant.key_id, issuer=None,
                                subject=grant.workspace_id)


def credential_of(grant: Grant) -> grant_kinds.Credential:
    """The credential as the app's :class:`GrantWatch` follows it."""
    kind = grant_kinds.SESSION_TOKEN if grant.session_id is not None else grant_kinds.KEY
    return kind, grant.key_id


def endpoint(grants: GrantWatch, hub: ChangeHub) -> McpEndpoint:
    """``/mcp`` of an API app (:func:`memfs.api.create_app`'s ``mcp``): the MCP server of
    :func:`memfs.mcp.create_server` on the app's watch and change feeds."""
    from .server import create_server

    return McpEndpoint(create_server, grants, hub)


class _Manager(StreamableHTTPSessionManager):
    """The SDK's manager, with the sessions of one owner told apart: counted (the caps per
    holder and workspace, room made from the busiest holder) and ended (a revoked
    credential). It reads the manager's own tables of transports and owners
    (``_server_instances``, ``_session_owners``) and a transport's requests in flight and
    idle deadline (the SDK is pinned, and tests/unit/mcp/test_http.py fails if they
    change)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: session id -> (holder, workspace) of every live session.
        self.holders: dict[str, tuple[str, str]] = {}
        #: session id -> what is set when it ends (for :meth:`until_ended`).
        self._endings: dict[str, anyio.Event] = {}

    def owned(self, session_id: str, owner: AuthorizationContext) -> bool:
        """Is ``session_id`` a live session of ``owner``?"""
        return not self.ended(session_id) and self._session_owners.get(session_id) == owner

    async def until_ended(self, session_id: str) -> None:
        """Return once the session ``session_id`` has ended (at once if it has)."""
        if self.ended(session_id):
            return
        await self._endings.setdefault(session_id, anyio.Event()).wait()

    def sessions_of(self, owner: AuthorizationContext) -> list[str]:
        return [sid for sid, who in self._session_owners.items() if who == owner]

    def held(self, holder: str | None = None, workspace: str | None = None) -> list[str]:
        """The live sessions of ``holder`` (and/or in ``workspace``)."""
        return [sid for sid, (h, ws) in self.holders.items()
                if (holder is None or h == holder) and (workspace is None or ws == workspace)]

    def ended(self, session_id: str | None) -> bool:
        """Is ``session_id`` a session no longer served (ending, ended, or never one)?"""
        if session_id is None:
            return False
        transport = self._server_instances.get(session_id)
        return transport is None or transport.is_terminated

    async def make_room(self, holder: str, workspace: str, server: bool) -> None:
        """Room for one more session of ``holder`` in ``workspace``: within the holder's cap,
        and, at the workspace's or the server's, the oldest idle session of the busiest
        holder there ended (``server``: the server's own key, which may end a busy one).

        :raises TooManyRequests: the holder's sessions, or its workspace's, are all it may
            have (and none of the workspace's is idle).
        :raises Busy: the server holds all it may, none idle.
        """
        if len(self.held(holder)) >= MAX_SESSIONS_PER_CREDENTIAL:
            raise errors.TooManyRequests(
                f"{MAX_SESSIONS_PER_CREDENTIAL} MCP sessions of this credential (with the "
                "session tokens of its sessions) are open: end one (DELETE /mcp with its "
                "mcp-session-id) or reuse it")
        if not server and len(self.held(workspace=workspace)) >= MAX_SESSIONS_PER_WORKSPACE \
                and not await self._evict(self.held(workspace=workspace), busy_ok=False):
            raise errors.TooManyRequests(
                f"{MAX_SESSIONS_PER_WORKSPACE} MCP sessions of workspace {workspace!r} are "
                "open and busy: end one (DELETE /mcp with its mcp-session-id) or reuse it")
        if len(self._server_instances) >= MAX_SESSIONS and \
                not await self._evict(list(self._server_instances), busy_ok=server):
            raise errors.Busy(f"the server holds {MAX_SESSIONS} busy MCP sessions: retry later")

    async def _evict(self, among: list[str], busy_ok: bool) -> bool:
        """End the oldest idle session (``busy_ok``: or, if none is, the oldest) of the
        holder with most of the sessions ``among``. Did one end?"""
        by_holder: dict[str, list[tuple[float, str]]] = {}
        for sid in among:
            transport = self._server_instances.get(sid)
            if transport is None or transport.is_terminated:
                continue
            idle = transport._requests_in_flight == 0
            scope = transport.idle_scope
            # The idle deadline is the last request's end plus the idle time: oldest first.
            since = scope.deadline if scope is not None and idle else float("inf")
            if idle or busy_ok:
                by_holder.setdefault(self.holders.get(sid, ("", ""))[0], []).append(
                    (since, sid))
        if not by_holder:
            return False
        holder = max(by_holder, key=lambda h: (len(self.held(h)), -min(by_holder[h])[0]))
        _, sid = min(by_holder[holder])
        log.info("MCP session %s of %s ends to make room for another", sid, holder)
        transport = self._server_instances.get(sid)
        if transport is not None:
            await self._discard_session(sid, transport)
        return True

    def _admit_session(self, requestor: AuthorizationContext | None
                       ) -> StreamableHTTPServerTransport | None:
        holder, workspace, server = _ADMITTING.get(("", "", False))
        if len(self.held(holder)) >= MAX_SESSIONS_PER_CREDENTIAL or (
                not server and len(self.held(workspace=workspace)) >= MAX_SESSIONS_PER_WORKSPACE):
            return None  # a race past McpEndpoint's own check (make_room): the SDK's 503
        transport = super()._admit_session(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            self.holders[transport.mcp_session_id] = (holder, workspace)
        return transport

    async def _discard_session(self, session_id: str,
                               transport: StreamableHTTPServerTransport) -> None:
        self.holders.pop(session_id, None)
        try:
            await super()._discard_session(session_id, transport)
        finally:
            ending = self._endings.pop(session_id, None)
            if ending is not None:
                ending.set()

    async def end_sessions_of(self, client_id: str) -> int:
        """End every session opened with the credential ``client_id`` (any workspace)."""
        ended = 0
        for sid, who in list(self._session_owners.items()):
            transport = self._server_instances.get(sid)
            if who["client_id"] == client_id and transport is not None:
                await self._discard_session(sid, transport)
                ended += 1
        return ended


class McpEndpoint:
    """The ASGI app of ``/mcp``, behind the API's gate (``scope["state"]["grant"]`` is set).

    :param server_factory: makes the MCP server from a function that gives the
        :class:`~memfs.mcp.Reach` of the request being served (:func:`memfs.mcp.create_server`).
    :param grants: the app's watch of the credentials of open streams.
    :param hub: the app's change feeds (what the Console and remote mounts follow): the
        source of resource updates, one poller per store however many subscribers.
    """

    path = PATH

    def __init__(self, server_factory: Callable[[Callable[[], Reach]], Server[Any, Any]],
                 grants: GrantWatch, hub: ChangeHub | None = None) -> None:
        self.server = server_factory(self.reach)
        _filter_sdk_logs()  # the SDK's modules imported since
        self.grants = grants
        self.hub = hub
        self.manager = _Manager(self.server, json_response=True,
                                session_idle_timeout=SESSION_IDLE_SECONDS,
                                max_request_body_size=MAX_BODY_BYTES + 1,
                                max_sessions=MAX_SESSIONS)
        #: The API app the tools call in process (set once the gate is made around us).
        self.api: ASGIApp | None = None
        self._running = False
        #: The sessions whose GET stream is open (one each: the SDK let two in at once, and
        #: kept one of them in no table, so that it never ended).
        self._streams: set[str] = set()
        self._clients: OrderedDict[tuple[str, str | None, str | None], AsyncClient] = \
            OrderedDict()

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        """The app's lifespan: the sessions' task group runs while the app serves."""
        async with self.manager.run():
            self._running = True
            try:
                yield
            finally:
                self._running = False
                for client in self._clients.values():
                    await client.aclose()
                self._clients.clear()

    # -- the requests ----------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        grant: Grant = scope["state"]["grant"]
        request_id = scope["state"].get("request_id", "")
        try:
            if not self._running:
                raise errors.Busy("the MCP endpoint is not running (the app's lifespan was "
                                  "not started)")
            check_workspace(grant, Request(scope))
            owner = owner_of(grant)
            scope["user"] = AuthenticatedUser(AccessToken(
                token="", client_id=owner["client_id"], scopes=[], subject=owner["subject"]))
            headers = dict(scope.get("headers") or [])
            opening = MCP_SESSION_ID_HEADER.encode() not in headers
            if scope["method"] == "POST" and opening:
                await self.manager.make_room(grant.holder, grant.workspace_id, grant.server)
            if scope["method"] == "POST":
                receive = await _buffered(Request(scope, receive))
        except errors.MemfsError as e:
            await error_response(e, request_id)(scope, receive, send)
            return
        session = Headers(scope=scope).get(MCP_SESSION_ID_HEADER)
        stream = scope["method"] == "GET" and session is not None and \
            self.manager.owned(session, owner)
        if stream and session in self._streams:
            await _conflict(scope, receive, send)
            return
        token = _OPENING.set(Request(scope))  # a session's run starts in this context
        admitting = _ADMITTING.set((grant.holder, grant.workspace_id, grant.server))
        if stream:
            self._streams.add(session or "")
        try:
            await self._serve(grant, _Response(scope, send,
                                               lambda: self.manager.ended(session)), receive,
                              session if stream else None)
        finally:
            if stream:
                self._streams.discard(session or "")
            _ADMITTING.reset(admitting)
            _OPENING.reset(token)

    async def _serve(self, grant: Grant, response: _Response, receive: Receive,
                     stream: str | None = None) -> None:
        """The SDK's answer, while the request's credential holds (the server's own keys
        live as long as the server): once it is refused (revoked, expired, its session
        ended) the request ends (a stream: its last body message) and so do the credential's
        MCP sessions. A session that ends while one of its requests comes in (the client's
        DELETE, its expiry) is the 404 of an ended session, not an error. The GET stream of
        the session ``stream`` ends when that session does, whatever the SDK did with it."""
        scope = response.scope
        revoked: str | None = None
        try:
            async with anyio.create_task_group() as tg:

                async def watch() -> None:
                    nonlocal revoked
                    revoked = await self.grants.until_refused(credential_of(grant))
                    tg.cancel_scope.cancel()

                async def follow(session: str) -> None:
                    await self.manager.until_ended(session)
                    tg.cancel_scope.cancel()

                if not grant.server:
                    tg.start_soon(watch)
                if stream is not None:
                    tg.start_soon(follow, stream)
                try:
                    await self.manager.handle_request(scope, receive, response.send)
                finally:
                    tg.cancel_scope.cancel()
        except Exception as e:
            if not _session_gone(e):
                raise
            log.info("an MCP request came in as its session ended: %r", e)
            await response.end(_SESSION_GONE)
        if revoked is None:
            return
        log.info("MCP requests and sessions of %s end: %s", grant.key_id, revoked)
        for name in [n for n in self._clients if n[0] == grant.key_id]:
            del self._clients[name]  # an in-process transport: nothing to close
        with anyio.CancelScope(shield=True):
            await self.manager.end_sessions_of(grant.key_id)
        await response.end(errors.Unauthorized(revoked))
        if stream is not None:
            await response.end(_SESSION_GONE)  # its session ended: the stream too

    # -- what the tools act through --------------------------------------------------------

    def reach(self) -> Reach:
        """The :class:`~memfs.mcp.Reach` of the request being served (or of the one that
        opened the session, for the session's own run): its own credential, on the API app in
        process.

        :raises LookupError: no request (outside any).
        """
        request = _request()
        grant: Grant = request.state.grant
        session = request.headers.get(SESSION_HEADER) or None
        client = self.client_for(grant.key_id, session,
                                 request.headers.get(WORKSPACE_HEADER) or None)
        # A store-scoped key's stores are not named to the reach (which would look each up
        # in turn): the API lists, and finds, only them.
        return Reach(store=client, session_id=grant.session_id or session,
                     access=grant.access, read_only=grant.role == "read_only",
                     changes=self.hub.changes if self.hub is not None else None)

    def client_for(self, key_id: str, session: str | None, workspace: str | None
                   ) -> AsyncClient:
        """The in-process client of a credential (its id, and its headers), kept for its next
        calls. It carries no secret: the gate lets its requests in by the grant they carry
        (:class:`_Inner`), so none is kept here, a revoked one included."""
        name = (key_id, session, workspace)
        client = self._clients.get(name)
        if client is not None:
            self._clients.move_to_end(name)
            return client
        assert self.api is not None, "the gate was made around the endpoint"
        client = AsyncClient(INNER_URL, f"inner-call-of-{key_id}", session_id=session,
                             transport=httpx.ASGITransport(app=_Inner(self.api, workspace)))
        self._clients[name] = client
        while len(self._clients) > CLIENTS_KEPT:
            # An in-process transport holds no connection: nothing to close.
            self._clients.popitem(last=False)
        return client


class _Response:
    """The answer of one request as it is sent (begun? ended?), and corrected: the SDK
    answers a request whose session ended on its way (its streams closed under it) with a
    500, sent as the 404 of an ended session instead."""

    def __init__(self, scope: Scope, send: Send, session_ended: Callable[[], bool]) -> None:
        self.scope = scope
        self._send = send
        self.session_ended = session_ended
        self.started = self.ended = False

    async def send(self, message: Message) -> None:
        if self.ended:
            # The SDK answers a failure it meets after its answer (a notification's 202, then
            # its session gone) again, with a 500 that would break the connection: dropped.
            log.debug("dropped %s: the answer is sent already", message["type"])
            return
        if message["type"] == "http.response.start" and message["status"] >= 500 \
                and self.session_ended():
            await self.end(_SESSION_GONE)  # the SDK's body is dropped after it
            return
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body"):
            self.ended = True
        await self._send(message)

    async def end(self, error: errors.MemfsError) -> None:
        """End the answer: ``error`` if nothing was sent yet, else its body as it is (a
        stream's clean end)."""
        if not self.started:
            request_id = self.scope["state"].get("request_id", "")
            await error_response(error, request_id)(self.scope, _no_body, self.send)
        elif not self.ended:
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})


#: The answer to a request of an ended session.
_SESSION_GONE = errors.NotFound("this MCP session ended: start a new one (initialize)")


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _conflict(scope: Scope, receive: Receive, send: Send) -> None:
    """The 409 of a GET of a session whose GET stream is open: a JSON-RPC error, as the SDK
    answers it."""
    body = json.dumps({"jsonrpc": "2.0", "id": "server-error", "error": {
        "code": INVALID_REQUEST, "message": "Conflict: this session's GET stream is open "
        "already (one at a time): use it, or close it first"}}).encode()
    await send({"type": "http.response.start", "status": 409,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _session_gone(exc: BaseException) -> bool:
    """Is ``exc`` (or every exception of its group) a stream of an ended session found
    closed?"""
    if isinstance(exc, BaseExceptionGroup):
        return all(_session_gone(e) for e in exc.exceptions)
    return isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError)


def _request() -> Request:
    """The request being served (its handlers run in the SDK's request context), or, in a
    session's own run (its instructions), the request that opened the session.

    :raises LookupError: none (outside any request).
    """
    try:
        request = request_ctx.get().request
    except LookupError:
        request = _OPENING.get()
    assert isinstance(request, Request), "a tool call over HTTP has its request"
    return request


class _Inner:
    """The API app as the tools call it: each request carries the grant of the request being
    served (:data:`INNER_CALL`: authenticated at the ``/mcp`` request), which no request from
    the network can, is counted against its key's rate but the first of that request
    (:data:`INNER_CHARGED`), at most :data:`INNER_CALLS_PER_REQUEST` of them, and names the
    workspace the caller named (:data:`WORKSPACE_HEADER`, a server key's choice)."""

    def __init__(self, app: ASGIApp, workspace: str | None) -> None:
        self.app = app
        self.workspace = workspace

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        outer = _request()
        made = outer.scope.setdefault("state", {})
        made[_INNER_CALLS] = calls = made.get(_INNER_CALLS, 0) + 1
        if calls > INNER_CALLS_PER_REQUEST:
            await error_response(errors.RateLimited(
                f"one request may make at most {INNER_CALLS_PER_REQUEST} requests of the "
                "store: ask for less at once (a store, a smaller page)"), "")(
                    scope, receive, send)
            return
        state = scope.setdefault("state", {})
        state[INNER_CALL] = outer.state.grant
        state[INNER_CHARGED] = calls > 1
        if self.workspace is not None:
            scope["headers"] = [*scope["headers"],
                                (WORKSPACE_HEADER.encode(), self.workspace.encode())]
        await self.app(scope, receive, send)


async def _buffered(request: Request) -> Receive:
    """The request's body read by the API's reader (its bounds), replayed to the SDK.

    :raises RequestTooLarge, RequestTimeout, ClientGone, TooManyRequests, UploadsFull:
    """
    body = await read_body(request)
    receive = request.receive
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
