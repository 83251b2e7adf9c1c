"""The rule that keeps a store's change feed (a session's events) in commit order on
PostgreSQL (issue 44), checked at every insert of a test: the transaction that inserts a
change of store X holds the advisory lock of ``store:X`` exclusive, or the global write lock
exclusive (an event of session S: ``session:S``'s). Then no two of X's changes are in flight
at once, and X's seqs commit in order: a follower reading ``seq > N`` of X never skips one.

:func:`check_feed_locks` wraps this process's PostgreSQL connections for the rest of a test
(``monkeypatch``) and returns the list of breaches found, each with the stack that made it
(the ``backend`` fixture of tests/conftest.py fails a PostgreSQL test that made one). A
write of another process (a ``memfs serve``) is checked by a trigger instead
(tests/integration/test_fleet_concurrency.py)."""

from __future__ import annotations

import hashlib
import traceback
from typing import Any

import pytest


def lock_key(scope: str) -> int:
    """The advisory lock of a scope, as the PostgreSQL backend takes it (issue 44's design:
    the scope's blake2b-8, signed)."""
    try:
        from memfs.backends.scopes import lock_key as key
    except ImportError:  # before the per-store locks landed
        return int.from_bytes(hashlib.blake2b(scope.encode(), digest_size=8).digest(), "big",
                              signed=True)
    return key(scope)


def pg_lock_parts(key: int) -> tuple[int, int]:
    """How ``pg_locks`` shows a bigint advisory lock: (classid, objid)."""
    return (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF


_HELD = ("SELECT classid, objid FROM pg_locks WHERE pid = pg_backend_pid() "
         "AND locktype = 'advisory' AND granted AND mode = 'ExclusiveLock'")


def check_feed_locks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Check every insert into ``changes`` and ``events`` made through this process's
    PostgreSQL connections until the test ends; returns the breaches (appended as found)."""
    from memfs.backends import postgresql as pg

    breaches: list[str] = []
    execute, executemany = pg.PgConnection.execute, pg.PgConnection.executemany
    everything = pg_lock_parts(pg.WRITE_LOCK_KEY)

    def check(conn: Any, sql: str, rows: list[Any]) -> None:
        head = " ".join(sql.split()[:3]).upper()
        if head == "INSERT INTO CHANGES":
            scopes = {f"store:{r[0]}" for r in rows}
        elif head == "INSERT INTO EVENTS":
            scopes = {f"session:{r[1]}" for r in rows if r[1] is not None}
        else:
            return
        if not scopes:
            return
        held = {(int(a), int(b)) for a, b in execute(conn, _HELD).fetchall()}
        if everything in held:
            return
        for scope in sorted(scopes):
            if pg_lock_parts(lock_key(scope)) not in held:
                stack = "".join(traceback.format_stack(limit=12)[:-2])
                breaches.append(f"{head.lower()} of {scope} without its lock:\n{stack}")

    def checked_execute(self: Any, sql: str, params: Any = ()) -> Any:
        if params:
            check(self, sql, [params])
        return execute(self, sql, params)

    def checked_executemany(self: Any, sql: str, rows: Any) -> Any:
        rows = list(rows)
        check(self, sql, rows)
        return executemany(self, sql, rows)

    monkeypatch.setattr(pg.PgConnection, "execute", checked_execute)
    monkeypatch.setattr(pg.PgConnection, "executemany", checked_executemany)
    return breaches
