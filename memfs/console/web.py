"""What every Console page shares: who is signed in (a signed cookie) and what they may see
and do, CSRF tokens, rendering a template, running store calls, and turning store errors into
pages. All of it is the :class:`Console` the app holds (on ``app.state``): each view is a
function ``view(console, request)`` at the top of its resource's module, made a route by
:func:`page`, which hands it the Console once the sign-in, the right and the CSRF token pass.

Sign-in takes one of the server's API keys (the same keys, and the same loopback rule at bind
time, as the API) or an API key kept in the database (``memfs_key_…``, issue 22); never a
session token (an agent's). The cookie then carries ``key_id.expires.nonce.signature``, the
signature being an HMAC of the rest under the server key itself, or under the stored SHA-256
of a stored key's secret (which every server on the database can read by the key's id): the
cookie never holds a secret, it survives a restart and works across replicas, and removing a
server key signs out everyone who signed in with it. A stored key's sign-in is also recorded
(``console_signins``: the SHA-256 of its nonce, :meth:`Store.keys.record_signin`) and its cookie is
good only if recorded: the digest it is signed under can be read from the database, the nonce
cannot.
Every page looks a stored key up again by its id (one look-up by primary key), so a revoked or
expired key's sign-ins end at their next request, on every server of the database, and its
open live pages within :data:`memfs.api.GRANT_RECHECK_SECONDS` (one look at the sign-ins and
keys of all the open pages and API streams of a process: the app's
:class:`~memfs.api.grants.GrantWatch`, handed in). Signing out
records the sign-in (a digest of its nonce) in the database until the cookie would have
expired, so that every server on it refuses a copy of the cookie
(:meth:`Store.keys.revoke_signin`); one indexed look-up per page, after the signature is checked.
The CSRF token of a sign-in is an HMAC of its nonce under the same secret; every POST must
carry it (form field ``csrf`` or header ``x-csrf-token``), and the cookie is
``SameSite=Strict`` and ``HttpOnly`` on top of that.

A signed-in :class:`User` has the :class:`~memfs.models.Grant` of their key, as the API gives
it: its workspace (another workspace's store or session is the 404 of an unknown id), its
stores (a store-scoped key sees only those), its role (:func:`check_right`: a read_only key
changes nothing, only an admin manages keys).

Writes from the Console are attributed to a ``user_actor`` (API.md §3.7: "a human, e.g. in the
Console") whose id is derived from the key the person signed in with, as ``apikey_`` ids are.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.to_thread
import jinja2
from markupsafe import Markup
from starlette.datastructures import MutableHeaders, UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Match, Route, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import errors
from ..models import DEFAULT_WORKSPACE, Actor, Grant
from ..rules import api_key_id, parse_int
from ..store import KEY_PREFIX, SESSION_TOKEN_PREFIX, KeyCheck, Store, no_store, sha256_hex
from .filters import actor_label, render_markdown, when

if TYPE_CHECKING:  # the app's, handed in: the Console never imports the API at run time
    from ..api.grants import Credential, GrantWatch

#: The sign-in cookie and how long it lasts.
COOKIE = "memfs_console"
SESSION_SECONDS = 12 * 3600
#: A one-shot message shown on the next page (after a POST's redirect).
FLASH_COOKIE = "memfs_flash"
#: Seconds an upload may take in all (the API's for an import).
UPLOAD_SECONDS = 600.0
#: Largest form body the Console reads (a memory is at most 100 kB; UTF-8 form-encoding can
#: triple it).
MAX_FORM_BYTES = 1_000_000
#: What a page's forms need (:func:`check_right`): ``read`` nothing more; ``write`` a store's
#: memories (not a read_only key); ``manage`` the stores themselves, imports, redactions and
#: reverts (neither a read_only key nor a store-scoped one, as in the API); ``admin`` the
#: workspace's keys (an admin key of the whole workspace).
RIGHTS = ("read", "write", "manage", "admin")


def console_actor(kid: str) -> Actor:
    """The ``user_actor`` of a person signed in with the key ``kid``."""
    return Actor.user("user_" + kid.removeprefix("apikey_"))


@dataclass(frozen=True)
class User:
    """Who is signed in: the key's id, the actor their writes are attributed to, the CSRF
    token their forms must carry, and what the key may do (its grant, as the API's)."""

    key_id: str
    actor: Actor
    csrf: str
    grant: Grant
    #: This sign-in (a digest of its cookie's nonce) and when its cookie expires: what a
    #: sign-out records (:meth:`Store.keys.revoke_signin`).
    signin: str = ""
    expires: int = 0

    @property
    def workspace(self) -> str:
        return self.grant.workspace_id

    @property
    def stores(self) -> list[str] | None:
        """The only stores the key opens (None: every store of its workspace)."""
        return None if self.grant.access is None else list(self.grant.access)

    @property
    def writes(self) -> bool:
        """May change memories (not a read_only key)."""
        return self.grant.role != "read_only"

    @property
    def manages(self) -> bool:
        """May create, change, archive, delete and import stores, redact and revert."""
        return self.writes and self.grant.access is None

    @property
    def admin(self) -> bool:
        """May manage the workspace's keys."""
        return self.grant.role == "admin" and self.grant.access is None

    @property
    def label(self) -> str:
        """The key, as a page names it."""
        if self.grant.server:
            return f"a server key ({self.key_id})"
        return f"the API key {self.grant.name!r} ({self.key_id})"


def server_grant(kid: str) -> Grant:
    """What a server key may do: the default workspace's admin (as in the API)."""
    return Grant(kid, DEFAULT_WORKSPACE, "admin", name="server key", server=True)


def check_right(user: User, right: str) -> None:
    """May ``user`` send a form that needs ``right`` (:data:`RIGHTS`)?

    :raises ReadOnly: a write with a read_only key.
    :raises Forbidden: managing stores with a store-scoped key, keys without the admin role.
    """
    g = user.grant
    if right == "admin" and not user.admin:
        scoped = ", scoped to some memory stores" if g.access is not None else ""
        raise errors.Forbidden(f"only an admin key manages the workspace's API keys: you "
                               f"signed in with {user.label}, role {g.role}{scoped}")
    if right in ("write", "manage", "admin") and not user.writes:
        raise errors.ReadOnly(f"you signed in with {user.label}, which is read_only: it "
                              f"reads everything of workspace {g.workspace_id} and changes "
                              "nothing (sign in with another key to make changes)")
    if right == "manage" and g.access is not None:
        raise errors.Forbidden(f"you signed in with {user.label}, scoped to some memory "
                               "stores: it reads and writes their memories, but cannot "
                               "create, change, archive, delete or import stores, redact "
                               "versions or revert sessions")


class Throttle(Protocol):
    """The failed authentications of each client address (the API hands its own,
    :class:`memfs.api.limits.AuthFailures`)."""

    def check(self, address: str, key: str) -> None:
        """:raises RateLimited: ``address`` failed too often; it may try ``key`` later."""

    def failed(self, address: str, key: str) -> None:
        """Count one failed authentication of ``address`` with ``key``."""


class Console:
    """The Console's shared state: the store, the keys, the templates."""

    def __init__(self, store: Store, api_keys: Iterable[str], *,
                 error_status: Callable[[BaseException], int], changes: Any,
                 read_body: Callable[[Request], Awaitable[bytes]],
                 grants: GrantWatch,
                 body_chunks: Callable[[Request, int, float, str], AsyncIterator[bytes]]
                 | None = None,
                 error_headers: Callable[[BaseException], dict[str, str]] | None = None,
                 failures: Throttle | None = None,
                 ) -> None:
        self.store = store
        #: Failed sign-ins per client address (the API's, shared with its key gate; None:
        #: not counted).
        self.failures = failures
        self.error_extra = error_headers or (lambda exc: {})
        self.read_body = read_body
        self.body_chunks = body_chunks
        self.keys = {api_key_id(k): k for k in api_keys}
        self.error_status = error_status
        self.changes = changes
        #: The watch of the open live pages' sign-ins (the API's, shared with its streams).
        self.grants = grants
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("memfs.console", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters["markdown"] = render_markdown
        self.templates.filters["when"] = when
        self.templates.filters["actor"] = actor_label
        self.templates.globals["limits"] = store.limits

    # -- running store calls ----------------------------------------------------------------

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A store method in a worker thread (as the API runs them)."""
        return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))

    # -- sign-in ----------------------------------------------------------------------------

    def sign(self, kid: str, expires: int, nonce: str, secret: str | None = None) -> str:
        """The cookie of a sign-in: signed under ``secret`` (a server key itself by default;
        a stored key's SHA-256)."""
        payload = f"{kid}.{expires}.{nonce}"
        key = (self.keys[kid] if secret is None else secret).encode()
        sig = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
        return f"{payload}.{sig}"

    def csrf_token(self, secret: str, nonce: str) -> str:
        return hmac.new(secret.encode(), b"csrf." + nonce.encode(),
                        hashlib.sha256).hexdigest()[:32]

    async def new_cookie(self, key: str) -> str:
        """The cookie of a sign-in with ``key``, for :data:`SESSION_SECONDS` (a stored key
        that expires sooner ends the sign-in then: every page checks it, and says so).

        :raises Unauthorized: not a key of this server, a session token, or a stored key that
            is revoked or expired.
        :raises StorageError: the database could not tell.
        """
        now, nonce = int(time.time()), secrets.token_hex(16)
        if key.startswith(SESSION_TOKEN_PREFIX):
            raise errors.Unauthorized("a session token (an agent's credential) cannot sign in "
                                      "to the Console: use an API key")
        if key.startswith(KEY_PREFIX):
            grant: Grant = await self.run(self.store.keys.grant, key)
            # Recorded: a cookie is good only if its sign-in is in the database, so that the
            # key's digest (readable there) is not all it takes to make one.
            await self.run(self.store.keys.record_signin,
                           hashlib.sha256(nonce.encode()).hexdigest(),
                           grant.key_id, now + SESSION_SECONDS)
            return self.sign(grant.key_id, now + SESSION_SECONDS, nonce,
                             sha256_hex(key.encode()))
        kid = api_key_id(key)
        secret = self.keys.get(kid)
        # Not the empty key either: hmac.compare_digest("", "") holds, and "" is no key.
        if not key or secret is None or not hmac.compare_digest(secret, key):
            raise errors.UnknownKey("that is not an API key of this server")
        return self.sign(kid, now + SESSION_SECONDS, nonce)

    async def user(self, request: Request) -> User | None:
        """Who the request's cookie signs in, if anyone: a valid signature, not expired, not
        signed out (on any server of the database), its key still valid.

        :raises Unauthorized: a genuine cookie whose stored key was revoked or has expired
            since: the person must sign in again, and be told why.
        :raises StorageError: the database cannot say.
        """
        value = request.cookies.get(COOKIE, "")
        parts = value.split(".")
        if len(parts) != 4:
            return None
        kid, _, nonce, _ = parts
        # Anyone can forge this shape (a key id is public): the expiry is read strictly.
        expires = parse_int(parts[1])
        if expires is None or expires < time.time():
            return None
        signin = hashlib.sha256(nonce.encode()).hexdigest()
        secret = self.keys.get(kid)
        if secret is not None:
            if not hmac.compare_digest(self.sign(kid, expires, nonce), value):
                return None
            if await self.run(self.store.keys.signin_revoked, signin):
                return None
            grant = server_grant(kid)
        else:
            if not kid.startswith("apikey_") or len(kid) > 64:
                return None
            out, check = await self.run(self._look, kid, signin)
            if check is None or not hmac.compare_digest(
                    self.sign(kid, expires, nonce, check.secret_sha256), value) or out:
                return None
            if check.grant is None:
                raise errors.Unauthorized(check.refused)
            grant, secret = check.grant, check.secret_sha256
        return User(kid, console_actor(kid), self.csrf_token(secret, nonce), grant, signin,
                    expires)

    def _look(self, kid: str, signin: str) -> tuple[bool, KeyCheck | None]:
        """A stored key's sign-in, looked at in one go: signed out (or never signed in
        here)? the key now?"""
        out = (self.store.keys.signin_revoked(signin)
               or not self.store.keys.signin_recorded(signin, kid))
        return out, self.store.keys.check(kid)

    def live_credentials(self, user: User) -> tuple[Credential, ...]:
        """What an open live page of ``user`` is held by on :attr:`grants`: its sign-in (it
        ends when signed out; a stored key's also once no longer recorded) and a stored key
        (it ends once revoked, expired or gone)."""
        watch = self.grants  # its kinds: the Console never imports the API at run time
        if user.grant.server:
            return ((watch.SIGNIN, user.signin),)
        return (watch.STORED_SIGNIN, user.signin), (watch.KEY, user.key_id)

    async def sign_out(self, user: User) -> None:
        """Refuse this sign-in's cookie from now on, on every server of the database."""
        await self.run(self.store.keys.revoke_signin, user.signin, user.expires)

    def signed_out(self, request: Request, why: str) -> Response:
        """A page asked for with a sign-in whose key was refused since (revoked, expired):
        the cookie goes, and the person is sent to sign in again, told why (a form or a live
        fragment gets a 401 page saying so)."""
        request.state.user = None
        message = f"you were signed out: {why}"
        if request.method in ("GET", "HEAD") and request.headers.get(
                "x-memfs-fragment") != "1":
            response: Response = redirect(
                "/signin?" + urllib.parse.urlencode({"next": _here(request)}), message)
        else:
            response = self.render(request, "error.html", status=401, status_code=401,
                                   message=message)
        response.delete_cookie(COOKIE, path="/")
        return response

    # -- what the user may see -----------------------------------------------------------------

    async def check_visible(self, user: User, params: dict[str, Any], *,
                            gone_ok: bool = False) -> None:
        """Are the store and session a page names (path parameters ``store_id``,
        ``session_id``, ``target``: a revert's session) the user's to see? Another
        workspace's, or a store outside a scoped key's stores, is the 404 of an unknown id
        (:meth:`Store.keys.check_visible`: the same one look-up). ``gone_ok``: a deleted store
        passes (its live feed says it was deleted).

        :raises NotFound:
        """
        g = user.grant
        sid = params.get("store_id")
        if sid is not None:
            if g.access is not None and sid not in g.access:
                raise no_store(sid)
            await self.run(self.store.keys.check_visible, g.workspace_id, "memory_store_id", sid,
                           gone_ok=gone_ok)
        for param in ("session_id", "target"):
            if params.get(param) is not None:
                # A store-scoped key sees no session (as in the API): no workspace matches,
                # so it is told as an unknown id after the same look-up.
                workspace = "" if g.access is not None else g.workspace_id
                await self.run(self.store.keys.check_visible, workspace, "session_id",
                               params[param])

    async def check_store(self, user: User, store_id: str) -> None:
        """A store named elsewhere than in the path (a query's ``?into=``, ``?store=``): the
        same rule as :meth:`check_visible`."""
        await self.check_visible(user, {"store_id": store_id})

    async def key_names(self, user: User, actors: Iterable[Any]) -> dict[str, str]:
        """The names of the keys behind ``actors`` (an ``api_actor``'s key, the key a
        Console ``user_actor`` signed in with), by actor id: what pages show beside the ids
        (:func:`actor_label`). Only keys of the user's workspace, and this server's own."""
        kids: dict[str, str] = {}
        for actor in actors:
            if actor is None:
                continue
            d = actor.to_dict() if hasattr(actor, "to_dict") else dict(actor)
            if d.get("type") == "api_actor" and d.get("api_key_id"):
                kids[d["api_key_id"]] = d["api_key_id"]
            elif d.get("type") == "user_actor" and str(d.get("user_id", "")).startswith("user_"):
                kids[d["user_id"]] = "apikey_" + d["user_id"].removeprefix("user_")
        names = {k: "server key" for k in kids.values()
                 if k in self.keys and user.workspace == DEFAULT_WORKSPACE}
        stored = sorted(set(kids.values()) - set(names))
        if stored:
            names |= await self.run(self.store.keys.names, stored, workspace=user.workspace)
        return {aid: names[kid] for aid, kid in kids.items() if kid in names}

    # -- rendering ----------------------------------------------------------------------------

    def render(self, request: Request, template: str, status: int = 200,
               **context: Any) -> HTMLResponse:
        """A page. Every template gets ``request``, ``user`` (None on the sign-in page),
        ``csrf`` (a hidden form field, markup) and ``flash`` (a message from the last POST)."""
        user: User | None = getattr(request.state, "user", None)
        # Only a whole page shows (and so uses up) the message: a live refresh of a fragment,
        # which the page being left may still send while the browser follows the redirect,
        # must not take it first.
        fragment = request.headers.get("x-memfs-fragment") == "1"
        flash = "" if fragment else urllib.parse.unquote(
            request.cookies.get(FLASH_COOKIE, ""))[:500]
        html = self.templates.get_template(template).render(
            request=request,
            user=user,
            csrf=Markup('<input type="hidden" name="csrf" value="{}">').format(
                user.csrf if user else ""),
            flash=flash,
            url=request.url_for,
            **context,
        )
        response = HTMLResponse(html, status_code=status)
        if flash:
            response.delete_cookie(FLASH_COOKIE, path="/")
        return response

    def error_page(self, request: Request, exc: BaseException) -> HTMLResponse:
        status = self.error_status(exc)
        message = exc.message if isinstance(exc, errors.MemfsError) else "internal error"
        response = self.render(request, "error.html", status=status, status_code=status,
                               message=message)
        response.headers.update(self.error_headers(exc))
        return response

    def error_headers(self, exc: BaseException) -> dict[str, str]:
        """The API's headers for ``exc`` that a page needs too: ``connection: close`` when the
        body was not read whole, ``retry-after`` when busy."""
        return {k: v for k, v in self.error_extra(exc).items()
                if k in ("connection", "retry-after")}


#: The Console's own script and stylesheet only, never framed, forms only to itself (issue
#: 19: a page on another port of the same host framed the signed-in Console; SameSite
#: cookies do not tell ports apart). ``img-src`` allows data: for a memory's inline images.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'"
)
#: Every Console answer carries these. ``same-origin``, not ``no-referrer``: with the latter a
#: browser sends ``Origin: null`` on a form's POST, which the CSRF check refuses.
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


class SecurityHeaders:
    """Adds :data:`SECURITY_HEADERS` to every answer of the Console, and ``Cache-Control``:
    ``no-store`` for its pages (they show memories; nothing of them stays in a cache after
    sign-out), ``no-cache`` for its static files (revalidated, so an upgrade shows at once);
    an answer that sets its own (a live feed: ``no-cache``) keeps it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cache = "no-cache" if scope.get("path", "").startswith("/static/") else "no-store"

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                headers.setdefault("cache-control", cache)
            await send(message)

        await self.app(scope, receive, send_with_headers)


class SlashRedirects:
    """The Console's router's default: a path that is a page but for a trailing slash (or one
    missing) is redirected to that page with a relative Location (issue 38 S5: Starlette's own
    redirect is an absolute URL built from the ``Host`` header, which a client may forge);
    anything else is the router's 404."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.not_found = router.not_found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] == "http" and path not in ("", "/"):
            other = path.rstrip("/") if path.endswith("/") else path + "/"
            moved = {**scope, "path": other}
            if other and other.startswith("/") and not other.startswith("//") and any(
                    route.matches(moved)[0] is not Match.NONE for route in self.router.routes):
                query = scope.get("query_string", b"").decode("latin-1")
                target = urllib.parse.quote(other) + (f"?{query}" if query else "")
                await RedirectResponse(target, status_code=307)(scope, receive, send)
                return
        await self.not_found(scope, receive, send)


def redirect(url: str, flash: str | None = None) -> RedirectResponse:
    """After a POST: see the result at ``url`` (303), with a one-shot message."""
    response = RedirectResponse(url, status_code=303)
    if flash:
        response.set_cookie(FLASH_COOKIE, urllib.parse.quote(flash[:500]), path="/",
                            httponly=True, samesite="strict")
    return response


# -- pages ------------------------------------------------------------------------------------

#: A page's view: a function at the top of its resource's module (datasette's one view per
#: resource), given the :class:`Console` the app holds and the request.
Handler = Callable[[Console, Request], Awaitable[Response]]


def console_of(request: Request) -> Console:
    """The :class:`Console` the app holds (:func:`memfs.console.create_console` puts it on
    ``app.state``): what every view is handed."""
    console: Console = request.app.state.console
    return console


def open_page(path: str, handler: Handler, methods: tuple[str, ...] = ("GET",), *,
              name: str | None = None) -> Route:
    """A Console route open to anyone (the sign-in page): no sign-in, right or CSRF check."""

    async def endpoint(request: Request) -> Response:
        return await handler(console_of(request), request)

    endpoint.__name__ = handler.__name__
    return Route(path, endpoint, methods=list(methods), name=name or handler.__name__)


def page(path: str, handler: Handler, methods: tuple[str, ...] = ("GET",), *,
         name: str | None = None, upload_bytes: int = 0, right: str = "write",
         form_page: bool = False, gone_ok: bool = False) -> Route:
    """A Console route: the handler runs only for a signed-in user (others are sent to the
    sign-in page, told why when their key was revoked or expired since), on a store or session
    they may see (:meth:`Console.check_visible`: else the 404 of an unknown id), a POST only
    with what its form needs (``right``, :func:`check_right`) and the user's CSRF token, and a
    store error becomes an error page with the API's status for it. ``request.state.user`` is
    the :class:`User`.

    :param right: what a POST needs (:data:`RIGHTS`); a GET too if ``form_page`` (a page
        that is only a form: a new memory, an import, the keys).
    :param upload_bytes: accept a ``multipart/form-data`` POST of up to this many bytes with
        one file (:func:`upload`), spooled to disk by Starlette's parser.
    :param gone_ok: a deleted store in the path passes the visibility check (a live feed).
    """
    assert right in RIGHTS, right

    async def endpoint(request: Request) -> Response:
        console = console_of(request)
        try:
            user = await console.user(request)
        except errors.Unauthorized as e:  # the key was revoked or expired since
            return console.signed_out(request, e.message)
        except errors.MemfsError as e:  # the database is down: say so, signed in or not
            request.state.user = None
            return console.error_page(request, e)
        if user is None:
            return _not_signed_in(console, request)
        request.state.user = user
        request.state.upload_bytes = upload_bytes
        try:
            await console.check_visible(user, request.path_params, gone_ok=gone_ok)
            if request.method not in ("GET", "HEAD") or form_page:
                check_right(user, right)
            if request.method == "POST" and not await _csrf_ok(request, user):
                return console.render(
                    request, "error.html", status=403, status_code=403,
                    message="this form is stale or was not sent by the Console (CSRF "
                            "check failed): reload and retry")
            return await handler(console, request)
        except errors.MemfsError as e:
            return console.error_page(request, e)

    endpoint.__name__ = handler.__name__
    return Route(path, endpoint, methods=list(methods), name=name or handler.__name__)


def _not_signed_in(console: Console, request: Request) -> Response:
    """A page asked for without a valid sign-in: a GET goes to the sign-in page (and comes
    back after it), a form is told that its sign-in has expired."""
    if request.method != "GET":
        return console.render(request, "error.html", status=401, status_code=401,
                              message="your sign-in has expired: sign in again")
    return RedirectResponse("/signin?" + urllib.parse.urlencode({"next": _here(request)}),
                            status_code=303)


def _here(request: Request) -> str:
    """The path and query of a request: where to come back to after signing in."""
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")


class SignedInStream(StreamingResponse):
    """A live feed of a page, while its sign-in lasts: held by its sign-in and key on the
    Console's :class:`~memfs.api.grants.GrantWatch` (:meth:`Console.live_credentials`), which
    looks at those of every open page (and of the API's streams) every
    :data:`memfs.api.GRANT_RECHECK_SECONDS` in one query per kind; once it ended (signed out,
    the key revoked or expired) the feed sends a last ``memfs.signed_out`` frame, on which the
    page reloads (and so goes to the sign-in page, told why), and ends. A database that
    cannot answer ends no page."""

    def __init__(self, console: Console, user: User, frames: AsyncIterator[bytes],
                 **kwargs: Any) -> None:
        super().__init__(frames, **kwargs)
        self.console, self.user = console, user

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        why: str | None = None
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                nonlocal why
                why = await self.console.grants.until_refused(
                    *self.console.live_credentials(self.user))
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            try:
                await super().__call__(scope, receive, send)
            finally:
                tg.cancel_scope.cancel()
                # Cut off at a yield, the frames would be closed only when collected: the
                # hub's subscriber counts are released now.
                close = getattr(self.body_iterator, "aclose", None)
                if close is not None:
                    with anyio.CancelScope(shield=True):
                        await close()
        if why is not None:
            frame = "event: memfs.signed_out\ndata: " + json.dumps({"message": why}) + "\n\n"
            await send({"type": "http.response.body", "body": frame.encode(),
                        "more_body": False})


async def form(request: Request) -> dict[str, str]:
    """A POST's form fields (the first value of each). The body is read the API's way first
    (bounded in size and time: :attr:`Console.read_body`), then parsed by Starlette.

    :raises errors.InvalidRequest: too large, too slow, or not a form.
    """
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        return {k: v for k, v in (await _multipart(request)).items() if isinstance(v, str)}
    if not hasattr(request, "_body"):
        length = request.headers.get("content-length")
        size = None if length is None else parse_int(length)
        if length is not None and (size is None or size > MAX_FORM_BYTES):
            raise errors.InvalidRequest(f"the form is larger than {MAX_FORM_BYTES} bytes")
        console = console_of(request)
        # Starlette's form parser reads ``_body`` when it is set (Request.stream()).
        request._body = await console.read_body(request)
    try:
        data = await request.form(max_part_size=MAX_FORM_BYTES)
    except (HTTPException, ValueError) as e:  # a malformed multipart body
        raise errors.InvalidRequest(f"the form could not be read: {e}") from None
    return {k: v for k, v in data.items() if isinstance(v, str)}


def same_origin(request: Request) -> bool:
    """False when the browser says the request comes from another site (``Origin``)."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    return urllib.parse.urlsplit(origin).netloc == request.headers.get("host")


async def _multipart(request: Request) -> Any:
    """A multipart form, on routes that take uploads only: its declared length must be within
    the route's ``upload_bytes`` (h11 holds the body to it), with one file at most, read
    within the API's time for an import."""
    limit = getattr(request.state, "upload_bytes", 0)
    if not limit:
        raise errors.InvalidRequest("this form takes no file")
    length = parse_int(request.headers.get("content-length", ""))
    if length is None or length < 0:
        raise errors.InvalidRequest("an upload needs a Content-Length")
    if length > limit:
        raise errors.InvalidRequest(f"the upload is over {limit:,} bytes")
    parsed = getattr(request.state, "multipart", None)
    if parsed is not None:  # the CSRF check read it already
        return parsed
    console = console_of(request)
    if console.body_chunks is None:
        raise errors.InvalidRequest("this Console takes no uploads")
    # Read the API's way (bounded in size, rate and time, one of the server's upload slots),
    # parsed by Starlette as it comes.
    chunks = console.body_chunks(request, limit, UPLOAD_SECONDS, "upload")

    async def receive() -> Message:
        chunk = await anext(chunks, None)
        return {"type": "http.request", "body": chunk or b"", "more_body": chunk is not None}

    try:
        parsed = await Request(request.scope, receive).form(
            max_files=1, max_fields=20, max_part_size=MAX_FORM_BYTES)
    except (HTTPException, ValueError) as e:
        raise errors.InvalidRequest(f"the form could not be read: {e}") from None
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]
    request.state.multipart = parsed
    return parsed


async def upload(request: Request, field: str) -> UploadFile | None:
    """The file of a multipart form (:func:`page` with ``upload_bytes``), None if none was
    chosen."""
    data = await _multipart(request)
    value = data.get(field)
    if not isinstance(value, UploadFile) or (not value.filename and not value.size):
        return None
    return value


async def _csrf_ok(request: Request, user: User) -> bool:
    if not same_origin(request):
        return False
    token = request.headers.get("x-csrf-token")
    if token is None:
        ctype = request.headers.get("content-type", "")
        if ctype.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            token = (await form(request)).get("csrf")  # a bad body is its own error
    return token is not None and hmac.compare_digest(token, user.csrf)


async def http_error(request: Request, exc: Exception) -> Response:
    """The Console's page for an HTTP error of its router (an unknown page, a method that
    the page does not take), signed in or not."""
    assert isinstance(exc, HTTPException)
    console = console_of(request)
    try:
        request.state.user = await console.user(request)
    except errors.MemfsError:
        request.state.user = None
    message = "no such page" if exc.status_code == 404 else str(exc.detail)
    response = console.render(request, "error.html", status=exc.status_code,
                              status_code=exc.status_code, message=message)
    if exc.status_code == 405:  # Allow (RFC 9110 §15.5.6): every route of the path's
        response.headers["allow"] = ", ".join(_allowed(request))
    return response


#: The Console app's exception handlers.
EXCEPTION_HANDLERS: dict[Any, Any] = {HTTPException: http_error}


def _allowed(request: Request) -> list[str]:
    """The methods of every route of the request's path (a page's GET and POST may be two
    routes, and Starlette's own Allow names only the first's)."""
    methods: set[str] = set()
    for route in request.app.routes:
        if isinstance(route, Route) and route.methods and route.matches(
                request.scope)[0] != Match.NONE:
            methods |= route.methods
    return sorted(methods)
