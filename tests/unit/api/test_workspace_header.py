"""The SDK's ``anthropic-workspace-id`` header (``default_headers`` of a client): a server key
(the operator's) acts in the workspace it names, as its admin; a stored key only in its own."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from memfs.api import create_app

KEY = "server-key"


@pytest.fixture
def store(backend):
    return backend.open()


@pytest.fixture
def client(store):
    with TestClient(create_app(store, [KEY], console=False, dreams=False),
                    headers={"x-api-key": KEY}) as c:
        yield c


def test_a_server_key_acts_in_the_workspace_it_names(client, store):
    team_a = {"anthropic-workspace-id": "team-a"}
    made = client.post("/v1/memory_stores", json={"name": "notes"}, headers=team_a).json()
    store.keys.check_visible("team-a", "memory_store_id", made["id"])
    assert client.get(f"/v1/memory_stores/{made['id']}").status_code == 404  # default's view
    assert [s["id"] for s in client.get("/v1/memory_stores", headers=team_a).json()["data"]] \
        == [made["id"]]
    admin = store.keys.create("a", workspace="team-a", role="admin").key
    mine = {"x-api-key": admin}
    assert client.get(f"/v1/memory_stores/{made['id']}", headers=mine).status_code == 200
    assert client.get(f"/v1/memory_stores/{made['id']}",
                      headers={**mine, **team_a}).status_code == 200
    other = client.get("/v1/memory_stores", headers={**mine, "anthropic-workspace-id": "b"})
    assert other.status_code == 403 and other.json()["error"]["type"] == "permission_error"
    bad = client.get("/v1/memory_stores", headers={"anthropic-workspace-id": "Not A Slug"})
    assert bad.status_code == 400 and "invalid workspace" in bad.json()["error"]["message"]


def test_a_deleted_stores_feed_says_so_to_its_own_workspace_only(client, store):
    """A deleted store's change feed still ends with its deletion (a remote mount that
    reconnects learns it is gone), for its own workspace; to another workspace it is an
    unknown id, the same 404."""
    admin_a = {"x-api-key": store.keys.create("a", workspace="team-a", role="admin").key}
    admin_b = {"x-api-key": store.keys.create("b", workspace="team-b", role="admin").key}
    sid = store.stores.create("gone", workspace="team-a").id
    store.memories.create(sid, "/a.md", "a", actor=None)
    store.stores.delete(sid)
    feed = client.get(f"/v1/memory_stores/{sid}/changes", params={"after": 0}, headers=admin_a)
    assert feed.status_code == 200 and feed.json()["data"][-1]["op"] == "store"
    other = client.get(f"/v1/memory_stores/{sid}/changes", headers=admin_b)
    unknown_id = sid[:-4] + "zzzz"
    unknown = client.get(f"/v1/memory_stores/{unknown_id}/changes", headers=admin_b)
    assert other.status_code == unknown.status_code == 404
    assert other.json()["error"] == {
        **unknown.json()["error"],
        "message": unknown.json()["error"]["message"].replace(unknown_id, sid)}
