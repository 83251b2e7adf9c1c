"""``memfs stores``: create, list, show, update, archive and delete memory stores."""

from __future__ import annotations

from typing import Any

import click

from .. import errors
from ..models import DEFAULT_WORKSPACE, MemoryStore
from ..rules import pinned_prefix, validate_workspace
from ..store import Store
from .base import AnyStore, Context, cli, fail, pass_ctx
from .common import actor, confirm, deleted, given_content, kv_pairs, pages, when
from .shared import table as _table


@cli.group()
def stores() -> None:
    """Create, list, show, update, archive and delete memory stores.

    Example:

    \b
        memfs stores create "User Preferences" --description "Per-user preferences"
        memfs stores create notes --workspace team-a     # a team's (docs/http-api.md)
    """


def _workspace_option(f: Any) -> Any:
    return click.option(
        "--workspace", "-w", default=None, metavar="W",
        help="The store's workspace (default: 'default'), on the local database; a server "
        "makes and names stores in the calling key's own workspace.")(f)


def _local_workspace(ctx: Context, workspace: str | None) -> str | None:
    """``--workspace`` checked by the rule of workspace ids (None: not given). A server makes
    and resolves stores in the calling key's own workspace, so with ``--url`` it is refused
    rather than ignored: the store would be made in, or found in, another team's."""
    if workspace is None:
        return None
    if ctx.url:
        fail("--workspace works on the server's database (without --url): a server makes and "
             "names stores in your key's own workspace", 2)
    return validate_workspace(workspace)


def _store_text(store: AnyStore, s: MemoryStore) -> str:
    lines = [
        f"id:          {s.id}",
        f"name:        {s.name}",
        f"description: {s.description}",
        f"memories:    {store.memories.count(s.id)}",
        f"created:     {s.created_at}",
        f"updated:     {s.updated_at}",
        f"archived:    {s.archived_at or '-'}",
    ]
    if s.metadata:
        lines.append("metadata:")
        lines += [f"  {k}={v}" for k, v in sorted(s.metadata.items())]
    return "\n".join(lines)


@stores.command("create")
@click.argument("name")
@click.option("--description", "-d", default=None, help="What the store holds (the agent sees it).")
@click.option("--metadata", "-m", multiple=True, metavar="KEY=VALUE", help="A metadata pair.")
@click.option("--pinned-template", metavar="FILE", default=None,
              help="Make the store's first pinned memory, /pinned/working-memory.md (under "
                   "its memfs_pinned_prefix), from FILE: a working memory that every "
                   "session's prompt shows.")
@_workspace_option
@pass_ctx
def stores_create(
    ctx: Context, name: str, description: str | None, metadata: tuple[str, ...],
    pinned_template: str | None, workspace: str | None,
) -> None:
    """Create a memory store called NAME and print it.

    A workspace needs no making of its own: its first store (or key) starts it.

    Example:

    \b
        memfs stores create "User Preferences" -d "Per-user preferences" -m team=docs
        memfs stores create notes --workspace team-a
        memfs stores create profile --pinned-template working-memory.md
    """
    workspace = _local_workspace(ctx, workspace)
    pairs = dict(kv_pairs(metadata, "--metadata"))
    template = path = None
    if pinned_template is not None:
        template = given_content(None, pinned_template, use_stdin=False)
        prefix = pinned_prefix(pairs)
        if prefix is None:
            raise click.UsageError("--pinned-template writes under the store's pinned prefix, "
                                   "which memfs_pinned_prefix=off turns off")
        path = prefix + TEMPLATE_NAME
    store = ctx.open(create=True)
    if isinstance(store, Store):
        s = store.stores.create(name, description, pairs,
                               workspace=workspace or DEFAULT_WORKSPACE)
    else:
        s = store.stores.create(name, description, pairs)
    if template is not None and path is not None:
        # Two calls, over a local database as over a server: the API makes a store without
        # memories (API.md's stores.create). A template the store refuses (too large, not
        # UTF-8) leaves no store behind.
        try:
            store.memories.create(s.id, path, template, actor=actor())
        except errors.MemfsError:
            store.stores.delete(s.id)
            raise
    made = f"created memory store {s.id} ({s.name})"
    ctx.output(s, made + (f" with its working memory {path}" if path else ""))
    warn_namesakes(store, s.id, s.name)


#: The name of the pinned memory ``--pinned-template`` makes, in the store's pinned prefix.
TEMPLATE_NAME = "working-memory.md"


