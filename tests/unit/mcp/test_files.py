"""What each file tool of memfs.mcp does beyond its one call of the matrix: read ranges and
reads of the past (a version, a time, a session), edits (insert, append, ambiguous and
missing text), moves of directories, deletes (a directory wants recursive), histories of a
deleted path and of a session, search over every store."""

from __future__ import annotations

from datetime import UTC, datetime

from memfs.mcp import Reach
from memfs.mcp.files import MOST_ITEMS
from memfs.mcp.recall import SEARCH_STORES
from memfs.rules import format_time
from memfs.store import Store
from tests.support.mcp import call, connected, failed, ok, text_of


async def test_reads_are_bounded_and_numbered(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    store.memories.create(ms, "/long.md", "".join(f"line {i}\n" for i in range(1, 2501)),
                          actor=None)
    async with connected(Reach(store)) as client:
        r = await call(client, "memory_read", store=ms, path="/long.md")
        data = ok(r)
        assert (data["start_line"], data["end_line"], data["total_lines"]) == (1, 2000, 2500)
        assert "read on with start_line=2001" in text_of(r)
        assert text_of(r).split("\n")[1] == "     1\tline 1"
        data = ok(await call(client, "memory_read", store=ms, path="/long.md",
                             start_line=2499))
        assert data["content"] == "line 2499\nline 2500"
        assert "at most 2500" in failed(await call(client, "memory_read", store=ms,
                                                   path="/long.md", start_line=3000),
                                        "invalid_request_error")
        assert "memory_list" in failed(await call(client, "memory_read", store=ms, path="/"),
                                       "invalid_request_error")


async def test_a_read_of_the_past(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    m = store.memories.create(ms, "/a.md", "first\n", actor=None)
    between = format_time(datetime.now(UTC))
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}]).id
    async with connected(Reach(store, session_id=session)) as client:
        ok(await call(client, "memory_write", store=ms, path="/a.md", content="by session\n",
                      overwrite=True))
    store.memories.update(ms, m.id, content="latest\n", actor=None)
    async with connected(Reach(store)) as client:
        async def at(value: str) -> str:
            return str(ok(await call(client, "memory_read", store=ms, path="/a.md",
                                     at=value))["content"])
        assert await at(m.memory_version_id) == "first"
        assert await at(between) == "first"
        assert await at(session) == "by session"
        assert "wrote no version" in failed(
            await call(client, "memory_read", store=ms, path="/b.md", at=session),
            "not_found_error")
        history = ok(await call(client, "memory_history", store=ms, session=session))
        assert [(v["operation"], v["path"]) for v in history["versions"]] == [
            ("modified", "/a.md")]


