"""The objects of a memory store, as frozen dataclasses.

Each one's fields are its wire shape (API.md §3, the shape the ``anthropic`` SDK parses),
declared once (:mod:`memfs.shapes`): ``to_dict()`` gives it, which the HTTP API and the CLI's
``--json`` output share, ``from_dict()`` is what the client decodes, and ``json_schema()`` its
schema in ``/openapi.json``.
"""

from __future__ import annotations

import json.encoder
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, Literal, Self, TypeVar

from .shapes import Doc, Shape, obj

Operation = Literal["created", "modified", "deleted"]
Access = Literal["read_write", "read_only"]
#: What an attached store holds for the session (SPEC §8): memories for every task, or of
#: this piece of work.
Scope = Literal["general", "workflow"]
#: An RFC 3339 time.
Time = Annotated[str, Doc({"format": "date-time"})]
#: Not on the wire: the client supplies it (a field's metadata).
LOCAL = {"wire": False}
SESSION_STATUSES = ("rescheduling", "running", "idle", "terminated")
_S = {"type": "string"}

# Actor type -> the name of its id field on the wire (API.md §3.7).
ACTOR_ID_FIELDS = {
    "api_actor": "api_key_id",
    "session_actor": "session_id",
    "user_actor": "user_id",
    "service_account_actor": "service_account_id",
}


#: Time travel (``memfs run --store NAME@AT``): the session metadata key (+ store id) whose
#: value says which past state of the store is mounted
#: (:func:`memfs.launcher.prompt.snapshot_note`).
SNAPSHOT_KEY = "memfs_at."

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
    def json_schema(cls) -> dict[str, Any]:
        return {"oneOf": [obj({"type": {"const": t}, f: _S})
                          for t, f in ACTOR_ID_FIELDS.items()]}

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
class MemoryStore(Shape):
    WIRE_TYPE = "memory_store"

    id: str
    name: str
    description: str
    metadata: dict[str, str]
    created_at: Time
    updated_at: Time
    archived_at: Time | None


@dataclass(frozen=True)
class MemoryMeta(Shape):
    """What a memory says about itself (SPEC §8), a memfs extension (``memfs_meta``, which SDK
    clients ignore): what memfs derived from its front matter and its directory when it was
    last written. ``warnings``: what memfs could not use, kept as written in the text."""

    SCHEMA_NAME = "MemfsMemoryMeta"

    type: str | None = None
    importance: float | None = None
    expires_at: Time | None = None
    pinned: bool = False
    tags: tuple[str, ...] = ()
    description: str | None = None
    supersedes: tuple[str, ...] = ()
    source: str | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Memory(Shape):
    """A live memory. ``content`` is None when it was not asked for (``view=basic``)."""

    WIRE_TYPE = "memory"

    id: str
    memory_store_id: str
    path: str
    content: str | None
    content_sha256: str
    content_size_bytes: int
    memory_version_id: str
    created_at: Time
    updated_at: Time
    #: What it says about itself (a memfs extension; None where not read).
    memfs_meta: MemoryMeta | None = None
    #: The change-feed position of the write that returned this state (0 when read): what a
    #: mount orders states by, never the wall clock. Not part of the wire shape.
    seq: int = field(default=0, compare=False, repr=False, metadata=LOCAL)


@dataclass(frozen=True)
class MemoryPrefix(Shape):
    """A roll-up of deeper memories in a listing with ``depth``; ``path`` ends with ``/``."""

    WIRE_TYPE = "memory_prefix"

    path: str


@dataclass(frozen=True)
class MemoryVersion(Shape):
    WIRE_TYPE = "memory_version"

    id: str
    memory_id: str
    memory_store_id: str
    operation: Operation
    created_at: Time
    path: str | None
    content: str | None
    content_sha256: str | None
    content_size_bytes: int | None
    created_by: Actor | None
    redacted_at: Time | None
    redacted_by: Actor | None


@dataclass(frozen=True)
class SessionPinned(Shape):
    """One pinned memory of an attached store as the session recorded it when it started
    (SPEC §9, :mod:`memfs.launcher.pinned`): the version that went into the prompt
    (``shown``), or one listed there as not shown, with ``reason``. ``size``: its text's
    length in characters. A memfs extension of a session resource (``memfs_pinned``)."""

    SCHEMA_NAME = "MemfsSessionPinned"

    path: str
    memory_id: str
    memory_version_id: str
    size: int
    shown: bool
    reason: str | None = None


