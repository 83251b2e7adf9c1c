"""What an agent sees of memfs's MCP server: the snapshot of tools/list (a change to the
agent's surface shows in review), the --tools filter, the write tools hidden when nothing
may be written; and what it gets for hostile or unlucky calls: the store's limit (the
2,000th memory), a precondition that fails, schema-invalid and huge arguments, unknown
tools. Each is a result with its error type, and the server keeps serving."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from memfs.mcp import Reach
from memfs.rules import Limits, encode_content
from memfs.store import Store
from tests.support.mcp import call, connected, failed, ok

SNAPSHOT = Path(__file__).with_name("tools_list.json")
#: Set to "write" to rewrite the snapshot (then review its diff).
REWRITE = os.environ.get("MEMFS_MCP_SNAPSHOT") == "write"


async def test_tools_list_is_the_snapshot(store: Store) -> None:
    store.stores.create(name="notes")
    async with connected(Reach(store)) as client:
        tools = (await client.list_tools()).tools
    listed = [t.model_dump(mode="json", exclude_none=True) for t in tools]
    text = json.dumps(listed, indent=2, ensure_ascii=False) + "\n"
    if REWRITE:
        SNAPSHOT.write_text(text)
    assert text == SNAPSHOT.read_text(), (
        "tools/list changed: if that is meant, rerun with MEMFS_MCP_SNAPSHOT=write and "
        f"review the diff of {SNAPSHOT.name}")


async def test_annotations_say_what_each_tool_does(store: Store) -> None:
    store.stores.create(name="notes")
    async with connected(Reach(store)) as client:
        tools = {t.name: t.annotations for t in (await client.list_tools()).tools}
    reads = {"memory_list_stores", "memory_list", "memory_read", "memory_search",
             "memory_history", "memory_describe", "memory_pinned"}
    for name, a in tools.items():
        assert a is not None and a.openWorldHint is False
        assert a.readOnlyHint is (name in reads), name
        if name in reads:
            assert a.destructiveHint is None
    assert tools["memory_add"].destructiveHint is False  # it only creates
    assert all(tools[n].destructiveHint for n in ("memory_write", "memory_edit",
                                                   "memory_move", "memory_delete",
                                                   "memory_restore"))


async def test_the_tools_filter_keeps_a_subset(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    keep = frozenset({"memory_read", "memory_search"})
    async with connected(Reach(store, tools=keep)) as client:
        assert {t.name for t in (await client.list_tools()).tools} == keep
        message = failed(await call(client, "memory_write", store=ms, path="/a.md",
                                    content="x"), "invalid_request_error")
        assert "unknown tool 'memory_write'" in message
    assert store.memories.tree(ms) == []


async def test_write_tools_are_not_listed_when_nothing_may_be_written(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    for reach in (Reach(store, read_only=True), Reach(store, access={ms: "read_only"}),
                  Reach(store, stores=())):
        async with connected(reach) as client:
            names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"memory_list_stores", "memory_list", "memory_read", "memory_search",
                         "memory_history", "memory_describe", "memory_pinned"}, reach
    async with connected(Reach(store, access={ms: "read_write"})) as client:
        assert "memory_write" in {t.name for t in (await client.list_tools()).tools}


async def test_the_2000th_memory_is_written_and_the_next_refused(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    assert store.limits.max_memories == Limits().max_memories == 2000
    text, data = encode_content("x")
    with store.memories.core.write() as c:
        for i in range(1999):
            store.memories.create_in(c, ms, f"/m/{i:04}.md", text, data, None)
    async with connected(Reach(store)) as client:
        ok(await call(client, "memory_write", store=ms, path="/2000th.md", content="x"))
        message = failed(await call(client, "memory_write", store=ms, path="/2001st.md",
                                    content="x"), "invalid_request_error")
        assert "2000" in message and "memory_delete" in message
        assert "2000" in failed(await call(client, "memory_add", store=ms, type="knowledge",
                                           text="one more"), "invalid_request_error")
        ok(await call(client, "memory_delete", store=ms, path="/2000th.md"))
        ok(await call(client, "memory_write", store=ms, path="/2001st.md", content="x"))
    assert store.memories.count(ms) == 2000


async def test_a_precondition_mismatch_names_the_sha256_of_now(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    m = store.memories.create(ms, "/a.md", "one\ntwo\n", actor=None)
    async with connected(Reach(store)) as client:
        r = ok(await call(client, "memory_read", store=ms, path="/a.md"))
        assert r["sha256"] == m.content_sha256
        later = store.memories.update(ms, m.id, content="one\n2\n", actor=None)
        for name, args in (("memory_write", {"content": "mine", "overwrite": True}),
                           ("memory_edit", {"mode": "append", "text": "three"}),
                           ("memory_edit", {"mode": "str_replace", "old_str": "one",
                                            "new_str": "1"})):
            message = failed(await call(client, name, store=ms, path="/a.md",
                                        sha256=r["sha256"], **args),
                             "memory_precondition_failed_error")
            assert later.content_sha256 in message and "memory_read" in message
    assert store.memories.get_by_path(ms, "/a.md").content == "one\n2\n"


async def test_hostile_arguments_get_clear_errors_and_the_server_serves_on(
        store: Store) -> None:
    ms = store.stores.create(name="notes").id
    huge = "x" * 5_000_000
    async with connected(Reach(store)) as client:
        cases = [
            ("memory_read", {"store": ms}, "path is required"),
            ("memory_read", {"store": ms, "path": 7}, "path must be of type string"),
            ("memory_list", {"store": ms, "depth": 0}, "depth must be at least 1"),
            ("memory_list", {"store": ms, "limit": 1000}, "limit must be at most 100"),
            ("memory_edit", {"store": ms, "path": "/a.md", "mode": "rot13"},
             "mode must be one of str_replace, insert, append"),
            ("memory_list", {"store": ms, huge: 1}, "unknown argument"),
            ("memory_read", {"store": ms, "path": huge}, "path: at most 1024 characters"),
            ("memory_search", {"query": huge}, "query: at most 1000 characters"),
            ("memory_write", {"store": ms, "path": "/a.md", "content": huge},
             "102400"),
            ("memory_write", {"store": ms, "path": "/a\x00.md", "content": "x"}, "path"),
            ("memory_read", {"store": ms, "path": "/../etc/passwd"}, ".."),
            ("memory_list", {"store": ms, "page": "garbage"}, "cursor"),
            ("memory_read", {"store": ms, "path": "/a.md", "at": "yesterday"}, "yesterday"),
            ("memory_history", {"store": ms}, "path"),
            (huge, {}, "unknown tool"),
        ]
        for name, args, words in cases:
            message = failed(await call(client, name, **args), "invalid_request_error")
            assert words in message, (name, message[:200])
            assert len(message) < 1000
        assert "not_found_error" in (await call(client, "memory_read", store="nope",
                                                path="/a.md")).content[0].text  # type: ignore[union-attr]
        ok(await call(client, "memory_write", store=ms, path="/a.md", content="still here"))
    assert [m.path for m in store.memories.tree(ms)] == ["/a.md"]


async def test_a_huge_argument_is_cut_in_the_calls_event(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}]).id
    async with connected(Reach(store, session_id=session)) as client:
        failed(await call(client, "memory_write", store=ms, path="/h.md",
                          content="x" * 5_000_000), "invalid_request_error")
    use, result = [e.body for e in store.events.list(session, limit=10).data]
    assert len(use["input"]["content"]) < 5000 and use["input"]["path"] == "/h.md"
    assert result["is_error"] is True


def test_the_server_imports_without_the_anthropic_package() -> None:
    code = ("import sys; sys.modules['anthropic'] = None\n"
            "import memfs.mcp, memfs.mcp.server\n"
            "assert 'anthropic' not in {m.split('.')[0] for m in sys.modules if sys.modules[m]}")
    subprocess.run([sys.executable, "-c", code], check=True)
