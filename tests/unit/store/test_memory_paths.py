"""``store.memories``' path operations (memories.py), the ones the filesystem calls: write, delete
and rename by path, and directory renames."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memfs import (
    Actor,
    InvalidContent,
    InvalidPath,
    InvalidRequest,
    NotFound,
    PathConflict,
    StoreArchived,
)
from memfs.models import ToolPair, tool_event_dicts
from memfs.store import Store
from tests.support.backend import Backend
from tests.support.storekit import API, USER, res


@pytest.fixture
def store(backend: Backend) -> Store:
    """Every test of this module runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


class TestPathOps:
    def test_write_path_create_update_noop(self, store: Store, sid: str) -> None:
        m = store.memories.write_path(sid, "/w.md", "one", actor=API)
        assert store.versions.list(sid).data[0].operation == "created"
        u = store.memories.write_path(sid, b"/w.md", b"two", actor=API)
        assert (u.id, u.content) == (m.id, "two")
        same = store.memories.write_path(sid, "/w.md", "two", actor=API)
        assert same.memory_version_id == u.memory_version_id
        assert [v.operation for v in store.versions.list(sid).data] == ["modified", "created"]
        with pytest.raises(InvalidContent):
            store.memories.write_path(sid, "/w.md", b"\xc3", actor=API)
        with pytest.raises(PathConflict):
            store.memories.write_path(sid, "/w.md/x", "x", actor=API)
        assert store.memories.get(sid, m.id).content == "two"

    def test_delete_path(self, store: Store, sid: str) -> None:
        m = store.memories.write_path(sid, "/d/x", "x", actor=API)
        gone = store.memories.delete_path(sid, "/d/x", actor=API)
        assert gone.id == m.id
        with pytest.raises(NotFound):
            store.memories.delete_path(sid, "/d/x", actor=API)
        assert store.versions.list(sid, memory_id=m.id).data[0].operation == "deleted"

    def test_rename_path(self, store: Store, sid: str) -> None:
        a = store.memories.write_path(sid, "/a", "a", actor=API)
        b = store.memories.write_path(sid, "/b", "b", actor=API)
        with pytest.raises(PathConflict):
            store.memories.rename_path(sid, "/a", "/b", actor=API, replace=False)
        r = store.memories.rename_path(sid, "/a", "/b",
                                       actor=API)  # POSIX rename replaces the content
        assert (r.id, r.path, r.content) == (b.id, "/b", "a")  # /b keeps its memory
        with pytest.raises(NotFound):
            store.memories.get(sid, a.id)
        m = store.memories.rename_path(sid, "/b", "/c",
                                       actor=API)  # onto a free path: the memory moves
        assert (m.id, m.path, m.content) == (b.id, "/c", "a")
        with pytest.raises(NotFound):
            store.memories.rename_path(sid, "/missing", "/x", actor=API)

    def test_rename_prefix(self, store: Store, sid: str) -> None:
        ms = {p: store.memories.write_path(sid, p, p, actor=API) for p in ("/d/a", "/d/s/b",
                                                                           "/d/s/t/c")}
        outside = store.memories.write_path(sid, "/d-other/x", "x", actor=API)
        moved = store.memories.rename_prefix(sid, "/d/", "/n/e/", actor=USER)
        assert sorted(m.path for m in moved) == ["/n/e/a", "/n/e/s/b", "/n/e/s/t/c"]
        for old, m in ms.items():
            now = store.memories.get(sid, m.id)
            assert now.path == "/n/e" + old[2:] and now.content == old
            vs = store.versions.list(sid, memory_id=m.id).data
            assert [v.operation for v in vs] == ["modified", "created"]
            assert vs[0].created_by == USER
        assert store.memories.get(sid, outside.id).path == "/d-other/x"
        assert store.memories.list(sid, path_prefix="/d/").data == []

    def test_rename_prefix_conflict_rolls_back(self, store: Store, sid: str) -> None:
        for p in ("/d/a", "/d/b", "/d/c"):
            store.memories.write_path(sid, p, "x", actor=API)
        store.memories.write_path(sid, "/n/b", "blocker", actor=API)
        before = store.memories.tree(sid)
        nversions = len(store.versions.list(sid, limit=100).data)
        with pytest.raises(PathConflict) as e:
            store.memories.rename_prefix(sid, "/d/", "/n/", actor=API)
        assert e.value.conflicting_path == "/n/b"
        assert store.memories.tree(sid) == before
        assert len(store.versions.list(sid, limit=100).data) == nversions
        # a file where the new directory would be
        store.memories.write_path(sid, "/f", "file", actor=API)
        with pytest.raises(PathConflict):
            store.memories.rename_prefix(sid, "/d/", "/f/", actor=API)
        with pytest.raises(InvalidRequest):
            store.memories.rename_prefix(sid, "/d/", "/d/sub/", actor=API)
        assert store.memories.tree(sid)[0].path == "/d/a"

    def test_rename_prefix_to_parent(self, store: Store, sid: str) -> None:
        # /a holds b itself: not empty, as rename(2) says (no merge into the parent)
        from memfs.errors import DirectoryNotEmpty

        store.memories.write_path(sid, "/a/b/x", "x", actor=API)
        store.memories.write_path(sid, "/a/b/c/y", "y", actor=API)
        with pytest.raises(DirectoryNotEmpty):
            store.memories.rename_prefix(sid, "/a/b/", "/a/", actor=API)
        moved = store.memories.rename_prefix(sid, "/a/b/", "/b/", actor=API)
        assert sorted(m.path for m in moved) == ["/b/c/y", "/b/x"]
        assert [m.path for m in store.memories.tree(sid)] == ["/b/c/y", "/b/x"]

    def test_rename_prefix_sees_a_blocker_behind_moving_memories(
        self, store: Store, sid: str
    ) -> None:
        # /a/b/a moves to /a, a directory that /a/c (outside the move) keeps: a conflict, even
        # though two memories of the move itself sort before /a/c below /a.
        for p in ("/a/b/a", "/a/b/x", "/a/c"):
            store.memories.write_path(sid, p, p, actor=API)
        before = store.memories.tree(sid)
        with pytest.raises(PathConflict) as e:
            store.memories.rename_prefix(sid, "/a/b/", "/", actor=API)
        assert e.value.conflicting_path == "/a/c"
        assert store.memories.tree(sid) == before

    def test_rename_prefix_result(self, store: Store, sid: str) -> None:
        m = store.memories.write_path(sid, "/d/a", "x", actor=API)
        (moved,) = store.memories.rename_prefix(sid, "/d/", "/e/", actor=USER)
        assert moved == store.memories.get(sid, m.id, view="basic")
        assert (moved.path, moved.created_at) == ("/e/a", m.created_at)
        assert moved.memory_version_id != m.memory_version_id

    def test_rename_path_unknown_store(self, store: Store) -> None:
        with pytest.raises(NotFound, match="memory store"):
            store.memories.rename_path("memstore_nope", "/a", "/b", actor=API)
        with pytest.raises(NotFound, match="memory store"):
            store.memories.delete_path("memstore_nope", "/a", actor=API)
        with pytest.raises(NotFound, match="memory store"):
            store.memories.write_path("memstore_nope", "/a", "x", actor=API)

    def test_rename_prefix_archived(self, store: Store, sid: str) -> None:
        store.memories.write_path(sid, "/d/a", "x", actor=API)
        store.stores.archive(sid)
        with pytest.raises(StoreArchived):
            store.memories.rename_prefix(sid, "/d/", "/e/", actor=API)
        with pytest.raises(StoreArchived):
            store.memories.write_path(sid, "/d/a", "y", actor=API)