def warn_namesakes(store: AnyStore, store_id: str, name: str) -> None:
    """A store's name need not be unique, but a name two live stores share names neither of
    them (Store.stores.namesakes): after a create, rename or import, say so in one line on
    stderr."""
    others = store.stores.namesakes(store_id)
    if not others:
        return
    ids = ", ".join(o.id for o in others[:5]) + (
        f" and {len(others) - 5} more" if len(others) > 5 else "")
    who = ("another live memory store is" if len(others) == 1
           else f"{len(others)} other live memory stores are")
    click.echo(
        f"memfs: warning: {who} also named {name!r} ({ids}): refer to each by its id "
        f"(e.g. memfs stores show {others[0].id}), or rename one "
        f"(memfs stores update ID --name NEW)",
        err=True,
    )


@stores.command("list")
@click.option(
    "--all", "--include-archived", "include_archived", is_flag=True, help="Include archived stores."
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most N stores.")
@pass_ctx
def stores_list(ctx: Context, include_archived: bool, limit: int | None) -> None:
    """List memory stores, newest first.

    Example:

    \b
        memfs stores list --all
    """
    store = ctx.store
    items = pages(
        lambda **kw: store.stores.list(include_archived=include_archived, **kw), limit
    )
    rows = [
        (s.id, s.name, store.memories.count(s.id), when(s.created_at), when(s.archived_at))
        for s in items
    ]
    human = _table(("ID", "NAME", "MEMORIES", "CREATED", "ARCHIVED"), rows, right=(2,))
    ctx.output(items, human if items else "no memory stores (create one: memfs stores create NAME)")


@stores.command("show")
@click.argument("store_ref", metavar="STORE")
@_workspace_option
@pass_ctx
def stores_show(ctx: Context, store_ref: str, workspace: str | None) -> None:
    """Show one memory store (by id or name; --workspace: only that workspace's).

    Example:

    \b
        memfs stores show "User Preferences"
        memfs stores show notes --workspace team-a
    """
    workspace = _local_workspace(ctx, workspace)
    store = ctx.store
    if isinstance(store, Store) and workspace is not None:
        try:
            s = store.stores.resolve(store_ref, workspace=workspace)
        except errors.NotFound as e:
            raise errors.NotFound(f"{e.message} in workspace {workspace}") from None
    else:
        s = store.stores.resolve(store_ref)
    ctx.output(s, _store_text(ctx.store, s))


@stores.command("update")
@click.argument("store_ref", metavar="STORE")
@click.option("--name", default=None, help="A new name.")
@click.option("--description", "-d", default=None, help="A new description.")
@click.option("--metadata", "-m", multiple=True, metavar="KEY=VALUE", help="Set a metadata pair.")
@click.option("--unset-metadata", multiple=True, metavar="KEY", help="Remove a metadata key.")
@pass_ctx
def stores_update(
    ctx: Context,
    store_ref: str,
    name: str | None,
    description: str | None,
    metadata: tuple[str, ...],
    unset_metadata: tuple[str, ...],
) -> None:
    """Rename a store, change its description, or set and remove metadata keys.

    Example:

    \b
        memfs stores update notes --name "Team Notes" -m owner=ana --unset-metadata draft
    """
    old = ctx.store.stores.resolve(store_ref)
    patch: dict[str, str | None] = dict(kv_pairs(metadata, "--metadata"))
    patch.update({key: None for key in unset_metadata})
    s = ctx.store.stores.update(
        old.id, name=name, description=description, metadata=patch or None
    )
    ctx.output(s, _store_text(ctx.store, s))
    if s.name != old.name:
        warn_namesakes(ctx.store, s.id, s.name)


@stores.command("archive")
@click.argument("store_ref", metavar="STORE")
@pass_ctx
def stores_archive(ctx: Context, store_ref: str) -> None:
    """Archive a store: it stays readable but takes no more writes or attachments.

    Example:

    \b
        memfs stores archive "Old Notes"
    """
    s = ctx.store.stores.archive(ctx.store.stores.resolve(store_ref).id)
    ctx.output(s, f"archived memory store {s.id} ({s.name})")


@stores.command("delete")
@click.argument("store_ref", metavar="STORE")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_ctx
def stores_delete(ctx: Context, store_ref: str, yes: bool) -> None:
    """Delete a store with all its memories and their whole history, for good.

    Asks for confirmation on a terminal; elsewhere --yes is required.

    Example:

    \b
        memfs stores delete "Old Notes" --yes
    """
    s = ctx.store.stores.resolve(store_ref)
    n = ctx.store.memories.count(s.id)
    confirm(
        yes,
        f"Delete memory store {s.name} ({s.id}), its {n} memories and all their versions?",
        f"delete memory store {s.id}",
    )
    ctx.store.stores.delete(s.id)
    ctx.output(deleted("memory_store_deleted", s.id), f"deleted memory store {s.id} ({s.name})")
