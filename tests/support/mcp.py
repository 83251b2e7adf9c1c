"""The official MCP client on a memfs MCP server: a connected client on a reach (in process,
through the SDK's in-memory transport), and the checks of a result (a success; a failure's
shape: one line, its error type, the same object as structured content); and a call of every
tool on a seeded store, with what each success returns and leaves in the store, for the
matrices of callers (in process, over stdio, over HTTP)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp.types as types
from mcp import ClientSession
from mcp.shared.memory import create_connected_server_and_client_session

from memfs.mcp import Reach, create_server


@asynccontextmanager
async def connected(reach: Reach, **options: Any) -> AsyncIterator[ClientSession]:
    async with create_connected_server_and_client_session(create_server(reach),
                                                          **options) as client:
        yield client


async def call(client: ClientSession, name: str, **args: Any) -> types.CallToolResult:
    return await client.call_tool(name, args)


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def ok(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.isError, text_of(result)
    assert result.structuredContent is not None
    return result.structuredContent


def failed(result: types.CallToolResult, type_: str) -> str:
    """The message of a failed call, after checking its shape: one line, the error type, the
    same object as structured content."""
    assert result.isError
    assert len(result.content) == 1
    text = text_of(result)
    assert "\n" not in text
    assert result.structuredContent is not None
    err = result.structuredContent["error"]
    assert result.structuredContent["type"] == "error"
    assert err["type"] == type_, text
    assert text == f"{type_}: {err['message']}"
    return str(err["message"])


def seed(store: Any) -> tuple[str, str]:
    """A store ``notes`` with /a/b.md, /a/c.md and /top.md; and the first version of /a/b.md."""
    ms = store.stores.create(name="notes", description="the team's notes").id
    b = store.memories.create(ms, "/a/b.md", "one\ntwo\nthree\n", actor=None)
    store.memories.update(ms, b.id, content="one\ntwo\nthree\nfour\n", actor=None)
    store.memories.create(ms, "/a/c.md", "gone soon\n", actor=None)
    store.memories.create(ms, "/top.md", "the deploy runbook\n", actor=None)
    return ms, b.memory_version_id


def calls(ms: str, first: str) -> dict[str, dict[str, Any]]:
    """A call of each tool on the seeded store ``ms`` (``first``: the first version of
    /a/b.md), by the tool's name."""
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
        "memory_pinned": {"store": ms, "budget": 100},
    }


def check_success(store: Any, ms: str, name: str, data: dict[str, Any]) -> None:
    """What a successful call returned and left in the store (a Store or a Client)."""
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
    elif name == "memory_pinned":
        assert data == {"store": ms, "pinned": []}  # nothing pinned in the seeded store
    else:
        raise AssertionError(f"no check for {name}")
