"""The objects of a memory store, as frozen dataclasses.

``to_dict()`` gives the wire shape of API.md §3 (the shape the ``anthropic`` SDK parses), which
the HTTP API and the CLI's ``--json`` output share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

Operation = Literal["created", "modified", "deleted"]
Access = Literal["read_write", "read_only"]

# Actor type -> the name of its id field on the wire (API.md §3.7).
ACTOR_ID_FIELDS = {
    "api_actor": "api_key_id",
    "session_actor": "session_id",
    "user_actor": "user_id",
    "service_account_actor": "service_account_id",
}


@dataclass(frozen=True)
class Actor:
    """Who made a change: ``type`` is a key of :data:`ACTOR_ID_FIELDS`, ``id`` its id."""

    type: str
    id: str

    def __post_init__(self) -> None:
        if self.type not in ACTOR_ID_FIELDS:
            raise ValueError(f"unknown actor type {self.type!r}")

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, ACTOR_ID_FIELDS[self.type]: self.id}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Actor:
        return cls(d["type"], d[ACTOR_ID_FIELDS[d["type"]]])

    @classmethod
    def session(cls, session_id: str) -> Actor:
        return cls("session_actor", session_id)

    @classmethod
    def api(cls, api_key_id: str) -> Actor:
        return cls("api_actor", api_key_id)

    @classmethod
    def user(cls, user_id: str) -> Actor:
        return cls("user_actor", user_id)


@dataclass(frozen=True)
class MemoryStore:
    id: str
    name: str
    description: str
    metadata: dict[str, str]
    created_at: str
    updated_at: str
    archived_at: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "memory_store",
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "metadata": dict(self.metadata),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "archived_at": self.archived_at,
        }


@dataclass(frozen=True)
class Memory:
    """A live memory. ``content`` is None when it was not asked for (``view=basic``)."""

    id: str
    memory_store_id: str
    path: str
    content: str | None
    content_sha256: str
    content_size_bytes: int
    memory_version_id: str
    created_at: str
    updated_at: str
    #: The change-feed position of the write that returned this state (0 when read): what a
    #: mount orders states by, never the wall clock. Not part of the wire shape.
    seq: int = field(default=0, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "memory",
            "id": self.id,
            "memory_store_id": self.memory_store_id,
            "path": self.path,
            "content": self.content,
            "content_sha256": self.content_sha256,
            "content_size_bytes": self.content_size_bytes,
            "memory_version_id": self.memory_version_id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True)
class MemoryPrefix:
    """A roll-up of deeper memories in a listing with ``depth``; ``path`` ends with ``/``."""

    path: str

    def to_dict(self) -> dict[str, Any]:
        return {"type": "memory_prefix", "path": self.path}


@dataclass(frozen=True)
class MemoryVersion:
    id: str
    memory_id: str
    memory_store_id: str
    operation: Operation
    created_at: str
    path: str | None
    content: str | None
    content_sha256: str | None
    content_size_bytes: int | None
    created_by: Actor | None
    redacted_at: str | None
    redacted_by: Actor | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "memory_version",
            "id": self.id,
            "memory_id": self.memory_id,
            "memory_store_id": self.memory_store_id,
            "operation": self.operation,
            "created_at": self.created_at,
            "path": self.path,
            "content": self.content,
            "content_sha256": self.content_sha256,
            "content_size_bytes": self.content_size_bytes,
            "created_by": self.created_by.to_dict() if self.created_by else None,
            "redacted_at": self.redacted_at,
            "redacted_by": self.redacted_by.to_dict() if self.redacted_by else None,
        }


@dataclass(frozen=True)
class SessionResource:
    """A memory store attached to a session (API.md §4.3), with the extra ``id``."""

    id: str
    session_id: str
    memory_store_id: str
    access: Access
    instructions: str | None
    name: str
    description: str
    mount_path: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "memory_store",
            "id": self.id,
            "memory_store_id": self.memory_store_id,
            "access": self.access,
            "instructions": self.instructions,
            "name": self.name,
            "description": self.description,
            "mount_path": self.mount_path,
        }


@dataclass(frozen=True)
class Session:
    id: str
    status: str
    resources: tuple[SessionResource, ...]
    agent: dict[str, Any] | None
    environment_id: str | None
    metadata: dict[str, str]
    title: str | None
    created_at: str
    updated_at: str
    archived_at: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "session",
            "id": self.id,
            "status": self.status,
            "resources": [r.to_dict() for r in self.resources],
            "agent": self.agent,
            "environment_id": self.environment_id,
            "metadata": dict(self.metadata),
            "title": self.title,
            "vault_ids": [],
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "archived_at": self.archived_at,
            "stats": {},
            "usage": {},
            "outcome_evaluations": [],
            "budget": None,
            "deployment_id": None,
        }


@dataclass(frozen=True)
class SessionToken:
    """A session token just made (:meth:`memfs.store.Store.create_session_token`): ``token``
    is the secret, shown this once (the store keeps only its SHA-256)."""

    id: str
    session_id: str
    token: str
    created_at: str
    expires_at: str

    def to_dict(self) -> dict[str, Any]:
        return {"type": "session_token", "id": self.id, "session_id": self.session_id,
                "token": self.token, "created_at": self.created_at,
                "expires_at": self.expires_at}


@dataclass(frozen=True)
class SessionGrant:
    """What a valid session token lets its holder do: act as ``session_id`` on the stores of
    ``access`` (store id -> ``read_write`` | ``read_only``), nothing else."""

    session_id: str
    token_id: str
    access: dict[str, str]
    expires_at: str

    def actor(self) -> Actor:
        return Actor.session(self.session_id)


@dataclass(frozen=True)
class Event:
    """A session event; ``body`` is the full wire object (it has ``id``, ``type``...)."""

    id: str
    session_id: str | None
    type: str
    processed_at: str
    body: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.body)


@dataclass(frozen=True)
class Change:
    """One entry of a store's change feed: what a mount must invalidate.

    ``op`` is ``put`` (content or path of ``memory_id`` changed; ``old_path`` is set on a
    rename), ``delete``, ``history`` (versions of ``memory_id`` were redacted or pruned: only
    its history changed), or ``store`` (the store itself was archived, updated or deleted).
    """

    seq: int
    store_id: str
    op: str
    memory_id: str | None
    path: str | None
    old_path: str | None


T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing; ``next_page`` is None on the last page. ``prev_page`` (sessions
    only, the SDK's bidirectional cursor) is None on the first page; ``to_dict`` leaves it out,
    because the other listings have no such field on the wire."""

    data: list[T]
    next_page: str | None
    prev_page: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "data": [item.to_dict() for item in self.data],  # type: ignore[attr-defined]
            "next_page": self.next_page,
        }


