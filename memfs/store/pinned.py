"""Pinned memories (SPEC §9): which memories of a store are pinned, and what a session
records of them when it is created (:meth:`memfs.store.sessions.Sessions.create`, in its
transaction): per attachment, the version of each pinned memory that went into its prompt, and
those listed as not shown, with why. The rules (the prefix, the order, the budgets) are
:mod:`memfs.rules`'; the text is :mod:`memfs.launcher.pinned`'s, rendered from this record by
``memfs session prompt`` as by the launcher, so that it shows exactly what the model saw.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..backends import Connection
from ..models import SessionPinned
from ..rules import PinnedCandidate, is_pinned, pinned_order, pinned_prefix


def candidates_in(c: Connection, store_id: str, now: str
                  ) -> tuple[list[PinnedCandidate], int]:
    """The store's pinned memories at ``now``, most important first, then newest (at most
    :data:`~memfs.rules.MOST_PINNED`; sizes in characters), and how many more it has."""
    row = c.execute("SELECT metadata FROM stores WHERE id = ?", (store_id,)).fetchone()
    prefix = pinned_prefix(json.loads(row["metadata"])) if row is not None else None
    cols = ("id, path, version_id, length(content) AS size, importance, expires_at, pinned, "
            "updated_at")
    # The flagged ones by their partial index (memories_pinned), those under the prefix by
    # a range of the store's paths (memories_store_path): never a scan of the store.
    sql = f"SELECT {cols} FROM memories WHERE store_id = ? AND pinned = 1"
    args: list[Any] = [store_id]
    if prefix is not None:
        sql += (f" UNION SELECT {cols} FROM memories WHERE store_id = ? AND path >= ? "
                "AND path < ?")
        args += [store_id, prefix, prefix[:-1] + chr(ord("/") + 1)]
    rows = c.execute(sql, args)
    found = [PinnedCandidate(r["path"], r["id"], r["version_id"], int(r["size"]),
                             r["importance"], r["updated_at"])
             for r in rows if is_pinned(r["path"], bool(r["pinned"]), r["expires_at"],
                                        prefix, now)]
    ordered = pinned_order(found)
    return ordered, len(found) - len(ordered)


def record_in(c: Connection, session_id: str, resource_id: str,
              entries: Sequence[SessionPinned]) -> None:
    """Record what an attachment's pinned memories put in the session's prompt."""
    c.executemany(
        "INSERT INTO session_pinned (session_id, resource_id, position, memory_id, "
        "version_id, path, size, shown, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(session_id, resource_id, i, e.memory_id, e.memory_version_id, e.path, e.size,
          int(e.shown), e.reason) for i, e in enumerate(entries)])


def recorded_in(c: Connection, session_ids: Sequence[str]) -> dict[str, list[SessionPinned]]:
    """What the sessions ``session_ids`` recorded, by resource id, in the prompt's order."""
    if not session_ids:
        return {}
    marks = ",".join("?" * len(session_ids))
    out: dict[str, list[SessionPinned]] = {}
    for r in c.execute(
            f"SELECT * FROM session_pinned WHERE session_id IN ({marks}) "
            "ORDER BY session_id, resource_id, position", list(session_ids)):
        out.setdefault(r["resource_id"], []).append(SessionPinned(
            path=r["path"], memory_id=r["memory_id"], memory_version_id=r["version_id"],
            size=int(r["size"]), shown=bool(r["shown"]), reason=r["reason"]))
    return out
