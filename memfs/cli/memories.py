"""``memfs memories``: list, read, create, update and delete the memories of a store (a memory is
named by its id or by its path)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import click

from ..models import Memory, MemoryPrefix
from ..store import frontmatter
from .base import Context, cli, pass_ctx
from .common import (
    actor,
    confirm,
    deleted,
    expires_text,
    given_content,
    pages,
    resolve_memory,
    typed,
    when,
)
from .shared import table as _table


@cli.group()
def memories() -> None:
    """List, read, create, update and delete the memories of a store.

    A memory is named by its id or by its path (anything that starts with '/').

    Example:

    \b
        memfs memories create notes /prefs.md --content "Use ISO dates."
    """


def memory_line(m: Memory, verb: str) -> str:
    return f"{verb} {m.path} ({m.id}, {m.content_size_bytes} bytes, version {m.memory_version_id})"


@memories.command("list")
@click.argument("store_ref", metavar="STORE")
@click.option("--prefix", default=None, metavar="/DIR/", help="Only paths below this directory.")
@click.option(
    "--depth",
    type=click.IntRange(min=0),
    default=0,
    help="Levels to list below the prefix; deeper paths roll up into DIR/ lines (0: all).",
)
@click.option("--type", "memory_type", default=None, metavar="TYPE",
              help="Only memories of this type (the store's types: memfs stores describe).")
@click.option("--tag", default=None, metavar="TAG",
              help="Only memories with this tag (their front matter's tags:).")
@click.option("--preview", type=click.IntRange(min=1), default=None, metavar="N",
              help="Show the first N characters of each memory's text after its front matter "
              "(--json: as its content).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most N entries.")
@pass_ctx
def memories_list(
    ctx: Context, store_ref: str, prefix: str | None, depth: int, memory_type: str | None,
    tag: str | None, preview: int | None, limit: int | None,
) -> None:
    """List memories by path: size in bytes, last update (UTC), path; and, when a memory has
    them, its type, tags and how long it has left (SPEC §8). A memory's warnings (what memfs
    could not use in its front matter) and --preview's text are lines of their own below it.

    Example:

    \b
        memfs memories list notes --prefix /projects/ --depth 1
        memfs memories list notes --type context --tag sprint --preview 100
    """
    store = ctx.store
    sid = store.stores.resolve(store_ref).id
    filters: dict[str, Any] = {"view": "full"} if preview else {}
    if memory_type is not None:
        filters["memory_type"] = memory_type
    if tag is not None:
        filters["tag"] = tag
    items = pages(
        lambda **kw: store.memories.list(sid, path_prefix=prefix, depth=depth, **filters, **kw),
        limit,
    )
    if preview and ctx.as_json:
        items = [dataclasses.replace(m, content=_body(m.content or "")[:preview])
                 if isinstance(m, Memory) else m for m in items]
    ctx.output(items, _list_text(items, preview) if items else "no memories")


def _body(text: str) -> str:
    """A memory's text after its front matter (what a preview shows the start of)."""
    yaml, _ = frontmatter.split(text)
    if yaml is not None:  # it ends at the line that closes it
        close = text.find("\n", text.index("\n") + 1 + len(yaml))
        text = "" if close < 0 else text[close + 1:]
    return text.lstrip("\n")