async def test_a_read_at_a_version_is_of_that_memory_only(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    a = store.memories.create(ms, "/a.md", "mine\n", actor=None)
    other = store.memories.create(ms, "/other.md", "not yours\n", actor=None)
    async with connected(Reach(store)) as client:
        message = failed(await call(client, "memory_read", store=ms, path="/a.md",
                                    at=other.memory_version_id), "not_found_error")
        assert "/other.md" in message and "not yours" not in message
        ok(await call(client, "memory_move", store=ms, path="/a.md", new_path="/moved.md"))
        # a version from before a rename is still of the memory now at the new path
        r = ok(await call(client, "memory_read", store=ms, path="/moved.md",
                          at=a.memory_version_id))
        assert r["content"] == "mine"
        # and of its old path, as it was then
        r = ok(await call(client, "memory_read", store=ms, path="/a.md",
                          at=a.memory_version_id))
        assert r["content"] == "mine"


async def test_edits(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    store.memories.create(ms, "/a.md", "one\ntwo\none\n", actor=None)

    async def content() -> str:
        return store.memories.get_by_path(ms, "/a.md").content or ""

    async with connected(Reach(store)) as client:
        message = failed(await call(client, "memory_edit", store=ms, path="/a.md",
                                    mode="str_replace", old_str="one", new_str="1"),
                         "invalid_request_error")
        assert "appears 2 times" in message and "lines 1, 3" in message
        assert "does not appear" in failed(await call(
            client, "memory_edit", store=ms, path="/a.md", mode="str_replace",
            old_str="three"), "invalid_request_error")
        assert "needs text" in failed(await call(
            client, "memory_edit", store=ms, path="/a.md", mode="append"),
            "invalid_request_error")
        ok(await call(client, "memory_edit", store=ms, path="/a.md", mode="insert",
                      insert_line=0, text="zero"))
        assert await content() == "zero\none\ntwo\none\n"
        ok(await call(client, "memory_edit", store=ms, path="/a.md", mode="insert",
                      insert_line=4, text="end\n"))
        assert "0 to 5" in failed(await call(
            client, "memory_edit", store=ms, path="/a.md", mode="insert", insert_line=9,
            text="x"), "invalid_request_error")
        ok(await call(client, "memory_edit", store=ms, path="/a.md", mode="append",
                      text="appended"))
        assert await content() == "zero\none\ntwo\none\nend\nappended"
        assert "no memory at /b.md" in failed(await call(
            client, "memory_edit", store=ms, path="/b.md", mode="append", text="x"),
            "not_found_error")


async def test_moves_and_deletes(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    for p in ("/d/x.md", "/d/sub/y.md", "/taken.md", "/z.md"):
        store.memories.create(ms, p, p, actor=None)
    async with connected(Reach(store)) as client:
        data = ok(await call(client, "memory_move", store=ms, path="/d", new_path="/e"))
        assert sorted(data["moved"]) == ["/e/sub/y.md", "/e/x.md"]
        assert "overwrite" in failed(await call(
            client, "memory_move", store=ms, path="/z.md", new_path="/taken.md"),
            "memory_path_conflict_error")
        ok(await call(client, "memory_move", store=ms, path="/z.md", new_path="/taken.md",
                      overwrite=True))
        assert "into itself" in failed(await call(
            client, "memory_move", store=ms, path="/e", new_path="/e/f"),
            "invalid_request_error")
        assert "recursive=true" in failed(await call(
            client, "memory_delete", store=ms, path="/e"), "invalid_request_error")
        assert "no memory at /nope.md" in failed(await call(
            client, "memory_delete", store=ms, path="/nope.md"), "not_found_error")
        ok(await call(client, "memory_delete", store=ms, path="/taken.md"))
        gone = ok(await call(client, "memory_history", store=ms, path="/taken.md"))
        assert gone["versions"][0]["operation"] == "deleted"
    assert sorted(m.path for m in store.memories.tree(ms)) == ["/e/sub/y.md", "/e/x.md"]
    assert store.memories.get_by_path(ms, "/e/x.md").content == "/d/x.md"


async def test_a_directory_is_deleted_in_one_transaction_with_its_event_pair(
        store: Store) -> None:
    ms = store.stores.create(name="notes").id
    for p in ("/d/x.md", "/d/sub/y.md", "/keep.md"):
        store.memories.create(ms, p, p, actor=None)
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}]).id
    async with connected(Reach(store, session_id=session)) as client:
        data = ok(await call(client, "memory_delete", store=ms, path="/d", recursive=True))
        assert data["deleted"] == ["/d/sub/y.md", "/d/x.md"]
        assert "no memory at /d" in failed(await call(
            client, "memory_delete", store=ms, path="/d", recursive=True), "not_found_error")
    assert [m.path for m in store.memories.tree(ms)] == ["/keep.md"]
    deletes = [c for c in store.feed.since(ms, 0) if c.op == "delete"]
    assert len(deletes) == 2
    evs = [e for e in store.events.list(session, limit=100).data]
    assert [(e.type, e.body.get("name"), e.body.get("is_error")) for e in evs] == [
        ("agent.tool_use", "memory_delete", None), ("agent.tool_result", None, False),
        ("agent.tool_use", "memory_delete", None), ("agent.tool_result", None, True)]
    # revert brings the directory back
    store.undo.revert(session, actor=None)
    assert sorted(m.path for m in store.memories.tree(ms)) == [
        "/d/sub/y.md", "/d/x.md", "/keep.md"]


