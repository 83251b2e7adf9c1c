"""Database rows to :mod:`memfs.models` objects."""

from __future__ import annotations

import json
import logging

from ..backends import Row
from ..models import (
    DREAM_USAGE,
    Actor,
    Dream,
    Event,
    Memory,
    MemoryMeta,
    MemoryStore,
    MemoryVersion,
    Session,
    SessionPinned,
    SessionResource,
)

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# row -> model


def store_from_row(row: Row) -> MemoryStore:
    return MemoryStore(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        metadata=json.loads(row["metadata"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        archived_at=row["archived_at"],
    )


def memory_from_row(row: Row, with_content: bool) -> Memory:
    return Memory(
        id=row["id"],
        memory_store_id=row["store_id"],
        path=row["path"],
        content=row["content"] if with_content else None,
        content_sha256=row["content_sha256"],
        content_size_bytes=row["content_size_bytes"],
        memory_version_id=row["version_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        memfs_meta=meta_from_row(row),
    )


def meta_from_row(row: Row) -> MemoryMeta:
    """A memory's :class:`MemoryMeta` from its row's derived columns (``mtype``,
    ``importance``, ``expires_at``, ``pinned``, ``meta``)."""
    extra = json.loads(row["meta"]) if row["meta"] else {}
    if not extra and row["mtype"] is None and not row["pinned"] and row["expires_at"] is None:
        return NO_META if row["importance"] is None else MemoryMeta(
            importance=row["importance"])
    return MemoryMeta(
        type=row["mtype"],
        importance=row["importance"],
        expires_at=row["expires_at"],
        pinned=bool(row["pinned"]),
        tags=tuple(extra.get("tags", ())),
        description=extra.get("description"),
        supersedes=tuple(extra.get("supersedes", ())),
        source=extra.get("source"),
        warnings=tuple(extra.get("warnings", ())),
    )


#: The meta of a memory that says nothing about itself.
NO_META = MemoryMeta()


def _actor(type_: str | None, id_: str | None) -> Actor | None:
    return Actor(type_, id_) if type_ and id_ else None


def version_from_row(row: Row, with_content: bool) -> MemoryVersion:
    return MemoryVersion(
        id=row["id"],
        memory_id=row["memory_id"],
        memory_store_id=row["store_id"],
        operation=row["operation"],
        created_at=row["created_at"],
        path=row["path"],
        content=row["content"] if with_content else None,
        content_sha256=row["content_sha256"],
        content_size_bytes=row["content_size_bytes"],
        created_by=_actor(row["created_by_type"], row["created_by_id"]),
        redacted_at=row["redacted_at"],
        redacted_by=_actor(row["redacted_by_type"], row["redacted_by_id"]),
    )


def _resource(row: Row, pinned: dict[str, list[SessionPinned]]) -> SessionResource:
    return SessionResource(
        id=row["id"],
        session_id=row["session_id"],
        memory_store_id=row["memory_store_id"],
        access=row["access"],
        instructions=row["instructions"],
        name=row["name"],
        description=row["description"],
        mount_path=row["mount_path"],
        memfs_scope=row["scope"],
        memfs_pinned_budget=row["pinned_budget"],
        memfs_pinned=tuple(pinned.get(row["id"], ())),
        memfs_pinned_more=row["pinned_more"] or 0,
    )


def event_from_row(row: Row) -> Event:
    return Event(
        id=row["id"],
        session_id=row["session_id"],
        type=row["type"],
        processed_at=row["processed_at"],
        body=json.loads(row["body"]),
    )


def dream_from_row(row: Row) -> Dream:
    return Dream(
        id=row["id"],
        status=row["status"],
        inputs=[{"type": "memory_store", "memory_store_id": row["memory_store_id"]},
                {"type": "sessions", "session_ids": json.loads(row["session_ids"])}],
        model=json.loads(row["model"]),
        instructions=row["instructions"],
        output_behavior=json.loads(row["output_behavior"]),
        outputs=[] if row["output_store_id"] is None else [
            {"type": "memory_store", "memory_store_id": row["output_store_id"]}],
        session_id=row["session_id"],
        error=None if row["error"] is None else json.loads(row["error"]),
        usage={k: int(row[k]) for k in DREAM_USAGE},
        created_at=row["created_at"],
        ended_at=row["ended_at"],
        archived_at=row["archived_at"],
    )


def session_from_row(row: Row, res: list[Row],
                     pinned: dict[str, list[SessionPinned]] | None = None) -> Session:
    """``pinned``: what each resource (by id) recorded of its pinned memories."""
    return Session(
        id=row["id"],
        status=row["status"],
        resources=tuple(_resource(r, pinned or {}) for r in res),
        agent=json.loads(row["agent"]) if row["agent"] else None,
        environment_id=row["environment_id"],
        metadata=json.loads(row["metadata"]),
        title=row["title"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        archived_at=row["archived_at"],
    )
