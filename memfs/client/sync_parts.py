"""The parts of the synchronous :class:`memfs.client.Client`, named as the Store's
(``client.memories.create``, as ``store.memories.create``): each drives the operations of
its part of :data:`memfs.client.ops.OPS` (where each one's docstring is) with the client's
:class:`Drive`, with the same parameters; and :class:`Archive`, the archive transfers, whose
bodies are streamed rather than JSON."""

from __future__ import annotations

import builtins  # builtins.list: in a part with a method named list, list is that method
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import IO, Any

import httpx

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
    ToolEvents,
)
from ..rules import DEFAULT_AROUND_CONTEXT
from .decode import decoded
from .ops import OPS
from .wire import DEFAULT_MOUNT_ROOT, Drive, query_params, store_url


class _Part:
    def __init__(self, drive: Drive) -> None:
        self._drive = drive


class Stores(_Part):
    """The memory stores themselves: create, read, list, rename, archive, delete."""

    def create(
        self, name: str, description: str | None = None, metadata: dict[str, str] | None = None
    ) -> MemoryStore:
        return self._drive(OPS.stores.create(name, description, metadata))

    def get(self, store_id: str) -> MemoryStore:
        return self._drive(OPS.stores.get(store_id))

    def resolve(self, ref: str) -> MemoryStore:
        return self._drive(OPS.stores.resolve(ref))

    def namesakes(self, store_id: str) -> list[MemoryStore]:
        return self._drive(OPS.stores.namesakes(store_id))

    def update(
        self, store_id: str, *, name: Any = None, description: Any = None, metadata: Any = None
    ) -> MemoryStore:
        return self._drive(OPS.stores.update(store_id, name=name, description=description,
                                             metadata=metadata))

    def archive(self, store_id: str) -> MemoryStore:
        return self._drive(OPS.stores.archive(store_id))

    def delete(self, store_id: str) -> None:
        return self._drive(OPS.stores.delete(store_id))

    def list(
        self,
        *,
        include_archived: bool = False,
        created_at_gte: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Page[MemoryStore]:
        return self._drive(OPS.stores.list(include_archived=include_archived,
                                           created_at_gte=created_at_gte,
                                           created_at_lte=created_at_lte, limit=limit, page=page))


class Memories(_Part):
    """A store's memories, by id (the API's own) and by path (the filesystem's, memfs
    extensions: each one server transaction)."""

    def create(
        self, store_id: str, path: str | bytes, content: str | bytes | None, *,
        actor: Actor | None = None,
    ) -> Memory:
        return self._drive(OPS.memories.create(store_id, path, content, actor=actor))

    def get(self, store_id: str, memory_id: str, *, view: str = "full") -> Memory:
        return self._drive(OPS.memories.get(store_id, memory_id, view=view))

    def get_by_path(
        self, store_id: str, path: str, *, view: str = "full"
    ) -> Memory:
        return self._drive(OPS.memories.get_by_path(store_id, path, view=view))

    def resolve(self, store_id: str, ref: str, *, view: str = "full") -> Memory:
        return self._drive(OPS.memories.resolve(store_id, ref, view=view))

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
    ) -> Memory:
        return self._drive(OPS.memories.update(store_id, memory_id, content=content, path=path,
                                               precondition_sha256=precondition_sha256, actor=actor,
                                               replace=replace))

    def delete(
        self, store_id: str, memory_id: str, *, expected_sha256: str | None = None,
        actor: Actor | None = None,
    ) -> None:
        return self._drive(OPS.memories.delete(store_id, memory_id, expected_sha256=expected_sha256,
                                               actor=actor))

    def write_path(
        self, store_id: str, path: str | bytes, content: str | bytes, *,
        actor: Actor | None = None, events: ToolEvents = None,
    ) -> Memory:
        return self._drive(OPS.memories.write_path(store_id, path, content, actor=actor,
                                                   events=events))

    def delete_path(
        self, store_id: str, path: str, *, actor: Actor | None = None,
        events: ToolEvents = None,
    ) -> Memory:
        return self._drive(OPS.memories.delete_path(store_id, path, actor=actor, events=events))

    def rename_path(
        self, store_id: str, old: str | bytes, new: str | bytes, *,
        actor: Actor | None = None, replace: bool = True,
        events: ToolEvents = None,
    ) -> Memory:
        return self._drive(OPS.memories.rename_path(store_id, old, new, actor=actor,
                                                    replace=replace, events=events))

    def rename_prefix(
        self, store_id: str, old_prefix: str, new_prefix: str, *, actor: Actor | None = None,
        events: ToolEvents = None,
    ) -> list[Memory]:
        return self._drive(OPS.memories.rename_prefix(store_id, old_prefix, new_prefix, actor=actor,
                                                      events=events))

    def delete_prefix(
        self, store_id: str, prefix: str, *, actor: Actor | None = None,
        events: ToolEvents = None,
    ) -> list[Memory]:
        return self._drive(OPS.memories.delete_prefix(store_id, prefix, actor=actor,
                                                      events=events))

    def tree(self, store_id: str) -> list[Memory]:
        return self._drive(OPS.memories.tree(store_id))

    def check_can_create(self, store_id: str) -> None:
        return self._drive(OPS.memories.check_can_create(store_id))

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
    ) -> Page[Memory | MemoryPrefix]:
        return self._drive(OPS.memories.list(store_id, path_prefix=path_prefix, depth=depth,
                                             limit=limit, page=page, view=view,
                                             memory_type=memory_type, tag=tag))

    def count(self, store_id: str) -> int:
        return self._drive(OPS.memories.count(store_id))


