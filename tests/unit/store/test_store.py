"""The store layer against API.md §2–3, §7.1 and SPEC §1: every rule, with real assertions."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace
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
from memfs.store import Limits, Store, format_time, new_id, parse_time
from tests.support.backend import Backend

API = Actor.api("apikey_test")
USER = Actor.user("user_alice")
EMPTY_SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
RFC3339_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def all_pages(fetch: Callable[..., Any], **kw: Any) -> tuple[list[Any], int]:
    """Follow next_page to the end; returns (items, number of pages)."""
    items, pages, page = [], 0, None
    while True:
        p = fetch(page=page, **kw)
        pages += 1
        items.extend(p.data)
        if p.next_page is None:
            return items, pages
        assert p.data, "a page with a next_page must not be empty"
        page = p.next_page
        assert pages < 10_000


@pytest.fixture
def store(backend: Backend) -> Store:
    """Every test of this file runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


@pytest.fixture
def sid(store: Store) -> str:
    return store.stores.create("Notes").id


# ============================================================================================
# memory stores


class TestStores:
    def test_create_defaults(self, store: Store) -> None:
        s = store.stores.create("Notes")
        assert s.id.startswith("memstore_")
        assert (s.name, s.description, s.metadata, s.archived_at) == ("Notes", "", {}, None)
        assert s.created_at == s.updated_at
        assert RFC3339_Z.match(s.created_at)
        assert store.stores.get(s.id) == s
        d = s.to_dict()
        assert d["type"] == "memory_store" and d["description"] == "" and d["metadata"] == {}

    def test_create_none_is_omitted(self, store: Store) -> None:
        s = store.stores.create("x", description=None, metadata=None)
        assert (s.description, s.metadata) == ("", {})

    def test_create_with_everything(self, store: Store) -> None:
        s = store.stores.create("n", description="d" * 1024, metadata={"k": "v" * 512})
        got = store.stores.get(s.id)
        assert got.description == "d" * 1024 and got.metadata == {"k": "v" * 512}

    @pytest.mark.parametrize("name", ["", "a" * 256, "bad\nname", "tab\tname", "nul\x00", "\x7f"])
    def test_bad_names(self, store: Store, name: str) -> None:
        with pytest.raises(InvalidRequest):
            store.stores.create(name)
        assert store.stores.list(include_archived=True).data == []

    def test_name_edges_ok(self, store: Store) -> None:
        assert store.stores.create("a" * 255).name == "a" * 255
        assert store.stores.create("é 🎉 x").name == "é 🎉 x"
        assert store.stores.create("z").name == "z"

    def test_description_limit(self, store: Store) -> None:
        with pytest.raises(InvalidRequest):
            store.stores.create("n", description="d" * 1025)

    def test_metadata_limits(self, store: Store) -> None:
        ok = {f"k{i}": "v" for i in range(16)}
        assert store.stores.create("n", metadata=ok).metadata == ok
        for bad in (
            {f"k{i}": "v" for i in range(17)},
            {"": "v"},
            {"k" * 65: "v"},
            {"k": "v" * 513},
            {"k": 1},
        ):
            with pytest.raises(InvalidRequest):
                store.stores.create("n", metadata=bad)
        assert store.stores.create("n", metadata={"k" * 64: "v" * 512}).metadata

    def test_namesakes_are_the_other_live_stores_of_its_name(self, store: Store) -> None:
        """Names need not be unique (the hosted API's rule); the CLI and Console say so when
        a second live store takes one, from this one rule."""
        a = store.stores.create("Notes")
        assert store.stores.namesakes(a.id) == []
        b = store.stores.create("Notes")
        store.stores.create("notes")  # another name: case counts, as in resolve_store
        old = store.stores.create("Notes")
        store.stores.archive(old.id)  # archived: no longer in the way
        assert store.stores.namesakes(a.id) == [store.stores.get(b.id)]
        assert [s.id for s in store.stores.namesakes(b.id)] == [a.id]
        c = store.stores.create("Notes")
        assert [s.id for s in store.stores.namesakes(a.id)] == [c.id, b.id]  # newest first
        store.stores.update(b.id, name="Other")
        store.stores.delete(c.id)
        assert store.stores.namesakes(a.id) == store.stores.namesakes(b.id) == []
        with pytest.raises(NotFound):
            store.stores.namesakes("memstore_nope")

    def test_retrieve_unknown(self, store: Store) -> None:
        with pytest.raises(NotFound):
            store.stores.get("memstore_nope")

    def test_update_fields_and_updated_at(self, store: Store) -> None:
        s = store.stores.create("n", description="d", metadata={"a": "1", "b": "2"})
        u = store.stores.update(s.id, name="n2", description="", metadata={"a": None, "c": "3"})
        assert (u.name, u.description, u.metadata) == ("n2", "", {"b": "2", "c": "3"})
        assert u.updated_at > s.updated_at and u.created_at == s.created_at
        assert store.stores.get(s.id) == u

    def test_update_none_and_omitted_change_nothing(self, store: Store) -> None:
        s = store.stores.create("n", description="d", metadata={"a": "1"})
        assert store.stores.update(s.id) == s
        assert store.stores.update(s.id, name=None, description=None, metadata=None) == s

    def test_noop_update_leaves_updated_at(self, store: Store) -> None:
        s = store.stores.create("n", description="d", metadata={"a": "1"})
        u = store.stores.update(s.id, name="n", description="d", metadata={"a": "1"})
        assert u.updated_at == s.updated_at
        # removing a key that is not there is no change either
        assert store.stores.update(s.id, metadata={"zz": None}).updated_at == s.updated_at

    def test_metadata_patch_limits_apply_to_result(self, store: Store) -> None:
        s = store.stores.create("n", metadata={f"k{i}": "v" for i in range(16)})
        with pytest.raises(InvalidRequest):
            store.stores.update(s.id, metadata={"new": "v"})
        # removing one and adding one keeps 16 pairs: fine
        u = store.stores.update(s.id, metadata={"k0": None, "new": "v"})
        assert len(u.metadata) == 16 and "k0" not in u.metadata and u.metadata["new"] == "v"
        with pytest.raises(InvalidRequest):
            store.stores.update(s.id, metadata={"k1": "v" * 513})
        with pytest.raises(InvalidRequest):
            store.stores.update(s.id, name="")
        with pytest.raises(InvalidRequest):
            store.stores.update(s.id, description="x" * 1025)
        assert store.stores.get(s.id) == u  # failed updates changed nothing

    def test_update_archived(self, store: Store) -> None:
        s = store.stores.create("n")
        store.stores.archive(s.id)
        with pytest.raises(StoreArchived):
            store.stores.update(s.id, name="other")
        with pytest.raises(StoreArchived):
            store.stores.update(s.id, description="")
        assert store.stores.get(s.id).name == "n"

    def test_update_unknown(self, store: Store) -> None:
        with pytest.raises(NotFound):
            store.stores.update("memstore_nope", name="x")

    def test_archive_idempotent(self, store: Store) -> None:
        s = store.stores.create("n")
        a1 = store.stores.archive(s.id)
        assert a1.archived_at is not None and RFC3339_Z.match(a1.archived_at)
        assert a1.updated_at == a1.archived_at and a1.updated_at >= s.updated_at
        a2 = store.stores.archive(s.id)
        assert a2 == a1
        assert store.stores.get(s.id).archived_at == a1.archived_at

    def test_list_newest_first_and_archived(self, store: Store) -> None:
        ids = [store.stores.create(f"s{i}").id for i in range(4)]
        store.stores.archive(ids[1])
        assert [s.id for s in store.stores.list().data] == [ids[3], ids[2], ids[0]]
        listed = store.stores.list(include_archived=True).data
        assert [s.id for s in listed] == ids[::-1]

    def test_list_created_at_bounds(self, store: Store) -> None:
        stores = [store.stores.create(f"s{i}") for i in range(4)]
        lo, hi = stores[1].created_at, stores[2].created_at
        got = store.stores.list(created_at_gte=lo, created_at_lte=hi).data
        assert [s.id for s in got] == [stores[2].id, stores[1].id]  # inclusive both ends
        assert [s.id for s in store.stores.list(created_at_gte=stores[3].created_at).data] == [
            stores[3].id
        ]
        # datetime bounds; a naive datetime is UTC
        dt = parse_time(lo)
        naive = dt.astimezone(UTC).replace(tzinfo=None)
        assert {s.id for s in store.stores.list(created_at_gte=naive).data} == {
            s.id for s in stores[1:]
        }
        offset = dt.astimezone(timezone(timedelta(hours=5)))
        assert {s.id for s in store.stores.list(created_at_lte=offset.isoformat()).data} == {
            stores[0].id,
            stores[1].id,
        }
        with pytest.raises(InvalidRequest):
            store.stores.list(created_at_gte="yesterday")

    def test_list_pagination(self, store: Store) -> None:
        ids = [store.stores.create(f"s{i}").id for i in range(5)]
        items, pages = all_pages(store.stores.list, limit=1)
        assert [s.id for s in items] == ids[::-1] and pages == 5
        items, pages = all_pages(store.stores.list, limit=2)
        assert [s.id for s in items] == ids[::-1] and pages == 3
        last = store.stores.list(limit=5)
        assert len(last.data) == 5 and last.next_page is None

    @pytest.mark.parametrize("limit", [0, 101, -1])
    def test_list_limit_range(self, store: Store, limit: int) -> None:
        with pytest.raises(InvalidRequest):
            store.stores.list(limit=limit)

    def test_list_foreign_cursor(self, store: Store) -> None:
        for i in range(3):
            store.stores.create(f"s{i}")
        cur = store.stores.list(limit=1).next_page
        assert cur
        with pytest.raises(InvalidCursor):
            store.stores.list(limit=1, page=cur, include_archived=True)
        with pytest.raises(InvalidCursor):
            store.stores.list(limit=1, page=cur, created_at_gte="2000-01-01T00:00:00Z")
        with pytest.raises(InvalidCursor):
            store.stores.list(page="garbage!!")
        s = store.stores.create("m")
        for i in range(3):
            store.memories.create(s.id, f"/m{i}", "x", actor=API)
        mcur = store.memories.list(s.id, limit=1).next_page
        assert mcur
        with pytest.raises(InvalidCursor):
            store.stores.list(page=mcur)
        with pytest.raises(InvalidCursor):
            store.memories.list(s.id, page=cur)

    def test_delete_cascades(self, store: Store) -> None:
        s = store.stores.create("n")
        other = store.stores.create("other")
        m = store.memories.create(s.id, "/a.md", "x", actor=API)
        m2 = store.memories.update(s.id, m.id, content="y", actor=API)
        keep = store.memories.create(other.id, "/a.md", "keep", actor=API)
        store.stores.archive(s.id)  # works on archived stores too
        store.stores.delete(s.id)
        with pytest.raises(NotFound):
            store.stores.get(s.id)
        with pytest.raises(NotFound):
            store.memories.get(s.id, m.id)
        with pytest.raises(NotFound):
            store.versions.get(s.id, m2.memory_version_id)
        with pytest.raises(NotFound):
            store.versions.list(s.id)
        with pytest.raises(NotFound):
            store.memories.list(s.id)
        with pytest.raises(NotFound):
            store.stores.delete(s.id)
        rows = store.all("SELECT count(*) FROM versions WHERE store_id = ?", (s.id,))
        assert rows[0][0] == 0
        assert store.memories.get(other.id, keep.id).content == "keep"


