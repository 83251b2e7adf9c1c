"""``memfs db``: whole databases: copy one to another backend (SQLite <-> PostgreSQL,
:mod:`memfs.cli.dbadmin`), migrate the schema."""

from __future__ import annotations

import json
import sys

import click

from ..store import default_db_path
from .base import Context, cli, fail, pass_ctx


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
    from . import dbadmin

    try:
        report = dbadmin.copy(src, dst)
    except dbadmin.CopyMismatch as e:
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
    from ..backends import redact_url
    from . import dbadmin

    if ctx.url:
        fail("db migrate uses a local database or postgresql:// URL; drop --url / MEMFS_URL", 2)
    target = str(ctx.db_path or default_db_path())
    before, after = dbadmin.migrate(target, check=check)
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
