"""Every MCP tool × {a session with the store attached read_write, a session with it attached
read_only, the local user without a session}: what each does to the store, who it is
attributed to, and the event pair each call of a session is."""

from __future__ import annotations

import pytest

from memfs.mcp import Reach
from memfs.mcp.tools import NAMES, WRITE_TOOLS
from memfs.models import Actor
from memfs.rules import local_user_actor
from memfs.store import Store
from tests.support.mcp import call, calls, check_success, connected, failed, ok, seed


def test_every_tool_is_called_here() -> None:
    assert sorted(calls("m", "v")) == sorted(NAMES)
    assert len(NAMES) == 13


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("who", ["session", "read_only", "local_user"])
async def test_every_tool_for_each_kind_of_caller(store: Store, name: str, who: str) -> None:
    ms, first = seed(store)
    session = None
    if who != "local_user":
        session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms,
                                          "access": "read_only" if who == "read_only"
                                          else "read_write"}]).id
    before = store.versions.list(ms, limit=100).data
    async with connected(Reach(store, session_id=session)) as client:
        result = await call(client, name, **calls(ms, first)[name])
    if who == "read_only" and name in WRITE_TOOLS:
        assert "read-only" in failed(result, "permission_error")
        assert store.versions.list(ms, limit=100).data == before
    else:
        check_success(store, ms, name, ok(result))
        new = store.versions.list(ms, limit=100).data[:-len(before)]
        assert bool(new) == (name in WRITE_TOOLS), new
        by = Actor.session(session) if session else local_user_actor()
        assert all(v.created_by == by for v in new)
    if session is None:
        return
    evs = [e.body for e in store.events.list(session, limit=100).data]
    assert [e["type"] for e in evs] == ["agent.tool_use", "agent.tool_result"]
    use, res = evs
    assert use["name"] == name and res["tool_use_id"] == use["id"]
    assert res["is_error"] is bool(result.isError)
    assert res["content"][0]["text"] == result.content[0].text  # type: ignore[union-attr]
    assert {k: v for k, v in use["input"].items()
            if k not in ("operation", "file_path")} == calls(ms, first)[name]
