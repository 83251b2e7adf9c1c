"""The workspace's API keys, for admins (issue 22): the list (never a secret), make one (a name,
a role, optionally the only stores it opens and an expiry; its secret is shown once, on the
page that answers the form), revoke one (its sign-ins, requests and streams end at once on
every server of the database). Every rule is the store's (:meth:`Store.keys.create`); a server
key (the operator's, the default workspace's admin) may also manage another workspace's keys,
as in the API."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from .. import errors
from ..models import ApiKey
from ..rules import format_time, validate_workspace
from .web import Console, User, form, page, redirect


def key_status(key: ApiKey, now: str) -> str:
    """``revoked``, ``expired`` or ``active``."""
    if key.revoked_at is not None:
        return "revoked"
    if key.expires_at is not None and key.expires_at <= now:
        return "expired"
    return "active"


def store_refs(text: str) -> list[str]:
    """The stores typed in the form: one id or name a line (blank lines ignored)."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def _workspace(user: User, asked: str | None) -> str:
    """The workspace a page is about: the user's own, or (a server key only) the one asked.

    :raises InvalidRequest: not a workspace id. :raises Forbidden: another workspace, asked
        with a stored admin key.
    """
    if not asked or asked == user.workspace:
        return user.workspace
    if not user.grant.server:
        raise errors.Forbidden(f"an admin key manages the keys of its own workspace "
                               f"({user.workspace}) only")
    return validate_workspace(asked)


async def _keys_page(console: Console, request: Request, workspace: str, *, status: int = 200,
                     fields: dict[str, str] | None = None, error: str | None = None,
                     made: ApiKey | None = None) -> Response:
    """The keys of ``workspace`` and the new-key form (as typed, with the store's error,
    after a refused create; ``made``: the key just made, its secret shown this once)."""
    store = console.store
    user: User = request.state.user
    keys = await console.run(store.keys.list, workspace=workspace)
    stores = {s.id: s.name for s in (await console.run(
        store.stores.list, include_archived=True, limit=100, workspace=workspace)).data}
    names = await console.key_names(user, [k.created_by for k in keys])
    now = format_time(datetime.now(UTC))
    return console.render(
        request, "keys.html", status=status, keys=keys, workspace=workspace,
        stores=stores, names=names, status_of={k.id: key_status(k, now) for k in keys},
        form=fields or {"role": "read_write"}, error=error, made=made)


async def key_list(console: Console, request: Request) -> Response:
    user: User = request.state.user
    return await _keys_page(console, request,
                            _workspace(user, request.query_params.get("workspace")))


async def key_create(console: Console, request: Request) -> Response:
    store = console.store
    user: User = request.state.user
    fields = await form(request)
    workspace = user.workspace
    try:
        workspace = _workspace(user, fields.get("workspace", "").strip() or None)
        refs = store_refs(fields.get("stores", ""))
        ids = [(await console.run(store.stores.resolve, ref, workspace=workspace)).id
               for ref in refs]
        expires: Any = fields.get("expires", "").strip() or None
        made = await console.run(
            store.keys.create, fields.get("name", "").strip(), workspace=workspace,
            role=fields.get("role") or "read_write", store_ids=ids or None,
            expires_in=expires, created_by=user.actor)
    except (errors.InvalidRequest, errors.NotFound) as e:  # a bad field, an unknown store
        return await _keys_page(console, request, workspace, status=400, fields=fields,
                                error=e.message)
    # Shown on this answer only (never in a redirect, a cookie or a log): a page of the
    # Console is never cached (SecurityHeaders).
    return await _keys_page(console, request, workspace, status=201, made=made)


async def key_revoke(console: Console, request: Request) -> Response:
    store = console.store
    user: User = request.state.user
    kid = request.path_params["key_id"]
    key = await console.run(store.keys.revoke, kid,
                            workspace=None if user.grant.server else user.workspace)
    back = "/keys" + ("" if key.workspace_id == user.workspace
                      else f"?workspace={key.workspace_id}")
    mine = " (the key you signed in with: you are signed out)" if kid == user.key_id else ""
    return redirect(back, f"revoked the key {key.name} ({key.id}): its requests, streams "
                          f"and Console sign-ins end now{mine}")


routes: list[BaseRoute] = [
    page("/keys", key_list, right="admin", form_page=True),
    page("/keys", key_create, ("POST",), name="key_create", right="admin"),
    page("/keys/{key_id}/revoke", key_revoke, ("POST",), right="admin"),
]