# ============================================================================================
# memories


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


# ============================================================================================
# path operations


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


# ============================================================================================
# versions


class TestVersions:
    @pytest.fixture
    def history(self, store: Store, sid: str) -> dict[str, Any]:
        s1, s2 = Actor.session("sesn_one"), Actor.session("sesn_two")
        a = store.memories.create(sid, "/a", "a1", actor=API)
        b = store.memories.create(sid, "/b", "b1", actor=s1)
        store.memories.update(sid, a.id, content="a2", actor=s1)
        store.memories.update(sid, b.id, content="b2", actor=USER)
        store.memories.delete(sid, b.id, actor=s2)
        return {"a": a, "b": b, "s1": s1, "s2": s2}

    def test_newest_first_and_filters(self, store: Store, sid: str, history: dict) -> None:
        allv = store.versions.list(sid).data
        assert len(allv) == 5
        assert [v.id for v in allv] == sorted((v.id for v in allv), reverse=True)
        assert [v.created_at for v in allv] == sorted((v.created_at for v in allv), reverse=True)
        assert [v.operation for v in allv] == ["deleted", "modified", "modified", "created",
                                               "created"]
        a, b = history["a"], history["b"]
        bv = store.versions.list(sid, memory_id=b.id).data  # a deleted memory still lists
        assert [v.operation for v in bv] == ["deleted", "modified", "created"]
        assert {v.memory_id for v in bv} == {b.id}
        assert [v.memory_id for v in store.versions.list(sid, operation="created").data] == [
            b.id, a.id]
        assert len(store.versions.list(sid, operation="deleted").data) == 1
        s1 = store.versions.list(sid, session_id="sesn_one").data
        assert [(v.memory_id, v.operation) for v in s1] == [(a.id, "modified"), (b.id, "created")]
        assert all(v.created_by == history["s1"] for v in s1)
        assert [v.memory_id for v in store.versions.list(sid, api_key_id="apikey_test").data] == [
            a.id]
        assert len(store.versions.list(sid, user_id="user_alice").data) == 1
        assert store.versions.list(sid, api_key_id="apikey_other").data == []
        both = store.versions.list(sid, session_id="sesn_one", operation="created").data
        assert [v.memory_id for v in both] == [b.id]
        assert store.versions.list(sid, memory_id="mem_nope").data == []
        with pytest.raises(InvalidRequest):
            store.versions.list(sid, operation="renamed")
        with pytest.raises(NotFound):
            store.versions.list("memstore_nope")

    def test_created_at_bounds(self, store: Store, sid: str, history: dict) -> None:
        allv = store.versions.list(sid).data[::-1]  # oldest first
        lo, hi = allv[1].created_at, allv[3].created_at
        got = store.versions.list(sid, created_at_gte=lo, created_at_lte=hi).data
        assert {v.id for v in got} == {v.id for v in allv if lo <= v.created_at <= hi}
        assert allv[1].id in {v.id for v in got} and allv[3].id in {v.id for v in got}
        assert allv[0].id not in {v.id for v in got} and allv[4].id not in {v.id for v in got}
        future = datetime.now(UTC) + timedelta(days=1)
        assert store.versions.list(sid, created_at_gte=future).data == []

    def test_pagination_and_view(self, store: Store, sid: str, history: dict) -> None:
        expected = store.versions.list(sid, view="full").data
        items, pages = all_pages(store.versions.list, store_id=sid, limit=1, view="full")
        assert items == expected and pages == 5
        items, pages = all_pages(store.versions.list, store_id=sid, limit=2, operation="modified")
        assert [v.operation for v in items] == ["modified", "modified"] and pages == 1
        basic = store.versions.list(sid).data
        assert all(v.content is None for v in basic)
        assert [v.content_sha256 for v in basic] == [v.content_sha256 for v in expected]
        assert [v.content for v in expected] == [None, "b2", "a2", "b1", "a1"]
        cur = store.versions.list(sid, limit=1).next_page
        with pytest.raises(InvalidCursor):
            store.versions.list(sid, limit=1, page=cur, operation="created")
        other = store.stores.create("other").id
        with pytest.raises(InvalidCursor):
            store.versions.list(other, limit=1, page=cur)
        for i in range(25):
            store.memories.update(sid, history["a"].id, content=f"n{i}", actor=API)
        assert len(store.versions.list(sid, limit=100, view="full").data) == 20
        assert len(store.versions.list(sid, limit=100).data) == 30
        with pytest.raises(InvalidRequest):
            store.versions.list(sid, limit=101)
        with pytest.raises(InvalidRequest):
            store.versions.list(sid, limit=0)

    def test_get(self, store: Store, sid: str, history: dict) -> None:
        a = history["a"]
        v = store.versions.get(sid, a.memory_version_id)
        assert (v.content, v.operation, v.created_by) == ("a1", "created", API)
        assert store.versions.get(sid, a.memory_version_id, view="basic").content is None
        assert v.to_dict()["created_by"] == {"type": "api_actor", "api_key_id": "apikey_test"}
        with pytest.raises(NotFound):
            store.versions.get(sid, "memver_nope")
        other = store.stores.create("other").id
        with pytest.raises(NotFound):
            store.versions.get(other, a.memory_version_id)

    def test_redact(self, store: Store, sid: str, history: dict) -> None:
        a = history["a"]
        first = a.memory_version_id
        with pytest.raises(InvalidRequest):
            store.versions.redact(sid, store.memories.get(sid, a.id).memory_version_id, actor=USER)
        r = store.versions.redact(sid, first, actor=USER)
        assert (r.path, r.content, r.content_sha256, r.content_size_bytes) == (None,) * 4
        assert r.redacted_at is not None and RFC3339_Z.match(r.redacted_at)
        assert r.redacted_by == USER
        assert (r.created_by, r.operation, r.memory_id) == (API, "created", a.id)
        assert store.versions.get(sid, first) == r
        again = store.versions.redact(sid, first, actor=Actor.api("apikey_other"))
        assert again == r  # idempotent: first redacted_at/redacted_by kept
        # the live memory is untouched
        assert store.memories.get(sid, a.id).content == "a2"
        assert first in {v.id for v in store.versions.list(sid, memory_id=a.id).data}
        with pytest.raises(NotFound):
            store.versions.redact(sid, "memver_nope", actor=USER)

    def test_redact_deleted_and_archived(self, store: Store, sid: str, history: dict) -> None:
        store.stores.archive(sid)
        b = history["b"]
        vs = store.versions.list(sid, memory_id=b.id).data
        for v in vs:  # b is deleted: none of its versions is a live head
            r = store.versions.redact(sid, v.id, actor=USER)
            assert r.redacted_at and r.path is None and r.operation == v.operation

    def test_restore_of_a_deleted_memory_keeps_its_id(self, store: Store, sid: str) -> None:
        """Undelete: the memory comes back under its old id (as a session revert brings it
        back), so its history stays one memory's, and the change feed tells mounts."""
        m = store.memories.create(sid, "/a.md", "one", actor=API)
        store.memories.update(sid, m.id, content="two", actor=API)
        store.memories.update(sid, m.id, path="/b.md", actor=API)
        store.memories.delete(sid, m.id, actor=API)
        first, _, _, deletion = (v.id for v in store.versions.list(sid, memory_id=m.id).data[::-1])
        seq = store.feed.last(sid)
        back = store.versions.restore(sid, first, actor=USER)
        assert (back.id, back.path, back.content) == (m.id, "/a.md", "one")
        assert store.memories.get(sid, m.id) == dataclasses.replace(back, seq=None)
        history = store.versions.list(sid, memory_id=m.id, view="full").data
        assert [v.operation for v in history] == ["created", "deleted", "modified", "modified",
                                                  "created"]
        assert history[0].id == back.memory_version_id and history[0].created_by == USER
        assert history[0].content == "one" and history[0].path == "/a.md"
        assert [(c.op, c.memory_id, c.path) for c in store.feed.since(sid, seq)] == [
            ("put", m.id, "/a.md")]
        assert store.memories.count(sid) == 1
        # A live memory gets the content (and keeps its path unless given one).
        again = store.versions.restore(sid, history[2].id, actor=USER)
        assert (again.id, again.path, again.content) == (m.id, "/a.md", "two")
        moved = store.versions.restore(sid, history[2].id, path="/c.md", actor=USER)
        assert (moved.id, moved.path, moved.content) == (m.id, "/c.md", "two")
        same = store.versions.restore(sid, history[2].id, actor=USER)  # nothing to change
        assert same.memory_version_id == moved.memory_version_id
        # Nothing to bring back from a deletion.
        with pytest.raises(InvalidRequest, match="deletion"):
            store.versions.restore(sid, deletion, actor=USER)
        with pytest.raises(NotFound):
            store.versions.restore(sid, "memver_nope", actor=USER)

    def test_restore_of_a_deleted_memory_follows_the_path_rules(
            self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a.md", "one", actor=API)
        store.memories.delete(sid, m.id, actor=API)
        squatter = store.memories.create(sid, "/a.md", "other", actor=API)
        n = len(store.versions.list(sid).data)
        with pytest.raises(PathConflict) as e:
            store.versions.restore(sid, m.memory_version_id, actor=USER)
        assert e.value.conflicting_memory_id == squatter.id
        with pytest.raises(PathConflict):
            store.versions.restore(sid, m.memory_version_id, path="/a.md/below", actor=USER)
        with pytest.raises(InvalidPath):
            store.versions.restore(sid, m.memory_version_id, path="no-slash", actor=USER)
        assert len(store.versions.list(sid).data) == n  # refused: nothing written
        back = store.versions.restore(sid, m.memory_version_id, path="/a2.md", actor=USER)
        assert (back.id, back.path) == (m.id, "/a2.md")
        store.memories.delete(sid, m.id, actor=API)
        store.versions.redact(sid, m.memory_version_id, actor=USER)
        with pytest.raises(InvalidRequest, match="redacted"):
            store.versions.restore(sid, m.memory_version_id, actor=USER)
        v = store.versions.list(sid, memory_id=m.id).data[1]  # the restored "created"
        store.stores.archive(sid)
        with pytest.raises(StoreArchived):
            store.versions.restore(sid, v.id, actor=USER)

    def test_restore_of_a_deleted_memory_counts_against_the_limit(
            self, backend: Backend) -> None:
        s = backend.open(limits=Limits(max_memories=1))
        st = s.stores.create("n").id
        m = s.memories.create(st, "/a", "x", actor=API)
        s.memories.delete(st, m.id, actor=API)
        s.memories.create(st, "/b", "y", actor=API)
        with pytest.raises(LimitExceeded):
            s.versions.restore(st, m.memory_version_id, actor=USER)
        assert s.versions.list(st, memory_id=m.id).data[0].operation == "deleted"

    def test_retention_prune(self, backend: Backend) -> None:
        s = backend.open(limits=Limits(retention_days=1, retention_keep=3))
        try:
            st = s.stores.create("n").id
            m = s.memories.create(st, "/a", "v0", actor=API)
            for i in range(1, 6):
                s.memories.update(st, m.id, content=f"v{i}", actor=API)
            short = s.memories.create(st, "/b", "only", actor=API)
            gone = s.memories.create(st, "/c", "c0", actor=API)
            for i in range(1, 4):
                s.memories.update(st, gone.id, content=f"c{i}", actor=API)
            s.memories.delete(st, gone.id, actor=API)  # 5 versions for a deleted memory
            # inside the window nothing goes, however many versions there are
            assert s.versions.prune() == 0
            assert s.versions.prune(now=datetime.now(UTC) + timedelta(hours=23)) == 0
            assert len(s.versions.list(st, limit=100).data) == 12
            deleted = s.versions.prune(now=datetime.now(UTC) + timedelta(days=2))
            assert deleted == 3 + 2
            a_vs = s.versions.list(st, memory_id=m.id, view="full").data
            assert [v.content for v in a_vs] == ["v5", "v4", "v3"]
            assert len(s.versions.list(st, memory_id=short.id).data) == 1
            c_vs = s.versions.list(st, memory_id=gone.id).data
            assert [v.operation for v in c_vs] == ["deleted", "modified", "modified"]
            assert s.memories.get(st, m.id).content == "v5"  # live heads are never pruned
            assert s.versions.prune(now=datetime.now(UTC) + timedelta(days=2)) == 0
        finally:
            s.close()

    def test_retention_never_prunes_a_live_head(self, backend: Backend) -> None:
        s = backend.open(limits=Limits(retention_days=1, retention_keep=0))
        try:
            st = s.stores.create("n").id
            m = s.memories.create(st, "/a", "v0", actor=API)
            m = s.memories.update(st, m.id, content="v1", actor=API)
            assert s.versions.prune(now=datetime.now(UTC) + timedelta(days=2)) == 1
            assert s.versions.get(st, m.memory_version_id).content == "v1"
            assert s.memories.get(st, m.id).memory_version_id == m.memory_version_id
        finally:
            s.close()


# ============================================================================================
# ids and time


class TestIdsAndTime:
    def test_prefixes(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a", "x", actor=API)
        sess = store.sessions.create([{"type": "memory_store", "memory_store_id": sid}])
        assert sid.startswith("memstore_") and m.id.startswith("mem_")
        assert m.memory_version_id.startswith("memver_") and sess.id.startswith("sesn_")
        assert sess.resources[0].id.startswith("sesrsc_")

    def test_strictly_increasing(self) -> None:
        ids = [new_id("mem") for _ in range(5000)]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        assert all(re.fullmatch(r"mem_01[1-9A-HJ-NP-Za-km-z]{22}", i) for i in ids[:50])

    def test_ids_made_in_batches_are_strictly_increasing_with_the_others(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from memfs import rules
        from memfs.rules import new_ids

        ids = []
        for i in range(2000):
            ids += new_ids("sevt", 2) if i % 2 else [new_id("sevt")]
        assert ids == sorted(ids) and len(set(ids)) == len(ids) == 3000
        assert all(re.fullmatch(r"sevt_01[1-9A-HJ-NP-Za-km-z]{22}", i) for i in ids[:50])
        # The last two digits wrap (value % 58² == 58² - 1): the next id is formatted whole.
        monkeypatch.setattr(rules, "time", SimpleNamespace(time_ns=lambda: 0))
        monkeypatch.setattr(rules.secrets, "randbits", lambda k: 3363)
        monkeypatch.setattr(rules, "_last_id_value", 0)
        a, b, c = new_ids("sevt", 3)
        assert a < b < c and a[-2:] == "zz" and b[-2:] == "11" and c[-2:] == "12"
        assert b[:-2] != a[:-2]

    def test_timestamps(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a", "x", actor=API)
        for t in (m.created_at, m.updated_at, store.stores.get(sid).created_at):
            assert RFC3339_Z.match(t)
            assert parse_time(t).tzinfo is not None

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("2024-05-06T07:08:09Z", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)),
            ("2024-05-06T07:08:09.5Z", datetime(2024, 5, 6, 7, 8, 9, 500000, tzinfo=UTC)),
            ("2024-05-06T09:08:09+02:00", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)),
            ("2024-05-06T07:08:09.123456z", datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)),
            ("2024-05-06T07:08:09", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)),
        ],
    )
    def test_parse_time(self, text: str, expected: datetime) -> None:
        assert parse_time(text) == expected
        assert format_time(parse_time(text)).endswith("Z")

    def test_parse_time_rejects(self) -> None:
        for bad in ("", "soon", "2024-13-01T00:00:00Z"):
            with pytest.raises(InvalidRequest):
                parse_time(bad)
        naive = datetime(2024, 1, 1, 12)
        assert parse_time(naive) == datetime(2024, 1, 1, 12, tzinfo=UTC)