class Versions(_Part):
    """A store's versions: list, read, redact, restore; a snapshot at a time."""

    def restore(self, store_id: str, version_id: str, *,
                        path: str | bytes | None = None,
                        actor: Actor | None = None) -> Memory:
        return self._drive(OPS.versions.restore(store_id, version_id, path=path, actor=actor))

    def snapshot(self, store_id: str, at: str | datetime, *, view: str = "basic"
                 ) -> Snapshot:
        return self._drive(OPS.versions.snapshot(store_id, at, view=view))

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
    ) -> Page[MemoryVersion]:
        return self._drive(OPS.versions.list(store_id, memory_id=memory_id, operation=operation,
                                             session_id=session_id, api_key_id=api_key_id,
                                             service_account_id=service_account_id, user_id=user_id,
                                             created_at_gte=created_at_gte,
                                             created_at_lte=created_at_lte, limit=limit, page=page,
                                             view=view))

    def get(
        self, store_id: str, version_id: str, *, view: str = "full"
    ) -> MemoryVersion:
        return self._drive(OPS.versions.get(store_id, version_id, view=view))

    def redact(
        self, store_id: str, version_id: str, *, actor: Actor | None = None
    ) -> MemoryVersion:
        return self._drive(OPS.versions.redact(store_id, version_id, actor=actor))

    def prune(self) -> int:
        return self._drive(OPS.versions.prune())


class Feed(_Part):
    """A store's change feed, read from a position (memfs extension)."""

    def last(self, store_id: str) -> int:
        return self._drive(OPS.feed.last(store_id))

    def since(self, store_id: str, seq: int, limit: int = 1000) -> list[Change]:
        return self._drive(OPS.feed.since(store_id, seq, limit))


class Search(_Part):
    """Recall: a store's or a session's memories that answer a question, by words and
    meaning (memfs extension; docs/search.md)."""

    def in_store(self, store_id: str, query: str, *, limit: int | None = None,
               path_prefix: str | None = None, threshold: float | None = None,
               channels: tuple[str, ...] = ("words", "meaning"),
               memory_type: str | None = None) -> RecallResult:
        return self._drive(OPS.search.in_store(store_id, query, limit=limit,
                                               path_prefix=path_prefix, threshold=threshold,
                                               channels=channels, memory_type=memory_type))

    def in_session(self, session_id: str, query: str, *, limit: int | None = None,
                       path_prefix: str | None = None, threshold: float | None = None,
                       channels: tuple[str, ...] = ("words", "meaning"),
                       memory_type: str | None = None) -> RecallResult:
        return self._drive(OPS.search.in_session(session_id, query, limit=limit,
                                                 path_prefix=path_prefix, threshold=threshold,
                                                 channels=channels, memory_type=memory_type))

    def status(self, store_id: str) -> dict[str, Any]:
        return self._drive(OPS.search.status(store_id))


