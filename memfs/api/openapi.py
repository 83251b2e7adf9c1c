"""``/openapi.json``: the OpenAPI 3.1 description of the API, made from the route table
(:data:`memfs.api.routes.OPS`) and its declared inputs (:mod:`memfs.api.spec`), and the component
schemas of its answers (:data:`SCHEMAS`): those of the models from their declaration
(:mod:`memfs.shapes`), the others (listings, summaries of the extensions) written here."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..models import (
    Actor,
    ApiKey,
    Dream,
    Memory,
    MemoryMeta,
    MemoryPrefix,
    MemoryStore,
    MemoryVersion,
    RecallHit,
    RecallResult,
    Session,
    SessionPinned,
    SessionResource,
    SessionToken,
    Snapshot,
)
from ..shapes import Shape, schema_name
from . import spec

if TYPE_CHECKING:
    from ..errors import Wire
    from .routes import Op


def _obj(props: dict[str, Any], required: Iterable[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": props,
            "required": list(props if required is None else required)}


_S = {"type": "string"}
_NS = {"type": ["string", "null"]}
_T = {"type": "string", "format": "date-time"}
_I = {"type": "integer"}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


_B = {"type": "boolean"}
_COUNTS = {"type": "object", "additionalProperties": _I}
#: A memory that expires (or has expired) in a description.
_EXPIRING = _obj({"path": _S, "memory_type": _NS, "expires_at": _T})
_CHANGE = {"oneOf": [_obj({"path": _S, "updated_at": _T}), {"type": "null"}]}
#: An expired memory a sweep saw (:meth:`memfs.store.typed.Typed.expired`).
_EXPIRED = _obj({"memory_id": _S, "memory_store_id": _S, "path": _S, "memory_version_id": _S,
                 "memory_type": _NS, "expires_at": _T, "expiry": {"enum": ["on", "report"]}})
#: The answers of the typed-memory extensions (SPEC §8; :mod:`memfs.api.typed`).
_TYPED: dict[str, Any] = {
    "MemfsStoreDescription": _obj({
        "type": {"const": "memfs_store_description"}, "memory_store_id": _S, "name": _S,
        "at": _T, "memories": _I, "content_size_bytes": _I, "pinned": _I,
        "by_type": {**_COUNTS, "description": "live memories by type ('(none)': untyped)"},
        "by_directory": {**_COUNTS, "description": "live memories by top directory"},
        "by_tag": {**_COUNTS, "description": "live memories by tag, most used first"},
        "expiring_soon": _obj({"count": _I, "within_days": _I,
                               "memories": {"type": "array", "items": _EXPIRING}}),
        "expired": _obj({"count": _I, "memories": {"type": "array", "items": _EXPIRING}}),
        "oldest_change": _CHANGE, "newest_change": _CHANGE,
        "warnings": _obj({"count": _I, "memories": {"type": "array", "items": _obj(
            {"path": _S, "warnings": {"type": "array", "items": _S}})}}),
        "expiry": {"enum": ["on", "report"], "description":
                   "on: expired memories are deleted (as versions); report: only reported"},
        "types": _obj({"source": _S, "types": {"type": "array", "items": _obj({
            "name": _S, "directory": _S, "importance": {"type": "number"},
            "scope": {"enum": ["general", "workflow"]}, "expires": _S})}})}),
    "MemfsExpirySweep": _obj({
        "type": {"const": "memfs_expiry_sweep"}, "dry_run": _B,
        "deleted": {"type": "array", "items": _EXPIRED},
        "reported": {"type": "array", "items": _EXPIRED, "description":
                     "expired memories of a store whose expiry is report: left alone"},
        "skipped": {"type": "array", "items": _EXPIRED, "description":
                    "rewritten since the sweep read them: left alone"},
        "reverts": {"type": "array", "items": _S, "description":
                    "the memrevert_ ids that bring back each transaction's deletions"}}),
    "MemfsTypeCleared": _obj({
        "type": {"const": "memfs_type_cleared"}, "memory_store_id": _S, "memory_type": _S,
        "deleted": {"type": "array", "items": _S, "description": "the paths deleted"},
        "revert_id": {**_NS, "description": "the memrevert_ id that brings them back"},
        "dry_run": _B}),
}

#: The answers that are models (:mod:`memfs.models`): their schemas come from their
#: declaration (:mod:`memfs.shapes`), as do the objects the API sends and the client decodes.
MODELS: tuple[type[Shape] | type[Actor], ...] = (
    MemoryStore, Memory, MemoryMeta, MemoryPrefix, Actor, MemoryVersion, SessionPinned,
    SessionResource, Session, Dream, Snapshot, SessionToken, RecallHit, RecallResult, ApiKey)

SCHEMAS: dict[str, Any] = {
    **{schema_name(m): m.json_schema() for m in MODELS},
    "MemoryListItem": {"oneOf": [_ref("Memory"), _ref("MemoryPrefix")]},
    "Deleted": _obj({"id": _S, "type": {"enum": [
        "memory_store_deleted", "memory_deleted", "session_deleted"]}}),
    "Event": {"type": "object", "required": ["id", "type", "processed_at"],
              "properties": {"id": _S, "type": _S, "processed_at": _T},
              "additionalProperties": True},
    "EventList": _obj({"data": {"type": "array", "items": _ref("Event")}}),
    "Limits": {"type": "object", "additionalProperties": {"type": "number"},
               "description": "memfs extension: every limit of the server's store"},
    "Tree": _obj({"data": {"type": "array", "items": _ref("Memory")}, "last_seq": _I}),
    "Stats": _obj({"memory_count": _I, "last_seq": _I}),
    "Ok": _obj({"ok": {"const": True}}),
    "MemoryList": _obj({"data": {"type": "array", "items": _ref("Memory")}}),
    "MemoryStoreList": _obj({"data": {"type": "array", "items": _ref("MemoryStore")}}),
    "ApiKeyList": _obj({"data": {"type": "array", "items": _ref("ApiKey")}}),
    "Change": _obj({"type": {"const": "memfs.change"}, "seq": _I,
                    "op": {"enum": ["put", "delete", "history", "store"]}, "memory_id": _NS,
                    "path": _NS, "old_path": _NS,
                    "memory": {"oneOf": [_ref("Memory"), {"type": "null"}]}},
                   ["type", "seq", "op", "memory_id", "path", "old_path"]),
    "ChangeList": _obj({"data": {"type": "array", "items": _ref("Change")}, "last_seq": _I,
                        "reset": {"type": "boolean"}}),
    "Archive": {"type": "string", "format": "binary", "description":
                "application/gzip: a memfs-export archive (docs/EXPORT-FORMAT.md)"},
    "ImportSummary": _obj({
        "type": {"const": "memfs_import"}, "source": {"enum": ["archive", "files"]},
        "store": _ref("MemoryStore"), "ids": {"enum": ["kept", "new"]},
        "created_store": {"type": "boolean"}, "history": {"type": "boolean"},
        "memories": _I, "versions": _I, "redacted": _I,
        "skipped": {"type": "array", "items": _obj({"path": _S, "reason": _S},
                                                    ["path", "reason"])},
        "ignored": {"type": "array", "items": _obj({"path": _S, "reason": _S})}}),
    "Revert": _obj({
        "type": {"const": "memfs_revert"}, "id": _NS, "undo": _NS,
        "target": _obj({"type": {"enum": ["session", "revert"]}, "id": _S}),
        "dry_run": {"type": "boolean"}, "force": {"type": "boolean"},
        "complete": {"type": "boolean"}, "created_at": _T,
        "created_by": {"oneOf": [_ref("Actor"), {"type": "null"}]},
        "actions": {"type": "array", "items": _obj({
            "memory_store_id": _S, "memory_id": _S,
            "action": {"enum": ["delete", "recreate", "restore"]}, "old_path": _NS,
            "path": _NS, "content_changed": {"type": "boolean"},
            "forced": {"type": "boolean"}, "memory_version_id": _NS})},
        "conflicts": {"type": "array", "items": _obj({
            "memory_store_id": _S, "memory_id": _S,
            "reason": {"enum": ["changed", "path_taken", "unrecoverable"]}, "message": _S,
            "path": _NS, "pre_path": _NS, "reverted_version": {"type": ["object", "null"]},
            "current_version": {"type": ["object", "null"]}, "diff": _NS,
            "conflicting_memory_id": _NS, "conflicting_path": _NS})},
        "unchanged": {"type": "array", "items": _obj({
            "memory_store_id": _S, "memory_id": _S, "path": _NS})}}),
    "SearchStatus": _obj({
        "type": {"const": "memfs_search_status"}, "store_id": _S, "name": _S,
        "memories": _I, "indexed": _I, "model": _NS,
        "indexing": {"type": ["string", "null"],
                     "description": "the process indexing the store now, if any"},
        "reason": {"type": ["string", "null"],
                   "description": "why not every memory is indexed by meaning (null: all are)"}}),
    **_TYPED,
    "Agent": {"type": "object", "required": ["type", "id", "version", "name", "model"],
              "properties": {"type": {"const": "agent"}, "id": _S, "version": _I, "name": _S,
                             "model": {"type": "object"}, "tools": {"type": "array"}},
              "additionalProperties": True},
    "Environment": {"type": "object", "required": ["type", "id", "name", "config"],
                    "properties": {"type": {"const": "environment"}, "id": _S, "name": _S,
                                   "config": {"type": "object"}},
                    "additionalProperties": True},
}


def _error_schema(table: Iterable[Wire]) -> dict[str, Any]:
    """The error envelope, with every ``error.type`` and ``details.error_code`` of the table
    of errors (:data:`memfs.errors.WIRE`)."""
    rows = list(table)
    return _obj({
        "type": {"const": "error"},
        "error": {"type": "object", "required": ["type", "message"], "properties": {
            "type": {"enum": sorted({w.type for w in rows})}, "message": _S,
            "details": _obj({"error_code": {"enum": sorted({w.code for w in rows if w.code})}}),
            "conflicting_memory_id": _S, "conflicting_path": _S}},
        "request_id": _S}, ["type", "error", "request_id"])


_PING = _obj({"type": {"const": "ping"}})
#: What the SSE answers send: the data of each event, by its name (``event:``).
STREAMS = {
    "EventStream": spec.Stream(
        {"<event type>": _ref("Event"), "ping": _PING},
        "SSE: frames 'event: <the event's type>', 'id: <event id>', 'data: <Event JSON>'; "
        "'event: ping' keepalives; ends after session.deleted or "
        "session.status_terminated"),
    "ChangeStream": spec.Stream(
        {"memfs.change": _ref("Change"),
         "memfs.reset": _obj({"type": {"const": "memfs.reset"}, "last_seq": _I}),
         "ping": _obj({"type": {"const": "ping"}, "last_seq": _I})},
        "SSE: 'event: memfs.change' frames ('id: <seq>', data a Change); 'event: "
        "memfs.reset' when the requested position is unknown (reload the tree, go on from "
        "last_seq); 'event: ping' keepalives every few seconds. Resume with ?after=<seq> or "
        "Last-Event-ID."),
}




def _response(op: Op) -> tuple[str, Any] | None:
    """(media type, schema) of an operation's 200 answer; None: it always answers an error."""
    name = op.returns
    if name == "Error":
        return None
    if name.startswith("Page<"):
        return "application/json", _obj(
            {"data": {"type": "array", "items": _ref(name[5:-1])}, "next_page": _NS},
            ["data", "next_page"])
    if name in STREAMS:
        return "text/event-stream", STREAMS[name]
    if name == "Archive":
        return "application/gzip", _ref(name)
    return "application/json", _ref(name)


