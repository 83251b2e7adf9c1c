"""``memfs versions``: the history of a store: list, show, diff, restore, redact and prune
versions."""

from __future__ import annotations

import difflib

import click

from .. import errors
from ..models import MemoryVersion
from .base import AnyStore, Context, cli, pass_ctx
from .common import actor, actor_text, confirm, memory_id, pages, when
from .memories import memory_line
from .shared import table as _table
from .shared import walk as _walk


@cli.group()
def versions() -> None:
    """Read the history of a store: list, show, diff, restore, redact and prune versions.

    Example:

    \b
        memfs versions list notes --memory /prefs.md
    """


def _version_or_fail(v: MemoryVersion, why: str) -> str:
    """The content of ``v``; redacted versions and deletions have none to ``why``."""
    if v.redacted_at is not None:
        raise errors.InvalidRequest(f"version {v.id} is redacted: it has no content to {why}")
    if v.operation == "deleted" or v.content is None:
        raise errors.InvalidRequest(
            f"version {v.id} records the deletion of {v.path}: it has no content to {why} "
            "(pick the version before it)"
        )
    return v.content


@versions.command("list")
@click.argument("store_ref", metavar="STORE")
@click.option("--memory", "memory_ref", default=None, metavar="MEMORY",
              help="Only this memory (id or path; a deleted memory's last path works too).")
@click.option("--operation", type=click.Choice(["created", "modified", "deleted"]), default=None,
              help="Only versions of this kind.")
@click.option("--session", "session_id", default=None, metavar="ID",
              help="Only versions written by this session.")
@click.option("--api-key-id", default=None, metavar="ID",
              help="Only versions written with this API key.")
@click.option("--user-id", default=None, metavar="ID", help="Only versions written by this user.")
@click.option("--since", default=None, metavar="TIME", help="Created at or after (RFC 3339).")
@click.option("--until", default=None, metavar="TIME", help="Created at or before (RFC 3339).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most N versions.")
@pass_ctx
def versions_list(
    ctx: Context,
    store_ref: str,
    memory_ref: str | None,
    operation: str | None,
    session_id: str | None,
    api_key_id: str | None,
    user_id: str | None,
    since: str | None,
    until: str | None,
    limit: int | None,
) -> None:
    """List versions, newest first, with who made each one.

    Example:

    \b
        memfs versions list notes --memory /prefs.md --since 2025-01-01T00:00:00Z
    """
    store = ctx.store
    sid = store.stores.resolve(store_ref).id
    mid = None if memory_ref is None else memory_id(store, sid, memory_ref)
    items = pages(
        lambda **kw: store.versions.list(
            sid,
            memory_id=mid,
            operation=operation,
            session_id=session_id,
            api_key_id=api_key_id,
            user_id=user_id,
            created_at_gte=since,
            created_at_lte=until,
            **kw,
        ),
        limit,
    )
    rows = [
        (
            v.id,
            v.operation,
            "(redacted)" if v.redacted_at else (v.path or "-"),
            "-" if v.content_size_bytes is None else v.content_size_bytes,
            actor_text(v.created_by),
            when(v.created_at),
        )
        for v in items
    ]
    headers = ("ID", "OPERATION", "PATH", "SIZE", "ACTOR", "CREATED")
    ctx.output(items, _table(headers, rows, right=(3,)) if rows else "no versions")


@versions.command("show")
@click.argument("store_ref", metavar="STORE")
@click.argument("version_id", metavar="VERSION")
@pass_ctx
def versions_show(ctx: Context, store_ref: str, version_id: str) -> None:
    """Print a version's content exactly, like cat (--json: the version object).

    Example:

    \b
        memfs versions show notes memver_01... > old-prefs.md
    """
    sid = ctx.store.stores.resolve(store_ref).id
    v = ctx.store.versions.get(sid, version_id)
    if ctx.as_json:
        ctx.output(v)
    else:
        click.echo(_version_or_fail(v, "show").encode("utf-8"), nl=False)


def _unified(old: str, new: str, old_name: str, new_name: str) -> str:
    """A unified diff, marking a last line without newline as diff(1) does."""
    out = []
    for line in difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), old_name, new_name
    ):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _previous(store: AnyStore, sid: str, v: MemoryVersion) -> MemoryVersion | None:
    """The version of the same memory just before ``v`` (None if ``v`` is its first kept one)."""
    versions = _walk(lambda **kw: store.versions.list(sid, memory_id=v.memory_id, **kw))
    older = next((o for o in versions if o.id < v.id), None)
    return None if older is None else store.versions.get(sid, older.id)


