"""The operations of both clients, each written once as a generator (:data:`Op`): it yields
the :class:`Request` s it wants made and receives their decoded JSON (or has the mapped
:mod:`memfs.errors` exception thrown into it), and returns the :mod:`memfs.models` result.
:class:`memfs.client.Client` and :class:`memfs.client.AsyncClient` drive them over their
transport, one method each."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .. import errors
from ..models import (
    Actor,
    ApiKey,
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
from .decode import (
    _change,
    _event,
    _item,
    _memory,
    _page,
    _resource,
    _session,
    _store,
    _version,
)
from .wire import (
    DEFAULT_MOUNT_ROOT,
    TOOL_EVENT_TYPES,
    Op,
    Request,
    _body,
    _ms,
    _params,
    _q,
    _text,
)


def _search_params(limit: int | None, path_prefix: str | None, threshold: float | None,
                   channels: tuple[str, ...]) -> dict[str, Any]:
    """A search's options as query parameters (``channels`` left out when both)."""
    return {"limit": limit, "path_prefix": path_prefix, "threshold": threshold,
            "channels": None if tuple(channels) == ("words", "meaning") else ",".join(channels)}


class Ops:
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
               path_prefix: str | None = None, threshold: float | None = None,
               channels: tuple[str, ...] = ("words", "meaning")) -> Op[RecallResult]:
        """The store's memories that answer ``query`` best, by words and meaning, decided by
        the server's Store (memfs extension; :meth:`memfs.store.Store.search`)."""
        d = yield Request("GET", _ms(store_id) + "/memfs/search", params=_params(
            query=query, **_search_params(limit, path_prefix, threshold, channels)))
        return RecallResult.from_dict(d)

    def search_session(self, session_id: str, query: str, *, limit: int | None = None,
                       path_prefix: str | None = None, threshold: float | None = None,
                       channels: tuple[str, ...] = ("words", "meaning"),
                       ) -> Op[RecallResult]:
        """Every store of a session searched at once, hits merged by relevance (memfs
        extension; :meth:`memfs.store.Store.search_session`)."""
        d = yield Request("GET", f"/v1/sessions/{_q(session_id)}/memfs/search",
                          params=_params(query=query, **_search_params(
                              limit, path_prefix, threshold, channels)))
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
        return SessionToken.from_dict(d)

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
        return Dream.from_dict(d)

    def get_dream(self, dream_id: str) -> Op[Dream]:
        d = yield Request("GET", f"/v1/dreams/{_q(dream_id)}")
        return Dream.from_dict(d)

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
        return _page(d, lambda x: Dream.from_dict(x))

    def cancel_dream(self, dream_id: str) -> Op[Dream]:
        d = yield Request("POST", f"/v1/dreams/{_q(dream_id)}/cancel")
        return Dream.from_dict(d)

    def archive_dream(self, dream_id: str) -> Op[Dream]:
        d = yield Request("POST", f"/v1/dreams/{_q(dream_id)}/archive")
        return Dream.from_dict(d)

    # -- API keys (issue 22; memfs extension, an admin key's) ------------------------------

    def create_key(
        self,
        name: str,
        *,
        workspace: str | None = None,
        role: str = "read_write",
        store_ids: Sequence[str] | None = None,
        expires_in: Any = None,
        created_by: Actor | None = None,
    ) -> Op[ApiKey]:
        """An API key (:meth:`memfs.store.Store.create_key`; the secret is in the answer this
        once) of ``workspace``: None, the calling key's own; another, a server key only.
        ``created_by`` is ignored: the server attributes the key to the calling one."""
        d = yield Request("POST", "/v1/memfs/keys", json=_body(
            name=name, workspace_id=workspace, role=role,
            memory_store_ids=list(store_ids) if store_ids is not None else None,
            expires_in=expires_in))
        return ApiKey.from_dict(d)

    def list_keys(self, *, workspace: str | None = None) -> Op[list[ApiKey]]:
        """The keys of ``workspace`` (None: the calling key's own), newest first; never a
        secret."""
        d = yield Request("GET", "/v1/memfs/keys", params=_params(workspace_id=workspace))
        return [ApiKey.from_dict(x) for x in d.get("data") or []]

    def get_key(self, key_id: str, *, workspace: str | None = None) -> Op[ApiKey]:
        """:raises NotFound: no such key the calling key may see (or not of ``workspace``,
        as the Store says)."""
        d = yield Request("GET", f"/v1/memfs/keys/{_q(key_id)}")
        key = ApiKey.from_dict(d)
        if workspace is not None and key.workspace_id != workspace:
            raise errors.NotFound(f"API key {key_id} not found")
        return key

    def revoke_key(self, key_id: str, *, workspace: str | None = None) -> Op[ApiKey]:
        """Revoke a key for good (a revoked one comes back unchanged); with ``workspace``
        only one of it (then two requests: it is looked at first).

        :raises NotFound: no such key the calling key may see (or not of ``workspace``).
        """
        if workspace is not None:
            yield from self.get_key(key_id, workspace=workspace)
        d = yield Request("POST", f"/v1/memfs/keys/{_q(key_id)}/revoke")
        return ApiKey.from_dict(d)


#: The operations both clients expose (every public generator of :class:`Ops`).
OPERATIONS = sorted(n for n in vars(Ops) if not n.startswith("_"))

#: The one instance both clients drive (the operations keep no state).
OPS = Ops()
