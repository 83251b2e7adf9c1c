"""The commands that start something and wait for it: ``memfs run`` (the session launcher,
:mod:`memfs.launcher`), ``memfs mount`` (one FUSE daemon per store, :mod:`memfs.daemons.mount`)
and ``memfs serve`` (the HTTP API, :mod:`memfs.daemons.server`). Each imports what it starts
only when it runs, so that no other command pays for it (tests/unit/test_startup_imports.py)."""

from __future__ import annotations

import sys

import click

from ..daemons import logs
from ..launcher.history import DEFAULT_BUDGET, DEFAULT_MESSAGES, MAX_BUDGET, MAX_MESSAGES
from .base import Context, cli, fail, pass_ctx
from .common import instructions_option, kv_pairs, spec_option
from .sessions import load_spec


@cli.command(context_settings={"allow_interspersed_args": False})
@click.option(
    "--store",
    "stores",
    multiple=True,
    metavar="REF[@AT][:read_only|:read_write][:general|:workflow][:pinned=N]",
    help="A store to attach (id or name), read_write unless ':read_only'. Up to 8. "
    "REF@AT: the store as it was at AT (a time, version id or session id), read-only. "
    "':workflow': it holds the memories of this piece of work, not those for every task "
    "(':general', the default); the prompt says which is which. ':pinned=N': its pinned "
    "memories may take N characters of the prompt (default 4000; 16000 for the session).",
)
@instructions_option
@spec_option
@click.option(
    "--root",
    type=click.Path(file_okay=False),
    help="Session root (default /mnt/memory in a private namespace, else a new private temp "
    "dir).",
)
@click.option(
    "--isolation",
    type=click.Choice(["auto", "namespace", "none"]),
    default="auto",
    show_default=True,
    help="namespace: private mount namespace with a tmpfs root (needs root); "
    "none: a scratch directory cleaned at the end.",
)
@click.option(
    "--network",
    type=click.Choice(["host", "none"]),
    default="host",
    show_default=True,
    help="none: COMMAND gets a network namespace of its own with only loopback (the session "
    "API is a unix socket, which still works); needs the private namespace.",
)
@click.option(
    "--user",
    default=None,
    metavar="USER[:GROUP]",
    help="Run COMMAND as this user (name or number; needs root), with its HOME and a clean "
    "environment (MEMFS_*, PATH, TERM); the mounts and the root are that user's only, and "
    "the database must be out of its reach. "
    "Default under sudo: the user who ran sudo (--user root to keep root).",
)
@click.option(
    "--token-ttl",
    type=int,
    default=None,
    metavar="SECONDS",
    help="Life of COMMAND's session token (MEMFS_API_KEY; default one day, at most 30 "
    "days); it ends with the session anyway.",
)
@click.option(
    "--resume",
    "resume_id",
    default=None,
    metavar="SESSION",
    help="Go on from SESSION: its stores (access, scope, instructions) unless --store or "
    "--spec gives others, and its last messages at the end of the prompt file; the new "
    "session's metadata says memfs_resumed_from=SESSION.",
)
@click.option(
    "--last-messages",
    type=click.IntRange(0, MAX_MESSAGES),
    default=None,
    metavar="N",
    help=f"With --resume: how many of the old session's last messages the prompt gets "
    f"(user.message and agent.message; tool calls among them one line each; default "
    f"{DEFAULT_MESSAGES}, 0: none).",
)
@click.option(
    "--history-budget",
    type=click.IntRange(0, MAX_BUDGET),
    default=None,
    metavar="CHARS",
    help=f"With --resume: the most characters those messages take in the prompt (default "
    f"{DEFAULT_BUDGET:,}); the oldest are left out first.",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@pass_ctx
def run(
    ctx: Context,
    stores: tuple[str, ...],
    instructions: tuple[str, ...],
    spec_path: str | None,
    root: str | None,
    isolation: str,
    network: str,
    user: str | None,
    token_ttl: int | None,
    resume_id: str | None,
    last_messages: int | None,
    history_budget: int | None,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND in a session with memory stores mounted under the session root.

    Each store is mounted at ROOT/<slug of its name> (versions are attributed to the
    session); anything else written under ROOT is scratch, discarded at the end. COMMAND gets
    MEMFS_SESSION_ID and MEMFS_SYSTEM_PROMPT_FILE (the memory section of the system prompt),
    and for `memfs` or the memory tool inside the session MEMFS_URL and MEMFS_API_KEY: a
    session token that opens only the session's stores, with their access, while it runs
    (never the database or the server's key).
    With --url (MEMFS_URL) the session lives on that memfs server and every store is a remote
    mount of it.
    When COMMAND ends, whatever happens, every mount is removed, processes it left behind are
    stopped and the session is marked terminated. The exit status is COMMAND's (128+N if it
    died of signal N); 127/126 if it cannot be run; 1 with one line on stderr if a mount dies.

    The stores come from --store/--instructions or from a --spec file (its resources,
    title and metadata), not both; or with --resume SESSION from that session.

    Example:

    \b
        memfs run --store notes --store "Team Docs:read_only" \\
            --instructions "Team Docs=Look here before answering." -- bash -i
        memfs run --store Preferences --store "Sprint 12:workflow" -- bash -i
        memfs run --spec session.yaml -- bash -i
        memfs run --store "notes@2026-12-01T09:00:00Z" -- bash -i
        memfs run --resume sesn_01... --last-messages 20 -- bash -i
    """
    from ..launcher.plan import Attachment, Launch, LaunchError, Resume
    from ..launcher.runner import run as run_session

    if spec_path is not None and (stores or instructions):
        raise click.UsageError(
            "--spec lists the session's stores: give --spec or --store/--instructions, not both"
        )
    if spec_path is None and not stores and resume_id is None:
        raise click.UsageError("give the stores to attach: --store REF (repeatable), --spec "
                               "or --resume SESSION")
    if resume_id is None and (last_messages is not None or history_budget is not None):
        raise click.UsageError("--last-messages and --history-budget go with --resume SESSION")
    launch = Launch(
        [Attachment.parse(s) for s in stores],
        list(command),
        root=root,
        db_path=ctx.db_path,
        url=ctx.url,
        api_key=ctx.api_key,
        isolation=isolation,
        network=network,
        instructions=kv_pairs(instructions, "--instructions", "REF=TEXT"),
        user=user,
        token_ttl=token_ttl,
        resume=None if resume_id is None else Resume(
            resume_id,
            DEFAULT_MESSAGES if last_messages is None else last_messages,
            DEFAULT_BUDGET if history_budget is None else history_budget),
    )
    if spec_path is not None:
        spec = load_spec(ctx, spec_path)
        launch.attachments = spec.attachments
        launch.title, launch.metadata = spec.title, spec.metadata
    try:
        status = run_session(launch)
    except LaunchError as e:
        fail(e.message, e.status)
    sys.exit(status)


@cli.command("mount")
@click.argument("store_ref", metavar="STORE")
@click.argument("mountpoint", type=click.Path())
@click.option("--read-only", is_flag=True, help="Refuse every change (EROFS).")
@click.option("--at", default=None, metavar="AT",
              help="Time travel: mount the store read-only as it was at AT, an RFC 3339 time "
              "(2026-12-01T11:16:29Z), a version id (right after it) or a session id (just "
              "before its first write). docs/mounts.md, \"Time travel\".")
@click.option("--nonempty", is_flag=True,
              help="Mount over a directory that is not empty (hiding what it holds).")
@click.option("--session", "session_id", default=None, metavar="ID",
              help="Attribute versions and tool events to this session.")
@click.option("--events", "events_path", default=None, type=click.Path(dir_okay=False),
              help="Append tool events to this JSON-lines file.")
@click.option("--display-root", "--mount-path", "display_root", default=None, metavar="PATH",
              hidden=True,  # memfs run's: the path inside the session's namespace
              help="The mount path as the agent sees it, for event file paths "
              "(default: MOUNTPOINT).")
@click.option("--timeout", type=click.FloatRange(min=0), default=300.0, show_default=True,
              help="Kernel entry/attribute cache timeout in seconds.")
@click.option("--ready-fd", type=int, default=None, metavar="N", hidden=True,  # memfs run's
              help="Write 'ready' to file descriptor N once mounted, then close it.")
@click.option("--debug-fuse", is_flag=True, help="Trace every FUSE request (libfuse debug).")
@click.option("--owner", default=None, metavar="UID:GID",
              help="Show every file as owned by UID:GID, modes 0600/0700 (owner only).")
@click.option("--allow-other", is_flag=True,
              help="Let other users reach the mount, as the owner and modes allow (needs "
              "root or user_allow_other in /etc/fuse.conf).")
@pass_ctx
def mount_cmd(
    ctx: Context,
    store_ref: str,
    mountpoint: str,
    read_only: bool,
    at: str | None,
    nonempty: bool,
    session_id: str | None,
    events_path: str | None,
    display_root: str | None,
    timeout: float,
    ready_fd: int | None,
    debug_fuse: bool,
    owner: str | None,
    allow_other: bool,
) -> None:
    """Mount memory store STORE (id or name) on MOUNTPOINT and serve it in the foreground.

    MOUNTPOINT is an empty directory (--nonempty: or one that is not empty) with nothing
    mounted on it already; a missing one is created (its parent must exist) and removed
    again at unmount.

    Files are memories; every close after writes makes one version. With --url (or
    MEMFS_URL) the store of that memfs server is mounted, with the same rules, kept current by
    the server's change stream. Stops and unmounts on Ctrl-C, SIGTERM or
    `fusermount3 -u MOUNTPOINT`. Once mounted it prints MOUNTPOINT on stdout.

    With --at the store is mounted read-only as it was then (a snapshot that never changes);
    the boundary and any memories lost to version retention are said on stderr.

    Example:

    \b
        memfs mount notes ~/notes --events /tmp/notes.events.jsonl
        memfs --url http://127.0.0.1:8000 --api-key "$MEMFS_API_KEY" mount notes ~/notes
        memfs mount notes /tmp/notes-then --at 2026-12-01T09:00:00Z
    """
    from ..daemons.mount import MountOptions
    from ..daemons.mount import mount as mount_store

    mount_store(
        MountOptions(
            store_ref=store_ref,
            mountpoint=mountpoint,
            db_path=ctx.db_path,
            read_only=read_only,
            nonempty=nonempty,
            session_id=session_id,
            events_path=events_path,
            display_root=display_root,
            timeout=timeout,
            ready_fd=ready_fd,
            debug_fuse=debug_fuse,
            url=ctx.url,
            api_key=ctx.api_key,
            owner=_owner(owner) if owner is not None else None,
            allow_other=allow_other,
            make_mountpoint=True,
            at=at,
        )
    )


def _owner(text: str) -> tuple[int, int]:
    """``UID:GID`` (numbers) for ``memfs mount --owner``."""
    uid, sep, gid = text.partition(":")
    if not (sep and uid.isdigit() and gid.isdigit()):
        fail(f"--owner must be UID:GID (two numbers), not {text!r}")
    return int(uid), int(gid)


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="Port (0 picks a free one).")
@click.option(
    "--api-key",
    "api_keys",
    multiple=True,
    help="Accept this API key (repeatable). Prefer env MEMFS_API_KEYS (comma-separated): a "
    "key on the command line is every process's to read, and is warned of.",
)
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Server processes sharing the port and the database (use the cores).")
@click.option("--key-rate", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="N",
              help="Requests a second each key of the database (memfs keys) and each session "
              "token may send, in bursts of 2N; more are 429 (default 200; also env "
              "MEMFS_KEY_RATE). Per server process.")
@pass_ctx
def serve(ctx: Context, host: str, port: int, api_keys: tuple[str, ...], workers: int,
          key_rate: float | None) -> None:
    """Serve the memory stores HTTP API (anthropic SDK compatible) on the local database.

    Every request needs a key (x-api-key or Authorization: Bearer): one of --api-key or
    MEMFS_API_KEYS (the default workspace's admins), or one kept in the database (memfs keys
    create). Without --api-key or MEMFS_API_KEYS, and no live admin key of the default
    workspace in the database, a loopback server generates a key and prints it on stderr; any
    other address is refused.

    The server keeps every store indexed by meaning in the background (--embeddings: which
    model; `memfs search --status` says how far).

    Example:

    \b
        MEMFS_API_KEYS="$KEY" memfs serve --port 8000
        memfs keys create ops --role admin && memfs serve --host 0.0.0.0 --key-rate 50
    """
    from ..daemons.server import api_keys_from
    from ..daemons.server import serve as run_server

    if ctx.url:
        fail("serve uses a local database; drop --url / MEMFS_URL", 2)
    if api_keys:
        # Anyone's to read (ps, /proc/PID/cmdline), an agent's too (issue 38 S2).
        logs.say("memfs: warning: --api-key puts the key on the command line, where every "
                 "process of this machine can read it: set MEMFS_API_KEYS instead")
    try:
        run_server(ctx.db_path, host, port, api_keys_from(api_keys), workers=workers,
                   echo=logs.say, key_rate=key_rate)
    except OSError as e:
        fail(f"cannot listen on {host}:{port}: {e.strerror or e}", 1)
