"""``store.sessions`` (sessions.py): sessions, their resources and mount paths, status."""

from __future__ import annotations

from typing import Any

import pytest

from memfs import (
    InvalidCursor,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    StoreArchived,
)
from memfs.store import Store
from tests.support.backend import Backend
from tests.support.storekit import all_pages, res


@pytest.fixture
def store(backend: Backend) -> Store:
    """Every test of this module runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


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


def test_launched_sessions_are_those_a_local_launcher_owns_and_not_ended(store):
    owner = {"host": "h", "boot_id": "b", "pid": 1, "start": 2}
    mine = store.sessions.create([], launcher=owner)
    store.sessions.create([])  # through the API: no launcher
    ended = store.sessions.create([], launcher=owner)
    store.sessions.set_status(ended.id, "terminated")
    assert store.sessions.launched() == [(mine.id, owner)]


class TestMetadataFilter:
    """Sessions listed by their metadata (issue 43: a thread's sessions, a user's), on SQLite
    and PostgreSQL alike."""

    def test_only_sessions_holding_every_pair(self, store: Store) -> None:
        a = store.sessions.create([], metadata={"thread": "t1", "user": "ann"}).id
        b = store.sessions.create([], metadata={"thread": "t1", "user": "bob"}).id
        c = store.sessions.create([], metadata={"thread": "t2", "user": "ann"}).id
        store.sessions.create([])

        def ids(**kw: Any) -> list[str]:
            items, _ = all_pages(store.sessions.list, limit=1, order="asc", **kw)
            return [s.id for s in items]

        assert ids(metadata={"thread": "t1"}) == [a, b]
        assert ids(metadata={"user": "ann"}) == [a, c]
        assert ids(metadata={"thread": "t1", "user": "ann"}) == [a]
        assert ids(metadata={"thread": "t3"}) == []
        assert ids(metadata={"thread": "T1"}) == []
        assert len(ids(metadata={})) == 4 and len(ids(metadata=None)) == 4

    def test_keys_and_values_of_any_text(self, store: Store) -> None:
        odd = {'a"b': "x'y", "$.k": "%", "é 日本": "", "k[0]": "v\\n"}
        s = store.sessions.create([], metadata=odd).id
        store.sessions.create([], metadata={"a": "b"})
        for k, v in odd.items():
            assert [x.id for x in store.sessions.list(metadata={k: v}).data] == [s], k
        assert store.sessions.list(metadata={"$.k": "%%"}).data == []
        assert store.sessions.list(metadata={"a": "%"}).data == []

    def test_the_filter_follows_an_update(self, store: Store) -> None:
        s = store.sessions.create([], metadata={"thread": "t1"}).id
        store.sessions.update(s, metadata={"thread": "t2"})
        assert store.sessions.list(metadata={"thread": "t1"}).data == []
        assert [x.id for x in store.sessions.list(metadata={"thread": "t2"}).data] == [s]

    @pytest.mark.parametrize("odd", [{"k": "a\x00b"}, {"k\x00": "v"}])
    def test_a_sessions_metadata_holds_no_nul(self, store: Store, odd: dict) -> None:
        """A stored NUL broke every filter on PostgreSQL (its jsonb has none: each row is
        cast) and was matched by its text up to the NUL on SQLite ({"k": "a"} found
        "a\\x00b")."""
        with pytest.raises(InvalidRequest, match="NUL"):
            store.sessions.create([], metadata=odd)
        s = store.sessions.create([], metadata={"thread": "t1"}).id
        with pytest.raises(InvalidRequest, match="NUL"):
            store.sessions.update(s, metadata=odd)
        assert store.sessions.get(s).metadata == {"thread": "t1"}
        assert [x.id for x in store.sessions.list(metadata={"thread": "t1"}).data] == [s]

    @pytest.mark.parametrize("metadata, match", [
        ({"": "v"}, "keys must be 1 to 64"),
        ({"k" * 65: "v"}, "keys must be 1 to 64"),
        ({"k": "v" * 513}, "at most 512"),
        ({"k": 1}, "values must be strings"),
        ({f"k{i}": "v" for i in range(17)}, "at most 16 pairs"),
        ({"k": "\ud800"}, "UTF-8|surrogate"),
        ("k=v", "object"),
        # NUL: PostgreSQL's jsonb has no such character (it was a 503 there, a 200 on SQLite)
        ({"k": "a\x00b"}, "NUL"),
        ({"k\x00": "v"}, "NUL"),
    ])
    def test_a_bad_filter(self, store: Store, metadata: Any, match: str) -> None:
        with pytest.raises(InvalidRequest, match=match):
            store.sessions.list(metadata=metadata)
