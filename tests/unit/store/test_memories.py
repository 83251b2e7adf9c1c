"""``store.memories`` (memories.py) against API.md §3 and SPEC §1: creating, reading, updating and
deleting memories, the memory limit, and listing them."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from memfs import (
    Actor,
    ContentTooLarge,
    InvalidContent,
    InvalidCursor,
    InvalidPath,
    InvalidRequest,
    LimitExceeded,
    Memory,
    MemoryPrefix,
    NotFound,
    PathConflict,
    PreconditionFailed,
    StoreArchived,
)
from memfs.store import Limits, Store
from tests.support.backend import Backend
from tests.support.storekit import API, USER, all_pages

EMPTY_SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture
def store(backend: Backend) -> Store:
    """Every test of this module runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


class TestMemories:
    def test_create(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/notes/a.md", "héllo", actor=API)
        assert m.id.startswith("mem_") and m.memory_version_id.startswith("memver_")
        assert m.content_sha256 == sha("héllo") and m.content_size_bytes == len("héllo".encode())
        assert m.created_at == m.updated_at and m.memory_store_id == sid
        v = store.versions.get(sid, m.memory_version_id)
        assert (v.operation, v.path, v.content, v.content_sha256, v.content_size_bytes) == (
            "created",
            "/notes/a.md",
            "héllo",
            sha("héllo"),
            6,
        )
        assert v.created_by == API and v.memory_id == m.id and v.redacted_at is None
        assert store.memories.get(sid, m.id) == m
        assert store.memories.get(sid, m.id, view="basic").content is None
        assert store.memories.get_by_path(sid, "/notes/a.md").id == m.id

    def test_empty_and_none_content(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/e", "", actor=API)
        assert (m.content_sha256, m.content_size_bytes) == (EMPTY_SHA, 0)
        n = store.memories.create(sid, "/n", None, actor=API)
        assert (n.content, n.content_sha256, n.content_size_bytes) == ("", EMPTY_SHA, 0)

    def test_any_valid_utf8_round_trips_nul_included(self, store: Store, sid: str) -> None:
        # U+0000 is valid UTF-8 (PostgreSQL's text cannot hold it: the backend escapes it,
        # with U+FFFF, which must come back as itself too)
        # (SQLite's own LIKE stops at a U+0000: the search target comes before the first)
        text = "a \uffff0 \uffff1 \uffff\x00\uffff \x00b end\x00"
        m = store.memories.create(sid, "/nul.md", text, actor=API)
        assert m.content_size_bytes == len(text.encode())
        assert store.memories.get(sid, m.id).content == text
        store.memories.update(sid, m.id, content=text + "!", actor=API)
        versions = store.versions.list(sid, memory_id=m.id, view="full").data
        assert [v.content for v in versions] == [text + "!", text]
        hit = store.search.hits(sid, "\uffff0")[0]
        assert hit.memory.id == m.id and hit.snippet is not None
        assert hit.snippet[1] == "\uffff0"

    def test_bytes_content(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/b", "ça".encode(), actor=API)
        assert store.memories.get(sid, m.id).content == "ça"
        with pytest.raises(InvalidContent):
            store.memories.create(sid, "/bad", b"\xff\xfe not utf8", actor=API)
        with pytest.raises(InvalidContent):
            store.memories.create(sid, "/bad", "lone \udc80", actor=API)
        with pytest.raises(NotFound):
            store.memories.get_by_path(sid, "/bad")

    def test_content_size_limit_in_utf8_bytes(self, store: Store, sid: str) -> None:
        ok = "é" * 51_200  # 102,400 bytes, 51,200 characters
        m = store.memories.create(sid, "/max", ok, actor=API)
        assert m.content_size_bytes == 102_400
        with pytest.raises(ContentTooLarge):
            store.memories.create(sid, "/over", "é" * 51_200 + "a", actor=API)
        with pytest.raises(ContentTooLarge):
            store.memories.create(sid, "/over", b"a" * 102_401, actor=API)
        assert store.memories.create(sid, "/ascii", "a" * 102_400, actor=API).content_size_bytes
        with pytest.raises(ContentTooLarge):
            store.memories.update(sid, m.id, content="€" * 34_134, actor=API)  # 102,402 bytes
        assert store.memories.get(sid, m.id).content == ok

    def test_invalid_path_on_create(self, store: Store, sid: str) -> None:
        for bad in ("", "a.md", "/a//b", "/a/", "/./a", "/a/..", "/a\x00", "/" + "a/" * 20 + "b"):
            with pytest.raises(InvalidPath):
                store.memories.create(sid, bad, "x", actor=API)

    def test_unknown_store(self, store: Store) -> None:
        with pytest.raises(NotFound):
            store.memories.create("memstore_nope", "/a", "x", actor=API)

    def test_path_conflicts(self, store: Store, sid: str) -> None:
        a = store.memories.create(sid, "/a", "x", actor=API)
        with pytest.raises(PathConflict) as e:
            store.memories.create(sid, "/a", "y", actor=API)
        assert (e.value.conflicting_memory_id, e.value.conflicting_path) == (a.id, "/a")
        with pytest.raises(PathConflict) as e:
            store.memories.create(sid, "/a/b", "y", actor=API)
        assert (e.value.conflicting_memory_id, e.value.conflicting_path) == (a.id, "/a")
        with pytest.raises(PathConflict) as e:
            store.memories.create(sid, "/a/b/c/d", "y", actor=API)
        assert e.value.conflicting_path == "/a"
        d = store.memories.create(sid, "/d/e/f", "x", actor=API)
        for blocked in ("/d", "/d/e"):
            with pytest.raises(PathConflict) as e:
                store.memories.create(sid, blocked, "y", actor=API)
            assert (e.value.conflicting_memory_id, e.value.conflicting_path) == (d.id, "/d/e/f")
        # neighbours that only share a string prefix are fine; case-sensitive
        for ok in ("/ab", "/a.md", "/a-b/c", "/A", "/d/e/g", "/d/ef"):
            store.memories.create(sid, ok, "z", actor=API)
        assert store.memories.count(sid) == 8

    def test_archived_store_rules(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a", "x", actor=API)
        store.stores.archive(sid)
        with pytest.raises(StoreArchived):
            store.memories.create(sid, "/b", "x", actor=API)
        with pytest.raises(StoreArchived):
            store.memories.update(sid, m.id, content="y", actor=API)
        with pytest.raises(StoreArchived):
            store.memories.update(sid, m.id, path="/c", actor=API)
        with pytest.raises(StoreArchived):
            store.memories.check_can_create(sid)
        assert store.memories.get(sid, m.id).content == "x"
        assert [x.id for x in store.memories.list(sid).data] == [m.id]
        store.memories.delete(sid, m.id, actor=API)
        with pytest.raises(NotFound):
            store.memories.get(sid, m.id)

    def test_update_content(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a", "one", actor=API)
        u = store.memories.update(sid, m.id, content="two", actor=USER)
        assert (u.id, u.path, u.content, u.content_sha256) == (m.id, "/a", "two", sha("two"))
        assert u.memory_version_id != m.memory_version_id and u.updated_at > m.updated_at
        assert u.created_at == m.created_at
        v = store.versions.get(sid, u.memory_version_id)
        assert (v.operation, v.content, v.created_by) == ("modified", "two", USER)
        # the previous version is untouched
        v0 = store.versions.get(sid, m.memory_version_id)
        assert (v0.content, v0.content_sha256) == ("one", sha("one"))

    def test_update_with_precondition(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a", "one", actor=API)
        u = store.memories.update(
            sid, m.id, content="two", precondition_sha256=sha("one"), actor=API
        )
        assert u.content == "two"
        with pytest.raises(PreconditionFailed):
            store.memories.update(sid, m.id, content="three", precondition_sha256=sha("one"),
                                actor=API)
        with pytest.raises(PreconditionFailed):
            store.memories.update(sid, m.id, path="/moved", precondition_sha256=sha("one"),
                                actor=API)
        assert store.memories.get(sid, m.id) == store.memories.update(sid, m.id, actor=API)
        assert store.memories.get(sid, m.id).content == "two"
        assert store.memories.get(sid, m.id).path == "/a"
        assert len(store.versions.list(sid, memory_id=m.id).data) == 2

    @pytest.mark.parametrize("bad", ["abc", "A" * 64, sha("x").upper(), sha("x") + "0", 5])
    def test_malformed_precondition(self, store: Store, sid: str, bad: Any) -> None:
        m = store.memories.create(sid, "/a", "x", actor=API)
        with pytest.raises(InvalidRequest):
            store.memories.update(sid, m.id, content="y", precondition_sha256=bad, actor=API)
        with pytest.raises(InvalidRequest):
            store.memories.delete(sid, m.id, expected_sha256=bad, actor=API)
        assert store.memories.get(sid, m.id).content == "x"

    def test_precondition_checked_on_noop(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a", "x", actor=API)
        with pytest.raises(PreconditionFailed):
            store.memories.update(sid, m.id, content="x", precondition_sha256=sha("y"), actor=API)
        with pytest.raises(PreconditionFailed):
            store.memories.update(sid, m.id, precondition_sha256=sha("y"), actor=API)
        same = store.memories.update(sid, m.id, content="x", precondition_sha256=sha("x"),
                                   actor=API)
        assert same.memory_version_id == m.memory_version_id

    def test_precondition_refers_to_content_during_rename(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a", "x", actor=API)
        store.memories.create(sid, "/b", "other", actor=API)
        r = store.memories.update(sid, m.id, path="/c", precondition_sha256=sha("x"), actor=API)
        assert (r.id, r.path, r.content) == (m.id, "/c", "x")
        with pytest.raises(PreconditionFailed):
            store.memories.update(sid, m.id, path="/d", precondition_sha256=sha("other"),
                                actor=API)

    def test_noop_update(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a", "x", actor=API)
        for kw in ({}, {"content": "x"}, {"path": "/a"}, {"content": "x", "path": "/a"},
                   {"content": b"x"}):
            u = store.memories.update(sid, m.id, actor=API, **kw)
            assert u.memory_version_id == m.memory_version_id
            assert u.updated_at == m.updated_at
            assert u.content == "x"
        assert len(store.versions.list(sid).data) == 1

    def test_noop_update_on_archived_store_writes_nothing(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a", "x", actor=API)
        store.stores.archive(sid)
        try:
            u = store.memories.update(sid, m.id, content="x", actor=API)
        except StoreArchived:
            pass  # refusing is fine too; what matters is that nothing was written
        else:
            assert u.memory_version_id == m.memory_version_id
        assert len(store.versions.list(sid).data) == 1

    def test_rename(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a/x.md", "x", actor=API)
        r = store.memories.update(sid, m.id, path="/b/y.md", actor=USER)
        assert (r.id, r.path, r.content, r.content_sha256) == (m.id, "/b/y.md", "x", sha("x"))
        vs = store.versions.list(sid, memory_id=m.id).data
        assert [v.operation for v in vs] == ["modified", "created"]
        assert vs[0].path == "/b/y.md" and vs[0].content_sha256 == sha("x")
        with pytest.raises(NotFound):
            store.memories.get_by_path(sid, "/a/x.md")
        # the old path is free again, and so is its former directory
        store.memories.create(sid, "/a/x.md", "new", actor=API)
        store.memories.create(sid, "/b/z.md", "new", actor=API)

    def test_rename_and_content_together(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a", "x", actor=API)
        r = store.memories.update(sid, m.id, path="/b", content="y", actor=API)
        assert (r.path, r.content) == ("/b", "y")
        assert len(store.versions.list(sid, memory_id=m.id).data) == 2

    def test_rename_conflicts(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/m", "x", actor=API)
        t = store.memories.create(sid, "/taken", "t", actor=API)
        d = store.memories.create(sid, "/dir/f", "f", actor=API)
        for target, cid, cpath in (
            ("/taken", t.id, "/taken"),
            ("/taken/below", t.id, "/taken"),
            ("/dir", d.id, "/dir/f"),
        ):
            with pytest.raises(PathConflict) as e:
                store.memories.update(sid, m.id, path=target, actor=API)
            assert (e.value.conflicting_memory_id, e.value.conflicting_path) == (cid, cpath)
        assert store.memories.get(sid, m.id).path == "/m"
        assert len(store.versions.list(sid).data) == 3
        # a memory may move below its own old path (it no longer is a file there)
        assert store.memories.update(sid, m.id, path="/m/inner", actor=API).path == "/m/inner"

    def test_rename_replace(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/m", "mine", actor=API)
        t = store.memories.create(sid, "/t", "theirs", actor=API)
        r = store.memories.update(sid, m.id, path="/t", actor=USER, replace=True)
        assert (r.id, r.path, r.content) == (m.id, "/t", "mine")
        with pytest.raises(NotFound):
            store.memories.get(sid, t.id)
        tv = store.versions.list(sid, memory_id=t.id, view="full").data
        assert [v.operation for v in tv] == ["deleted", "created"]
        assert tv[0].path == "/t" and tv[0].created_by == USER
        assert tv[1].content == "theirs"  # nothing lost: the replaced content stays in history
        assert store.memories.count(sid) == 1
        # replace does not allow overlap with a directory
        store.memories.create(sid, "/d/x", "x", actor=API)
        with pytest.raises(PathConflict):
            store.memories.update(sid, m.id, path="/d", actor=API, replace=True)
        assert store.memories.count(sid) == 2

    def test_update_unknown(self, store: Store, sid: str) -> None:
        with pytest.raises(NotFound):
            store.memories.update(sid, "mem_nope", content="x", actor=API)
        other = store.stores.create("other")
        m = store.memories.create(other.id, "/a", "x", actor=API)
        with pytest.raises(NotFound):
            store.memories.update(sid, m.id, content="y", actor=API)
        with pytest.raises(NotFound):
            store.memories.get(sid, m.id)
        with pytest.raises(NotFound):
            store.memories.delete(sid, m.id, actor=API)

    def test_delete(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a/b.md", "bye", actor=API)
        with pytest.raises(PreconditionFailed):
            store.memories.delete(sid, m.id, expected_sha256=sha("other"), actor=API)
        assert store.memories.get(sid, m.id).content == "bye"
        store.memories.delete(sid, m.id, expected_sha256=sha("bye"), actor=USER)
        with pytest.raises(NotFound):
            store.memories.get(sid, m.id)
        with pytest.raises(NotFound):
            store.memories.update(sid, m.id, content="x", actor=API)
        with pytest.raises(NotFound):
            store.memories.delete(sid, m.id, actor=API)
        vs = store.versions.list(sid, memory_id=m.id, view="full").data
        assert [v.operation for v in vs] == ["deleted", "created"]
        dv, cv = vs
        assert dv.path == "/a/b.md" and dv.created_by == USER
        assert (dv.content, dv.content_sha256, dv.content_size_bytes) == (None, None, None)
        assert (cv.content, cv.content_sha256, cv.content_size_bytes) == ("bye", sha("bye"), 3)
        # the path (and its directory) is free again, with a new id
        n = store.memories.create(sid, "/a/b.md", "again", actor=API)
        assert n.id != m.id
        store.memories.create(sid, "/a/b.md2", "x", actor=API)
        assert store.memories.count(sid) == 2

    def test_check_can_create_and_count(self, store: Store, sid: str) -> None:
        store.memories.check_can_create(sid)
        with pytest.raises(NotFound):
            store.memories.check_can_create("memstore_nope")
        assert store.memories.count(sid) == 0


class TestLimits:
    def test_memory_limit_and_work_at_limit(self, backend: Backend) -> None:
        s = backend.open(limits=Limits(max_memories=3))
        try:
            st = s.stores.create("n").id
            ms = [s.memories.create(st, f"/m{i}", "x", actor=API) for i in range(3)]
            with pytest.raises(LimitExceeded):
                s.memories.create(st, "/m3", "x", actor=API)
            with pytest.raises(LimitExceeded):
                s.memories.check_can_create(st)
            with pytest.raises(LimitExceeded):
                s.memories.write_path(st, "/new", "x", actor=API)
            # at the limit: read, edit, rename, replace-rename, write_path of an existing path
            assert s.memories.update(st, ms[0].id, content="y", actor=API).content == "y"
            assert s.memories.update(st, ms[0].id, path="/r", actor=API).path == "/r"
            assert s.memories.write_path(st, "/m1", "z", actor=API).content == "z"
            assert s.memories.rename_path(st, "/m1", "/d/m1", actor=API).path == "/d/m1"
            assert len(s.memories.rename_prefix(st, "/d/", "/e/", actor=API)) == 1
            # another store has its own count
            other = s.stores.create("o").id
            s.memories.create(other, "/m", "x", actor=API)
            s.memories.delete(st, ms[2].id, actor=API)
            s.memories.create(st, "/after-delete", "x", actor=API)
            with pytest.raises(LimitExceeded):
                s.memories.create(st, "/one-too-many", "x", actor=API)
            assert s.memories.count(st) == 3
        finally:
            s.close()


def test_memory_count_follows_every_kind_of_write(store):
    """stores.memory_count (kept by triggers) always equals the live memories."""

    actor = Actor.user("user_t")
    s = store.stores.create("count")

    def live() -> int:
        return len(store.memories.tree(s.id))

    for i in range(5):
        store.memories.create(s.id, f"/d/f{i}.md", "x", actor=actor)
    store.memories.write_path(s.id, "/d/f0.md", "changed", actor=actor)
    store.memories.write_path(s.id, "/new.md", "n", actor=actor)
    store.memories.rename_path(s.id, "/d/f1.md", "/d/f2.md", actor=actor)  # replaces f2
    store.memories.rename_prefix(s.id, "/d/", "/e/", actor=actor)
    store.memories.delete_path(s.id, "/e/f3.md", actor=actor)
    assert store.memories.count(s.id) == live() == 4
    store.stores.delete(s.id)
    other = store.stores.create("other")
    assert store.memories.count(other.id) == 0


# ============================================================================================
# listing memories


def _paths(items: list[Any]) -> list[tuple[str, str]]:
    return [("p" if isinstance(i, MemoryPrefix) else "m", i.path) for i in items]


class TestListMemories:
    PATHS = (
        "/notes/todo.md",
        "/notes/sub/deep/x.md",
        "/notes/sub/y.md",
        "/notes-archive/old.md",
        "/notes/a.md",
        "/top.md",
        "/z/é.md",
        "/z/e.md",
        "/Zed",
    )

    @pytest.fixture
    def filled(self, store: Store, sid: str) -> str:
        for p in self.PATHS:
            store.memories.create(sid, p, p, actor=API)
        return sid

    def test_all_in_byte_order(self, store: Store, filled: str) -> None:
        items = store.memories.list(filled, limit=100).data
        got = [i.path for i in items]
        assert got == sorted(self.PATHS, key=lambda p: p.encode())
        assert all(isinstance(i, Memory) and i.content is None for i in items)
        assert all(i.content_sha256 == sha(i.path) for i in items)
        assert store.memories.list(filled, path_prefix="/", limit=100).data == items

    def test_prefix_whole_segments(self, store: Store, filled: str) -> None:
        got = [i.path for i in store.memories.list(filled, path_prefix="/notes/").data]
        assert got == ["/notes/a.md", "/notes/sub/deep/x.md", "/notes/sub/y.md", "/notes/todo.md"]
        assert [i.path for i in store.memories.list(filled, path_prefix="/z/").data] == [
            "/z/e.md",
            "/z/é.md",
        ]
        assert store.memories.list(filled, path_prefix="/nothing/").data == []
        assert store.memories.list(filled, path_prefix="/top.md/").data == []

    @pytest.mark.parametrize("bad", ["/notes", "notes/", "", "//", "/a//", "/../", "/\x01/"])
    def test_bad_prefix(self, store: Store, filled: str, bad: str) -> None:
        with pytest.raises(InvalidRequest):
            store.memories.list(filled, path_prefix=bad)

    def test_depth(self, store: Store, filled: str) -> None:
        d1 = store.memories.list(filled, depth=1, limit=100).data
        assert _paths(d1) == [
            ("m", "/Zed"),
            ("p", "/notes-archive/"),
            ("p", "/notes/"),
            ("m", "/top.md"),
            ("p", "/z/"),
        ]
        d1n = store.memories.list(filled, path_prefix="/notes/", depth=1).data
        assert _paths(d1n) == [("m", "/notes/a.md"), ("p", "/notes/sub/"), ("m", "/notes/todo.md")]
        d2n = store.memories.list(filled, path_prefix="/notes/", depth=2).data
        assert _paths(d2n) == [
            ("m", "/notes/a.md"),
            ("p", "/notes/sub/deep/"),
            ("m", "/notes/sub/y.md"),
            ("m", "/notes/todo.md"),
        ]
        d0 = store.memories.list(filled, path_prefix="/notes/", depth=0).data
        assert all(isinstance(i, Memory) for i in d0) and len(d0) == 4
        assert store.memories.list(filled, depth=25, limit=100).data == store.memories.list(
            filled, limit=100
        ).data
        assert MemoryPrefix("/z/").to_dict() == {"type": "memory_prefix", "path": "/z/"}

    def test_negative_or_bad_depth(self, store: Store, filled: str) -> None:
        for bad in (-1, "1", 1.5, True):
            with pytest.raises(InvalidRequest):
                store.memories.list(filled, depth=bad)  # type: ignore[arg-type]

    def test_pagination_depth_never_repeats_a_prefix(self, store: Store, sid: str) -> None:
        for d in "abc":
            for i in range(5):
                store.memories.create(sid, f"/{d}/{i}/f.md", "x", actor=API)
            store.memories.create(sid, f"/{d}0.md", "x", actor=API)
        expected = store.memories.list(sid, depth=1, limit=100).data
        assert _paths(expected) == [
            ("p", "/a/"), ("m", "/a0.md"), ("p", "/b/"), ("m", "/b0.md"), ("p", "/c/"),
            ("m", "/c0.md"),
        ]
        for limit in (1, 2, 4):
            items, _ = all_pages(store.memories.list, store_id=sid, depth=1, limit=limit)
            assert items == expected
        items, pages = all_pages(store.memories.list, store_id=sid, depth=2, limit=1)
        assert len(items) == 18 == pages
        assert len({i.path for i in items}) == 18

    def test_pagination_flat(self, store: Store, filled: str) -> None:
        items, pages = all_pages(store.memories.list, store_id=filled, limit=1)
        assert [i.path for i in items] == sorted(self.PATHS, key=lambda p: p.encode())
        assert pages == len(self.PATHS)
        full, _ = all_pages(store.memories.list, store_id=filled, limit=2, view="full")
        assert [i.content for i in full] == [i.path for i in full]

    def test_cursor_belongs_to_listing(self, store: Store, filled: str) -> None:
        cur = store.memories.list(filled, limit=1).next_page
        assert cur
        with pytest.raises(InvalidCursor):
            store.memories.list(filled, limit=1, page=cur, path_prefix="/notes/")
        with pytest.raises(InvalidCursor):
            store.memories.list(filled, limit=1, page=cur, depth=1)
        with pytest.raises(InvalidCursor):
            store.memories.list(filled, page="%%%")
        with pytest.raises(InvalidCursor):
            store.versions.list(filled, page=cur)
        other = store.stores.create("other").id
        store.memories.create(other, "/notes/a.md", "x", actor=API)
        with pytest.raises(InvalidCursor):  # a cursor of another store's listing
            store.memories.list(other, limit=1, page=cur)

    def test_view_and_limits(self, store: Store, sid: str) -> None:
        for i in range(25):
            store.memories.create(sid, f"/m{i:02}", f"c{i}", actor=API)
        basic = store.memories.list(sid, limit=100)
        assert len(basic.data) == 25 and basic.next_page is None
        assert all(m.content is None for m in basic.data)
        full = store.memories.list(sid, limit=100, view="full")
        assert len(full.data) == 20 and full.next_page is not None
        assert all(m.content == f"c{int(m.path[2:])}" for m in full.data)
        assert len(store.memories.list(sid).data) == 20  # default limit
        for bad in (0, 101, -5):
            with pytest.raises(InvalidRequest):
                store.memories.list(sid, limit=bad)
        with pytest.raises(InvalidRequest):
            store.memories.list(sid, view="everything")
        with pytest.raises(InvalidRequest):
            store.memories.get(sid, basic.data[0].id, view="nope")

    def test_unknown_store_and_archived(self, store: Store, filled: str) -> None:
        with pytest.raises(NotFound):
            store.memories.list("memstore_nope")
        store.stores.archive(filled)
        assert len(store.memories.list(filled, limit=100).data) == len(self.PATHS)
