"""The ``memfs`` command line: argv -> store (or client) calls -> output.

Human-readable output by default, ``--json`` for scripts. Every :class:`memfs.errors.MemfsError`
becomes one line on stderr and a non-zero exit (:data:`EXIT_CODES`); nothing here re-checks a
rule of the store.
"""

from __future__ import annotations

import contextlib
import difflib
import itertools
import json
import logging
import os
import sys
import zipfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn, TypeVar, cast

import click

from . import cliglobals, errors, logs
from .cli_search import search_cmd
from .clishared import PAGE as _PAGE
from .clishared import MemfsCommand
from .clishared import table as _table
from .clishared import walk as _walk
from .models import Actor, Dream, Memory, MemoryStore, MemoryVersion, Page
from .prompt import render_memory_prompt
from .rules import local_user_actor, slash_hint
from .store import Store, default_db_path, open_store

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Exit codes by error class (the first match in this order wins); usage errors exit 2.
EXIT_CODES: list[tuple[type[errors.MemfsError], int]] = [
    (errors.NotFound, 3),
    (errors.Conflict, 4),
    (errors.InvalidRequest, 5),
    (errors.ReadOnly, 6),
    (errors.Forbidden, 6),
    (errors.Busy, 7),
    (errors.StorageError, 8),
    (errors.MemfsError, 1),
]


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``memfs: <message>`` on stderr (a JSON line with ``--log-format json``) and exit
    with ``code``."""
    logs.say(message, logging.ERROR)
    sys.exit(code)


class MemfsGroup(click.Group):
    """A click group that turns memfs errors into one line on stderr and an exit code; its
    commands are :class:`MemfsCommand` and its subgroups MemfsGroups, which take the global
    options after their name too (``memfs stores --db X list``)."""

    command_class = MemfsCommand
    group_class: type[click.Group] | type[type] | None = type

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(cliglobals.after_options(self.params))

    def get_short_help_str(self, limit: int = 45) -> str:
        return super().get_short_help_str(limit=1000)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        cliglobals.format_options(self, ctx, formatter)
        self.format_commands(ctx, formatter)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except errors.MemfsError as e:
            code = next(c for cls, c in EXIT_CODES if isinstance(e, cls))
            fail(e.message, code)
        except BrokenPipeError:
            sys.exit(0)


class MemfsCLI(MemfsGroup):
    """The ``memfs`` group itself: the global options are its own (:func:`cliglobals.
    root_options`), with their environment variables and defaults."""

    group_class = MemfsGroup

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        click.Group.__init__(self, *args, **kwargs)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        click.Group.format_options(self, ctx, formatter)


class Context:
    """What every command needs: where the data is, how to print, how to log. The global
    options set it: the ``memfs`` group's first, then any given after a subcommand
    (:meth:`set_global`)."""

    def __init__(
        self, db: str | None, as_json: bool, url: str | None = None, api_key: str | None = None,
        verbose: int = 0, log_format: str = "text",
    ) -> None:
        self.db_path = db
        #: The ``--embeddings`` setting (:meth:`use_embeddings`), None: the default.
        self.embeddings: str | None = None
        self.as_json = as_json
        self.url = url
        self.api_key = api_key
        self.verbose = verbose
        self.log_format = log_format
        self._store: Store | None = None

    def set_global(self, name: str, value: Any) -> None:
        """A global option given after a subcommand: it wins over the value before it (``-v``
        adds to it)."""
        if name == "db":
            self.db_path = value
        elif name in ("url", "api_key"):
            setattr(self, name, value)
        elif name == "as_json":
            self.as_json = self.as_json or bool(value)
        elif name == "verbose":
            self.verbose += value
            self.configure_logging()
        elif name == "log_format":
            self.log_format = value
            self.configure_logging()
        elif name == "embeddings":
            self.use_embeddings(value)

    def use_embeddings(self, setting: str, source: str = "") -> None:
        """Choose the provider of embeddings (``--embeddings``), checked at once (a setting
        naming none: one line, exit 2), and put it in the environment of every server, mount
        and session this command starts (they read ``MEMFS_EMBEDDINGS``)."""
        from .recall.embeddings import SETTING_ENV, from_setting

        try:
            from_setting(setting)
        except errors.InvalidRequest as e:
            fail(e.message + (f" (from {source})" if source else ""), 2)
        self.embeddings = setting
        os.environ[SETTING_ENV] = setting
        if self._store is not None and not self.url:
            self._store.use_embeddings(setting)

    def configure_logging(self) -> None:
        """Log at the level ``-v`` asks for, in the format ``--log-format`` names."""
        logs.configure([logging.WARNING, logging.INFO, logging.DEBUG][min(self.verbose, 2)],
                       self.log_format)
        if self.log_format != "text":
            # The daemons and servers this command starts log the same way (an agent's
            # environment gets every MEMFS_* variable, so only when asked: not the default).
            os.environ["MEMFS_LOG_FORMAT"] = self.log_format

    @property
    def store(self) -> Store:
        """The local database, or with ``--url`` a :class:`memfs.client.Client` of that server
        (it has the Store's methods, models and errors, so every command works the same).
        A missing database is an error here, never created: see :meth:`open`."""
        return self.open(create=False)

    def open(self, *, create: bool) -> Store:
        """:attr:`store`, creating a missing local database when ``create`` (only commands
        that make something a later command needs do: ``stores create``).

        :raises errors.DatabaseUnavailable: the database cannot be opened (or is missing).
        """
        if self._store is None:
            if self.url:
                from .client import Client

                self._store = cast(Store, Client(self.url, self.api_key))
            else:
                self._store = open_store(self.db_path, create=create)
                if self.embeddings is not None:
                    self._store.use_embeddings(self.embeddings)
        return self._store

    def close(self) -> None:
        """Close :attr:`store` if it was opened (a later use opens it again)."""
        if self._store is not None:
            self._store.close()
            self._store = None

    def output(self, obj: Any, human: str | None = None) -> None:
        """Print ``obj`` (a model, a list of models, or plain data) as JSON with ``--json``,
        else ``human`` (or the JSON when there is no human form)."""
        if self.as_json or human is None:
            click.echo(json.dumps(_plain(obj), indent=2, ensure_ascii=False))
        else:
            click.echo(human)


def _plain(obj: Any) -> Any:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, list | tuple):
        return [_plain(o) for o in obj]
    return obj


pass_ctx = click.make_pass_decorator(Context)


@click.group(cls=MemfsCLI)
@cliglobals.root_options
@click.version_option(package_name="memfs")
@click.pass_context
def cli(
    ctx: click.Context,
    db: str | None,
    url: str | None,
    api_key: str | None,
    as_json: bool,
    verbose: int,
    log_format: str,
    embeddings: str | None,
) -> None:
    """memfs: memory stores for AI agents, as files.

    These options (but --version) go after the subcommand too: memfs stores list --json.

    Example:

    \b
        memfs stores create notes && memfs memories create notes /hello.md --content hi
    """
    ctx.obj = Context(db, as_json, url=url, api_key=api_key, verbose=verbose,
                      log_format=log_format)
    ctx.obj.configure_logging()
    if embeddings:
        from_env = ctx.get_parameter_source("embeddings") is click.core.ParameterSource.ENVIRONMENT
        ctx.obj.use_embeddings(embeddings, "MEMFS_EMBEDDINGS" if from_env else "")


# -- memfs run (the session launcher) ---------------------------------------------------------


@cli.command(context_settings={"allow_interspersed_args": False})
@click.option(
    "--store",
    "stores",
    multiple=True,
    metavar="REF[@AT][:read_only|:read_write]",
    help="A store to attach (id or name), read_write unless ':read_only'. Up to 8. "
    "REF@AT: the store as it was at AT (a time, version id or session id), read-only.",
)
@click.option(
    "--instructions",
    "instructions",
    multiple=True,
    metavar="REF=TEXT",
    help="Instructions for the agent on the attached store REF (id or name; at most 4,096 "
    "characters).",
)
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="A session spec file (YAML or JSON: resources, title, metadata) instead of --store "
    "and --instructions.",
)
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
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@pass_ctx
def run(
    ctx: Context,
    stores: tuple[str, ...],
    instructions: tuple[str, ...],
    spec_path: str | None,
    root: str | None,
    isolation: str,
    user: str | None,
    token_ttl: int | None,
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
    title and metadata), not both.

    Example:

    \b
        memfs run --store notes --store "Team Docs:read_only" \\
            --instructions "Team Docs=Look here before answering." -- bash -i
        memfs run --spec session.yaml -- bash -i
        memfs run --store "notes@2026-12-01T09:00:00Z" -- bash -i
    """
    from .session import Attachment, Launch, LaunchError
    from .session import run as run_session

    if spec_path is not None and (stores or instructions):
        raise click.UsageError(
            "--spec lists the session's stores: give --spec or --store/--instructions, not both"
        )
    if spec_path is None and not stores:
        raise click.UsageError("give the stores to attach: --store REF (repeatable) or --spec")
    launch = Launch(
        [Attachment.parse(s) for s in stores],
        list(command),
        root=root,
        db_path=ctx.db_path,
        url=ctx.url,
        api_key=ctx.api_key,
        isolation=isolation,
        instructions=_pairs(instructions, "--instructions", "REF=TEXT"),
        user=user,
        token_ttl=token_ttl,
    )
    if spec_path is not None:
        spec = _load_spec(ctx, spec_path)
        launch.attachments = spec.attachments
        launch.title, launch.metadata = spec.title, spec.metadata
    try:
        status = run_session(launch)
    except LaunchError as e:
        fail(e.message, e.status)
    sys.exit(status)


# -- stores, memories, versions, sessions: the local database (SPEC §5) ----------------------
#
# Writes are attributed to the person at the keyboard (``local_user_actor``). A store is named by
# id or name, a memory by id or by path (a ref that starts with "/").



def _actor() -> Actor:
    return local_user_actor()


def _pages(fetch: Callable[..., Page[Any]], limit: int | None) -> list[Any]:
    """Every item of a paginated listing, or the first ``limit`` of them."""
    return list(itertools.islice(_walk(fetch, min(_PAGE, limit or _PAGE)), limit))


def _when(ts: str | None) -> str:
    """An RFC 3339 UTC timestamp, shortened for tables (``2025-01-31 12:00:59``)."""
    return ts[:19].replace("T", " ") if ts else "-"


def _pairs(values: Sequence[str], option: str, form: str = "KEY=VALUE") -> list[tuple[str, str]]:
    """``k=v`` option values as ``(k, v)`` pairs in order; anything else is a usage error that
    names ``form``."""
    out: list[tuple[str, str]] = []
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected {form}, got {item!r}", param_hint=option)
        out.append((key, value))
    return out


def _stdin_is_tty() -> bool:
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def _content(content: str | None, file: str | None, *, use_stdin: bool) -> str | bytes | None:
    """The content given by ``--content``, ``--file`` (``-`` is stdin) or, when ``use_stdin``
    and stdin is not a terminal, stdin. Files and stdin are passed on as bytes: the store checks
    UTF-8 and size. Returns None when no content was given."""
    if content is not None and file is not None:
        raise click.UsageError("give --content or --file, not both")
    if content is not None:
        return content
    if file == "-" or (file is None and use_stdin and not _stdin_is_tty()):
        return sys.stdin.buffer.read()
    if file is not None:
        try:
            with open(file, "rb") as f:
                return f.read()
        except OSError as e:
            fail(f"cannot read {file}: {e.strerror or e}", 1)
    return None


def _confirm(yes: bool, question: str, what: str) -> None:
    """Ask ``question`` on a terminal unless ``--yes``; without a terminal, require ``--yes``."""
    if yes:
        return
    if not _stdin_is_tty():
        fail(f"refusing to {what} without --yes (stdin is not a terminal)", 2)
    if not click.confirm(question, default=False):
        fail("aborted", 1)


def _resolve_memory(store: Store, store_id: str, ref: str, view: str = "full") -> Memory:
    """The live memory ``ref`` (an id, or a path) names; a ref that is neither a path nor an
    id (``hello.md``) gets the hint that paths start with '/'."""
    try:
        return store.resolve_memory(store_id, ref, view=view)
    except errors.NotFound as e:
        if ref.startswith(("/", "mem_")):
            raise
        raise errors.NotFound(f"{e.message} ({slash_hint(ref)})") from None


def _memory_id(store: Store, store_id: str, ref: str) -> str:
    """The id of the memory ``ref`` names, live or deleted: an id as is; a path names the
    memory there now or, failing that, the memory most recently at that path.

    :raises NotFound: a path that no memory has ever had.
    """
    if not ref.startswith("/"):
        return ref
    try:
        return store.resolve_memory(store_id, ref, view="basic").id
    except errors.NotFound:
        pass
    versions = _walk(lambda **kw: store.list_versions(store_id, **kw))
    found = next((v.memory_id for v in versions if v.path == ref), None)
    if found is None:
        raise errors.NotFound(f"no memory at {ref} in {store_id}, now or in its history")
    return found


def _actor_text(actor: Actor | None) -> str:
    if actor is None:
        return "-"
    return f"{actor.type.removesuffix('_actor')}:{actor.id}"


def _deleted(type_: str, id_: str) -> dict[str, str]:
    return {"id": id_, "type": type_}


# memfs stores ...


@cli.group()
def stores() -> None:
    """Create, list, show, update, archive and delete memory stores.

    Example:

    \b
        memfs stores create "User Preferences" --description "Per-user preferences"
    """


def _store_text(store: Store, s: MemoryStore) -> str:
    lines = [
        f"id:          {s.id}",
        f"name:        {s.name}",
        f"description: {s.description}",
        f"memories:    {store.count_memories(s.id)}",
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
@pass_ctx
def stores_create(
    ctx: Context, name: str, description: str | None, metadata: tuple[str, ...]
) -> None:
    """Create a memory store called NAME and print it.

    Example:

    \b
        memfs stores create "User Preferences" -d "Per-user preferences" -m team=docs
    """
    store = ctx.open(create=True)
    s = store.create_store(name, description, dict(_pairs(metadata, "--metadata")))
    ctx.output(s, f"created memory store {s.id} ({s.name})")
    _warn_namesakes(store, s.id, s.name)


def _warn_namesakes(store: Store, store_id: str, name: str) -> None:
    """A store's name need not be unique, but a name two live stores share names neither of
    them (Store.namesakes): after a create, rename or import, say so in one line on stderr."""
    others = store.namesakes(store_id)
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
    items = _pages(
        lambda **kw: store.list_stores(include_archived=include_archived, **kw), limit
    )
    rows = [
        (s.id, s.name, store.count_memories(s.id), _when(s.created_at), _when(s.archived_at))
        for s in items
    ]
    human = _table(("ID", "NAME", "MEMORIES", "CREATED", "ARCHIVED"), rows, right=(2,))
    ctx.output(items, human if items else "no memory stores (create one: memfs stores create NAME)")


@stores.command("show")
@click.argument("store_ref", metavar="STORE")
@pass_ctx
def stores_show(ctx: Context, store_ref: str) -> None:
    """Show one memory store (by id or name).

    Example:

    \b
        memfs stores show "User Preferences"
    """
    s = ctx.store.resolve_store(store_ref)
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
    old = ctx.store.resolve_store(store_ref)
    patch: dict[str, str | None] = dict(_pairs(metadata, "--metadata"))
    patch.update({key: None for key in unset_metadata})
    s = ctx.store.update_store(
        old.id, name=name, description=description, metadata=patch or None
    )
    ctx.output(s, _store_text(ctx.store, s))
    if s.name != old.name:
        _warn_namesakes(ctx.store, s.id, s.name)


@stores.command("archive")
@click.argument("store_ref", metavar="STORE")
@pass_ctx
def stores_archive(ctx: Context, store_ref: str) -> None:
    """Archive a store: it stays readable but takes no more writes or attachments.

    Example:

    \b
        memfs stores archive "Old Notes"
    """
    s = ctx.store.archive_store(ctx.store.resolve_store(store_ref).id)
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
    s = ctx.store.resolve_store(store_ref)
    n = ctx.store.count_memories(s.id)
    _confirm(
        yes,
        f"Delete memory store {s.name} ({s.id}), its {n} memories and all their versions?",
        f"delete memory store {s.id}",
    )
    ctx.store.delete_store(s.id)
    ctx.output(_deleted("memory_store_deleted", s.id), f"deleted memory store {s.id} ({s.name})")


# memfs memories ...


@cli.group()
def memories() -> None:
    """List, read, create, update and delete the memories of a store.

    A memory is named by its id or by its path (anything that starts with '/').

    Example:

    \b
        memfs memories create notes /prefs.md --content "Use ISO dates."
    """


def _memory_line(m: Memory, verb: str) -> str:
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
    sid = store.resolve_store(store_ref).id
    items = _pages(
        lambda **kw: store.list_memories(sid, path_prefix=prefix, depth=depth, **kw), limit
    )
    rows = [
        (m.content_size_bytes, _when(m.updated_at), m.path)
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
    sid = ctx.store.resolve_store(store_ref).id
    m = _resolve_memory(ctx.store, sid, memory_ref)
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
    piped; it never overwrites an existing memory.

    Example:

    \b
        echo "Use ISO dates." | memfs memories create notes /prefs.md
    """
    data = _content(content, file, use_stdin=True)
    if data is None:
        raise click.UsageError("no content: give --content, --file, or pipe it on stdin")
    sid = ctx.store.resolve_store(store_ref).id
    m = ctx.store.create_memory(sid, path, data, actor=_actor())
    ctx.output(m, _memory_line(m, "created"))


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
    data = _content(content, file, use_stdin=new_path is None)
    if data is None and new_path is None:
        raise click.UsageError("nothing to change: give --content, --file, --path or pipe stdin")
    sid = ctx.store.resolve_store(store_ref).id
    before = _resolve_memory(ctx.store, sid, memory_ref, view="basic")
    m = ctx.store.update_memory(
        sid,
        before.id,
        content=data,
        path=new_path,
        precondition_sha256=if_sha256,
        actor=_actor(),
    )
    changed = m.memory_version_id != before.memory_version_id
    ctx.output(m, _memory_line(m, "updated" if changed else "unchanged"))


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
    sid = ctx.store.resolve_store(store_ref).id
    m = _resolve_memory(ctx.store, sid, memory_ref, view="basic")
    ctx.store.delete_memory(sid, m.id, expected_sha256=if_sha256, actor=_actor())
    ctx.output(_deleted("memory_deleted", m.id), f"deleted {m.path} ({m.id})")


# memfs versions ...


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
    sid = store.resolve_store(store_ref).id
    mid = None if memory_ref is None else _memory_id(store, sid, memory_ref)
    items = _pages(
        lambda **kw: store.list_versions(
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
            _actor_text(v.created_by),
            _when(v.created_at),
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
    sid = ctx.store.resolve_store(store_ref).id
    v = ctx.store.get_version(sid, version_id)
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


def _previous(store: Store, sid: str, v: MemoryVersion) -> MemoryVersion | None:
    """The version of the same memory just before ``v`` (None if ``v`` is its first kept one)."""
    versions = _walk(lambda **kw: store.list_versions(sid, memory_id=v.memory_id, **kw))
    older = next((o for o in versions if o.id < v.id), None)
    return None if older is None else store.get_version(sid, older.id)


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
    sid = store.resolve_store(store_ref).id
    if new_id is None:
        new = store.get_version(sid, old_id)
        old = None if new.operation == "created" else _previous(store, sid, new)
    else:
        old, new = store.get_version(sid, old_id), store.get_version(sid, new_id)

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
    sid = store.resolve_store(store_ref).id
    v = store.get_version(sid, version_id, view="basic")
    try:
        current = store.get_memory(sid, v.memory_id, view="basic")
    except errors.NotFound:
        current = None
    m = store.restore_version(sid, v.id, path=new_path, actor=_actor())
    if current is None:
        ctx.output(m, _memory_line(m, f"restored {v.id} as"))
    elif m.memory_version_id == current.memory_version_id:
        ctx.output(m, f"{m.path} already has the content of {v.id}; nothing to do")
    else:
        ctx.output(m, _memory_line(m, f"restored {v.id} to"))


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
    sid = ctx.store.resolve_store(store_ref).id
    _confirm(
        yes,
        f"Erase the content of version {version_id} for good?",
        f"redact version {version_id}",
    )
    v = ctx.store.redact_version(sid, version_id, actor=_actor())
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
    n = ctx.store.prune_versions()
    lim = ctx.store.limits
    ctx.output(
        {"pruned": n},
        f"pruned {n} version{'s' if n != 1 else ''} older than {lim.retention_days:g} days "
        f"(the newest {lim.retention_keep} of every memory are kept)",
    )


# memfs export / memfs import (the format and the walks: memfs/transfer.py)


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def _progress(ctx: Context, length: int | None, label: str) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr when it is a terminal (and not --json); else nothing."""
    if not _stderr_is_tty() or ctx.as_json or not length:
        yield lambda n: None
        return
    with click.progressbar(length=length, label=label, file=sys.stderr) as bar:
        yield bar.update
        bar.update(max(0, length - bar.pos))  # entries that were not counted (ignored ones)


@cli.command("export")
@click.argument("store_ref", metavar="STORE")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the archive here (default: stdout, when it is not a terminal).")
@click.option("--history", is_flag=True,
              help="Every retained version (with ids, times, actors, redactions), not only "
              "the live memories.")
@pass_ctx
def export_cmd(ctx: Context, store_ref: str, output: str | None, history: bool) -> None:
    """Write a store to one portable archive (gzip JSON Lines, docs/EXPORT-FORMAT.md).

    Example:

    \b
        memfs export Notes --history -o notes.memfs.gz
    """
    from . import transfer

    store = ctx.store
    s = store.resolve_store(store_ref)
    if output is None and sys.stdout.isatty():
        fail("the archive is binary: give -o FILE or redirect stdout", 2)
    remote = bool(ctx.url)
    length = None if remote else store.count_export(s.id, history=history)
    stats: dict[str, Any] = {}
    tmp = None
    with _progress(ctx, length, "exporting") as bar:
        chunks = (store.export_archive(s.id, history=history) if remote  # type: ignore[attr-defined]
                  else transfer.export_archive(store, s.id, history=history, progress=bar,
                                               stats=stats))
        if output is None:
            out = sys.stdout.buffer
        else:
            # A file appears whole or not at all: written aside, renamed when complete.
            tmp = f"{output}.partial-{os.getpid()}"
            try:
                out = open(tmp, "wb")  # noqa: SIM115 (closed below)
            except OSError as e:
                fail(f"cannot write {output}: {e.strerror or e}")
        size = 0
        try:
            for chunk in chunks:
                out.write(chunk)
                size += len(chunk)
            out.flush()
            if tmp is not None:
                os.fsync(out.fileno())
                out.close()
                os.replace(tmp, output)  # type: ignore[arg-type]
        except OSError as e:
            fail(f"cannot write {output or 'stdout'}: {e.strerror or e}")
        finally:
            if tmp is not None:
                out.close()
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
    summary: dict[str, object] = {
        "store": s.to_dict(), "file": output, "bytes": size, "history": history,
        **{k: stats[k] for k in ("memories", "versions", "redacted") if k in stats}}
    what = (f"{stats['memories']} memories, {stats['versions']} versions"
            if stats else "the store")
    human = f"exported {what} of {s.name} ({s.id}) to {output or 'stdout'} ({size} bytes)"
    if output is None:  # stdout holds the archive: the summary goes to stderr
        click.echo(json.dumps(summary) if ctx.as_json else human, err=True)
    else:
        ctx.output(summary, human)


def _import_lines(summary: dict[str, Any]) -> list[str]:
    lines = [f"  skipped {e['path']}: {e['reason']}" for e in summary.get("skipped", [])]
    lines += [f"  ignored {e['path']}: {e['reason']}" for e in summary.get("ignored", [])]
    return lines


def _count_files(root: str) -> int:
    """The files an import of ``root`` will look at (hidden directories are not walked)."""
    n = 0
    for _, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        n += sum(not f.startswith(".") for f in files)
    return n


@cli.command("import")
@click.argument("source", type=click.Path(exists=True))
@click.option("--into", "into_ref", metavar="STORE", default=None,
              help="Add the memories to this existing store (new ids).")
@click.option("--name", default=None,
              help="Import as a new store of this name (from an archive: a copy, new ids).")
@click.option("--partial", is_flag=True,
              help="Import what is valid and list the rest (default: all or nothing).")
@pass_ctx
def import_cmd(ctx: Context, source: str, into_ref: str | None, name: str | None,
               partial: bool) -> None:
    """Import an archive (from `memfs export`), a directory of text files, or a zip of them.

    An archive is restored exactly (same ids) into a new store; if an id is taken, nothing
    is imported unless --name (a copy with new ids) or --into says otherwise. A directory or
    zip becomes a new store named after it (or --name, --into); hidden files and directories
    (.git) are ignored; every file that breaks a rule is listed and, without --partial,
    nothing is imported.

    Example:

    \b
        memfs import notes.memfs.gz
        memfs import ~/notes --name Notes
    """
    from . import transfer

    if into_ref is not None and name is not None:
        raise click.UsageError("give --into or --name, not both")
    store = ctx.open(create=True)  # importing into a new database is what a restore is
    into = store.resolve_store(into_ref).id if into_ref is not None else None
    try:
        if os.path.isdir(source):
            if ctx.url:
                fail("a directory imports into a local database only; zip it and import the "
                     "zip (`cd DIR && zip -r ../notes.zip .`)", 2)
            if into is None and name is None:
                name = os.path.basename(os.path.abspath(source))
            count = _count_files(source) if _stderr_is_tty() else None
            with _progress(ctx, count, "importing") as bar:
                summary = transfer.import_files(
                    store, lambda ignored: transfer.walk_directory(source, store.limits,
                                                                   ignored),
                    name=name, into=into, partial=partial, actor=_actor(), progress=bar)
        else:
            try:
                raw = open(source, "rb")  # noqa: SIM115 (closed below)
            except OSError as e:
                fail(f"cannot read {source}: {e.strerror or e}")
            with raw:
                kind = transfer.sniff(raw.read(4))
                raw.seek(0)
                if kind == "zip" and into is None and name is None:
                    name = os.path.splitext(os.path.basename(source))[0]
                if ctx.url:
                    summary = store.import_upload(  # type: ignore[attr-defined]
                        raw, name=name, into=into, partial=partial)
                else:
                    size = os.fstat(raw.fileno()).st_size if kind == "archive" else None
                    if kind == "zip":
                        with contextlib.suppress(Exception):
                            size = len(zipfile.ZipFile(raw).infolist())
                        raw.seek(0)
                    with _progress(ctx, size, "importing") as bar:
                        summary = transfer.import_upload(
                            store, raw, name=name, into=into, partial=partial,
                            actor=_actor(), progress=bar)
    except errors.ImportRejected as e:
        if ctx.as_json:
            click.echo(json.dumps({"imported": False, "error": e.message,
                                   "skipped": e.entries}, indent=2, ensure_ascii=False))
        else:
            click.echo("\n".join(_import_lines({"skipped": e.entries})))
        raise
    s = summary["store"]
    ids = ("ids kept" if summary["ids"] == "kept" else "new ids")
    human = [f"imported {summary['memories']} memories ({summary['versions']} versions, "
             f"{summary['redacted']} redacted) into {s['name']} ({s['id']}), {ids}"]
    ctx.output(summary, "\n".join(human + _import_lines(summary)))
    if summary.get("created_store"):
        _warn_namesakes(store, s["id"], s["name"])


# memfs session ...


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
@click.option("--all", "include_archived", is_flag=True, help="Include archived sessions.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most N sessions.")
@pass_ctx
def session_list(
    ctx: Context,
    store_ref: str | None,
    statuses: tuple[str, ...],
    include_archived: bool,
    limit: int | None,
) -> None:
    """List sessions, newest first.

    Example:

    \b
        memfs session list --status terminated --limit 5
    """
    store = ctx.store
    store_id = None if store_ref is None else store.resolve_store(store_ref).id
    items = _pages(
        lambda **kw: store.list_sessions(
            memory_store_id=store_id,
            statuses=list(statuses) or None,
            include_archived=include_archived,
            **kw,
        ),
        limit,
    )
    rows = [
        (s.id, s.status, _when(s.created_at), ", ".join(r.name for r in s.resources) or "-")
        for s in items
    ]
    human = _table(("ID", "STATUS", "CREATED", "STORES"), rows) if rows else "no sessions"
    ctx.output(items, human)


def _load_spec(ctx: Context, path: str) -> Any:
    """The session spec in ``path``, checked, its stores resolved to ids (memfs.spec)."""
    from .spec import load

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
    spec = _load_spec(ctx, spec_path)
    s = ctx.store.create_session(spec.resources(), title=spec.title, metadata=spec.metadata)
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
    s = ctx.store.get_session(session_id)
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


def _event_text(body: dict[str, Any]) -> str:
    """The interesting part of an event for the timeline."""
    t = body.get("type", "")
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
              help="Only events of this type, e.g. agent.tool_use (repeatable).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most N events.")
@pass_ctx
def session_events(
    ctx: Context, session_id: str, types: tuple[str, ...], limit: int | None
) -> None:
    """Print a session's events as a timeline: time, type, tool, operation, path, result.

    Example:

    \b
        memfs session events sesn_01... --type agent.tool_use --type agent.tool_result
    """
    store = ctx.store
    items = _pages(
        lambda **kw: store.list_events(session_id, types=list(types) or None, **kw), limit
    )
    rows = [(_when(e.processed_at), e.type, _event_text(e.body)) for e in items]
    ctx.output(items, _table(("TIME", "TYPE", "WHAT"), rows) if rows else "no events")


@session.command("prompt")
@click.argument("session_id", metavar="ID")
@pass_ctx
def session_prompt(ctx: Context, session_id: str) -> None:
    """Print the memory section of the session's system prompt (one note per attached store).

    Example:

    \b
        memfs session prompt sesn_01...
    """
    s = ctx.store.get_session(session_id)
    text = render_memory_prompt(s)
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
    from .revert import EXIT_LEFT, render

    r = ctx.store.revert(target, actor=_actor(), dry_run=dry_run, force=force)
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
    if ctx.url:
        fail("session reap ends the sessions of local launchers: drop --url / MEMFS_URL", 2)
    from .session import reap_sessions

    ended = reap_sessions(ctx.store)
    ctx.output(ended, "\n".join(f"ended {sid}" for sid in ended) or "no stale sessions")


# -- memfs mount (one FUSE daemon per store) --------------------------------------------------


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
    from .daemon import MountOptions
    from .daemon import mount as mount_store

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


# -- memfs dream --------------------------------------------------------------------------------

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


def _dream_text(store: Store, d: Dream) -> str:
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
            name = store.get_store(out).name
            lines.append(f"  output store: {out} ({name!r}, {store.count_memories(out)} memories)")
        except errors.NotFound:
            lines.append(f"  output store: {out} (deleted)")
    if d.session_id:
        lines.append(f"  session:      {d.session_id} (memfs session events {d.session_id})")
    u = d.usage
    lines.append(f"  usage:        {u['input_tokens']} input, {u['output_tokens']} output tokens"
                 f" (cache: {u['cache_read_input_tokens']} read, "
                 f"{u['cache_creation_input_tokens']} written)")
    lines.append(f"  created:      {_when(d.created_at)}"
                 + (f", ended {_when(d.ended_at)}" if d.ended_at else ""))
    if d.error:
        lines.append(f"  error:        {d.error['type']}: {d.error['message']}")
    if d.status == "completed" and out is not None and out != d.memory_store_id:
        lines.append(f"  next: attach {out} to new sessions instead of {d.memory_store_id}, "
                     f"then archive the input (memfs stores archive {d.memory_store_id})")
    return "\n".join(lines)


def _recover_dreams(ctx: Context) -> None:
    """On a local database, the dreams of a `memfs dream` that died are failed first (a
    server does this itself)."""
    if not ctx.url:
        from .dreams import Dreamer

        Dreamer(ctx.store).recover()


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

    from .dreams import DreamRun, identity, local_problem

    if command and ctx.url:
        fail("memfs dream -- COMMAND runs on a local database; drop --url / MEMFS_URL", 2)
    if not command and not ctx.url:
        problem = local_problem()  # before anything is made: no dream, no store to clean up
        if problem:
            fail(problem)
    store = ctx.store
    s = store.resolve_store(store_ref)
    if command and not model:  # the model is the command
        model = "command:" + os.path.basename(command[0])[:240]
    model = model or os.environ.get("MEMFS_DREAM_MODEL") or DEFAULT_DREAM_MODEL
    inputs = [{"type": "memory_store", "memory_store_id": s.id},
              {"type": "sessions", "session_ids": list(session_ids)}]
    behavior = {"type": "update_existing", "memory_store_id": s.id} if update_existing else None
    d = store.create_dream(inputs, model, instructions=instructions, output_behavior=behavior,
                           runner=None if ctx.url else identity())
    if not ctx.as_json:
        click.echo(f"dream {d.id} started (cancel: Ctrl-C or memfs dream cancel {d.id})",
                   err=True)
    if command:
        from .dreams import run_command

        ctx.close()  # one database connection set at a time (see run_command)
        d = run_command(ctx.db_path, d.id, list(command))
        store = ctx.store
    run = None if ctx.url or command else DreamRun(store, d.id)
    try:
        if run is not None:
            thread = threading.Thread(target=run.run, name=f"dream-{d.id}", daemon=True)
            thread.start()
            while thread.is_alive():
                thread.join(0.2)
        elif not no_wait:
            while d.status in ("pending", "running"):
                time.sleep(0.5)
                d = store.get_dream(d.id)
    except KeyboardInterrupt:
        store.cancel_dream(d.id)
        if run is not None:
            run.stop.set()
            thread.join(5)
        fail(f"dream {d.id} canceled", 130)
    d = store.get_dream(d.id)
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
    items = _pages(lambda **kw: store.list_dreams(
        include_archived=include_archived, statuses=list(statuses) or None, **kw), limit)
    rows = [(d.id, d.status, d.memory_store_id, d.output_store_id or "-", _when(d.created_at))
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
    d = ctx.store.get_dream(dream_id)
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
    d = ctx.store.cancel_dream(dream_id)
    ctx.output(d, _dream_text(ctx.store, d))


# -- memfs serve ------------------------------------------------------------------------------


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="Port (0 picks a free one).")
@click.option(
    "--api-key",
    "api_keys",
    multiple=True,
    help="Accept this API key (repeatable; also env MEMFS_API_KEYS, comma-separated).",
)
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Server processes sharing the port and the database (use the cores).")
@pass_ctx
def serve(ctx: Context, host: str, port: int, api_keys: tuple[str, ...], workers: int) -> None:
    """Serve the memory stores HTTP API (anthropic SDK compatible) on the local database.

    Every request needs a key (x-api-key or Authorization: Bearer). Without --api-key or
    MEMFS_API_KEYS, a loopback server generates one and prints it on stderr; any other
    address is refused.

    The server keeps every store indexed by meaning in the background (--embeddings: which
    model; `memfs search --status` says how far).

    Example:

    \b
        memfs serve --port 8000 --api-key "$MEMFS_API_KEY"
    """
    from .server import api_keys_from
    from .server import serve as run_server

    if ctx.url:
        fail("serve uses a local database; drop --url / MEMFS_URL", 2)
    try:
        run_server(ctx.db_path, host, port, api_keys_from(api_keys), workers=workers,
                   echo=logs.say)
    except OSError as e:
        fail(f"cannot listen on {host}:{port}: {e.strerror or e}", 1)


# -- memfs db (whole databases: copy between backends, migrate) ------------------------------


@cli.group("db")
def db_group() -> None:
    """Whole databases: copy one to another backend (SQLite <-> PostgreSQL), migrate the schema.

    Example:

    \b
        memfs db copy ~/.local/share/memfs/memfs.db postgresql://memfs@db.example/memfs
    """


@db_group.command("copy")
@click.argument("src")
@click.argument("dst")
@pass_ctx
def db_copy_cmd(ctx: Context, src: str, dst: str) -> None:
    """Copy every table of the database SRC into the empty database DST, ids unchanged.

    SRC and DST are SQLite files or postgresql:// URLs, in any direction. SRC is read from
    one snapshot; DST is written in one transaction and verified before it commits (rows and a
    SHA-256 of every table): on any failure or mismatch nothing is left in DST. DST must be
    new or empty, and both at this memfs's schema (`memfs db migrate`).

    Example:

    \b
        memfs db copy memfs.db postgresql://memfs@localhost/memfs
    """
    from . import dbcopy

    try:
        report = dbcopy.copy(src, dst)
    except dbcopy.CopyMismatch as e:
        if ctx.as_json:
            click.echo(json.dumps(e.report.to_dict(), indent=2))
        else:
            click.echo("\n".join(e.report.lines()))
        fail(e.message, 1)
    ctx.output(report.to_dict(), "\n".join(report.lines()))


@db_group.command("migrate")
@click.option("--check", is_flag=True,
              help="Apply nothing: exit 1 if migrations are pending.")
@pass_ctx
def db_migrate_cmd(ctx: Context, check: bool) -> None:
    """Apply the pending schema migrations of the database (--db / MEMFS_DB), either backend.

    Example:

    \b
        memfs --db postgresql://memfs@localhost/memfs db migrate --check
    """
    from . import dbcopy
    from .database import redact_url

    if ctx.url:
        fail("db migrate uses a local database or postgresql:// URL; drop --url / MEMFS_URL", 2)
    target = str(ctx.db_path or default_db_path())
    before, after = dbcopy.migrate(target, check=check)
    result = {"database": redact_url(target), "before": before.to_dict(),
              "after": after.to_dict(), "applied": [m for m in after.applied
                                                    if m not in before.applied]}
    if check:
        human = (f"{redact_url(target)}: schema {before.version}"
                 + (f", pending: {', '.join(before.pending)}" if before.pending
                    else ", up to date"))
    elif result["applied"]:
        human = (f"{redact_url(target)}: schema {before.version} -> {after.version} "
                 f"(applied {', '.join(result['applied'])})")
    else:
        human = f"{redact_url(target)}: schema {before.version}, up to date"
    if before.unknown:
        human += f" (also has migrations this memfs does not know: {', '.join(before.unknown)})"
    ctx.output(result, human)
    if check and before.pending:
        sys.exit(1)


cli.add_command(search_cmd)  # memfs search (memfs.cli_search: cli.py is long enough)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="memfs")
