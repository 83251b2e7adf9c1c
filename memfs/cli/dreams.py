"""``memfs dream``: consolidate a store and the transcripts of sessions into a new store, with a
model (:mod:`memfs.dreams`): start one (``memfs dream STORE`` is ``dream start``), list, show
and cancel them."""

from __future__ import annotations

import click

from .. import errors
from ..models import Dream
from ..store import Store
from .base import AnyStore, Context, MemfsGroup, cli, fail, pass_ctx
from .common import pages, when
from .shared import table as _table

#: The model of `memfs dream` without --model (env MEMFS_DREAM_MODEL).
DEFAULT_DREAM_MODEL = "claude-sonnet-4-5"


class _DreamGroup(MemfsGroup):
    """``memfs dream STORE …`` starts a dream (``dream start``); ``dream list/show/cancel``
    manage them."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        # After the group's own options (``memfs dream --db X notes ...``): a first word that
        # is not one of its commands is the store of a dream to start.
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["start", *args]
        return super().resolve_command(ctx, args)


@cli.group(cls=_DreamGroup)
def dream() -> None:
    """Consolidate a store and the transcripts of sessions into a new store, with a model.

    `memfs dream STORE --session ID` starts a dream (also `memfs dream start`). A dream
    reads the store and the transcripts of some sessions and writes a reorganised
    copy, a new store (the input is never changed), through the memory tool of a model
    (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL). With --url the server runs it.

    Example:

    \b
        memfs dream notes --session sesn_01... --instructions "Merge the duplicates"
        memfs dream list
    """


def _dream_text(store: AnyStore, d: Dream) -> str:
    lines = [f"dream {d.id}: {d.status}"]
    lines.append(f"  input store:  {d.memory_store_id}")
    lines.append(f"  sessions:     {', '.join(d.session_ids)}")
    lines.append(f"  model:        {d.model['id']}")
    if d.instructions:
        short = d.instructions if len(d.instructions) < 60 else d.instructions[:57] + "..."
        lines.append(f"  instructions: {short}")
    out = d.output_store_id
    if out is not None:
        try:
            name = store.stores.get(out).name
            lines.append(f"  output store: {out} ({name!r}, {store.memories.count(out)} memories)")
        except errors.NotFound:
            lines.append(f"  output store: {out} (deleted)")
    if d.session_id:
        lines.append(f"  session:      {d.session_id} (memfs session events {d.session_id})")
    u = d.usage
    lines.append(f"  usage:        {u['input_tokens']} input, {u['output_tokens']} output tokens"
                 f" (cache: {u['cache_read_input_tokens']} read, "
                 f"{u['cache_creation_input_tokens']} written)")
    lines.append(f"  created:      {when(d.created_at)}"
                 + (f", ended {when(d.ended_at)}" if d.ended_at else ""))
    if d.error:
        lines.append(f"  error:        {d.error['type']}: {d.error['message']}")
    if d.status == "completed" and out is not None and out != d.memory_store_id:
        lines.append(f"  next: attach {out} to new sessions instead of {d.memory_store_id}, "
                     f"then archive the input (memfs stores archive {d.memory_store_id})")
    return "\n".join(lines)


def _recover_dreams(ctx: Context) -> None:
    """On a local database, the dreams of a `memfs dream` that died are failed first (a
    server does this itself)."""
    store = ctx.store
    if isinstance(store, Store):
        from ..dreams.dreamer import Dreamer

        Dreamer(store).recover()


@dream.command("start")
@click.argument("store_ref", metavar="STORE")
@click.option("--session", "-s", "session_ids", multiple=True, required=True, metavar="ID",
              help="A session whose transcript the dream reads (repeatable, 1 to 100).")
@click.option("--instructions", "-i", default=None, help="Guidance for the dream (<= 4,096 chars).")
@click.option("--model", default=None,
              help=f"The model (env MEMFS_DREAM_MODEL; default {DEFAULT_DREAM_MODEL}).")
@click.option("--update-existing", is_flag=True,
              help="Rewrite STORE in place instead of writing a new store.")
@click.option("--no-wait", is_flag=True, help="With --url: print the dream and return at once.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_ctx
def dream_start(ctx: Context, store_ref: str, session_ids: tuple[str, ...],
                instructions: str | None, model: str | None, update_existing: bool,
                no_wait: bool, command: tuple[str, ...]) -> None:
    """Dream over STORE and the given sessions, and wait for the result (Ctrl-C cancels).

    On a local database the dream runs in this command; with --url, on the server. After
    `--`, COMMAND does the consolidation instead of a model: it runs like `memfs run` in the
    dream's session, the output store mounted read-write at $MEMFS_DREAM_OUTPUT and the input
    read-only at $MEMFS_DREAM_INPUT, the instructions and transcripts in
    $MEMFS_DREAM_PROMPT_FILE; exit status 0 completes the dream.

    Example:

    \b
        memfs dream notes --session sesn_01A --session sesn_01B --model claude-sonnet-4-5
        memfs dream notes -s sesn_01A -- my-agent --prompt-file '$MEMFS_DREAM_PROMPT_FILE'
    """
    import os
    import threading
    import time

    from ..dreams.model import local_problem
    from ..dreams.runner import DreamRun, identity

    if command and ctx.url:
        fail("memfs dream -- COMMAND runs on a local database; drop --url / MEMFS_URL", 2)
    if not command and not ctx.url:
        problem = local_problem()  # before anything is made: no dream, no store to clean up
        if problem:
            fail(problem)
    store = ctx.store
    s = store.stores.resolve(store_ref)
    if command and not model:  # the model is the command
        model = "command:" + os.path.basename(command[0])[:240]
    model = model or os.environ.get("MEMFS_DREAM_MODEL") or DEFAULT_DREAM_MODEL
    inputs = [{"type": "memory_store", "memory_store_id": s.id},
              {"type": "sessions", "session_ids": list(session_ids)}]
    behavior = {"type": "update_existing", "memory_store_id": s.id} if update_existing else None
    d = store.dreams.create(inputs, model, instructions=instructions, output_behavior=behavior,
                           runner=None if ctx.url else identity())
    if not ctx.as_json:
        click.echo(f"dream {d.id} started (cancel: Ctrl-C or memfs dream cancel {d.id})",
                   err=True)
    if command:
        from ..dreams.command import run_command

        ctx.close()  # one database connection set at a time (see run_command)
        d = run_command(ctx.db_path, d.id, list(command))
        store = ctx.store
    run = DreamRun(store, d.id) if isinstance(store, Store) and not command else None
    try:
        if run is not None:
            thread = threading.Thread(target=run.run, name=f"dream-{d.id}", daemon=True)
            thread.start()
            while thread.is_alive():
                thread.join(0.2)
        elif not no_wait:
            while d.status in ("pending", "running"):
                time.sleep(0.5)
                d = store.dreams.get(d.id)
    except KeyboardInterrupt:
        store.dreams.cancel(d.id)
        if run is not None:
            run.stop.set()
            thread.join(5)
        fail(f"dream {d.id} canceled", 130)
    d = store.dreams.get(d.id)
    ctx.output(d, _dream_text(store, d))
    if d.status == "failed" and d.error:
        fail(f"dream {d.id} failed: {d.error['type']}: {d.error['message']}")
    if d.status == "canceled":
        fail(f"dream {d.id} was canceled")


@dream.command("list")
@click.option("--all", "include_archived", is_flag=True, help="Include archived dreams.")
@click.option("--status", "statuses", multiple=True,
              type=click.Choice(["pending", "running", "completed", "failed", "canceled"]),
              help="Only dreams of this status (repeatable).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most N dreams.")
@pass_ctx
def dream_list(ctx: Context, include_archived: bool, statuses: tuple[str, ...],
               limit: int | None) -> None:
    """List dreams, newest first.

    Example:

    \b
        memfs dream list --status running
    """
    store = ctx.store
    _recover_dreams(ctx)
    items = pages(lambda **kw: store.dreams.list(
        include_archived=include_archived, statuses=list(statuses) or None, **kw), limit)
    rows = [(d.id, d.status, d.memory_store_id, d.output_store_id or "-", when(d.created_at))
            for d in items]
    human = _table(("ID", "STATUS", "INPUT", "OUTPUT", "CREATED"), rows)
    ctx.output(items, human if items else "no dreams (start one: memfs dream STORE --session ID)")


@dream.command("show")
@click.argument("dream_id")
@pass_ctx
def dream_show(ctx: Context, dream_id: str) -> None:
    """Show one dream: its status, output store, session, usage and error.

    Example:

    \b
        memfs dream show drm_01...
    """
    _recover_dreams(ctx)
    d = ctx.store.dreams.get(dream_id)
    ctx.output(d, _dream_text(ctx.store, d))


@dream.command("cancel")
@click.argument("dream_id")
@pass_ctx
def dream_cancel(ctx: Context, dream_id: str) -> None:
    """Cancel a pending or running dream (its output store keeps what it wrote).

    Example:

    \b
        memfs dream cancel drm_01...
    """
    d = ctx.store.dreams.cancel(dream_id)
    ctx.output(d, _dream_text(ctx.store, d))
