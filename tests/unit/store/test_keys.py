"""API keys and workspaces in the store (memfs/store/keys.py), on SQLite and PostgreSQL: keys
made, listed, revoked and expired; what a key's grant holds; another workspace's objects
look exactly like unknown ones; listings and creations keep to their workspace."""

from __future__ import annotations

import hashlib
import time

import pytest

from memfs import errors
from memfs.models import Actor
from memfs.store import KEY_PREFIX, Store

from ...support.backend import Backend


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.open()


def test_a_key_is_kept_hashed_and_its_secret_shown_once(store: Store) -> None:
    made = store.keys.create("ci-reader", workspace="team-a", role="read_only",
                            created_by=Actor.api("apikey_boss"))
    assert made.key is not None and made.key.startswith(KEY_PREFIX)
    assert (made.name, made.workspace_id, made.role, made.memory_store_ids) == (
        "ci-reader", "team-a", "read_only", None)
    with store.read() as c:
        row = c.execute("SELECT * FROM api_keys WHERE id = ?", (made.id,)).fetchone()
    assert made.key not in [str(v) for v in dict(row).values()]
    assert row["secret_sha256"] == hashlib.sha256(made.key.encode()).hexdigest()
    listed = store.keys.list(workspace="team-a")
    assert [k.id for k in listed] == [made.id] and listed[0].key is None
    assert listed[0].created_by == Actor.api("apikey_boss")
    assert store.keys.list(workspace="team-b") == []
    grant = store.keys.grant(made.key)
    assert (grant.key_id, grant.workspace_id, grant.role, grant.access, grant.session_id) == (
        made.id, "team-a", "read_only", None, None)
    assert grant.actor() == Actor.api(made.id)
    assert store.keys.get(made.id).last_used_at is not None  # noted by the grant


def test_revoked_expired_and_unknown_keys_are_refused(store: Store) -> None:
    key = store.keys.create("k")
    assert key.key is not None
    store.keys.grant(key.key)
    revoked = store.keys.revoke(key.id)
    assert revoked.revoked_at is not None
    assert store.keys.revoke(key.id).revoked_at == revoked.revoked_at  # idempotent
    with pytest.raises(errors.Unauthorized, match="revoked"):
        store.keys.grant(key.key)
    short = store.keys.create("short", expires_in=1)
    assert short.key is not None
    store.keys.grant(short.key)
    time.sleep(1.1)
    with pytest.raises(errors.Unauthorized, match="expired"):
        store.keys.grant(short.key)
    with pytest.raises(errors.Unauthorized, match="invalid API key"):
        store.keys.grant(KEY_PREFIX + "nope")
    with pytest.raises(errors.NotFound):
        store.keys.revoke(key.id, workspace="team-b")  # another workspace's key: unknown


@pytest.mark.parametrize("kwargs, message", [
    ({"role": "owner"}, "role must be"),
    ({"workspace": "Team A"}, "invalid workspace"),
    ({"workspace": ""}, "invalid workspace"),
    ({"expires_in": "30x"}, "invalid duration"),
    ({"expires_in": 0}, "1 second to 10 years"),
    ({"store_ids": []}, "1 to 100"),
    ({"store_ids": "memstore_x"}, "list of memory store ids"),
])
def test_bad_key_arguments_are_clear_errors(store: Store, kwargs: dict[str, object],
                                            message: str) -> None:
    with pytest.raises(errors.InvalidRequest, match=message):
        store.keys.create("k", **kwargs)  # type: ignore[arg-type]
    assert store.keys.list() == []


def test_a_scoped_key_opens_only_its_workspaces_stores(store: Store) -> None:
    mine = store.stores.create("mine", workspace="team-a")
    theirs = store.stores.create("theirs", workspace="team-b")
    with pytest.raises(errors.NotFound) as e:
        store.keys.create("k", workspace="team-a", store_ids=[theirs.id])
    assert e.value.message == f"memory store {theirs.id!r} not found"
    key = store.keys.create("k", workspace="team-a", role="read_only", store_ids=[mine.id])
    assert key.key is not None and key.memory_store_ids == [mine.id]
    assert store.keys.grant(key.key).access == {mine.id: "read_only"}


def test_another_workspaces_object_is_exactly_an_unknown_one(store: Store) -> None:
    a = store.stores.create("a", workspace="team-a")
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": a.id}])
    agent = store.agents.create(name="x", model="m", workspace="team-a")
    for param, oid in (("memory_store_id", a.id), ("session_id", session.id),
                       ("agent_id", agent["id"])):
        store.keys.check_visible("team-a", param, oid)
        with pytest.raises(errors.NotFound) as other:
            store.keys.check_visible("team-b", param, oid)
        unknown_id = oid[:-4] + "zzzz"
        with pytest.raises(errors.NotFound) as unknown:
            store.keys.check_visible("team-b", param, unknown_id)
        assert other.value.message == unknown.value.message.replace(unknown_id, oid)
    assert session.id in [s.id for s in store.sessions.list(workspace="team-a").data]
    assert store.sessions.list(workspace="team-b").data == []


def test_listings_and_names_keep_to_their_workspace(store: Store) -> None:
    a1 = store.stores.create("notes", workspace="team-a")
    b1 = store.stores.create("notes", workspace="team-b")
    b2 = store.stores.create("notes", workspace="team-b")
    assert [s.id for s in store.stores.list(workspace="team-a").data] == [a1.id]
    assert {s.id for s in store.stores.list().data} == {a1.id, b1.id, b2.id}
    assert store.stores.resolve("notes", workspace="team-a").id == a1.id
    with pytest.raises(errors.NotFound):
        store.stores.resolve(b1.id, workspace="team-a")
    with pytest.raises(errors.InvalidRequest, match="2 memory stores"):
        store.stores.resolve("notes", workspace="team-b")
    assert store.stores.namesakes(a1.id) == []
    assert [s.id for s in store.stores.namesakes(b1.id)] == [b2.id]
    page = store.stores.list(workspace="team-b", limit=1)
    assert page.next_page is not None
    with pytest.raises(errors.InvalidCursor):  # a cursor is its listing's, workspace too
        store.stores.list(workspace="team-a", limit=1, page=page.next_page)


def test_a_session_attaches_only_its_workspaces_stores(store: Store) -> None:
    a = store.stores.create("a", workspace="team-a")
    b = store.stores.create("b", workspace="team-b")
    res = [{"type": "memory_store", "memory_store_id": b.id}]
    with pytest.raises(errors.NotFound):
        store.sessions.create(res, workspace="team-a")
    made = store.sessions.create([{"type": "memory_store", "memory_store_id": a.id}])
    store.keys.check_visible("team-a", "session_id", made.id)  # its stores' workspace
    with pytest.raises(errors.NotFound):
        store.dreams.create([{"type": "memory_store", "memory_store_id": b.id},
                            {"type": "sessions", "session_ids": [made.id]}], "m")
