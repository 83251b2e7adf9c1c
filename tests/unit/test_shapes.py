"""Wire shapes declared once (issue 21): a model's dataclass fields are its JSON object
(``to_dict``), what the client decodes (``from_dict``) and its schema in ``/openapi.json``
(``json_schema``); a route's declared inputs are what the document lists, with real types."""

from __future__ import annotations

from typing import Any

import pytest

from memfs.api import OPS
from memfs.api.app import openapi
from memfs.models import (
    Actor,
    Dream,
    Memory,
    MemoryPrefix,
    MemoryStore,
    MemoryVersion,
    RecallHit,
    RecallResult,
    Session,
    SessionResource,
    SessionToken,
    Snapshot,
)

T = "2026-01-02T03:04:05.000000Z"
_MEMORY = Memory("mem_1", "memstore_1", "/a.md", "hi", "ab" * 32, 2, "memver_1", T, T)
_RESOURCE = SessionResource("sesrsc_1", "sesn_1", "memstore_1", "read_only", None, "notes",
                            "", "/mnt/memory/notes")
SAMPLES: list[Any] = [
    MemoryStore("memstore_1", "notes", "", {"k": "v"}, T, T, None),
    _MEMORY,
    MemoryPrefix("/dir/"),
    MemoryVersion("memver_1", "mem_1", "memstore_1", "created", T, "/a.md", "hi", "ab" * 32,
                  2, Actor.session("sesn_1"), None, None),
    MemoryVersion("memver_2", "mem_1", "memstore_1", "modified", T, None, None, None, None,
                  None, T, Actor.api("apikey_1")),
    _RESOURCE,
    Session("sesn_1", "running", (_RESOURCE,), None, None, {}, "a title", T, T, None),
    SessionToken("sesntok_1", "sesn_1", "secret", T, T),
    Dream("dream_1", "failed",
          [{"type": "memory_store", "memory_store_id": "memstore_1"},
           {"type": "sessions", "session_ids": ["sesn_1"]}],
          {"id": "claude-x", "speed": "standard"}, None, {}, [], None,
          {"type": "error", "message": "no"},
          {"input_tokens": 1, "output_tokens": 2, "cache_creation_input_tokens": 0,
           "cache_read_input_tokens": 0}, T, T, None),
    Snapshot("memstore_1", "memver_1", T, [_MEMORY], after_version_id="memver_1",
             redacted={"memver_0": T}, unknown_memory_ids=["mem_0"]),
    RecallResult([RecallHit("mem_1", "/a.md", 0.5, "hi", ("words",), T)], True, None, 1, 1,
                 None),
]


def _check(value: Any, schema: dict[str, Any], schemas: dict[str, Any], where: str) -> None:
    """A small JSON Schema check: the keywords the document uses."""
    if "$ref" in schema:
        _check(value, schemas[schema["$ref"].rsplit("/", 1)[1]], schemas, where)
        return
    if "oneOf" in schema:
        fits = 0
        for option in schema["oneOf"]:
            try:
                _check(value, option, schemas, where)
                fits += 1
            except AssertionError:
                pass
        assert fits == 1, (where, value, schema)
        return
    if "const" in schema:
        assert value == schema["const"], (where, value)
    if "enum" in schema:
        assert value in schema["enum"], (where, value)
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        py = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
              "object": dict, "array": list, "null": type(None)}
        assert any(isinstance(value, py[t]) and not (t in ("integer", "number")
                   and isinstance(value, bool)) for t in types), (where, value, types)
    if isinstance(value, dict):
        props = schema.get("properties", {})
        assert set(schema.get("required", [])) <= set(value), (where, value)
        for k, v in value.items():
            if k in props:
                _check(v, props[k], schemas, f"{where}.{k}")
            elif isinstance(schema.get("additionalProperties"), dict):
                _check(v, schema["additionalProperties"], schemas, f"{where}.{k}")
            else:
                assert not props or schema.get("additionalProperties", True), (where, k)
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            _check(v, schema["items"], schemas, f"{where}[{i}]")


