"""A client with a deadline (a remote mount's) sends each write with an ``Idempotency-Key``
and an ``x-memfs-deadline``: sent again with the same key when its connection fails, and
failed once its deadline is over without an answer (issue 38 N6). On SQLite and PostgreSQL."""

from __future__ import annotations

import time

import httpx
import pytest
from starlette.testclient import TestClient

from memfs import errors
from memfs.api import create_app
from memfs.client import Client
from memfs.store import Store

KEY = "deadline-test-key"
IDEM = "idempotency-key"
DEADLINE = "x-memfs-deadline"


@pytest.fixture
def store(backend):
    return backend.open()


def _versions(store: Store, sid: str) -> int:
    return len(store.versions.list(sid, limit=100).data)


def test_the_client_resends_a_write_whose_answer_was_lost(store):
    """A client with a deadline sends each write with a key and, when its connection fails
    before the answer, sends it again with the same key: applied once, answered."""
    sid = store.stores.create("n").id
    app_client = TestClient(create_app(store, [KEY]), headers={"x-api-key": KEY})
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers[IDEM])
        assert float(request.headers[DEADLINE]) > time.time()
        r = app_client.request(request.method, request.url.path, content=request.content,
                               headers=dict(request.headers))
        if len(seen) == 1:  # committed, but the answer never comes back
            raise httpx.ReadError("connection reset")
        return httpx.Response(r.status_code, content=r.content, headers=r.headers)

    with app_client, Client("http://t", KEY, transport=httpx.MockTransport(handler),
                            deadline=5) as client:
        m = client.memories.write_path(sid, "/a.md", "once")
        assert m.content == "once" and len(seen) == 2 and seen[0] == seen[1]
        assert _versions(store, sid) == 1
        client.memories.write_path(sid, "/b.md", "b")
        assert seen[2] != seen[0]  # each write a key of its own


def test_the_client_fails_a_write_with_no_answer_by_its_deadline(store):
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("no answer")

    t0 = time.monotonic()
    with Client("http://t", KEY, transport=httpx.MockTransport(handler), deadline=1) as client, \
            pytest.raises(errors.MemfsError, match="not made"):
        client.memories.write_path("memstore_x", "/a.md", "x")
    assert time.monotonic() - t0 < 30  # it ends (the mock answers at once)
