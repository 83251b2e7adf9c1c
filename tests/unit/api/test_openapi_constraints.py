"""The OpenAPI document says what the store takes (issue 38 S6): schemathesis found requests
valid by the document (a ``limit`` of 0 or 1,000, any string as a sha256, a path without its
``/``, a name of 10,000 characters) that the store refused. Each range, length and pattern is
now declared with the constant the store's check reads (:mod:`memfs.rules`).

The test walks the document: for every declared constraint of a query parameter or body field,
a value just inside is accepted (no 400) and a value just outside is a 400. Patterns, which
have no "just outside", are held to examples on both sides, themselves checked against the
declared pattern. A constraint the walk has no example for fails it: declare one, test one.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import pytest
from starlette.testclient import TestClient

from memfs import rules
from memfs.api import create_app
from memfs.store import Store

KEY = "sk-openapi-constraints-0123"

#: A valid value of each field or parameter the probes fill in (a required one, or the base
#: of a string padded to its maximum length).
SAMPLES: dict[str, Any] = {
    "name": "n", "description": "", "path": "/p", "content": "x", "old_path": "/p",
    "new_path": "/q", "query": "w", "path_prefix": "/", "memfs_type": "t", "memfs_tag": "t",
}

#: Examples on each side of each pattern, by the field or parameter that declares it.
INSIDE: dict[str, list[str]] = {
    "path": ["/a", "/.x", "/..x", "/...", "/a b/ü.md", "/" + "/".join("s" * 20)],
    "expected_content_sha256": ["0" * 64, "0123456789abcdef" * 4],
    "name": ["n", "Team notes é", "a\u00adb"],
    "query": ["w", "  two words "],
    "path_prefix": ["/", "/a/", "/a"],
    "channels": ["words", "meaning", "words,meaning", "meaning,words"],
}
OUTSIDE: dict[str, list[str]] = {
    "path": ["a", "/a/", "//a", "/.", "/a/..", "/./a", "/a\u00adb", "/a\u2028", "/a\x01",
             "/a\x85", "/a\U000e0041", "/" + "/".join("s" * 21)],
    "expected_content_sha256": ["0" * 63, "0" * 65, "A" * 64, "g" * 64],
    "name": ["a\x01b", "a\x7f", "a\x85", "tab\there"],
    "query": ["   ", "a\x00b"],
    "path_prefix": ["a/", "/a\x00"],
    "channels": ["tea", "words,", ",words", "words meaning", "WORDS"],
}
for _f in ("old_path", "new_path"):
    INSIDE[_f], OUTSIDE[_f] = INSIDE["path"], OUTSIDE["path"]


@pytest.fixture(scope="module")
def env(tmp_path_factory: Any):
    store = Store(str(tmp_path_factory.mktemp("openapi") / "memfs.db"))
    sid = store.stores.create("Notes").id
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": KEY}) as c:
        mid = c.post(f"/v1/memory_stores/{sid}/memories",
                     json={"path": "/keep.md", "content": "k"}).json()["id"]
        vid = store.versions.list(sid).data[0].id
        agent = c.post("/v1/agents", json={"name": "a", "model": "m"}).json()["id"]
        environment = c.post("/v1/environments", json={"name": "e"}).json()["id"]
        session = c.post("/v1/sessions", json={
            "agent": agent, "environment_id": environment,
            "resources": [{"type": "memory_store", "memory_store_id": sid}]})
        assert session.status_code == 200, session.text
        ids = {"memory_store_id": sid, "memory_id": mid, "memory_version_id": vid,
               "session_id": session.json()["id"]}
        yield c, ids, c.get("/openapi.json").json()


def _constraints(doc: dict[str, Any]):
    """(path, method, "query" | "body", name, schema, operation) of every declared input
    with a range, a length beyond a query's non-empty rule, or a pattern."""
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            inputs = [("query", p["name"], p["schema"]) for p in op["parameters"]
                      if p["in"] == "query"]
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None:
                inputs += [("body", n, s) for n, s in body["schema"]["properties"].items()]
            for where, name, schema in inputs:
                keys = {"minimum", "maximum", "maxLength", "pattern"} & set(schema)
                if where == "body" and "minLength" in schema:
                    keys.add("minLength")
                if keys:
                    yield path, method.upper(), where, name, schema, op


def _is_stream(op: dict[str, Any]) -> bool:
    return "text/event-stream" in op["responses"].get("200", {}).get("content", {})


