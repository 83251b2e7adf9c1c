"""The HTTP API of API.md §1-4 as an ASGI app (Starlette): what ``anthropic==2.14.0`` speaks.

Every route translates a request into :class:`memfs.store.Store` calls and the result into the
SDK's wire shapes; every rule is the store's. Errors of any kind leave through one table,
:data:`ERRORS` (exception class -> HTTP status, ``error.type`` and ``details.error_code``), in
the envelope ``{"type": "error", "error": {...}, "request_id"}``. Every response carries a
``request-id`` header; every 4xx but 408/429 carries ``x-should-retry: false`` so the SDK's
default retries never repeat a deterministic failure (API.md §1.6).

Authentication: ``x-api-key: KEY`` or ``Authorization: Bearer KEY`` (``x-api-key`` wins when
both are sent). Versions written through the API are attributed to ``Actor.api(api_key_id)``,
``api_key_id`` being ``apikey_`` + a hash prefix of the key (:func:`api_key_id`), stable across
restarts and never the secret itself.

The store is synchronous; handlers call it in a worker thread (the Store is thread-safe), so a
write waiting for the SQLite lock never stalls the event loop. The session event streams (SSE)
share one database poller, :class:`EventHub`, however many are open.

memfs extensions (``x-memfs-extension`` in ``/openapi.json``; README "Remote mounts"), for
remote mounts: the ``x-memfs-session-id`` header (:data:`SESSION_HEADER`) makes a request act
as a session (memory writes become ``session_actor`` once :meth:`Store.session_writer` allows
them; the session's own tool events may be recorded); ``/v1/memfs/limits``;
``/v1/memfs/resolve_store`` (a store by id or name, the store's rule) and
``/v1/memory_stores/{id}/memfs/namesakes`` (the other live stores of its name);
``/v1/memory_stores/{id}/memfs/search`` and ``.../memfs/search_status`` (recall: memories by
their words and meaning, :mod:`memfs.api_search`);
``/v1/memory_stores/{id}/memory_versions/{id}/memfs/restore`` (Store.restore_version); the
filesystem's calls under ``/v1/memory_stores/{id}/memfs/`` (tree, stats, check_can_create,
write, delete, rename, rename_prefix, events), each one store transaction;
``/v1/sessions/{id}/memfs/revert`` (undo a session: Store.revert; docs/sessions.md) and
``/v1/sessions/{id}/memfs/tokens`` (a session token: the credential of a session's commands,
which the gate takes where it takes a key, for that session's stores only); and the store's
change feed, ``/changes`` and ``/changes/stream`` (SSE), served by :class:`ChangeHub` with one
database poller per store however many mounts follow it.

Known limitations:
- One workspace: ``anthropic-workspace-id`` is ignored, ``anthropic-beta`` is not checked.
- Sessions run no model; ``agent_with_overrides``, budgets, vaults and file resources are
  refused with 400, and ``sessions.list`` cannot filter by agent or deployment.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import secrets
import tempfile
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import IO, TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import api_search, apispec, dbwatch, errors, transfer
from .apispec import array, boolean, either, integer, obj, string, time
from .health import PATHS as HEALTH_PATHS
from .health import Health
from .models import Actor, Memory, MemoryVersion, SessionGrant
from .rules import _check_view, api_key_id, parse_int, slugify
from .store import SESSION_TOKEN_PREFIX, TOOL_EVENT_TYPES, UNSET, Store, no_session, no_store
from .uploads import Uploads, UploadsFull

if TYPE_CHECKING:
    from .pgwatch import PgWatch

log = logging.getLogger(__name__)

#: Largest request body accepted (a 100 kB memory is at most ~600 kB as escaped JSON).
MAX_BODY_BYTES = 4 * 1024 * 1024
#: Largest archive or zip ``POST /v1/memfs/import`` accepts (spooled to a temporary file past
#: :data:`IMPORT_SPOOL_BYTES`), and the seconds its upload may take in all.
MAX_IMPORT_BYTES = 512 * 1024 * 1024
IMPORT_SPOOL_BYTES = 1024 * 1024
IMPORT_TOTAL_SECONDS = 600.0
#: Seconds a request body may go without sending a byte, and seconds it may take in all,
#: before the request is answered 408 and its connection closed: a client that sends headers
#: and then stalls must not hold a connection (and a file descriptor) for ever.
BODY_IDLE_SECONDS = 10.0
BODY_TOTAL_SECONDS = 60.0
#: And past its first :data:`BODY_GRACE_SECONDS` a body must have come at
#: :data:`MIN_BODY_RATE` bytes per second at least: at 1 byte/s (a byte well within every
#: idle limit) a client held its connection for the whole :data:`BODY_TOTAL_SECONDS`.
BODY_GRACE_SECONDS = 5.0
MIN_BODY_RATE = 4096
#: Seconds between two looks at the database by the poller shared by all session event
#: streams, and between a stream's keepalive pings.
STREAM_POLL_SECONDS = 0.1
STREAM_PING_SECONDS = 15.0
#: Seconds between two looks at a session token's grant by a stream it opened
#: (:class:`_GrantedStream`): the longest a stream outlives its token.
GRANT_RECHECK_SECONDS = 5.0
#: ``sessions.events.list`` accepts up to this ``limit`` and clamps above it (API.md §4.1:
#: the SDK's session runner asks for 1,000).
EVENTS_MAX_LIMIT = 1000
#: Event types after which a session's stream ends (API.md §4.6).
STREAM_END_TYPES = ("session.deleted", "session.status_terminated")
#: The memfs extension header: a request carrying it acts as that session (README "Remote
#: mounts"): memory writes are attributed to its ``session_actor`` and it may record tool
#: events for it.
SESSION_HEADER = "x-memfs-session-id"
#: Seconds between two looks at the database by a store's shared change-feed poller, and
#: between keepalive pings on a change stream (short: a mount notices a dead link early).
CHANGES_POLL_SECONDS = 0.05
CHANGES_PING_SECONDS = 5.0
#: Change frames a store's feed keeps for subscribers that fall a little behind.
CHANGES_KEPT = 2000
#: Seconds between two tries of a stream's poll while the database cannot be reached (the
#: stream keeps its pings going meanwhile, and goes on when the database is back).
OUTAGE_RETRY_SECONDS = 1.0
#: ``initial_events`` of sessions.create (API.md §4.1): at most 50, of these types.
INITIAL_EVENT_TYPES = ("user.message", "user.define_outcome")
MAX_INITIAL_EVENTS = 50


class MethodNotAllowed(errors.InvalidRequest):
    """The path exists, the method does not."""


class RequestTooLarge(errors.InvalidRequest):
    """The whole request body is over :data:`MAX_BODY_BYTES`."""


class RequestTimeout(errors.InvalidRequest):
    """The request body did not arrive in time (:data:`BODY_IDLE_SECONDS`,
    :data:`BODY_TOTAL_SECONDS`)."""


class ClientGone(errors.InvalidRequest):
    """The client disconnected before its request body was complete (nobody reads the
    answer; it is not a server failure)."""


#: Exception -> (HTTP status, ``error.type``, ``error.details.error_code``); first match wins.
#: The error codes let :mod:`memfs.client` raise the exact :mod:`memfs.errors` subclass again.
ERRORS: list[tuple[type[BaseException], int, str, str | None]] = [
    (errors.NotFound, 404, "not_found_error", None),
    (errors.DirectoryNotEmpty, 409, "memory_path_conflict_error", "directory_not_empty"),
    (errors.NotADirectory, 409, "memory_path_conflict_error", "not_a_directory"),
    (errors.PathConflict, 409, "memory_path_conflict_error", None),
    (errors.PreconditionFailed, 409, "memory_precondition_failed_error", None),
    (errors.Conflict, 409, "conflict_error", None),
    (MethodNotAllowed, 405, "invalid_request_error", "method_not_allowed"),
    (RequestTooLarge, 413, "invalid_request_error", "request_too_large"),
    (RequestTimeout, 408, "timeout_error", "request_timeout"),
    (ClientGone, 400, "invalid_request_error", "client_disconnected"),
    (errors.PathTooLong, 400, "invalid_request_error", "path_too_long"),
    (errors.PathEncoding, 400, "invalid_request_error", "path_encoding"),
    (errors.InvalidPath, 400, "invalid_request_error", "invalid_path"),
    (errors.InvalidContent, 400, "invalid_request_error", "invalid_content"),
    (errors.ContentTooLarge, 400, "invalid_request_error", "content_too_large"),
    (errors.StoreArchived, 400, "invalid_request_error", "store_archived"),
    (errors.LimitExceeded, 400, "invalid_request_error", "limit_exceeded"),
    (errors.InvalidCursor, 400, "invalid_request_error", "invalid_cursor"),
    (errors.InvalidArchive, 400, "invalid_request_error", "invalid_archive"),
    (errors.ImportRejected, 400, "invalid_request_error", "import_rejected"),
    (errors.InvalidRequest, 400, "invalid_request_error", None),
    (errors.Unauthorized, 401, "authentication_error", None),
    (errors.ReadOnly, 403, "permission_error", "read_only"),
    (errors.Forbidden, 403, "permission_error", "forbidden"),
    (errors.TooManyRequests, 429, "rate_limit_error", "too_many_unfinished_requests"),
    (errors.Busy, 503, "overloaded_error", None),
    (errors.StorageFull, 507, "api_error", "storage_full"),
    (errors.StorageError, 503, "api_error", "storage_error"),
    (BaseException, 500, "api_error", None),
]


def error_body(exc: BaseException, request_id: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    """``(status, envelope, headers)`` for an exception, through :data:`ERRORS`."""
    status, type_, code = next((s, t, c) for cls, s, t, c in ERRORS if isinstance(exc, cls))
    # A bug says so without leaking internals.
    message = exc.message if isinstance(exc, errors.MemfsError) else "internal server error"
    err: dict[str, Any] = {"type": type_, "message": message}
    if code is not None:
        err["details"] = {"error_code": code}
    if isinstance(exc, errors.PathConflict):
        err["conflicting_memory_id"] = exc.conflicting_memory_id
        err["conflicting_path"] = exc.conflicting_path
    if isinstance(exc, errors.ImportRejected):
        err["skipped"] = exc.entries  # every entry that cannot be imported, with its reason
    headers = {}
    if 400 <= status < 500 and status not in (408, 429):
        headers["x-should-retry"] = "false"
    if isinstance(exc, errors.Busy):
        headers["retry-after"] = "1"
    if isinstance(exc, RequestTooLarge | RequestTimeout | errors.TooManyRequests | UploadsFull):
        headers["connection"] = "close"  # the rest of the body is never read
    return status, {"type": "error", "error": err, "request_id": request_id}, headers


def error_response(exc: BaseException, request_id: str) -> JSONResponse:
    status, body, headers = error_body(exc, request_id)
    return JSONResponse(body, status_code=status, headers=headers)


# --------------------------------------------------------------------------------------------
# authentication and request ids (a pure ASGI middleware, so that even 401s and unknown
# routes get a request-id)

#: Paths served without a key: the API description only.
PUBLIC_PATHS = frozenset({"/openapi.json"})


class _Gate:
    """Lets in the holders of a server key, and of a session token (:mod:`memfs.store`'s
    ``create_session_token``: the credential ``memfs run`` hands its agent), whose
    :class:`~memfs.models.SessionGrant` goes into ``scope["state"]["grant"]`` for
    :func:`_authorize` to check against each route."""

    def __init__(self, app: ASGIApp, keys: Iterable[str], store: Store | None = None,
                 only_session: str | None = None) -> None:
        self.app = app
        # sha256(key) -> api_key_id: a dict lookup on a digest leaks nothing about the key.
        self.keys = {hashlib.sha256(k.encode()).hexdigest(): api_key_id(k) for k in keys}
        self.store = store
        #: The session whose tokens alone are let in (None: every session's).
        self.only_session = only_session

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = "req_" + secrets.token_hex(12)
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)["request-id"] = request_id
            await send(message)

        if scope["path"] not in PUBLIC_PATHS:
            key = _presented_key(Request(scope))
            digest = hashlib.sha256(key.encode()).hexdigest() if key else None
            if digest in self.keys:
                scope["state"]["actor"] = Actor.api(self.keys[digest])
            else:
                try:
                    grant = await self._grant(key)
                except errors.MemfsError as exc:
                    if isinstance(exc, errors.Unauthorized):
                        log.info("refused %s %s: %s", scope.get("method"), scope["path"],
                                 exc.message)
                    await error_response(exc, request_id)(scope, receive, send_with_id)
                    return
                scope["state"]["actor"] = grant.actor()
                scope["state"]["grant"] = grant
                scope["state"]["token"] = key  # a stream looks at it again (_GrantedStream)
        started = False

        async def send_tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send_with_id(message)

        try:
            await self.app(scope, receive, send_tracked)
        except Exception as e:
            # A bug past the endpoints' own net: still the envelope, never a plain-text 500.
            log.exception("%s %s failed", scope.get("method"), scope["path"])
            if started:
                raise
            await error_response(e, request_id)(scope, receive, send_with_id)


    async def _grant(self, key: str | None) -> SessionGrant:
        """The grant of a session token.

        :raises Unauthorized: no key, a key that is not this server's, or a session token
            that is unknown, expired, or of a session that does not run (any more).
        :raises StorageError: the database could not tell.
        """
        if key and key.startswith(SESSION_TOKEN_PREFIX) and self.store is not None:
            grant: SessionGrant = await anyio.to_thread.run_sync(self.store.session_grant, key)
            if self.only_session is not None and grant.session_id != self.only_session:
                raise errors.Unauthorized(
                    f"this is the API of session {self.only_session}: a token of another "
                    "session does not open it")
            return grant
        raise errors.Unauthorized(
            "invalid API key: not one of this server's keys (the memfs CLI sends "
            "--api-key or $MEMFS_API_KEY)" if key else
            "missing API key: send 'x-api-key: KEY' or 'Authorization: Bearer KEY' "
            "(the memfs CLI: --api-key or $MEMFS_API_KEY)"
        )


def _presented_key(request: Request) -> str | None:
    """The key a request carries: ``x-api-key`` first, then ``Authorization: Bearer``."""
    key = request.headers.get("x-api-key")
    if key:
        return key.strip()
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


# --------------------------------------------------------------------------------------------
# request parsing


async def _read_json(request: Request, fields: Sequence[apispec.Param]) -> dict[str, Any]:
    """The JSON object body, checked against the operation's declared ``fields``
    (:func:`memfs.apispec.check_body`); empty means ``{}``.

    :raises RequestTooLarge, RequestTimeout, ClientGone, InvalidRequest:
    """
    raw = await _read_body(request)
    if not raw.strip():
        body: Any = {}
    else:
        try:
            body = json.loads(raw, parse_constant=_no_constant)
        except (ValueError, RecursionError) as e:
            raise errors.InvalidRequest(f"request body is not valid JSON: {e}") from None
    return apispec.check_body(body, fields)


async def _body_chunks(request: Request, max_bytes: int, total_seconds: float,
                       what: str) -> AsyncIterator[bytes]:
    """The body's chunks: at most ``max_bytes`` in all, each chunk within
    :data:`BODY_IDLE_SECONDS`, past :data:`BODY_GRACE_SECONDS` at :data:`MIN_BODY_RATE` on
    average, all within ``total_seconds`` (``what`` names the body in the errors). The body
    holds one of the app's :class:`~memfs.uploads.Uploads` while it is read: none free, it is
    not read at all.

    :raises RequestTooLarge, RequestTimeout, ClientGone, TooManyRequests, UploadsFull:
    """
    state = request.scope.get("state", {})
    uploads: Uploads = state.get("uploads") or _UNBOUNDED
    client = request.client.host if request.client else ""
    actor, user = state.get("actor"), state.get("user")
    key = actor.id if actor is not None else getattr(user, "key_id", None)
    with uploads.hold(client, key):
        size = 0
        start = anyio.current_time()
        last = start
        stream = request.stream()
        try:
            while True:
                # The next chunk is due within the idle limit, at the minimum average rate
                # past the grace period, and within the whole body's time.
                due = min(last + BODY_IDLE_SECONDS,
                          start + BODY_GRACE_SECONDS + size / MIN_BODY_RATE,
                          start + total_seconds)
                with anyio.move_on_at(due) as timer:
                    chunk = await anext(stream, None)
                if timer.cancelled_caught:
                    raise RequestTimeout(
                        f"the {what} did not arrive in time ({size} bytes in "
                        f"{anyio.current_time() - start:.1f} s; allowed: "
                        f"{BODY_IDLE_SECONDS:g} s without data, {MIN_BODY_RATE} bytes/s "
                        f"after the first {BODY_GRACE_SECONDS:g} s, {total_seconds:g} s in all)"
                    )
                if chunk is None:
                    return
                last = anyio.current_time()
                size += len(chunk)
                if size > max_bytes:
                    raise RequestTooLarge(f"{what} over {max_bytes} bytes")
                yield chunk
        except ClientDisconnect:
            raise ClientGone("the client disconnected before sending the whole body") from None
        finally:
            await stream.aclose()


#: The bodies of an app that was given no :class:`Uploads` (never in ``create_app``).
_UNBOUNDED = Uploads(total=1 << 62, per_client=1 << 62, per_key=1 << 62)


async def _read_body(request: Request) -> bytes:
    """The whole body, at most :data:`MAX_BODY_BYTES`, within :data:`BODY_TOTAL_SECONDS`.

    :raises RequestTooLarge, RequestTimeout, ClientGone:
    """
    chunks = _body_chunks(request, MAX_BODY_BYTES, BODY_TOTAL_SECONDS, "request body")
    return b"".join([chunk async for chunk in chunks])


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@dataclass
class Call:
    """What a handler gets: the request, the store, the caller, the checked query and body,
    and the app's shared pollers of change feeds and session events."""

    request: Request
    store: Store
    body: dict[str, Any]
    #: The declared query parameters, checked (:class:`memfs.apispec.Query`).
    q: apispec.Query
    hub: ChangeHub
    events: EventHub
    writes: WriteBatcher

    @property
    def p(self) -> Mapping[str, str]:
        return self.request.path_params

    @property
    def actor(self) -> Actor:
        actor: Actor = self.request.state.actor
        return actor

    @property
    def grant(self) -> SessionGrant | None:
        """The session token's grant (None: a server key)."""
        grant: SessionGrant | None = getattr(self.request.state, "grant", None)
        return grant

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a store method in a worker thread."""
        return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))

    async def read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a short store read on the event loop when it cannot wait (the store's
        ``nowait`` mode: a WAL reader never waits on the writer, and no worker thread is worth
        its handoff for a point look-up), else in a worker thread."""
        try:
            with self.store.nowait():
                return fn(*args, **kwargs)
        except errors.WouldBlock:
            return await self.run(fn, *args, **kwargs)

    async def write(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a store write method, committed together with the writes of other requests
        waiting at the same moment (:class:`WriteBatcher`); returns once it is durable."""
        return await self.writes.run(partial(fn, *args, **kwargs))


#: Pages of ``memories.list`` (basic view) up to this many read on the event loop
#: (:meth:`Call.read`); longer ones in a worker thread.
SHORT_PAGE = 100
#: Most writes one group commit of :class:`WriteBatcher` holds.
BATCH_MAX_CALLS = 64


class _Waiting:
    """One write waiting in a :class:`WriteBatcher`."""

    __slots__ = ("fn", "woken", "lead", "outcome", "done")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.woken = anyio.Event()
        self.lead = False  # woken to commit the next batch, not with its outcome
        self.outcome: Any = None
        self.done = False


class WriteBatcher:
    """Group commit of the API's writes: write requests that arrive while a commit is under way
    wait, and the next commit takes them all (up to :data:`BATCH_MAX_CALLS`) as one
    transaction (:meth:`Store.batch`: one lock, one fsync, one worker thread for the lot,
    each write in a savepoint of its own so a refused one fails alone). Every request is
    answered after the commit that holds its write.

    No task of its own: the first request to find no commit under way commits a batch (its
    own write first) and, when it ends, wakes the oldest waiting request to commit the next.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._queue: deque[_Waiting] = deque()
        self._busy = False

    async def run(self, fn: Callable[[], Any]) -> Any:
        me = _Waiting(fn)
        self._queue.append(me)
        if self._busy:
            try:
                await me.woken.wait()
            except BaseException:  # cancelled while waiting: its write never ran
                with contextlib.suppress(ValueError):  # unless a batch took it just now
                    self._queue.remove(me)
                if me.lead:
                    self._next()
                raise
        if not me.done:  # this request commits the next batch (its own write first)
            self._busy = True
            batch: list[_Waiting] = []

            def take() -> list[Callable[[], Any]]:
                # In the worker thread, once the write lock is held (another process's commit
                # may have held it a while): every write queued by then, this one first.
                n = min(len(self._queue), BATCH_MAX_CALLS)
                batch.extend(self._queue.popleft() for _ in range(n))
                return [w.fn for w in batch]

            outcomes: list[Any] = []
            try:
                # Shielded: the batch holds other requests' writes, so this request being
                # cancelled (its client gone) must not stop it before or while it commits.
                with anyio.CancelScope(shield=True):
                    outcomes = await anyio.to_thread.run_sync(self.store.batch, take)
            except Exception as e:  # a bug: every request of the batch answers with it
                if not batch:
                    take()
                outcomes = [e] * len(batch)
                raise
            finally:
                if not batch:  # the batch failed before it took its writes
                    take()
                if len(outcomes) != len(batch):
                    outcomes = [errors.StorageError("the write was not committed")] * len(batch)
                for w, outcome in zip(batch, outcomes, strict=True):
                    w.outcome, w.done = outcome, True
                    if w is not me:
                        w.woken.set()
                self._next()
        if isinstance(me.outcome, BaseException):
            raise me.outcome
        return me.outcome

    def _next(self) -> None:
        """Wake the oldest waiting request to commit the next batch, if any."""
        if self._queue:
            first = self._queue[0]
            first.lead = True
            first.woken.set()
        else:
            self._busy = False


def _acting_session(c: Call) -> str | None:
    """The session a request acts as (:data:`SESSION_HEADER`, or a session token's), or
    None."""
    if c.grant is not None:
        return c.grant.session_id
    return c.request.headers.get(SESSION_HEADER) or None


def _authorize(op: Op, grant: SessionGrant, request: Request) -> None:
    """May a session token make this call (:attr:`Op.token`)? Its session's attached stores
    with their access, its own session, nothing else: another store or session is a 404 with
    the body of one that does not exist; a write to a read_only store is a 403.

    :raises Forbidden, NotFound, ReadOnly:
    """
    params = request.path_params
    # What the token may not see first, as if it did not exist; then what it may not do.
    session_id = params.get("session_id")
    if session_id is not None and session_id != grant.session_id:
        raise no_session(session_id)
    store_id = params.get("memory_store_id")
    access = grant.access.get(store_id) if store_id is not None else None
    if store_id is not None and access is None:
        raise no_store(store_id)
    if not op.token:
        raise errors.Forbidden(
            f"a session token cannot call {op.sdk.split(' (')[0]} ({request.method} "
            f"{request.url.path}): it acts as its session {grant.session_id} on that "
            "session's memory stores only")
    acting = request.headers.get(SESSION_HEADER)
    if acting and acting != grant.session_id:
        raise errors.Forbidden(f"a session token acts as its own session "
                               f"({grant.session_id}) only, not as {acting}")
    if op.token == "write" and access != "read_write":
        raise errors.ReadOnly(
            f"memory store {store_id} is attached read_only to session {grant.session_id}")


async def _writer(c: Call) -> Actor:
    """Who a memory write is attributed to: the API key, or, for a request acting as a
    session, that session (the store checks it may write this store)."""
    session_id = _acting_session(c)
    if session_id is None:
        return c.actor
    actor: Actor = await c.run(c.store.session_writer, session_id, c.p["memory_store_id"])
    return actor


def _view(c: Call, default: str) -> str:
    """The ``view`` asked for (the store's rule: basic or full)."""
    return _check_view(c.q.text("view") or default)


def _shown(m: Memory | MemoryVersion, view: str) -> dict[str, Any]:
    return (dataclasses.replace(m, content=None) if view == "basic" else m).to_dict()


# --------------------------------------------------------------------------------------------
# memory stores, memories, versions (API.md §2)


async def create_memory_store(c: Call) -> Any:
    b = c.body
    return await c.run(c.store.create_store, b["name"], b.get("description"), b.get("metadata"))


async def retrieve_memory_store(c: Call) -> Any:
    return await c.run(c.store.get_store, c.p["memory_store_id"])


async def update_memory_store(c: Call) -> Any:
    b = c.body
    return await c.run(
        c.store.update_store,
        c.p["memory_store_id"],
        name=b.get("name"),
        description=b.get("description"),
        metadata=b.get("metadata"),
    )


async def list_memory_stores(c: Call) -> Any:
    q = c.q
    return await c.run(
        c.store.list_stores,
        include_archived=q.flag("include_archived", False),
        created_at_gte=q.text("created_at[gte]"),
        created_at_lte=q.text("created_at[lte]"),
        limit=q.integer("limit", 20),
        page=q.text("page"),
        ids=None if c.grant is None else list(c.grant.access),
    )


async def delete_memory_store(c: Call) -> Any:
    await c.run(c.store.delete_store, c.p["memory_store_id"])
    return {"id": c.p["memory_store_id"], "type": "memory_store_deleted"}


async def archive_memory_store(c: Call) -> Any:
    return await c.run(c.store.archive_store, c.p["memory_store_id"])


async def create_memory(c: Call) -> Any:
    view = _view(c, "basic")
    m = await c.write(
        c.store.create_memory, c.p["memory_store_id"], c.body["path"], c.body["content"],
        actor=await _writer(c),
    )
    return _shown(m, view)


async def retrieve_memory(c: Call) -> Any:
    view = _view(c, "full")
    return await c.read(c.store.get_memory, c.p["memory_store_id"], c.p["memory_id"], view=view)


def _precondition(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") != "content_sha256":
        raise errors.InvalidRequest(
            "precondition must be {'type': 'content_sha256', 'content_sha256': '<hex>'}"
        )
    sha = value.get("content_sha256")
    if not isinstance(sha, str):
        raise errors.InvalidRequest("precondition.content_sha256 is required")
    return sha


async def update_memory(c: Call) -> Any:
    view = _view(c, "basic")
    b = c.body
    m = await c.write(
        c.store.update_memory,
        c.p["memory_store_id"],
        c.p["memory_id"],
        content=b.get("content"),
        path=b.get("path"),
        precondition_sha256=_precondition(b.get("precondition")),
        actor=await _writer(c),
    )
    return _shown(m, view)


async def list_memories(c: Call) -> Any:
    q = c.q
    limit, view = q.integer("limit", 20), _view(c, "basic")
    # A short page of the basic view is a quick read: on the loop; a long one in a thread.
    short = view == "basic" and limit is not None and limit <= SHORT_PAGE
    return await (c.read if short else c.run)(
        c.store.list_memories,
        c.p["memory_store_id"],
        path_prefix=q.text("path_prefix"),
        depth=q.integer("depth", 0),
        limit=limit,
        page=q.text("page"),
        view=view,
    )


async def delete_memory(c: Call) -> Any:
    await c.write(
        c.store.delete_memory,
        c.p["memory_store_id"],
        c.p["memory_id"],
        expected_sha256=c.q.text("expected_content_sha256"),
        actor=await _writer(c),
    )
    return {"id": c.p["memory_id"], "type": "memory_deleted"}


async def list_memory_versions(c: Call) -> Any:
    q = c.q
    return await c.run(
        c.store.list_versions,
        c.p["memory_store_id"],
        memory_id=q.text("memory_id"),
        operation=q.text("operation"),
        session_id=q.text("session_id"),
        api_key_id=q.text("api_key_id"),
        service_account_id=q.text("service_account_id"),
        user_id=q.text("user_id"),
        created_at_gte=q.text("created_at[gte]"),
        created_at_lte=q.text("created_at[lte]"),
        limit=q.integer("limit", 20),
        page=q.text("page"),
        view=_view(c, "basic"),
    )


async def retrieve_memory_version(c: Call) -> Any:
    return await c.run(
        c.store.get_version, c.p["memory_store_id"], c.p["memory_version_id"],
        view=_view(c, "full"),
    )


async def restore_memory_version(c: Call) -> Any:
    """Bring back a version's content (:meth:`Store.restore_version`: a deleted memory comes
    back under its own id), so that a remote CLI restores as a local one does."""
    m = await c.write(c.store.restore_version, c.p["memory_store_id"],
                      c.p["memory_version_id"], path=c.body.get("path"),
                      actor=await _writer(c))
    return _with_seq(m)


async def redact_memory_version(c: Call) -> Any:
    return await c.run(
        c.store.redact_version, c.p["memory_store_id"], c.p["memory_version_id"], actor=c.actor
    )


# --------------------------------------------------------------------------------------------
# agents and environments (just enough for sessions.create)

_AGENT_FIELDS = (either("model!", "string", "object"), string("name!"), string("description"),
                 obj("execution_identity"), array("mcp_servers"), obj("metadata"),
                 obj("multiagent"), array("skills"), string("system"), array("tools"))
_ENVIRONMENT_FIELDS = (string("name!"), obj("config"), string("description"), obj("metadata"),
                       string("scope", enum=("organization", "account")))


async def create_agent(c: Call) -> Any:
    return await c.run(c.store.create_agent, **{f.name: c.body.get(f.name)
                                                 for f in _AGENT_FIELDS})


async def retrieve_agent(c: Call) -> Any:
    return await c.run(c.store.get_agent, c.p["agent_id"], version=c.q.integer("version", None))


async def create_environment(c: Call) -> Any:
    return await c.run(c.store.create_environment, **{f.name: c.body.get(f.name)
                                                       for f in _ENVIRONMENT_FIELDS})


async def retrieve_environment(c: Call) -> Any:
    return await c.run(c.store.get_environment, c.p["environment_id"])


# --------------------------------------------------------------------------------------------
# sessions (API.md §4)


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


async def create_session(c: Call) -> Any:
    b = c.body
    _refuse_features(b)
    initial = _initial_events(b.get("initial_events"))
    agent = b.get("agent")
    snapshot = None if agent is None else await c.run(c.store.agent_snapshot, agent)
    # memfs extension: the launcher of a remote session (memfs run --url) mounts under its
    # own root, and the resources' mount_path must say where.
    root = b.get("memfs_mount_root")
    session = await c.run(
        c.store.create_session,
        b.get("resources") or [],
        agent=snapshot,
        environment_id=b.get("environment_id"),
        metadata=b.get("metadata"),
        title=b.get("title"),
        **({} if root is None else {"root": root}),
    )
    if initial:
        try:
            await c.run(c.store.send_events, session.id, initial)
        except errors.MemfsError:
            # All or nothing: a session whose initial events were refused is not kept.
            await c.run(c.store.delete_session, session.id)
            raise
    return session


async def set_session_status(c: Call) -> Any:
    """memfs extension: the launcher of a remote session reports it running or terminated."""
    return await c.run(c.store.set_session_status, c.p["session_id"], c.body["status"])


async def revert_session(c: Call) -> Any:
    """memfs extension: undo a session, or an earlier revert (its ``memrevert_`` id in place
    of the session id): Store.revert, attributed to the caller's key (README "Undo a
    session")."""
    if c.request.query_params:
        # Ignoring ?dry_run=true would revert for real.
        raise errors.InvalidRequest("this endpoint takes no query parameters: send dry_run and "
                                    "force in the JSON body")
    b = c.body
    return await c.run(c.store.revert, c.p["session_id"], actor=c.actor,
                       dry_run=b.get("dry_run") or False, force=b.get("force") or False)


async def create_session_token(c: Call) -> Any:
    ttl = c.body.get("ttl_seconds")
    return await c.run(c.store.create_session_token, c.p["session_id"], ttl_seconds=ttl)


async def retrieve_session(c: Call) -> Any:
    return await c.run(c.store.get_session, c.p["session_id"])


async def update_session(c: Call) -> Any:
    b = c.body
    _refuse_features(b)
    if b.get("agent") is not None:
        raise errors.InvalidRequest("a session's agent cannot be changed in memfs")
    title = b.get("title")
    return await c.run(
        c.store.update_session,
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
        c.store.list_sessions,
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
        ids=None if c.grant is None else [c.grant.session_id],
    )
    return {**page.to_dict(), "prev_page": page.prev_page}


async def delete_session(c: Call) -> Any:
    await c.run(c.store.delete_session, c.p["session_id"])
    return {"id": c.p["session_id"], "type": "session_deleted"}


async def archive_session(c: Call) -> Any:
    return await c.run(c.store.archive_session, c.p["session_id"])


async def list_session_resources(c: Call) -> Any:
    return await c.run(
        c.store.list_session_resources,
        c.p["session_id"],
        limit=c.q.integer("limit", None),
        page=c.q.text("page"),
    )


async def retrieve_session_resource(c: Call) -> Any:
    return await c.run(c.store.get_session_resource, c.p["session_id"], c.p["resource_id"])


async def delete_session_resource(c: Call) -> Any:
    await c.run(c.store.delete_session_resource, c.p["session_id"], c.p["resource_id"])


async def add_session_resource(c: Call) -> Any:
    await c.run(c.store.get_session, c.p["session_id"])
    raise errors.InvalidRequest(
        "memfs sessions hold only the memory stores attached at creation; "
        "file resources are not supported"
    )


async def update_session_resource(c: Call) -> Any:
    await c.run(c.store.get_session_resource, c.p["session_id"], c.p["resource_id"])
    raise errors.InvalidRequest("memory store resources cannot be updated")


async def list_session_events(c: Call) -> Any:
    q = c.q
    limit = q.integer("limit", 20)
    return await c.run(
        c.store.list_events,
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


async def send_session_events(c: Call) -> Any:
    session_id = c.p["session_id"]
    events = c.body["events"]
    store_id = c.body.get("memory_store_id")
    if _acting_session(c) == session_id and _all_tool_events(events):
        # A mount acting as this session (memfs extension): its tool events, ids kept.
        recorded = await c.run(c.store.add_tool_events, session_id, events, store_id=store_id)
    else:
        if store_id is not None:
            raise errors.InvalidRequest(
                f"memory_store_id is accepted only with tool events sent by a mount acting as "
                f"this session ({SESSION_HEADER}: {session_id})"
            )
        recorded = await c.run(c.store.send_events, session_id, events)
    return {"data": [e.to_dict() for e in recorded]}


def _all_tool_events(events: Any) -> bool:
    return isinstance(events, list) and bool(events) and all(
        isinstance(e, dict) and e.get("type") in TOOL_EVENT_TYPES for e in events
    )


async def stream_session_events(c: Call) -> Any:
    session_id = c.p["session_id"]
    await c.run(c.store.get_session, session_id)
    start = await c.run(c.store.last_event_seq, session_id)
    return _sse_response(c, c.events.stream(session_id, start))


def _sse_response(c: Call, frames: AsyncIterator[bytes]) -> StreamingResponse:
    """A live SSE response: not cached, not buffered by a proxy (nginx reads
    ``x-accel-buffering``); under a session token, only while the token is valid."""
    headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
    if c.grant is None:
        return StreamingResponse(frames, media_type="text/event-stream", headers=headers)
    return _GrantedStream(frames, c.store, c.request.state.token, media_type="text/event-stream",
                          headers=headers)


class _GrantedStream(StreamingResponse):
    """A stream opened with a session token. The token was checked when the request came in,
    and a stream is one request that lasts: its grant is looked at again every
    :data:`GRANT_RECHECK_SECONDS`, and the stream ends (cleanly: its last body message) once
    the token is refused (its session stopped running, it expired). A database that cannot
    answer the look does not end it: the stream itself waits out outages."""

    def __init__(self, frames: AsyncIterator[bytes], store: Store, token: str,
                 **kwargs: Any) -> None:
        super().__init__(frames, **kwargs)
        self.store, self.token = store, token

    async def _still_granted(self) -> bool:
        try:
            await anyio.to_thread.run_sync(self.store.session_grant, self.token)
        except errors.Unauthorized as e:
            log.info("a session token's stream ends: %s", e.message)
            return False
        except errors.MemfsError as e:
            log.debug("a session token's grant could not be looked at: %s", e.message)
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        revoked = False
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                nonlocal revoked
                while True:
                    await anyio.sleep(GRANT_RECHECK_SECONDS)
                    if not await self._still_granted():
                        revoked = True
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(watch)
            try:
                await super().__call__(scope, receive, send)
            finally:
                tg.cancel_scope.cancel()
                # Cut off while suspended at a yield, the frames would be closed only when
                # collected: their subscriber counts and hub marks are released now.
                close = getattr(self.body_iterator, "aclose", None)
                if close is not None:
                    with anyio.CancelScope(shield=True):
                        await close()
        if revoked:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


def sse_frame(event: str, data: Any, id_: str | None = None) -> bytes:
    """One SSE frame; every frame names its event (the SDK drops frames without one)."""
    lines = [f"event: {event}"]
    if id_ is not None:
        lines.append(f"id: {id_}")
    lines.append("data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


class _Outage:
    """What the live streams of one hub say when the database cannot be reached: one warning
    when the first poll fails, one line when one succeeds again, nothing in between (the
    streams wait, pinging, and try again every :data:`OUTAGE_RETRY_SECONDS`)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.since: float | None = None

    def failed(self, e: errors.MemfsError) -> None:
        if self.since is None:
            self.since = anyio.current_time()
            log.warning("%s wait: the database cannot be reached (%s); trying again every "
                        "%g s", self.what, e.message, OUTAGE_RETRY_SECONDS)

    def answered(self) -> None:
        if self.since is not None:
            log.info("%s go on: the database answers again after %.1f s", self.what,
                     anyio.current_time() - self.since)
            self.since = None


#: The errors of a database that cannot answer now (a restart, a failover, a full pool): a
#: live stream waits them out instead of failing.
_UNAVAILABLE = (errors.StorageError, errors.Busy)


class EventHub:
    """Serves session event streams with one database poller for all of them: each poll asks
    :meth:`Store.event_marks` which sessions have new events, and wakes only their streams.
    One of the streams is the poller (no background task outlives the streams); when it ends,
    another takes over. An idle stream sleeps until its session has news or its keepalive ping
    is due. Events written by any process (the CLI, a mount) are seen: the database is what is
    polled."""

    def __init__(self, store: Store, interval: float = STREAM_POLL_SECONDS,
                 ping: float = STREAM_PING_SECONDS) -> None:
        self.store = store
        self.interval = interval
        self.ping = ping
        #: The database's newest event seq at the last poll (None: no poll since idle).
        self.seq: int | None = None
        #: Newest event seq per followed session, as of the last poll.
        self.marks: dict[str, int] = {}
        self.subscribers: dict[str, int] = {}
        #: Set (and dropped) when a poll finds news for the session.
        self._wake: dict[str, anyio.Event] = {}
        self._poller: object | None = None
        self.next_poll = 0.0
        #: Database polls made, for tests and statistics.
        self.polls = 0
        self.outage = _Outage("session event streams")

    def statistics(self) -> dict[str, int]:
        return {"sessions": len(self.subscribers), "polls": self.polls,
                "subscribers": sum(self.subscribers.values())}

    async def stream(self, session_id: str, after: int) -> AsyncIterator[bytes]:
        """SSE frames of the events processed after ``after``, until the session ends; a
        ``ping`` first and after every :attr:`ping` seconds of silence, so that proxies do not
        close an idle stream."""
        me = object()
        self.subscribers[session_id] = self.subscribers.get(session_id, 0) + 1
        try:
            yield sse_frame("ping", {"type": "ping"})
            quiet_since = anyio.current_time()
            read_to: int | None = None  # the hub mark this stream has read the database to
            retry_at = 0.0  # a read the database could not answer is tried again then
            while True:
                if self._poller is None:
                    self._poller = me
                mark = self.marks.get(session_id, 0)
                # Once after the hub's first poll (events older than its position), then
                # whenever a poll saw new events of this session.
                if self.seq is not None and (read_to is None or mark > read_to) and (
                        anyio.current_time() >= retry_at):
                    try:
                        batch = await anyio.to_thread.run_sync(
                            self.store.events_after, session_id, after)
                    except _UNAVAILABLE as e:  # wait (pinging) and read again
                        self.outage.failed(e)
                        retry_at = anyio.current_time() + OUTAGE_RETRY_SECONDS
                    else:
                        for after, event in batch:  # noqa: B007 (where the next read starts)
                            yield sse_frame(event.type, event.to_dict(), event.id)
                            if event.type in STREAM_END_TYPES:
                                return
                        if batch:
                            quiet_since = anyio.current_time()
                            continue  # read again until the database has no more
                        read_to = mark
                        continue
                now = anyio.current_time()
                if now - quiet_since >= self.ping:
                    yield sse_frame("ping", {"type": "ping"})
                    quiet_since = now
                    continue  # look again: the consumer may have taken its time
                polling = self._poller is me
                if polling and now >= self.next_poll:
                    await self._poll()
                    continue
                # No await since the checks above: no news can slip in before the wait.
                wake = self._wake.setdefault(session_id, anyio.Event())
                timeout = quiet_since + self.ping - now
                if polling:
                    timeout = min(timeout, self.next_poll - now)
                if retry_at > now:
                    timeout = min(timeout, retry_at - now)
                with anyio.move_on_after(timeout):
                    await wake.wait()
        finally:
            self.subscribers[session_id] -= 1
            if not self.subscribers[session_id]:
                del self.subscribers[session_id]
                self.marks.pop(session_id, None)
            if self._poller is me:
                self._poller = None
                self._wake_all()  # one of them takes over
            if not self.subscribers:
                self.seq = None  # nobody follows: the next stream starts from the present

    async def _poll(self) -> None:
        """Ask the database which followed sessions have news; one that cannot answer is
        asked again in :data:`OUTAGE_RETRY_SECONDS`, the streams pinging meanwhile."""
        wait = self.interval
        try:
            self.polls += 1
            first = self.seq is None
            try:
                last, marks = await anyio.to_thread.run_sync(self.store.event_marks, self.seq)
            except _UNAVAILABLE as e:
                self.outage.failed(e)
                wait = OUTAGE_RETRY_SECONDS
                return
            self.outage.answered()
            self.seq = last if self.seq is None else max(self.seq, last)
            for session_id, seq in marks.items():
                if session_id in self.subscribers:
                    self.marks[session_id] = max(self.marks.get(session_id, 0), seq)
                    wake = self._wake.pop(session_id, None)
                    if wake is not None:
                        wake.set()
            if first:
                self._wake_all()  # every stream reads what came before the hub's position
        finally:
            self.next_poll = anyio.current_time() + wait

    def _wake_all(self) -> None:
        wakes, self._wake = self._wake, {}
        for wake in wakes.values():
            wake.set()


# --------------------------------------------------------------------------------------------
# memfs extensions for remote mounts (README "Remote mounts"; x-memfs-extension in OpenAPI):
# the filesystem's store calls, each one store transaction, and the store's change feed.


async def get_limits(c: Call) -> Any:
    return dataclasses.asdict(c.store.limits)


async def resolve_store(c: Call) -> Any:
    """A store by id or name, by the store's own rule (:meth:`Store.resolve_store`), so that a
    remote CLI names stores exactly as a local one does."""
    return await c.run(c.store.resolve_store, c.q.text("ref"),
                       among=None if c.grant is None else list(c.grant.access))


async def store_namesakes(c: Call) -> Any:
    """The other live stores with this store's name (:meth:`Store.namesakes`), so that a
    remote CLI warns of a name in use as a local one does."""
    found = await c.run(c.store.namesakes, c.p["memory_store_id"])
    return {"data": [s.to_dict() for s in found]}


async def get_tree(c: Call) -> Any:
    sid = c.p["memory_store_id"]
    # The feed position first: a change racing the read is replayed, harmlessly.
    seq = await c.run(c.store.last_change, sid)
    tree = await c.run(c.store.tree, sid)
    return {"data": [m.to_dict() for m in tree], "last_seq": seq}


async def get_snapshot(c: Call) -> Any:
    """The store as it was at ``at`` (README "Time travel"), basic view: a time-travel mount
    reads each version in effect with ``memory_versions.retrieve``."""
    snap = await c.run(c.store.snapshot, c.p["memory_store_id"], c.q.text("at"),
                       viewer=None if c.grant is None else c.grant.session_id)
    return snap.to_dict()


async def get_stats(c: Call) -> Any:
    sid = c.p["memory_store_id"]
    count = await c.run(c.store.count_memories, sid)
    return {"memory_count": count, "last_seq": await c.run(c.store.last_change, sid)}


async def check_can_create(c: Call) -> Any:
    await _writer(c)
    await c.run(c.store.check_can_create, c.p["memory_store_id"])
    return {"ok": True}


def _with_seq(m: Memory) -> dict[str, Any]:
    """A memory written through a path extension, with the change-feed position of the write
    (``memfs_seq``): a remote mount orders the states it sees by it."""
    return {**m.to_dict(), "memfs_seq": m.seq}


async def write_path(c: Call) -> Any:
    b = c.body
    m = await c.write(c.store.write_path, c.p["memory_store_id"], b["path"], b["content"],
                    actor=await _writer(c), events=b.get("events"))
    return _with_seq(m)


async def delete_path(c: Call) -> Any:
    return await c.write(c.store.delete_path, c.p["memory_store_id"], c.body["path"],
                       actor=await _writer(c), events=c.body.get("events"))


async def rename_path(c: Call) -> Any:
    b = c.body
    replace = b.get("replace")
    m = await c.write(c.store.rename_path, c.p["memory_store_id"], b["old_path"],
                    b["new_path"], actor=await _writer(c), replace=replace is not False,
                    events=b.get("events"))
    return _with_seq(m)


async def rename_prefix(c: Call) -> Any:
    b = c.body
    moved = await c.run(c.store.rename_prefix, c.p["memory_store_id"], b["old_prefix"],
                        b["new_prefix"], actor=await _writer(c), events=b.get("events"))
    return {"data": [_with_seq(m) for m in moved]}


async def record_store_events(c: Call) -> Any:
    recorded = await c.run(c.store.add_tool_events, _acting_session(c), c.body["events"],
                           store_id=c.p["memory_store_id"])
    return {"data": [e.to_dict() for e in recorded]}


def change_frames(
    store: Store, store_id: str, after: int, limit: int = 1000
) -> list[dict[str, Any]]:
    """The store's changes after ``after`` as wire objects; a ``put`` carries ``memory``, the
    memory as it is now (basic view; None once deleted), so that a mount needs no other
    request to apply it."""
    out = []
    memories: dict[str, dict[str, Any] | None] = {}
    for ch in store.changes_since(store_id, after, limit):
        frame: dict[str, Any] = {"type": "memfs.change", "seq": ch.seq, "op": ch.op,
                                 "memory_id": ch.memory_id, "path": ch.path,
                                 "old_path": ch.old_path}
        if ch.op == "put" and ch.memory_id is not None:
            if ch.memory_id not in memories:
                try:
                    memories[ch.memory_id] = store.get_memory(
                        store_id, ch.memory_id, view="basic").to_dict()
                except errors.NotFound:
                    memories[ch.memory_id] = None
            frame["memory"] = memories[ch.memory_id]
        out.append(frame)
    return out


def _after(c: Call) -> int | None:
    after = c.q.integer("after", None)
    if after is None:
        last_id = c.request.headers.get("last-event-id")  # an SSE client reconnecting
        if last_id:
            after = parse_int(last_id)
            if after is None:
                raise errors.InvalidRequest(
                    f"Last-Event-ID must be a change seq, not {last_id[:40]!r}")
    if after is not None and after < 0:
        raise errors.InvalidRequest("after must be a change seq (>= 0)")
    return after


async def _feed_position(c: Call) -> int:
    """The store's newest change seq; :raises NotFound: a store that never existed (a deleted
    store still has the change that says so)."""
    sid = c.p["memory_store_id"]
    last: int = await c.run(c.store.last_change, sid)
    if last == 0:
        await c.run(c.store.get_store, sid)
    return last


async def list_changes(c: Call) -> Any:
    sid = c.p["memory_store_id"]
    limit = c.q.integer("limit", 1000)
    if limit is None or not 0 <= limit <= 1000:
        raise errors.InvalidRequest("limit must be between 0 and 1000")
    last = await _feed_position(c)
    after = _after(c)
    if after is None:
        after = last
    if after > last:  # a position this feed never had (another database): start over
        return {"data": [], "last_seq": last, "reset": True}
    try:
        frames = await c.run(change_frames, c.store, sid, after, limit) if limit else []
    except errors.FeedGap:  # changes after that position were pruned: start over too
        return {"data": [], "last_seq": last, "reset": True}
    return {"data": frames, "last_seq": last, "reset": False}


async def stream_changes(c: Call) -> Any:
    last = await _feed_position(c)
    after = _after(c)
    return _sse_response(
        c, c.hub.stream(c.p["memory_store_id"], last if after is None else after, last)
    )


# memfs extensions: import and export (memfs/transfer.py; README "Import and export")


async def export_store(c: Call) -> Any:
    """The archive, streamed: gzip chunks made a page of memories at a time in a worker
    thread, so memory stays flat whatever the store's size; one snapshot of the store,
    released when the response ends (a client gone mid-download included)."""
    store = await c.run(c.store.get_store, c.p["memory_store_id"])  # 404 before streaming
    history = c.q.flag("history", False)
    chunks = transfer.export_archive(c.store, store.id, history=history)
    name = f"{slugify(store.name) or store.id}{'-history' if history else ''}.memfs.gz"
    return transfer.ClosingStreamingResponse(chunks, media_type="application/gzip", headers={
        "content-disposition": f'attachment; filename="{name}"'})


async def import_store(c: Call) -> Any:
    q = c.q
    name, into, partial = q.text("name"), q.text("into"), q.flag("partial", False)
    with tempfile.SpooledTemporaryFile(max_size=IMPORT_SPOOL_BYTES) as spool:
        await _spool_body(c.request, spool)
        spool.seek(0)
        if into is not None:
            into = (await c.run(c.store.resolve_store, into)).id
        return await c.run(transfer.import_upload, c.store, spool, name=name, into=into,
                           partial=partial, actor=c.actor)


async def _spool_body(request: Request, out: IO[bytes]) -> None:
    """Copy the body to ``out``: at most :data:`MAX_IMPORT_BYTES`, within
    :data:`IMPORT_TOTAL_SECONDS`.

    :raises RequestTooLarge, RequestTimeout, ClientGone, InvalidRequest: (an empty body)
    """
    size = 0
    async for chunk in _body_chunks(request, MAX_IMPORT_BYTES, IMPORT_TOTAL_SECONDS, "import"):
        size += len(chunk)
        out.write(chunk)
    if size == 0:
        raise errors.InvalidRequest("the body is empty: send an archive (memfs export) or a "
                                    "zip of text files")


@dataclass(eq=False)
class _Feed:
    """The shared view of one store's change feed: every change after ``base`` up to ``seq``
    is in ``recent``; ``tick`` is set (and replaced) after every poll."""

    seq: int
    base: int
    recent: deque[dict[str, Any]]
    tick: anyio.Event
    polling: bool = False
    next_poll: float = 0.0
    subscribers: int = 0
    #: A subscriber waits on the database watch for the feed; the watch's count it last saw.
    watching: bool = False
    seen: int = 0
    #: The watch narrowed to the feed's store (PostgreSQL tells stores apart; inotify not).
    watch: dbwatch.Watch | None = None
    #: Delays of the quick looks again after a wake-up whose poll found nothing new.
    rechecks: list[float] = dataclasses.field(default_factory=list)


class ChangeHub:
    """Serves change streams with one database poller per store, however many subscribers:
    whichever subscriber finds the poll due runs it (so no background task outlives its
    streams), and the others wait for its ``tick``. A subscriber too far behind for
    ``recent`` reads the database itself.

    With a ``watch`` of the database (:mod:`memfs.dbwatch`, on trio), one subscriber per
    feed sleeps until the database changes and then polls at once; the poll is due every
    ``safety`` seconds otherwise (for what inotify misses), instead of every ``interval``.
    ``watch_db`` takes the process's watch of the store's database while any stream is
    open (an inotify instance is a scarce per-user resource: an app that streams nothing
    holds none).
    """

    #: After a wake-up whose poll found nothing, look again after these delays (the WAL
    #: write that woke us precedes the commit becoming visible; see ChangeWatcher).
    rechecks = (0.003, 0.015, 0.06)

    def __init__(self, store: Store, interval: float = CHANGES_POLL_SECONDS,
                 ping: float = CHANGES_PING_SECONDS, keep: int = CHANGES_KEPT,
                 watch: dbwatch.DbWatch | PgWatch | None = None, safety: float = 2.0,
                 watch_db: bool = False) -> None:
        self.store = store
        self.interval = interval
        self.ping = ping
        self.keep = keep
        self.watch = watch
        self.safety = safety
        self.watch_db = watch_db
        self._owned = False
        self._feeds: dict[str, _Feed] = {}
        #: Database polls made, for tests and statistics.
        self.polls = 0
        self.outage = _Outage("change streams")

    def statistics(self) -> dict[str, int]:
        return {"feeds": len(self._feeds), "polls": self.polls,
                "subscribers": sum(f.subscribers for f in self._feeds.values())}

    async def stream(self, store_id: str, after: int, last: int) -> AsyncIterator[bytes]:
        """SSE frames: a ``ping`` at once, ``memfs.reset`` when ``after`` is past ``last`` (a
        position this database never had) or changes after it were pruned (the follower
        reloads and goes on from the reset's ``last_seq``), then one ``memfs.change`` per
        change after ``after`` (``id:`` its seq), and a ``ping`` every ``ping`` seconds of
        silence."""
        feed = self._feeds.get(store_id)
        if feed is None:
            feed = self._feeds[store_id] = _Feed(last, last, deque(), anyio.Event())
            if self.watch is None and self.watch_db:
                self.watch = dbwatch.acquire(self.store.path)
                self._owned = self.watch is not None
            if self.watch is not None:
                feed.watch = self.watch.narrow(store_id)
                feed.seen = feed.watch.changes
        feed.subscribers += 1
        try:
            yield sse_frame("ping", {"type": "ping", "last_seq": last})
            if after > last:
                yield sse_frame("memfs.reset", {"type": "memfs.reset", "last_seq": last})
                after = last
            quiet_since = anyio.current_time()
            while True:
                if after < feed.base:
                    # Behind what the feed keeps (or connected with an old position).
                    try:
                        frames = await anyio.to_thread.run_sync(
                            change_frames, self.store, store_id, after)
                    except errors.FeedGap:  # the database pruned what this one missed
                        try:
                            after = await anyio.to_thread.run_sync(
                                self.store.last_change, store_id)
                        except _UNAVAILABLE as e:
                            self.outage.failed(e)
                            frames = []
                        else:
                            yield sse_frame("memfs.reset", {"type": "memfs.reset",
                                                            "last_seq": after})
                            quiet_since = anyio.current_time()
                            continue
                    except _UNAVAILABLE as e:  # read again after the next poll, pinging
                        self.outage.failed(e)
                        frames = []
                elif after < feed.seq:
                    frames = [f for f in feed.recent if f["seq"] > after]
                else:  # caught up, the usual case at every tick: nothing to scan
                    frames = []
                for f in frames:
                    yield sse_frame("memfs.change", f, str(f["seq"]))
                    after = f["seq"]
                if frames:
                    quiet_since = anyio.current_time()
                    continue
                now = anyio.current_time()
                if now - quiet_since >= self.ping:
                    yield sse_frame("ping", {"type": "ping", "last_seq": feed.seq})
                    quiet_since = now
                if not feed.polling and now >= feed.next_poll:
                    await self._poll(feed, store_id)
                    continue
                tick = feed.tick
                if self._watched() and not feed.watching:
                    await self._watch_for(feed)
                    continue
                with anyio.move_on_after(max(feed.next_poll - now, 0.0) + self._every()):
                    await tick.wait()
        finally:
            feed.subscribers -= 1
            if feed.subscribers == 0 and self._feeds.get(store_id) is feed:
                del self._feeds[store_id]
                if not self._feeds and self._owned:
                    dbwatch.release(self.watch)
                    self.watch, self._owned = None, False

    def _watched(self) -> bool:
        """Whether the feeds wait on the database watch (it waits with trio)."""
        if self.watch is None:
            return False
        try:
            import sniffio
            return sniffio.current_async_library() == "trio"
        except Exception:
            return False

    def _every(self) -> float:
        return self.safety if self._watched() else self.interval

    async def _watch_for(self, feed: _Feed) -> None:
        """Sleep until the database changes (then the poll is due at once) or the poll is
        due anyway (``feed.next_poll``)."""
        assert self.watch is not None
        feed.watching = True
        seen = feed.seen
        try:
            with anyio.move_on_at(feed.next_poll):
                feed.seen = await (feed.watch or self.watch).wait(seen)
        finally:
            feed.watching = False
            if feed.seen != seen:
                feed.next_poll = 0.0
                feed.rechecks = list(self.rechecks)
            # Whether woken, timed out or cancelled (its client left): another subscriber
            # takes over the watching at once.
            tick, feed.tick = feed.tick, anyio.Event()
            tick.set()

    async def _poll(self, feed: _Feed, store_id: str) -> None:
        """Bring ``feed`` up to the database's newest change. A database that cannot answer
        leaves the feed as it is, the next poll due in :data:`OUTAGE_RETRY_SECONDS`."""
        feed.polling = True
        found = failed = False
        try:
            self.polls += 1
            try:
                last = await anyio.to_thread.run_sync(self.store.last_change, store_id)
            except _UNAVAILABLE as e:
                self.outage.failed(e)
                failed = True
                return
            found = last > feed.seq
            while last > feed.seq:
                try:
                    frames = await anyio.to_thread.run_sync(
                        change_frames, self.store, store_id, feed.seq)
                except errors.FeedGap:
                    # Pruned past this feed's own position (no poll for a day): start again
                    # at ``last``; subscribers behind it read the database and are reset.
                    feed.recent.clear()
                    feed.base = feed.seq = last
                    break
                except _UNAVAILABLE as e:  # what was read so far is kept
                    self.outage.failed(e)
                    failed = True
                    return
                if not frames:
                    break
                feed.recent.extend(frames)
                feed.seq = frames[-1]["seq"]
                while len(feed.recent) > self.keep:
                    feed.base = feed.recent.popleft()["seq"]
            self.outage.answered()
        finally:
            feed.polling = False
            if found or failed:
                feed.rechecks = []
            wait = OUTAGE_RETRY_SECONDS if failed else (
                feed.rechecks.pop(0) if feed.rechecks else self._every())
            feed.next_poll = anyio.current_time() + wait
            tick, feed.tick = feed.tick, anyio.Event()
            tick.set()


# --------------------------------------------------------------------------------------------
# the route table: the Starlette routes and /openapi.json both come from it


# --------------------------------------------------------------------------------------------
# dreams (API.md §5; memfs.dreams runs them in this process)


async def create_dream(c: Call) -> Any:
    from .dreams import dreamer_for, identity

    b = c.body
    dream = await c.run(c.store.create_dream, b.get("inputs"), b.get("model"),
                        instructions=b.get("instructions"),
                        output_behavior=b.get("output_behavior"), runner=identity())
    dreamer_for(c.store).start(dream.id)
    return dream


async def retrieve_dream(c: Call) -> Any:
    return await c.run(c.store.get_dream, c.p["dream_id"])


async def list_dreams(c: Call) -> Any:
    q = c.q
    return await c.run(
        c.store.list_dreams,
        statuses=q.texts("statuses"),
        include_archived=q.flag("include_archived", False),
        created_at_gt=q.text("created_at[gt]"),
        created_at_lt=q.text("created_at[lt]"),
        limit=q.integer("limit", 20),
        page=q.text("page"),
    )


async def archive_dream(c: Call) -> Any:
    return await c.run(c.store.archive_dream, c.p["dream_id"])


async def cancel_dream(c: Call) -> Any:
    from .dreams import dreamer_for

    dream = await c.run(c.store.cancel_dream, c.p["dream_id"])
    dreamer_for(c.store).cancel(dream.id)
    return dream


@dataclass(frozen=True)
class Op:
    """One endpoint and its inputs, declared once (:mod:`memfs.apispec`): ``query`` its query
    parameters, ``body`` its JSON body fields; requests are checked against them and
    ``/openapi.json`` is made of them. ``returns`` names its answer's component schema
    (``Page<X>`` for pages; a ``Stream``: SSE)."""

    method: str
    path: str
    handler: Callable[[Call], Awaitable[Any]]
    sdk: str
    query: tuple[apispec.Param, ...] = ()
    body: tuple[apispec.Param, ...] = ()
    returns: str = ""
    #: A memfs extension (not in the SDK): ``sdk`` then describes it.
    extension: bool = False
    #: The body is not JSON: the handler reads it itself (an upload).
    raw_body: bool = False
    #: What a session token may do here (:func:`_authorize`): ``read`` / ``write`` the
    #: attached store in the path (read_write needed to write), ``session`` its own session
    #: in the path, ``open`` (no store or session in the path; the handler shows only the
    #: token's own); empty: refused (403), only a server key may.
    token: str = ""


_MS = "/v1/memory_stores"
_MEM = _MS + "/{memory_store_id}/memories"
_VER = _MS + "/{memory_store_id}/memory_versions"
_SES = "/v1/sessions"
_DRM = "/v1/dreams"
_LIST = (integer("limit"), string("page", description="a next_page cursor of this listing"))
_VIEW = (string("view", enum=("basic", "full")),)
#: A path, a memory's content: a value of the wrong type is the store's error for it.
_PATH = {"invalid": errors.InvalidPath}
_CONTENT = {"invalid": errors.InvalidContent}
_EVENTS = array("events", description="the agent.tool_use/agent.tool_result events that report "
                "the write (a mount acting as a session)")


def _times(*ops: str) -> tuple[apispec.Param, ...]:
    return tuple(time(f"created_at[{op}]") for op in ops)


OPS: list[Op] = [
    Op("POST", _MS, create_memory_store, "memory_stores.create",
       body=(string("name!"), string("description"), obj("metadata")), returns="MemoryStore"),
    Op("GET", _MS, list_memory_stores, "memory_stores.list",
       query=(*_times("gte", "lte"), boolean("include_archived"), *_LIST),
       token="open", returns="Page<MemoryStore>"),
    Op("GET", _MS + "/{memory_store_id}", retrieve_memory_store, "memory_stores.retrieve",
       token="read", returns="MemoryStore"),
    Op("POST", _MS + "/{memory_store_id}", update_memory_store, "memory_stores.update",
       body=(string("name"), string("description"), obj("metadata")), returns="MemoryStore"),
    Op("DELETE", _MS + "/{memory_store_id}", delete_memory_store, "memory_stores.delete",
       returns="Deleted"),
    Op("POST", _MS + "/{memory_store_id}/archive", archive_memory_store,
       "memory_stores.archive", returns="MemoryStore"),
    Op("POST", _MEM, create_memory, "memory_stores.memories.create", query=_VIEW,
       body=(string("path!", **_PATH), string("content!", **_CONTENT)), token="write",
       returns="Memory"),
    Op("GET", _MEM, list_memories, "memory_stores.memories.list",
       query=(string("path_prefix"), integer("depth"), *_VIEW, *_LIST),
       token="read", returns="Page<MemoryListItem>"),
    Op("GET", _MEM + "/{memory_id}", retrieve_memory, "memory_stores.memories.retrieve",
       query=_VIEW, token="read", returns="Memory"),
    Op("POST", _MEM + "/{memory_id}", update_memory, "memory_stores.memories.update",
       query=_VIEW, body=(string("content", **_CONTENT), string("path", **_PATH),
                          obj("precondition")),
       token="write", returns="Memory"),
    Op("DELETE", _MEM + "/{memory_id}", delete_memory, "memory_stores.memories.delete",
       query=(string("expected_content_sha256"),), token="write", returns="Deleted"),
    Op("GET", _VER, list_memory_versions, "memory_stores.memory_versions.list",
       query=(string("memory_id"), string("operation", enum=("created", "modified", "deleted")),
              string("session_id"), string("api_key_id"), string("service_account_id"),
              string("user_id"), *_times("gte", "lte"), *_VIEW, *_LIST),
       token="read", returns="Page<MemoryVersion>"),
    Op("GET", _VER + "/{memory_version_id}", retrieve_memory_version,
       "memory_stores.memory_versions.retrieve", query=_VIEW, token="read",
       returns="MemoryVersion"),
    Op("POST", _VER + "/{memory_version_id}/redact", redact_memory_version,
       "memory_stores.memory_versions.redact", returns="MemoryVersion"),
    Op("POST", "/v1/agents", create_agent, "agents.create", body=_AGENT_FIELDS,
       returns="Agent"),
    Op("GET", "/v1/agents/{agent_id}", retrieve_agent, "agents.retrieve",
       query=(integer("version"),), returns="Agent"),
    Op("POST", "/v1/environments", create_environment, "environments.create",
       body=_ENVIRONMENT_FIELDS, returns="Environment"),
    Op("GET", "/v1/environments/{environment_id}", retrieve_environment,
       "environments.retrieve", returns="Environment"),
    Op("POST", _SES, create_session, "sessions.create",
       body=(either("agent", "string", "object"), string("environment_id"),
             array("resources"), obj("metadata"), string("title"), array("initial_events"),
             array("vault_ids", items="string"), obj("budget"),
             string("memfs_mount_root", description="memfs extension: the root the "
                    "launcher mounts the session's stores under")),
       returns="Session"),
    Op("GET", _SES, list_sessions, "sessions.list",
       query=(string("memory_store_id"), array("statuses[]", items="string"),
              boolean("include_archived"), string("order", enum=("asc", "desc")),
              *_times("gt", "gte", "lt", "lte"), *_LIST,
              *(string(n, description="refused: memfs cannot filter by it")
                for n in ("agent_id", "agent_version", "deployment_id"))),
       token="open", returns="Page<Session>"),
    Op("GET", _SES + "/{session_id}", retrieve_session, "sessions.retrieve",
       token="session", returns="Session"),
    Op("POST", _SES + "/{session_id}", update_session, "sessions.update",
       body=(obj("metadata"), string("title"), either("agent", "string", "object"),
             obj("budget"), array("vault_ids", items="string")), returns="Session"),
    Op("DELETE", _SES + "/{session_id}", delete_session, "sessions.delete",
       returns="Deleted"),
    Op("POST", _SES + "/{session_id}/archive", archive_session, "sessions.archive",
       returns="Session"),
    Op("GET", _SES + "/{session_id}/resources", list_session_resources,
       "sessions.resources.list", query=_LIST, token="session", returns="Page<SessionResource>"),
    Op("POST", _SES + "/{session_id}/resources", add_session_resource,
       "sessions.resources.add (refused: memfs has no file resources)",
       body=(string("type"), string("file_id"), string("mount_path")), returns="Error"),
    Op("GET", _SES + "/{session_id}/resources/{resource_id}", retrieve_session_resource,
       "sessions.resources.retrieve (by sesrsc_ id or memory_store_id)",
       token="session", returns="SessionResource"),
    Op("POST", _SES + "/{session_id}/resources/{resource_id}", update_session_resource,
       "sessions.resources.update (refused for memory stores)",
       body=(string("authorization_token"),), returns="Error"),
    Op("DELETE", _SES + "/{session_id}/resources/{resource_id}", delete_session_resource,
       "sessions.resources.delete (refused for memory stores)", returns="Error"),
    Op("GET", _SES + "/{session_id}/events", list_session_events, "sessions.events.list",
       query=(array("types[]", items="string"), string("order", enum=("asc", "desc")),
              *_times("gt", "gte", "lt", "lte"), *_LIST),
       token="session", returns="Page<Event>"),
    Op("POST", _SES + "/{session_id}/events", send_session_events, "sessions.events.send",
       body=(array("events!"), string("memory_store_id", description="memfs extension: the "
                                      "store of a mount's tool events")),
       token="session", returns="EventList"),
    Op("GET", _SES + "/{session_id}/events/stream", stream_session_events,
       "sessions.events.stream", query=(array("event_deltas[]", items="string"),),
       token="session", returns="EventStream"),
    Op("POST", _DRM, create_dream, "dreams.create",
       body=(array("inputs!"), either("model!", "string", "object"), string("instructions"),
             obj("output_behavior")), returns="Dream"),
    Op("GET", _DRM, list_dreams, "dreams.list",
       query=(array("statuses[]", items="string"), boolean("include_archived"),
              *_times("gt", "lt"), *_LIST),
       returns="Page<Dream>"),
    Op("GET", _DRM + "/{dream_id}", retrieve_dream, "dreams.retrieve", returns="Dream"),
    Op("POST", _DRM + "/{dream_id}/archive", archive_dream, "dreams.archive",
       returns="Dream"),
    Op("POST", _DRM + "/{dream_id}/cancel", cancel_dream, "dreams.cancel", returns="Dream"),
    # memfs extensions (README "Remote mounts")
    Op("POST", _SES + "/{session_id}/memfs/status", set_session_status,
       "set a session's status (the launcher of memfs run --url: running, terminated)",
       body=(string("status!", enum=("rescheduling", "running", "idle", "terminated")),),
       returns="Session",
       extension=True),
    Op("POST", _SES + "/{session_id}/memfs/revert", revert_session,
       "undo a session (or, with a memrevert_ id in place of the session id, an earlier "
       "revert): every memory it wrote back to its state before, one transaction; memories "
       "changed by someone else since are conflicts unless force; dry_run: the plan only",
       body=(boolean("dry_run"), boolean("force")), returns="Revert", extension=True),
    Op("POST", _SES + "/{session_id}/memfs/tokens", create_session_token,
       "make a session token (what memfs run hands its agent instead of a key): only the "
       "session's attached stores with their access, only while it runs, until ttl_seconds "
       "(default 1 day); the secret is shown once",
       body=(integer("ttl_seconds", description="seconds the token lives at most"),),
       returns="SessionToken", extension=True),
    Op("POST", _VER + "/{memory_version_id}/memfs/restore", restore_memory_version,
       "bring back a version's content as a new version of its memory (a deleted memory "
       "comes back under its own id, at path or else the version's path)",
       body=(string("path", **_PATH),), token="write", returns="Memory", extension=True),
    Op("GET", "/v1/memfs/limits", get_limits, "the server store's limits", token="open",
       returns="Limits",
       extension=True),
    Op("GET", "/v1/memfs/resolve_store", resolve_store,
       "a memory store by id, else by exact name (the newest live one; two live stores of "
       "that name are ambiguous: 400)",
       query=(string("ref!", description="a memory store id or name"),),
       token="open", returns="MemoryStore", extension=True),
    # Not for a session token: it names stores beyond the session's.
    Op("GET", _MS + "/{memory_store_id}/memfs/namesakes", store_namesakes,
       "the other live memory stores with this store's exact name, newest first (at most "
       "100)", returns="MemoryStoreList", extension=True),
    Op("GET", _MS + "/{memory_store_id}/memfs/search", api_search.search_memories,
       api_search.SEARCH_SUMMARY, query=api_search.SEARCH_QUERY, token="read",
       returns="SearchResult", extension=True),
    Op("GET", _MS + "/{memory_store_id}/memfs/search_status", api_search.search_status,
       api_search.STATUS_SUMMARY, token="read", returns="SearchStatus", extension=True),
    Op("GET", _MS + "/{memory_store_id}/memfs/tree", get_tree,
       "every live memory (basic view) and the change-feed position", token="read", returns="Tree",
       extension=True),
    Op("GET", _MS + "/{memory_store_id}/memfs/snapshot", get_snapshot,
       "the store as it was at a time, right after a version or just before a session's "
       "first write (time travel): the boundary and the memories then live (basic view)",
       query=(string("at!", description="an RFC 3339 time, a memory version id or a session "
                     "id"),), token="read", returns="Snapshot", extension=True),
    Op("GET", _MS + "/{memory_store_id}/memfs/stats", get_stats,
       "live memory count and change-feed position", token="read", returns="Stats", extension=True),
    Op("POST", _MS + "/{memory_store_id}/memfs/check_can_create", check_can_create,
       "would a new memory be accepted now (archive, 2,000 limit, session access)?",
       token="write", returns="Ok", extension=True),
    Op("POST", _MS + "/{memory_store_id}/memfs/write", write_path,
       "create or replace the memory at a path, one transaction (with the tool events that "
       "report it, if given)",
       body=(string("path!", **_PATH), string("content!", **_CONTENT), _EVENTS),
       token="write", returns="Memory", extension=True),
    Op("POST", _MS + "/{memory_store_id}/memfs/delete", delete_path,
       "delete the memory at a path", body=(string("path!", **_PATH), _EVENTS),
       token="write", returns="Memory",
       extension=True),
    Op("POST", _MS + "/{memory_store_id}/memfs/rename", rename_path,
       "rename the memory at a path; over a memory at the target (replace), that memory "
       "takes the content and the renamed one is deleted, in one transaction (with the tool "
       "events that report it, if given)",
       body=(string("old_path!", **_PATH), string("new_path!", **_PATH), boolean("replace"),
             _EVENTS),
       token="write", returns="Memory", extension=True),
    Op("POST", _MS + "/{memory_store_id}/memfs/rename_prefix", rename_prefix,
       "move every memory below a prefix, one transaction (a directory rename)",
       body=(string("old_prefix!", **_PATH), string("new_prefix!", **_PATH), _EVENTS),
       token="write", returns="MemoryList",
       extension=True),
    Op("POST", _MS + "/{memory_store_id}/memfs/events", record_store_events,
       "record tool events of a mount (of the session it acts as, else of the store)",
       body=(array("events!"),), token="read", returns="EventList", extension=True),
    Op("GET", _MS + "/{memory_store_id}/memfs/export", export_store,
       "the store as one archive (docs/EXPORT-FORMAT.md: gzip JSON Lines), streamed; "
       "history=true: every retained version", query=(boolean("history"),),
       token="read", returns="Archive", extension=True),
    Op("POST", "/v1/memfs/import", import_store,
       "import an archive (restored with its ids; name: a copy with new ids; into: add to a "
       "store) or a zip of text files (name or into); checked whole before anything is "
       "written, all or nothing unless partial=true",
       query=(string("name"), string("into"), boolean("partial")), returns="ImportSummary",
       extension=True, raw_body=True),
    Op("GET", _MS + "/{memory_store_id}/changes", list_changes, "the store's change feed",
       query=(integer("after"), integer("limit")), token="read", returns="ChangeList",
       extension=True),
    Op("GET", _MS + "/{memory_store_id}/changes/stream", stream_changes,
       "the store's change feed, live (SSE)", query=(integer("after"),),
       token="read", returns="ChangeStream", extension=True),
]


def _endpoint(
    op: Op, store: Store, hub: ChangeHub, events: EventHub, writes: WriteBatcher
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            grant = getattr(request.state, "grant", None)
            if grant is not None:
                try:
                    _authorize(op, grant, request)
                except errors.MemfsError as e:
                    log.info("refused a session token of %s: %s", grant.session_id, e.message)
                    raise
            query = apispec.Query(request.query_params, op.query,
                                  raw=request.scope.get("query_string", b""))
            body = {} if op.method == "GET" or op.raw_body else await _read_json(request,
                                                                                   op.body)
            result = await op.handler(Call(request, store, body, query, hub, events, writes))
            if isinstance(result, Response):
                return result
            if hasattr(result, "to_dict"):
                result = result.to_dict()
            return JSONResponse(result)  # rendering can fail too: inside the net
        except Exception as e:  # every failure leaves through ERRORS
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
        err = MethodNotAllowed(f"{request.method} is not allowed on {request.url.path}")
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
               only_session: str | None = None) -> ASGIApp:
    """The ASGI app serving ``store`` to holders of ``api_keys`` and of its sessions' tokens
    (a credential is needed to call anything but ``/openapi.json``). ``uploads`` bounds the
    request bodies read at once (``memfs serve``: half its connections; default
    :class:`Uploads`' own). ``console``: serve the Console too (else its paths are 404s);
    ``dreams``: run the dream sweeper while serving (:mod:`memfs.sessionapi`, the API of one
    session for its commands, wants neither). ``only_session``: the tokens of that session
    are the only ones let in (the API of one session)."""
    hub = ChangeHub(store, watch_db=True)
    events = EventHub(store)
    writes = WriteBatcher(store)
    routes: dict[str, list[Op]] = {}
    for op in OPS:
        routes.setdefault(op.path, []).append(op)
    starlette_routes = []
    for path, ops in routes.items():
        by_method = {op.method: _endpoint(op, store, hub, events, writes)
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
    from .dreams import lifespan

    app = Starlette(routes=starlette_routes, exception_handlers={HTTPException: _http_error},
                    lifespan=partial(lifespan, store) if dreams else None)
    keys = list(api_keys)
    gate = _Gate(app, keys, store, only_session)
    if not console:  # every other path: the API's own 404
        return _Split(gate, gate, Health(store), uploads or Uploads())
    from .console import create_console  # Jinja2 and markdown-it: only when served

    web = create_console(store, keys, error_status=lambda e: error_body(e, "")[0],
                         changes=hub, read_body=_read_body, body_chunks=_body_chunks,
                         error_headers=lambda e: error_body(e, "")[2])
    return _Split(gate, web, Health(store), uploads or Uploads())


class _Split:
    """``/v1/…`` and ``/openapi.json`` go to the API (behind its key gate), ``/healthz`` and
    ``/readyz`` to the health probes (no key: :mod:`memfs.health`), every other path to the
    Console, which signs people in itself."""

    def __init__(self, api: ASGIApp, console: ASGIApp, health: ASGIApp,
                 uploads: Uploads) -> None:
        self.api = api
        self.console = console
        self.health = health
        self.uploads = uploads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http":  # for the body reader (_body_chunks), API and Console
            scope.setdefault("state", {})["uploads"] = self.uploads
        if scope["type"] == "lifespan" or path.startswith("/v1/") or path in (
                "/v1", "/openapi.json"):
            await self.api(scope, receive, send)
        elif scope["type"] == "http" and path in HEALTH_PATHS:
            await self.health(scope, receive, send)
        else:
            await self.console(scope, receive, send)


def openapi() -> dict[str, Any]:
    """``/openapi.json``: :data:`OPS` with their declared inputs (:mod:`memfs.openapi`)."""
    from . import openapi as doc

    return doc.document(OPS, ERRORS, SESSION_HEADER)