def _list_text(items: list[Memory | MemoryPrefix], preview: int | None) -> str:
    """The human listing: a table, with the columns of typed memories when one of them has
    something to show (a store without them lists as before), and below a memory its
    warnings and its preview (``content``, when asked for), each on a line of its own."""
    now = datetime.now(UTC)
    metas = [m.memfs_meta if isinstance(m, Memory) else None for m in items]
    show_type = any(x is not None and x.type for x in metas)
    show_tags = any(x is not None and x.tags for x in metas)
    show_expiry = any(x is not None and x.expires_at for x in metas)
    headers = ["SIZE", "UPDATED"] + ["TYPE"] * show_type + ["TAGS"] * show_tags + [
        "EXPIRES"] * show_expiry + ["PATH"]
    rows = []
    for m, meta in zip(items, metas, strict=True):
        cells: list[Any] = [m.content_size_bytes, when(m.updated_at)] if isinstance(
            m, Memory) else ["", ""]
        if show_type:
            cells.append(meta.type or "-" if meta else "-")
        if show_tags:
            cells.append(",".join(meta.tags) or "-" if meta else "-")
        if show_expiry:
            cells.append(expires_text(meta.expires_at, now) if meta else "-")
        rows.append([*cells, m.path])
    lines = _table(headers, rows, right=(0,)).splitlines()
    out = lines[:1]
    for line, m, meta in zip(lines[1:], items, metas, strict=True):
        out.append(line)
        out += [f"    warning: {w}" for w in (meta.warnings if meta else ())]
        if preview and isinstance(m, Memory):
            body = _body(m.content or "")
            cut = body[:preview].replace("\n", " ").strip()
            out.append(f"    {cut}{'…' if len(body) > preview else ''}")
    return "\n".join(out)


@memories.command("show")
@click.argument("store_ref", metavar="STORE")
@click.argument("memory_ref", metavar="MEMORY")
@pass_ctx
def memories_show(ctx: Context, store_ref: str, memory_ref: str) -> None:
    """Print a memory's content exactly, like cat (--json: the memory object).

    Example:

    \b
        memfs memories show notes /prefs.md > prefs.md
    """
    sid = ctx.store.stores.resolve(store_ref).id
    m = resolve_memory(ctx.store, sid, memory_ref)
    if ctx.as_json:
        ctx.output(m)
    else:
        click.echo((m.content or "").encode("utf-8"), nl=False)


@memories.command("create")
@click.argument("store_ref", metavar="STORE")
@click.argument("path")
@click.option("--content", "-c", default=None, help="The content (UTF-8 text).")
@click.option(
    "--file",
    "-f",
    "file",
    default=None,
    metavar="FILE",
    help="Read the content from FILE ('-': stdin).",
)
@pass_ctx
def memories_create(
    ctx: Context, store_ref: str, path: str, content: str | None, file: str | None
) -> None:
    """Create a memory at PATH. The content comes from --content, --file, or stdin when it is
    piped (an empty stdin is an error: --content '' makes an empty memory); it never
    overwrites an existing memory.

    Example:

    \b
        echo "Use ISO dates." | memfs memories create notes /prefs.md
    """
    data = given_content(content, file, use_stdin=True)
    if data is None:
        raise click.UsageError("no content: give --content, --file, or pipe it on stdin")
    sid = ctx.store.stores.resolve(store_ref).id
    m = ctx.store.memories.create(sid, path, data, actor=actor())
    ctx.output(m, memory_line(m, "created"))


@memories.command("update")
@click.argument("store_ref", metavar="STORE")
@click.argument("memory_ref", metavar="MEMORY")
@click.option("--content", "-c", default=None, help="The new content.")
@click.option(
    "--file",
    "-f",
    "file",
    default=None,
    metavar="FILE",
    help="Read the new content from FILE ('-': stdin).",
)
@click.option("--path", "new_path", default=None, help="Move the memory to this path (same id).")
@click.option(
    "--if-sha256",
    "if_sha256",
    default=None,
    metavar="HASH",
    help="Only if the current content_sha256 is HASH (else exit 4, nothing changed).",
)
@pass_ctx
def memories_update(
    ctx: Context,
    store_ref: str,
    memory_ref: str,
    content: str | None,
    file: str | None,
    new_path: str | None,
    if_sha256: str | None,
) -> None:
    """Change a memory's content and/or move it to another path. New content comes from
    --content, --file, or piped stdin (stdin is read only when --path is not given; use
    --file - to move and replace content at once). A change writes one new version; no change
    writes none.

    Example:

    \b
        memfs memories update notes /prefs.md --path /preferences.md
    """
    data = given_content(content, file, use_stdin=new_path is None)
    if data is None and new_path is None:
        raise click.UsageError("nothing to change: give --content, --file, --path or pipe stdin")
    sid = ctx.store.stores.resolve(store_ref).id
    before = resolve_memory(ctx.store, sid, memory_ref, view="basic")
    m = ctx.store.memories.update(
        sid,
        before.id,
        content=data,
        path=new_path,
        precondition_sha256=if_sha256,
        actor=actor(),
    )
    changed = m.memory_version_id != before.memory_version_id
    ctx.output(m, memory_line(m, "updated" if changed else "unchanged"))