# ============================================================================================
# sessions and events


def res(store_id: str, **kw: Any) -> dict[str, Any]:
    return {"type": "memory_store", "memory_store_id": store_id, **kw}


class TestSessions:
    def test_create_and_snapshot(self, store: Store) -> None:
        s = store.stores.create("User Preferences!", description="prefs")
        sess = store.sessions.create([res(s.id, access="read_only", instructions="be nice")])
        assert sess.status == "idle"
        (r,) = sess.resources
        assert (r.memory_store_id, r.access, r.instructions) == (s.id, "read_only", "be nice")
        assert (r.name, r.description, r.mount_path) == (
            "User Preferences!", "prefs", "/mnt/memory/user-preferences")
        store.stores.update(s.id, name="Renamed", description="new")
        again = store.sessions.get(sess.id)
        assert (again.resources[0].name, again.resources[0].description) == (
            "User Preferences!", "prefs")
        assert again.resources[0].mount_path == "/mnt/memory/user-preferences"
        later = store.sessions.create([res(s.id)])
        assert later.resources[0].mount_path == "/mnt/memory/renamed"
        assert later.resources[0].access == "read_write"
        assert later.resources[0].instructions is None
        d = sess.to_dict()
        assert d["resources"][0]["mount_path"] == "/mnt/memory/user-preferences"

    def test_validation(self, store: Store) -> None:
        ids = [store.stores.create(f"s{i}").id for i in range(9)]
        ok = store.sessions.create([res(i) for i in ids[:8]])
        assert len(ok.resources) == 8
        with pytest.raises(LimitExceeded):
            store.sessions.create([res(i) for i in ids])
        with pytest.raises(NotFound):
            store.sessions.create([res("memstore_nope")])
        with pytest.raises(InvalidRequest):
            store.sessions.create([res(ids[0]), res(ids[0])])
        assert store.sessions.create([res(ids[0], instructions="i" * 4096)]).resources
        with pytest.raises(InvalidRequest):
            store.sessions.create([res(ids[0], instructions="i" * 4097)])
        with pytest.raises(InvalidRequest):
            store.sessions.create([res(ids[0], access="write")])
        with pytest.raises(InvalidRequest):
            store.sessions.create([{"type": "file", "file_id": "f"}])
        store.stores.archive(ids[1])
        with pytest.raises(StoreArchived):
            store.sessions.create([res(ids[0]), res(ids[1])])
        # failed creations left no sessions behind
        assert len(store.sessions.list(limit=100).data) == 2

    def test_mount_path_collisions(self, store: Store) -> None:
        a = store.stores.create("Notes")
        b = store.stores.create("Notes")
        c = store.stores.create("notes-2")
        e = store.stores.create("!!!")
        sess = store.sessions.create([res(a.id), res(b.id), res(c.id), res(e.id)],
                                    root="/mnt/memory/")
        paths = [r.mount_path for r in sess.resources]
        assert paths[:2] == ["/mnt/memory/notes", "/mnt/memory/notes-2"]
        assert paths[2] == "/mnt/memory/notes-2-2"  # the store named "notes-2" does not collide
        assert paths[3] == f"/mnt/memory/{e.id}"
        assert len(set(paths)) == 4
        rev = store.sessions.create([res(c.id), res(a.id), res(b.id)], root="/r")
        rpaths = [r.mount_path for r in rev.resources]
        assert rpaths[0] == "/r/notes-2" and rpaths[1] == "/r/notes" and len(set(rpaths)) == 3

    def test_list_filter_order_pagination(self, store: Store) -> None:
        s1, s2 = store.stores.create("a").id, store.stores.create("b").id
        x = store.sessions.create([res(s1)])
        y = store.sessions.create([res(s2)])
        z = store.sessions.create([res(s1), res(s2)], status="running")
        assert [s.id for s in store.sessions.list().data] == [z.id, y.id, x.id]
        assert [s.id for s in store.sessions.list(order="asc").data] == [x.id, y.id, z.id]
        assert [s.id for s in store.sessions.list(memory_store_id=s1).data] == [z.id, x.id]
        assert [s.id for s in store.sessions.list(statuses=["running"]).data] == [z.id]
        assert [s.id for s in store.sessions.list(statuses=["idle", "running"]).data] == [
            z.id, y.id, x.id]
        items, pages = all_pages(store.sessions.list, limit=1)
        assert [s.id for s in items] == [z.id, y.id, x.id] and pages == 3
        items, pages = all_pages(store.sessions.list, limit=1, order="asc")
        assert [s.id for s in items] == [x.id, y.id, z.id]
        with pytest.raises(InvalidRequest):
            store.sessions.list(statuses=["sleeping"])
        with pytest.raises(InvalidRequest):
            store.sessions.list(order="sideways")
        cur = store.sessions.list(limit=1).next_page
        with pytest.raises(InvalidCursor):
            store.sessions.list(limit=1, page=cur, order="asc")

    def test_resources_by_id_or_store(self, store: Store) -> None:
        a, b = store.stores.create("a").id, store.stores.create("b").id
        sess = store.sessions.create([res(a), res(b, access="read_only")])
        ra, rb = sess.resources
        assert store.sessions.get_resource(sess.id, rb.id) == rb
        assert store.sessions.get_resource(sess.id, a) == ra
        with pytest.raises(NotFound):
            store.sessions.get_resource(sess.id, "sesrsc_nope")
        with pytest.raises(NotFound):
            store.sessions.get_resource("sesn_nope", ra.id)
        other = store.sessions.create([res(b)])
        with pytest.raises(NotFound):
            store.sessions.get_resource(other.id, ra.id)

    def test_list_pages_keep_resources(self, store: Store) -> None:
        ids = [store.stores.create(f"s{i}").id for i in range(3)]
        made = [store.sessions.create([res(i) for i in ids[: n + 1]]) for n in range(3)]
        made.append(store.sessions.create([]))
        items, _ = all_pages(store.sessions.list, limit=2, order="asc")
        assert items == [store.sessions.get(s.id) for s in made]
        assert [len(s.resources) for s in items] == [1, 2, 3, 0]

    def test_prompt_names_the_root(self, store: Store) -> None:
        from memfs.launcher.prompt import render_memory_prompt

        s = store.stores.create("Notes").id
        for root, shown in (("/mnt/memory", "/mnt/memory/"), ("/", "/")):
            text = render_memory_prompt(store.sessions.create([res(s)], root=root))
            assert f"mounted as a directory under {shown}. " in text
            assert f"Files written anywhere else under {shown} are scratch" in text

    def test_status_events(self, store: Store) -> None:
        s = store.stores.create("a").id
        sess = store.sessions.create([res(s)])
        r = store.sessions.set_status(sess.id, "running")
        assert r.status == "running" and r.updated_at >= sess.updated_at
        store.sessions.set_status(sess.id, "running")  # no change: no second event
        store.sessions.set_status(sess.id, "idle")
        store.sessions.set_status(sess.id, "terminated")
        types = [e.type for e in store.events.list(sess.id).data]
        assert types == ["session.status_running", "session.status_idle",
                         "session.status_terminated"]
        idle = store.events.list(sess.id, types=["session.status_idle"]).data[0]
        assert idle.body["stop_reason"] == {"type": "end_turn"}
        assert store.sessions.get(sess.id).status == "terminated"
        with pytest.raises(InvalidRequest):
            store.sessions.set_status(sess.id, "sleeping")
        with pytest.raises(NotFound):
            store.sessions.set_status("sesn_nope", "idle")

    def test_events(self, store: Store) -> None:
        s = store.stores.create("a").id
        sess = store.sessions.create([res(s)])
        evs = store.events.add(
            sess.id,
            [{"type": "agent.tool_use", "name": "cat", "input": {"operation": "read"}}]
            + [{"type": "agent.tool_result", "n": i} for i in range(4)],
        )
        assert all(e.id and e.processed_at for e in evs) and len({e.id for e in evs}) == 5
        assert RFC3339_Z.match(evs[0].processed_at)
        listed = store.events.list(sess.id).data
        assert [e.id for e in listed] == [e.id for e in evs]
        assert listed[0].body["name"] == "cat" and listed[0].to_dict()["type"] == "agent.tool_use"
        assert [e.id for e in store.events.list(sess.id, order="desc").data] == [
            e.id for e in evs[::-1]]
        res_only = store.events.list(sess.id, types=["agent.tool_result"]).data
        assert [e.body["n"] for e in res_only] == [0, 1, 2, 3]
        items, pages = all_pages(store.events.list, session_id=sess.id, limit=1)
        assert [e.id for e in items] == [e.id for e in evs] and pages == 5
        items, pages = all_pages(store.events.list, session_id=sess.id, limit=2, order="desc",
                                 types=["agent.tool_result"])
        assert [e.body["n"] for e in items] == [3, 2, 1, 0] and pages == 2
        assert len(store.events.list(sess.id, limit=1000).data) == 5
        with pytest.raises(InvalidRequest):
            store.events.add(sess.id, [{"no": "type"}])
        with pytest.raises(NotFound):
            store.events.add("sesn_nope", [{"type": "x"}])
        with pytest.raises(NotFound):
            store.events.list("sesn_nope")


