"""httpx clients for a ``memfs serve`` API, with the :class:`memfs.store.Store` interface.

:class:`Client` (sync) and :class:`AsyncClient` have the same methods, named and shaped like the
Store methods the CLI uses (``create_store``, ``get_memory_by_path``, ``list_versions``...).
They return the same :mod:`memfs.models` and raise the same :mod:`memfs.errors`, rebuilt from
the API's error envelope (``error.type`` and ``details.error_code``) by
:func:`memfs.errors.from_wire` (:func:`error_from_response` here), so a command works the
same on a local database and against a server.

Each operation is written once, as a generator that yields requests and receives decoded
responses (or has the mapped error thrown into it); the sync and async clients only drive
those generators over their transport.

``resolve_store`` and the filesystem's store calls (``write_path``, ``delete_path``,
``rename_path``, ``rename_prefix``, ``tree``, ``check_can_create``, ``count_memories``,
``last_change``, ``changes_since``, ``get_limits``) use the memfs extension endpoints (README
"Remote mounts"), each one server transaction, and so does ``revert`` (README "Undo a
session"), and ``search`` / ``search_status`` (docs/search.md);
:meth:`AsyncClient.stream_changes` follows a store's change feed, pushed by the server.

Differences from a local Store, by nature of the API:
- ``actor`` arguments are accepted and ignored: the server attributes every write to the API
  key (``api_actor``), or, for a client made with ``session_id`` (the ``x-memfs-session-id``
  header), to that session once the server has checked it may write the store.
- ``get_memory_by_path`` lists the parent directory (there is no lookup by path on the wire).
- ``update_memory(replace=True)`` over an existing memory deletes it first, conditionally on
  its hash, then renames: two requests, not one transaction. (``rename_path`` is one, and over
  a memory keeps that memory's id instead, like :meth:`memfs.store.Store.rename_path`.)
- ``create_session`` cannot choose a mount root or status; ``add_events`` sends client event
  types (``user.*``, ``system.message``), and tool events only for the session this client
  acts as (or, without a session, for a store).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import quote

import httpx

from .. import errors
from ..errors import from_wire as error_from_response
from ..models import (
    Actor,
    Change,
    Dream,
    Event,
    Memory,
    MemoryPrefix,
    MemoryStore,
    MemoryVersion,
    Page,
    RecallResult,
    Session,
    SessionResource,
    SessionToken,
    Snapshot,
    complete_tool_results,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")

DEFAULT_TIMEOUT = 30.0
DEFAULT_MOUNT_ROOT = "/mnt/memory"
#: memfs extension: a request with this header acts as that session (see memfs.api).
SESSION_HEADER = "x-memfs-session-id"
#: Event types a mount records (memfs.store.TOOL_EVENT_TYPES).
TOOL_EVENT_TYPES = ("agent.tool_use", "agent.tool_result")
#: Seconds of silence after which a change stream is taken for dead (the server pings every
#: few seconds).
STREAM_READ_TIMEOUT = 20.0

@dataclass(frozen=True)
class Request:
    """One HTTP call an operation wants made."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    json: dict[str, Any] | None = None


Op = Generator[Request, Any, T]


# --------------------------------------------------------------------------------------------
# wire -> models and errors


def _decode(response: httpx.Response) -> Any:
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


def _fields(cls: type[T], d: dict[str, Any], **extra: Any) -> T:
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in d.items() if k in names}, **extra)


def _store(d: dict[str, Any]) -> MemoryStore:
    return _fields(MemoryStore, d)


def _memory(d: dict[str, Any]) -> Memory:
    return _fields(Memory, d, seq=int(d.get("memfs_seq") or 0))


def _item(d: dict[str, Any]) -> Memory | MemoryPrefix:
    return MemoryPrefix(d["path"]) if d.get("type") == "memory_prefix" else _memory(d)


def _actor(d: Any) -> Actor | None:
    return Actor.from_dict(d) if isinstance(d, dict) else None


def _version(d: dict[str, Any]) -> MemoryVersion:
    return _fields(
        MemoryVersion,
        {k: v for k, v in d.items() if k not in ("created_by", "redacted_by")},
        created_by=_actor(d.get("created_by")),
        redacted_by=_actor(d.get("redacted_by")),
    )


def _resource(d: dict[str, Any], session_id: str) -> SessionResource:
    return _fields(SessionResource, d, session_id=session_id)


def _session(d: dict[str, Any]) -> Session:
    return _fields(
        Session,
        {k: v for k, v in d.items() if k != "resources"},
        resources=tuple(_resource(r, d["id"]) for r in d.get("resources") or ()),
    )


def _event(d: dict[str, Any], session_id: str | None) -> Event:
    return Event(d["id"], session_id, d["type"], d.get("processed_at") or "", dict(d))


def _change(d: dict[str, Any], store_id: str) -> Change:
    return Change(int(d["seq"]), store_id, d["op"], d.get("memory_id"), d.get("path"),
                  d.get("old_path"))


def _page(d: dict[str, Any], parse: Callable[[dict[str, Any]], T]) -> Page[T]:
    return Page([parse(x) for x in d.get("data") or []], d.get("next_page") or None,
                d.get("prev_page") or None)


# --------------------------------------------------------------------------------------------
# request helpers


def _given(value: Any) -> bool:
    """False for "leave it alone": None, or the store's UNSET sentinel (a CLI written against
    the Store may pass it through)."""
    return value is not None and type(value).__name__ != "_Unset"


def _body(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if _given(v)}


