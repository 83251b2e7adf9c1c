"""Who a request is and what it may do: the gate (a server key, a key kept in the database, or
a session token, each made a :class:`~memfs.models.Grant`; every request gets its request-id
there), a grant's rights on each route (:func:`authorize`: its workspace, its role, its
stores, :attr:`Op.token`), and the session a request acts as (:data:`SESSION_HEADER`)."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import secrets
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import errors
from ..models import DEFAULT_WORKSPACE, Actor, Grant
from ..rules import api_key_id, validate_workspace
from ..store import KEY_PREFIX, SESSION_TOKEN_PREFIX, Store, no_session, no_store
from ..store.sessions import session_actor_refused
from .errortable import error_response
from .limits import AuthFailures, KeyRates, client_address

if TYPE_CHECKING:
    from .call import Call
    from .routes import Op

log = logging.getLogger("memfs.api")  # the API's one logger, whichever module logs


#: The memfs extension header: a request carrying it acts as that session (README "Remote
#: mounts"): memory writes are attributed to its ``session_actor`` and it may record tool
#: events for it.
SESSION_HEADER = "x-memfs-session-id"
#: The SDK's header naming the workspace a request is for: a stored key acts in its own
#: workspace only, so another is refused (absent: the key's); a server key (the operator's)
#: acts in the one it names, as its admin.
WORKSPACE_HEADER = "anthropic-workspace-id"


# --------------------------------------------------------------------------------------------
# authentication and request ids (a pure ASGI middleware, so that even 401s and unknown
# routes get a request-id)

#: Paths served without a key: the API description only.
PUBLIC_PATHS = frozenset({"/openapi.json"})
#: Where (in ``scope["state"]``) a request this process makes into its own API on a caller's
#: behalf (``/mcp``'s tools, :mod:`memfs.mcp.http`) carries the caller's
#: :class:`~memfs.models.Grant`: the gate authenticated it at the caller's own request, and
#: does not again (what the grant may do is still checked by each route, as for any
#: request). Only code in the process can set it: a request from the network starts with the
#: lifespan's state, which never holds it.
INNER_CALL = "memfs.inner_call"
#: Set (true) beside :data:`INNER_CALL` when the request is counted against its key's rate
#: like any other: every one of a caller's requests into the API but its first (which the
#: caller's own request paid), so that one request cannot make hundreds for the price of one.
INNER_CHARGED = "memfs.inner_charged"


class Gate:
    """Lets in the holders of a credential and puts its :class:`~memfs.models.Grant` into
    ``scope["state"]["grant"]`` for :func:`authorize` to check against each route: a server
    key (the default workspace's admin), a key kept in the database
    (:meth:`memfs.store.Store.keys.grant`), or a session token (``create_session_token``: the
    credential ``memfs run`` hands its agent). Each key's request rate is counted here
    (:class:`~memfs.api.limits.KeyRates`), and each client address's failed authentications
    (:class:`~memfs.api.limits.AuthFailures`: a presented key that opens nothing)."""

    def __init__(self, app: ASGIApp, keys: Iterable[str], store: Store | None = None,
                 only_session: str | None = None, rates: KeyRates | None = None,
                 failures: AuthFailures | None = None) -> None:
        self.app = app
        # sha256(key) -> api_key_id: a dict lookup on a digest leaks nothing about the key.
        self.keys = {hashlib.sha256(k.encode()).hexdigest(): api_key_id(k) for k in keys}
        self.store = store
        #: The session whose tokens alone are let in (None: every credential).
        self.only_session = only_session
        self.rates = rates or KeyRates.from_env()
        self.failures = failures or AuthFailures()

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

        inner = scope["state"].get(INNER_CALL)
        if isinstance(inner, Grant):  # authenticated at its caller's request
            if scope["state"].get(INNER_CHARGED):
                try:
                    self.rates.take(inner)
                except errors.RateLimited as exc:
                    log.info("refused %s %s (on behalf of a request): %s",
                             scope.get("method"), scope["path"], exc.message)
                    await error_response(exc, request_id)(scope, receive, send_with_id)
                    return
            scope["state"]["actor"] = inner.actor()
            scope["state"]["grant"] = inner
        elif scope["path"] not in PUBLIC_PATHS:
            key = presented_key(Request(scope))
            address = client_address(scope)
            try:
                if key:
                    self.failures.check(address, key)
                try:
                    grant = await self._grant(key)
                except errors.UnknownKey:  # a guess (a revoked key's retries are not)
                    self.failures.failed(address, key or "")
                    raise
                grant = _in_workspace(grant, Request(scope))
                self.rates.take(grant)
            except errors.MemfsError as exc:
                if isinstance(exc, errors.Unauthorized | errors.TooManyRequests):
                    log.info("refused %s %s: %s", scope.get("method"), scope["path"],
                             exc.message)
                await error_response(exc, request_id)(scope, receive, send_with_id)
                return
            scope["state"]["actor"] = grant.actor()
            scope["state"]["grant"] = grant
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

    async def _grant(self, key: str | None) -> Grant:
        """The grant of a presented key.

        :raises Unauthorized: no key, a key that is not this server's, or a stored key or
            session token that is unknown, revoked or expired (or of a session that does not
            run any more).
        :raises StorageError: the database could not tell.
        """
        if key and self.only_session is None:
            kid = self.keys.get(hashlib.sha256(key.encode()).hexdigest())
            if kid is not None:
                return Grant(kid, DEFAULT_WORKSPACE, "admin", name="server key", server=True)
        if key and self.store is not None and key.startswith(SESSION_TOKEN_PREFIX):
            grant: Grant = await anyio.to_thread.run_sync(self.store.sessions.grant, key)
            if self.only_session is not None and grant.session_id != self.only_session:
                raise errors.Unauthorized(
                    f"this is the API of session {self.only_session}: a token of another "
                    "session does not open it")
            return grant
        if (key and self.store is not None and self.only_session is None
                and key.startswith(KEY_PREFIX)):
            grant = await anyio.to_thread.run_sync(self.store.keys.grant, key)
            return grant
        if key:
            raise errors.UnknownKey("invalid API key: not one of this server's keys (the memfs "
                                    "CLI sends --api-key or $MEMFS_API_KEY)")
        raise errors.Unauthorized(
            "missing API key: send 'x-api-key: KEY' or 'Authorization: Bearer KEY' "
            "(the memfs CLI: --api-key or $MEMFS_API_KEY)"
        )


def _in_workspace(grant: Grant, request: Request) -> Grant:
    """A server key's grant in the workspace its request names (:data:`WORKSPACE_HEADER`);
    any other grant as it is (:func:`authorize` refuses another workspace).

    :raises InvalidRequest: a workspace id that cannot be one.
    """
    asked = request.headers.get(WORKSPACE_HEADER)
    if not grant.server or not asked or asked == grant.workspace_id:
        return grant
    return dataclasses.replace(grant, workspace_id=validate_workspace(asked))


def presented_key(request: Request) -> str | None:
    """The key a request carries: ``x-api-key`` first, then ``Authorization: Bearer``."""
    key = request.headers.get("x-api-key")
    if key:
        return key.strip()
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def acting_session(c: Call) -> str | None:
    """The session a request acts as (:data:`SESSION_HEADER`, or a session token's), or
    None."""
    if c.grant.session_id is not None:
        return c.grant.session_id
    return c.request.headers.get(SESSION_HEADER) or None


#: The path parameters that name an object of a workspace (:meth:`Store.keys.check_visible`).
OWNED_PARAMS = ("memory_store_id", "session_id", "dream_id", "agent_id", "environment_id")


def writes(op: Op) -> bool:
    """Does the route change anything? Every method but GET does, except the POSTs whose
    session-token right is ``read`` (recording a mount's tool events: a reader's too)."""
    return op.method != "GET" and op.token != "read"


async def check_visible(op: Op, grant: Grant, request: Request, store: Store) -> None:
    """Are the objects in the path (and the session of :data:`SESSION_HEADER`) of the grant's
    workspace? Another workspace's is the 404 of an unknown id, after the same one look-up
    (:meth:`Store.keys.check_visible`). A stored key acts as a session only if it created it
    (:meth:`Store.sessions.check_actor`: one 403, whether the session exists or not). Run
    once the request's inputs are checked: a bad input is a 400 whether its ids exist or
    not. A store's change feed also serves a deleted store (its last change says so; a mount
    of it learns it is gone).

    :raises NotFound, Forbidden:
    """
    named = [(p, request.path_params[p]) for p in OWNED_PARAMS if p in request.path_params]
    acting = request.headers.get(SESSION_HEADER)
    if acting and grant.server:
        named.append(("session_id", acting))
    elif acting and grant.session_id is None:
        # A stored key: the session's creator only, one refusal whether it exists or not.
        await anyio.to_thread.run_sync(store.sessions.check_actor, grant.workspace_id, acting,
                                       grant.key_id)
    for param, value in named:
        look = partial(store.keys.check_visible, grant.workspace_id, param, value,
                       gone_ok=param == "memory_store_id" and op.returns in _FEEDS)
        try:
            with store.nowait():  # a point look-up: on the loop unless it would wait
                look()
        except errors.WouldBlock:
            await anyio.to_thread.run_sync(look)


#: The answers of the routes of a store's change feed.
_FEEDS = ("ChangeList", "ChangeStream")


def authorize(op: Op, grant: Grant, request: Request) -> None:
    """May this grant make this call, whatever the objects it names? First what it may not
    see, as if it did not exist: a store outside a scoped key's stores, another session than a
    session token's (404); then what it may not do (403 ``permission_error``): a route a
    scoped key or session token may not call (:attr:`Op.token`), managing keys without the
    admin role, a write with a read_only key or attachment, another workspace in
    :data:`WORKSPACE_HEADER`. Another workspace's objects: :func:`check_visible`.

    :raises NotFound, Forbidden, ReadOnly:
    """
    check_workspace(grant, request)
    if grant.access is not None:
        _authorize_scoped(op, grant, request)
    if op.admin and grant.role != "admin":
        raise errors.Forbidden(f"only an admin key may manage API keys ({request.method} "
                               f"{request.url.path}): this key's role is {grant.role}")
    if grant.role == "read_only" and writes(op):
        raise errors.ReadOnly(f"API key {grant.key_id} is read_only: {request.method} "
                              f"{request.url.path} writes")


def check_workspace(grant: Grant, request: Request) -> None:
    """A request naming another workspace than its grant's (:data:`WORKSPACE_HEADER`; a
    server key's grant is in the one it names already) is refused.

    :raises Forbidden:
    """
    asked = request.headers.get(WORKSPACE_HEADER)
    if asked and asked != grant.workspace_id:
        raise errors.Forbidden(f"this key belongs to workspace {grant.workspace_id!r}, not "
                               f"{asked!r} ({WORKSPACE_HEADER})")


def _authorize_scoped(op: Op, grant: Grant, request: Request) -> None:
    """The rights of a grant scoped to some stores (a store-scoped key, a session token):
    those stores with their access, a session token's own session, nothing else.

    :raises NotFound, Forbidden, ReadOnly:
    """
    assert grant.access is not None
    params = request.path_params
    session_id = params.get("session_id")
    if session_id is not None and session_id != grant.session_id:
        raise no_session(session_id)
    store_id = params.get("memory_store_id")
    access = grant.access.get(store_id) if store_id is not None else None
    if store_id is not None and access is None:
        raise no_store(store_id)
    who = (f"a session token acts as its session {grant.session_id} on that session's "
           "memory stores only" if grant.session_id is not None else
           f"API key {grant.key_id} opens its memory stores only")
    if not op.token or (op.token == "session" and grant.session_id is None):
        raise errors.Forbidden(
            f"this credential cannot call {op.sdk.split(' (')[0]} ({request.method} "
            f"{request.url.path}): {who}")
    acting = request.headers.get(SESSION_HEADER)
    if grant.session_id is None and acting:
        raise session_actor_refused(acting)  # a store-scoped key never created a session
    if grant.session_id is not None and acting and acting != grant.session_id:
        raise errors.Forbidden(f"a session token acts as its own session "
                               f"({grant.session_id}) only, not as {acting}")
    if op.token == "write" and access != "read_write":
        raise errors.ReadOnly(
            f"memory store {store_id} is read_only to this credential ({who})")


async def writer(c: Call) -> Actor:
    """Who a memory write is attributed to: the API key, or, for a request acting as a
    session, that session (the store checks it may write this store)."""
    session_id = acting_session(c)
    if session_id is None:
        return c.actor
    actor: Actor = await c.run(c.store.events.session_writer, session_id, c.p["memory_store_id"])
    return actor
