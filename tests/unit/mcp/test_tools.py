"""Every MCP tool × {a session with the store attached read_write, a session with it attached
read_only, the local user without a session}: what each does to the store, who it is
attributed to, and the event pair each call of a session is."""

from __future__ import annotations

from typing import Any

import pytest

from memfs.mcp import Reach
from memfs.mcp.tools import NAMES, WRITE_TOOLS
from memfs.models import Actor
from memfs.rules import local_user_actor
from memfs.store import Store
from tests.support.mcp import call, connected, failed, ok


def seed(store: Store) -> tuple[str, str]:
    """A store ``notes`` with /a/b.md, /a/c.md and /top.md; and the first version of /a/b.md."""
    ms = store.stores.create(name="notes", description="the team's notes").id
    b = store.memories.create(ms, "/a/b.md", "one\ntwo\nthree\n", actor=None)
    store.memories.update(ms, b.id, content="one\ntwo\nthree\nfour\n", actor=None)
    store.memories.create(ms, "/a/c.md", "gone soon\n", actor=None)
    store.memories.create(ms, "/top.md", "the deploy runbook\n", actor=None)
    return ms, b.memory_version_id


#: A call of each tool, and what a success leaves in the store (None: it only reads).
def calls(ms: str, first: str) -> dict[str, dict[str, Any]]:
    return {
        "memory_list_stores": {},
        "memory_list": {"store": ms, "path": "/a"},
        "memory_read": {"store": "notes", "path": "/a/b.md", "start_line": 2, "end_line": 3},
        "memory_write": {"store": ms, "path": "/new.md", "content": "fresh\n"},
        "memory_edit": {"store": ms, "path": "/a/b.md", "mode": "str_replace",
                        "old_str": "two", "new_str": "2"},
        "memory_move": {"store": ms, "path": "/top.md", "new_path": "/ops/runbook.md"},
        "memory_delete": {"store": ms, "path": "/a/c.md"},
        "memory_search": {"query": "deploy runbook", "store": ms, "channels": ["words"]},
        "memory_history": {"store": ms, "path": "/a/b.md"},
        "memory_restore": {"store": ms, "version_id": first},
        "memory_describe": {"store": ms},
        "memory_add": {"store": ms, "type": "decision", "text": "Deploy on Tuesdays",
                       "tags": ["ops"]},
    }


def check_success(store: Store, ms: str, name: str, data: dict[str, Any]) -> None:
    """What a successful call returned and left in the store."""
    paths = {m.path for m in store.memories.tree(ms)}
    if name == "memory_list_stores":
        assert [(s["name"], s["memories"]) for s in data["stores"]] == [("notes", 3)]
    elif name == "memory_list":
        assert [i["path"] for i in data["items"]] == ["/a/b.md", "/a/c.md"]
    elif name == "memory_read":
        assert data["content"] == "two\nthree" and data["total_lines"] == 4
    elif name == "memory_write":
        assert store.memories.get_by_path(ms, "/new.md").content == "fresh\n"
    elif name == "memory_edit":
        assert store.memories.get_by_path(ms, "/a/b.md").content == "one\n2\nthree\nfour\n"
    elif name == "memory_move":
        assert "/top.md" not in paths and "/ops/runbook.md" in paths
    elif name == "memory_delete":
        assert "/a/c.md" not in paths
    elif name == "memory_search":
        assert [h["path"] for h in data["hits"]][:1] == ["/top.md"]
    elif name == "memory_history":
        assert [v["operation"] for v in data["versions"]] == ["modified", "created"]
    elif name == "memory_restore":
        assert store.memories.get_by_path(ms, "/a/b.md").content == "one\ntwo\nthree\n"
    elif name == "memory_describe":
        assert data["description"]["memories"] == 3
    elif name == "memory_add":
        assert data["path"] == "/decisions/deploy-on-tuesdays.md"
        content = store.memories.get_by_path(ms, data["path"]).content
        assert content == "---\ntype: decision\ntags: [ops]\n---\nDeploy on Tuesdays\n"
    else:
        raise AssertionError(f"no check for {name}")


def test_every_tool_is_called_here() -> None:
    assert sorted(calls("m", "v")) == sorted(NAMES)
    assert len(NAMES) == 12


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