def test_record_tool_events_records_a_mounts_own_events_as_they_are(store):
    """The trusted path of the event flusher: the rows stored as given, in order."""
    import json

    from memfs.fuse.toolevents import tool_pair

    def rows(events):
        return [(e["id"], e["type"], e["processed_at"], json.dumps(e, ensure_ascii=False))
                for e in events]

    s = store.stores.create("a").id
    sess = store.sessions.create([res(s)])
    pairs = tool_pair("cat", 7, "read", "/mnt/memory/a/é.md", text="read é") + tool_pair(
        "sh", 8, "write", "/mnt/memory/a/b.md", failure="No space")
    assert store.events.record_tool_events(sess.id, rows(pairs), store_id=s) == 4
    listed = store.events.list(sess.id).data
    assert [e.body for e in listed] == pairs
    assert [(e.id, e.type, e.processed_at) for e in listed] == [
        (p["id"], p["type"], p["processed_at"]) for p in pairs]
    # A mount without a session: kept with the store only.
    assert store.events.record_tool_events(None, rows(tool_pair("cat", 1, "read", "/x")),
                                    store_id=s) == 2
    assert len(store.events.list(sess.id).data) == 4
    # A lone surrogate cannot reach the database (every reader would fail on it).
    bad = tool_pair("cat", 1, "read", "/x", text="bad \udc80")
    store.events.record_tool_events(sess.id, rows(bad), store_id=s)
    assert store.events.list(sess.id).data[-1].body["content"][0]["text"] == "bad ?"
    with pytest.raises(NotFound):
        store.events.record_tool_events("sesn_nope", rows(pairs))


