"""The parts of the asynchronous :class:`memfs.client.AsyncClient`: the same as
:class:`memfs.client.Client`'s (:mod:`memfs.client.sync_parts`), awaited, each driving its part
of :data:`memfs.client.ops.OPS` with the client's :class:`AsyncDrive`. (No archive part: the
archive transfers are the sync client's.)"""

from __future__ import annotations

import builtins  # builtins.list: in a part with a method named list, list is that method
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

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
    ToolEvents,
)
from ..rules import DEFAULT_AROUND_CONTEXT
from .ops import OPS
from .wire import DEFAULT_MOUNT_ROOT, AsyncDrive


class _Part:
    def __init__(self, drive: AsyncDrive) -> None:
        self._drive = drive


class AsyncStores(_Part):
    """The memory stores themselves: create, read, list, rename, archive, delete."""

    async def create(
        self, name: str, description: str | None = None, metadata: dict[str, str] | None = None
    ) -> MemoryStore:
        return await self._drive(OPS.stores.create(name, description, metadata))

    async def get(self, store_id: str) -> MemoryStore:
        return await self._drive(OPS.stores.get(store_id))

    async def resolve(self, ref: str) -> MemoryStore:
        return await self._drive(OPS.stores.resolve(ref))

    async def namesakes(self, store_id: str) -> list[MemoryStore]:
        return await self._drive(OPS.stores.namesakes(store_id))

    async def update(
        self, store_id: str, *, name: Any = None, description: Any = None, metadata: Any = None
    ) -> MemoryStore:
        return await self._drive(OPS.stores.update(store_id, name=name, description=description,
                                                   metadata=metadata))

    async def archive(self, store_id: str) -> MemoryStore:
        return await self._drive(OPS.stores.archive(store_id))

    async def delete(self, store_id: str) -> None:
        return await self._drive(OPS.stores.delete(store_id))

    async def list(
        self,
        *,
        include_archived: bool = False,
        created_at_gte: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Page[MemoryStore]:
        return await self._drive(OPS.stores.list(include_archived=include_archived,
                                                 created_at_gte=created_at_gte,
                                                 created_at_lte=created_at_lte, limit=limit,
                                                 page=page))


class AsyncMemories(_Part):
    """A store's memories, by id (the API's own) and by path (the filesystem's, memfs
    extensions: each one server transaction)."""

    async def create(
        self, store_id: str, path: str | bytes, content: str | bytes | None, *,
        actor: Actor | None = None,
    ) -> Memory:
        return await self._drive(OPS.memories.create(store_id, path, content, actor=actor))

    async def get(self, store_id: str, memory_id: str, *, view: str = "full") -> Memory:
        return await self._drive(OPS.memories.get(store_id, memory_id, view=view))

    async def get_by_path(
        self, store_id: str, path: str, *, view: str = "full"
    ) -> Memory:
        return await self._drive(OPS.memories.get_by_path(store_id, path, view=view))

    async def resolve(self, store_id: str, ref: str, *, view: str = "full") -> Memory:
        return await self._drive(OPS.memories.resolve(store_id, ref, view=view))

    async def update(
        self,
        store_id: str,
        memory_id: str,
        *,
        content: str | bytes | None = None,
        path: str | bytes | None = None,
        precondition_sha256: str | None = None,
        actor: Actor | None = None,
        replace: bool = False,
    ) -> Memory:
        return await self._drive(OPS.memories.update(store_id, memory_id, content=content,
                                                     path=path,
                                                     precondition_sha256=precondition_sha256,
                                                     actor=actor, replace=replace))

    async def delete(
        self, store_id: str, memory_id: str, *, expected_sha256: str | None = None,
        actor: Actor | None = None,
    ) -> None:
        return await self._drive(OPS.memories.delete(store_id, memory_id,
                                                     expected_sha256=expected_sha256, actor=actor))

    async def write_path(
        self, store_id: str, path: str | bytes, content: str | bytes, *,
        actor: Actor | None = None, events: ToolEvents = None,
    ) -> Memory:
        return await self._drive(OPS.memories.write_path(store_id, path, content, actor=actor,
                                                         events=events))

    async def delete_path(
        self, store_id: str, path: str, *, actor: Actor | None = None,
        events: ToolEvents = None,
    ) -> Memory:
        return await self._drive(OPS.memories.delete_path(store_id, path, actor=actor,
                                                          events=events))

    async def rename_path(
        self, store_id: str, old: str | bytes, new: str | bytes, *,
        actor: Actor | None = None, replace: bool = True,
        events: ToolEvents = None,
    ) -> Memory:
        return await self._drive(OPS.memories.rename_path(store_id, old, new, actor=actor,
                                                          replace=replace, events=events))

    async def rename_prefix(
        self, store_id: str, old_prefix: str, new_prefix: str, *, actor: Actor | None = None,
        events: ToolEvents = None,
    ) -> list[Memory]:
        return await self._drive(OPS.memories.rename_prefix(store_id, old_prefix, new_prefix,
                                                            actor=actor, events=events))

    async def delete_prefix(
        self, store_id: str, prefix: str, *, actor: Actor | None = None,
        events: ToolEvents = None,
    ) -> list[Memory]:
        return await self._drive(OPS.memories.delete_prefix(store_id, prefix, actor=actor,
                                                            events=events))

    async def tree(self, store_id: str) -> list[Memory]:
        return await self._drive(OPS.memories.tree(store_id))

    async def check_can_create(self, store_id: str) -> None:
        return await self._drive(OPS.memories.check_can_create(store_id))

    async def list(
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
    ) -> Page[Memory | MemoryPrefix]:
        return await self._drive(OPS.memories.list(store_id, path_prefix=path_prefix, depth=depth,
                                                   limit=limit, page=page, view=view,
                                                   memory_type=memory_type, tag=tag))

    async def count(self, store_id: str) -> int:
        return await self._drive(OPS.memories.count(store_id))


class AsyncVersions(_Part):
    """A store's versions: list, read, redact, restore; a snapshot at a time."""

    async def restore(self, store_id: str, version_id: str, *,
                              path: str | bytes | None = None,
                              actor: Actor | None = None) -> Memory:
        return await self._drive(OPS.versions.restore(store_id, version_id, path=path, actor=actor))

    async def snapshot(self, store_id: str, at: str | datetime, *, view: str = "basic"
                       ) -> Snapshot:
        return await self._drive(OPS.versions.snapshot(store_id, at, view=view))

    async def list(
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
    ) -> Page[MemoryVersion]:
        return await self._drive(OPS.versions.list(store_id, memory_id=memory_id,
                                                   operation=operation, session_id=session_id,
                                                   api_key_id=api_key_id,
                                                   service_account_id=service_account_id,
                                                   user_id=user_id, created_at_gte=created_at_gte,
                                                   created_at_lte=created_at_lte, limit=limit,
                                                   page=page, view=view))

    async def get(
        self, store_id: str, version_id: str, *, view: str = "full"
    ) -> MemoryVersion:
        return await self._drive(OPS.versions.get(store_id, version_id, view=view))

    async def redact(
        self, store_id: str, version_id: str, *, actor: Actor | None = None
    ) -> MemoryVersion:
        return await self._drive(OPS.versions.redact(store_id, version_id, actor=actor))

    async def prune(self) -> int:
        return await self._drive(OPS.versions.prune())


class AsyncFeed(_Part):
    """A store's change feed, read from a position (memfs extension)."""

    async def last(self, store_id: str) -> int:
        return await self._drive(OPS.feed.last(store_id))

    async def since(self, store_id: str, seq: int, limit: int = 1000) -> list[Change]:
        return await self._drive(OPS.feed.since(store_id, seq, limit))


class AsyncSearch(_Part):
    """Recall: a store's or a session's memories that answer a question, by words and
    meaning (memfs extension; docs/search.md)."""

    async def in_store(self, store_id: str, query: str, *, limit: int | None = None,
                     path_prefix: str | None = None, threshold: float | None = None,
                     channels: tuple[str, ...] = ("words", "meaning"),
                     memory_type: str | None = None) -> RecallResult:
        return await self._drive(OPS.search.in_store(store_id, query, limit=limit,
                                                     path_prefix=path_prefix, threshold=threshold,
                                                     channels=channels, memory_type=memory_type))

    async def in_session(self, session_id: str, query: str, *, limit: int | None = None,
                             path_prefix: str | None = None, threshold: float | None = None,
                             channels: tuple[str, ...] = ("words", "meaning"),
                             memory_type: str | None = None) -> RecallResult:
        return await self._drive(OPS.search.in_session(session_id, query, limit=limit,
                                                       path_prefix=path_prefix, threshold=threshold,
                                                       channels=channels, memory_type=memory_type))

    async def status(self, store_id: str) -> dict[str, Any]:
        return await self._drive(OPS.search.status(store_id))


class AsyncTyped(_Part):
    """Typed memories: what a store holds, its expired memories swept, a type cleared."""

    async def describe(self, store_id: str) -> dict[str, Any]:
        return await self._drive(OPS.typed.describe(store_id))

    async def sweep(self, store_id: str, *, dry_run: bool = False) -> dict[str, Any]:
        return await self._drive(OPS.typed.sweep(store_id, dry_run=dry_run))

    async def clear_type(self, store_id: str, type_: str, *, actor: Actor | None = None,
                         dry_run: bool = False) -> dict[str, Any]:
        return await self._drive(OPS.typed.clear_type(store_id, type_, actor=actor,
                                                      dry_run=dry_run))


class AsyncAgents(_Part):
    """The agents and environments a session names."""

    async def create(self, /, *, name: str, model: Any, **fields: Any) -> dict[str, Any]:
        return await self._drive(OPS.agents.create(name=name, model=model, **fields))

    async def get(self, agent_id: str) -> dict[str, Any]:
        return await self._drive(OPS.agents.get(agent_id))

    async def create_environment(self, /, *, name: str, **fields: Any) -> dict[str, Any]:
        return await self._drive(OPS.agents.create_environment(name=name, **fields))

    async def get_environment(self, environment_id: str) -> dict[str, Any]:
        return await self._drive(OPS.agents.get_environment(environment_id))


class AsyncSessions(_Part):
    """Sessions, their resources and their tokens."""

    async def create(
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
    ) -> Session:
        return await self._drive(OPS.sessions.create(resources, root=root, agent=agent,
                                                     environment_id=environment_id,
                                                     metadata=metadata, title=title, status=status,
                                                     launcher=launcher))

    async def set_status(self, session_id: str, status: str) -> Session:
        return await self._drive(OPS.sessions.set_status(session_id, status))

    async def create_token(self, session_id: str, *,
                                   ttl_seconds: float | None = None) -> SessionToken:
        return await self._drive(OPS.sessions.create_token(session_id, ttl_seconds=ttl_seconds))

    async def get(self, session_id: str) -> Session:
        return await self._drive(OPS.sessions.get(session_id))

    async def list(
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
        metadata: Mapping[str, str] | None = None,
    ) -> Page[Session]:
        return await self._drive(OPS.sessions.list(memory_store_id=memory_store_id,
                                                   statuses=statuses,
                                                   include_archived=include_archived, order=order,
                                                   created_at_gt=created_at_gt,
                                                   created_at_gte=created_at_gte,
                                                   created_at_lt=created_at_lt,
                                                   created_at_lte=created_at_lte, limit=limit,
                                                   page=page, metadata=metadata))

    async def update(
        self, session_id: str, *, metadata: Any = None, title: Any = None
    ) -> Session:
        return await self._drive(OPS.sessions.update(session_id, metadata=metadata, title=title))

    async def archive(self, session_id: str) -> Session:
        return await self._drive(OPS.sessions.archive(session_id))

    async def delete(self, session_id: str) -> None:
        return await self._drive(OPS.sessions.delete(session_id))

    async def get_resource(self, session_id: str, resource_id: str) -> SessionResource:
        return await self._drive(OPS.sessions.get_resource(session_id, resource_id))

    async def list_resources(
        self, session_id: str, *, limit: int | None = None, page: str | None = None
    ) -> Page[SessionResource]:
        return await self._drive(OPS.sessions.list_resources(session_id, limit=limit, page=page))


class AsyncEvents(_Part):
    """A session's events (and a mount's tool events)."""

    async def list(
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
    ) -> Page[Event]:
        return await self._drive(OPS.events.list(session_id, types=types, order=order,
                                                 created_at_gt=created_at_gt,
                                                 created_at_gte=created_at_gte,
                                                 created_at_lt=created_at_lt,
                                                 created_at_lte=created_at_lte, limit=limit,
                                                 page=page, after_seq=after_seq))

    async def around(
        self, session_id: str, event_id: str, *, context: int = DEFAULT_AROUND_CONTEXT,
        types: Sequence[str] | None = None,
    ) -> builtins.list[Event]:
        return await self._drive(OPS.events.around(session_id, event_id, context=context,
                                              types=types))

    async def add(
        self, session_id: str | None, events: Sequence[dict[str, Any]], *,
        store_id: str | None = None,
    ) -> builtins.list[Event]:
        return await self._drive(OPS.events.add(session_id, events, store_id=store_id))

    send = add


class AsyncUndo(_Part):
    """Undo a session's writes (memfs extension; README "Undo a session")."""

    async def revert(self, target: str, *, actor: Actor | None = None, dry_run: bool = False,
                     force: bool = False) -> dict[str, Any]:
        return await self._drive(OPS.undo.revert(target, actor=actor, dry_run=dry_run, force=force))


class AsyncDreams(_Part):
    """Dreams, run by the server (API.md §5)."""

    async def create(self, inputs: Any, model: Any, *, instructions: Any = None,
                           output_behavior: Any = None, runner: Any = None) -> Dream:
        return await self._drive(OPS.dreams.create(inputs, model, instructions=instructions,
                                                   output_behavior=output_behavior, runner=runner))

    async def get(self, dream_id: str) -> Dream:
        return await self._drive(OPS.dreams.get(dream_id))

    async def list(
        self,
        *,
        statuses: Sequence[str] | None = None,
        include_archived: bool = False,
        created_at_gt: str | datetime | None = None,
        created_at_lt: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Page[Dream]:
        return await self._drive(OPS.dreams.list(statuses=statuses,
                                                 include_archived=include_archived,
                                                 created_at_gt=created_at_gt,
                                                 created_at_lt=created_at_lt, limit=limit,
                                                 page=page))

    async def cancel(self, dream_id: str) -> Dream:
        return await self._drive(OPS.dreams.cancel(dream_id))

    async def archive(self, dream_id: str) -> Dream:
        return await self._drive(OPS.dreams.archive(dream_id))


class AsyncKeys(_Part):
    """The API keys of an admin key's workspace (issue 22; memfs extension)."""

    async def create(
        self,
        name: str,
        *,
        workspace: str | None = None,
        role: str = "read_write",
        store_ids: Sequence[str] | None = None,
        expires_in: Any = None,
        created_by: Actor | None = None,
    ) -> ApiKey:
        return await self._drive(OPS.keys.create(name, workspace=workspace, role=role,
                                                 store_ids=store_ids, expires_in=expires_in,
                                                 created_by=created_by))

    async def list(self, *, workspace: str | None = None) -> list[ApiKey]:
        return await self._drive(OPS.keys.list(workspace=workspace))

    async def get(self, key_id: str, *, workspace: str | None = None) -> ApiKey:
        return await self._drive(OPS.keys.get(key_id, workspace=workspace))

    async def revoke(self, key_id: str, *, workspace: str | None = None) -> ApiKey:
        return await self._drive(OPS.keys.revoke(key_id, workspace=workspace))
