"""The ``memfs`` command line's global options, defined once and taken on both sides of the
subcommand: ``memfs --db X stores list`` and ``memfs stores list --db X`` are the same.

:data:`GLOBAL_OPTIONS` is the one definition. :func:`root_options` puts them on the ``memfs``
group, with their environment variables and defaults; :func:`after_options` makes copies for
every command and subgroup (:class:`memfs.cli.shared.MemfsCommand`,
:class:`memfs.cli.base.MemfsGroup`) that only act when given on the command line there, and
then win over the value given before the subcommand or by the environment (``-v`` adds up:
``memfs -v serve -v`` is ``-vv``). A command's own option of the same name wins after it
(``memfs serve --api-key`` is a key the server accepts). The help of each command lists the
copies under "Global options".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import click
from click.core import ParameterSource

from .. import errors
from ..store import default_db_path

F = TypeVar("F", bound=Callable[..., Any])


def _default_db_help() -> str:
    try:
        return str(default_db_path())
    except errors.DatabaseUnavailable:
        return "$XDG_DATA_HOME/memfs/memfs.db, else ~/.local/share/memfs/memfs.db"


#: ``(declarations, settings)`` of each global option; ``envvar``, ``default`` and
#: ``show_default`` apply to the ``memfs`` group only.
GLOBAL_OPTIONS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--db", "db"), dict(
        envvar="MEMFS_DB", type=click.Path(),
        help=f"SQLite database file, or a postgresql:// URL (env MEMFS_DB; default "
        f"{_default_db_help()}). Only `stores create`, `keys create`, `serve` and `import` "
        "without --into (a restore) create a missing one (and its directory, said on "
        "stderr).")),
    (("--url", "url"), dict(
        envvar="MEMFS_URL",
        help="Use the memfs server at this URL instead of a local database (env MEMFS_URL).")),
    (("--api-key", "api_key"), dict(
        envvar="MEMFS_API_KEY", help="API key for --url (env MEMFS_API_KEY).")),
    (("--embeddings", "embeddings"), dict(
        envvar="MEMFS_EMBEDDINGS", metavar="SETTING",
        help="Embeddings for search by meaning: local (the default: a small model in this "
        "process, offline), none, ollama:http://HOST:11434/MODEL or openai:URL:MODEL (key in "
        "MEMFS_EMBEDDINGS_API_KEY); the servers, mounts and sessions this command starts use "
        "it too (env MEMFS_EMBEDDINGS).")),
    (("--json", "as_json"), dict(is_flag=True, help="Print JSON for scripts.")),
    (("-v", "--verbose", "verbose"), dict(count=True, help="Log more (-vv for debug).")),
    (("--log-format", "log_format"), dict(
        envvar="MEMFS_LOG_FORMAT", type=click.Choice(["text", "json"]), default="text",
        show_default=True,
        help="Logs as text, or as one JSON object per line (env MEMFS_LOG_FORMAT).")),
]

_ROOT_ONLY = ("envvar", "default", "show_default")


class Settable(Protocol):
    """What the copies after the subcommand set (:class:`memfs.cli.base.Context`)."""

    def set_global(self, name: str, value: Any) -> None: ...


def root_options(f: F) -> F:
    """Decorate the ``memfs`` group with every global option."""
    for decls, settings in reversed(GLOBAL_OPTIONS):
        f = click.option(*decls, **settings)(f)
    return f


class AfterOption(click.Option):
    """A global option given after a subcommand: sets the value on the command's
    :class:`Settable` context object, overriding what the ``memfs`` group got."""

    def __init__(self, decls: tuple[str, ...], settings: dict[str, Any]) -> None:
        kept = {k: v for k, v in settings.items() if k not in _ROOT_ONLY}
        super().__init__(list(decls), expose_value=False, callback=self._set, **kept)

    def _set(self, ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if param.name is None or ctx.get_parameter_source(param.name) is not (
                ParameterSource.COMMANDLINE):
            return
        obj = ctx.find_object(object)
        if hasattr(obj, "set_global"):
            obj.set_global(param.name, value)


def after_options(taken: list[click.Parameter]) -> list[click.Option]:
    """The copies of the global options for a command whose own parameters are ``taken``
    (an option name it has already is its own)."""
    names = {o for p in taken for o in getattr(p, "opts", ()) + getattr(p, "secondary_opts", ())}
    out: list[click.Option] = []
    for decls, settings in GLOBAL_OPTIONS:
        flags = [d for d in decls if d.startswith("-")]
        if not names.intersection(flags):
            out.append(AfterOption(decls, settings))
    return out


def format_options(cmd: click.Command, ctx: click.Context,
                   formatter: click.HelpFormatter) -> None:
    """A command's options, then the global ones under their own heading."""
    own: list[tuple[str, str]] = []
    glob: list[tuple[str, str]] = []
    for param in cmd.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is not None:
            (glob if isinstance(param, AfterOption) else own).append(record)
    if own:
        with formatter.section("Options"):
            formatter.write_dl(own)
    if glob:
        with formatter.section("Global options (before or after the command)"):
            formatter.write_dl(glob)
