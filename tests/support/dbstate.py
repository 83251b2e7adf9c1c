"""What a database holds, to compare before and after a request that must change nothing
(issue 22's access tests): each table's row count and a hash of its rows, the whole database's
or one workspace's; and how many rows of a table match a condition (the store's tests of
what is pruned)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from memfs.store import Store

#: Every table of what a request may change (recall's derived tables aside).
TABLES = ("stores", "memories", "versions", "changes", "sessions", "session_resources",
          "events", "session_tokens", "agents", "environments", "dreams", "reverts",
          "api_keys")

State = dict[str, tuple[int, str]]


def _plain(value: Any) -> Any:
    return bytes(value).hex() if isinstance(value, bytes | memoryview) else str(value)


def snapshot(store: Store, workspace: str | None = None) -> State:
    """Each table's row count and a hash of its rows (of ``workspace``'s objects only, if
    given: its stores, sessions, dreams, agents, environments and keys, and what belongs to
    them), ``api_keys.last_used_at`` aside (a use is noted, at most once a minute)."""
    rows = {t: [dict(r) for r in store.all(f"SELECT * FROM {t}")] for t in TABLES}
    for r in rows["api_keys"]:
        r.pop("last_used_at")
    if workspace is not None:
        stores = {r["id"] for r in rows["stores"] if r["workspace_id"] == workspace}
        sessions = {r["id"] for r in rows["sessions"] if r["workspace_id"] == workspace}

        def ours(table: str, r: dict[str, Any]) -> bool:
            if "workspace_id" in r:
                return bool(r["workspace_id"] == workspace)
            if table == "events":
                return r["session_id"] in sessions or r["store_id"] in stores
            if "store_id" in r:
                return r["store_id"] in stores
            if "session_id" in r:
                return r["session_id"] in sessions
            return True

        rows = {t: [r for r in rs if ours(t, r)] for t, rs in rows.items()}
    return {t: (len(rs), hashlib.sha256("\n".join(sorted(
        json.dumps(r, sort_keys=True, default=_plain) for r in rs)).encode()).hexdigest())
        for t, rs in rows.items()}


def changed(before: State, after: State) -> str:
    """The tables that differ, with their row counts ("" if none)."""
    return ", ".join(f"{t} ({before[t][0]} -> {after[t][0]} rows)"
                     for t in before if before[t] != after[t])


def count_rows(store: Store, table: str, where: str = "1", params: tuple[Any, ...] = ()) -> int:
    """The rows of ``table`` that match ``where`` (a test's look at what the store keeps)."""
    row = store.one(f"SELECT count(*) FROM {table} WHERE {where}", params)
    assert row is not None
    return int(row[0])
