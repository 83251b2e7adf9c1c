"""The HTTP API in-process (starlette TestClient): envelopes, auth, parsing, every route."""

from __future__ import annotations

import hashlib
import json

import pytest
import trio
from starlette.testclient import TestClient

from memfs import api
from memfs.api import api_key_id, create_app

KEY = "test-key-1"
OTHER_KEY = "test-key-2"


@pytest.fixture
def store(backend):
    """Every test of this file runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


@pytest.fixture
def client(store):
    with TestClient(create_app(store, [KEY, OTHER_KEY]), headers={"x-api-key": KEY}) as c:
        yield c


@pytest.fixture
def anon(store):
    with TestClient(create_app(store, [KEY])) as c:
        yield c


def assert_error(r, status, type_, code=None):
    """The canonical error shape: envelope, request id header, retry header on 4xx."""
    assert r.status_code == status, r.text
    body = r.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == type_
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert body["request_id"] == r.headers["request-id"]
    if code is not None:
        assert body["error"]["details"]["error_code"] == code
    if 400 <= status < 500:
        assert r.headers["x-should-retry"] == "false"
    return body["error"]


def make_store(client, name="Notes", **kw):
    r = client.post("/v1/memory_stores", json={"name": name, **kw})
    assert r.status_code == 200, r.text
    return r.json()


def make_memory(client, sid, path, content="x"):
    r = client.post(f"/v1/memory_stores/{sid}/memories", json={"path": path, "content": content})
    assert r.status_code == 200, r.text
    return r.json()


# -- transport ----------------------------------------------------------------------------------


def test_auth_both_header_styles_and_401_envelope(anon):
    ok_x = anon.get("/v1/memory_stores", headers={"x-api-key": KEY})
    ok_bearer = anon.get("/v1/memory_stores", headers={"authorization": f"Bearer {KEY}"})
    assert ok_x.status_code == ok_bearer.status_code == 200
    assert_error(anon.get("/v1/memory_stores"), 401, "authentication_error")
    assert_error(anon.get("/v1/memory_stores", headers={"x-api-key": "nope"}), 401,
                 "authentication_error")
    assert_error(anon.get("/v1/memory_stores", headers={"authorization": "Basic " + KEY}), 401,
                 "authentication_error")
    # x-api-key wins when both are sent
    both = {"x-api-key": KEY, "authorization": "Bearer wrong"}
    assert anon.get("/v1/memory_stores", headers=both).status_code == 200
    both = {"x-api-key": "wrong", "authorization": f"Bearer {KEY}"}
    assert_error(anon.get("/v1/memory_stores", headers=both), 401, "authentication_error")
    # unknown routes do not reveal themselves before authentication
    assert_error(anon.get("/v1/nowhere"), 401, "authentication_error")


def test_request_id_on_every_response(client, anon):
    responses = [
        client.get("/v1/memory_stores"),
        client.get("/v1/memory_stores/memstore_nope"),
        client.get("/v1/nowhere"),
        client.delete("/v1/memory_stores"),
        anon.get("/v1/memory_stores"),
        anon.get("/openapi.json"),
    ]
    ids = [r.headers["request-id"] for r in responses]
    assert all(i.startswith("req_") for i in ids)
    assert len(set(ids)) == len(ids)
    assert_error(responses[2], 404, "not_found_error")
    assert_error(responses[3], 405, "invalid_request_error", "method_not_allowed")


def test_api_key_ids_are_stable_and_not_the_secret(client, store):
    sid = make_store(client)["id"]
    make_memory(client, sid, "/a.md")
    other = {"x-api-key": OTHER_KEY}
    client.post(f"/v1/memory_stores/{sid}/memories", json={"path": "/b.md", "content": ""},
                headers=other)
    versions = client.get(f"/v1/memory_stores/{sid}/memory_versions").json()["data"]
    by_path = {v["path"]: v["created_by"] for v in versions}
    assert by_path["/a.md"] == {"type": "api_actor", "api_key_id": api_key_id(KEY)}
    assert by_path["/b.md"] == {"type": "api_actor", "api_key_id": api_key_id(OTHER_KEY)}
    assert api_key_id(KEY) == "apikey_" + hashlib.sha256(KEY.encode()).hexdigest()[:24]
    assert KEY not in json.dumps(versions)
    r = client.get(f"/v1/memory_stores/{sid}/memory_versions",
                   params={"api_key_id": api_key_id(OTHER_KEY)})
    assert [v["path"] for v in r.json()["data"]] == ["/b.md"]


# -- bad input is 400, never 500 ----------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[1, 2]",
        b'"a string"',
        b'{"name": NaN}',
        b"\xff\xfe",
        b'{"name": "x", "nope": 1}',
        b'{"name": 5}',
        b'{"name": null}',
        b'{"name": "ok", "metadata": "x"}',
        b'{"name": "ok", "metadata": {"k": 5}}',
        b'{"name": "ok", "description": []}',
        b"{}",
    ],
)
def test_bad_store_bodies(client, body):
    r = client.post("/v1/memory_stores", content=body,
                    headers={"content-type": "application/json"})
    assert_error(r, 400, "invalid_request_error")


def test_bad_memory_inputs(client):
    sid = make_store(client)["id"]
    url = f"/v1/memory_stores/{sid}/memories"
    cases = [
        ({"path": 5, "content": "x"}, "invalid_path"),
        ({"path": "/a", "content": 5}, "invalid_content"),
        ({"path": "/a"}, None),  # content is a required key
        (b'{"path": "/a\\ud800", "content": ""}', "path_encoding"),  # a lone surrogate
        (b'{"path": "/a", "content": "\\udfff"}', "invalid_content"),
        ({"path": "/" + "/".join("s" * 21), "content": ""}, "path_too_long"),
        ({"path": "/" + "a" * 1024, "content": ""}, "path_too_long"),
        ({"path": "/cafe\u0301", "content": ""}, "path_encoding"),
        ({"path": "/a//b", "content": ""}, "invalid_path"),
        ({"path": "/a", "content": "x" * 102_401}, "content_too_large"),
    ]
    for body, code in cases:
        r = (client.post(url, content=body) if isinstance(body, bytes)
             else client.post(url, json=body))
        assert_error(r, 400, "invalid_request_error", code)
    m = make_memory(client, sid, "/a.md")
    murl = f"{url}/{m['id']}"
    for body in (
        {"precondition": {"type": "etag", "content_sha256": "0" * 64}},
        {"precondition": {"type": "content_sha256"}},
        {"precondition": {"type": "content_sha256", "content_sha256": "XYZ"}},
        {"precondition": "abc"},
        {"content": {"a": 1}},
    ):
        assert_error(client.post(murl, json=body), 400, "invalid_request_error")
    for params in ({"view": "everything"}, {"limit": "abc"}, {"limit": 0}, {"limit": 101},
                   {"depth": -1}, {"path_prefix": "/a"}, {"depth": "x"}):
        assert_error(client.get(url, params=params), 400, "invalid_request_error")
    assert_error(client.delete(murl, params={"expected_content_sha256": "nothex"}), 400,
                 "invalid_request_error")
    assert_error(client.get("/v1/memory_stores", params={"include_archived": "maybe"}), 400,
                 "invalid_request_error")
    assert_error(client.get("/v1/memory_stores", params={"created_at[gte]": "yesterday"}), 400,
                 "invalid_request_error")


def test_request_too_large_is_413(client):
    body = b'{"name": "' + b"x" * (api.MAX_BODY_BYTES + 1) + b'"}'
    assert_error(client.post("/v1/memory_stores", content=body), 413, "invalid_request_error",
                 "request_too_large")


def test_empty_bodies_with_json_content_type(client):
    sid = make_store(client)["id"]
    h = {"content-type": "application/json", "content-length": "0"}
    r = client.post(f"/v1/memory_stores/{sid}/archive", content=b"", headers=h)
    assert r.status_code == 200 and r.json()["archived_at"] is not None
    r = client.post(f"/v1/memory_stores/{sid}/archive",
                    headers={"content-type": "application/json"})
    assert r.status_code == 200
    r = client.request("DELETE", f"/v1/memory_stores/{sid}", content=b"",
                       headers={"content-type": "application/json"})
    assert r.json() == {"id": sid, "type": "memory_store_deleted"}


def test_unknown_ids_are_404(client):
    sid = make_store(client)["id"]
    sess = client.post("/v1/sessions", json={}).json()["id"]
    urls = [
        ("GET", "/v1/memory_stores/memstore_nope"),
        ("POST", "/v1/memory_stores/memstore_nope"),
        ("DELETE", "/v1/memory_stores/memstore_nope"),
        ("POST", "/v1/memory_stores/memstore_nope/archive"),
        ("GET", "/v1/memory_stores/memstore_nope/memories"),
        ("GET", f"/v1/memory_stores/{sid}/memories/mem_nope"),
        ("POST", f"/v1/memory_stores/{sid}/memories/mem_nope"),
        ("DELETE", f"/v1/memory_stores/{sid}/memories/mem_nope"),
        ("GET", f"/v1/memory_stores/{sid}/memory_versions/memver_nope"),
        ("POST", f"/v1/memory_stores/{sid}/memory_versions/memver_nope/redact"),
        ("GET", "/v1/memory_stores/memstore_nope/memory_versions"),
        ("GET", "/v1/sessions/sesn_nope"),
        ("DELETE", "/v1/sessions/sesn_nope"),
        ("GET", "/v1/sessions/sesn_nope/events"),
        ("GET", "/v1/sessions/sesn_nope/events/stream"),
        ("GET", f"/v1/sessions/{sess}/resources/sesrsc_nope"),
        ("GET", "/v1/agents/agent_nope"),
        ("GET", "/v1/environments/env_nope"),
    ]
    for method, url in urls:
        assert_error(client.request(method, url), 404, "not_found_error")


def test_bad_cursors_are_400(client):
    sid = make_store(client)["id"]
    sess = client.post("/v1/sessions", json={}).json()["id"]
    stores_page = client.get("/v1/memory_stores", params={"limit": 1})
    make_store(client, "two")
    cursor = client.get("/v1/memory_stores", params={"limit": 1}).json()["next_page"]
    assert cursor
    for url in ("/v1/memory_stores", f"/v1/memory_stores/{sid}/memories",
                f"/v1/memory_stores/{sid}/memory_versions", "/v1/sessions",
                f"/v1/sessions/{sess}/events", f"/v1/sessions/{sess}/resources"):
        assert_error(client.get(url, params={"page": "garbage!!"}), 400,
                     "invalid_request_error", "invalid_cursor")
    # a cursor from another listing, or from other filters, is refused too
    assert_error(client.get(f"/v1/memory_stores/{sid}/memories", params={"page": cursor}), 400,
                 "invalid_request_error", "invalid_cursor")
    assert_error(client.get("/v1/memory_stores", params={"page": cursor, "include_archived":
                                                         "true"}), 400,
                 "invalid_request_error", "invalid_cursor")
    assert stores_page.status_code == 200


# -- memory stores, memories, versions ----------------------------------------------------------


def test_store_crud_and_pagination(client):
    s = make_store(client, "User Preferences!", description="prefs", metadata={"user": "u1"})
    assert s["type"] == "memory_store" and s["id"].startswith("memstore_")
    assert client.get(f"/v1/memory_stores/{s['id']}").json() == s
    u = client.post(f"/v1/memory_stores/{s['id']}",
                    json={"metadata": {"user": None, "team": "t"}, "description": ""}).json()
    assert u["metadata"] == {"team": "t"} and u["description"] == ""
    # null = no change
    same = client.post(f"/v1/memory_stores/{s['id']}", json={"name": None}).json()
    assert same == u
    ids = {s["id"], make_store(client, "b")["id"], make_store(client, "c")["id"]}
    seen, page = [], None
    while True:
        r = client.get("/v1/memory_stores", params={"limit": 1, **({"page": page} if page else {})})
        body = r.json()
        assert set(body) == {"data", "next_page"}
        seen += [x["id"] for x in body["data"]]
        page = body["next_page"]
        if not page:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 3
    client.post(f"/v1/memory_stores/{s['id']}/archive")
    live = [x["id"] for x in client.get("/v1/memory_stores").json()["data"]]
    assert s["id"] not in live
    every = client.get("/v1/memory_stores", params={"include_archived": "true"}).json()["data"]
    assert s["id"] in [x["id"] for x in every]
    assert_error(client.post(f"/v1/memory_stores/{s['id']}", json={"name": "n"}), 400,
                 "invalid_request_error", "store_archived")
    assert_error(client.post(f"/v1/memory_stores/{s['id']}/memories",
                             json={"path": "/a", "content": ""}), 400,
                 "invalid_request_error", "store_archived")


def test_created_at_filters(client):
    a = make_store(client, "a")
    b = make_store(client, "b")
    r = client.get("/v1/memory_stores", params={"created_at[gte]": b["created_at"]})
    assert [x["id"] for x in r.json()["data"]] == [b["id"]]
    r = client.get("/v1/memory_stores", params={"created_at[lte]": a["created_at"]})
    assert [x["id"] for x in r.json()["data"]] == [a["id"]]


def test_memory_lifecycle_views_and_conflicts(client):
    sid = make_store(client)["id"]
    url = f"/v1/memory_stores/{sid}/memories"
    m = make_memory(client, sid, "/notes/a.md", "hello")
    assert m["content"] is None
    assert m["content_sha256"] == hashlib.sha256(b"hello").hexdigest()
    assert m["content_size_bytes"] == 5
    full = client.post(url, params={"view": "full"},
                       json={"path": "/notes/deep/b.md", "content": "x"}).json()
    assert full["content"] == "x"
    err = assert_error(client.post(url, json={"path": "/notes/a.md", "content": "dup"}), 409,
                       "memory_path_conflict_error")
    assert err["conflicting_memory_id"] == m["id"]
    assert err["conflicting_path"] == "/notes/a.md"
    err = assert_error(client.post(url, json={"path": "/notes/a.md/c", "content": ""}), 409,
                       "memory_path_conflict_error")
    assert err["conflicting_path"] == "/notes/a.md"
    got = client.get(f"{url}/{m['id']}").json()
    assert got["content"] == "hello"
    assert client.get(f"{url}/{m['id']}", params={"view": "basic"}).json()["content"] is None
    upd = client.post(f"{url}/{m['id']}", json={
        "content": "hello2",
        "precondition": {"type": "content_sha256", "content_sha256": m["content_sha256"]},
    }).json()
    assert upd["memory_version_id"] != m["memory_version_id"] and upd["content"] is None
    assert_error(client.post(f"{url}/{m['id']}", json={
        "content": "hello3",
        "precondition": {"type": "content_sha256", "content_sha256": m["content_sha256"]},
    }), 409, "memory_precondition_failed_error")
    moved = client.post(f"{url}/{m['id']}", json={"path": "/notes/renamed.md"}).json()
    assert moved["id"] == m["id"] and moved["path"] == "/notes/renamed.md"
    noop = client.post(f"{url}/{m['id']}", json={"content": "hello2"}).json()
    assert noop["memory_version_id"] == moved["memory_version_id"]
    listing = client.get(url, params={"path_prefix": "/notes/", "depth": 1}).json()["data"]
    assert [(x["type"], x["path"]) for x in listing] == [
        ("memory_prefix", "/notes/deep/"), ("memory", "/notes/renamed.md")]
    assert_error(client.delete(f"{url}/{m['id']}",
                               params={"expected_content_sha256": "0" * 64}), 409,
                 "memory_precondition_failed_error")
    sha = hashlib.sha256(b"hello2").hexdigest()
    r = client.delete(f"{url}/{m['id']}", params={"expected_content_sha256": sha})
    assert r.json() == {"id": m["id"], "type": "memory_deleted"}
    assert_error(client.get(f"{url}/{m['id']}"), 404, "not_found_error")


def test_full_view_caps_page_at_20(client):
    sid = make_store(client)["id"]
    for i in range(22):
        make_memory(client, sid, f"/m{i:02d}.md", f"c{i}")
    page = client.get(f"/v1/memory_stores/{sid}/memories",
                      params={"view": "full", "limit": 100}).json()
    assert len(page["data"]) == 20 and page["next_page"]
    assert all(x["content"] is not None for x in page["data"])
    basic = client.get(f"/v1/memory_stores/{sid}/memories", params={"limit": 100}).json()
    assert len(basic["data"]) == 22 and basic["next_page"] is None
    assert all(x["content"] is None for x in basic["data"])


def test_versions_redact(client):
    sid = make_store(client)["id"]
    m = make_memory(client, sid, "/a.md", "one")
    client.post(f"/v1/memory_stores/{sid}/memories/{m['id']}", json={"content": "two"})
    vurl = f"/v1/memory_stores/{sid}/memory_versions"
    versions = client.get(vurl, params={"memory_id": m["id"]}).json()["data"]
    assert [v["operation"] for v in versions] == ["modified", "created"]
    assert all(v["content"] is None for v in versions)
    full = client.get(vurl, params={"memory_id": m["id"], "view": "full",
                                    "operation": "created"}).json()["data"]
    assert [v["content"] for v in full] == ["one"]
    first = versions[-1]
    assert client.get(f"{vurl}/{first['id']}").json()["content"] == "one"
    head = versions[0]
    assert_error(client.post(f"{vurl}/{head['id']}/redact"), 400, "invalid_request_error")
    red = client.post(f"{vurl}/{first['id']}/redact").json()
    assert red["redacted_at"] and red["redacted_by"]["type"] == "api_actor"
    assert red["path"] is red["content"] is red["content_sha256"] is None
    assert red["content_size_bytes"] is None
    assert client.post(f"{vurl}/{first['id']}/redact").json() == red


# -- agents, environments, sessions, events -----------------------------------------------------


def test_agents_and_environments(client):
    assert_error(client.post("/v1/agents", json={"name": "a"}), 400, "invalid_request_error")
    assert_error(client.post("/v1/agents", json={"name": "a", "model": 5}), 400,
                 "invalid_request_error")
    agent = client.post("/v1/agents", json={
        "name": "a", "model": "claude-x", "tools": [{"type": "agent_toolset_20260401"}],
        "system": "be brief"}).json()
    assert agent["id"].startswith("agent_") and agent["version"] == 1
    assert agent["model"]["id"] == "claude-x"
    assert agent["tools"][0]["default_config"]["enabled"] is True
    assert client.get(f"/v1/agents/{agent['id']}").json() == agent
    assert_error(client.get(f"/v1/agents/{agent['id']}", params={"version": 2}), 404,
                 "not_found_error")
    env = client.post("/v1/environments", json={"name": "e"}).json()
    assert env["id"].startswith("env_") and env["config"] == {"type": "self_hosted"}
    assert client.get(f"/v1/environments/{env['id']}").json() == env
    assert_error(client.post("/v1/environments", json={"name": "e", "config": {"type": "x"}}),
                 400, "invalid_request_error")
    sess = client.post("/v1/sessions", json={"agent": agent["id"],
                                             "environment_id": env["id"]}).json()
    snap = sess["agent"]
    assert snap["id"] == agent["id"] and snap["system"] == "be brief"
    assert snap["type"] == "agent" and snap["tools"] == agent["tools"]
    assert "created_at" not in snap  # a session agent, not the agent object
    opaque = client.post("/v1/sessions", json={
        "agent": {"type": "agent", "id": "agent_elsewhere", "version": 3}}).json()
    assert opaque["agent"] == {"type": "agent", "id": "agent_elsewhere", "version": 3}
    for bad in ({"agent": 5}, {"agent": {"type": "agent_with_overrides"}},
                {"environment_id": 7}, {"title": 3}, {"vault_ids": ["v"]},
                {"budget": {"x": 1}}, {"resources": "x"},
                {"initial_events": [{"type": "agent.message"}]}):
        assert_error(client.post("/v1/sessions", json=bad), 400, "invalid_request_error")
    assert client.get("/v1/sessions").json()["data"].__len__() == 2


def test_session_endpoints(client):
    s = make_store(client, "User Preferences!", description="prefs")
    other = make_store(client, "Other")
    sess = client.post("/v1/sessions", json={
        "agent": "agent_x", "environment_id": "env_x", "title": "t", "metadata": {"a": "1"},
        "resources": [
            {"type": "memory_store", "memory_store_id": s["id"], "instructions": "use it"},
            {"type": "memory_store", "memory_store_id": other["id"], "access": "read_only"},
        ]}).json()
    assert sess["status"] == "idle" and sess["type"] == "session"
    r0, r1 = sess["resources"]
    assert r0["mount_path"] == "/mnt/memory/user-preferences" and r0["access"] == "read_write"
    assert (r0["name"], r0["description"], r0["instructions"]) == (
        "User Preferences!", "prefs", "use it")
    assert r1["access"] == "read_only" and r0["id"].startswith("sesrsc_")
    base = f"/v1/sessions/{sess['id']}"
    assert client.get(base).json() == sess
    assert client.get(f"{base}/resources").json() == {"data": [r0, r1], "next_page": None}
    p1 = client.get(f"{base}/resources", params={"limit": 1}).json()
    assert p1["data"] == [r0] and p1["next_page"]
    p2 = client.get(f"{base}/resources", params={"limit": 1, "page": p1["next_page"]}).json()
    assert p2 == {"data": [r1], "next_page": None}
    assert client.get(f"{base}/resources/{r0['id']}").json() == r0
    assert client.get(f"{base}/resources/{s['id']}").json() == r0
    assert_error(client.delete(f"{base}/resources/{r0['id']}"), 400, "invalid_request_error")
    assert_error(client.post(f"{base}/resources", json={"type": "file", "file_id": "f"}), 400,
                 "invalid_request_error")
    upd = client.post(base, json={"metadata": {"a": None, "b": "2"}, "title": "new"}).json()
    assert upd["metadata"] == {"b": "2"} and upd["title"] == "new"
    assert client.post(base, json={"title": None}).json()["title"] == "new"
    listed = client.get("/v1/sessions", params={"memory_store_id": other["id"]}).json()
    assert [x["id"] for x in listed["data"]] == [sess["id"]]
    assert listed["prev_page"] is None
    for params in ({"statuses[]": "idle"}, {"statuses": "idle"}):
        assert len(client.get("/v1/sessions", params=params).json()["data"]) == 1
    assert client.get("/v1/sessions", params={"statuses[]": "running"}).json()["data"] == []
    assert_error(client.get("/v1/sessions", params={"statuses[]": "sleepy"}), 400,
                 "invalid_request_error")
    assert_error(client.get("/v1/sessions", params={"agent_id": "agent_x"}), 400,
                 "invalid_request_error")
    arch = client.post(f"{base}/archive").json()
    assert arch["archived_at"]
    assert client.get("/v1/sessions").json()["data"] == []
    assert len(client.get("/v1/sessions", params={"include_archived": "true"}).json()["data"]) == 1
    assert client.delete(base).json() == {"id": sess["id"], "type": "session_deleted"}
    assert_error(client.get(base), 404, "not_found_error")


@pytest.mark.parametrize("order", ["desc", "asc"])
def test_sessions_pages_go_both_ways(client, order):
    made = [client.post("/v1/sessions", json={}).json()["id"] for _ in range(5)]
    expected = list(reversed(made)) if order == "desc" else made

    def get(page=None):
        params = {"limit": 2, "order": order, **({"page": page} if page else {})}
        r = client.get("/v1/sessions", params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        return [x["id"] for x in body["data"]], body["next_page"], body["prev_page"]

    p1, n1, v1 = get()
    p2, n2, v2 = get(n1)
    p3, n3, v3 = get(n2)
    assert (p1, p2, p3) == (expected[:2], expected[2:4], expected[4:])
    assert v1 is None and n3 is None
    back2, bn2, bv2 = get(v3)
    assert back2 == p2 and bn2 and bv2
    back1, bn1, bv1 = get(bv2)
    assert back1 == p1 and bv1 is None
    assert get(bn1)[0] == p2
    other = "asc" if order == "desc" else "desc"  # a cursor is bound to its order
    assert_error(client.get("/v1/sessions", params={"page": v3, "order": other}), 400,
                 "invalid_request_error", "invalid_cursor")


def test_session_attachment_rules(client):
    stores = [make_store(client, f"s{i}")["id"] for i in range(9)]
    res = [{"type": "memory_store", "memory_store_id": i} for i in stores]
    assert_error(client.post("/v1/sessions", json={"resources": res}), 400,
                 "invalid_request_error", "limit_exceeded")
    assert_error(client.post("/v1/sessions", json={"resources": [
        {**res[0], "instructions": "x" * 4097}]}), 400, "invalid_request_error")
    assert_error(client.post("/v1/sessions", json={"resources": [res[0], res[0]]}), 400,
                 "invalid_request_error")
    assert_error(client.post("/v1/sessions", json={"resources": [
        {"type": "memory_store", "memory_store_id": "memstore_nope"}]}), 404, "not_found_error")
    client.post(f"/v1/memory_stores/{stores[0]}/archive")
    assert_error(client.post("/v1/sessions", json={"resources": [res[0]]}), 400,
                 "invalid_request_error", "store_archived")


def test_events_send_and_list(client):
    sess = client.post("/v1/sessions", json={"initial_events": [
        {"type": "user.message", "content": [{"type": "text", "text": "first"}]}]}).json()
    url = f"/v1/sessions/{sess['id']}/events"
    sent = client.post(url, json={"events": [
        {"type": "user.message", "content": [{"type": "text", "text": "tea"}]},
        {"type": "user.interrupt", "id": "spoofed", "processed_at": "1999-01-01T00:00:00Z"},
    ]}).json()
    assert [e["type"] for e in sent["data"]] == ["user.message", "user.interrupt"]
    assert all(e["id"] != "spoofed" and e["processed_at"] > "2000" for e in sent["data"])
    for bad in ({"events": []}, {"events": "x"}, {"events": [{"type": "agent.tool_use"}]},
                {"events": [{"type": "user.message"}]}, {}):
        assert_error(client.post(url, json=bad), 400, "invalid_request_error")
    every = client.get(url).json()
    assert [e["type"] for e in every["data"]] == ["user.message", "user.message",
                                                  "user.interrupt"]
    assert every["data"][0]["content"][0]["text"] == "first"
    desc = client.get(url, params={"order": "desc"}).json()["data"]
    assert [e["id"] for e in desc] == [e["id"] for e in reversed(every["data"])]
    only = client.get(url, params={"types[]": "user.interrupt"}).json()["data"]
    assert [e["type"] for e in only] == ["user.interrupt"]
    both = client.get(url, params=[("types[]", "user.interrupt"), ("types[]", "user.message")])
    assert len(both.json()["data"]) == 3
    # the SDK's session runner asks for limit=1000; more is clamped, not refused
    assert client.get(url, params={"limit": 1000}).status_code == 200
    assert len(client.get(url, params={"limit": 5000}).json()["data"]) == 3
    assert_error(client.get(url, params={"limit": 0}), 400, "invalid_request_error")
    page = client.get(url, params={"limit": 2}).json()
    rest = client.get(url, params={"limit": 2, "page": page["next_page"]}).json()
    assert [e["id"] for e in page["data"] + rest["data"]] == [e["id"] for e in every["data"]]
    after = client.get(url, params={"created_at[gt]": every["data"][0]["processed_at"]})
    assert len(after.json()["data"]) == 2


def test_sse_frame_always_names_its_event():
    frame = api.sse_frame("user.message", {"type": "user.message", "text": "a\nb"}, "sevt_1")
    assert frame == (b'event: user.message\nid: sevt_1\n'
                     b'data: {"type":"user.message","text":"a\\nb"}\n\n')


async def test_event_stream_sends_new_events_and_ends_on_delete(store):
    sess = store.sessions.create([])
    store.events.send(sess.id, [{"type": "user.message", "content": []}])  # history: not sent
    start = store.events.last_seq(sess.id)
    stream = api.EventHub(store).stream(sess.id, start)
    frames = [await anext(stream)]
    assert frames[0].startswith(b"event: ping\n")
    store.events.send(sess.id, [{"type": "user.message", "content": [{"type": "text",
                                                                       "text": "new"}]}])
    store.sessions.delete(sess.id)
    with trio.fail_after(5):
        async for frame in stream:
            frames.append(frame)
    assert all(f.startswith(b"event: ") and f.endswith(b"\n\n") for f in frames)
    events = [json.loads(f.split(b"data: ", 1)[1]) for f in frames[1:]]
    assert [e["type"] for e in events] == ["user.message", "session.deleted"]
    assert events[0]["content"][0]["text"] == "new"
    assert all(f"id: {e['id']}".encode() in f for e, f in zip(events, frames[1:], strict=True))


# -- OpenAPI ------------------------------------------------------------------------------------


def test_openapi_describes_every_route(anon):
    doc = anon.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    served = {(op.method.lower(), op.path) for op in api.OPS}
    described = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert served == described
    create = doc["paths"]["/v1/memory_stores/{memory_store_id}/memories"]["post"]
    assert {p["name"] for p in create["parameters"]} == {"memory_store_id", "view"}
    assert create["requestBody"]["content"]["application/json"]["schema"]["required"] == [
        "path", "content"]
    # every $ref resolves
    refs = {r.rsplit("/", 1)[1] for r in _refs(doc)}
    assert refs <= set(doc["components"]["schemas"])
    # and the documented routes are really served (a request is routed, not 404/405)
    for method, path in served:
        url = path.replace("{", "x").replace("}", "")
        r = anon.request(method.upper(), url, headers={"x-api-key": KEY})
        assert r.status_code not in (405, 500), (method, path, r.text)


def _refs(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "$ref":
                yield v
            else:
                yield from _refs(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _refs(v)


def _json_inputs(doc):
    """(method, path, operation) of every operation, from the document."""
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            yield method, path, op


def test_openapi_declares_the_real_type_of_every_input(anon):
    """Every query parameter was a string, every body field ``{}``, and an SSE route a plain
    string (issue 19): now each says its type, and the streams their events."""
    doc = anon.get("/openapi.json").json()
    types = set()
    for method, path, op in _json_inputs(doc):
        for p in op["parameters"]:
            assert p["schema"].get("type"), (method, path, p)
            types.add(str(p["schema"]["type"]))
        body = op.get("requestBody", {}).get("content", {}).get("application/json")
        if body is not None:
            for name, schema in body["schema"]["properties"].items():
                assert schema.get("type"), (method, path, name)
    assert {"string", "integer", "boolean", "array"} <= types
    p = doc["paths"]
    q = {x["name"]: x["schema"] for x in
         p["/v1/memory_stores/{memory_store_id}/memories"]["get"]["parameters"]}
    # Ranges, lengths and patterns too (issue 38 S6: test_openapi_constraints.py).
    assert q["limit"] == {"type": "integer", "minimum": 1, "maximum": 100}
    assert q["depth"] == {"type": "integer", "minimum": 0}
    assert q["view"] == {"type": "string", "enum": ["basic", "full"], "minLength": 1}
    assert {x["name"]: x["schema"] for x in p["/v1/sessions"]["get"]["parameters"]}[
        "statuses[]"] == {"type": "array", "items": {"type": "string", "minLength": 1}}
    body = p["/v1/sessions"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["properties"]["resources"] == {"type": ["array", "null"],
                                               "items": {"type": "object"}}
    assert body["properties"]["agent"]["type"] == ["string", "object", "null"]
    create = p["/v1/memory_stores/{memory_store_id}/memories"]["post"]
    props = create["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert {k: v["type"] for k, v in props.items()} == {"path": "string", "content": "string"}
    assert props["path"]["pattern"].startswith("^(?:/") and props["path"]["maxLength"] == 1024
    revert = p["/v1/sessions/{session_id}/memfs/revert"]["post"]["requestBody"]
    assert revert["content"]["application/json"]["schema"]["properties"]["force"] == {
        "type": ["boolean", "null"]}
    stream = p["/v1/memory_stores/{memory_store_id}/changes/stream"]["get"]
    sse = stream["responses"]["200"]["content"]["text/event-stream"]
    assert sse["x-memfs-sse-events"]["memfs.change"] == {"$ref": "#/components/schemas/Change"}
    assert {"ping", "memfs.reset"} <= set(sse["x-memfs-sse-events"])
    assert {(x["name"], x["in"]) for x in stream["parameters"]} >= {
        ("after", "query"), ("Last-Event-ID", "header")}
    events = p["/v1/sessions/{session_id}/events/stream"]["get"]["responses"]["200"]
    assert "text/event-stream" in events["content"]


_SAMPLE = {"string": "x", "integer": 1, "boolean": True, "object": {}, "array": []}


def _wrong(types) -> object:
    """A JSON value of none of ``types``."""
    return next(v for t, v in [("integer", "12"), ("string", 12), ("boolean", "yes"),
                               ("object", "x"), ("array", "x"), ("array", [1])]
                if not any(isinstance(v, bool if s == "boolean" else
                                      {"string": str, "integer": int, "object": dict,
                                       "array": list}[s]) and not (
                    s == "integer" and isinstance(v, bool)) for s in types))


def test_every_input_is_checked_as_the_document_declares_it(client):
    """The declaration the document is made from is the one requests are checked against:
    a body field or a query parameter of another type than documented is a 400 naming it,
    before any handler runs (ids in the paths need not exist)."""
    doc = client.get("/openapi.json").json()
    checked = 0
    for method, path, op in _json_inputs(doc):
        url = path.replace("{", "x_").replace("}", "")
        body = op.get("requestBody", {}).get("content", {}).get("application/json")
        if body is not None:
            schema = body["schema"]
            required = {n: _SAMPLE[_types(schema["properties"][n])[0]]
                        for n in schema.get("required", [])}
            for name, field in schema["properties"].items():
                wrong = _wrong(_types(field))
                r = client.request(method.upper(), url, json={**required, name: wrong})
                assert r.status_code == 400, (method, path, name, wrong, r.text)
                assert name in r.json()["error"]["message"], (method, path, name, r.text)
                checked += 1
        needed = {p["name"]: "x" for p in op["parameters"]
                  if p["in"] == "query" and p["required"]}
        for p in op["parameters"]:
            if p["in"] == "query" and p["schema"]["type"] in ("integer", "number", "boolean"):
                r = client.request(method.upper(), url, params={**needed, p["name"]: "²"})
                assert r.status_code == 400, (method, path, p["name"], r.text)
                assert p["name"] in r.json()["error"]["message"], (method, path, r.text)
                checked += 1
    assert checked >= 80  # every body field and typed query parameter of the API


def _types(schema) -> list[str]:
    t = schema["type"]
    return [x for x in ([t] if isinstance(t, str) else t) if x != "null"]