@dataclass(frozen=True)
class SessionResource(Shape):
    """A memory store attached to a session (API.md §4.3), with the extra ``id``."""

    WIRE_TYPE = "memory_store"

    id: str
    session_id: str = field(metadata=LOCAL)
    memory_store_id: str
    access: Access
    instructions: str | None
    name: str
    description: str
    mount_path: str
    #: general or workflow (SPEC §8): a memfs extension, which SDK clients keep as an extra
    #: field; fixed at attach time, as ``access`` is.
    memfs_scope: Scope = "general"
    #: The characters of pinned memories this store may put in the prompt (SPEC §9; None:
    #: a session made before pinned memories), and what went in (memfs extensions).
    memfs_pinned_budget: int | None = None
    memfs_pinned: tuple[SessionPinned, ...] = ()
    #: How many more pinned memories the store had past the first MOST_PINNED (those
    #: ``memfs_pinned`` records): the prompt says how many (a memfs extension).
    memfs_pinned_more: int = 0


@dataclass(frozen=True)
class Session(Shape):
    WIRE_TYPE = "session"
    #: The SDK's fields that memfs has nothing for.
    WIRE_CONSTANTS = {
        "vault_ids": ([], {"type": "array", "items": _S}),
        "stats": ({}, {"type": "object"}),
        "usage": ({}, {"type": "object"}),
        "outcome_evaluations": ([], {"type": "array"}),
        "budget": (None, {"type": "null"}),
        "deployment_id": (None, {"type": "null"}),
    }

    id: str
    status: Annotated[str, Doc({"enum": list(SESSION_STATUSES)})]
    resources: tuple[SessionResource, ...]
    agent: dict[str, Any] | None
    environment_id: str | None
    metadata: dict[str, str]
    title: str | None
    created_at: Time
    updated_at: Time
    archived_at: Time | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], **extra: Any) -> Self:
        """(Its resources' ``session_id`` is its ``id``.)"""
        if "resources" not in extra:
            extra["resources"] = tuple(SessionResource.from_dict(r, session_id=d["id"])
                                       for r in d.get("resources") or ())
        return super().from_dict(d, **extra)


@dataclass(frozen=True)
class SessionToken(Shape):
    """A session token just made (:meth:`memfs.store.Store.sessions.create_token`): ``token``
    is the secret, shown this once (the store keeps only its SHA-256)."""

    WIRE_TYPE = "session_token"

    id: str
    session_id: str
    token: str
    created_at: Time
    expires_at: Time


#: The roles of an API key (issue 22): ``admin`` may do everything in its workspace and manage
#: its keys, ``read_write`` everything but the keys, ``read_only`` only reads.
ROLES = ("admin", "read_write", "read_only")
#: The workspace of every object made before workspaces, and of the server's own keys.
DEFAULT_WORKSPACE = "default"


@dataclass(frozen=True)
class ApiKey(Shape):
    """An API key kept in the database (:meth:`memfs.store.Store.keys.create`): only the SHA-256
    of its secret is kept; ``key`` is the secret, given only in the answer that made it.
    ``memory_store_ids``: the only stores it opens (None: every store of its workspace)."""

    WIRE_TYPE = "memfs_api_key"

    id: str
    name: str
    workspace_id: str
    role: Annotated[str, Doc({"enum": list(ROLES)})]
    memory_store_ids: list[str] | None
    created_at: Time
    expires_at: Time | None
    last_used_at: Time | None
    revoked_at: Time | None
    created_by: Actor | None
    key: str | None = None


@dataclass(frozen=True)
class Grant:
    """What a credential lets its holder do now: a role in one workspace, on every store of it
    or (``access`` not None) only on those stores (id -> ``read_write`` | ``read_only``). A
    session token is such a grant with its ``session_id``: it acts as that session on its
    attached stores. ``key_id``: the key's id (``apikey_…``), a session token's ``sesstok_…``."""

    key_id: str
    workspace_id: str = DEFAULT_WORKSPACE
    role: str = "admin"
    access: dict[str, str] | None = None
    session_id: str | None = None
    name: str = ""
    expires_at: str | None = None
    #: One of the server's own keys (``--api-key``, ``MEMFS_API_KEYS``: the operator's, not
    #: in the database): the default workspace's admin, which may also make keys of others.
    server: bool = False
    #: Who answers for a session token: the stored key that created its session (or, else,
    #: minted the token), else its session. What the server shares out per credential (MCP
    #: sessions) counts against it, so that minting tokens makes no more of them. None: the
    #: credential itself (:attr:`holder`).
    owner: str | None = None

    @property
    def holder(self) -> str:
        """Whose share of the server this credential's use is: :attr:`owner`, or its own id."""
        return self.owner or self.key_id

    def actor(self) -> Actor:
        if self.session_id is not None:
            return Actor.session(self.session_id)
        return Actor.api(self.key_id)


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