def _send(c: TestClient, ids: dict[str, str], path: str, method: str, op: dict[str, Any],
          where: str, name: str, value: Any) -> Any:
    url = re.sub(r"\{(\w+)\}", lambda m: ids[m.group(1)], path)
    query: dict[str, Any] = {p["name"]: SAMPLES[p["name"]] for p in op["parameters"]
                             if p["in"] == "query" and p["required"]}
    body: dict[str, Any] | None = None
    if "requestBody" in op:
        schema = op["requestBody"]["content"]["application/json"]["schema"]
        body = {f: SAMPLES[f] for f in schema.get("required", [])}
    if where == "query":
        query[name] = value
    else:
        assert body is not None
        body[name] = value
    return c.request(method, url, params=query, json=body)


def _probes(schema: dict[str, Any], name: str, where: str) -> tuple[list[Any], list[Any]]:
    """(values just inside, values just outside) of a schema's ranges, lengths and pattern
    (a query's minLength of 1: test_a_query_string_is_declared_non_empty)."""
    inside: list[Any] = []
    outside: list[Any] = []
    step = 1 if schema["type"] == "integer" else 0.5
    if "minimum" in schema:
        inside.append(schema["minimum"])
        outside.append(schema["minimum"] - step)
    if "maximum" in schema:
        inside.append(schema["maximum"])
        outside.append(schema["maximum"] + step)
    if "maxLength" in schema:
        base = SAMPLES[name]
        inside.append(base + "a" * (schema["maxLength"] - len(base)))
        outside.append(base + "a" * (schema["maxLength"] + 1 - len(base)))
    if where == "body" and schema.get("minLength", 0) > 0:
        inside.append(SAMPLES[name])
        outside.append(SAMPLES[name][:schema["minLength"] - 1])
    if "pattern" in schema:
        assert name in INSIDE and name in OUTSIDE, f"give examples of {name}'s pattern"
        pattern = re.compile(schema["pattern"])
        for v in INSIDE[name]:
            assert pattern.search(v), f"{name}: {v!r} should match {schema['pattern']!r}"
        for v in OUTSIDE[name]:
            assert not pattern.search(v), f"{name}: {v!r} should not match the pattern"
        inside += INSIDE[name]
        outside += OUTSIDE[name]
    return inside, outside


def test_every_declared_constraint_is_the_stores(env):
    c, ids, doc = env
    probed = set()
    for path, method, where, name, schema, op in _constraints(doc):
        inside, outside = _probes(schema, name, where)
        probed.add((method, path, name))
        if not _is_stream(op):  # a stream accepted would not end
            for v in inside:
                r = _send(c, ids, path, method, op, where, name, v)
                assert r.status_code != 400 and r.status_code < 500, (
                    f"{method} {path} {where} {name}={v!r:.60} is valid by the document, "
                    f"refused: {r.status_code} {r.text[:300]}")
        for v in outside:
            r = _send(c, ids, path, method, op, where, name, v)
            assert r.status_code == 400, (
                f"{method} {path} {where} {name}={v!r:.60} is outside the document, "
                f"answered {r.status_code} {r.text[:300]}")
    # The walk reached what the issue named (a document without them would pass it empty).
    for method, path, name in [
        ("GET", "/v1/memory_stores", "limit"),
        ("GET", "/v1/memory_stores/{memory_store_id}/changes", "after"),
        ("DELETE", "/v1/memory_stores/{memory_store_id}/memories/{memory_id}",
         "expected_content_sha256"),
        ("POST", "/v1/memory_stores", "name"),
        ("POST", "/v1/memory_stores/{memory_store_id}/memories", "path"),
        ("GET", "/v1/memory_stores/{memory_store_id}/memfs/search", "min_score"),
    ]:
        assert (method, path, name) in probed, (method, path, name)


def test_a_query_string_is_declared_non_empty(env):
    """Query refuses an empty value (tests/unit/api/test_empty_query.py): the document says so
    for every query string, and for the items of every query array of strings."""
    _, _, doc = env
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            for p in op["parameters"]:
                s = p["schema"]
                if p["in"] != "query":
                    continue
                if "string" in s["type"]:
                    assert s.get("minLength", 0) >= 1, (method, path, p["name"])
                if s.get("items", {}).get("type") == "string":
                    assert s["items"].get("minLength", 0) >= 1, (method, path, p["name"])


def test_the_path_table_is_this_pythons_control_and_format_characters():
    """:data:`memfs.rules._PATH_FORBIDDEN`, which both validate_path and the document's path
    pattern read, is every Cc and Cf code point and U+2028/U+2029 of this Python's Unicode
    (a newer Python adding format characters fails here: update the table)."""
    table = {c for a, b in rules._PATH_FORBIDDEN for c in range(a, b + 1)}
    wanted = {c for c in range(0x110000) if unicodedata.category(chr(c)) in ("Cc", "Cf")}
    assert table == wanted | {0x2028, 0x2029}
