"""Typed memories over HTTP (issue 41 §5 "API"), in-process (starlette TestClient) on SQLite
and PostgreSQL: ``memfs_meta`` on every answer that holds a memory, the listing's
``memfs_type`` / ``memfs_tag`` filters, the extensions ``.../memfs/describe``,
``.../memfs/expire`` and ``.../memfs/clear_type`` (who may call them, what they answer, their
400s and 404s), bad typed metadata on a store, and the OpenAPI document that declares them."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from memfs.api import create_app
from memfs.models import Actor

KEY = "typed-api-test-key"
API = Actor.api("apikey_test")
#: A memory that expired long ago (an absolute date in its front matter).
EXPIRED = "---\nexpires: 2001-01-01\ntags: [old]\n---\nyesterday's plan\n"
META_KEYS = {"type", "importance", "expires_at", "pinned", "tags", "description",
             "supersedes", "source", "warnings"}


@pytest.fixture
def store(backend):
    return backend.open()


@pytest.fixture
def http(store):
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": KEY},
                    raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def sid(store) -> str:
    """A store with a memory of each kind: a preference with tags, a context memory (dated
    today: not expired), an expired one, and an untyped one."""
    s = store.stores.create("notes").id
    store.memories.create(s, "/preferences/tea.md",
                          "---\ntags: [drinks, morning]\n---\ngreen tea", actor=API)
    store.memories.create(s, "/context/today.md", "the sprint goal", actor=API)
    store.memories.create(s, "/context/old.md", EXPIRED, actor=API)
    store.memories.create(s, "/misc.md", "no type here", actor=API)
    return s


def mem_url(sid: str, rest: str = "") -> str:
    return f"/v1/memory_stores/{sid}/memories{rest}"


def ext(sid: str, name: str) -> str:
    return f"/v1/memory_stores/{sid}/memfs/{name}"


def assert_error(r: Any, status: int, type_: str, *fragments: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == type_, body
    for f in fragments:
        assert f in body["error"]["message"], body
    err: dict[str, Any] = body["error"]
    return err


def meta_of(d: dict[str, Any]) -> dict[str, Any]:
    meta = d.get("memfs_meta")
    assert isinstance(meta, dict) and set(meta) == META_KEYS, d
    return meta


# -- memfs_meta on every answer that holds a memory ---------------------------------------------


def test_every_answer_holding_a_memory_has_memfs_meta(http, sid):
    body = {"path": "/decisions/db.md", "content": "---\ntags: [db]\n---\nPostgreSQL"}
    for view in ("basic", "full"):
        created = http.post(mem_url(sid), params={"view": view},
                            json={**body, "path": f"/decisions/{view}.md"}).json()
        assert meta_of(created)["type"] == "decision" and meta_of(created)["tags"] == ["db"]
    mid = created["id"]
    for view in ("basic", "full"):
        got = http.get(mem_url(sid, f"/{mid}"), params={"view": view}).json()
        assert meta_of(got)["importance"] == 0.8
    for view in ("basic", "full"):
        updated = http.post(mem_url(sid, f"/{mid}"), params={"view": view},
                            json={"content": f"---\ntype: knowledge\n---\n{view}"}).json()
        assert meta_of(updated)["type"] == "knowledge"
        listed = http.get(mem_url(sid), params={"view": view}).json()["data"]
        assert listed and all(meta_of(m) for m in listed)
    rolled = http.get(mem_url(sid), params={"depth": 1}).json()["data"]
    assert [meta_of(m)["type"] for m in rolled if m["type"] == "memory"] == [None]  # /misc.md
    tree = http.get(ext(sid, "tree")).json()["data"]
    assert {m["path"]: meta_of(m)["type"] for m in tree}["/preferences/tea.md"] == "preference"
    written = http.post(ext(sid, "write"), json={"path": "/context/w.md", "content": "w"}).json()
    assert meta_of(written)["type"] == "context" and meta_of(written)["expires_at"]
    renamed = http.post(ext(sid, "rename"), json={"old_path": "/context/w.md",
                                                  "new_path": "/knowledge/w.md"}).json()
    assert meta_of(renamed)["type"] == "knowledge" and meta_of(renamed)["expires_at"] is None
    moved = http.post(ext(sid, "rename_prefix"), json={"old_prefix": "/knowledge/",
                                                       "new_prefix": "/context/k/"}).json()
    assert [meta_of(m)["type"] for m in moved["data"]] == ["context"]
    deleted = http.post(ext(sid, "delete"), json={"path": "/context/k/w.md"}).json()
    assert meta_of(deleted)["type"] == "context"
    # A deleted memory's version holds no content; its last live version does.
    versions = http.get(f"/v1/memory_stores/{sid}/memory_versions",
                        params={"memory_id": deleted["id"]}).json()["data"]
    live = next(v for v in versions if v["operation"] != "deleted")
    restored = http.post(f"/v1/memory_stores/{sid}/memory_versions/{live['id']}/memfs/restore",
                         json={}).json()
    assert meta_of(restored)["type"] == "context"


# -- the listing's filters ----------------------------------------------------------------------


def test_the_listing_filters_by_type_and_tag(http, sid):
    def paths(**params: str) -> list[str]:
        r = http.get(mem_url(sid), params=params)
        assert r.status_code == 200, r.text
        return [m["path"] for m in r.json()["data"]]

    assert paths(memfs_type="context") == ["/context/old.md", "/context/today.md"]
    assert paths(memfs_type="preference", view="full") == ["/preferences/tea.md"]
    assert paths(memfs_tag="morning") == ["/preferences/tea.md"]
    assert paths(memfs_type="context", memfs_tag="old") == ["/context/old.md"]
    assert paths(memfs_type="context", memfs_tag="morning") == []
    assert paths(memfs_type="nosuchtype") == []
    # pages of a filtered listing stay filtered
    r = http.get(mem_url(sid), params={"memfs_type": "context", "limit": 1}).json()
    assert [m["path"] for m in r["data"]] == ["/context/old.md"] and r["next_page"]
    rest = http.get(mem_url(sid), params={"memfs_type": "context", "page": r["next_page"]})
    assert [m["path"] for m in rest.json()["data"]] == ["/context/today.md"]
    # a cursor of another filter is refused, not read across filters
    assert_error(http.get(mem_url(sid), params={"memfs_type": "preference",
                                                "page": r["next_page"]}),
                 400, "invalid_request_error")


@pytest.mark.parametrize("params, fragment", [
    ({"memfs_type": ""}, "memfs_type is empty"),
    ({"memfs_tag": ""}, "memfs_tag is empty"),
    ({"memfs_type": "x" * 65}, "1 to 64"),
    ({"memfs_tag": "t" * 65}, "1 to 64"),
    ({"memfs_type": "context", "depth": "1"}, "depth must be 0"),
    ({"memfs_type": "context", "page": "bogus"}, "invalid page cursor"),
    ("memfs_type=%ED%A0%80", "not valid UTF-8"),  # a lone surrogate's bytes
    ("memfs_tag=%FF", "not valid UTF-8"),
])
def test_bad_filters_are_a_400(http, sid, params, fragment):
    r = (http.get(f"{mem_url(sid)}?{params}") if isinstance(params, str)
         else http.get(mem_url(sid), params=params))
    assert_error(r, 400, "invalid_request_error", fragment)


@pytest.mark.parametrize("value", ["a\x00b", "'; DROP TABLE memories; --", "%", "_", "é" * 64,
                                   "\U0001f600"])
def test_hostile_filters_match_nothing_and_break_nothing(http, store, sid, value):
    for name in ("memfs_type", "memfs_tag"):
        r = http.get(mem_url(sid), params={name: value})
        assert r.status_code == 200 and r.json()["data"] == [], r.text
    assert store.memories.count(sid) == 4


def test_a_filter_of_an_unknown_store_is_a_404(http):
    assert_error(http.get(mem_url("memstore_nope"), params={"memfs_type": "context"}),
                 404, "not_found_error")


# -- describe -----------------------------------------------------------------------------------


def test_describe_answers_the_store_s_description(http, store, sid):
    r = http.get(ext(sid, "describe"))
    assert r.status_code == 200, r.text
    d = r.json()
    want = store.typed.describe(sid)
    assert d["type"] == "memfs_store_description"
    assert {k: v for k, v in d.items() if k != "at"} == {
        k: v for k, v in want.items() if k != "at"}
    assert d["memories"] == 3 and d["by_type"] == {"(none)": 1, "context": 1,
                                                   "preference": 1}
    assert d["expired"]["count"] == 1 and d["expiry"] == "on"
    assert_error(http.get(ext("memstore_nope", "describe")), 404, "not_found_error")


# -- expire -------------------------------------------------------------------------------------


def test_expire_deletes_expired_memories_as_versions(http, store, sid):
    dry = http.post(ext(sid, "expire"), json={"dry_run": True})
    assert dry.status_code == 200, dry.text
    d = dry.json()
    assert d["type"] == "memfs_expiry_sweep" and d["dry_run"] is True
    assert [x["path"] for x in d["deleted"]] == ["/context/old.md"] and d["reverts"] == []
    assert store.memories.count(sid) == 4  # nothing deleted
    done = http.post(ext(sid, "expire"), json={}).json()
    assert done["dry_run"] is False and [x["path"] for x in done["deleted"]] == [
        "/context/old.md"]
    assert len(done["reverts"]) == 1 and done["reverts"][0].startswith("memrevert_")
    assert store.memories.count(sid) == 3
    versions = store.versions.list(sid, memory_id=done["deleted"][0]["memory_id"]).data
    assert [(v.operation, v.created_by) for v in versions][0] == (
        "deleted", Actor("service_account_actor", "svac_memfs_expiry"))
    again = http.post(ext(sid, "expire"), json={"dry_run": False}).json()
    assert again["deleted"] == [] and again["reverts"] == []


def test_the_reverts_of_a_sweep_and_a_clear_undo_them_in_their_workspace_only(http, store,
                                                                               sid):
    """The revert ids that expire and clear_type answer are what ``memfs session revert``
    takes: over HTTP too, by the store's workspace, and as if unknown to another's."""
    swept = http.post(ext(sid, "expire"), json={}).json()["reverts"][0]
    cleared = http.post(ext(sid, "clear_type"), json={"memory_type": "preference"}).json()
    assert store.memories.count(sid) == 2
    other = store.keys.create("b-admin", workspace="team-b", role="admin").key
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": other},
                    raise_server_exceptions=False) as b:
        for rid in (swept, cleared["revert_id"]):
            assert_error(b.post(f"/v1/sessions/{rid}/memfs/revert", json={}), 404,
                         "not_found_error")
    assert store.memories.count(sid) == 2
    for rid in (swept, cleared["revert_id"]):
        r = http.post(f"/v1/sessions/{rid}/memfs/revert", json={})
        assert r.status_code == 200, r.text
        assert r.json()["complete"] is True
    assert [m.path for m in store.memories.tree(sid)] == [
        "/context/old.md", "/context/today.md", "/misc.md", "/preferences/tea.md"]


def test_expire_in_a_store_that_only_reports_deletes_nothing(http, store):
    s = store.stores.create("old", metadata={"memfs_expiry": "report"}).id
    store.memories.create(s, "/context/old.md", EXPIRED, actor=API)
    d = http.post(ext(s, "expire"), json={}).json()
    assert d["deleted"] == [] and [x["path"] for x in d["reported"]] == ["/context/old.md"]
    assert store.memories.count(s) == 1


@pytest.mark.parametrize("body, fragment", [
    ({"dry_run": "yes"}, "dry_run must be true or false"),
    ({"dry_run": 1}, "dry_run must be true or false"),
    ({"store": "x"}, "unknown field"),
    ([], "JSON object"),
])
def test_expire_refuses_bad_bodies(http, sid, store, body, fragment):
    assert_error(http.post(ext(sid, "expire"), json=body), 400, "invalid_request_error",
                 fragment)
    assert store.memories.count(sid) == 4


def test_expire_of_an_unknown_store_is_a_404(http):
    assert_error(http.post(ext("memstore_nope", "expire"), json={}), 404, "not_found_error")


# -- clear_type ---------------------------------------------------------------------------------


def test_clear_type_deletes_a_type_in_one_undoable_transaction(http, store, sid):
    dry = http.post(ext(sid, "clear_type"), json={"memory_type": "context", "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert dry.json() == {"type": "memfs_type_cleared", "memory_store_id": sid,
                          "memory_type": "context", "dry_run": True, "revert_id": None,
                          "deleted": ["/context/old.md", "/context/today.md"]}
    assert store.memories.count(sid) == 4
    d = http.post(ext(sid, "clear_type"), json={"memory_type": "context"}).json()
    assert d["deleted"] == ["/context/old.md", "/context/today.md"]
    assert d["revert_id"].startswith("memrevert_") and d["dry_run"] is False
    assert [m.path for m in store.memories.tree(sid)] == ["/misc.md", "/preferences/tea.md"]
    # who cleared it: the caller (the server key's actor)
    gone = store.versions.list(sid, operation="deleted").data
    assert {v.created_by.type for v in gone} == {"api_actor"}  # type: ignore[union-attr]
    # undoable as a revert
    r = http.post(f"/v1/sessions/{d['revert_id']}/memfs/revert", json={})
    assert r.status_code == 200, r.text
    assert store.memories.count(sid) == 4


@pytest.mark.parametrize("body, status, fragment", [
    ({}, 400, "memory_type is required"),
    ({"memory_type": 5}, 400, "memory_type must be a string"),
    ({"memory_type": ""}, 400, "type must be one of"),
    ({"memory_type": "nosuchtype"}, 400, "not a type of"),
    ({"memory_type": "context", "dry_run": "no"}, 400, "dry_run must be true or false"),
    ({"memory_type": "context", "extra": 1}, 400, "unknown field"),
])
def test_clear_type_refuses_bad_bodies(http, store, sid, body, status, fragment):
    assert_error(http.post(ext(sid, "clear_type"), json=body), status,
                 "invalid_request_error", fragment)
    assert store.memories.count(sid) == 4


def test_clear_type_of_a_store_whose_types_are_off(http, store):
    s = store.stores.create("plain", metadata={"memfs_types": "off"}).id
    assert_error(http.post(ext(s, "clear_type"), json={"memory_type": "context"}), 400,
                 "invalid_request_error", "its types are off")
    assert_error(http.post(ext("memstore_nope", "clear_type"),
                           json={"memory_type": "context"}), 404, "not_found_error")


# -- who may call them ----------------------------------------------------------------------------


def test_a_session_token_describes_and_clears_its_stores_but_never_expires(store, sid):
    ro = store.stores.create("docs").id
    store.memories.create(ro, "/context/a.md", "a", actor=API)
    other = store.stores.create("secrets").id
    s = store.sessions.create([{"type": "memory_store", "memory_store_id": sid},
                              {"type": "memory_store", "memory_store_id": ro,
                               "access": "read_only"}], status="running")
    token = store.sessions.create_token(s.id).token
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": token},
                    raise_server_exceptions=False) as agent:
        for attached in (sid, ro):  # read access is enough to describe
            r = agent.get(ext(attached, "describe"))
            assert r.status_code == 200 and r.json()["memory_store_id"] == attached, r.text
            # expiry is a person's action: never a session's
            assert_error(agent.post(ext(attached, "expire"), json={"dry_run": True}), 403,
                         "permission_error")
        # a store the session was not given: as if unknown
        unknown = agent.get(ext("memstore_nope", "describe"))
        for url, method, body in ((ext(other, "describe"), "GET", None),
                                  (ext(other, "expire"), "POST", {}),
                                  (ext(other, "clear_type"), "POST",
                                   {"memory_type": "context"})):
            r = agent.request(method, url, json=body)
            assert_error(r, 404, "not_found_error")
            assert r.json()["error"]["message"] == unknown.json()["error"]["message"].replace(
                "memstore_nope", other)
        # read_only: no clearing
        assert_error(agent.post(ext(ro, "clear_type"), json={"memory_type": "context"}), 403,
                     "permission_error")
        assert store.memories.count(ro) == 1
        # read_write: cleared, attributed to the session
        r = agent.post(ext(sid, "clear_type"), json={"memory_type": "context"})
        assert r.status_code == 200, r.text
        assert r.json()["deleted"] == ["/context/old.md", "/context/today.md"]
    gone = store.versions.list(sid, operation="deleted").data
    assert {v.created_by for v in gone} == {Actor.session(s.id)}
    assert store.memories.count(sid) == 2


def test_a_read_only_key_describes_but_neither_expires_nor_clears(store, sid):
    reader = store.keys.create("reader", role="read_only").key
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": reader},
                    raise_server_exceptions=False) as c:
        assert c.get(ext(sid, "describe")).status_code == 200
        assert_error(c.post(ext(sid, "expire"), json={}), 403, "permission_error")
        assert_error(c.post(ext(sid, "clear_type"), json={"memory_type": "context"}), 403,
                     "permission_error")
    assert store.memories.count(sid) == 4


def test_without_a_key_it_is_a_401(store, sid):
    with TestClient(create_app(store, [KEY])) as anon:
        assert anon.get(ext(sid, "describe")).status_code == 401
        assert anon.post(ext(sid, "expire"), json={}).status_code == 401


# -- a store's typed metadata ------------------------------------------------------------------


@pytest.mark.parametrize("metadata, fragment", [
    ({"memfs_types": "bogus"}, "memfs_types must be 'off', 'default' or a JSON object"),
    ({"memfs_types": "[1]"}, "memfs_types must be a JSON object"),
    ({"memfs_types": '{"Context": {}}'}, "type name 'Context'"),
    ({"memfs_types": '{"ctx": {"expires": "soon"}}'}, "expires must be 'never'"),
    ({"memfs_types": '{"ctx": {"importance": [1]}}'}, "type ctx"),
    ({"memfs_types": '{"ctx": {"scope": {}}}'}, "scope must be general or workflow"),
    ({"memfs_types": '{"ctx": {"directory": 5}}'}, "directory must be a path"),
    ({"memfs_types": '{"ctx": {"expires": 7}}'}, "expires must be 'never'"),
    ({"memfs_types": '{"ctx": 1}'}, "must be an object"),
    ({"memfs_types": "1e999"}, "memfs_types must be a JSON object"),
    ({"memfs_expiry": "sometimes"}, "memfs_expiry must be 'on'"),
    ({"memfs_expiry": "ON"}, "memfs_expiry must be 'on'"),
])
def test_bad_typed_metadata_is_a_400_invalid_metadata(http, store, sid, metadata, fragment):
    before = store.stores.get(sid)
    for r in (http.post("/v1/memory_stores", json={"name": "t", "metadata": metadata}),
              http.post(f"/v1/memory_stores/{sid}", json={"metadata": metadata})):
        err = assert_error(r, 400, "invalid_request_error", fragment)
        assert err["details"] == {"error_code": "invalid_metadata"}, err
    assert store.stores.get(sid) == before
    assert [s.id for s in store.stores.list().data] == [sid]


def test_good_typed_metadata_is_taken(http, store, sid):
    types = '{"todo": {"directory": "/todo/", "expires": "2d", "importance": "high"}}'
    r = http.post(f"/v1/memory_stores/{sid}", json={"metadata": {"memfs_types": types}})
    assert r.status_code == 200, r.text
    d = http.get(ext(sid, "describe")).json()
    assert [t["name"] for t in d["types"]["types"]] == ["todo"]


# -- the OpenAPI document -----------------------------------------------------------------------


def test_openapi_declares_the_filters_and_the_extensions(http):
    doc = http.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]
    listing = doc["paths"]["/v1/memory_stores/{memory_store_id}/memories"]["get"]
    params = {p["name"]: p for p in listing["parameters"] if p["in"] == "query"}
    for name in ("memfs_type", "memfs_tag"):
        assert params[name]["schema"]["type"] == "string" and not params[name]["required"]
        assert params[name]["schema"]["maxLength"] == 64
        assert "memfs extension" in params[name]["schema"]["description"]
    ms = "/v1/memory_stores/{memory_store_id}/memfs"
    for path, method, answer, body in (
            ("/describe", "get", "MemfsStoreDescription", None),
            ("/expire", "post", "MemfsExpirySweep", {"dry_run"}),
            ("/clear_type", "post", "MemfsTypeCleared", {"memory_type", "dry_run"})):
        op = doc["paths"][ms + path][method]
        assert op["x-memfs-extension"] is True
        assert op["responses"]["200"]["content"]["application/json"]["schema"] == {
            "$ref": f"#/components/schemas/{answer}"}
        assert schemas[answer]["properties"]["type"]["const"]
        if body is not None:
            fields = op["requestBody"]["content"]["application/json"]["schema"]["properties"]
            assert set(fields) == body
    clear = doc["paths"][ms + "/clear_type"]["post"]["requestBody"]["content"][
        "application/json"]["schema"]
    assert clear["required"] == ["memory_type"]
    # the answers' schemas name every key the store answers
    assert set(schemas["MemfsExpirySweep"]["properties"]) == {
        "type", "dry_run", "deleted", "reported", "skipped", "reverts"}
    assert set(schemas["MemfsTypeCleared"]["properties"]) == {
        "type", "memory_store_id", "memory_type", "deleted", "revert_id", "dry_run"}
    assert set(schemas["MemfsStoreDescription"]["properties"]) == {
        "type", "memory_store_id", "name", "at", "memories", "content_size_bytes", "pinned",
        "by_type", "by_directory", "by_tag", "expiring_soon", "expired", "oldest_change",
        "newest_change", "warnings", "expiry", "types"}