def complete_tool_results(
    events: list[dict[str, Any]] | None, memory_id: str | None,
    version_id: str | None = None,
) -> None:
    """Name the memory (and version) an operation produced in its successful
    ``agent.tool_result`` events (SPEC §4), in place."""
    for e in events or ():
        if e.get("type") == "agent.tool_result" and not e.get("is_error"):
            if memory_id is not None:
                e["memory_id"] = memory_id
            if version_id is not None:
                e["memory_version_id"] = version_id


DREAM_STATUSES = ("pending", "running", "completed", "failed", "canceled")
#: The statuses a dream never leaves.
DREAM_FINAL = ("completed", "failed", "canceled")
DREAM_USAGE = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
               "cache_read_input_tokens")


@dataclass(frozen=True)
class Dream:
    """A dream (API.md §5, the SDK's ``BetaDream``): a run that reads a memory store and the
    transcripts of sessions and writes a consolidated store. ``inputs``, ``model``,
    ``output_behavior``, ``outputs``, ``error`` and ``usage`` are their wire objects."""

    id: str
    status: str
    inputs: list[dict[str, Any]]
    model: dict[str, Any]
    instructions: str | None
    output_behavior: dict[str, Any]
    outputs: list[dict[str, Any]]
    session_id: str | None
    error: dict[str, str] | None
    usage: dict[str, int]
    created_at: str
    ended_at: str | None
    archived_at: str | None

    @property
    def memory_store_id(self) -> str:
        """The input store."""
        return str(next(i for i in self.inputs if i["type"] == "memory_store")["memory_store_id"])

    @property
    def session_ids(self) -> list[str]:
        """The sessions whose transcripts the dream reads."""
        return list(next(i for i in self.inputs if i["type"] == "sessions")["session_ids"])

    @property
    def output_store_id(self) -> str | None:
        return self.outputs[0]["memory_store_id"] if self.outputs else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "dream",
            "id": self.id,
            "status": self.status,
            "inputs": self.inputs,
            "model": self.model,
            "instructions": self.instructions,
            "output_behavior": self.output_behavior,
            "outputs": self.outputs,
            "session_id": self.session_id,
            "error": self.error,
            "usage": self.usage,
            "created_at": self.created_at,
            "ended_at": self.ended_at,
            "archived_at": self.archived_at,
        }


