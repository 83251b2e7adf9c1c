"""``memfs session``: create and inspect agent sessions (their attached stores, system prompt
and tool events), revert one, end the stale ones; and a session spec file read for ``session
create`` and ``memfs run --spec``."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..launcher.pinned import version_reader
from ..launcher.prompt import render_memory_prompt
from ..rules import DEFAULT_AROUND_CONTEXT, MAX_AROUND_CONTEXT
from ..store import Store
from ..store.transcript import message_text
from .base import Context, cli, fail, pass_ctx
from .common import actor, pages, when
from .shared import table as _table


@cli.group()
def session() -> None:
    """Create and inspect agent sessions: their attached stores, system prompt and tool events.

    Example:

    \b
        memfs session list --store notes
    """


_STATUSES = ["rescheduling", "running", "idle", "terminated"]


@session.command("list")
@click.option("--store", "store_ref", default=None, metavar="STORE",
              help="Only sessions that attached this store.")
@click.option("--status", "statuses", multiple=True, type=click.Choice(_STATUSES),
              help="Only sessions in this status (repeatable).")
@click.option("--metadata", "metadata", multiple=True, metavar="KEY=VALUE",
              help="Only sessions whose metadata holds KEY=VALUE (repeatable: every pair).")
@click.option("--all", "include_archived", is_flag=True, help="Include archived sessions.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most N sessions.")
@pass_ctx
def session_list(
    ctx: Context,
    store_ref: str | None,
    statuses: tuple[str, ...],
    metadata: tuple[str, ...],
    include_archived: bool,
    limit: int | None,
) -> None:
    """List sessions, newest first.

    Example:

    \b
        memfs session list --status terminated --limit 5
        memfs session list --metadata thread=support-42
    """
    wanted: dict[str, str] = {}
    for pair in metadata:
        key, eq, value = pair.partition("=")
        if not eq:
            fail(f"--metadata takes KEY=VALUE, not {pair[:80]!r}", 2)
        if key in wanted:
            fail(f"--metadata {key[:64]}= is given twice", 2)
        wanted[key] = value
    store = ctx.store
    store_id = None if store_ref is None else store.stores.resolve(store_ref).id
    items = pages(
        lambda **kw: store.sessions.list(
            memory_store_id=store_id,
            statuses=list(statuses) or None,
            include_archived=include_archived,
            metadata=wanted or None,
            **kw,
        ),
        limit,
    )
    rows = [
        (s.id, s.status, when(s.created_at), ", ".join(r.name for r in s.resources) or "-")
        for s in items
    ]
    human = _table(("ID", "STATUS", "CREATED", "STORES"), rows) if rows else "no sessions"
    ctx.output(items, human)


def load_spec(ctx: Context, path: str) -> Any:
    """The session spec in ``path``, checked, its stores resolved to ids
    (memfs.launcher.spec)."""
    from ..launcher.spec import load

    spec = load(path)
    try:
        return spec.resolve(ctx.store)
    finally:
        ctx.close()  # memfs run opens its own; memfs session create reopens it


@session.command("create")
@click.option("--spec", "spec_path", required=True, type=click.Path(dir_okay=False),
              metavar="FILE", help="The session spec (YAML or JSON): resources, title, metadata.")
@pass_ctx
def session_create(ctx: Context, spec_path: str) -> None:
    """Create an idle session from a spec file, for a runner to launch later, and print its
    id (--json: the session). Nothing is mounted; each store's mount_path is under
    /mnt/memory.

    The spec is YAML (or JSON) with the session's resources, as the API's sessions.create
    takes them, plus a store name in place of an id (memory_store: NAME), a title and
    metadata:

    \b
        title: Triage
        metadata: {team: support}
        resources:
          - type: memory_store
            memory_store: User Preferences
            access: read_only
            instructions: Check the user's preferences before answering.

    Example:

    \b
        memfs session create --spec session.yaml
    """
    spec = load_spec(ctx, spec_path)
    s = ctx.store.sessions.create(spec.resources(), title=spec.title, metadata=spec.metadata)
    ctx.output(s, s.id)


@session.command("show")
@click.argument("session_id", metavar="ID")
@pass_ctx
def session_show(ctx: Context, session_id: str) -> None:
    """Show a session: status, times and the memory stores attached to it.

    Example:

    \b
        memfs session show sesn_01...
    """
    s = ctx.store.sessions.get(session_id)
    lines = [
        f"id:       {s.id}",
        f"status:   {s.status}",
        f"created:  {s.created_at}",
        f"updated:  {s.updated_at}",
    ]
    if s.title:
        lines.append(f"title:    {s.title}")
    if s.metadata:
        lines.append("metadata:")
        lines += [f"  {k}={v}" for k, v in sorted(s.metadata.items())]
    if s.archived_at:
        lines.append(f"archived: {s.archived_at}")
    lines.append(f"stores:   {len(s.resources) or 'none'}")
    for r in s.resources:
        lines += [
            f"  {r.mount_path}  {r.access}  {r.name} ({r.memory_store_id})",
        ]
        if r.description:
            lines.append(f"    description:  {_prompt_indent(r.description)}")
        if r.instructions:
            lines.append(f"    instructions: {_prompt_indent(r.instructions)}")
    ctx.output(s, "\n".join(lines))


def _prompt_indent(text: str) -> str:
    return "\n                  ".join(text.splitlines())


#: The most characters of a message the timeline shows (``--json``: all of it).
TIMELINE_TEXT_CHARS = 100


def _event_text(body: dict[str, Any]) -> str:
    """The interesting part of an event for the timeline."""
    t = body.get("type", "")
    text = message_text(body)
    if text is not None:
        line = " ".join(text.split())
        return line if len(line) <= TIMELINE_TEXT_CHARS else line[:TIMELINE_TEXT_CHARS - 1] + "…"
    if t == "agent.tool_use":
        inp = body.get("input") or {}
        parts = [str(body.get("name", "?")), str(inp.get("operation", "")),
                 str(inp.get("file_path", ""))]
        if inp.get("new_path"):
            parts += ["->", str(inp["new_path"])]
        return " ".join(p for p in parts if p)
    if t in ("agent.tool_result", "user.tool_result"):
        texts = [
            str(b.get("text", ""))
            for b in body.get("content") or []
            if isinstance(b, dict) and b.get("type") == "text"
        ]
        text = " ".join(" ".join(texts).split())
        return f"{'error' if body.get('is_error') else 'ok'}: {text}".rstrip(": ")
    if t == "session.status_idle" and isinstance(body.get("stop_reason"), dict):
        return f"stop_reason: {body['stop_reason'].get('type')}"
    if t == "session.error" and isinstance(body.get("error"), dict):
        return f"{body['error'].get('type')}: {body['error'].get('message', '')}"
    return ""


@session.command("events")
@click.argument("session_id", metavar="ID")
@click.option("--type", "types", multiple=True, metavar="TYPE",
              help="Only events of this type, e.g. agent.message or agent.tool_use "
                   "(repeatable).")
@click.option("--after", default=None, metavar="TIME",
              help="Only events processed after TIME (RFC 3339).")
@click.option("--before", default=None, metavar="TIME",
              help="Only events processed before TIME (RFC 3339).")
@click.option("--around", default=None, metavar="EVENT_ID",
              help="The event EVENT_ID with the events just before and after it.")
@click.option("--context", type=click.IntRange(min=0, max=MAX_AROUND_CONTEXT), default=None,
              help=f"With --around: how many events before and after it "
                   f"(default {DEFAULT_AROUND_CONTEXT}).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most N events.")
@pass_ctx
def session_events(
    ctx: Context, session_id: str, types: tuple[str, ...], after: str | None,
    before: str | None, around: str | None, context: int | None, limit: int | None,
) -> None:
    """Print a session's events as a timeline: time, type, id, and what it says (a message's
    text, a tool call's operation, path and result).

    Example:

    \b
        memfs session events sesn_01... --type user.message --type agent.message
        memfs session events sesn_01... --after 2026-12-06T09:00:00Z --before 2026-12-06T10:00:00Z
        memfs session events sesn_01... --around sevt_01... --context 3
    """
    store = ctx.store
    if around is not None:
        if after is not None or before is not None or limit is not None:
            fail("--around shows the events around one event: --after, --before and --limit "
                 "do not apply to it", 2)
        items = store.events.around(
            session_id, around, context=DEFAULT_AROUND_CONTEXT if context is None else context,
            types=list(types) or None)
    else:
        if context is not None:
            fail("--context is the number of events around --around EVENT_ID: give --around", 2)
        items = pages(
            lambda **kw: store.events.list(session_id, types=list(types) or None,
                                           created_at_gt=after, created_at_lt=before, **kw),
            limit,
        )
    rows = [(when(e.processed_at), e.type, e.id, _event_text(e.body)) for e in items]
    ctx.output(items, _table(("TIME", "TYPE", "ID", "WHAT"), rows) if rows else "no events")


@session.command("prompt")
@click.argument("session_id", metavar="ID")
@pass_ctx
def session_prompt(ctx: Context, session_id: str) -> None:
    """Print the memory section of the session's system prompt (one note per attached store).

    Example:

    \b
        memfs session prompt sesn_01...
    """
    s = ctx.store.sessions.get(session_id)
    text = render_memory_prompt(s, version_reader(ctx.store), history=ctx.store)
    if ctx.as_json:
        ctx.output({"session_id": s.id, "prompt": text})
    else:
        click.echo(text.encode("utf-8"), nl=False)


@session.command("revert")
@click.argument("target", metavar="ID")
@click.option("--dry-run", is_flag=True, help="Show the plan and the conflicts; write nothing.")
@click.option("--force", is_flag=True,
              help="Also revert memories changed by someone else since (their changes are "
                   "overwritten, with new versions: nothing is erased).")
@pass_ctx
def session_revert(ctx: Context, target: str, dry_run: bool, force: bool) -> None:
    """Undo a session: every memory it created, changed, renamed or deleted, in every store,
    goes back to its state before the session's first write of it, as new versions by you,
    all in one transaction. ID is a session id, or the id of an earlier revert
    (memrevert_...) to undo that revert.

    A memory changed by someone else after the session's first write of it is a conflict:
    left alone and shown with both sides (the session's last version and the current one,
    with a diff); --force reverts it anyway. A memory whose old path is now taken by
    another memory (or forbidden by the file/directory rule), or whose old content was
    pruned or redacted, is a conflict that --force does not change (nothing unrelated is
    ever deleted). Memories already as they were are left alone.

    Exit status: 0 when everything was reverted (or there was nothing to do), 10 when
    conflicts were left (the rest was reverted), 3 for an unknown session or revert, 5 when
    the store refused a step (e.g. the 2,000-memory limit; then nothing was changed).

    Example:

    \b
        memfs session revert sesn_01... --dry-run
        memfs session revert sesn_01...
        memfs session revert memrevert_01...   # undo that revert
    """
    from ..store.revert import EXIT_LEFT, render

    r = ctx.store.undo.revert(target, actor=actor(), dry_run=dry_run, force=force)
    ctx.output(r, render(r))
    if r["conflicts"]:
        sys.exit(EXIT_LEFT)


@session.command("reap")
@pass_ctx
def session_reap(ctx: Context) -> None:
    """End the sessions whose `memfs run` died without ending them (killed, crashed, or the
    machine rebooted): each is marked terminated with a session.error event. `memfs run` does
    this by itself when it starts.

    Example:

    \b
        memfs session reap
    """
    store = ctx.store
    if not isinstance(store, Store):
        fail("session reap ends the sessions of local launchers: drop --url / MEMFS_URL", 2)
    from ..launcher.reap import reap_sessions

    ended = reap_sessions(store)
    ctx.output(ended, "\n".join(f"ended {sid}" for sid in ended) or "no stale sessions")
