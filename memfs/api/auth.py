"""Who a request is and what it may do: the gate (a server key or a session token; every
request gets its request-id there), a session token's rights on each route (:attr:`Op.token`),
and the session a request acts as (:data:`SESSION_HEADER`)."""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Iterable
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import errors
from ..models import Actor, SessionGrant
from ..rules import api_key_id
from ..store import SESSION_TOKEN_PREFIX, Store, no_session, no_store
from .errortable import error_response

if TYPE_CHECKING:
    from .call import Call
    from .routes import Op

log = logging.getLogger("memfs.api")  # the API's one logger, whichever module logs


#: The memfs extension header: a request carrying it acts as that session (README "Remote
#: mounts"): memory writes are attributed to its ``session_actor`` and it may record tool
#: events for it.
SESSION_HEADER = "x-memfs-session-id"


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
