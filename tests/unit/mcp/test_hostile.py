"""memfs.mcp against hostile or broken input: strings no store can hold (a lone surrogate,
which Streamable HTTP's JSON parser lets through), a store call that fails with no memfs
error, a reach that cannot be made, arguments nested past any size an event should keep.
Each is an error result of the usual shape (never the SDK's bare text), and every call of a
session keeps its event pair, small."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Generator
from typing import Any

import pytest
from mcp.shared.exceptions import McpError

from memfs import errors
from memfs.mcp import Reach
from memfs.store import Store
from memfs.toolkit import Call, drive, drive_async
from tests.support.mcp import call, connected, failed, ok


def _uses(store: Store, session_id: str) -> list[dict[str, Any]]:
    return [e.body for e in store.events.list(session_id, limit=100).data
            if e.body["type"] == "agent.tool_use"]


async def test_a_lone_surrogate_in_an_argument_is_an_invalid_request_naming_it(
        store: Store) -> None:
    ms = store.stores.create(name="A").id
    store.memories.create(ms, "/a.md", "hello\n", actor=None)
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}])
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("memory_read", {"store": "A\ud800", "path": "/a.md"}, "store"),
        ("memory_read", {"store": ms, "path": "/a.md", "at": "memver_\ud800"}, "at"),
        ("memory_read", {"store": ms, "path": "/a.md", "at": "sesn_\ud800"}, "at"),
        ("memory_search", {"query": "x", "store": ms, "type": "t\ud800"}, "type"),
        ("memory_search", {"query": "x", "type": "t\ud800"}, "type"),
        ("memory_write", {"store": ms, "path": "/b.md", "content": "bad \ud800"}, "content"),
        ("memory_list_stores", {"page": "\ud800"}, "page"),
    ]
    async with connected(Reach(store, session_id=session.id)) as client:
        for name, args, field in cases:
            message = failed(await client.call_tool(name, args), "invalid_request_error")
            assert message.startswith(f"{field}: ") and "surrogate" in message, message
        ok(await call(client, "memory_read", store=ms, path="/a.md"))
    uses = _uses(store, session.id)
    # every call is recorded, the surrogate kept as its escape
    assert [u["name"] for u in uses] == [c[0] for c in cases] + ["memory_read"]
    assert uses[0]["input"]["store"] == "A\\ud800"
    assert store.memories.get_by_path(ms, "/a.md").content == "hello\n"


def _asks(call_: Call) -> Generator[Call, Any, BaseException | None]:
    try:
        yield call_
    except errors.MemfsError as e:
        return e
    return None


async def test_a_store_call_failing_with_no_memfs_error_is_thrown_in_as_an_api_error(
        store: Store, error_logs: list[logging.LogRecord]) -> None:
    ms = store.stores.create(name="A").id
    # a real store refusal that is no MemfsError: sqlite cannot encode a lone surrogate
    bad = Call("versions.get", (ms, "memver_\ud800"))
    for got in (drive(store, _asks(bad)), await drive_async(store, _asks(bad))):
        assert type(got) is errors.MemfsError
        _, err = errors.to_wire(got)
        assert err["type"] == "api_error" and "surrogate" not in err["message"]
    assert [r.exc_info is not None for r in error_logs] == [True, True]  # each logged once


async def test_a_reach_that_cannot_be_made_is_an_error_result(store: Store) -> None:
    def revoked() -> Reach:
        raise errors.Unauthorized("the key was revoked")

    async with connected(revoked) as client:  # type: ignore[arg-type]
        message = failed(await call(client, "memory_read", store="A", path="/a.md"),
                         "authentication_error")
        assert "revoked" in message


async def test_nested_arguments_are_cut_in_the_call_event(store: Store) -> None:
    ms = store.stores.create(name="A").id
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}])
    deep: Any = "bottom"
    for _ in range(200):
        deep = {"d": deep}
    wide = {f"k{i}": "y" * 3000 for i in range(1000)}
    async with connected(Reach(store, session_id=session.id)) as client:
        for store_arg in ({"k": "x" * 5_000_000}, deep, wide, [wide] * 50):
            failed(await client.call_tool("memory_read", {"store": store_arg, "path": "/a.md"}),
                   "invalid_request_error")
    uses = _uses(store, session.id)
    assert len(uses) == 4
    for u in uses:
        assert len(json.dumps(u)) < 20_000
        assert "more" in json.dumps(u["input"]["store"]) or "cut" in json.dumps(u["input"])


async def test_arguments_out_of_their_range_are_refused(store: Store) -> None:
    ms = store.stores.create(name="A").id
    store.memories.create(ms, "/five.md", "1\n2\n3\n4\n5\n", actor=None)
    async with connected(Reach(store)) as client:
        message = failed(await call(client, "memory_read", store=ms, path="/five.md",
                                    start_line=4, end_line=2), "invalid_request_error")
        assert "end_line" in message and "start_line" in message
        assert ok(await call(client, "memory_read", store=ms, path="/five.md", start_line=2,
                             end_line=2))["content"] == "2"
        for text in ("", "   \n"):
            assert "text" in failed(await call(client, "memory_add", store=ms,
                                               type="decision", text=text),
                                    "invalid_request_error")
        for importance in (-5, 1.5, "whatever: x"):
            assert "importance" in failed(await call(
                client, "memory_add", store=ms, type="decision", text="x",
                importance=importance), "invalid_request_error")
        for importance in ("high", 0.3):
            ok(await call(client, "memory_add", store=ms, type="decision", text="kept",
                          importance=importance))
    assert sorted(m.path for m in store.memories.tree(ms)) == [
        "/decisions/kept-2.md", "/decisions/kept.md", "/five.md"]


async def test_a_bad_cursor_says_once_how_to_go_on(store: Store) -> None:
    ms = store.stores.create(name="A").id
    async with connected(Reach(store)) as client:
        message = failed(await call(client, "memory_list", store=ms, page="garbage!!"),
                         "invalid_request_error")
        assert message.count("start again") == 1, message
        for cursor in ("garbage!!", _b64({"a": 1, "b": 2}), _b64([0, None]), _b64(["x"])):
            with pytest.raises(McpError) as raised:
                await client.list_resources(cursor)
            assert raised.value.error.message == (
                "invalid_request_error: invalid cursor: start again without it"), cursor


def _b64(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()