def _params(**fields: Any) -> dict[str, Any]:
    """Query parameters as the SDK encodes them: ``created_at_gte`` -> ``created_at[gte]``,
    lists as ``name[]`` repeats, booleans ``true``/``false``, datetimes in ISO form."""
    out: dict[str, Any] = {}
    for k, v in fields.items():
        if not _given(v):
            continue
        for bound in ("_gte", "_lte", "_gt", "_lt"):
            if k.startswith("created_at") and k.endswith(bound):
                k = f"created_at[{bound[1:]}]"
                break
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, datetime):
            v = v.isoformat()
        elif isinstance(v, list | tuple):
            k, v = k + "[]", list(v)
        out[k] = v
    return out


def _text(value: str | bytes | None, what: str) -> str | None:
    """JSON carries text only: bytes must be UTF-8 (the server sees what the store would)."""
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            cls = errors.PathEncoding if what == "path" else errors.InvalidContent
            raise cls(f"{what} is not valid UTF-8") from None
    return value


def _q(segment: str) -> str:
    return quote(segment, safe="")


def _ms(store_id: str) -> str:
    return f"/v1/memory_stores/{_q(store_id)}"


# --------------------------------------------------------------------------------------------
# the operations, written once


class _Ops:
    """Generator operations; :class:`Client` and :class:`AsyncClient` drive them."""

    # -- memory stores ---------------------------------------------------------------------

    def create_store(
        self, name: str, description: str | None = None, metadata: dict[str, str] | None = None
    ) -> Op[MemoryStore]:
        d = yield Request("POST", "/v1/memory_stores",
                          json=_body(name=name, description=description, metadata=metadata))
        return _store(d)

    def get_store(self, store_id: str) -> Op[MemoryStore]:
        d = yield Request("GET", _ms(store_id))
        return _store(d)

    def resolve_store(self, ref: str) -> Op[MemoryStore]:
        """By id, else by exact name, decided by the server's Store (memfs extension): the
        newest live store of that name wins over archived ones; two live stores of that name
        are ambiguous (InvalidRequest)."""
        d = yield Request("GET", "/v1/memfs/resolve_store", params={"ref": ref})
        return _store(d)

    def namesakes(self, store_id: str) -> Op[list[MemoryStore]]:
        """The other live stores with this store's name, decided by the server's Store
        (memfs extension)."""
        d = yield Request("GET", _ms(store_id) + "/memfs/namesakes")
        return [_store(x) for x in d.get("data") or []]

    def search(self, store_id: str, query: str, *, limit: int | None = None,
               path_prefix: str | None = None, min_score: float = 0.0) -> Op[RecallResult]:
        """The store's memories that answer ``query`` best, by words and meaning, decided by
        the server's Store (memfs extension; :meth:`memfs.store.Store.search`)."""
        d = yield Request("GET", _ms(store_id) + "/memfs/search", params=_params(
            query=query, limit=limit, path_prefix=path_prefix,
            min_score=min_score or None))
        return RecallResult.from_dict(d)

    def search_status(self, store_id: str) -> Op[dict[str, Any]]:
        """How far the store is indexed by meaning (:meth:`memfs.store.Store.search_status`:
        store_id, name, memories, indexed, model, indexing, reason)."""
        d = yield Request("GET", _ms(store_id) + "/memfs/search_status")
        return {k: v for k, v in d.items() if k != "type"}

    def update_store(
        self, store_id: str, *, name: Any = None, description: Any = None, metadata: Any = None
    ) -> Op[MemoryStore]:
        d = yield Request("POST", _ms(store_id),
                          json=_body(name=name, description=description, metadata=metadata))
        return _store(d)

    def archive_store(self, store_id: str) -> Op[MemoryStore]:
        d = yield Request("POST", _ms(store_id) + "/archive")
        return _store(d)

    def delete_store(self, store_id: str) -> Op[None]:
        yield Request("DELETE", _ms(store_id))

    def list_stores(
        self,
        *,
        include_archived: bool = False,
        created_at_gte: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Op[Page[MemoryStore]]:
        d = yield Request("GET", "/v1/memory_stores", params=_params(
            include_archived=include_archived, created_at_gte=created_at_gte,
            created_at_lte=created_at_lte, limit=limit, page=page))
        return _page(d, _store)

    # -- memories --------------------------------------------------------------------------

    def create_memory(
        self, store_id: str, path: str | bytes, content: str | bytes | None, *,
        actor: Actor | None = None,
    ) -> Op[Memory]:
        d = yield Request(
            "POST", _ms(store_id) + "/memories", params={"view": "full"},
            json={"path": _text(path, "path"), "content": _text(content, "content")},
        )
        return _memory(d)

    def get_memory(self, store_id: str, memory_id: str, *, view: str = "full") -> Op[Memory]:
        d = yield Request("GET", f"{_ms(store_id)}/memories/{_q(memory_id)}",
                          params={"view": view})
        return _memory(d)

    def get_memory_by_path(
        self, store_id: str, path: str, *, view: str = "full"
    ) -> Op[Memory]:
        """:raises NotFound: no memory at ``path``."""
        parent = path.rsplit("/", 1)[0] + "/" if "/" in path else "/"
        page = None
        while True:
            d = yield Request("GET", _ms(store_id) + "/memories", params=_params(
                path_prefix=parent, depth=1, limit=100, page=page))
            for item in _page(d, _item).data:
                if isinstance(item, Memory) and item.path == path:
                    if view == "basic":
                        return item
                    return (yield from self.get_memory(store_id, item.id, view=view))
            page = d.get("next_page")
            if not page:
                raise errors.NotFound(f"no memory at {path} in {store_id}")

    def resolve_memory(self, store_id: str, ref: str, *, view: str = "full") -> Op[Memory]:
        """By id or, when ``ref`` starts with ``/``, by path."""
        if ref.startswith("/"):
            return (yield from self.get_memory_by_path(store_id, ref, view=view))
        return (yield from self.get_memory(store_id, ref, view=view))

    def update_memory(
        self,
        store_id: str,
        memory_id: str,
        *,
        content: str | bytes | None = None,
        path: str | bytes | None = None,
        precondition_sha256: str | None = None,
        actor: Actor | None = None,
        replace: bool = False,
    ) -> Op[Memory]:
        precondition = (
            {"type": "content_sha256", "content_sha256": precondition_sha256}
            if precondition_sha256 is not None else None
        )
        request = Request(
            "POST", f"{_ms(store_id)}/memories/{_q(memory_id)}", params={"view": "full"},
            json=_body(content=_text(content, "content"), path=_text(path, "path"),
                       precondition=precondition),
        )
        try:
            d = yield request
        except errors.PathConflict as e:
            target = request.json.get("path") if request.json else None
            if not replace or target is None or e.conflicting_path != target:
                raise
            # POSIX rename over a file: remove exactly the memory we saw there, then move.
            victim = yield from self.get_memory_by_path(store_id, target, view="basic")
            if victim.id == memory_id:
                raise
            yield from self.delete_memory(store_id, victim.id,
                                          expected_sha256=victim.content_sha256)
            d = yield request
        return _memory(d)

    def delete_memory(
        self, store_id: str, memory_id: str, *, expected_sha256: str | None = None,
        actor: Actor | None = None,
    ) -> Op[None]:
        yield Request("DELETE", f"{_ms(store_id)}/memories/{_q(memory_id)}",
                      params=_params(expected_content_sha256=expected_sha256))

    def write_path(
        self, store_id: str, path: str | bytes, content: str | bytes, *,
        actor: Actor | None = None, events: list[dict[str, Any]] | None = None,
    ) -> Op[Memory]:
        """Create the memory at ``path`` or replace its content (no version when equal): one
        server transaction (memfs extension), which records ``events`` too."""
        d = yield Request("POST", _ms(store_id) + "/memfs/write", json=_body(
            path=_text(path, "path"), content=_text(content, "content"), events=events))
        m = _memory(d)
        complete_tool_results(events, m.id, m.memory_version_id)
        return m

    def delete_path(
        self, store_id: str, path: str, *, actor: Actor | None = None,
        events: list[dict[str, Any]] | None = None,
    ) -> Op[Memory]:
        """Delete the memory at ``path``; returns it as it was (basic view)."""
        d = yield Request("POST", _ms(store_id) + "/memfs/delete",
                          json=_body(path=_text(path, "path"), events=events))
        m = _memory(d)
        complete_tool_results(events, m.id)
        return m

    def rename_path(
        self, store_id: str, old: str | bytes, new: str | bytes, *,
        actor: Actor | None = None, replace: bool = True,
        events: list[dict[str, Any]] | None = None,
    ) -> Op[Memory]:
        """Rename the memory at ``old`` (it keeps its id). Over a memory at ``new`` with
        ``replace`` (POSIX rename), that memory takes the content and keeps its id, and the
        one at ``old`` is deleted, in one server transaction; returns the memory at ``new``.
        Without ``replace`` that is a PathConflict."""
        d = yield Request("POST", _ms(store_id) + "/memfs/rename", json=_body(
            old_path=_text(old, "path"), new_path=_text(new, "path"), replace=replace,
            events=events))
        m = _memory(d)
        complete_tool_results(events, m.id, m.memory_version_id)
        return m

    def rename_prefix(
        self, store_id: str, old_prefix: str, new_prefix: str, *, actor: Actor | None = None,
        events: list[dict[str, Any]] | None = None,
    ) -> Op[list[Memory]]:
        """Move every memory below ``old_prefix`` to ``new_prefix`` in one server transaction
        (a directory rename); returns the moved memories."""
        d = yield Request("POST", _ms(store_id) + "/memfs/rename_prefix", json=_body(
            old_prefix=old_prefix, new_prefix=new_prefix, events=events))
        return [_memory(x) for x in d.get("data") or []]

    def restore_version(self, store_id: str, version_id: str, *,
                        path: str | bytes | None = None,
                        actor: Actor | None = None) -> Op[Memory]:
        """Bring back a version's content, by the server's Store (memfs extension): a deleted
        memory comes back under its own id."""
        d = yield Request("POST", f"{_ms(store_id)}/memory_versions/{_q(version_id)}"
                          "/memfs/restore", json=_body(path=_text(path, "path")))
        return _memory(d)

    def tree(self, store_id: str) -> Op[list[Memory]]:
        """Every live memory of the store, without content, in path order."""
        d = yield Request("GET", _ms(store_id) + "/memfs/tree")
        return [_memory(x) for x in d.get("data") or []]

    def snapshot(self, store_id: str, at: str | datetime, *, view: str = "basic"
                 ) -> Op[Snapshot]:
        """:meth:`memfs.store.Store.snapshot` (the server sends the basic view; ``full``
        reads each version in effect, one request each)."""
        d = yield Request("GET", _ms(store_id) + "/memfs/snapshot", params={
            "at": at.isoformat() if isinstance(at, datetime) else at})
        snap = Snapshot.from_dict(d)
        if view != "full":
            return snap
        memories = []
        for m in snap.memories:
            content = ""
            if m.memory_version_id not in snap.redacted:
                v = yield Request("GET", f"{_ms(store_id)}/memory_versions/"
                                  f"{_q(m.memory_version_id)}", params={"view": "full"})
                content = v.get("content") or ""
            memories.append(dataclasses.replace(m, content=content))
        return dataclasses.replace(snap, memories=memories)

    def check_can_create(self, store_id: str) -> Op[None]:
        """:raises NotFound, StoreArchived, LimitExceeded: (and ReadOnly for a client acting
        as a session that may not write this store)."""
        yield Request("POST", _ms(store_id) + "/memfs/check_can_create")

    def get_limits(self) -> Op[dict[str, Any]]:
        """The server store's limits (the fields of :class:`memfs.store.Limits`)."""
        d = yield Request("GET", "/v1/memfs/limits")
        return dict(d)

    def sync(self) -> Op[None]:
        """Nothing to do: the server commits every write before answering."""
        return None
        yield  # a generator, like every operation

    # -- change feed -----------------------------------------------------------------------

    def last_change(self, store_id: str) -> Op[int]:
        """The newest change sequence number of the store (0 if none)."""
        d = yield Request("GET", _ms(store_id) + "/memfs/stats")
        return int(d["last_seq"])

    def changes_since(self, store_id: str, seq: int, limit: int = 1000) -> Op[list[Change]]:
        """Changes after ``seq``, oldest first (at most ``limit``).

        :raises FeedGap: the server's feed no longer holds (or never had) that position:
            reload the whole tree, as with a local Store.
        """
        d = yield Request("GET", _ms(store_id) + "/changes",
                          params={"after": seq, "limit": limit})
        if d.get("reset"):
            raise errors.FeedGap(
                f"the server's change feed of {store_id} no longer holds position {seq}: "
                "reload the whole tree")
        return [_change(x, store_id) for x in d.get("data") or []]

    def list_memories(
        self,
        store_id: str,
        *,
        path_prefix: str | None = None,
        depth: int = 0,
        limit: int = 20,
        page: str | None = None,
        view: str = "basic",
    ) -> Op[Page[Memory | MemoryPrefix]]:
        d = yield Request("GET", _ms(store_id) + "/memories", params=_params(
            path_prefix=path_prefix, depth=depth, limit=limit, page=page, view=view))
        return _page(d, _item)

    def count_memories(self, store_id: str) -> Op[int]:
        """How many live memories the store holds."""
        d = yield Request("GET", _ms(store_id) + "/memfs/stats")
        return int(d["memory_count"])

    # -- versions --------------------------------------------------------------------------

    def list_versions(
        self,
        store_id: str,
        *,
        memory_id: str | None = None,
        operation: str | None = None,
        session_id: str | None = None,
        api_key_id: str | None = None,
        service_account_id: str | None = None,
        user_id: str | None = None,
        created_at_gte: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
        view: str = "basic",
    ) -> Op[Page[MemoryVersion]]:
        d = yield Request("GET", _ms(store_id) + "/memory_versions", params=_params(
            memory_id=memory_id, operation=operation, session_id=session_id,
            api_key_id=api_key_id, service_account_id=service_account_id, user_id=user_id,
            created_at_gte=created_at_gte, created_at_lte=created_at_lte, limit=limit,
            page=page, view=view))
        return _page(d, _version)

    def get_version(
        self, store_id: str, version_id: str, *, view: str = "full"
    ) -> Op[MemoryVersion]:
        d = yield Request("GET", f"{_ms(store_id)}/memory_versions/{_q(version_id)}",
                          params={"view": view})
        return _version(d)

    def redact_version(
        self, store_id: str, version_id: str, *, actor: Actor | None = None
    ) -> Op[MemoryVersion]:
        d = yield Request("POST", f"{_ms(store_id)}/memory_versions/{_q(version_id)}/redact")
        return _version(d)

    def prune_versions(self) -> Op[int]:
        """Not available remotely: retention is enforced by the server on its database."""
        raise errors.InvalidRequest(
            "version pruning runs on the server's own database; run it there"
        )
        yield  # a generator, like every operation

    # -- agents and environments -----------------------------------------------------------

    def create_agent(self, /, *, name: str, model: Any, **fields: Any) -> Op[dict[str, Any]]:
        d = yield Request("POST", "/v1/agents", json=_body(name=name, model=model, **fields))
        return dict(d)

    def get_agent(self, agent_id: str) -> Op[dict[str, Any]]:
        d = yield Request("GET", f"/v1/agents/{_q(agent_id)}")
        return dict(d)

    def create_environment(self, /, *, name: str, **fields: Any) -> Op[dict[str, Any]]:
        d = yield Request("POST", "/v1/environments", json=_body(name=name, **fields))
        return dict(d)

    def get_environment(self, environment_id: str) -> Op[dict[str, Any]]:
        d = yield Request("GET", f"/v1/environments/{_q(environment_id)}")
        return dict(d)

    # -- sessions and events ---------------------------------------------------------------

    def create_session(
        self,
        resources: Sequence[dict[str, Any]],
        *,
        root: str = DEFAULT_MOUNT_ROOT,
        agent: dict[str, Any] | str | None = None,
        environment_id: str | None = None,
        metadata: dict[str, str] | None = None,
        title: str | None = None,
        status: str = "idle",
        launcher: dict[str, Any] | None = None,
    ) -> Op[Session]:
        if launcher is not None:
            raise errors.InvalidRequest(
                "a memfs server's sessions have no local launcher (memfs run --url)"
            )
        if status != "idle":
            raise errors.InvalidRequest(
                "a memfs server creates idle sessions; use set_session_status afterwards"
            )
        if isinstance(agent, dict):  # a snapshot: the server takes a reference
            agent = {k: v for k, v in agent.items() if k in ("type", "id", "version")}
        mount_root = None if root.rstrip("/") == DEFAULT_MOUNT_ROOT else root
        d = yield Request("POST", "/v1/sessions", json=_body(
            resources=list(resources), agent=agent, environment_id=environment_id,
            metadata=metadata, title=title, memfs_mount_root=mount_root))
        return _session(d)

    def set_session_status(self, session_id: str, status: str) -> Op[Session]:
        """memfs extension (``POST /v1/sessions/{id}/memfs/status``)."""
        d = yield Request(
            "POST", f"/v1/sessions/{_q(session_id)}/memfs/status", json={"status": status}
        )
        return _session(d)

    def create_session_token(self, session_id: str, *,
                             ttl_seconds: float | None = None) -> Op[SessionToken]:
        """memfs extension (``POST /v1/sessions/{id}/memfs/tokens``): a session token, for
        the commands of the session (:meth:`memfs.store.Store.create_session_token`)."""
        body = {} if ttl_seconds is None else {"ttl_seconds": ttl_seconds}
        d = yield Request("POST", f"/v1/sessions/{_q(session_id)}/memfs/tokens", json=body)
        return SessionToken(d["id"], d["session_id"], d["token"], d["created_at"],
                            d["expires_at"])

    def revert(self, target: str, *, actor: Actor | None = None, dry_run: bool = False,
               force: bool = False) -> Op[dict[str, Any]]:
        """memfs extension (``POST /v1/sessions/{id}/memfs/revert``): Store.revert of a
        session or a ``memrevert_`` id, attributed to this client's key."""
        d = yield Request("POST", f"/v1/sessions/{_q(target)}/memfs/revert",
                          json={"dry_run": dry_run, "force": force})
        return dict(d)

    def get_session(self, session_id: str) -> Op[Session]:
        d = yield Request("GET", f"/v1/sessions/{_q(session_id)}")
        return _session(d)

    def list_sessions(
        self,
        *,
        memory_store_id: str | None = None,
        statuses: Sequence[str] | None = None,
        include_archived: bool = False,
        order: str = "desc",
        created_at_gt: str | datetime | None = None,
        created_at_gte: str | datetime | None = None,
        created_at_lt: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Op[Page[Session]]:
        d = yield Request("GET", "/v1/sessions", params=_params(
            memory_store_id=memory_store_id, statuses=list(statuses) if statuses else None,
            include_archived=include_archived, order=order, created_at_gt=created_at_gt,
            created_at_gte=created_at_gte, created_at_lt=created_at_lt,
            created_at_lte=created_at_lte, limit=limit, page=page))
        return _page(d, _session)

    def update_session(
        self, session_id: str, *, metadata: Any = None, title: Any = None
    ) -> Op[Session]:
        d = yield Request("POST", f"/v1/sessions/{_q(session_id)}",
                          json=_body(metadata=metadata, title=title))
        return _session(d)

    def archive_session(self, session_id: str) -> Op[Session]:
        d = yield Request("POST", f"/v1/sessions/{_q(session_id)}/archive")
        return _session(d)

    def delete_session(self, session_id: str) -> Op[None]:
        yield Request("DELETE", f"/v1/sessions/{_q(session_id)}")

    def get_session_resource(self, session_id: str, resource_id: str) -> Op[SessionResource]:
        d = yield Request("GET", f"/v1/sessions/{_q(session_id)}/resources/{_q(resource_id)}")
        return _resource(d, session_id)

    def list_session_resources(
        self, session_id: str, *, limit: int | None = None, page: str | None = None
    ) -> Op[Page[SessionResource]]:
        d = yield Request("GET", f"/v1/sessions/{_q(session_id)}/resources",
                          params=_params(limit=limit, page=page))
        return _page(d, lambda r: _resource(r, session_id))

    def list_events(
        self,
        session_id: str,
        *,
        types: Sequence[str] | None = None,
        order: str = "asc",
        created_at_gt: str | datetime | None = None,
        created_at_gte: str | datetime | None = None,
        created_at_lt: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
        after_seq: int | None = None,
    ) -> Op[Page[Event]]:
        if after_seq is not None:
            raise errors.InvalidRequest("after_seq is a local-database option; use page")
        d = yield Request("GET", f"/v1/sessions/{_q(session_id)}/events", params=_params(
            types=list(types) if types else None, order=order, created_at_gt=created_at_gt,
            created_at_gte=created_at_gte, created_at_lt=created_at_lt,
            created_at_lte=created_at_lte, limit=limit, page=page))
        return _page(d, lambda e: _event(e, session_id))

    def add_events(
        self, session_id: str | None, events: Sequence[dict[str, Any]], *,
        store_id: str | None = None,
    ) -> Op[list[Event]]:
        """Client events (``user.*``, ``system.message``) for a session; or a mount's tool
        events (``agent.tool_use``/``agent.tool_result``, ids kept, a retried batch recorded
        once) for the session this client acts as, or with ``session_id`` None for the store.
        """
        tools = bool(events) and all(e.get("type") in TOOL_EVENT_TYPES for e in events)
        if tools and session_id is None and store_id is not None:
            d = yield Request("POST", _ms(store_id) + "/memfs/events",
                              json={"events": list(events)})
        elif session_id is None or (store_id is not None and not tools):
            raise errors.InvalidRequest("events without a session cannot be sent to a server")
        else:
            d = yield Request("POST", f"/v1/sessions/{_q(session_id)}/events",
                              json=_body(events=list(events), memory_store_id=store_id))
        return [_event(e, session_id) for e in d.get("data") or []]

    send_events = add_events

    # -- dreams (API.md §5) ------------------------------------------------------------------

    def create_dream(self, inputs: Any, model: Any, *, instructions: Any = None,
                     output_behavior: Any = None, runner: Any = None) -> Op[Dream]:
        """The server runs the dream (``runner`` is the server's own)."""
        d = yield Request("POST", "/v1/dreams", json=_body(
            inputs=inputs, model=model, instructions=instructions,
            output_behavior=output_behavior))
        return _fields(Dream, d)

    def get_dream(self, dream_id: str) -> Op[Dream]:
        d = yield Request("GET", f"/v1/dreams/{_q(dream_id)}")
        return _fields(Dream, d)

    def list_dreams(
        self,
        *,
        statuses: Sequence[str] | None = None,
        include_archived: bool = False,
        created_at_gt: str | datetime | None = None,
        created_at_lt: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Op[Page[Dream]]:
        d = yield Request("GET", "/v1/dreams", params=_params(
            statuses=list(statuses) if statuses else None, include_archived=include_archived,
            created_at_gt=created_at_gt, created_at_lt=created_at_lt, limit=limit, page=page))
        return _page(d, lambda x: _fields(Dream, x))

    def cancel_dream(self, dream_id: str) -> Op[Dream]:
        d = yield Request("POST", f"/v1/dreams/{_q(dream_id)}/cancel")
        return _fields(Dream, d)

    def archive_dream(self, dream_id: str) -> Op[Dream]:
        d = yield Request("POST", f"/v1/dreams/{_q(dream_id)}/archive")
        return _fields(Dream, d)


#: The operations both clients expose (every public generator of :class:`_Ops`).
OPERATIONS = sorted(n for n in vars(_Ops) if not n.startswith("_"))


def _sync_method(gen: Callable[Concatenate[_Ops, P], Op[T]]
                 ) -> Callable[Concatenate[Client, P], T]:
    """The :class:`Client` method of an operation: its arguments, its result."""
    @functools.wraps(gen)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._drive(gen(_OPS, *args, **kwargs))

    return method


def _async_method(gen: Callable[Concatenate[_Ops, P], Op[T]]
                  ) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]:
    """The :class:`AsyncClient` method of an operation: its arguments, its result awaited."""
    @functools.wraps(gen)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._drive(gen(_OPS, *args, **kwargs))

    return method


def _headers(api_key: str | None, session_id: str | None = None) -> dict[str, str]:
    headers = {"user-agent": "memfs-client", "anthropic-version": "2023-06-01"}
    if api_key:
        headers["x-api-key"] = api_key
    if session_id:
        headers[SESSION_HEADER] = session_id
    return headers


@dataclass(frozen=True)
class FeedEvent:
    """One frame of a change stream: ``kind`` is ``change`` (``change``, and ``memory``: the
    memory as it is now for a ``put``, None once deleted), ``reset`` (the position asked for
    is unknown to the server: reload everything, then continue from ``seq``) or ``ping``
    (``seq``: the server's newest position)."""

    kind: str
    seq: int
    change: Change | None = None
    memory: Memory | None = None


def _feed_event(name: str, data: dict[str, Any], store_id: str) -> FeedEvent | None:
    if name == "memfs.change":
        m = data.get("memory")
        return FeedEvent("change", int(data["seq"]), _change(data, store_id),
                         _memory(m) if isinstance(m, dict) else None)
    if name == "memfs.reset":
        return FeedEvent("reset", int(data["last_seq"]))
    if name == "ping":
        return FeedEvent("ping", int(data.get("last_seq") or 0))
    if name == "error":
        raise error_from_response(500, data)
    return None  # a frame type this client does not know: skipped


def unix_socket(url: str) -> tuple[str | None, str]:
    """``(socket path, base URL)`` for a server URL: ``unix:/PATH`` (or ``unix:///PATH``, a
    local session's API: memfs.sessionapi) is served on that unix socket; anything else is
    an HTTP URL, no socket."""
    if url.startswith("unix:"):
        path = url[len("unix:"):]
        if path.startswith("//"):
            path = path[2:]
        return path, "http://memfs.local"
    return None, url


class Client:
    """A synchronous client of a memfs server, with the Store's methods.

    :param base_url: e.g. ``http://127.0.0.1:8000`` (a path prefix is kept), or
        ``unix:/PATH`` (:func:`unix_socket`).
    :param api_key: sent as ``x-api-key``.
    :param session_id: act as this session (memfs extension header): memory writes are
        attributed to its ``session_actor`` (the server refuses them with ReadOnly unless the
        session may write the store) and tool events may be recorded for it.
    :param transport: an httpx transport (tests pass ``httpx.MockTransport``).
    """

    #: The server store's :class:`memfs.store.Limits`, for code written against a Store (the
    #: filesystem reads ``store.limits``). This module does not import the store: the caller
    #: builds it from :meth:`get_limits`.
    limits: Any = None

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        session_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url
        self.session_id = session_id
        uds, http_url = unix_socket(base_url)
        if uds is not None and transport is None:
            transport = httpx.HTTPTransport(uds=uds)
        self._http = httpx.Client(base_url=http_url, headers=_headers(api_key, session_id),
                                  timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def check_file(self) -> None:
        """Nothing to check: the server watches its own database file."""

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, req: Request) -> Any:
        try:
            response = self._http.request(req.method, req.path, params=req.params,
                                          json=req.json)
        except httpx.TransportError as e:
            raise errors.MemfsError(f"cannot reach memfs server {self.base_url}: {e}") from e
        return _decode(response)

    def _drive(self, op: Op[T]) -> T:
        result: Any = None
        exc: errors.MemfsError | None = None
        while True:
            try:
                req = op.throw(exc) if exc is not None else op.send(result)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            try:
                result, exc = self._send(req), None
            except errors.MemfsError as e:
                result, exc = None, e

    # -- import and export (memfs extensions; bodies are archives, not JSON) ----------------

    def export_archive(self, store_id: str, *, history: bool) -> Iterator[bytes]:
        """The store's archive (:func:`memfs.transfer.export_archive`), streamed."""
        try:
            with self._http.stream("GET", f"{_ms(store_id)}/memfs/export",
                                   params={"history": "true" if history else "false"},
                                   timeout=httpx.Timeout(self._http.timeout.connect,
                                                         read=600.0)) as response:
                if response.status_code != 200:
                    response.read()
                    _decode(response)
                yield from response.iter_bytes()
        except httpx.TransportError as e:
            raise errors.MemfsError(f"cannot reach memfs server {self.base_url}: {e}") from e

    def import_upload(self, raw: IO[bytes], *, name: str | None = None,
                      into: str | None = None, partial: bool = False) -> dict[str, Any]:
        """Upload an archive or a zip (:func:`memfs.transfer.import_upload`); the summary."""
        params = _params(name=name, into=into, partial="true" if partial else None)

        def body() -> Iterator[bytes]:
            while chunk := raw.read(65536):
                yield chunk

        try:
            response = self._http.post("/v1/memfs/import", params=params, content=body(),
                                       timeout=httpx.Timeout(self._http.timeout.connect,
                                                             read=600.0, write=600.0))
        except httpx.TransportError as e:
            raise errors.MemfsError(f"cannot reach memfs server {self.base_url}: {e}") from e
        result: dict[str, Any] = _decode(response)
        return result

    # -- the operations: each one of :class:`_Ops`, typed as it is written there -----------

    add_events = _sync_method(_Ops.add_events)
    archive_dream = _sync_method(_Ops.archive_dream)
    archive_session = _sync_method(_Ops.archive_session)
    archive_store = _sync_method(_Ops.archive_store)
    cancel_dream = _sync_method(_Ops.cancel_dream)
    changes_since = _sync_method(_Ops.changes_since)
    check_can_create = _sync_method(_Ops.check_can_create)
    count_memories = _sync_method(_Ops.count_memories)
    create_agent = _sync_method(_Ops.create_agent)
    create_dream = _sync_method(_Ops.create_dream)
    create_environment = _sync_method(_Ops.create_environment)
    create_memory = _sync_method(_Ops.create_memory)
    create_session = _sync_method(_Ops.create_session)
    create_session_token = _sync_method(_Ops.create_session_token)
    create_store = _sync_method(_Ops.create_store)
    delete_memory = _sync_method(_Ops.delete_memory)
    delete_path = _sync_method(_Ops.delete_path)
    delete_session = _sync_method(_Ops.delete_session)
    delete_store = _sync_method(_Ops.delete_store)
    get_agent = _sync_method(_Ops.get_agent)
    get_dream = _sync_method(_Ops.get_dream)
    get_environment = _sync_method(_Ops.get_environment)
    get_limits = _sync_method(_Ops.get_limits)
    get_memory = _sync_method(_Ops.get_memory)
    get_memory_by_path = _sync_method(_Ops.get_memory_by_path)
    get_session = _sync_method(_Ops.get_session)
    get_session_resource = _sync_method(_Ops.get_session_resource)
    get_store = _sync_method(_Ops.get_store)
    get_version = _sync_method(_Ops.get_version)
    last_change = _sync_method(_Ops.last_change)
    list_dreams = _sync_method(_Ops.list_dreams)
    list_events = _sync_method(_Ops.list_events)
    list_memories = _sync_method(_Ops.list_memories)
    list_session_resources = _sync_method(_Ops.list_session_resources)
    list_sessions = _sync_method(_Ops.list_sessions)
    list_stores = _sync_method(_Ops.list_stores)
    list_versions = _sync_method(_Ops.list_versions)
    namesakes = _sync_method(_Ops.namesakes)
    prune_versions = _sync_method(_Ops.prune_versions)
    redact_version = _sync_method(_Ops.redact_version)
    rename_path = _sync_method(_Ops.rename_path)
    rename_prefix = _sync_method(_Ops.rename_prefix)
    resolve_memory = _sync_method(_Ops.resolve_memory)
    resolve_store = _sync_method(_Ops.resolve_store)
    restore_version = _sync_method(_Ops.restore_version)
    revert = _sync_method(_Ops.revert)
    search = _sync_method(_Ops.search)
    search_status = _sync_method(_Ops.search_status)
    send_events = _sync_method(_Ops.send_events)
    set_session_status = _sync_method(_Ops.set_session_status)
    snapshot = _sync_method(_Ops.snapshot)
    sync = _sync_method(_Ops.sync)
    tree = _sync_method(_Ops.tree)
    update_memory = _sync_method(_Ops.update_memory)
    update_session = _sync_method(_Ops.update_session)
    update_store = _sync_method(_Ops.update_store)
    write_path = _sync_method(_Ops.write_path)


class AsyncClient:
    """The asynchronous twin of :class:`Client` (same methods, awaited)."""

    limits: Any = None

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        session_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url
        self.session_id = session_id
        uds, http_url = unix_socket(base_url)
        if uds is not None and transport is None:
            transport = httpx.AsyncHTTPTransport(uds=uds)
        self._http = httpx.AsyncClient(base_url=http_url, headers=_headers(api_key, session_id),
                                       timeout=timeout, transport=transport)

    async def stream_changes(
        self, store_id: str, after: int | None = None, *,
        read_timeout: float = STREAM_READ_TIMEOUT,
    ) -> AsyncIterator[FeedEvent]:
        """Follow the store's change feed (memfs extension, SSE) from ``after`` (default: now)
        until the caller stops or the link fails.

        :raises NotFound: the store does not exist (any more).
        :raises MemfsError: the server cannot be reached, or went silent for
            ``read_timeout`` seconds (no change and no ping), or answered with an error.
        """
        params = {} if after is None else {"after": after}
        timeout = httpx.Timeout(self._http.timeout.connect, read=read_timeout,
                                write=self._http.timeout.write, pool=self._http.timeout.pool)
        try:
            async with self._http.stream("GET", _ms(store_id) + "/changes/stream",
                                         params=params, timeout=timeout) as response:
                if not response.is_success:
                    await response.aread()
                    _decode(response)
                name, data = "", []
                async for line in response.aiter_lines():
                    if line:
                        field, _, value = line.partition(":")
                        value = value[1:] if value.startswith(" ") else value
                        if field == "event":
                            name = value
                        elif field == "data":
                            data.append(value)
                        continue
                    if name and data:
                        try:
                            payload = json.loads("\n".join(data))
                        except ValueError:
                            raise errors.MemfsError(
                                "the server sent a malformed change frame") from None
                        event = _feed_event(name, payload, store_id)
                        if event is not None:
                            yield event
                    name, data = "", []
        except httpx.TransportError as e:
            raise errors.MemfsError(
                f"lost the change stream of {store_id} from {self.base_url}: {e!r}") from e

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, req: Request) -> Any:
        try:
            response = await self._http.request(req.method, req.path, params=req.params,
                                                json=req.json)
        except httpx.TransportError as e:
            raise errors.MemfsError(f"cannot reach memfs server {self.base_url}: {e}") from e
        return _decode(response)

    async def _drive(self, op: Op[T]) -> T:
        result: Any = None
        exc: errors.MemfsError | None = None
        while True:
            try:
                req = op.throw(exc) if exc is not None else op.send(result)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            try:
                result, exc = await self._send(req), None
            except errors.MemfsError as e:
                result, exc = None, e

    # -- the operations: each one of :class:`_Ops`, typed as it is written there -----------

    add_events = _async_method(_Ops.add_events)
    archive_dream = _async_method(_Ops.archive_dream)
    archive_session = _async_method(_Ops.archive_session)
    archive_store = _async_method(_Ops.archive_store)
    cancel_dream = _async_method(_Ops.cancel_dream)
    changes_since = _async_method(_Ops.changes_since)
    check_can_create = _async_method(_Ops.check_can_create)
    count_memories = _async_method(_Ops.count_memories)
    create_agent = _async_method(_Ops.create_agent)
    create_dream = _async_method(_Ops.create_dream)
    create_environment = _async_method(_Ops.create_environment)
    create_memory = _async_method(_Ops.create_memory)
    create_session = _async_method(_Ops.create_session)
    create_session_token = _async_method(_Ops.create_session_token)
    create_store = _async_method(_Ops.create_store)
    delete_memory = _async_method(_Ops.delete_memory)
    delete_path = _async_method(_Ops.delete_path)
    delete_session = _async_method(_Ops.delete_session)
    delete_store = _async_method(_Ops.delete_store)
    get_agent = _async_method(_Ops.get_agent)
    get_dream = _async_method(_Ops.get_dream)
    get_environment = _async_method(_Ops.get_environment)
    get_limits = _async_method(_Ops.get_limits)
    get_memory = _async_method(_Ops.get_memory)
    get_memory_by_path = _async_method(_Ops.get_memory_by_path)
    get_session = _async_method(_Ops.get_session)
    get_session_resource = _async_method(_Ops.get_session_resource)
    get_store = _async_method(_Ops.get_store)
    get_version = _async_method(_Ops.get_version)
    last_change = _async_method(_Ops.last_change)
    list_dreams = _async_method(_Ops.list_dreams)
    list_events = _async_method(_Ops.list_events)
    list_memories = _async_method(_Ops.list_memories)
    list_session_resources = _async_method(_Ops.list_session_resources)
    list_sessions = _async_method(_Ops.list_sessions)
    list_stores = _async_method(_Ops.list_stores)
    list_versions = _async_method(_Ops.list_versions)
    namesakes = _async_method(_Ops.namesakes)
    prune_versions = _async_method(_Ops.prune_versions)
    redact_version = _async_method(_Ops.redact_version)
    rename_path = _async_method(_Ops.rename_path)
    rename_prefix = _async_method(_Ops.rename_prefix)
    resolve_memory = _async_method(_Ops.resolve_memory)
    resolve_store = _async_method(_Ops.resolve_store)
    restore_version = _async_method(_Ops.restore_version)
    revert = _async_method(_Ops.revert)
    search = _async_method(_Ops.search)
    search_status = _async_method(_Ops.search_status)
    send_events = _async_method(_Ops.send_events)
    set_session_status = _async_method(_Ops.set_session_status)
    snapshot = _async_method(_Ops.snapshot)
    sync = _async_method(_Ops.sync)
    tree = _async_method(_Ops.tree)
    update_memory = _async_method(_Ops.update_memory)
    update_session = _async_method(_Ops.update_session)
    update_store = _async_method(_Ops.update_store)
    write_path = _async_method(_Ops.write_path)



_OPS = _Ops()
