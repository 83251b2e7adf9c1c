"""``memfs mcp``: the memory stores as an MCP server on stdin/stdout (SPEC §10), for the
clients that spawn one (Claude Desktop, Claude Code; docs/mcp.md).

Whom it acts as, from what it is given:

- **attachments** (``--store``, ``--spec``, as ``memfs run`` takes them, parsed by the same
  :class:`~memfs.launcher.plan.Attachment` and spec files): a session is created as ``memfs
  run`` creates its own (:func:`memfs.launcher.setup.create_session`), but nothing is mounted.
  It runs while the client is connected and is terminated when stdin closes or a signal
  comes; its writes are its ``session_actor`` versions and every tool call a tool-event pair
  of it, so ``memfs session revert`` and the Console see it as they see a mount's;
- **a session token** (inside ``memfs run``: MEMFS_URL, MEMFS_API_KEY and MEMFS_SESSION_ID
  as the launcher hands them): that session's stores, attributed to it, no new session;
- **nothing**: the local user on the local database, or the key of ``--url``, over every
  store it may see (personal use).

Stdout is the protocol's alone (:mod:`memfs.mcp.stdio`); what this command says goes to
stderr, and a bad option is one line there and exit 2, never a traceback.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from ..daemons import logs
from ..store.common import SESSION_TOKEN_PREFIX
from .base import Context, cli, fail, pass_ctx
from .common import instructions_option, spec_option
from .shared import MemfsCommand

if TYPE_CHECKING:
    from ..launcher.plan import Attachment
    from ..mcp import Reach
    from ..models import Session

#: The session's root: nothing is mounted, but its stores' mount paths (the session's record,
#: the Console) are named under the root ``memfs session create`` uses too.
SESSION_ROOT = "/mnt/memory"


class _OneLine(MemfsCommand):
    """A usage error is one line on stderr (``memfs: …``, exit 2), not click's usage block:
    a client that spawns ``memfs mcp`` shows stderr in its log, a line at a time."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            fail(f"mcp: {e.format_message()}", 2)


@cli.command("mcp", cls=_OneLine)
@click.option(
    "--store",
    "stores",
    multiple=True,
    metavar="REF[:read_only|:read_write][:general|:workflow]",
    help="A store to attach to the session this server makes (id or name), read_write unless "
    "':read_only', as memfs run takes it. Up to 8. Without --store or --spec: every store the "
    "local user (or the key of --url) may see, and no session.",
)
@instructions_option
@spec_option
@click.option(
    "--tools",
    "tools",
    default=None,
    metavar="NAME,...",
    help="Offer only these tools (comma-separated, e.g. memory_read,memory_search); "
    "default all.",
)
@pass_ctx
def mcp_cmd(
    ctx: Context,
    stores: tuple[str, ...],
    instructions: tuple[str, ...],
    spec_path: str | None,
    tools: str | None,
) -> None:
    """Serve memory stores to an MCP client over stdin/stdout, until stdin closes.

    With --store or --spec it makes a session of those stores, as memfs run does but
    mounting nothing: every write is the session's version and every tool call its event
    (memfs session revert undoes them); the session is terminated when the client
    disconnects or on SIGTERM/SIGINT. Without them it acts as the local user (or the key of
    --url) on every store it may see. Inside memfs run (MEMFS_API_KEY is the session's token)
    it acts as that session. Stdout carries the protocol only; logs go to stderr. A client's
    configuration (Claude Desktop, Claude Code): docs/mcp.md.

    Example:

    \b
        memfs mcp --store notes --store "Team Docs:read_only"
        memfs mcp --tools memory_list_stores,memory_read,memory_search
        memfs --url http://127.0.0.1:8000 mcp --spec session.yaml
    """
    from ..launcher.plan import Attachment

    if spec_path is not None and (stores or instructions):
        fail("mcp: --spec lists the session's stores: give --spec or --store/--instructions, "
             "not both", 2)
    if instructions and not stores:
        fail("mcp: --instructions is for an attached store: give --store too", 2)
    chosen = _tool_names(tools)
    pairs = _pairs(instructions)
    attachments = [Attachment.parse(s) for s in stores]
    token = ctx.url and (ctx.api_key or "").startswith(SESSION_TOKEN_PREFIX)
    if token:
        if attachments or spec_path is not None:
            fail("mcp: MEMFS_API_KEY is a session token (inside memfs run): the session's "
                 "stores are attached already; drop --store/--spec", 2)
        _in_session(ctx, chosen)
    elif attachments or spec_path is not None:
        _with_session(ctx, attachments, pairs, spec_path, chosen)
    else:
        from ..mcp import Reach

        _check(ctx)
        _serve(Reach(ctx.store, tools=chosen))