async def test_the_recorded_result_is_what_the_model_saw(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    for p in ("/a.md", "/d/x.md", "/d/y.md", "/e/z.md"):
        store.memories.create(ms, p, p, actor=None)
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}]).id
    saw: list[str] = []
    async with connected(Reach(store, session_id=session)) as client:
        for name, args in [
                ("memory_write", {"store": ms, "path": "/a.md", "content": "new",
                                  "overwrite": True}),
                ("memory_write", {"store": ms, "path": "/b.md", "content": "b"}),
                ("memory_move", {"store": ms, "path": "/b.md", "new_path": "/c.md"}),
                ("memory_move", {"store": ms, "path": "/e", "new_path": "/f"}),
                ("memory_delete", {"store": ms, "path": "/c.md"}),
                ("memory_delete", {"store": ms, "path": "/d", "recursive": True})]:
            result = await client.call_tool(name, args)
            ok(result)
            saw.append(text_of(result))
    recorded = [e.body["content"][0]["text"] for e in store.events.list(session, limit=100).data
                if e.type == "agent.tool_result"]
    assert recorded == saw
    assert "sha256" in saw[0]


async def test_a_directory_operation_names_a_bounded_list_of_paths(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    n = MOST_ITEMS + 20
    for i in range(n):
        store.memories.create(ms, f"/d/{i:03}.md", "x", actor=None)
    async with connected(Reach(store)) as client:
        moved = ok(await call(client, "memory_move", store=ms, path="/d", new_path="/e"))
        assert moved["count"] == n and len(moved["moved"]) == MOST_ITEMS
        gone = ok(await call(client, "memory_delete", store=ms, path="/e", recursive=True))
        assert gone["count"] == n and len(gone["deleted"]) == MOST_ITEMS
        assert gone["deleted"][0] == "/e/000.md"


async def test_a_search_of_every_store_is_bounded_and_says_so(store: Store) -> None:
    ids = [store.stores.create(name=f"s{i:02}").id for i in range(SEARCH_STORES + 2)]
    for sid in ids:
        store.memories.create(sid, "/deploy.md", "the deploy runbook\n", actor=None)
    async with connected(Reach(store)) as client:
        found = ok(await call(client, "memory_search", query="deploy runbook",
                              channels=["words"], limit=100))
    assert len({h["store"] for h in found["hits"]}) == SEARCH_STORES
    assert any(f"{SEARCH_STORES} of" in n and "store" in n for n in found["notes"])


async def test_search_over_every_store_and_the_session(store: Store) -> None:
    a = store.stores.create(name="a").id
    b = store.stores.create(name="b").id
    store.memories.create(a, "/pager.md", "who gets paged at night: Ana", actor=None)
    store.memories.create(b, "/rota.md", "the night pager rota", actor=None)
    async with connected(Reach(store)) as client:
        hits = ok(await call(client, "memory_search", query="pager",
                             channels=["words"]))["hits"]
        assert sorted((h["store"], h["path"]) for h in hits) == [(a, "/pager.md"),
                                                                 (b, "/rota.md")]
        nothing = await call(client, "memory_search", query="zebra", channels=["words"])
        assert ok(nothing)["hits"] == [] and "not remembered" in text_of(nothing)
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": b}]).id
    async with connected(Reach(store, session_id=session)) as client:
        hits = ok(await call(client, "memory_search", query="pager",
                             channels=["words"]))["hits"]
        assert [(h["store"], h["path"]) for h in hits] == [(b, "/rota.md")]
