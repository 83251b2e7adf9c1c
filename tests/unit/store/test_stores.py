"""``store.stores`` (stores.py) against API.md §2: memory stores, their fields, limits, listing and
deletion."""

from __future__ import annotations

from datetime import UTC, timedelta, timezone

import pytest

from memfs import (
    InvalidCursor,
    InvalidRequest,
    NotFound,
    StoreArchived,
)
from memfs.store import Store, parse_time
from tests.support.backend import Backend
from tests.support.storekit import API, RFC3339_Z, all_pages


@pytest.fixture
def store(backend: Backend) -> Store:
    """Every test of this module runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


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