@dataclass(frozen=True)
class Snapshot:
    """A store as it was at a boundary (time travel, a memfs extension; README "Time travel").

    The boundary is ``time``, refined by one version when the instant alone is not exact: every
    version up to and including ``after_version_id`` (``at`` was that version), or every
    version before ``before_version_id`` (``at`` was a session: just before its first write in
    the store). ``at`` resolves to the same boundary again (a time given in the future became
    the time it was resolved at). ``memories`` are those live at the boundary, in path order:
    each the version then in effect (``memory_version_id``; ``created_at`` the memory's first
    retained version). ``redacted`` maps each redacted version in effect to its redaction
    time: such a memory shows empty content, at the path of a neighbouring version (its own
    path was erased). ``unknown_memory_ids``: memories whose history before the boundary was
    pruned by retention, so whether (and how) they existed then is not known; not shown."""

    memory_store_id: str
    at: str
    time: str
    memories: list[Memory]
    after_version_id: str | None = None
    before_version_id: str | None = None
    session_id: str | None = None
    redacted: dict[str, str] = field(default_factory=dict)
    unknown_memory_ids: list[str] = field(default_factory=list)

    def includes(self, created_at: str, version_id: str) -> bool:
        """Whether the version ``(created_at, version_id)`` is at or before the boundary (the
        order of version listings: ``created_at``, then ``id``)."""
        if created_at != self.time:
            return created_at < self.time
        if self.after_version_id is not None:
            return version_id <= self.after_version_id
        if self.before_version_id is not None:
            return version_id < self.before_version_id
        return True

    def boundary_text(self) -> str:
        """The boundary in words, for logs, warnings and the system prompt."""
        if self.after_version_id is not None:
            return f"{self.time} (right after version {self.after_version_id})"
        if self.session_id is not None:
            return f"{self.time} (just before session {self.session_id})"
        return self.time

    def pruned_warning(self) -> str | None:
        """The warning a mount and a session print when memories may be missing (None: no
        memory's past was pruned)."""
        n = len(self.unknown_memory_ids)
        if not n:
            return None
        shown = ", ".join(self.unknown_memory_ids[:5])
        more = f" and {n - 5} more" if n > 5 else ""
        return (f"{n} {'memory' if n == 1 else 'memories'} may have existed then but "
                f"{'its' if n == 1 else 'their'} versions before it were pruned (retention), "
                f"so {'it is' if n == 1 else 'they are'} not shown: {shown}{more}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "memfs_snapshot",
            "memory_store_id": self.memory_store_id,
            "at": self.at,
            "time": self.time,
            "after_version_id": self.after_version_id,
            "before_version_id": self.before_version_id,
            "session_id": self.session_id,
            "data": [m.to_dict() for m in self.memories],
            "redacted": dict(self.redacted),
            "unknown_memory_ids": list(self.unknown_memory_ids),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Snapshot:
        return cls(
            memory_store_id=d["memory_store_id"], at=d["at"], time=d["time"],
            memories=[Memory(**{k: v for k, v in m.items() if k != "type"})
                      for m in d.get("data") or []],
            after_version_id=d.get("after_version_id"),
            before_version_id=d.get("before_version_id"), session_id=d.get("session_id"),
            redacted=dict(d.get("redacted") or {}),
            unknown_memory_ids=list(d.get("unknown_memory_ids") or []),
        )


@dataclass(frozen=True)
class RecallHit:
    """A memory a search found (:meth:`memfs.store.Store.search`; ``memfs.recall.search.Hit``):
    its score in (0, 1], a one-line snippet, and which of ``words`` and ``meaning`` found it."""

    memory_id: str
    path: str
    score: float
    snippet: str
    matched: tuple[str, ...]
    updated_at: str

    def to_dict(self) -> dict[str, Any]:
        """On the wire (``GET .../memfs/search``): a ``memfs_search_hit``."""
        return {"type": "memfs_search_hit", "path": self.path, "memory_id": self.memory_id,
                "score": self.score, "snippet": self.snippet, "matched": list(self.matched),
                "updated_at": self.updated_at}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RecallHit:
        return cls(memory_id=d["memory_id"], path=d["path"], score=float(d["score"]),
                   snippet=d.get("snippet") or "", matched=tuple(d.get("matched") or ()),
                   updated_at=d.get("updated_at") or "")


@dataclass
class RecallResult:
    """The hits of a search, best first, and how they were found
    (``memfs.recall.search.Result``): ``meaning`` is True when vectors ranked too; ``note``
    says why not, or how much of the store they cover."""

    hits: list[RecallHit]
    meaning: bool
    note: str | None = None
    indexed: int = 0
    memories: int = 0
    model: str | None = None
    candidates: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """On the wire (``GET .../memfs/search``): a ``memfs_search_result``."""
        return {"type": "memfs_search_result", "data": [h.to_dict() for h in self.hits],
                "meaning": self.meaning, "note": self.note, "indexed": self.indexed,
                "memories": self.memories, "model": self.model}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RecallResult:
        return cls([RecallHit.from_dict(h) for h in d.get("data") or []],
                   bool(d.get("meaning")), note=d.get("note"),
                   indexed=int(d.get("indexed") or 0), memories=int(d.get("memories") or 0),
                   model=d.get("model"))
