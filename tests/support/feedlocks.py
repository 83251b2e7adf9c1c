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
import re
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


#: An insert into the feed or the events, as the store writes them (columns in this order).
_INSERT = re.compile(r"INSERT INTO (changes) \(store_id, |INSERT INTO (events) \(id, session_id, ")
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
        # Also inside a statement of several parts (Core.at_once: WITH ... INSERT INTO
        # changes ...): the insert's own values start after the placeholders before it.
        scopes: set[str] = set()
        if re.search(r"INTO (changes|events)\b", sql) and not _INSERT.search(sql):
            breaches.append(f"an insert this check cannot read: {sql}")
        for m in _INSERT.finditer(sql):
            at = sql.count("?", 0, m.start())
            if m.group(1) == "changes":
                scopes |= {f"store:{r[at]}" for r in rows}
            else:
                scopes |= {f"session:{r[at + 1]}" for r in rows if r[at + 1] is not None}
        if not scopes:
            return
        held = {(int(a), int(b)) for a, b in execute(conn, _HELD).fetchall()}
        if everything in held:
            return
        for scope in sorted(scopes):
            if pg_lock_parts(lock_key(scope)) not in held:
                stack = "".join(traceback.format_stack()[-12:-2])
                breaches.append(f"an insert into {scope.split(':')[0]}'s feed ({scope}) "
                                f"without its lock:\n{stack}")

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
