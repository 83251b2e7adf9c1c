"""Writes sent with an ``Idempotency-Key`` are applied once and answered the same each time,
and a write past its client's deadline (``x-memfs-deadline``) is refused and never commits
(issue 38 N6; docs/http-api.md, "Idempotent writes"). On SQLite and on PostgreSQL."""

from __future__ import annotations

import time

import pytest
from starlette.testclient import TestClient

from memfs.api import create_app
from memfs.store import Store

KEY = "idem-test-key"
IDEM = "idempotency-key"
DEADLINE = "x-memfs-deadline"


@pytest.fixture
def store(backend):
    return backend.open()


@pytest.fixture
def http(store):
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": KEY}) as c:
        yield c


def _versions(store: Store, sid: str) -> int:
    return len(store.versions.list(sid, limit=100).data)


def test_the_same_key_twice_is_applied_once_with_the_same_answer(http, store):
    sid = store.stores.create("n").id
    url = f"/v1/memory_stores/{sid}/memfs/write"
    first = http.post(url, headers={IDEM: "k1"}, json={"path": "/a.md", "content": "one"})
    assert first.status_code == 200, first.text
    # Another writer changes it; the first request sent again must not put "one" back.
    store.memories.write_path(sid, "/a.md", "two", actor=None)
    again = http.post(url, headers={IDEM: "k1"}, json={"path": "/a.md", "content": "one"})
    assert again.status_code == 200 and again.json() == first.json()
    assert store.memories.get_by_path(sid, "/a.md").content == "two"
    assert _versions(store, sid) == 2
    # A new key is a new write.
    r = http.post(url, headers={IDEM: "k2"}, json={"path": "/a.md", "content": "one"})
    assert r.status_code == 200 and store.memories.get_by_path(sid, "/a.md").content == "one"


def test_the_same_key_with_another_request_is_refused(http, store):
    sid = store.stores.create("n").id
    url = f"/v1/memory_stores/{sid}/memfs/write"
    assert http.post(url, headers={IDEM: "k"}, json={"path": "/a.md", "content": "1"}).is_success
    r = http.post(url, headers={IDEM: "k"}, json={"path": "/a.md", "content": "2"})
    assert r.status_code == 400 and "Idempotency-Key" in r.json()["error"]["message"]
    assert store.memories.get_by_path(sid, "/a.md").content == "1"


def test_a_refusal_is_recorded_and_answered_again(http, store):
    sid = store.stores.create("n").id
    taken = store.memories.create(sid, "/a.md", "x", actor=None)
    url = f"/v1/memory_stores/{sid}/memories"
    body = {"path": "/a.md", "content": "mine"}
    first = http.post(url, headers={IDEM: "c1"}, json=body)
    assert first.status_code == 409, first.text
    store.memories.delete(sid, taken.id,
                          actor=None)  # the path is free now, but the answer was given
    again = http.post(url, headers={IDEM: "c1"}, json=body)
    assert again.status_code == 409 and again.json()["error"] == first.json()["error"]
    assert store.memories.count(sid) == 0


def test_every_write_route_replays(http, store):
    sid = store.stores.create("n").id
    base = f"/v1/memory_stores/{sid}"
    mid = store.memories.create(sid, "/d/a.md", "a", actor=None).id
    store.memories.create(sid, "/f/a.md", "a", actor=None)
    calls = [
        ("post", f"{base}/memories/{mid}", {"content": "b"}),
        ("post", f"{base}/memfs/rename", {"old_path": "/d/a.md", "new_path": "/d/b.md"}),
        ("post", f"{base}/memfs/rename_prefix", {"old_prefix": "/d/", "new_prefix": "/e/"}),
        ("post", f"{base}/memfs/delete", {"path": "/e/b.md"}),
        ("post", f"{base}/memfs/delete_prefix", {"prefix": "/f/"}),
    ]
    for i, (method, url, body) in enumerate(calls):
        first = getattr(http, method)(url, headers={IDEM: f"r{i}"}, json=body)
        assert first.is_success, (url, first.text)
        n = _versions(store, sid)
        again = getattr(http, method)(url, headers={IDEM: f"r{i}"}, json=body)
        assert again.status_code == first.status_code and again.json() == first.json(), url
        assert _versions(store, sid) == n, url
    store.memories.write_path(sid, "/x.md", "x", actor=None)
    x = store.memories.get_by_path(sid, "/x.md").id
    for _ in range(2):
        r = http.delete(f"{base}/memories/{x}", headers={IDEM: "del"})
        assert r.status_code == 200 and r.json() == {"id": x, "type": "memory_deleted"}


def test_a_write_past_its_deadline_is_refused_and_not_written(http, store):
    sid = store.stores.create("n").id
    url = f"/v1/memory_stores/{sid}/memfs/write"
    late = {IDEM: "late", DEADLINE: f"{time.time() - 0.5:.3f}"}
    r = http.post(url, headers=late, json={"path": "/a.md", "content": "x"})
    assert r.status_code == 408, r.text
    assert r.json()["error"]["details"]["error_code"] == "deadline_passed"
    assert store.memories.count(sid) == 0 and _versions(store, sid) == 0
    r = http.post(url, headers=late, json={"path": "/a.md", "content": "x"})
    assert r.status_code == 408 and store.memories.count(sid) == 0
    # Without a key too; and in time, it is written.
    r = http.post(url, headers={DEADLINE: f"{time.time() - 0.5:.3f}"},
                  json={"path": "/a.md", "content": "x"})
    assert r.status_code == 408 and store.memories.count(sid) == 0
    r = http.post(url, headers={DEADLINE: f"{time.time() + 30:.3f}"},
                  json={"path": "/a.md", "content": "x"})
    assert r.status_code == 200 and store.memories.count(sid) == 1


def test_a_bad_deadline_or_key_is_a_400(http, store):
    sid = store.stores.create("n").id
    url = f"/v1/memory_stores/{sid}/memfs/write"
    for headers in ({DEADLINE: "soon"}, {DEADLINE: "nan"}, {IDEM: "k" * 256}):
        r = http.post(url, headers=headers, json={"path": "/a.md", "content": "x"})
        assert r.status_code == 400, (headers, r.text)
    assert store.memories.count(sid) == 0


def test_old_keys_are_forgotten(http, store, monkeypatch):
    from memfs.store import idempotency

    sid = store.stores.create("n").id
    url = f"/v1/memory_stores/{sid}/memfs/write"
    assert http.post(url, headers={IDEM: "old"}, json={"path": "/a.md", "content": "1"}).is_success
    monkeypatch.setattr(idempotency, "KEEP_KEYS", idempotency.timedelta(0))
    assert http.post(url, headers={IDEM: "new"}, json={"path": "/b.md", "content": "1"}).is_success
    with store.read() as c:
        keys = [r[0] for r in c.execute("SELECT key FROM idempotency_keys").fetchall()]
    assert keys == ["new"]
