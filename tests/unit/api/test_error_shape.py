"""One canonical error shape on every failing path (datasette's ``assert_canonical_error``):
the API.md §1.6 envelope, as JSON, with the request id, whatever went wrong: a bad body, a
forged cursor, HEAD, a stalled or oversized body, an unknown route, a bug in a handler, a
result that cannot be rendered."""

from __future__ import annotations

import json

import pytest
import trio
from starlette.testclient import TestClient

from memfs import api
from memfs.api import create_app
from memfs.models import MemoryStore
from memfs.store.paging import encode_cursor

KEY = "test-key-1"
#: API.md §1.6: the error types of anthropic 2.14.0.
ERROR_TYPES = {
    "invalid_request_error", "authentication_error", "billing_error", "permission_error",
    "not_found_error", "rate_limit_error", "timeout_error", "api_error", "overloaded_error",
    "memory_precondition_failed_error", "memory_path_conflict_error", "conflict_error",
}


def assert_canonical_error(status, headers, content, expected_status, method="GET"):
    """``headers`` lower-cased names; ``content`` the body bytes (empty for HEAD)."""
    assert status == expected_status, content
    assert headers["request-id"].startswith("req_")
    if 400 <= status < 500 and status not in (408, 429):
        assert headers["x-should-retry"] == "false"
    if method == "HEAD":
        assert content == b""
        return None
    assert headers["content-type"] == "application/json"
    body = json.loads(content)
    assert set(body) == {"type", "error", "request_id"}
    assert body["type"] == "error"
    assert body["request_id"] == headers["request-id"]
    err = body["error"]
    assert err["type"] in ERROR_TYPES
    assert isinstance(err["message"], str) and err["message"]
    if "details" in err:
        assert isinstance(err["details"]["error_code"], str)
    return err



@pytest.fixture
def store(backend):
    """Every test of this file runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()

@pytest.fixture
def client(store):
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": KEY},
                    raise_server_exceptions=False) as c:
        yield c


def check(r, expected_status):
    return assert_canonical_error(r.status_code, r.headers, r.content, expected_status,
                                  r.request.method)


def test_every_error_path_is_the_envelope(client, store):
    sid = client.post("/v1/memory_stores", json={"name": "s"}).json()["id"]
    sess = client.post("/v1/sessions", json={}).json()["id"]
    forged = encode_cursor("events", ["events", "asc", [sess]], 2**63)
    json_body = {"content-type": "application/json"}
    cases = [
        (client.post("/v1/memory_stores", content=rb'{"name":"\ud800"}', headers=json_body),
         400),
        (client.post("/v1/sessions", content=rb'{"metadata":{"k":"\udfff"}}',
                     headers=json_body), 400),
        (client.post(f"/v1/sessions/{sess}/events", headers=json_body,
                     content=rb'{"events":[{"type":"user.message","content":["\ud800"]}]}'),
         400),
        (client.get(f"/v1/sessions/{sess}/events", params={"page": forged}), 400),
        (client.get("/v1/memory_stores", params={"page": "W1tdLCB7fV0"}), 400),
        (client.post("/v1/memory_stores", content=b"{" * 100_000, headers=json_body), 400),
        (client.post("/v1/memory_stores", content=b"x" * (api.MAX_BODY_BYTES + 1)), 413),
        (client.head("/v1/memory_stores/memstore_nope"), 404),
        (client.get("/v1/memory_stores/memstore_nope"), 404),
        (client.get("/v1/nowhere"), 404),
        (client.put(f"/v1/memory_stores/{sid}"), 405),
        (client.head(f"/v1/memory_stores/{sid}/archive"), 405),
        (client.get("/v1/memory_stores", headers={"x-api-key": "wrong"}), 401),
    ]
    for r, status in cases:
        check(r, status)


def test_a_handler_bug_is_a_500_envelope(client, store, monkeypatch, error_logs):
    def boom(*a, **kw):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(store.stores, "list", boom)
    r = client.get("/v1/memory_stores")
    err = check(r, 500)
    assert err["type"] == "api_error" and "secret" not in err["message"]
    # The server's log has it all, with its traceback.
    [logged] = error_logs
    assert logged.getMessage() == "GET /v1/memory_stores failed" and logged.exc_info


def test_an_unrenderable_result_is_a_500_envelope(client, store, monkeypatch, error_logs):
    """What the store returns cannot be encoded (a lone surrogate from an old database): the
    envelope, not Starlette's plain-text 500."""
    sid = store.stores.create("old").id
    bad = MemoryStore(id=sid, name="\ud800", description="", metadata={},
                      created_at="2026-01-01T00:00:00Z", updated_at="2026-01-01T00:00:00Z",
                      archived_at=None)
    monkeypatch.setattr(store.stores, "get", lambda *a, **kw: bad)
    check(client.get(f"/v1/memory_stores/{sid}"), 500)
    assert [r.getMessage() for r in error_logs] == [f"GET /v1/memory_stores/{sid} failed"]


async def test_a_stalled_body_is_a_408_envelope(store, monkeypatch):
    monkeypatch.setattr(api.body, "BODY_IDLE_SECONDS", 0.1)
    app = create_app(store, [KEY])
    scope = {"type": "http", "method": "POST", "path": "/v1/sessions",
             "raw_path": b"/v1/sessions", "query_string": b"",
             "headers": [(b"x-api-key", KEY.encode())], "http_version": "1.1",
             "scheme": "http", "server": ("t", 80), "client": ("c", 1), "root_path": ""}
    sent = []

    async def receive():
        await trio.sleep_forever()

    async def send(message):
        sent.append(message)

    with trio.fail_after(5):
        await app(scope, receive, send)
    headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    content = b"".join(m.get("body", b"") for m in sent[1:])
    err = assert_canonical_error(sent[0]["status"], headers, content, 408, "POST")
    assert err["type"] == "timeout_error"


def test_every_405_says_which_methods_the_path_allows(client):
    """RFC 9110 §15.5.6: a 405 MUST carry Allow; none did (issue 19)."""
    sid = client.post("/v1/memory_stores", json={"name": "s"}).json()["id"]
    cases = [
        ("PUT", f"/v1/memory_stores/{sid}", {"GET", "HEAD", "POST", "DELETE"}),
        ("HEAD", f"/v1/memory_stores/{sid}/archive", {"POST"}),
        ("DELETE", "/v1/memory_stores", {"GET", "HEAD", "POST"}),
        ("POST", "/openapi.json", {"GET", "HEAD"}),
        ("PATCH", "/stores", {"GET", "HEAD", "POST"}),  # a Console page
        ("DELETE", "/signin", {"GET", "HEAD", "POST"}),
    ]
    for method, path, allowed in cases:
        r = client.request(method, path)
        assert r.status_code == 405, (method, path)
        assert {m.strip() for m in r.headers["allow"].split(",")} == allowed, (method, path)
