"""memfs.mcp in process: the official client (``mcp.ClientSession``) against
:func:`memfs.mcp.create_server` on a local Store, through the SDK's in-memory transport.
Every tool as a session (read_write and read_only attachments) and as the local user; errors
as results; the tools/list snapshot."""

from __future__ import annotations

from memfs.mcp import Reach
from memfs.models import Actor
from memfs.rules import local_user_actor
from memfs.store import Store
from tests.support.mcp import call, connected, failed, ok


async def test_the_local_user_lists_reads_and_writes(store: Store) -> None:
    ms = store.stores.create(name="notes", description="what I keep").id
    async with connected(Reach(store)) as client:
        stores = ok(await call(client, "memory_list_stores"))["stores"]
        assert [(s["id"], s["name"], s["access"], s["memories"]) for s in stores] == [
            (ms, "notes", "read_write", 0)]
        w = ok(await call(client, "memory_write", store="notes", path="/a/b.md",
                          content="one\ntwo\n"))
        assert w["path"] == "/a/b.md"
        r = ok(await call(client, "memory_read", store=ms, path="/a/b.md"))
        assert r["content"] == "one\ntwo" and r["sha256"] == w["sha256"]
        assert r["total_lines"] == 2
        listing = ok(await call(client, "memory_list", store=ms))
        assert listing["items"] == [{"type": "directory", "path": "/a/"}]
        deep = ok(await call(client, "memory_list", store=ms, depth=2, preview=True))
        assert [(i["path"], i["preview"]) for i in deep["items"]] == [("/a/b.md", "one")]
    v = store.versions.list(ms).data[0]
    assert v.created_by == local_user_actor()


async def test_a_write_never_overwrites_unless_told_with_the_sha256(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    first = store.memories.create(ms, "/a.md", "first\n", actor=None)
    async with connected(Reach(store)) as client:
        message = failed(await call(client, "memory_write", store=ms, path="/a.md",
                                    content="second"), "memory_path_conflict_error")
        assert first.content_sha256 in message and "overwrite" in message
        assert "memory_edit" in message
        message = failed(await call(client, "memory_write", store=ms, path="/a.md",
                                    content="second", overwrite=True, sha256="0" * 64),
                         "memory_precondition_failed_error")
        assert first.content_sha256 in message and "memory_read" in message
        ok(await call(client, "memory_write", store=ms, path="/a.md", content="second",
                      overwrite=True, sha256=first.content_sha256))
        ok(await call(client, "memory_write", store=ms, path="/a.md", content="third",
                      overwrite=True))
    assert store.memories.get_by_path(ms, "/a.md").content == "third"


async def test_a_session_writes_as_itself_and_every_call_is_an_event_pair(
        store: Store) -> None:
    ms = store.stores.create(name="notes").id
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}])
    async with connected(Reach(store, session_id=session.id)) as client:
        ok(await call(client, "memory_write", store="notes", path="/s.md", content="hi"))
        failed(await call(client, "memory_read", store=ms, path="/nope.md"),
               "not_found_error")
    assert store.versions.list(ms).data[0].created_by == Actor.session(session.id)
    evs = [e.body for e in store.events.list(session.id, limit=100).data]
    uses = [e for e in evs if e["type"] == "agent.tool_use"]
    results = [e for e in evs if e["type"] == "agent.tool_result"]
    assert [u["name"] for u in uses] == ["memory_write", "memory_read"]
    assert [r["is_error"] for r in results] == [False, True]
    assert results[0]["memory_id"] == store.memories.get_by_path(ms, "/s.md").id


async def test_a_read_only_attachment_reads_and_is_refused_writes(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    store.memories.create(ms, "/a.md", "x", actor=None)
    session = store.sessions.create(
        [{"type": "memory_store", "memory_store_id": ms, "access": "read_only"}])
    async with connected(Reach(store, session_id=session.id)) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "memory_write" not in names and "memory_read" in names
        ok(await call(client, "memory_read", store=ms, path="/a.md"))
        message = failed(await call(client, "memory_write", store=ms, path="/b.md",
                                    content="y"), "permission_error")
        assert "read-only" in message
    assert [m.path for m in store.memories.tree(ms)] == ["/a.md"]


async def test_a_store_outside_the_reach_is_as_unknown_as_a_missing_one(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    other = store.stores.create(name="secret").id
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}])
    async with connected(Reach(store, session_id=session.id)) as client:
        outside = failed(await call(client, "memory_read", store=other, path="/a.md"),
                         "not_found_error")
        unknown = failed(await call(client, "memory_read", store="memstore_nope",
                                    path="/a.md"), "not_found_error")
        assert outside.replace(other, "X") == unknown.replace("memstore_nope", "X")
        by_name = failed(await call(client, "memory_read", store="secret", path="/a.md"),
                         "not_found_error")
        assert "secret" in by_name


async def test_the_stores_named_are_all_a_reach_sees(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    other = store.stores.create(name="secret").id
    async with connected(Reach(store, stores=(ms,))) as client:
        stores = ok(await call(client, "memory_list_stores"))["stores"]
        assert [s["id"] for s in stores] == [ms]
        failed(await call(client, "memory_list", store="secret"), "not_found_error")
        failed(await call(client, "memory_search", query="x", store=other),
               "not_found_error")
        ok(await call(client, "memory_search", query="x"))


async def test_bad_arguments_and_unknown_tools_are_results(store: Store) -> None:
    ms = store.stores.create(name="notes").id
    async with connected(Reach(store)) as client:
        assert "path" in failed(await call(client, "memory_read", store=ms),
                                "invalid_request_error")
        assert "depth" in failed(await call(client, "memory_list", store=ms, depth="x"),
                                 "invalid_request_error")
        assert "bogus" in failed(await call(client, "memory_list", store=ms, bogus=1),
                                 "invalid_request_error")
        message = failed(await call(client, "memory_nope"), "invalid_request_error")
        assert "memory_nope" in message and "memory_read" in message
        huge = "x" * 5_000_000
        message = failed(await call(client, "memory_write", store=ms, path="/h.md",
                                    content=huge), "invalid_request_error")
        assert len(message) < 1000
        assert "sha256" in failed(await call(client, "memory_write", store=ms, path="/h.md",
                                             content="x", sha256="nothex"),
                                  "invalid_request_error")
        ok(await call(client, "memory_list_stores"))  # still serving