# ============================================================================================
# deleting a directory: one transaction (issue 42: an MCP client's memory_delete)


class TestDeletePrefix:
    def test_delete_prefix(self, store: Store, sid: str) -> None:
        ms = [store.memories.write_path(sid, p, f"kestrel {p}", actor=API)
              for p in ("/d/a", "/d/s/b", "/d/s/t/c")]
        outside = [store.memories.write_path(sid, p, "kestrel outside", actor=API)
                   for p in ("/d-other/x", "/dx", "/e/d/y")]
        seq = store.feed.last(sid)
        gone = store.memories.delete_prefix(sid, "/d/", actor=USER)
        # each as it was (basic view), with the feed position of its delete
        assert [(m.id, m.path, m.content) for m in gone] == [(m.id, m.path, None) for m in ms]
        assert _feed(store, sid, seq) == [("delete", m.id, m.path) for m in ms]
        assert [m.seq for m in gone] == [c.seq for c in store.feed.since(sid, seq)]
        for m in ms:
            with pytest.raises(NotFound):
                store.memories.get(sid, m.id)
            vs = store.versions.list(sid, memory_id=m.id).data
            assert [(v.operation, v.path, v.created_by) for v in vs] == [
                ("deleted", m.path, USER), ("created", m.path, API)]
        assert [m.path for m in store.memories.tree(sid)] == ["/d-other/x", "/dx", "/e/d/y"]
        assert store.memories.count(sid) == len(outside)
        # the words index forgets them, as it does a single delete
        found = store.search.in_store(sid, "kestrel", channels=("words",), threshold=0).hits
        assert sorted(h.path for h in found) == ["/d-other/x", "/dx", "/e/d/y"]

    def test_delete_prefix_nothing_below(self, store: Store, sid: str) -> None:
        store.memories.write_path(sid, "/d", "a file, not a directory", actor=API)
        store.memories.write_path(sid, "/d-x/a", "x", actor=API)
        seq = store.feed.last(sid)
        for prefix in ("/d/", "/nope/", "/d-x/a/"):
            with pytest.raises(NotFound, match=f"no memory below {prefix}"):
                store.memories.delete_prefix(sid, prefix, actor=API)
        with pytest.raises(NotFound, match="memory store"):
            store.memories.delete_prefix("memstore_nope", "/d/", actor=API)
        for bad in ("/d", "d/", "//", "/a//b/"):
            with pytest.raises(InvalidPath):
                store.memories.delete_prefix(sid, bad, actor=API)
        with pytest.raises(InvalidRequest, match="root"):  # never the whole store at once
            store.memories.delete_prefix(sid, "/", actor=API)
        assert store.feed.last(sid) == seq and store.memories.count(sid) == 2

    def test_delete_prefix_is_one_transaction(self, store: Store, sid: str) -> None:
        # A failure after every memory is deleted (the tool events cannot be stored: a lone
        # surrogate, found at their encoding) leaves every memory, version and change as it
        # was, and records no event.
        from memfs.fuse.toolevents import tool_pair

        sess = store.sessions.create([res(sid, access="read_write")])
        for p in ("/d/a", "/d/b", "/d/c/d"):
            store.memories.write_path(sid, p, p, actor=API)
        before, seq = store.memories.tree(sid), store.feed.last(sid)
        nversions = len(store.versions.list(sid, limit=100).data)
        bad = tool_pair("rm", 1, "delete", "/mnt/memory/s/d", text="bad \udc80")
        with pytest.raises(InvalidRequest, match="lone surrogate"):
            store.memories.delete_prefix(sid, "/d/", actor=Actor.session(sess.id), events=bad)
        assert store.memories.tree(sid) == before and store.feed.last(sid) == seq
        assert len(store.versions.list(sid, limit=100).data) == nversions
        assert store.events.list(sess.id).data == []
        # the same with good events: all deleted, the events recorded with them
        good = tool_pair("rm", 1, "delete", "/mnt/memory/s/d", text="ok")
        gone = store.memories.delete_prefix(sid, "/d/", actor=Actor.session(sess.id),
                                            events=good)
        assert len(gone) == 3 and store.memories.tree(sid) == []
        assert [e.body for e in store.events.list(sess.id).data] == good
        times = {v.created_at for v in store.versions.list(sid, operation="deleted").data}
        assert len(times) == 1  # one transaction's time

    def test_delete_prefix_archived(self, store: Store, sid: str) -> None:
        # As a single delete (API.md 2.5: deleting memories of an archived store is allowed).
        store.memories.write_path(sid, "/d/a", "x", actor=API)
        store.memories.write_path(sid, "/d/b", "x", actor=API)
        store.stores.archive(sid)
        assert store.memories.delete_path(sid, "/d/a", actor=API).path == "/d/a"
        assert [m.path for m in store.memories.delete_prefix(sid, "/d/", actor=API)] == ["/d/b"]


