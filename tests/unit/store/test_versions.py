"""``store.versions`` (versions.py) against API.md §7.1: listing, reading, redacting and restoring
versions, and retention."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memfs import (
    Actor,
    InvalidCursor,
    InvalidPath,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    PathConflict,
    StoreArchived,
)
from memfs.store import Limits, Store
from tests.support.backend import Backend
from tests.support.storekit import API, RFC3339_Z, USER, all_pages


@pytest.fixture
def store(backend: Backend) -> Store:
    """Every test of this module runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


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

    @pytest.mark.parametrize("write", ["update", "rename", "delete", "write_path", "restore"])
    def test_a_write_keeps_exactly_the_newest_versions_with_its_own(
            self, backend: Backend, write: str) -> None:
        """A write prunes its memory's history in the statement that writes it (one round
        trip on PostgreSQL, where the prune cannot see the version beside it): it keeps the
        newest ``retention_keep`` counting its own, as a prune after it would."""
        s = backend.open(limits=Limits(retention_days=1, retention_keep=3))
        st = s.stores.create("n").id
        m = s.memories.create(st, "/a", "v0", actor=API)
        for i in range(1, 5):
            s.memories.update(st, m.id, content=f"v{i}", actor=API)
        with s.write() as c:  # every version out of the window
            c.execute("UPDATE versions SET created_at = ? WHERE memory_id = ?",
                      ("2000-01-01T00:00:00.000000Z", m.id))
        if write == "update":
            s.memories.update(st, m.id, content="v5", actor=API)
        elif write == "rename":
            s.memories.update(st, m.id, path="/b", actor=API)
        elif write == "delete":
            s.memories.delete(st, m.id, actor=API)
        elif write == "write_path":
            s.memories.write_path(st, "/a", "v5", actor=API)
        else:
            s.memories.delete(st, m.id, actor=API)
            with s.write() as c:
                c.execute("UPDATE versions SET created_at = ? WHERE memory_id = ?",
                          ("2000-01-01T00:00:00.000000Z", m.id))
            v3 = next(v for v in s.versions.list(st, memory_id=m.id, view="full").data
                      if v.content == "v3")
            s.versions.restore(st, v3.id, actor=API)  # its third newest: pruned by this
        vs = s.versions.list(st, memory_id=m.id, view="full").data
        assert [v.content for v in vs][1:] == {
            "update": ["v4", "v3"], "rename": ["v4", "v3"], "delete": ["v4", "v3"],
            "write_path": ["v4", "v3"], "restore": [None, "v4"]}[write]
        assert len(vs) == 3

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
