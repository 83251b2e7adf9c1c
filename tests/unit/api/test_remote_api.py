"""The memfs extension for remote mounts, in-process: acting as a session, tool events from a
mount, the filesystem's one-transaction calls, the change feed and its shared poller."""

from __future__ import annotations

import json
import os

import pytest
import trio
import trio.testing
from starlette.testclient import TestClient

from memfs import api, errors
from memfs.api import ChangeHub, create_app
from memfs.client import SESSION_HEADER, Client
from memfs.models import Actor
from memfs.store import Limits, Store
from tests.support.asgi import through

KEY = "remote-test-key"



@pytest.fixture
def store(backend):
    """Every test of this file runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()

@pytest.fixture
def http(store):
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": KEY}) as c:
        yield c


def _session(store: Store, store_id: str, access: str = "read_write") -> str:
    s = store.sessions.create([{"type": "memory_store", "memory_store_id": store_id,
                               "access": access}])
    return s.id


def _tool_pair(use_id: str = "sevt_use1", result_id: str = "sevt_res1") -> list[dict]:
    at = "2026-01-01T00:00:00.000000Z"
    return [
        {"type": "agent.tool_use", "id": use_id, "name": "bash", "processed_at": at,
         "input": {"operation": "write", "file_path": "/mnt/memory/n/a.md", "pid": 1}},
        {"type": "agent.tool_result", "id": result_id, "tool_use_id": use_id,
         "processed_at": at, "is_error": False, "content": [{"type": "text", "text": "ok"}]},
    ]


# -- acting as a session ------------------------------------------------------------------------


def test_writes_acting_as_a_session_are_session_actor(http, store):
    sid = store.stores.create("n").id
    sess = _session(store, sid)
    h = {SESSION_HEADER: sess}
    r = http.post(f"/v1/memory_stores/{sid}/memfs/write", headers=h,
                  json={"path": "/a.md", "content": "one"})
    assert r.status_code == 200, r.text
    mid = r.json()["id"]
    # the SDK's own endpoints honour the header too
    r = http.post(f"/v1/memory_stores/{sid}/memories/{mid}", headers=h, json={"content": "two"})
    assert r.status_code == 200, r.text
    r = http.post(f"/v1/memory_stores/{sid}/memories", json={"path": "/b.md", "content": "b"})
    assert r.status_code == 200
    versions = store.versions.list(sid, limit=10).data
    by_path = {(v.path, v.operation): v.created_by for v in versions}
    assert by_path[("/a.md", "created")] == Actor.session(sess)
    assert by_path[("/a.md", "modified")] == Actor.session(sess)
    assert by_path[("/b.md", "created")].type == "api_actor"


@pytest.mark.parametrize("why", ["read_only", "terminated", "not_attached"])
def test_a_session_that_may_not_write_gets_read_only(http, store, why):
    sid = store.stores.create("n").id
    other = store.stores.create("other").id
    sess = _session(store, other if why == "not_attached" else sid,
                    "read_only" if why == "read_only" else "read_write")
    if why == "terminated":
        store.sessions.set_status(sess, "terminated")
    m = store.memories.create(sid, "/keep.md", "k", actor=None)
    store.memories.create(sid, "/d/x.md", "x", actor=None)
    h = {SESSION_HEADER: sess}
    calls = [
        ("post", f"/v1/memory_stores/{sid}/memfs/write", {"path": "/a.md", "content": "x"}),
        ("post", f"/v1/memory_stores/{sid}/memfs/check_can_create", None),
        ("post", f"/v1/memory_stores/{sid}/memfs/delete", {"path": "/keep.md"}),
        ("post", f"/v1/memory_stores/{sid}/memfs/rename",
         {"old_path": "/keep.md", "new_path": "/k2.md"}),
        ("post", f"/v1/memory_stores/{sid}/memfs/rename_prefix",
         {"old_prefix": "/a/", "new_prefix": "/b/"}),
        ("post", f"/v1/memory_stores/{sid}/memfs/delete_prefix", {"prefix": "/d/"}),
        ("post", f"/v1/memory_stores/{sid}/memories", {"path": "/c.md", "content": "x"}),
        ("delete", f"/v1/memory_stores/{sid}/memories/{m.id}", None),
    ]
    for method, url, body in calls:
        r = http.request(method.upper(), url, headers=h, json=body)
        assert r.status_code == 403, (url, r.text)
        err = r.json()["error"]
        assert err["type"] == "permission_error" and err["details"]["error_code"] == "read_only"
    assert [x.path for x in store.memories.tree(sid)] == ["/d/x.md", "/keep.md"]
    assert len(store.versions.list(sid).data) == 2


def test_unknown_session_is_404(http, store):
    sid = store.stores.create("n").id
    r = http.post(f"/v1/memory_stores/{sid}/memfs/write", headers={SESSION_HEADER: "sesn_x"},
                  json={"path": "/a.md", "content": "x"})
    assert r.status_code == 404


def test_tool_events_only_from_a_mount_acting_as_that_session(http, store):
    sid = store.stores.create("n").id
    sess = _session(store, sid, "read_only")  # events are not writes: read_only may log
    other = _session(store, sid)
    url = f"/v1/sessions/{sess}/events"
    for headers in ({}, {SESSION_HEADER: other}):
        r = http.post(url, headers=headers, json={"events": _tool_pair()})
        assert r.status_code == 400, r.text
    r = http.post(url, json={"events": [{"type": "user.interrupt"}], "memory_store_id": sid})
    assert r.status_code == 400  # the extension field goes with tool events only
    body = {"events": _tool_pair(), "memory_store_id": sid}
    r = http.post(url, headers={SESSION_HEADER: sess}, json=body)
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert [e["id"] for e in data] == ["sevt_use1", "sevt_res1"]  # the mount's ids are kept
    assert data[1]["tool_use_id"] == "sevt_use1"
    again = http.post(url, headers={SESSION_HEADER: sess}, json=body)
    assert again.status_code == 200 and again.json()["data"] == []  # a retry records nothing
    listed = http.get(url, params={"types[]": ["agent.tool_use", "agent.tool_result"]}).json()
    assert [e["id"] for e in listed["data"]] == ["sevt_use1", "sevt_res1"]
    # a store not attached to the session is refused
    elsewhere = store.stores.create("elsewhere").id
    r = http.post(url, headers={SESSION_HEADER: sess},
                  json={"events": _tool_pair("sevt_u2", "sevt_r2"), "memory_store_id": elsewhere})
    assert r.status_code == 403
    # without a session (a mount with no --session): recorded under the store
    r = http.post(f"/v1/memory_stores/{sid}/memfs/events",
                  json={"events": _tool_pair("sevt_u3", "sevt_r3")})
    assert r.status_code == 200 and len(r.json()["data"]) == 2
    r = http.post(f"/v1/memory_stores/{sid}/memfs/events",
                  json={"events": [{"type": "user.message", "id": "sevt_z"}]})
    assert r.status_code == 400


# -- the filesystem's calls ---------------------------------------------------------------------


def test_limits_tree_stats_and_one_transaction_renames(http, store):
    lim = http.get("/v1/memfs/limits").json()
    assert lim["max_memories"] == store.limits.max_memories
    assert lim["max_content_bytes"] == 102_400
    sid = store.stores.create("n").id
    for p in ("/d/1.md", "/d/2.md", "/x.md"):
        store.memories.create(sid, p, p, actor=None)
    tree = http.get(f"/v1/memory_stores/{sid}/memfs/tree").json()
    assert [m["path"] for m in tree["data"]] == ["/d/1.md", "/d/2.md", "/x.md"]
    assert all(m["content"] is None for m in tree["data"])
    assert tree["last_seq"] == store.feed.last(sid)
    assert http.get(f"/v1/memory_stores/{sid}/memfs/stats").json() == {
        "memory_count": 3, "last_seq": store.feed.last(sid)}
    r = http.post(f"/v1/memory_stores/{sid}/memfs/rename_prefix",
                  json={"old_prefix": "/d/", "new_prefix": "/e/"})
    assert [m["path"] for m in r.json()["data"]] == ["/e/1.md", "/e/2.md"]
    moved = [v for v in store.versions.list(sid, operation="modified").data]
    assert len({v.created_at for v in moved}) == 1  # one transaction
    victim = store.memories.get_by_path(sid, "/x.md")
    r = http.post(f"/v1/memory_stores/{sid}/memfs/rename",
                  json={"old_path": "/e/1.md", "new_path": "/x.md", "replace": False})
    assert r.status_code == 409 and r.json()["error"]["type"] == "memory_path_conflict_error"
    source = store.memories.get_by_path(sid, "/e/1.md")
    r = http.post(f"/v1/memory_stores/{sid}/memfs/rename",
                  json={"old_path": "/e/1.md", "new_path": "/x.md"})
    # /x.md keeps its memory and takes the content; the renamed memory is deleted
    assert r.status_code == 200, r.text
    assert (r.json()["id"], r.json()["path"], r.json()["content"]) == (
        victim.id, "/x.md", "/d/1.md")
    deleted = store.versions.list(sid, memory_id=source.id, operation="deleted").data
    assert len(deleted) == 1 and deleted[0].created_at == store.memories.get_by_path(
        sid, "/x.md").updated_at  # the source went in the rename's transaction
    r = http.post(f"/v1/memory_stores/{sid}/memfs/write",
                  json={"path": "/big.md", "content": "x" * 102_401})
    assert r.json()["error"]["details"]["error_code"] == "content_too_large"


def test_rename_prefix_never_merges_directories(http, store):
    sid = store.stores.create("n").id
    for p in ("/a/one.md", "/b/two.md", "/f.md"):
        store.memories.create(sid, p, p, actor=None)
    url = f"/v1/memory_stores/{sid}/memfs/rename_prefix"
    r = http.post(url, json={"old_prefix": "/a/", "new_prefix": "/b/"})
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert err["type"] == "memory_path_conflict_error"
    assert err["details"]["error_code"] == "directory_not_empty"
    assert err["conflicting_path"] == "/b/two.md"
    r = http.post(url, json={"old_prefix": "/a/", "new_prefix": "/f.md/"})
    assert r.status_code == 409
    assert r.json()["error"]["details"]["error_code"] == "not_a_directory"
    assert [m.path for m in store.memories.tree(sid)] == ["/a/one.md", "/b/two.md", "/f.md"]
    # the client raises the exact classes again (a remote mount maps them to errno)
    c = Client("http://memfs", KEY, transport=through(http))
    with pytest.raises(errors.DirectoryNotEmpty) as e:
        c.memories.rename_prefix(sid, "/a/", "/b/")
    assert e.value.conflicting_path == "/b/two.md"
    with pytest.raises(errors.NotADirectory):
        c.memories.rename_prefix(sid, "/a/", "/f.md/")
    with pytest.raises(errors.PathConflict) as pc:
        c.memories.rename_path(sid, "/a/one.md", "/f.md", replace=False)
    assert type(pc.value) is errors.PathConflict


def test_delete_prefix_through_the_client(http, store):
    """A directory deleted in one server transaction, attributed to the session the client
    acts as, with its tool events; the client raises the store's errors again."""
    sid = store.stores.create("n").id
    sess = _session(store, sid)
    for p in ("/d/1.md", "/d/s/2.md", "/d.md", "/e/3.md"):
        store.memories.create(sid, p, p, actor=None)
    seq = store.feed.last(sid)
    c = Client("http://memfs", KEY, transport=through(http), session_id=sess)
    events = _tool_pair()
    gone = c.memories.delete_prefix(sid, "/d/", events=events)
    assert [(m.path, m.content) for m in gone] == [("/d/1.md", None), ("/d/s/2.md", None)]
    assert [m.seq for m in gone] == [ch.seq for ch in store.feed.since(sid, seq)]
    assert [m.path for m in store.memories.tree(sid)] == ["/d.md", "/e/3.md"]
    deleted = store.versions.list(sid, operation="deleted").data
    assert {v.created_by for v in deleted} == {Actor.session(sess)}
    assert len({v.created_at for v in deleted}) == 1  # one transaction
    assert [e.id for e in store.events.list(sess).data] == [e["id"] for e in events]
    with pytest.raises(errors.NotFound, match="no memory below /d/"):
        c.memories.delete_prefix(sid, "/d/")
    with pytest.raises(errors.InvalidPath):
        c.memories.delete_prefix(sid, "/e")
    r = http.post(f"/v1/memory_stores/{sid}/memfs/delete_prefix", json={"prefix": "/"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    r = http.post(f"/v1/memory_stores/{sid}/memfs/delete_prefix", json={})
    assert r.status_code == 400 and "prefix" in r.json()["error"]["message"]
    assert [m.path for m in store.memories.tree(sid)] == ["/d.md", "/e/3.md"]


async def test_delete_prefix_through_the_async_client(store):
    import httpx

    from memfs.client import AsyncClient

    sid = store.stores.create("n").id
    for p in ("/d/1.md", "/d/2.md", "/e.md"):
        store.memories.create(sid, p, p, actor=None)
    transport = httpx.ASGITransport(app=create_app(store, [KEY]))
    async with AsyncClient("http://memfs", KEY, transport=transport) as c:
        with trio.fail_after(10):
            gone = await c.memories.delete_prefix(sid, "/d/")
    assert [m.path for m in gone] == ["/d/1.md", "/d/2.md"]
    assert [m.path for m in store.memories.tree(sid)] == ["/e.md"]


def test_resolve_store_is_the_stores_rule(http, store):
    url = "/v1/memfs/resolve_store"
    old = store.stores.create("notes")
    new = store.stores.create("notes")
    assert http.get(url, params={"ref": old.id}).json()["id"] == old.id
    r = http.get(url, params={"ref": "notes"})
    assert r.status_code == 400 and "use an id" in r.json()["error"]["message"]
    store.stores.archive(new.id)
    assert http.get(url, params={"ref": "notes"}).json()["id"] == old.id  # live wins
    store.stores.archive(old.id)
    assert http.get(url, params={"ref": "notes"}).json()["id"] == new.id  # then the newest
    assert http.get(url, params={"ref": "nothing"}).status_code == 404
    assert http.get(url).status_code == 400


def test_the_limit_reaches_the_client(store, tmp_path):
    small = Store(store.path, limits=Limits(max_memories=2))
    try:
        with TestClient(create_app(small, [KEY])) as tc:
            sid = small.stores.create("n").id
            c = Client("http://memfs", KEY, transport=through(tc))
            c.memories.write_path(sid, "/1", "")
            c.memories.check_can_create(sid)
            c.memories.write_path(sid, "/2", "")
            with pytest.raises(errors.LimitExceeded):
                c.memories.check_can_create(sid)
            with pytest.raises(errors.LimitExceeded):
                c.memories.write_path(sid, "/3", "")
            c.memories.write_path(sid, "/2", "still editable")
            assert c.get_limits()["max_memories"] == 2
            assert c.memories.count(sid) == 2 and c.feed.last(sid) == small.feed.last(sid)
            assert [ch.op for ch in c.feed.since(sid, 0)] == ["put", "put", "put"]
    finally:
        small.close()


# -- the change feed ----------------------------------------------------------------------------


def test_changes_list_carries_memories_and_resets(http, store):
    sid = store.stores.create("n").id
    r = http.get(f"/v1/memory_stores/{sid}/changes")
    assert r.json() == {"data": [], "last_seq": 0, "reset": False}
    a = store.memories.create(sid, "/a.md", "a", actor=None)
    store.memories.rename_path(sid, "/a.md", "/b.md", actor=None)
    b = store.memories.create(sid, "/c.md", "c", actor=None)
    store.memories.delete(sid, b.id, actor=None)
    feed = http.get(f"/v1/memory_stores/{sid}/changes", params={"after": 0}).json()
    ops = [(c["op"], c["path"], c["old_path"]) for c in feed["data"]]
    assert ops == [("put", "/a.md", None), ("put", "/b.md", "/a.md"), ("put", "/c.md", None),
                   ("delete", "/c.md", None)]
    assert feed["data"][0]["memory"]["path"] == "/b.md"  # the memory as it is now
    assert feed["data"][0]["memory"]["id"] == a.id and feed["data"][0]["memory"]["content"] is None
    assert feed["data"][2]["memory"] is None  # deleted since
    assert "memory" not in feed["data"][3]
    assert feed["last_seq"] == feed["data"][-1]["seq"] and not feed["reset"]
    two = http.get(f"/v1/memory_stores/{sid}/changes",
                   params={"after": feed["data"][1]["seq"], "limit": 1}).json()
    assert [c["seq"] for c in two["data"]] == [feed["data"][2]["seq"]]
    future = http.get(f"/v1/memory_stores/{sid}/changes", params={"after": 10**9}).json()
    assert future == {"data": [], "last_seq": feed["last_seq"], "reset": True}
    assert http.get("/v1/memory_stores/memstore_nope/changes").status_code == 404
    assert http.get("/v1/memory_stores/memstore_nope/changes/stream").status_code == 404
    assert http.get(f"/v1/memory_stores/{sid}/changes", params={"after": -1}).status_code == 400
    # a deleted store still says so on its feed
    store.stores.delete(sid)
    gone = http.get(f"/v1/memory_stores/{sid}/changes", params={"after": 0}).json()
    assert [c["op"] for c in gone["data"]] == ["store"]


def _pruned_feed(store: Store) -> tuple[str, list[int]]:
    """A store whose feed was pruned down to its newest 2 changes; returns (id, old seqs)."""
    from datetime import UTC, datetime, timedelta

    store.feed_keep = 2
    sid = store.stores.create("n").id
    for i in range(5):
        store.memories.write_path(sid, "/a.md", str(i), actor=None)
    seqs = [c.seq for c in store.feed.since(sid, 0)]
    store.versions.prune(now=datetime.now(UTC) + timedelta(days=2))
    return sid, seqs


def test_changes_reset_a_follower_whose_changes_were_pruned(http, store):
    sid, seqs = _pruned_feed(store)
    url = f"/v1/memory_stores/{sid}/changes"
    assert http.get(url, params={"after": 0}).json() == {
        "data": [], "last_seq": seqs[-1], "reset": True}
    assert http.get(url, params={"after": seqs[1]}).json()["reset"] is True
    kept = http.get(url, params={"after": seqs[2]}).json()
    assert [c["seq"] for c in kept["data"]] == seqs[3:] and kept["reset"] is False
    c = Client("http://memfs", KEY, transport=through(http))
    with pytest.raises(errors.FeedGap):
        c.feed.since(sid, seqs[0])
    with pytest.raises(errors.FeedGap):  # a position the server never had: reload too
        c.feed.since(sid, 10**9)
    assert [ch.seq for ch in c.feed.since(sid, seqs[2])] == seqs[3:]


async def test_hub_resets_a_subscriber_whose_changes_were_pruned(store):
    sid, seqs = _pruned_feed(store)
    hub = ChangeHub(store, interval=0.01, ping=60)
    stream = hub.stream(sid, seqs[0], seqs[-1])
    frames = _frames(await stream.__anext__()) + _frames(await stream.__anext__())
    assert [n for n, _ in frames] == ["ping", "memfs.reset"]
    assert frames[1][1]["last_seq"] == seqs[-1]
    # then it goes on from there
    await trio.to_thread.run_sync(lambda: store.memories.write_path(sid, "/b.md", "b", actor=None))
    with trio.fail_after(5):
        (name, data), = _frames(await stream.__anext__())
    assert name == "memfs.change" and data["path"] == "/b.md"
    await stream.aclose()


def test_openapi_marks_the_extensions(http):
    doc = http.get("/openapi.json").json()
    ext = {(m, p) for p, ops in doc["paths"].items() for m, e in ops.items()
           if e.get("x-memfs-extension")}
    assert ("get", "/v1/memory_stores/{memory_store_id}/changes/stream") in ext
    assert ("post", "/v1/memory_stores/{memory_store_id}/memfs/rename_prefix") in ext
    assert ("post", "/v1/memory_stores/{memory_store_id}/memfs/delete_prefix") in ext
    assert ("get", "/v1/memfs/limits") in ext
    # Extensions stay out of the SDK's own paths: under the sessions tree only /memfs/ ones.
    assert ("post", "/v1/sessions/{session_id}/memfs/status") in ext
    assert all("/memfs/" in p for _, p in ext if p.startswith("/v1/sessions"))
    stream = doc["paths"]["/v1/memory_stores/{memory_store_id}/changes/stream"]["get"]
    assert "text/event-stream" in stream["responses"]["200"]["content"]


def _frames(chunk: bytes) -> list[tuple[str, dict]]:
    out = []
    for f in chunk.decode().split("\n\n"):
        if f.strip():
            name = f.split("\n", 1)[0].removeprefix("event: ")
            out.append((name, json.loads(f.split("data: ", 1)[1])))
    return out


async def test_hub_one_poller_for_many_subscribers(store):
    """Two subscribers of one store share one poller: both see every change, in order, and
    the database is polled about once per interval, not once per subscriber."""
    hub = ChangeHub(store, interval=0.02, ping=60)
    sid = store.stores.create("n").id
    last = store.feed.last(sid)
    streams = [hub.stream(sid, last, last) for _ in range(2)]
    seen: list[list[tuple[str, dict]]] = [[], []]

    async def follow(i: int) -> None:
        async for chunk in streams[i]:
            seen[i].extend(_frames(chunk))
            if sum(1 for n, _ in seen[i] if n == "memfs.change") == 5:
                return

    started = trio.current_time()
    async with trio.open_nursery() as nursery:
        for i in range(2):
            nursery.start_soon(follow, i)
        await trio.testing.wait_all_tasks_blocked()
        assert hub.statistics()["subscribers"] == 2
        for i in range(5):
            await trio.to_thread.run_sync(
                lambda i=i: store.memories.create(sid, f"/m{i}.md", "x", actor=None))
            await trio.sleep(0.01)  # the point: changes a moment apart, each one its own
    elapsed = trio.current_time() - started
    for s in seen:
        assert s[0][0] == "ping"
        changes = [d for n, d in s if n == "memfs.change"]
        assert [c["path"] for c in changes] == [f"/m{i}.md" for i in range(5)]
        assert all(c["memory"]["path"] == c["path"] for c in changes)
    # one poll per interval (plus the odd extra), where two independent pollers would double it
    assert hub.polls <= elapsed / 0.02 + 3, (hub.polls, elapsed)
    for s in streams:
        await s.aclose()
    assert hub.statistics() == {"feeds": 0, "polls": hub.polls, "subscribers": 0}


async def test_hub_resets_an_unknown_position_and_replays_from_an_old_one(store):
    hub = ChangeHub(store, interval=0.01, ping=60)
    sid = store.stores.create("n").id
    store.memories.create(sid, "/a.md", "a", actor=None)
    last = store.feed.last(sid)
    stream = hub.stream(sid, last + 100, last)
    names = [n for n, _ in _frames(await stream.__anext__())]
    names += [n for n, _ in _frames(await stream.__anext__())]
    assert names == ["ping", "memfs.reset"]
    await stream.aclose()
    old = hub.stream(sid, 0, last)  # an old position: replayed from the database
    await old.__anext__()
    (name, data), = _frames(await old.__anext__())
    assert name == "memfs.change" and data["path"] == "/a.md"
    await old.aclose()
    assert api.CHANGES_PING_SECONDS < 20  # below the client's read timeout


# -- the filesystem side: what a remote mount does with the feed --------------------------------


def _ops(store: Store):
    from memfs.fuse.ops import Operations

    sid = store.stores.create("fs").id
    ops = Operations(store, sid, actor=Actor.user("u"))
    ops.load()
    return ops, sid


class _Ctx:
    pid = 1
    uid = gid = 0
    umask = 0o022


async def test_changes_with_known_memories_need_no_store_reads(store):
    ops, sid = _ops(store)
    m = store.memories.create(sid, "/a/b.md", "x", actor=None)
    changes = store.feed.since(sid, ops.seq)
    reads = []
    original = store.memories.get
    store.memories.get = lambda *a, **k: reads.append(a) or original(*a, **k)  # type: ignore
    try:
        ops.feed.apply_changes(changes, {m.id: store.memories.tree(sid)[0]})
    finally:
        store.memories.get = original  # type: ignore
    assert reads == []
    a = await ops.lookup(1, b"a", _Ctx())
    assert (await ops.lookup(a.st_ino, b"b.md", _Ctx())).st_size == 1


async def test_reload_replaces_the_tree_and_keeps_inodes(store):
    ops, sid = _ops(store)
    keep = store.memories.create(sid, "/keep.md", "k", actor=None)
    gone = store.memories.create(sid, "/d/gone.md", "g", actor=None)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    ino = (await ops.lookup(1, b"keep.md", _Ctx())).st_ino
    store.memories.delete(sid, gone.id, actor=None)
    store.memories.update(sid, keep.id, content="kept, changed", actor=None)
    store.memories.create(sid, "/new.md", "n", actor=None)
    ops.stale_entries.clear()
    await ops.feed.reload(store.memories.tree(sid), 12345, archived=False)
    assert ops.seq == 12345
    assert sorted(ops.root.children or {}) == ["keep.md", "new.md"]
    again = await ops.lookup(1, b"keep.md", _Ctx())
    assert again.st_ino == ino and again.st_size == len("kept, changed")
    assert ino in ops.stale_inodes
    assert any(name == "d" for _, name, _ in ops.stale_entries)  # the kernel forgets /d


async def test_a_file_moved_elsewhere_after_the_kernel_forgot_it_still_opens(store):
    """Regression: a rename made elsewhere of a file the kernel had forgotten (lookup count
    0) left a node in the tree that open() did not know (ENOENT)."""
    ops, sid = _ops(store)
    m = store.memories.create(sid, "/lat/1.md", "v1", actor=None)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    lat = await ops.lookup(1, b"lat", _Ctx())
    entry = await ops.lookup(lat.st_ino, b"1.md", _Ctx())
    await ops.forget([(entry.st_ino, 1)])
    store.memories.update(sid, m.id, path="/moved/1.md", actor=None)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    moved = await ops.lookup(1, b"moved", _Ctx())
    again = await ops.lookup(moved.st_ino, b"1.md", _Ctx())
    assert again.st_ino == entry.st_ino
    info = await ops.open(again.st_ino, os.O_RDONLY, _Ctx())
    assert await ops.read(info.fh, 0, 100) == b"v1"
    await ops.release(info.fh)


def test_path_writes_answer_with_their_feed_position(http, store):
    """``memfs_seq`` of a write, a rename and a delete by path: the last change each made,
    which a remote mount orders the feed's late states by (issue 38 N1)."""
    sid = store.stores.create("seqs").id
    base = f"/v1/memory_stores/{sid}/memfs"
    for url, body in ((f"{base}/write", {"path": "/a.md", "content": "x"}),
                      (f"{base}/rename", {"old_path": "/a.md", "new_path": "/b.md"}),
                      (f"{base}/write", {"path": "/c.md", "content": "x"}),
                      # over a file of the same content: no put, only the delete of /c.md
                      (f"{base}/rename", {"old_path": "/c.md", "new_path": "/b.md"}),
                      (f"{base}/delete", {"path": "/b.md"})):
        r = http.post(url, json=body)
        assert r.status_code == 200, r.text
        assert r.json()["memfs_seq"] == store.feed.last(sid), url
