"""``memfs keys``: make, list and revoke the API keys kept in the database (issue 22), on the
local database or, with ``--url``, through a server (an admin key's, for its workspace; a
server key's, for any). A secret is printed once, when its key is made: only its SHA-256 is
kept."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import click

from .. import errors
from ..models import DEFAULT_WORKSPACE, ROLES, ApiKey
from ..rules import format_time, validate_workspace
from ..store import Store
from .base import AnyStore, Context, cli, fail, pass_ctx
from .common import actor, when
from .shared import table as _table

#: How many store ids a row of ``keys list`` shows before "+N".
_STORES_SHOWN = 2


@cli.group()
def keys() -> None:
    """Make, list and revoke API keys: who may use a server, in which workspace, as what.

    A key belongs to one workspace and sees only its stores, sessions and dreams; its role is
    admin (also manages the workspace's keys), read_write or read_only; --store limits it to
    some stores. The keys of `memfs serve --api-key` are the default workspace's admins.

    Example:

    \b
        memfs keys create ci-reader --workspace team-a --read-only --expires 30d
    """


def _workspace(workspace: str | None) -> str | None:
    """``--workspace`` checked by the rule of workspace ids (None: not given)."""
    return None if workspace is None else validate_workspace(workspace)


def _by_id_hint(workspace: str) -> str:
    return (f"(a server resolves a store's name in your key's own workspace: name a store "
            f"of workspace {workspace} by its id)")


def _store_ids(store: AnyStore, refs: Sequence[str], workspace: str | None) -> list[str]:
    """The ids of the stores ``refs`` (ids or names) name in the key's workspace. A server
    resolves names in the calling key's own workspace: a store of another workspace is named
    by its id there (the server checks it is that workspace's)."""
    if isinstance(store, Store):
        ws = workspace or DEFAULT_WORKSPACE
        found = []
        for ref in refs:
            try:
                found.append(store.stores.resolve(ref, workspace=ws).id)
            except errors.NotFound as e:
                raise errors.NotFound(f"{e.message} in workspace {ws}") from None
        return found
    ids = []
    for ref in refs:
        try:
            ids.append(store.stores.resolve(ref).id)
        except errors.NotFound:
            if workspace is None:
                raise
            if not ref.startswith("memstore_"):
                raise errors.NotFound(f"memory store {ref!r} not found in workspace "
                                      f"{workspace} {_by_id_hint(workspace)}") from None
            ids.append(ref)
    return ids


def _scope(k: ApiKey) -> str:
    if k.memory_store_ids is None:
        return "every store"
    return "stores " + ", ".join(k.memory_store_ids)


@keys.command("create")
@click.argument("name")
@click.option("--workspace", "-w", default=None, metavar="W",
              help="The key's workspace (default: 'default'; with --url, the calling key's "
              "own; another one only with a server key).")
@click.option("--role", default=None, metavar="|".join(ROLES),
              help="admin: everything in the workspace, its keys too; read_write (the "
              "default): everything but the keys; read_only: only reads.")
@click.option("--read-only", is_flag=True, help="The same as --role read_only.")
@click.option("--store", "stores", multiple=True, metavar="STORE",
              help="Open only this store (id or name, in the key's workspace); repeatable. "
              "Default: every store of the workspace.")
@click.option("--expires", default=None, metavar="DURATION",
              help="Expire after DURATION: seconds, or a number with s, m, h, d or w (30d). "
              "Default: never (until revoked).")
@pass_ctx
def keys_create(ctx: Context, name: str, workspace: str | None, role: str | None,
                read_only: bool, stores: tuple[str, ...], expires: str | None) -> None:
    """Make an API key called NAME and print its secret, this once.

    The secret alone goes to stdout (KEY=$(memfs keys create ...)), what was made to stderr;
    --json prints the key's object, the secret in its "key". The secret is never shown again:
    the database keeps only its SHA-256.

    Example:

    \b
        memfs keys create "ci-reader" --workspace team-a --read-only --store notes --expires 30d
        memfs keys create ops --role admin
    """
    if read_only and role not in (None, "read_only"):
        fail(f"give --read-only or --role {role}, not both", 2)
    role = "read_only" if read_only else role or "read_write"
    workspace = _workspace(workspace)
    store = ctx.open(create=True)  # a key is made before the first `memfs serve`
    store_ids = _store_ids(store, stores, workspace) if stores else None
    if isinstance(store, Store):
        made = store.keys.create(name, workspace=workspace or DEFAULT_WORKSPACE, role=role,
                                store_ids=store_ids, expires_in=expires, created_by=actor())
    else:
        try:
            made = store.keys.create(name, workspace=workspace, role=role,
                                    store_ids=store_ids, expires_in=expires)
        except errors.NotFound as e:
            if workspace is None or all(r.startswith("memstore_") for r in stores):
                raise
            # A name resolved in the calling key's workspace, to a store of it, not of W.
            raise errors.NotFound(f"{e.message} in workspace {workspace} "
                                  f"{_by_id_hint(workspace)}") from None
    if ctx.as_json:
        ctx.output(made)
        return
    click.echo(f"memfs: made API key {made.id} ({made.name}): workspace {made.workspace_id}, "
               f"role {made.role}, {_scope(made)}, "
               f"{'expires ' + made.expires_at if made.expires_at else 'never expires'}",
               err=True)
    click.echo(made.key)
    click.echo("memfs: this secret will not be shown again: keep it now (only its SHA-256 "
               "is kept)", err=True)


def _stores_cell(ids: list[str] | None) -> str:
    if ids is None:
        return "all"
    more = len(ids) - _STORES_SHOWN
    return ",".join(ids[:_STORES_SHOWN]) + (f" +{more}" if more > 0 else "")


@keys.command("list")
@click.option("--workspace", "-w", default=None, metavar="W",
              help="Only this workspace's keys (default: every workspace's; with --url, the "
              "calling key's own).")
@pass_ctx
def keys_list(ctx: Context, workspace: str | None) -> None:
    """List API keys, newest first; never a secret.

    Example:

    \b
        memfs keys list --workspace team-a
    """
    items = ctx.store.keys.list(workspace=_workspace(workspace))
    now = format_time(datetime.now(UTC))
    rows = [
        (k.id, k.name, k.workspace_id, k.role, _stores_cell(k.memory_store_ids),
         when(k.created_at),
         when(k.expires_at) + (" (expired)" if k.expires_at and k.expires_at <= now else ""),
         when(k.last_used_at), when(k.revoked_at))
        for k in items
    ]
    human = _table(("ID", "NAME", "WORKSPACE", "ROLE", "STORES", "CREATED", "EXPIRES",
                    "LAST USED", "REVOKED"), rows)
    ctx.output(items, human if items else "no API keys (make one: memfs keys create NAME)")


@keys.command("revoke")
@click.argument("key_id")
@pass_ctx
def keys_revoke(ctx: Context, key_id: str) -> None:
    """Revoke the API key KEY_ID, for good: its next request is refused by every server of
    the database, and the streams and Console sign-ins made with it end.

    Example:

    \b
        memfs keys revoke apikey_0123456789abcdef
    """
    store = ctx.store
    before = store.keys.get(key_id)
    k = store.keys.revoke(key_id)
    if before.revoked_at is not None:
        human = f"API key {k.id} ({k.name}) was revoked already, at {k.revoked_at}"
    else:
        human = f"revoked API key {k.id} ({k.name}) of workspace {k.workspace_id}"
    ctx.output(k, human)