def test_session_events_of_several_stores_list_in_time_order(store):
    """Each mount of a session flushes its own batch of tool events, so one store's batch lands
    after another's although its events happened in between: the timeline follows
    processed_at (ties in the order recorded), in both orders and across pages."""
    import json

    a, b = store.stores.create("a").id, store.stores.create("b").id
    sess = store.sessions.create([res(a), res(b)])

    def rows(times: list[str]) -> list[tuple[str, str, str, str]]:
        made = []
        for t in times:
            e = {"id": new_id("sevt"), "type": "agent.tool_use", "processed_at": t,
                 "name": "cat", "input": {"operation": "read"}}
            made.append((e["id"], e["type"], t, json.dumps(e)))
        return made

    at = "2026-05-01T04:51:5{}.000000Z".format
    # Store a's batch (04:51:56, :58) is flushed first, b's (:55, :57, and :58 again) after.
    first, second = rows([at(6), at(8)]), rows([at(5), at(7), at(8)])
    store.events.record_tool_events(sess.id, first, store_id=a)
    store.events.record_tool_events(sess.id, second, store_id=b)
    want = [second[0][0], first[0][0], second[1][0], first[1][0], second[2][0]]
    assert [e.id for e in store.events.list(sess.id).data] == want
    assert [e.id for e in store.events.list(sess.id, order="desc").data] == want[::-1]
    for order, expected in (("asc", want), ("desc", want[::-1])):
        items, pages = all_pages(store.events.list, session_id=sess.id, limit=2, order=order)
        assert [e.id for e in items] == expected and pages == 3
    # The time filters and types still apply with the time order.
    later = store.events.list(sess.id, created_at_gt=at(6)).data
    assert [e.id for e in later] == want[2:]