@dataclass(slots=True, eq=False)
class ToolPair:
    """The ``agent.tool_use`` / ``agent.tool_result`` pair of one file operation of a mount
    (SPEC §4), as what it says rather than as two dicts: a mount hands it to a write
    (``events=``), and a local store encodes it from a template
    (:func:`memfs.store.common.tool_event_rows`), the same JSON the dicts of :meth:`events`
    encode to; a server's client sends those dicts. Paths are as the agent sees them.

    Not frozen: like the dicts, the pair is completed in place
    (:func:`complete_tool_results`) with the memory and version its write produced, so that
    what the mount logs afterwards is what was stored.
    """

    #: The command name and pid of the process that made the request.
    name: str
    pid: int
    operation: str
    file_path: str
    #: A rename's new path (None: the tool use has no ``new_path``).
    new_path: str | None
    #: The tool result's text (when it succeeded).
    text: str
    #: The error text of a failed operation (``is_error``); None: it succeeded.
    failure: str | None
    #: When it happened, RFC 3339 (both events' ``processed_at``).
    processed_at: str
    use_id: str
    result_id: str
    #: What the tool result names (a success only): the memory, and the version written.
    memory_id: str | None = None
    memory_version_id: str | None = None

    def events(self) -> list[dict[str, Any]]:
        """The pair as two new dicts, keys in the order the wire has them."""
        inp: dict[str, Any] = {"operation": self.operation, "file_path": self.file_path}
        if self.new_path is not None:
            inp["new_path"] = self.new_path
        inp["pid"] = self.pid
        use = {
            "type": "agent.tool_use",
            "id": self.use_id,
            "name": self.name,
            "input": inp,
            "processed_at": self.processed_at,
            "evaluated_permission": "allow",
            "evaluation": {"type": "always_allow"},
            "session_thread_id": None,
        }
        failed = self.failure is not None
        result: dict[str, Any] = {
            "type": "agent.tool_result",
            "id": self.result_id,
            "tool_use_id": self.use_id,
            "processed_at": self.processed_at,
            "is_error": failed,
            "content": [{"type": "text", "text": self.failure if failed else self.text}],
        }
        if not failed:
            if self.memory_id is not None:
                result["memory_id"] = self.memory_id
            if self.memory_version_id is not None:
                result["memory_version_id"] = self.memory_version_id
        return [use, result]

    def bodies(self) -> tuple[str, str]:
        """``json.dumps(e, ensure_ascii=False)`` of each of :meth:`events`, from a template (no
        dict, no encoder): what the store records, for every write and every read."""
        q = _quote
        new = "" if self.new_path is None else f'"new_path": {q(self.new_path)}, '
        use = (
            f'{{"type": "agent.tool_use", "id": {q(self.use_id)}, "name": {q(self.name)}, '
            f'"input": {{"operation": {q(self.operation)}, "file_path": {q(self.file_path)}, '
            f'{new}"pid": {self.pid}}}, "processed_at": {q(self.processed_at)}, '
            f'"evaluated_permission": "allow", "evaluation": {{"type": "always_allow"}}, '
            f'"session_thread_id": null}}'
        )
        head = (f'{{"type": "agent.tool_result", "id": {q(self.result_id)}, '
                f'"tool_use_id": {q(self.use_id)}, "processed_at": {q(self.processed_at)}, ')
        if self.failure is not None:
            return use, (f'{head}"is_error": true, "content": [{{"type": "text", "text": '
                         f'{q(self.failure)}}}]}}')
        ids = "" if self.memory_id is None else f', "memory_id": {q(self.memory_id)}'
        if self.memory_version_id is not None:
            ids += f', "memory_version_id": {q(self.memory_version_id)}'
        return use, (f'{head}"is_error": false, "content": [{{"type": "text", "text": '
                     f'{q(self.text)}}}]{ids}}}')


#: A str as JSON, non-ASCII kept (what ``ensure_ascii=False`` encodes a string to).
_quote = json.encoder.encode_basestring


#: The tool events a mount's write records in its transaction (``events=``): a pair, or
#: event dicts (what a server's API receives).
ToolEvents = list[dict[str, Any]] | ToolPair | None


def tool_event_dicts(events: ToolEvents) -> list[dict[str, Any]] | None:
    """``events`` as dicts (a :class:`ToolPair`'s :meth:`~ToolPair.events`, new ones)."""
    return events.events() if isinstance(events, ToolPair) else events