@memories.command("delete")
@click.argument("store_ref", metavar="STORE")
@click.argument("memory_ref", metavar="[MEMORY]", required=False)
@click.option(
    "--if-sha256",
    "if_sha256",
    default=None,
    metavar="HASH",
    help="Only if the current content_sha256 is HASH (else exit 4, nothing deleted).",
)
@click.option("--type", "memory_type", default=None, metavar="TYPE",
              help="Instead of one memory, every memory of this type, in one transaction.")
@click.option("--yes", "-y", is_flag=True,
              help="With --type: do not ask for confirmation.")
@click.option("--dry-run", is_flag=True,
              help="With --type: list what would be deleted, delete nothing.")
@pass_ctx
def memories_delete(
    ctx: Context, store_ref: str, memory_ref: str | None, if_sha256: str | None,
    memory_type: str | None, yes: bool, dry_run: bool,
) -> None:
    """Delete a memory, or with --type every memory of a type. Their history stays: `memfs
    versions restore` brings one back; a whole type comes back at once with the `memfs
    session revert` the command prints.

    Deleting a type asks for confirmation on a terminal; elsewhere --yes is required.

    Example:

    \b
        memfs memories delete notes /old.md
        memfs memories delete notes --type context --yes
    """
    if (memory_ref is None) == (memory_type is None):
        raise click.UsageError("give a MEMORY or --type TYPE (one of them)")
    if memory_type is not None:
        if if_sha256 is not None:
            raise click.UsageError("--if-sha256 is for one MEMORY, not --type")
        _delete_type(ctx, store_ref, memory_type, yes=yes, dry_run=dry_run)
        return
    assert memory_ref is not None
    if dry_run:
        raise click.UsageError("--dry-run is for --type TYPE")
    sid = ctx.store.stores.resolve(store_ref).id
    m = resolve_memory(ctx.store, sid, memory_ref, view="basic")
    ctx.store.memories.delete(sid, m.id, expected_sha256=if_sha256, actor=actor())
    ctx.output(deleted("memory_deleted", m.id), f"deleted {m.path} ({m.id})")


def _delete_type(ctx: Context, store_ref: str, type_: str, *, yes: bool, dry_run: bool) -> None:
    """``memories delete STORE --type TYPE``: the store's ``typed.clear_type``, one
    transaction by the CLI's actor, undone by the ``memfs session revert`` it prints."""
    s = ctx.store.stores.resolve(store_ref)
    part = typed(ctx.store)
    if not dry_run and not yes:
        n = len(part.clear_type(s.id, type_, actor=actor(), dry_run=True)["deleted"])
        if n:
            confirm(False, f"Delete the {n} memories of type {type_} in {s.name} ({s.id})?",
                    f"delete every memory of type {type_}")
    r = part.clear_type(s.id, type_, actor=actor(), dry_run=dry_run)
    paths: list[str] = r["deleted"]
    if not paths:
        human = f"no memories of type {type_} in {s.name} ({s.id})"
    elif dry_run:
        human = "\n".join([f"would delete {_count(len(paths))} of type {type_} in {s.name} "
                           f"({s.id}):", *(f"  {p}" for p in paths)])
    else:
        human = "\n".join([f"deleted {_count(len(paths))} of type {type_} in {s.name} "
                           f"({s.id})", f"undo with: memfs session revert {r['revert_id']}"])
    ctx.output(r, human)


def _count(n: int) -> str:
    return f"{n} memor{'y' if n == 1 else 'ies'}"