def test_memory_count_follows_every_kind_of_write(store):
    """stores.memory_count (kept by triggers) always equals the live memories."""
    from memfs import Actor

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


def test_launched_sessions_are_those_a_local_launcher_owns_and_not_ended(store):
    owner = {"host": "h", "boot_id": "b", "pid": 1, "start": 2}
    mine = store.sessions.create([], launcher=owner)
    store.sessions.create([])  # through the API: no launcher
    ended = store.sessions.create([], launcher=owner)
    store.sessions.set_status(ended.id, "terminated")
    assert store.sessions.launched() == [(mine.id, owner)]


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
# indexes for the filtered listings; the change feed and the events are bounded (issue 8)


def _plans(store: Store, fn: Callable[[], Any]) -> list[str]:
    """The query plans of the SELECTs ``fn`` runs (traced with their bound values)."""
    seen: list[str] = []
    # Reads go through this thread's reader connection, writes through the writer.
    conns = {id(c): c for c in (store.conn, store.database.reader())}.values()
    for c in conns:
        c.set_trace_callback(seen.append)
    try:
        fn()
    finally:
        for c in conns:
            c.set_trace_callback(None)
    return [
        " | ".join(r[3] for r in store.conn.execute("EXPLAIN QUERY PLAN " + sql))
        for sql in seen if sql.lstrip().upper().startswith("SELECT")
    ]