def complete_tool_results(
    events: ToolEvents, memory_id: str | None, version_id: str | None = None,
) -> None:
    """Name the memory (and version) an operation produced in its successful
    ``agent.tool_result`` events (SPEC §4), in place."""
    if isinstance(events, ToolPair):
        if events.failure is None:
            if memory_id is not None:
                events.memory_id = memory_id
            if version_id is not None:
                events.memory_version_id = version_id
        return
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
class Dream(Shape):
    """A dream (API.md §5, the SDK's ``BetaDream``): a run that reads a memory store and the
    transcripts of sessions and writes a consolidated store. ``inputs``, ``model``,
    ``output_behavior``, ``outputs``, ``error`` and ``usage`` are their wire objects."""

    WIRE_TYPE = "dream"

    id: str
    status: Annotated[str, Doc({"enum": list(DREAM_STATUSES)})]
    inputs: list[dict[str, Any]]
    model: Annotated[dict[str, Any], Doc(obj({"id": _S, "speed": {"const": "standard"}}),
                                         replace=True)]
    instructions: str | None
    output_behavior: dict[str, Any]
    outputs: Annotated[list[dict[str, Any]], Doc({"items": obj(
        {"type": {"const": "memory_store"}, "memory_store_id": _S})})]
    session_id: str | None
    error: Annotated[dict[str, str], Doc(obj({"type": _S, "message": _S}), replace=True)] | None
    usage: Annotated[dict[str, int], Doc(obj({k: {"type": "integer"} for k in DREAM_USAGE}),
                                         replace=True)]
    created_at: Time
    ended_at: Time | None
    archived_at: Time | None

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


@dataclass(frozen=True)
class Snapshot(Shape):
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

    WIRE_TYPE = "memfs_snapshot"

    memory_store_id: str
    at: str
    time: Time
    memories: list[Memory] = field(default_factory=list, metadata={"wire": "data"})
    after_version_id: str | None = None
    before_version_id: str | None = None
    session_id: str | None = None
    redacted: Annotated[dict[str, str], Doc({
        "additionalProperties": {"type": "string", "format": "date-time"},
        "description": "version in effect -> its redaction time (empty file)"}),
    ] = field(default_factory=dict)
    unknown_memory_ids: Annotated[list[str], Doc({
        "description": "memories whose history before the boundary was pruned"}),
    ] = field(default_factory=list)

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


@dataclass(frozen=True)
class RecallHit(Shape):
    """A memory a search found (:meth:`memfs.store.search.Search.in_store`;
    ``memfs.recall.search.Hit``): its score in (0, 1], a one-line snippet, which of
    ``words`` and ``meaning`` found it, its type and whether it is stale (issue 41).
    On the wire (``GET .../memfs/search``): a ``memfs_search_hit``."""

    WIRE_TYPE = "memfs_search_hit"
    SCHEMA_NAME = "SearchHit"

    memory_id: str
    path: str
    score: Annotated[float, Doc({"exclusiveMinimum": 0, "maximum": 1})]
    snippet: Annotated[str, Doc({"description": "one line of the memory around the words of "
                                 "the question (no tab, no newline)"})]
    matched: Annotated[tuple[str, ...], Doc({
        "items": {"enum": ["words", "meaning"]},
        "description": "which of the words and meaning indexes found it"})]
    updated_at: Time
    memory_store_id: Annotated[str | None, Doc({
        "description": "the store it is in (a search of several stores merges their hits)"})
    ] = None
    memory_type: Annotated[str | None, Doc({
        "description": "the memory's type (its front matter's, else its directory's; null: "
        "none)"})] = None
    stale: Annotated[bool, Doc({
        "description": "another live memory of the store names it in its supersedes: it "
        "ranks lower"})] = False


@dataclass
class RecallResult(Shape):
    """The hits of a search, best first, and how they were found
    (``memfs.recall.search.Result``): ``meaning`` is True when vectors ranked too; ``note``
    says why not, or how much of the store they cover. On the wire (``GET .../memfs/search``):
    a ``memfs_search_result``."""

    WIRE_TYPE = "memfs_search_result"
    SCHEMA_NAME = "SearchResult"

    hits: Annotated[list[RecallHit], Doc({"description": "best first"})] = field(
        metadata={"wire": "data"})
    meaning: Annotated[bool, Doc({"description": "whether meaning ranked too"})]
    note: Annotated[str | None, Doc({
        "description": "why meaning did not help (words alone answered), or how much of the "
        "store it covers"})] = None
    indexed: Annotated[int, Doc({"description": "memories indexed by meaning"})] = 0
    memories: int = 0
    model: Annotated[str | None, Doc({
        "description": "the embeddings model (null: meaning is off)"})] = None
    best: Annotated[float | None, Doc({
        "minimum": 0, "maximum": 1,
        "description": "the best relevance among all the memories considered, before the "
        "threshold left some out (null: no memory was considered); when no hit passed the "
        "threshold, note says so"})] = None
    candidates: dict[str, int] = field(default_factory=dict, metadata=LOCAL)