# ============================================================================================
# directory renames never merge; a rename over a file keeps the file's memory (issue 8)


def _feed(store: Store, sid: str, after: int) -> list[tuple[str, str | None, str | None]]:
    return [(c.op, c.memory_id, c.path) for c in store.feed.since(sid, after)]


class TestRenameRules:
    def test_rename_prefix_into_a_non_empty_directory(self, store: Store, sid: str) -> None:
        from memfs.errors import DirectoryNotEmpty

        one = store.memories.write_path(sid, "/a/one.md", "1", actor=API)
        two = store.memories.write_path(sid, "/b/two.md", "2", actor=API)
        before, seq = store.memories.tree(sid), store.feed.last(sid)
        with pytest.raises(DirectoryNotEmpty) as e:
            store.memories.rename_prefix(sid, "/a/", "/b/", actor=API)
        assert isinstance(e.value, PathConflict)
        assert (e.value.conflicting_memory_id, e.value.conflicting_path) == (two.id, "/b/two.md")
        assert store.memories.tree(sid) == before and store.feed.last(sid) == seq
        # deeper below the target counts too, and so does a move onto an ancestor
        store.memories.write_path(sid, "/c/d/e.md", "e", actor=API)
        with pytest.raises(DirectoryNotEmpty):
            store.memories.rename_prefix(sid, "/a/", "/c/", actor=API)
        with pytest.raises(DirectoryNotEmpty):
            store.memories.rename_prefix(sid, "/c/d/", "/c/", actor=API)
        # an empty (or missing) target is fine
        assert [m.path for m in store.memories.rename_prefix(sid, "/a/", "/z/", actor=API)] == [
            "/z/one.md"]
        assert store.memories.get(sid, one.id).path == "/z/one.md"

    def test_rename_prefix_onto_a_file(self, store: Store, sid: str) -> None:
        from memfs.errors import NotADirectory

        store.memories.write_path(sid, "/a/one.md", "1", actor=API)
        f = store.memories.write_path(sid, "/f.md", "file", actor=API)
        before = store.memories.tree(sid)
        with pytest.raises(NotADirectory) as e:
            store.memories.rename_prefix(sid, "/a/", "/f.md/", actor=API)
        assert isinstance(e.value, PathConflict) and e.value.conflicting_memory_id == f.id
        with pytest.raises(NotADirectory):  # below a file, too
            store.memories.rename_prefix(sid, "/a/", "/f.md/sub/", actor=API)
        assert store.memories.tree(sid) == before

    def test_rename_path_over_a_file_keeps_the_targets_memory(
        self, store: Store, sid: str
    ) -> None:
        # sed -i / an editor: write a temp file, rename it over the original
        orig = store.memories.write_path(sid, "/hello.md", "v1", actor=API)
        tmp = store.memories.write_path(sid, "/sedQdG0st", "v2", actor=USER)
        seq = store.feed.last(sid)
        r = store.memories.rename_path(sid, "/sedQdG0st", "/hello.md", actor=USER)
        assert (r.id, r.path, r.content, r.created_at) == (
            orig.id, "/hello.md", "v2", orig.created_at)
        assert store.memories.get_by_path(sid, "/hello.md") == r
        with pytest.raises(NotFound):
            store.memories.get(sid, tmp.id)
        assert store.memories.count(sid) == 1
        hist = store.versions.list(sid, memory_id=orig.id, view="full").data
        assert [(v.operation, v.path, v.content) for v in hist] == [
            ("modified", "/hello.md", "v2"), ("created", "/hello.md", "v1")]
        assert hist[0].created_by == USER and hist[0].id == r.memory_version_id
        tmp_hist = store.versions.list(sid, memory_id=tmp.id).data
        assert [(v.operation, v.path) for v in tmp_hist] == [
            ("deleted", "/sedQdG0st"), ("created", "/sedQdG0st")]
        assert hist[0].created_at == tmp_hist[0].created_at  # one transaction
        assert _feed(store, sid, seq) == [
            ("put", orig.id, "/hello.md"), ("delete", tmp.id, "/sedQdG0st")]

    def test_rename_path_over_identical_content(self, store: Store, sid: str) -> None:
        orig = store.memories.write_path(sid, "/a.md", "same", actor=API)
        tmp = store.memories.write_path(sid, "/a.md~", "same", actor=API)
        seq = store.feed.last(sid)
        r = store.memories.rename_path(sid, "/a.md~", "/a.md", actor=API)
        assert r == orig  # no new version
        assert len(store.versions.list(sid, memory_id=orig.id).data) == 1
        with pytest.raises(NotFound):
            store.memories.get(sid, tmp.id)
        assert _feed(store, sid, seq) == [("delete", tmp.id, "/a.md~")]

    def test_rename_path_over_a_file_without_replace(self, store: Store, sid: str) -> None:
        store.memories.write_path(sid, "/a.md", "a", actor=API)
        b = store.memories.write_path(sid, "/b.md", "b", actor=API)
        before = store.memories.tree(sid)
        with pytest.raises(PathConflict) as e:
            store.memories.rename_path(sid, "/a.md", "/b.md", actor=API, replace=False)
        assert e.value.conflicting_memory_id == b.id
        assert store.memories.tree(sid) == before

    def test_rename_path_over_a_file_in_an_archived_store(self, store: Store, sid: str) -> None:
        store.memories.write_path(sid, "/a.md", "a", actor=API)
        store.memories.write_path(sid, "/b.md", "a",
                                  actor=API)  # identical: would be no new version
        store.stores.archive(sid)
        with pytest.raises(StoreArchived):
            store.memories.rename_path(sid, "/a.md", "/b.md", actor=API)
        assert store.memories.count(sid) == 2


