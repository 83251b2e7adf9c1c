"""Sign-in with an API key (a server key, or a key kept in the database; never a session
token), sign-out."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute

from .. import errors
from .web import COOKIE, SESSION_SECONDS, Console, form, open_page, page, redirect, same_origin


def _safe_next(target: str | None) -> str:
    """Where to go after signing in: a path on this site only (never ``//host`` or a URL)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def client_address(request: Request) -> str:
    """The client address of a request, as the API's key gate counts its failures."""
    return request.client.host if request.client else ""


async def signin(console: Console, request: Request) -> Response:
    """The sign-in page (a GET; one already signed in goes on at once) and its form (a POST:
    a key, checked against the failed sign-ins of the client's address)."""
    request.state.user = None
    next_ = _safe_next(request.query_params.get("next"))
    if request.method in ("GET", "HEAD"):  # HEAD: the same answer (no body is sent)
        return await _signin_page(console, request, next_)
    if not same_origin(request):
        return console.render(request, "signin.html", status=403, next=next_,
                              error="sign in from the Console's own page")
    try:
        fields = await form(request)
    except errors.MemfsError as e:  # too large, too slow, too many at once
        return _refused(console, request, next_, e)
    next_ = _safe_next(fields.get("next"))
    try:
        cookie = await _checked_cookie(console, client_address(request),
                                       fields.get("api_key", "").strip())
    except errors.MemfsError as e:  # not a key, a session token, revoked; the database;
        # too many failed sign-ins from this address (429)
        return _refused(console, request, next_, e)
    response = RedirectResponse(next_, status_code=303)
    response.set_cookie(COOKIE, cookie, max_age=SESSION_SECONDS, path="/", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")
    return response


async def _signin_page(console: Console, request: Request, next_: str) -> Response:
    try:
        signed_in = await console.user(request) is not None
    except errors.MemfsError:
        signed_in = False  # the sign-in page says what fails when it is used
    if signed_in:
        return RedirectResponse(next_, status_code=303)
    return console.render(request, "signin.html", next=next_, error=None)


async def _checked_cookie(console: Console, address: str, key: str) -> str:
    """The cookie of a sign-in with ``key`` from ``address``, unless that address failed too
    often; a key that is no key counts as one more failure.

    :raises MemfsError: refused (:meth:`Console.new_cookie`), or :class:`RateLimited`.
    """
    if console.failures is not None:
        console.failures.check(address, key)
    try:
        return await console.new_cookie(key)
    except errors.UnknownKey:  # a guess (not a revoked key, not a session token)
        if console.failures is not None:
            console.failures.failed(address, key)
        raise


def _refused(console: Console, request: Request, next_: str,
             e: errors.MemfsError) -> Response:
    """The sign-in page again, saying why, with the API's status and headers for ``e``."""
    refused = console.render(request, "signin.html", status=console.error_status(e),
                             next=next_, error=e.message)
    refused.headers.update(console.error_headers(e))
    return refused


async def signout(console: Console, request: Request) -> Response:
    await console.sign_out(request.state.user)
    response = redirect("/signin", "signed out")
    response.delete_cookie(COOKIE, path="/")
    return response


routes: list[BaseRoute] = [
    open_page("/signin", signin, ("GET", "POST")),
    page("/signout", signout, ("POST",), right="read"),
]
