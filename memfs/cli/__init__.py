"""The ``memfs`` command line: argv -> store (or client) calls -> output.

Human-readable output by default, ``--json`` for scripts. Every :class:`memfs.errors.MemfsError`
becomes one line on stderr and a non-zero exit (its row's in :data:`memfs.errors.WIRE`);
nothing here re-checks a rule of the store.

The package, a small framework and one module per group of commands, each module building on
those before it in this list (it may import them; never the other way round):

- :mod:`~memfs.cli.globals` (the global options, taken on both sides of a subcommand),
  :mod:`~.shared` (the command class, aligned tables, every page of a listing), :mod:`~.base`
  (exit codes, the groups, the :class:`Context` every command gets and its output, and
  :data:`cli`, the ``memfs`` group), :mod:`~.common` (what the commands on a store share: the
  actor, refs, content from a file or stdin, confirmations): the framework;
- :mod:`~.stores`, :mod:`~.memories`, :mod:`~.versions`, :mod:`~.sessions`, :mod:`~.archive`
  (``export``, ``import``), :mod:`~.typed` (``stores describe``, ``expire``: typed memories),
  :mod:`~.launch` (``run``, ``mount``, ``serve``), :mod:`~.mcp` (``mcp``: an MCP server on
  stdio), :mod:`~.dreams`,
  :mod:`~.dbadmin` (what ``memfs db`` does to a whole database, imported by its commands
  only when they run), :mod:`~.db`, :mod:`~.search` and :mod:`~.keys` (API keys): the
  commands, each registered on :data:`cli` when its module is imported;
- this module: imports them all, and :func:`main`, the console script (``memfs``).

The command line is the top layer: it may import any module of memfs, but imports the heavy
ones (the HTTP client, the server, the session launcher, the mount's daemon, PostgreSQL) only
inside the commands that use them, so that every command starts fast
(tests/unit/test_startup_imports.py); nothing else in memfs imports it
(tests/unit/test_layers.py).
"""

from __future__ import annotations

from . import (  # noqa: F401
    archive,
    db,
    dreams,
    keys,
    launch,
    mcp,
    memories,
    sessions,
    stores,
    typed,
    versions,
)
from .base import Context, MemfsGroup, cli, fail
from .search import search_cmd
from .shared import MemfsCommand

__all__ = ["Context", "MemfsCommand", "MemfsGroup", "cli", "fail", "main", "search_cmd"]

cli.add_command(search_cmd)  # memfs search


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    cli.main(args=argv, prog_name="memfs")
