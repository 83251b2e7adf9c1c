"""Wire -> models and errors: the :mod:`memfs.models` of the API's JSON answers, and the
:mod:`memfs.errors` exception of an error envelope (``error.type`` and
``details.error_code``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from .. import errors
from ..errors import from_wire as error_from_response
from ..models import (
    Change,
    Event,
    Memory,
    MemoryPrefix,
    MemoryStore,
    MemoryVersion,
    Page,
    Session,
    SessionResource,
)

T = TypeVar("T")


def decoded(response: httpx.Response) -> Any:
    """The JSON body of a success, else raise the mapped error."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.is_success:
        if body is None:
            raise errors.MemfsError(
                f"the server sent a non-JSON answer (HTTP {response.status_code})"
            )
        return body
    raise error_from_response(response.status_code, body)


# The models' own decoding (:meth:`memfs.shapes.Shape.from_dict`, from the declaration the
# API encodes them by); the client adds what is not on the wire.

def to_store(d: dict[str, Any]) -> MemoryStore:
    return MemoryStore.from_dict(d)


def to_memory(d: dict[str, Any]) -> Memory:
    return Memory.from_dict(d, seq=int(d.get("memfs_seq") or 0))


def to_item(d: dict[str, Any]) -> Memory | MemoryPrefix:
    return MemoryPrefix.from_dict(d) if d.get("type") == "memory_prefix" else to_memory(d)


def to_version(d: dict[str, Any]) -> MemoryVersion:
    return MemoryVersion.from_dict(d)


def to_resource(d: dict[str, Any], session_id: str) -> SessionResource:
    return SessionResource.from_dict(d, session_id=session_id)


def to_session(d: dict[str, Any]) -> Session:
    return Session.from_dict(d)


def to_event(d: dict[str, Any], session_id: str | None) -> Event:
    return Event(d["id"], session_id, d["type"], d.get("processed_at") or "", dict(d))


def to_change(d: dict[str, Any], store_id: str) -> Change:
    return Change(int(d["seq"]), store_id, d["op"], d.get("memory_id"), d.get("path"),
                  d.get("old_path"))


def to_page(d: dict[str, Any], parse: Callable[[dict[str, Any]], T]) -> Page[T]:
    return Page([parse(x) for x in d.get("data") or []], d.get("next_page") or None,
                d.get("prev_page") or None)

