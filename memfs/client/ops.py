"""The operations of both clients, each written once as a generator (:data:`Op`): it yields
the :class:`Request` s it wants made and receives their decoded JSON (or has the mapped
:mod:`memfs.errors` exception thrown into it), and returns the :mod:`memfs.models` result.
:class:`memfs.client.Client` and :class:`memfs.client.AsyncClient` drive them over their
transport, one method each.

The operations are grouped in parts named as the Store's (``OPS.memories.create``, as
``store.memories.create``): this module holds the parts of a store's memories (stores,
memories, versions, feed, search) and :data:`OPS`, which holds every part;
:mod:`memfs.client.ops_sessions` the parts of sessions (agents, sessions, events, undo,
dreams, keys)."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from .. import errors
from ..models import (
    Actor,
    Change,
    Memory,
    MemoryPrefix,
    MemoryStore,
    MemoryVersion,
    Page,
    RecallResult,
    Snapshot,
    ToolEvents,
    complete_tool_results,
    tool_event_dicts,
)
from .decode import (
    to_change,
    to_item,
    to_memory,
    to_page,
    to_store,
    to_version,
)
from .ops_sessions import AgentOps, DreamOps, EventOps, KeyOps, SessionOps, UndoOps
from .wire import (
    Op,
    Request,
    json_body,
    query_params,
    quoted,
    store_url,
    utf8,
)


def _search_params(limit: int | None, path_prefix: str | None, threshold: float | None,
                   channels: tuple[str, ...], memory_type: str | None) -> dict[str, Any]:
    """A search's options as query parameters (``channels`` left out when both; the type as
    ``memfs_type``)."""
    return {"limit": limit, "path_prefix": path_prefix, "threshold": threshold,
            "channels": None if tuple(channels) == ("words", "meaning") else ",".join(channels),
            "memfs_type": memory_type}


class StoreOps:
    """The memory stores themselves: create, read, list, rename, archive, delete."""

    def create(
        self, name: str, description: str | None = None, metadata: dict[str, str] | None = None
    ) -> Op[MemoryStore]:
        d = yield Request("POST", "/v1/memory_stores",
                          json=json_body(name=name, description=description, metadata=metadata))
        return to_store(d)

    def get(self, store_id: str) -> Op[MemoryStore]:
        d = yield Request("GET", store_url(store_id))
        return to_store(d)

    def resolve(self, ref: str) -> Op[MemoryStore]:
        """By id, else by exact name, decided by the server's Store (memfs extension): the
        newest live store of that name wins over archived ones; two live stores of that name
        are ambiguous (InvalidRequest)."""
        d = yield Request("GET", "/v1/memfs/resolve_store", params={"ref": ref})
        return to_store(d)

    def namesakes(self, store_id: str) -> Op[list[MemoryStore]]:
        """The other live stores with this store's name, decided by the server's Store
        (memfs extension)."""
        d = yield Request("GET", store_url(store_id) + "/memfs/namesakes")
        return [to_store(x) for x in d.get("data") or []]

    def update(
        self, store_id: str, *, name: Any = None, description: Any = None, metadata: Any = None
    ) -> Op[MemoryStore]:
        d = yield Request("POST", store_url(store_id),
                          json=json_body(name=name, description=description, metadata=metadata))
        return to_store(d)

    def archive(self, store_id: str) -> Op[MemoryStore]:
        d = yield Request("POST", store_url(store_id) + "/archive")
        return to_store(d)

    def delete(self, store_id: str) -> Op[None]:
        yield Request("DELETE", store_url(store_id))

    def list(
        self,
        *,
        include_archived: bool = False,
        created_at_gte: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Op[Page[MemoryStore]]:
        d = yield Request("GET", "/v1/memory_stores", params=query_params(
            include_archived=include_archived, created_at_gte=created_at_gte,
            created_at_lte=created_at_lte, limit=limit, page=page))
        return to_page(d, to_store)


class MemoryOps:
    """A store's memories, by id (the API's own) and by path (the filesystem's, memfs
    extensions: each one server transaction)."""

    def create(
        self, store_id: str, path: str | bytes, content: str | bytes | None, *,
        actor: Actor | None = None,
    ) -> Op[Memory]:
        d = yield Request(
            "POST", store_url(store_id) + "/memories", params={"view": "full"},
            json={"path": utf8(path, "path"), "content": utf8(content, "content")},
        )
        return to_memory(d)

    def get(self, store_id: str, memory_id: str, *, view: str = "full") -> Op[Memory]:
        d = yield Request("GET", f"{store_url(store_id)}/memories/{quoted(memory_id)}",
                          params={"view": view})
        return to_memory(d)

    def get_by_path(
        self, store_id: str, path: str, *, view: str = "full"
    ) -> Op[Memory]:
        """:raises NotFound: no memory at ``path``."""
        parent = path.rsplit("/", 1)[0] + "/" if "/" in path else "/"
        page = None
        while True:
            d = yield Request("GET", store_url(store_id) + "/memories", params=query_params(
                path_prefix=parent, depth=1, limit=100, page=page))
            for item in to_page(d, to_item).data:
                if isinstance(item, Memory) and item.path == path:
                    if view == "basic":
                        return item
                    return (yield from self.get(store_id, item.id, view=view))
            page = d.get("next_page")
            if not page:
                raise errors.NotFound(f"no memory at {path} in {store_id}")

    def resolve(self, store_id: str, ref: str, *, view: str = "full") -> Op[Memory]:
        """By id or, when ``ref`` starts with ``/``, by path."""
        if ref.startswith("/"):
            return (yield from self.get_by_path(store_id, ref, view=view))
        return (yield from self.get(store_id, ref, view=view))

    def update(
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
            "POST", f"{store_url(store_id)}/memories/{quoted(memory_id)}", params={"view": "full"},
            json=json_body(content=utf8(content, "content"), path=utf8(path, "path"),
                       precondition=precondition),
        )
        try:
            d = yield request
        except errors.PathConflict as e:
            target = request.json.get("path") if request.json else None
            if not replace or target is None or e.conflicting_path != target:
                raise
            # POSIX rename over a file: remove exactly the memory we saw there, then move.
            victim = yield from self.get_by_path(store_id, target, view="basic")
            if victim.id == memory_id:
                raise
            yield from self.delete(store_id, victim.id,
                                          expected_sha256=victim.content_sha256)
            d = yield request
        return to_memory(d)

    def delete(
        self, store_id: str, memory_id: str, *, expected_sha256: str | None = None,
        actor: Actor | None = None,
    ) -> Op[None]:
        yield Request("DELETE", f"{store_url(store_id)}/memories/{quoted(memory_id)}",
                      params=query_params(expected_content_sha256=expected_sha256))

    def write_path(
        self, store_id: str, path: str | bytes, content: str | bytes, *,
        actor: Actor | None = None, events: ToolEvents = None,
    ) -> Op[Memory]:
        """Create the memory at ``path`` or replace its content (no version when equal): one
        server transaction (memfs extension), which records ``events`` too."""
        d = yield Request("POST", store_url(store_id) + "/memfs/write", json=json_body(
            path=utf8(path, "path"), content=utf8(content, "content"),
            events=tool_event_dicts(events)))
        m = to_memory(d)
        complete_tool_results(events, m.id, m.memory_version_id)
        return m

    def delete_path(
        self, store_id: str, path: str, *, actor: Actor | None = None,
        events: ToolEvents = None,
    ) -> Op[Memory]:
        """Delete the memory at ``path``; returns it as it was (basic view)."""
        d = yield Request("POST", store_url(store_id) + "/memfs/delete",
                          json=json_body(path=utf8(path, "path"),
                                         events=tool_event_dicts(events)))
        m = to_memory(d)
        complete_tool_results(events, m.id)
        return m

    def rename_path(
        self, store_id: str, old: str | bytes, new: str | bytes, *,
        actor: Actor | None = None, replace: bool = True,
        events: ToolEvents = None,
    ) -> Op[Memory]:
        """Rename the memory at ``old`` (it keeps its id). Over a memory at ``new`` with
        ``replace`` (POSIX rename), that memory takes the content and keeps its id, and the
        one at ``old`` is deleted, in one server transaction; returns the memory at ``new``.
        Without ``replace`` that is a PathConflict."""
        d = yield Request("POST", store_url(store_id) + "/memfs/rename", json=json_body(
            old_path=utf8(old, "path"), new_path=utf8(new, "path"), replace=replace,
            events=tool_event_dicts(events)))
        m = to_memory(d)
        complete_tool_results(events, m.id, m.memory_version_id)
        return m

    def rename_prefix(
        self, store_id: str, old_prefix: str, new_prefix: str, *, actor: Actor | None = None,
        events: ToolEvents = None,
    ) -> Op[list[Memory]]:
        """Move every memory below ``old_prefix`` to ``new_prefix`` in one server transaction
        (a directory rename); returns the moved memories."""
        d = yield Request("POST", store_url(store_id) + "/memfs/rename_prefix", json=json_body(
            old_prefix=old_prefix, new_prefix=new_prefix,
            events=tool_event_dicts(events)))
        return [to_memory(x) for x in d.get("data") or []]

    def delete_prefix(
        self, store_id: str, prefix: str, *, actor: Actor | None = None,
        events: ToolEvents = None,
    ) -> Op[list[Memory]]:
        """Delete every memory below ``prefix`` in one server transaction (a directory);
        returns them as they were (basic view)."""
        d = yield Request("POST", store_url(store_id) + "/memfs/delete_prefix",
                          json=json_body(prefix=prefix, events=tool_event_dicts(events)))
        return [to_memory(x) for x in d.get("data") or []]

    def tree(self, store_id: str) -> Op[list[Memory]]:
        """Every live memory of the store, without content, in path order."""
        d = yield Request("GET", store_url(store_id) + "/memfs/tree")
        return [to_memory(x) for x in d.get("data") or []]

    def check_can_create(self, store_id: str) -> Op[None]:
        """:raises NotFound, StoreArchived, LimitExceeded: (and ReadOnly for a client acting
        as a session that may not write this store)."""
        yield Request("POST", store_url(store_id) + "/memfs/check_can_create")

    def list(
        self,
        store_id: str,
        *,
        path_prefix: str | None = None,
        depth: int = 0,
        limit: int = 20,
        page: str | None = None,
        view: str = "basic",
        memory_type: str | None = None,
        tag: str | None = None,
    ) -> Op[Page[Memory | MemoryPrefix]]:
        """``memory_type``, ``tag``: only the memories of that type, with that tag (the memfs
        extension's ``memfs_type`` and ``memfs_tag``; depth 0)."""
        params = query_params(path_prefix=path_prefix, depth=depth, limit=limit, page=page,
                              view=view)
        # Sent as given, even empty: the server refuses an empty filter (as the store does),
        # where leaving it out would list every memory.
        for name, value in (("memfs_type", memory_type), ("memfs_tag", tag)):
            if value is not None:
                params[name] = value
        d = yield Request("GET", store_url(store_id) + "/memories", params=params)
        return to_page(d, to_item)

    def count(self, store_id: str) -> Op[int]:
        """How many live memories the store holds."""
        d = yield Request("GET", store_url(store_id) + "/memfs/stats")
        return int(d["memory_count"])


class VersionOps:
    """A store's versions: list, read, redact, restore; a snapshot at a time."""

    def restore(self, store_id: str, version_id: str, *,
                        path: str | bytes | None = None,
                        actor: Actor | None = None) -> Op[Memory]:
        """Bring back a version's content, by the server's Store (memfs extension): a deleted
        memory comes back under its own id."""
        d = yield Request("POST", f"{store_url(store_id)}/memory_versions/{quoted(version_id)}"
                          "/memfs/restore", json=json_body(path=utf8(path, "path")))
        return to_memory(d)

    def snapshot(self, store_id: str, at: str | datetime, *, view: str = "basic"
                 ) -> Op[Snapshot]:
        """``store.versions.snapshot`` (the server sends the basic view; ``full``
        reads each version in effect, one request each)."""
        d = yield Request("GET", store_url(store_id) + "/memfs/snapshot", params={
            "at": at.isoformat() if isinstance(at, datetime) else at})
        snap = Snapshot.from_dict(d)
        if view != "full":
            return snap
        memories = []
        for m in snap.memories:
            content = ""
            if m.memory_version_id not in snap.redacted:
                v = yield Request("GET", f"{store_url(store_id)}/memory_versions/"
                                  f"{quoted(m.memory_version_id)}", params={"view": "full"})
                content = v.get("content") or ""
            memories.append(dataclasses.replace(m, content=content))
        return dataclasses.replace(snap, memories=memories)

    def list(
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
        d = yield Request("GET", store_url(store_id) + "/memory_versions", params=query_params(
            memory_id=memory_id, operation=operation, session_id=session_id,
            api_key_id=api_key_id, service_account_id=service_account_id, user_id=user_id,
            created_at_gte=created_at_gte, created_at_lte=created_at_lte, limit=limit,
            page=page, view=view))
        return to_page(d, to_version)

    def get(
        self, store_id: str, version_id: str, *, view: str = "full"
    ) -> Op[MemoryVersion]:
        d = yield Request("GET", f"{store_url(store_id)}/memory_versions/{quoted(version_id)}",
                          params={"view": view})
        return to_version(d)

    def redact(
        self, store_id: str, version_id: str, *, actor: Actor | None = None
    ) -> Op[MemoryVersion]:
        d = yield Request(
            "POST", f"{store_url(store_id)}/memory_versions/{quoted(version_id)}/redact")
        return to_version(d)

    def prune(self) -> Op[int]:
        """Not available remotely: retention is enforced by the server on its database."""
        raise errors.InvalidRequest(
            "version pruning runs on the server's own database; run it there"
        )
        yield  # a generator, like every operation


class FeedOps:
    """A store's change feed, read from a position (memfs extension)."""

    def last(self, store_id: str) -> Op[int]:
        """The newest change sequence number of the store (0 if none)."""
        d = yield Request("GET", store_url(store_id) + "/memfs/stats")
        return int(d["last_seq"])

    def since(self, store_id: str, seq: int, limit: int = 1000) -> Op[list[Change]]:
        """Changes after ``seq``, oldest first (at most ``limit``).

        :raises FeedGap: the server's feed no longer holds (or never had) that position:
            reload the whole tree, as with a local Store.
        """
        d = yield Request("GET", store_url(store_id) + "/changes",
                          params={"after": seq, "limit": limit})
        if d.get("reset"):
            raise errors.FeedGap(
                f"the server's change feed of {store_id} no longer holds position {seq}: "
                "reload the whole tree")
        return [to_change(x, store_id) for x in d.get("data") or []]


class SearchOps:
    """Recall: a store's or a session's memories that answer a question, by words and
    meaning (memfs extension; docs/search.md)."""

    def in_store(self, store_id: str, query: str, *, limit: int | None = None,
               path_prefix: str | None = None, threshold: float | None = None,
               channels: tuple[str, ...] = ("words", "meaning"),
               memory_type: str | None = None) -> Op[RecallResult]:
        """The store's memories that answer ``query`` best, by words and meaning, decided by
        the server's Store (memfs extension; ``store.search.in_store``)."""
        d = yield Request("GET", store_url(store_id) + "/memfs/search", params=query_params(
            query=query, **_search_params(limit, path_prefix, threshold, channels,
                                          memory_type)))
        return RecallResult.from_dict(d)

    def in_session(self, session_id: str, query: str, *, limit: int | None = None,
                       path_prefix: str | None = None, threshold: float | None = None,
                       channels: tuple[str, ...] = ("words", "meaning"),
                       memory_type: str | None = None) -> Op[RecallResult]:
        """Every store of a session searched at once, hits merged by relevance (memfs
        extension; ``store.search.in_session``)."""
        d = yield Request("GET", f"/v1/sessions/{quoted(session_id)}/memfs/search",
                          params=query_params(query=query, **_search_params(
                              limit, path_prefix, threshold, channels, memory_type)))
        return RecallResult.from_dict(d)

    def status(self, store_id: str) -> Op[dict[str, Any]]:
        """How far the store is indexed by meaning (``store.search.status``:
        store_id, name, memories, indexed, model, indexing, reason)."""
        d = yield Request("GET", store_url(store_id) + "/memfs/search_status")
        return {k: v for k, v in d.items() if k != "type"}


class TypedOps:
    """Typed memories (SPEC §8; memfs extensions): what a store holds, its expired memories
    swept, a type cleared. Each answers the wire object that ``store.typed`` returns, so that
    the CLI shows the same over a Store or a Client."""

    def describe(self, store_id: str) -> Op[dict[str, Any]]:
        """``store.typed.describe``: a ``memfs_store_description``."""
        d = yield Request("GET", store_url(store_id) + "/memfs/describe")
        return dict(d)

    def sweep(self, store_id: str, *, dry_run: bool = False) -> Op[dict[str, Any]]:
        """``store.typed.sweep`` of one store: a ``memfs_expiry_sweep`` (refused to a session
        token: expiry is a person's action)."""
        d = yield Request("POST", store_url(store_id) + "/memfs/expire",
                          json={"dry_run": dry_run})
        return dict(d)

    def clear_type(self, store_id: str, type_: str, *, actor: Actor | None = None,
                   dry_run: bool = False) -> Op[dict[str, Any]]:
        """``store.typed.clear_type``: a ``memfs_type_cleared``, attributed by the server to
        the caller (``actor`` is the server's to decide, as for every write)."""
        d = yield Request("POST", store_url(store_id) + "/memfs/clear_type",
                          json={"memory_type": type_, "dry_run": dry_run})
        return dict(d)


class Ops:
    """Every operation, by part (``OPS.memories.create``), and the two of the server itself.
    :class:`memfs.client.Client` and :class:`memfs.client.AsyncClient` hold a part of their own
    for each part here, with the same names."""

    def __init__(self) -> None:
        self.stores = StoreOps()
        self.memories = MemoryOps()
        self.versions = VersionOps()
        self.feed = FeedOps()
        self.search = SearchOps()
        self.typed = TypedOps()
        self.agents = AgentOps()
        self.sessions = SessionOps()
        self.events = EventOps()
        self.undo = UndoOps()
        self.dreams = DreamOps()
        self.keys = KeyOps()

    def get_limits(self) -> Op[dict[str, Any]]:
        """The server store's limits (the fields of :class:`memfs.store.Limits`)."""
        d = yield Request("GET", "/v1/memfs/limits")
        return dict(d)

    def sync(self) -> Op[None]:
        """Nothing to do: the server commits every write before answering."""
        return None
        yield  # a generator, like every operation


#: The one instance both clients drive (the operations keep no state).
OPS = Ops()

#: The parts of :data:`OPS` (and of each client), in the order of the Store's.
PARTS = ("stores", "memories", "versions", "feed", "search", "typed", "agents", "sessions",
         "events", "undo", "dreams", "keys")

#: The operations both clients expose: ``part.name`` for each operation of a part, and the
#: names of those of :class:`Ops` itself.
OPERATIONS = sorted([f"{part}.{name}" for part in PARTS
                     for name in vars(type(getattr(OPS, part))) if not name.startswith("_")]
                    + ["get_limits", "sync"])

