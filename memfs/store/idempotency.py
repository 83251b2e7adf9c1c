"""Writes that are applied once and answered the same each time they are sent (issue 38 N6):
:meth:`Idempotency.write_once`, what the API runs a write sent with an ``Idempotency-Key``
or a client's deadline through (docs/http-api.md, "Idempotent writes").

A client that got no answer (a timeout, a dropped connection) cannot tell whether its write
was committed. Sent again with the same key, the write is answered with the outcome recorded
for that key, in the write's own transaction, instead of being applied twice. A deadline
(the time, on the server's clock, after which the client no longer waits) is checked in the
transaction before it commits: a write late for it is refused, and never commits later, so a
client that gave up at its deadline may say the write failed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from ..backends import Connection
from ..errors import Busy, DeadlinePassed, InvalidRequest, MemfsError, StorageError, to_wire
from ..rules import format_time

#: How long the answer of a write sent with a key is kept: a request sent again later is
#: applied as a new one.
from .base import Part
from .common import utc_now

KEEP_KEYS = timedelta(hours=24)
#: The longest key a client may send.
MAX_KEY_LENGTH = 255


class Idempotency(Part):
    """Writes applied once per client key, and refused once their client's deadline passed."""

    def write_once(
        self,
        scope: str,
        key: str | None,
        fingerprint: str,
        deadline: float | None,
        call: Callable[[], Any],
        shown: Callable[[Any], Any],
        scopes: tuple[str, ...] = (),
    ) -> tuple[int, Any]:
        """Run the write ``call`` and answer ``(HTTP status, body)``: 200 and ``shown(result)``,
        or a refusal of the store's rules (:func:`memfs.errors.to_wire`: the status and
        ``{"error": ...}``), returned, not raised. In a :meth:`batch` (the API's group
        commit) it runs in the batch's transaction; alone, in its own.

        ``key`` (None: none): the answer is recorded under ``(scope, key)`` in the same
        transaction, and a call with a key already recorded is answered with that answer
        without running ``call``; the same key sent with another request (``fingerprint``)
        is refused. ``deadline`` (seconds since the epoch; None: none): checked just before
        the write's transaction may commit; past it, the write is rolled back and refused
        with :class:`DeadlinePassed` (recorded too).

        ``scopes``: what ``call`` serialises on (:meth:`Core.write`; none: every write). A key
        needs no scope of its own: the same request sent twice at once writes to the same
        store, whose scope serialises them (the second finds the first's answer), and a key
        sent with two requests to two stores at once is refused by the table's primary key
        to the one that commits second (its batch runs its writes again alone: then it finds
        the key taken).

        :raises InvalidRequest: a key that is too long, or already used for another request.
        :raises StorageError, Busy: the database failed (nothing is recorded).
        """
        if key is not None and not 0 < len(key) <= MAX_KEY_LENGTH:
            raise InvalidRequest(f"an Idempotency-Key must be 1 to {MAX_KEY_LENGTH} characters")
        conn = self.core.batch_conn(*scopes)
        if conn is not None:
            return self._once_in(conn, scope, key, fingerprint, deadline, call, shown)
        with self.core.joined_write(*scopes) as conn:
            return self._once_in(conn, scope, key, fingerprint, deadline, call, shown)

    def _once_in(self, conn: Connection, scope: str, key: str | None, fingerprint: str,
                 deadline: float | None, call: Callable[[], Any],
                 shown: Callable[[Any], Any]) -> tuple[int, Any]:
        if key is not None:
            row = conn.execute(
                "SELECT fingerprint, status, body FROM idempotency_keys "
                "WHERE scope = ? AND key = ?", (scope, key)).fetchone()
            if row is not None:
                if row["fingerprint"] != fingerprint:
                    raise InvalidRequest(
                        "this Idempotency-Key was sent with another request; use a new key "
                        "for each write")
                return int(row["status"]), json.loads(row["body"])
        self.core.later(conn, "SAVEPOINT memfs_once")  # sent with the call's first statement
        try:
            body = shown(call())
            if deadline is not None and time.time() > deadline:
                raise DeadlinePassed(
                    "the client's deadline (x-memfs-deadline) passed before the write could "
                    "commit; nothing was written")
            status = 200
        except MemfsError as e:
            if isinstance(e, StorageError | Busy):
                raise
            conn.execute("ROLLBACK TO memfs_once")
            status, err = to_wire(e)
            body = {"error": err}
        self.core.later(conn, "RELEASE memfs_once")
        if key is not None:
            # Bound the table as it grows (an indexed range, usually empty), in the same
            # statement on PostgreSQL: a key found above is never inserted, so the two never
            # meet on one row. Writes of other stores do it at once: rows one of them is
            # deleting are left to it (Core.delete_unlocked), at most a hundred a write.
            self.core.at_once(
                conn,
                [(self.core.delete_unlocked("idempotency_keys", "created_at < ?",
                                            "created_at", limit=100),
                  (format_time(datetime.now(UTC) - KEEP_KEYS),))],
                "INSERT INTO idempotency_keys (scope, key, fingerprint, status, body, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (scope, key, fingerprint, status, json.dumps(body), utc_now()))
        return status, body