class Typed(_Part):
    """Typed memories: what a store holds, its expired memories swept, a type cleared."""

    def describe(self, store_id: str) -> dict[str, Any]:
        return self._drive(OPS.typed.describe(store_id))

    def sweep(self, store_id: str, *, dry_run: bool = False) -> dict[str, Any]:
        return self._drive(OPS.typed.sweep(store_id, dry_run=dry_run))

    def clear_type(self, store_id: str, type_: str, *, actor: Actor | None = None,
                   dry_run: bool = False) -> dict[str, Any]:
        return self._drive(OPS.typed.clear_type(store_id, type_, actor=actor,
                                                dry_run=dry_run))


class Agents(_Part):
    """The agents and environments a session names."""

    def create(self, /, *, name: str, model: Any, **fields: Any) -> dict[str, Any]:
        return self._drive(OPS.agents.create(name=name, model=model, **fields))

    def get(self, agent_id: str) -> dict[str, Any]:
        return self._drive(OPS.agents.get(agent_id))

    def create_environment(self, /, *, name: str, **fields: Any) -> dict[str, Any]:
        return self._drive(OPS.agents.create_environment(name=name, **fields))

    def get_environment(self, environment_id: str) -> dict[str, Any]:
        return self._drive(OPS.agents.get_environment(environment_id))