def _tool_names(text: str | None) -> frozenset[str] | None:
    """``--tools a,b``: the names, each one a tool of the server (else one line, exit 2)."""
    if text is None:
        return None
    from ..mcp.tools import NAMES

    names = frozenset(n.strip() for n in text.split(",") if n.strip())
    unknown = sorted(names - set(NAMES))
    if not names or unknown:
        what = f"no tool named {', '.join(unknown)}" if unknown else "no tool named"
        fail(f"mcp: --tools: {what}; the tools are {', '.join(NAMES)}", 2)
    return names


def _pairs(instructions: Sequence[str]) -> list[tuple[str, str]]:
    out = []
    for item in instructions:
        ref, sep, text = item.partition("=")
        if not (sep and ref):
            fail(f"mcp: --instructions: expected REF=TEXT, got {item!r}", 2)
        out.append((ref, text))
    return out


def _check(ctx: Context) -> None:
    """Fail now (one line) on a database that cannot be opened or a key the server refuses,
    rather than serve a client whose every call would fail."""
    ctx.store.stores.list(limit=1)


def _in_session(ctx: Context, tools: frozenset[str] | None) -> None:
    """Inside ``memfs run``: the session's token reaches its stores, as it; tool events
    are the session's (MEMFS_SESSION_ID, as the launcher gives it)."""
    from ..mcp import Reach

    session_id = os.environ.get("MEMFS_SESSION_ID", "")
    if not session_id:
        fail("mcp: MEMFS_API_KEY is a session token but MEMFS_SESSION_ID is not set: run "
             "memfs mcp inside memfs run, which sets both", 2)
    _check(ctx)
    _serve(Reach(ctx.store, session_id=session_id, tools=tools))


def _with_session(ctx: Context, attachments: list[Attachment], pairs: list[tuple[str, str]],
                  spec_path: str | None, tools: frozenset[str] | None) -> None:
    """A session of the attachments while the client is connected: made as ``memfs run``
    makes its own, marked running, then terminated however the server ends."""
    from ..launcher.plan import Launch
    from ..launcher.reap import reap_sessions
    from ..launcher.setup import create_session
    from ..launcher.state import LaunchState
    from ..mcp import Reach
    from ..mcp.stdio import STOP_SIGNALS
    from ..store import Store
    from .sessions import load_spec

    launch = Launch(attachments, ["memfs", "mcp"], root=SESSION_ROOT, db_path=ctx.db_path,
                    url=ctx.url, api_key=ctx.api_key, instructions=pairs)
    if spec_path is not None:
        spec = load_spec(ctx, spec_path)
        launch.attachments = spec.attachments
        launch.title, launch.metadata = spec.title, spec.metadata
    store = ctx.store
    for a in launch.attachments:
        a.resolve(store)
        if a.at is not None:
            fail(f"mcp: --store {a.ref}@{a.at}: memfs mcp serves stores as they are now; an "
                 "agent reads the past with memory_read's at", 2)
    if isinstance(store, Store):  # a server reaps its own sessions
        reap_sessions(store)
    st = LaunchState(launch, None, store)
    st.root = SESSION_ROOT
    # From here a stop signal ends the server, never the process before its session ends
    # (under trio, memfs.mcp.stdio takes the signals over while it serves).
    previous = {s: signal.signal(s, _stop) for s in STOP_SIGNALS}
    session: Session | None = None
    reach_store: Any = None
    try:
        session = create_session(st)
        store.sessions.set_status(session.id, "running")
        reach_store = _as_session(ctx, store, session)
        reach = Reach(reach_store, session_id=session.id,
                      stores=tuple(r.memory_store_id for r in session.resources), tools=tools)
        _serve(reach, f"session {session.id}")
    except _Stopped:
        pass
    finally:
        try:
            if session is not None:
                store.sessions.set_status(session.id, "terminated")
                logs.say(f"session {session.id} terminated")
        finally:
            if reach_store is not None and reach_store is not store:
                reach_store.close()
            for s, h in previous.items():
                signal.signal(s, h)


class _Stopped(Exception):
    """A stop signal came outside the server (while the session was being made)."""


def _stop(signum: int, frame: Any) -> None:
    raise _Stopped(signum)


def _as_session(ctx: Context, store: Any, session: Session) -> Any:
    """The store the session's calls go to: the local database, or a client of the server
    that acts as the session (its writes the session's, checked by the server)."""
    if not ctx.url:
        return store
    from ..client import Client

    return Client(ctx.url, ctx.api_key, session_id=session.id)


def _serve(reach: Reach, what: str = "") -> None:
    from ..mcp import create_server
    from ..mcp.stdio import run

    server = create_server(reach)
    logs.say(f"serving MCP on stdin/stdout{' for ' + what if what else ''}")
    run(server)
