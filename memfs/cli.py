"""The ``memfs`` command line: argv -> store (or client) calls -> output.

Human-readable output by default, ``--json`` for scripts. Every :class:`memfs.errors.MemfsError`
becomes one line on stderr and a non-zero exit (:data:`EXIT_CODES`); nothing here re-checks a
rule of the store.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, NoReturn

import click

from . import errors
from .store import Store, default_db_path

log = logging.getLogger(__name__)

#: Exit codes by error class (the first match in this order wins); usage errors exit 2.
EXIT_CODES: list[tuple[type[errors.MemfsError], int]] = [
    (errors.NotFound, 3),
    (errors.Conflict, 4),
    (errors.InvalidRequest, 5),
    (errors.ReadOnly, 6),
    (errors.Busy, 7),
    (errors.MemfsError, 1),
]


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``memfs: <message>`` on stderr and exit with ``code``."""
    click.echo(f"memfs: {message}", err=True)
    sys.exit(code)


class MemfsGroup(click.Group):
    """A click group that turns memfs errors into one line on stderr and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except errors.MemfsError as e:
            code = next(c for cls, c in EXIT_CODES if isinstance(e, cls))
            fail(e.message, code)
        except BrokenPipeError:
            sys.exit(0)


class Context:
    """What every command needs: where the data is, and how to print."""

    def __init__(self, db: str | None, as_json: bool) -> None:
        self.db_path = db
        self.as_json = as_json
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store(self.db_path)
        return self._store

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


@click.group(cls=MemfsGroup)
@click.option(
    "--db",
    envvar="MEMFS_DB",
    type=click.Path(dir_okay=False),
    help=f"SQLite database (env MEMFS_DB; default {default_db_path()}).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.option("-v", "--verbose", count=True, help="Log more (-vv for debug).")
@click.version_option(package_name="memfs")
@click.pass_context
def cli(ctx: click.Context, db: str | None, as_json: bool, verbose: int) -> None:
    """memfs: memory stores for AI agents, as files.

    Example:

        memfs stores create notes && memfs memories create notes /hello.md --content hi
    """
    logging.basicConfig(
        level=[logging.WARNING, logging.INFO, logging.DEBUG][min(verbose, 2)],
        format="%(asctime)s %(name)s %(levelname)s: %(message)s",
    )
    ctx.obj = Context(db, as_json)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="memfs")
