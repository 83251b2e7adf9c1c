"""The framework of the ``memfs`` command line: :func:`fail`, the groups that turn errors into
one line and an exit code (the error's row's in :data:`memfs.errors.WIRE`) and take the global
options after their name (:class:`MemfsGroup`, :class:`MemfsCLI`), the :class:`Context` every
command gets (where the data is, how to print, how to log), and :data:`cli`, the ``memfs``
group itself, on which the modules of the commands register theirs."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

import click

from .. import errors
from ..daemons import logs
from ..store import Store, open_store
from .globals import after_options, format_options, root_options
from .shared import MemfsCommand

if TYPE_CHECKING:
    from ..client import Client

log = logging.getLogger(__name__)

#: What a command works on: the local database, or with ``--url`` a client of that server
#: (the Store's methods, models and errors, so every command works the same on both).
AnyStore: TypeAlias = "Store | Client"


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
        self.params.extend(after_options(self.params))

    def get_short_help_str(self, limit: int = 45) -> str:
        return super().get_short_help_str(limit=1000)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        format_options(self, ctx, formatter)
        self.format_commands(ctx, formatter)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except errors.MemfsError as e:
            fail(e.message, errors.wire(e).exit)  # usage errors exit 2 (click's)
        except BrokenPipeError:
            sys.exit(0)


class MemfsCLI(MemfsGroup):
    """The ``memfs`` group itself: the global options are its own
    (:func:`memfs.cli.globals.root_options`), with their environment variables and defaults."""

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
        self._store: AnyStore | None = None

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
        from ..recall.embeddings import SETTING_ENV, from_setting

        try:
            from_setting(setting)
        except errors.InvalidRequest as e:
            fail(e.message + (f" (from {source})" if source else ""), 2)
        self.embeddings = setting
        os.environ[SETTING_ENV] = setting
        if isinstance(self._store, Store):  # a server's client: the server's provider
            self._store.search.use_embeddings(setting)

    def configure_logging(self) -> None:
        """Log at the level ``-v`` asks for, in the format ``--log-format`` names."""
        logs.configure([logging.WARNING, logging.INFO, logging.DEBUG][min(self.verbose, 2)],
                       self.log_format)
        if self.log_format != "text":
            # The daemons and servers this command starts log the same way (an agent's
            # environment gets every MEMFS_* variable, so only when asked: not the default).
            os.environ["MEMFS_LOG_FORMAT"] = self.log_format

    @property
    def store(self) -> AnyStore:
        """The local database, or with ``--url`` a :class:`memfs.client.Client` of that server
        (it has the Store's methods, models and errors, so every command works the same).
        A missing database is an error here, never created: see :meth:`open`."""
        return self.open(create=False)

    def open(self, *, create: bool) -> AnyStore:
        """:attr:`store`, creating a missing local database when ``create`` (only commands
        that make something a later command needs do: ``stores create``).

        :raises errors.DatabaseUnavailable: the database cannot be opened (or is missing).
        """
        if self._store is None:
            if self.url:
                from ..client import Client

                self._store = Client(self.url, self.api_key)
            else:
                folder = _missing_folder(self.db_path) if create else None
                self._store = open_store(self.db_path, create=create)
                if folder is not None and os.path.isdir(folder):
                    # Made for the new database: said, so that a mistyped path shows at once.
                    click.echo(f"memfs: made the directory {folder} for the new database "
                               f"{self._store.path}", err=True)
                if self.embeddings is not None:
                    self._store.search.use_embeddings(self.embeddings)
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


def _missing_folder(db: str | None) -> str | None:
    """The directory of the local database ``db`` (default: MEMFS_DB's, or the default path)
    if it does not exist yet (a new database makes it); else None."""
    from ..backends import default_db_path, is_url

    path = os.fspath(default_db_path() if db is None else db)
    if path == ":memory:" or is_url(path):
        return None
    folder = os.path.dirname(os.path.abspath(path))
    return None if os.path.isdir(folder) else folder


def _plain(obj: Any) -> Any:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, list | tuple):
        return [_plain(o) for o in obj]
    return obj


pass_ctx = click.make_pass_decorator(Context)


@click.group(cls=MemfsCLI)
@root_options
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
    ctx.call_on_close(ctx.obj.close)  # the database, or the server's connections
    ctx.obj.configure_logging()
    if embeddings:
        from_env = ctx.get_parameter_source("embeddings") is click.core.ParameterSource.ENVIRONMENT
        ctx.obj.use_embeddings(embeddings, "MEMFS_EMBEDDINGS" if from_env else "")