def _headers(op: Op, session_header: str) -> list[dict[str, Any]]:
    out = []
    if op.extension:
        out.append({"name": session_header, "in": "header", "required": False,
                    "schema": _S, "description":
                    "act as this session (writes: session_actor; tool events)"})
    if op.returns == "ChangeStream":
        out.append({"name": "Last-Event-ID", "in": "header", "required": False,
                    "schema": {"type": "integer"}, "description":
                    "an SSE client reconnecting: the seq of the last change it got (when "
                    "after is not given)"})
    return out


@functools.cache
def _document(ops: tuple[Op, ...], errors: tuple[Wire, ...],
              session_header: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for op in ops:
        paths.setdefault(op.path, {})[op.method.lower()] = spec.operation(
            operation_id=op.handler.__name__,
            summary=f"memfs extension: {op.sdk}" if op.extension
            else f"SDK: client.beta.{op.sdk}",
            path=op.path, method=op.method, query=op.query,
            body=None if op.method == "GET" else op.body,
            raw_body=("application/gzip", "application/zip") if op.raw_body else (),
            response=_response(op), headers=_headers(op, session_header),
            extension=op.extension)
    return {
        "openapi": "3.1.0",
        "info": {"title": "memfs", "version": "0.1.0", "description":
                 "Memory stores API, wire-compatible with anthropic==2.14.0 "
                 "(client.beta.memory_stores, sessions)."},
        "components": {
            "schemas": {**SCHEMAS, "Error": _error_schema(errors)},
            "securitySchemes": {
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
                "bearer": {"type": "http", "scheme": "bearer"},
            },
        },
        "security": [{"apiKey": []}, {"bearer": []}],
        "paths": paths,
    }


def document(ops: Sequence[Op], errors: Iterable[Wire],
             session_header: str) -> dict[str, Any]:
    """The OpenAPI 3.1 description of ``ops``: every path, method, query parameter, header
    and body field that the app serves, with their types, and ``errors`` (the rows of
    :data:`memfs.errors.WIRE`) in the error envelope's schema. Made once."""
    return _document(tuple(ops), tuple(errors), session_header)