@versions.command("diff")
@click.argument("store_ref", metavar="STORE")
@click.argument("old_id", metavar="VERSION")
@click.argument("new_id", metavar="[VERSION2]", required=False)
@pass_ctx
def versions_diff(ctx: Context, store_ref: str, old_id: str, new_id: str | None) -> None:
    """Show what changed as a unified diff: from VERSION to VERSION2, or, with one version,
    what that version changed (against the version before it; a creation against nothing,
    a deletion to nothing).

    Example:

    \b
        memfs versions diff notes memver_01...
    """
    store = ctx.store
    sid = store.stores.resolve(store_ref).id
    if new_id is None:
        new = store.versions.get(sid, old_id)
        old = None if new.operation == "created" else _previous(store, sid, new)
    else:
        old, new = store.versions.get(sid, old_id), store.versions.get(sid, new_id)

    def side(v: MemoryVersion | None, prefix: str) -> tuple[str, str]:
        if v is None:
            return "", "/dev/null"
        if v.operation == "deleted" and v.redacted_at is None:
            return "", "/dev/null"
        return _version_or_fail(v, "diff"), f"{prefix}{v.path} ({v.id})"

    (old_text, old_name), (new_text, new_name) = side(old, "a"), side(new, "b")
    diff = _unified(old_text, new_text, old_name, new_name)
    if ctx.as_json:
        ctx.output({"from": old.to_dict() if old else None, "to": new.to_dict(), "diff": diff})
    elif diff:
        click.echo(diff.encode("utf-8"), nl=False)
    elif old is not None and old.path != new.path:
        click.echo(f"no content change (renamed {old.path} -> {new.path})", err=True)
    else:
        click.echo("no content change", err=True)


@versions.command("restore")
@click.argument("store_ref", metavar="STORE")
@click.argument("version_id", metavar="VERSION")
@click.option("--path", "new_path", default=None,
              help="Restore at this path instead (needed when another memory took the old one).")
@pass_ctx
def versions_restore(ctx: Context, store_ref: str, version_id: str, new_path: str | None) -> None:
    """Bring back a version's content as a new version. A live memory gets that content
    (its path stays unless --path is given); a deleted memory comes back under its own id,
    at the version's path (or --path), its whole history still one memory's.

    Example:

    \b
        memfs versions restore notes memver_01...
    """
    store = ctx.store
    sid = store.stores.resolve(store_ref).id
    v = store.versions.get(sid, version_id, view="basic")
    try:
        current = store.memories.get(sid, v.memory_id, view="basic")
    except errors.NotFound:
        current = None
    m = store.versions.restore(sid, v.id, path=new_path, actor=actor())
    if current is None:
        ctx.output(m, memory_line(m, f"restored {v.id} as"))
    elif m.memory_version_id == current.memory_version_id:
        ctx.output(m, f"{m.path} already has the content of {v.id}; nothing to do")
    else:
        ctx.output(m, memory_line(m, f"restored {v.id} to"))


@versions.command("redact")
@click.argument("store_ref", metavar="STORE")
@click.argument("version_id", metavar="VERSION")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@pass_ctx
def versions_redact(ctx: Context, store_ref: str, version_id: str, yes: bool) -> None:
    """Erase a past version's path and content for good (the entry stays in the history).
    The current version of a live memory cannot be redacted: update or delete it first.

    Asks for confirmation on a terminal; elsewhere --yes is required.

    Example:

    \b
        memfs versions redact notes memver_01... --yes
    """
    sid = ctx.store.stores.resolve(store_ref).id
    confirm(
        yes,
        f"Erase the content of version {version_id} for good?",
        f"redact version {version_id}",
    )
    v = ctx.store.versions.redact(sid, version_id, actor=actor())
    ctx.output(v, f"redacted {v.id}")


@versions.command("prune")
@pass_ctx
def versions_prune(ctx: Context) -> None:
    """Delete versions older than the retention window (MEMFS_RETENTION_DAYS, default 30),
    always keeping the newest of every memory (MEMFS_RETENTION_KEEP, default 10).

    Example:

    \b
        MEMFS_RETENTION_DAYS=7 memfs versions prune
    """
    n = ctx.store.versions.prune()
    lim = ctx.store.limits
    ctx.output(
        {"pruned": n},
        f"pruned {n} version{'s' if n != 1 else ''} older than {lim.retention_days:g} days "
        f"(the newest {lim.retention_keep} of every memory are kept)",
    )
