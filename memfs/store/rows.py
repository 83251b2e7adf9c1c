"""Database rows to :mod:`memfs.models` objects."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from typing import Any

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


def memory_from_row(row: Row, with_content: bool, seq: int = 0) -> Memory:
    """The memory of ``row``; ``seq``: the change-feed position of the write that returned
    it (0: read)."""
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
        seq=seq,
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


# --------------------------------------------------------------------------------------------
# a memory whose seq comes later


def _memory_of(fields: dict[str, Any]) -> Memory:
    """A :class:`Memory` from its fields (how a :class:`SeqLater` pickles)."""
    return Memory(**fields)


class SeqLater(Memory):
    """A memory just created in a batch whose change was sent ahead
    (:meth:`Core.record_ahead <memfs.store.base.Core.record_ahead>`): its ``seq`` is read
    when first asked for (or by ``seq_of``'s batch before it commits), otherwise it is the
    :class:`Memory` it says."""

    def __init__(self, *args: Any, seq_of: Callable[[], int] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if seq_of is not None:
            self.__dict__.pop("_seq", None)
            self.__dict__["_seq_of"] = seq_of

    @property
    def seq(self) -> int:
        d = self.__dict__
        if "_seq" not in d:
            d["_seq"] = d.pop("_seq_of")()
        return int(d["_seq"])

    @seq.setter
    def seq(self, value: int) -> None:  # (the dataclass's __init__, dataclasses.replace)
        self.__dict__["_seq"] = value

    def __eq__(self, other: object) -> bool:  # equal to the Memory it says
        return isinstance(other, Memory) and all(
            getattr(self, f.name) == getattr(other, f.name)
            for f in dataclasses.fields(Memory) if f.compare)

    __hash__ = Memory.__hash__

    def __reduce_ex__(self, protocol: Any) -> Any:  # pickled (copied) as the Memory it says
        m = self.settled()
        return (_memory_of, ({f.name: getattr(m, f.name) for f in dataclasses.fields(Memory)
                              if f.init},))

    def settled(self) -> Memory:
        """The plain :class:`Memory` this is (its seq read): what the batch returns."""
        return Memory(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Memory)})