# ============================================================================================
# a mount's tool pair as a ToolPair (encoded from a template) or as dicts: the same events


def _pair(op: str, path: str, **kw: Any) -> ToolPair:
    from memfs.fuse.toolevents import new_tool_pair

    return new_tool_pair("sh", 42, op, "/mnt/memory/s" + path, text=f"{op} é \"{path}\"", **kw)


def _normal(bodies: list[str]) -> list[str]:
    """Stored bodies with their ids and times numbered by first appearance: two runs of the
    same operations compare equal, key order and JSON text included."""
    seen: dict[str, str] = {}
    out = []
    for raw in bodies:
        e = json.loads(raw)
        assert raw == json.dumps(e, ensure_ascii=False)
        for k in ("id", "tool_use_id", "memory_id", "memory_version_id", "processed_at"):
            if k in e:
                e[k] = seen.setdefault(e[k], f"<{len(seen)}>")
        out.append(json.dumps(e, ensure_ascii=False))
    return out


class TestToolPairs:
    def _run(self, store: Store, as_dicts: bool) -> tuple[list[str], list[dict[str, Any]]]:
        """A mount's writes, each with its pair (as dicts: what the mount handed over before
        ToolPair): the session's stored bodies, and what the mount would log."""
        sid = store.stores.create("pairs").id
        sess = store.sessions.create([res(sid, access="read_write")])
        actor = Actor.session(sess.id)
        m = store.memories
        logged: list[dict[str, Any]] = []

        def call(method: Any, *args: Any, pair: ToolPair, **kw: Any) -> Any:
            events = pair.events() if as_dicts else pair
            out = method(sid, *args, actor=actor, events=events, **kw)
            logged.extend(tool_event_dicts(events) or [])
            return out

        one = call(m.write_path, "/a.md", "one", pair=_pair("create", "/a.md"))
        call(m.write_path, "/a.md", "two", pair=_pair("write", "/a.md"))
        call(m.rename_path, "/a.md", "/b.md", pair=_pair("rename", "/a.md",
                                                         new_path="/mnt/memory/s/b.md"))
        call(m.write_path, "/d/c.md", "c", pair=_pair("create", "/d/c.md"))
        call(m.rename_prefix, "/d/", "/e/", pair=_pair("rename", "/d", new_path="/e"))
        call(m.delete_path, "/b.md", pair=_pair("delete", "/b.md", memory_id=one.id))
        call(m.delete_prefix, "/e/", pair=_pair("rmdir", "/e"))
        with store.read() as c:
            bodies = [r["body"] for r in c.execute(
                "SELECT body FROM events WHERE session_id = ? ORDER BY seq", (sess.id,))]
        assert [e.body for e in store.events.list(sess.id, limit=100).data] == logged
        return bodies, logged

    def test_a_pair_is_stored_as_its_dicts_were(self, store: Store) -> None:
        bodies, logged = self._run(store, as_dicts=False)
        before, _ = self._run(store, as_dicts=True)
        assert len(bodies) == 14 and _normal(bodies) == _normal(before)
        assert bodies == [json.dumps(e, ensure_ascii=False) for e in logged]
        create = json.loads(bodies[1])
        assert create["memory_id"].startswith("mem_") and create["memory_version_id"]
        assert "memory_id" not in json.loads(bodies[9])  # a directory's: no one memory

    @pytest.mark.parametrize("as_dicts", [False, True])
    def test_a_surrogate_in_a_path_fails_the_write(self, store: Store, sid: str,
                                                   as_dicts: bool) -> None:
        sess = store.sessions.create([res(sid, access="read_write")])
        actor = Actor.session(sess.id)
        kept = store.memories.write_path(sid, "/k.md", "k", actor=actor)
        seq = store.feed.last(sid)
        for call in (
            lambda ev: store.memories.write_path(sid, "/a.md", "x", actor=actor, events=ev),
            lambda ev: store.memories.rename_path(sid, "/k.md", "/l.md", actor=actor,
                                                  events=ev),
            lambda ev: store.memories.delete_path(sid, "/k.md", actor=actor, events=ev),
        ):
            pair = _pair("write", "/bad \udc80.md")
            with pytest.raises(InvalidRequest) as e:
                call(pair.events() if as_dicts else pair)
            assert e.value.message == ("event.input.file_path is not valid UTF-8 text (it "
                                       "holds a lone surrogate)")
        # rolled back: nothing written, no event
        assert store.feed.last(sid) == seq
        assert [(m.path, m.memory_version_id) for m in store.memories.tree(sid)] == [
            ("/k.md", kept.memory_version_id)]
        assert store.events.list(sess.id).data == []