class TestIndexes:
    @pytest.fixture
    def store(self, db_path: Any) -> Iterator[Store]:  # SQLite's query plans
        s = Store(db_path, limits=Limits())
        yield s
        s.close()

    def test_filtered_listings_search_an_index_of_their_own(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a.md", "a", actor=Actor.session("sesn_x"))
        store.sessions.create([])
        store.sessions.create([], launcher={"host": "h", "boot_id": "b", "pid": 1, "start": 2})
        cases = {
            "versions_memory_time": lambda: store.versions.list(sid, memory_id=m.id),
            "versions_actor": lambda: store.versions.list(sid, session_id="sesn_x"),
            "versions_operation": lambda: store.versions.list(sid, operation="deleted"),
            "stores_name": lambda: store.stores.resolve("Notes"),
            "sessions_launched": store.sessions.launched,
        }
        for index, fn in cases.items():
            plans = _plans(store, fn)
            assert any(index in p for p in plans), (index, plans)
            # a scan only of the (partial) index itself: never of a table
            assert not any("SCAN" in p and index not in p for p in plans), (index, plans)


class TestIndexesPostgreSQL:
    """The same listings on PostgreSQL find the same indexes in its schema (with sequential
    scans disabled, as on a table far larger than a test's, the planner uses one if it
    applies)."""

    def test_filtered_listings_search_an_index_of_their_own(self, pg_cluster: Any,
                                                            monkeypatch: Any) -> None:
        from memfs.backends.postgresql import PgConnection, translate_sql

        pg_cluster.empty_database(pg_cluster.shared)
        store = Store(pg_cluster.url(pg_cluster.shared), limits=Limits())
        try:
            sid = store.stores.create("Notes").id
            m = store.memories.create(sid, "/a.md", "a", actor=Actor.session("sesn_x"))
            # A store of many memories, and fresh statistics: the planner's choice then
            # follows selectivity, not whatever statistics earlier tests left behind.
            for i in range(60):
                other = store.memories.create(sid, f"/o/{i}.md", "x", actor=Actor.api("apikey_y"))
                store.memories.update(sid, other.id, content="y", actor=Actor.api("apikey_y"))
            store.sessions.create([])
            store.sessions.create([], launcher={"host": "h", "boot_id": "b", "pid": 1,
                                               "start": 2})
            with store.database.write() as c:
                c.raw.execute("ANALYZE")
            seen: list[tuple[str, Any]] = []
            execute = PgConnection.execute

            def tracing(self: PgConnection, sql: str, params: Any = ()) -> Any:
                seen.append((sql, params))
                return execute(self, sql, params)

            cases = {
                "versions_memory_time": lambda: store.versions.list(sid, memory_id=m.id),
                "versions_actor": lambda: store.versions.list(sid, session_id="sesn_x"),
                "versions_operation": lambda: store.versions.list(sid, operation="deleted"),
                "stores_name": lambda: store.stores.resolve("Notes"),
                "sessions_launched": store.sessions.launched,
            }
            for index, fn in cases.items():
                seen.clear()
                monkeypatch.setattr(PgConnection, "execute", tracing)
                fn()
                monkeypatch.setattr(PgConnection, "execute", execute)
                plans = []
                with store.database.write() as c:  # one transaction: SET LOCAL holds in it
                    c.raw.execute("SET LOCAL enable_seqscan = off")
                    for sql, params in seen:
                        if sql.lstrip().upper().startswith("SELECT"):
                            rows = c.raw.execute("EXPLAIN " + translate_sql(sql),
                                                 params or None).fetchall()
                            plans.append(" | ".join(r[0] for r in rows))
                assert any(index in p for p in plans), (index, plans)
        finally:
            store.close()


def _count(store: Store, table: str, where: str = "1", params: tuple[Any, ...] = ()) -> int:
    row = store.one(f"SELECT count(*) FROM {table} WHERE {where}", params)
    assert row is not None
    return int(row[0])


class TestFeedBounds:
    def test_prune_keeps_the_newest_changes_and_the_last_day(self, store: Store) -> None:
        from memfs.errors import FeedGap

        store.feed_keep = 3
        a, b = store.stores.create("a").id, store.stores.create("b").id
        for i in range(6):
            store.memories.write_path(a, "/x.md", f"a{i}", actor=API)
            store.memories.write_path(b, "/y.md", f"b{i}", actor=API)
        seqs = [c.seq for c in store.feed.since(a, 0)]
        assert len(seqs) == 6
        store.versions.prune(now=datetime.now(UTC) + timedelta(hours=23))  # all within a day
        assert [c.seq for c in store.feed.since(a, 0)] == seqs
        store.versions.prune(now=datetime.now(UTC) + timedelta(hours=25))
        assert _count(store, "changes", "store_id = ?", (a,)) == 3
        assert _count(store, "changes", "store_id = ?", (b,)) == 3
        # a follower that read up to seqs[2] (the newest pruned) misses nothing
        assert [c.seq for c in store.feed.since(a, seqs[2])] == seqs[3:]
        # one behind that would miss changes silently: it is told to reload
        for behind in (0, seqs[0], seqs[1]):
            with pytest.raises(FeedGap):
                store.feed.since(a, behind)
        assert store.feed.last(a) == seqs[-1]

    def test_the_feed_is_pruned_every_nth_change(self, store: Store, sid: str) -> None:
        from memfs.errors import FeedGap

        store.feed_keep, store.feed_keep_age, store.feed_prune_every = 5, timedelta(0), 10
        start = store.feed.last(sid)
        for i in range(40):
            store.memories.write_path(sid, "/x.md", str(i), actor=API)
        assert 5 <= _count(store, "changes", "store_id = ?", (sid,)) < 5 + 10
        with pytest.raises(FeedGap):
            store.feed.since(sid, start)
        fresh = store.feed.last(sid)
        store.memories.write_path(sid, "/x.md", "after", actor=API)
        assert [c.path for c in store.feed.since(sid, fresh)] == ["/x.md"]

    def test_events_of_deleted_sessions_and_old_mount_events_go(self, backend: Backend) -> None:
        s = backend.open(limits=Limits(retention_days=1))
        try:
            st = s.stores.create("n").id
            kept = s.sessions.create([])
            gone = s.sessions.create([])
            for sess in (kept.id, gone.id):
                s.events.send(sess, [{"type": "user.message", "content": []}])
            s.events.add_tool_events(None, [
                {"type": "agent.tool_use", "id": "sevt_old", "name": "bash",
                 "processed_at": format_time(datetime.now(UTC) - timedelta(hours=30)),
                 "input": {}},
                {"type": "agent.tool_use", "id": "sevt_new", "name": "bash",
                 "processed_at": format_time(datetime.now(UTC)), "input": {}},
            ], store_id=st)
            s.sessions.delete(gone.id)
            n_kept = _count(s, "events", "session_id = ?", (kept.id,))
            # right after the deletion its events stay (a live stream still ends on
            # session.deleted); mount events inside the retention window stay
            s.versions.prune()
            assert _count(s, "events", "session_id = ?", (gone.id,)) > 0
            assert _count(s, "events", "session_id IS NULL") == 1  # sevt_old is past 1 day
            s.versions.prune(now=datetime.now(UTC) + timedelta(hours=2))
            assert _count(s, "events", "session_id = ?", (gone.id,)) == 0
            assert _count(s, "events", "session_id = ?", (kept.id,)) == n_kept
            s.versions.prune(now=datetime.now(UTC) + timedelta(days=40))
            assert _count(s, "events", "session_id = ?", (kept.id,)) == n_kept  # the audit log
            assert _count(s, "events", "session_id IS NULL") == 0
        finally:
            s.close()


# ============================================================================================
# several processes on one database (PostgreSQL: replicas of `memfs serve`, issue 12)


class TestReplicas:
    """Two Store objects on one database, each with connections of its own (on PostgreSQL a
    pool each, as two servers have), written from many threads at once."""

    def test_the_memory_limit_is_exact_across_replicas(self, backend: Backend) -> None:
        import threading

        limit, threads, tries = 40, 8, 12  # 96 creates race for 40 places
        a = backend.open(limits=Limits(max_memories=limit))
        b = backend.open(limits=Limits(max_memories=limit))
        sid = a.stores.create("shared").id
        created: list[str] = []
        refused: list[Exception] = []
        unexpected: list[BaseException] = []
        start = threading.Barrier(threads)

        def creator(n: int) -> None:
            s = (a, b)[n % 2]
            start.wait()
            for i in range(tries):
                try:
                    created.append(s.memories.create(sid, f"/t{n}/{i}.md", f"{n}.{i}",
                                                   actor=API).id)
                except LimitExceeded as e:
                    refused.append(e)
                except BaseException as e:  # noqa: BLE001  (reported below)
                    unexpected.append(e)

        pool = [threading.Thread(target=creator, args=(n,)) for n in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        assert not unexpected, unexpected
        assert len(created) == limit and len(refused) == threads * tries - limit
        for s in (a, b):
            assert s.memories.count(sid) == limit
            assert len(s.memories.tree(sid)) == limit
        assert len(set(created)) == limit

    def test_preconditions_lose_no_version_across_replicas(self, backend: Backend) -> None:
        import threading

        a, b = backend.open(), backend.open()
        sid = a.stores.create("shared").id
        m = a.memories.create(sid, "/counter.md", "0", actor=API)
        threads, rounds = 6, 15
        won: list[str] = []
        unexpected: list[BaseException] = []
        start = threading.Barrier(threads)

        def incrementer(n: int) -> None:
            s = (a, b)[n % 2]
            start.wait()
            done = 0
            while done < rounds:
                try:
                    cur = s.memories.get(sid, m.id)
                    new = str(int(cur.content) + 1)
                    s.memories.update(sid, m.id, content=new,
                                    precondition_sha256=cur.content_sha256, actor=API)
                except PreconditionFailed:
                    continue
                except BaseException as e:  # noqa: BLE001  (reported below)
                    unexpected.append(e)
                    return
                won.append(new)
                done += 1

        pool = [threading.Thread(target=incrementer, args=(n,)) for n in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        assert not unexpected, unexpected
        total = threads * rounds
        # every increment that succeeded is one version, none lost, none twice
        assert sorted(int(w) for w in won) == list(range(1, total + 1))
        assert b.memories.get(sid, m.id).content == str(total)
        history, _ = all_pages(b.versions.list, store_id=sid, memory_id=m.id, view="full")
        assert [v.content for v in history] == [str(i) for i in range(total, -1, -1)]
