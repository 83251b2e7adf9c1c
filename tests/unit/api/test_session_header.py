"""Who may act as a session with ``x-memfs-session-id`` (issue 38 S3). Any read_write key
wrote as any running session of its workspace, leaving no trace of the key, store-scoped keys
too, and the answer told them whether the session existed. The header is taken from a server
key, from the session's own token, and from the stored key that created the session (the key
of the ``memfs run --url`` that launched it, whose mount daemons send it); from any other key
it is one 403, whether the session exists or not. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from memfs import api
from memfs.api import create_app
from memfs.models import Actor

KEY = "test-server-key"


@pytest.fixture
def store(backend):
    return backend.open()


@pytest.fixture
def app(store):
    return create_app(store, [KEY])


def _client(app, key):
    return TestClient(app, headers={"x-api-key": key})


def _write(c, store_id, session_id, path):
    return c.post(f"/v1/memory_stores/{store_id}/memories",
                  json={"path": path, "content": "x"},
                  headers={api.SESSION_HEADER: session_id})


def _refusal(r):
    assert r.status_code == 403, r.text
    body = r.json()
    assert body["error"]["type"] == "permission_error", body
    return body["error"]["message"]


def test_only_the_session_s_launcher_acts_as_it(app, store):
    notes = store.stores.create("Notes").id
    launcher = store.keys.create("launcher", role="read_write")
    other = store.keys.create("someone else", role="read_write")
    scoped = store.keys.create("scoped", role="read_write", store_ids=[notes])
    with _client(app, launcher.key) as c:
        r = c.post("/v1/sessions", json={
            "resources": [{"type": "memory_store", "memory_store_id": notes}]})
        assert r.status_code == 200, r.text
        sid = r.json()["id"]
    store.sessions.set_status(sid, "running")
    unknown = "sesn_01" + "z" * 22
    # Another key of the workspace, and a store-scoped one: refused, and the same answer for
    # the running session as for one that does not exist.
    for key in (other.key, scoped.key):
        with _client(app, key) as c:
            real = _refusal(_write(c, notes, sid, "/as-session.md"))
            fake = _refusal(_write(c, notes, unknown, "/as-session.md"))
            assert real.replace(sid, "ID") == fake.replace(unknown, "ID")
            r = c.post(f"/v1/sessions/{sid}/events", headers={api.SESSION_HEADER: sid},
                       json={"events": [{"type": "agent.tool_use", "id": "sevt_01x",
                                         "name": "cat", "input": {}}]})
            assert r.status_code in (403, 404), r.text
    assert store.memories.tree(notes) == []
    # The key that created it (its launcher's mount daemons), and a server key: as the session.
    for key, path in ((launcher.key, "/launcher.md"), (KEY, "/server.md")):
        with _client(app, key) as c:
            r = _write(c, notes, sid, path)
            assert r.status_code == 200, r.text
            v = store.versions.list(notes, memory_id=r.json()["id"]).data[0]
            assert v.created_by == Actor.session(sid)
    # Without the header, another key writes as itself.
    with _client(app, other.key) as c:
        r = c.post(f"/v1/memory_stores/{notes}/memories", json={"path": "/own.md",
                                                                "content": "x"})
        assert r.status_code == 200, r.text
        v = store.versions.list(notes, memory_id=r.json()["id"]).data[0]
        assert v.created_by == Actor.api(other.id)
