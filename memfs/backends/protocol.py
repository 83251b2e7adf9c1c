"""The typed seam between the store and its database: :class:`Database` (what a store needs of
one, which :class:`~memfs.backends.sqlite.SQLiteDatabase` and
:class:`~memfs.backends.postgresql.PgDatabase` both satisfy), and the :class:`Connection`,
:class:`Cursor` and :class:`Row` its SQL runs on, on either backend."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Row(Protocol):
    """A row the store reads: by column name or position (a :class:`sqlite3.Row`, or
    :class:`memfs.backends.postgresql.Row`)."""

    def __getitem__(self, key: Any, /) -> Any: ...

    def keys(self) -> list[str]: ...


class Cursor(Protocol):
    """What a statement's result gives the store (:class:`sqlite3.Cursor`, psycopg's)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """What the store's SQL needs of a connection: :class:`sqlite3.Connection`, or
    :class:`memfs.backends.postgresql.PgConnection` (the same statements, translated)."""

    def execute(self, sql: str, params: Any = ..., /) -> Cursor: ...

    def executemany(self, sql: str, rows: Any, /) -> Cursor: ...


class Database(Protocol):
    """A database under a store: :class:`~memfs.backends.sqlite.SQLiteDatabase` or
    :class:`~memfs.backends.postgresql.PgDatabase`, as :func:`memfs.backends.open_database`
    opens it."""

    #: ``sqlite`` or ``postgresql``: where their SQL differs, the store asks.
    dialect: str
    #: The SQL of the position of ``{1}`` in ``{0}`` (``instr`` or ``strpos``).
    position_sql: str
    @property
    def writer(self) -> sqlite3.Connection | None:
        """SQLite's one writer connection (migrations run on it); None on PostgreSQL."""

    def nowait(self) -> AbstractContextManager[None]: ...

    def patience(self, seconds: float) -> AbstractContextManager[None]: ...

    def write(self, *scopes: str) -> AbstractContextManager[Connection]:
        """One write transaction, serialised with every write that shares one of ``scopes``
        (:mod:`memfs.backends.scopes`), or with every write when there are none. SQLite has
        one writer, which serialises every write whatever its scopes."""
        ...

    def read(self) -> AbstractContextManager[Connection]: ...

    def snapshot(self) -> AbstractContextManager[Connection]: ...

    def run(self, fn: Callable[..., T], *args: Any) -> T: ...

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None: ...

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...

    def sync(self) -> None: ...

    def check_file(self) -> None: ...

    def commits_elsewhere(self) -> int | None:
        """A number that changes whenever another connection (another process) commits, and
        never for this database's own commits; None when it cannot tell (then assume it
        did)."""
        ...

    def close(self) -> None: ...
