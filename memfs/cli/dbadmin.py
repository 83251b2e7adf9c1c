"""``memfs db migrate`` and ``memfs db copy``: a whole database at this memfs's schema.

:func:`schema_status` says which of this memfs's migrations a database has (its backend's,
from :mod:`memfs.store.schema`, which holds both backends'),
:func:`migrate` applies those it lacks (opening a :class:`~memfs.store.Store` does), and
:func:`copy` copies a database into a new one of either backend: both are checked to be at
this memfs's schema, the destination is made and migrated by a Store, and
:func:`memfs.backends.copy.copy_into` copies and verifies every table in one transaction.
Above the store, which it opens; the CLI's ``memfs db`` calls it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack

from ..backends import Database, check_target, open_database, redact_url
from ..backends.copy import (
    BATCH_ROWS,
    CopyMismatch,
    CopyReport,
    NotEmpty,
    SchemaMismatch,
    SchemaStatus,
    copy_into,
    read_schema_status,
    same_database,
)
from ..errors import InvalidRequest

__all__ = ["CopyMismatch", "CopyReport", "NotEmpty", "SchemaMismatch", "SchemaStatus", "copy",
           "migrate", "open_raw", "schema_status"]


def open_raw(target: str, *, create: bool) -> Database:
    """The database ``target`` names, opened WITHOUT migrating it (a Store would)."""
    return open_database(target, create=create, check=True)


def schema_status(db: Database) -> SchemaStatus:
    """The migrations ``db`` has and those this memfs knows for its backend."""
    from ..store import schema

    return read_schema_status(db, schema.MIGRATION_SET, schema.migration_names(db.dialect))


def migrate(target: str, *, check: bool = False) -> tuple[SchemaStatus, SchemaStatus]:
    """Apply the pending migrations of ``target`` (none with ``check``): (before, after)."""
    from ..store import Store

    db = open_raw(target, create=False)
    try:
        before = schema_status(db)
    finally:
        db.close()
    if check or not before.pending:
        return before, before
    Store(target, create=False).close()  # opening a Store applies them (one transaction)
    db = open_raw(target, create=False)
    try:
        return before, schema_status(db)
    finally:
        db.close()


def _check_current(status: SchemaStatus, role: str, target: str) -> None:
    where = redact_url(target)
    if status.unknown:
        raise SchemaMismatch(
            f"{role} {where} has migrations this memfs does not know "
            f"({', '.join(status.unknown)}): use the memfs that made them")
    if status.pending:
        raise SchemaMismatch(
            f"{role} {where} is at schema {status.version}, this memfs expects "
            f"{len(status.known)}/{len(status.known)}: run `memfs db migrate --db {where}` first")


def copy(src: str, dst: str, *, batch_rows: int = BATCH_ROWS,
         progress: Callable[[int], None] | None = None) -> CopyReport:
    """Copy the database ``src`` into the empty database ``dst`` (see the module's doc and
    :mod:`memfs.backends.copy`).

    :raises SchemaMismatch: either is not at this memfs's schema, or their tables differ.
    :raises NotEmpty: ``dst`` holds data.
    :raises DatabaseUnavailable, StorageError: a database cannot be opened or fails; nothing
        was written to ``dst``.
    """
    from ..store import Store

    check_target(src)
    check_target(dst)
    if same_database(src, dst):
        raise InvalidRequest("SRC and DST are the same database")
    with ExitStack() as stack:
        sdb = open_raw(src, create=False)
        stack.callback(sdb.close)
        sstatus = schema_status(sdb)
        if sstatus.fresh:
            raise SchemaMismatch(f"SRC {redact_url(src)} is not a memfs database (no schema)")
        _check_current(sstatus, "SRC", src)
        ddb = open_raw(dst, create=True)
        try:
            dstatus = schema_status(ddb)
        finally:
            ddb.close()
        if not dstatus.fresh:
            if not dstatus.applied:
                raise SchemaMismatch(f"DST {redact_url(dst)} has tables but no memfs schema "
                                     f"({', '.join(dstatus.tables[:3])}): use a new database")
            _check_current(dstatus, "DST", dst)
        dstore = Store(dst, create=True)  # a new database: made and migrated here
        stack.callback(dstore.close)
        return copy_into(sdb, dstore.database, src, dst, batch_rows=batch_rows,
                         progress=progress)
    raise AssertionError("unreachable")