class Sessions(_Part):
    """Sessions, their resources and their tokens."""

    def create(
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
        return self._drive(OPS.sessions.create(resources, root=root, agent=agent,
                                               environment_id=environment_id, metadata=metadata,
                                               title=title, status=status, launcher=launcher))

    def set_status(self, session_id: str, status: str) -> Session:
        return self._drive(OPS.sessions.set_status(session_id, status))

    def create_token(self, session_id: str, *,
                             ttl_seconds: float | None = None) -> SessionToken:
        return self._drive(OPS.sessions.create_token(session_id, ttl_seconds=ttl_seconds))

    def get(self, session_id: str) -> Session:
        return self._drive(OPS.sessions.get(session_id))

    def list(
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
        return self._drive(OPS.sessions.list(memory_store_id=memory_store_id, statuses=statuses,
                                             include_archived=include_archived, order=order,
                                             created_at_gt=created_at_gt,
                                             created_at_gte=created_at_gte,
                                             created_at_lt=created_at_lt,
                                             created_at_lte=created_at_lte, limit=limit, page=page,
                                             metadata=metadata))

    def update(
        self, session_id: str, *, metadata: Any = None, title: Any = None
    ) -> Session:
        return self._drive(OPS.sessions.update(session_id, metadata=metadata, title=title))

    def archive(self, session_id: str) -> Session:
        return self._drive(OPS.sessions.archive(session_id))

    def delete(self, session_id: str) -> None:
        return self._drive(OPS.sessions.delete(session_id))

    def get_resource(self, session_id: str, resource_id: str) -> SessionResource:
        return self._drive(OPS.sessions.get_resource(session_id, resource_id))

    def list_resources(
        self, session_id: str, *, limit: int | None = None, page: str | None = None
    ) -> Page[SessionResource]:
        return self._drive(OPS.sessions.list_resources(session_id, limit=limit, page=page))


class Events(_Part):
    """A session's events (and a mount's tool events)."""

    def list(
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
        return self._drive(OPS.events.list(session_id, types=types, order=order,
                                           created_at_gt=created_at_gt,
                                           created_at_gte=created_at_gte,
                                           created_at_lt=created_at_lt,
                                           created_at_lte=created_at_lte, limit=limit, page=page,
                                           after_seq=after_seq))

    def around(
        self, session_id: str, event_id: str, *, context: int = DEFAULT_AROUND_CONTEXT,
        types: Sequence[str] | None = None,
    ) -> builtins.list[Event]:
        return self._drive(OPS.events.around(session_id, event_id, context=context,
                                              types=types))

    def add(
        self, session_id: str | None, events: Sequence[dict[str, Any]], *,
        store_id: str | None = None,
    ) -> builtins.list[Event]:
        return self._drive(OPS.events.add(session_id, events, store_id=store_id))

    send = add


class Undo(_Part):
    """Undo a session's writes (memfs extension; README "Undo a session")."""

    def revert(self, target: str, *, actor: Actor | None = None, dry_run: bool = False,
               force: bool = False) -> dict[str, Any]:
        return self._drive(OPS.undo.revert(target, actor=actor, dry_run=dry_run, force=force))


class Dreams(_Part):
    """Dreams, run by the server (API.md §5)."""

    def create(self, inputs: Any, model: Any, *, instructions: Any = None,
                     output_behavior: Any = None, runner: Any = None) -> Dream:
        return self._drive(OPS.dreams.create(inputs, model, instructions=instructions,
                                             output_behavior=output_behavior, runner=runner))

    def get(self, dream_id: str) -> Dream:
        return self._drive(OPS.dreams.get(dream_id))

    def list(
        self,
        *,
        statuses: Sequence[str] | None = None,
        include_archived: bool = False,
        created_at_gt: str | datetime | None = None,
        created_at_lt: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Page[Dream]:
        return self._drive(OPS.dreams.list(statuses=statuses, include_archived=include_archived,
                                           created_at_gt=created_at_gt, created_at_lt=created_at_lt,
                                           limit=limit, page=page))

    def cancel(self, dream_id: str) -> Dream:
        return self._drive(OPS.dreams.cancel(dream_id))

    def archive(self, dream_id: str) -> Dream:
        return self._drive(OPS.dreams.archive(dream_id))


class Keys(_Part):
    """The API keys of an admin key's workspace (issue 22; memfs extension)."""

    def create(
        self,
        name: str,
        *,
        workspace: str | None = None,
        role: str = "read_write",
        store_ids: Sequence[str] | None = None,
        expires_in: Any = None,
        created_by: Actor | None = None,
    ) -> ApiKey:
        return self._drive(OPS.keys.create(name, workspace=workspace, role=role,
                                           store_ids=store_ids, expires_in=expires_in,
                                           created_by=created_by))

    def list(self, *, workspace: str | None = None) -> list[ApiKey]:
        return self._drive(OPS.keys.list(workspace=workspace))

    def get(self, key_id: str, *, workspace: str | None = None) -> ApiKey:
        return self._drive(OPS.keys.get(key_id, workspace=workspace))

    def revoke(self, key_id: str, *, workspace: str | None = None) -> ApiKey:
        return self._drive(OPS.keys.revoke(key_id, workspace=workspace))


class Archive:
    """A store's archive, exported and imported (memfs extensions; bodies are archives, not
    JSON), over the client's connection."""

    def __init__(self, http: httpx.Client, base_url: str) -> None:
        self._http = http
        self.base_url = base_url

    def export_archive(self, store_id: str, *, history: bool) -> Iterator[bytes]:
        """The store's archive (:func:`memfs.transfer.export_archive`), streamed."""
        try:
            with self._http.stream("GET", f"{store_url(store_id)}/memfs/export",
                                   params={"history": "true" if history else "false"},
                                   timeout=httpx.Timeout(self._http.timeout.connect,
                                                         read=600.0)) as response:
                if response.status_code != 200:
                    response.read()
                    decoded(response)
                yield from response.iter_bytes()
        except httpx.TransportError as e:
            raise errors.MemfsError(f"cannot reach memfs server {self.base_url}: {e}") from e

    def import_upload(self, raw: IO[bytes], *, name: str | None = None,
                      into: str | None = None, partial: bool = False) -> dict[str, Any]:
        """Upload an archive or a zip (:func:`memfs.transfer.import_upload`); the summary."""
        params = query_params(name=name, into=into, partial="true" if partial else None)

        def body() -> Iterator[bytes]:
            while chunk := raw.read(65536):
                yield chunk

        try:
            response = self._http.post("/v1/memfs/import", params=params, content=body(),
                                       timeout=httpx.Timeout(self._http.timeout.connect,
                                                             read=600.0, write=600.0))
        except httpx.TransportError as e:
            raise errors.MemfsError(f"cannot reach memfs server {self.base_url}: {e}") from e
        result: dict[str, Any] = decoded(response)
        return result
