"""``memfs memories``: list, read, create, update and delete the memories of a store (a memory is
named by its id or by its path)."""

from __future__ import annotations

import click

from ..models import Memory
from .base import Context, cli, pass_ctx
from .common import actor, deleted, given_content, pages, resolve_memory, when
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
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most N entries.")
@pass_ctx
def memories_list(
    ctx: Context, store_ref: str, prefix: str | None, depth: int, limit: int | None
) -> None:
    """List memories by path: size in bytes, last update (UTC), path.

    Example:

    \b
        memfs memories list notes --prefix /projects/ --depth 1
    """
    store = ctx.store
    sid = store.stores.resolve(store_ref).id
    items = pages(
        lambda **kw: store.memories.list(sid, path_prefix=prefix, depth=depth, **kw), limit
    )
    rows = [
        (m.content_size_bytes, when(m.updated_at), m.path)
        if isinstance(m, Memory)
        else ("", "", m.path)
        for m in items
    ]
    human = _table(("SIZE", "UPDATED", "PATH"), rows, right=(0,)) if rows else "no memories"
    ctx.output(items, human)


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
@click.argument("memory_ref", metavar="MEMORY")
@click.option(
    "--if-sha256",
    "if_sha256",
    default=None,
    metavar="HASH",
    help="Only if the current content_sha256 is HASH (else exit 4, nothing deleted).",
)
@pass_ctx
def memories_delete(ctx: Context, store_ref: str, memory_ref: str, if_sha256: str | None) -> None:
    """Delete a memory. Its history stays: `memfs versions restore` brings it back.

    Example:

    \b
        memfs memories delete notes /old.md
    """
    sid = ctx.store.stores.resolve(store_ref).id
    m = resolve_memory(ctx.store, sid, memory_ref, view="basic")
    ctx.store.memories.delete(sid, m.id, expected_sha256=if_sha256, actor=actor())
    ctx.output(deleted("memory_deleted", m.id), f"deleted {m.path} ({m.id})")