@pytest.mark.parametrize("model", SAMPLES, ids=lambda m: type(m).__name__)
def test_a_model_is_what_its_declaration_says(model: Any) -> None:
    """What the API sends fits the document's schema of it, field for field, and decodes back
    into the same model."""
    schemas = openapi()["components"]["schemas"]
    name = type(model).__dict__.get("SCHEMA_NAME", type(model).__name__)
    wire = model.to_dict()
    assert schemas[name] == type(model).json_schema()
    assert list(wire) == list(schemas[name]["properties"])
    _check(wire, schemas[name], schemas, name)
    extra = {"session_id": "sesn_1"} if isinstance(model, SessionResource) else {}
    assert type(model).from_dict(wire, **extra) == model


def test_the_wire_is_a_copy_and_local_fields_stay_local() -> None:
    store = SAMPLES[0]
    store.to_dict()["metadata"]["k"] = "changed"
    assert store.metadata == {"k": "v"}
    assert "seq" not in _MEMORY.to_dict() and "session_id" not in _RESOURCE.to_dict()
    assert "candidates" not in SAMPLES[-1].to_dict()
    assert Memory.from_dict({**_MEMORY.to_dict(), "memfs_seq": 9}, seq=9).seq == 9
    assert Session.from_dict(SAMPLES[6].to_dict()).resources[0].session_id == "sesn_1"
    # A field the model does not know (a newer server's) is ignored.
    assert MemoryPrefix.from_dict({"type": "memory_prefix", "path": "/d/", "new": 1}) == (
        MemoryPrefix("/d/"))


def test_the_model_schemas_have_real_types() -> None:
    schemas = openapi()["components"]["schemas"]
    memory = schemas["Memory"]["properties"]
    assert memory["content_size_bytes"] == {"type": "integer"}
    assert memory["content"] == {"type": ["string", "null"]}
    assert memory["created_at"] == {"type": "string", "format": "date-time"}
    version = schemas["MemoryVersion"]["properties"]
    assert version["operation"] == {"enum": ["created", "modified", "deleted"]}
    assert version["created_by"] == {"oneOf": [{"$ref": "#/components/schemas/Actor"},
                                               {"type": "null"}]}
    session = schemas["Session"]["properties"]
    assert session["resources"] == {"type": "array",
                                    "items": {"$ref": "#/components/schemas/SessionResource"}}
    assert session["metadata"] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert session["status"]["enum"] == ["rescheduling", "running", "idle", "terminated"]
    assert schemas["SearchResult"]["properties"]["data"]["items"] == {
        "$ref": "#/components/schemas/SearchHit"}
    assert schemas["SearchHit"]["properties"]["score"]["type"] == "number"


def test_every_declared_input_of_every_route_is_in_the_document() -> None:
    """The document lists a route's query parameters and body fields as the route table
    declares them (the same declaration the requests are checked against), each typed."""
    paths = openapi()["paths"]
    for op in OPS:
        doc = paths[op.path][op.method.lower()]
        query = {p["name"]: p for p in doc["parameters"] if p["in"] == "query"}
        assert set(query) == {q.name for q in op.query}, (op.method, op.path)
        for q in op.query:
            assert query[q.name]["schema"]["type"] == (
                q.types[0] if len(q.types) == 1 else list(q.types)), (op.path, q.name)
            assert query[q.name]["required"] == q.required
        if op.method == "GET" or op.raw_body:
            continue
        body = doc["requestBody"]["content"]["application/json"]["schema"]
        assert body["additionalProperties"] is False
        assert set(body["properties"]) == {f.name for f in op.body}, (op.method, op.path)
        assert set(body.get("required", [])) == {f.name for f in op.body if f.required}
        for f in op.body:
            types = body["properties"][f.name]["type"]
            assert set(f.types) <= set(types if isinstance(types, list) else [types])
