"""The asynchronous :class:`AsyncClient`: each operation of :mod:`memfs.client.ops` driven
over an ``httpx.AsyncClient`` (the same methods as :class:`memfs.client.Client`, awaited),
and the store's change feed followed as it is pushed (:mod:`memfs.client.feed`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from datetime import datetime
from typing import Any, TypeVar

import anyio
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
)
from .decode import _decode
from .feed import FeedEvent, feed_events
from .ops import OPS
from .wire import (
    DEFAULT_MOUNT_ROOT,
    DEFAULT_TIMEOUT,
    STREAM_READ_TIMEOUT,
    Op,
    Request,
    _headers,
    _ms,
    rate_wait,
    unix_socket,
)

T = TypeVar("T")


class AsyncClient:
    """The asynchronous twin of :class:`Client` (same methods, awaited), and
    :meth:`stream_changes`, a store's change feed as the server pushes it."""

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
                async with aclosing(feed_events(response.aiter_lines(), store_id)) as events:
                    async for event in events:
                        yield event
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
        attempt = 0
        while True:
            try:
                response = await self._http.request(req.method, req.path, params=req.params,
                                                    json=req.json)
            except httpx.TransportError as e:
                raise errors.MemfsError(f"cannot reach memfs server {self.base_url}: {e}") from e
            attempt += 1
            wait = rate_wait(response, attempt)
            if wait is None:
                return _decode(response)
            await anyio.sleep(wait)

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

    # -- memory stores ---------------------------------------------------------------------

    async def create_store(
        self, name: str, description: str | None = None, metadata: dict[str, str] | None = None
    ) -> MemoryStore:
        return await self._drive(OPS.create_store(name, description, metadata))

    async def get_store(self, store_id: str) -> MemoryStore:
        return await self._drive(OPS.get_store(store_id))

    async def resolve_store(self, ref: str) -> MemoryStore:
        return await self._drive(OPS.resolve_store(ref))

    async def namesakes(self, store_id: str) -> list[MemoryStore]:
        return await self._drive(OPS.namesakes(store_id))

    async def search(self, store_id: str, query: str, *, limit: int | None = None,
                     path_prefix: str | None = None, threshold: float | None = None,
                     channels: tuple[str, ...] = ("words", "meaning")) -> RecallResult:
        return await self._drive(OPS.search(store_id, query, limit=limit, path_prefix=path_prefix,
                                            threshold=threshold, channels=channels))

    async def search_session(self, session_id: str, query: str, *, limit: int | None = None,
                             path_prefix: str | None = None, threshold: float | None = None,
                             channels: tuple[str, ...] = ("words", "meaning"),
                             ) -> RecallResult:
        return await self._drive(OPS.search_session(session_id, query, limit=limit,
                                                    path_prefix=path_prefix,
                                                    threshold=threshold, channels=channels))

    async def search_status(self, store_id: str) -> dict[str, Any]:
        return await self._drive(OPS.search_status(store_id))

    async def update_store(
        self, store_id: str, *, name: Any = None, description: Any = None, metadata: Any = None
    ) -> MemoryStore:
        return await self._drive(OPS.update_store(store_id, name=name, description=description,
                                                  metadata=metadata))

    async def archive_store(self, store_id: str) -> MemoryStore:
        return await self._drive(OPS.archive_store(store_id))

    async def delete_store(self, store_id: str) -> None:
        return await self._drive(OPS.delete_store(store_id))

    async def list_stores(
        self,
        *,
        include_archived: bool = False,
        created_at_gte: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Page[MemoryStore]:
        return await self._drive(OPS.list_stores(include_archived=include_archived,
                                                 created_at_gte=created_at_gte,
                                                 created_at_lte=created_at_lte, limit=limit,
                                                 page=page))

    # -- memories --------------------------------------------------------------------------

    async def create_memory(
        self, store_id: str, path: str | bytes, content: str | bytes | None, *,
        actor: Actor | None = None,
    ) -> Memory:
        return await self._drive(OPS.create_memory(store_id, path, content, actor=actor))

    async def get_memory(self, store_id: str, memory_id: str, *, view: str = "full") -> Memory:
        return await self._drive(OPS.get_memory(store_id, memory_id, view=view))

    async def get_memory_by_path(
        self, store_id: str, path: str, *, view: str = "full"
    ) -> Memory:
        return await self._drive(OPS.get_memory_by_path(store_id, path, view=view))

    async def resolve_memory(self, store_id: str, ref: str, *, view: str = "full") -> Memory:
        return await self._drive(OPS.resolve_memory(store_id, ref, view=view))

    async def update_memory(
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
        return await self._drive(OPS.update_memory(store_id, memory_id, content=content, path=path,
                                                   precondition_sha256=precondition_sha256,
                                                   actor=actor, replace=replace))

    async def delete_memory(
        self, store_id: str, memory_id: str, *, expected_sha256: str | None = None,
        actor: Actor | None = None,
    ) -> None:
        return await self._drive(OPS.delete_memory(store_id, memory_id,
                                                   expected_sha256=expected_sha256, actor=actor))

    async def write_path(
        self, store_id: str, path: str | bytes, content: str | bytes, *,
        actor: Actor | None = None, events: list[dict[str, Any]] | None = None,
    ) -> Memory:
        return await self._drive(OPS.write_path(store_id, path, content, actor=actor,
                                                events=events))

    async def delete_path(
        self, store_id: str, path: str, *, actor: Actor | None = None,
        events: list[dict[str, Any]] | None = None,
    ) -> Memory:
        return await self._drive(OPS.delete_path(store_id, path, actor=actor, events=events))

    async def rename_path(
        self, store_id: str, old: str | bytes, new: str | bytes, *,
        actor: Actor | None = None, replace: bool = True,
        events: list[dict[str, Any]] | None = None,
    ) -> Memory:
        return await self._drive(OPS.rename_path(store_id, old, new, actor=actor, replace=replace,
                                                 events=events))

    async def rename_prefix(
        self, store_id: str, old_prefix: str, new_prefix: str, *, actor: Actor | None = None,
        events: list[dict[str, Any]] | None = None,
    ) -> list[Memory]:
        return await self._drive(OPS.rename_prefix(store_id, old_prefix, new_prefix, actor=actor,
                                                   events=events))

    async def restore_version(self, store_id: str, version_id: str, *,
                              path: str | bytes | None = None,
                              actor: Actor | None = None) -> Memory:
        return await self._drive(OPS.restore_version(store_id, version_id, path=path, actor=actor))

    async def tree(self, store_id: str) -> list[Memory]:
        return await self._drive(OPS.tree(store_id))

    async def snapshot(self, store_id: str, at: str | datetime, *, view: str = "basic"
                       ) -> Snapshot:
        return await self._drive(OPS.snapshot(store_id, at, view=view))

    async def check_can_create(self, store_id: str) -> None:
        return await self._drive(OPS.check_can_create(store_id))

    async def get_limits(self) -> dict[str, Any]:
        return await self._drive(OPS.get_limits())

    async def sync(self) -> None:
        return await self._drive(OPS.sync())

    # -- change feed -----------------------------------------------------------------------

    async def last_change(self, store_id: str) -> int:
        return await self._drive(OPS.last_change(store_id))

    async def changes_since(self, store_id: str, seq: int, limit: int = 1000) -> list[Change]:
        return await self._drive(OPS.changes_since(store_id, seq, limit))

    async def list_memories(
        self,
        store_id: str,
        *,
        path_prefix: str | None = None,
        depth: int = 0,
        limit: int = 20,
        page: str | None = None,
        view: str = "basic",
    ) -> Page[Memory | MemoryPrefix]:
        return await self._drive(OPS.list_memories(store_id, path_prefix=path_prefix, depth=depth,
                                                   limit=limit, page=page, view=view))

    async def count_memories(self, store_id: str) -> int:
        return await self._drive(OPS.count_memories(store_id))

    # -- versions --------------------------------------------------------------------------

    async def list_versions(
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
        return await self._drive(OPS.list_versions(store_id, memory_id=memory_id,
                                                   operation=operation, session_id=session_id,
                                                   api_key_id=api_key_id,
                                                   service_account_id=service_account_id,
                                                   user_id=user_id, created_at_gte=created_at_gte,
                                                   created_at_lte=created_at_lte, limit=limit,
                                                   page=page, view=view))

    async def get_version(
        self, store_id: str, version_id: str, *, view: str = "full"
    ) -> MemoryVersion:
        return await self._drive(OPS.get_version(store_id, version_id, view=view))

    async def redact_version(
        self, store_id: str, version_id: str, *, actor: Actor | None = None
    ) -> MemoryVersion:
        return await self._drive(OPS.redact_version(store_id, version_id, actor=actor))

    async def prune_versions(self) -> int:
        return await self._drive(OPS.prune_versions())

    # -- agents and environments -----------------------------------------------------------

    async def create_agent(self, /, *, name: str, model: Any, **fields: Any) -> dict[str, Any]:
        return await self._drive(OPS.create_agent(name=name, model=model, **fields))

    async def get_agent(self, agent_id: str) -> dict[str, Any]:
        return await self._drive(OPS.get_agent(agent_id))

    async def create_environment(self, /, *, name: str, **fields: Any) -> dict[str, Any]:
        return await self._drive(OPS.create_environment(name=name, **fields))

    async def get_environment(self, environment_id: str) -> dict[str, Any]:
        return await self._drive(OPS.get_environment(environment_id))

    # -- sessions and events ---------------------------------------------------------------

    async def create_session(
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
        return await self._drive(OPS.create_session(resources, root=root, agent=agent,
                                                    environment_id=environment_id,
                                                    metadata=metadata, title=title, status=status,
                                                    launcher=launcher))

    async def set_session_status(self, session_id: str, status: str) -> Session:
        return await self._drive(OPS.set_session_status(session_id, status))

    async def create_session_token(self, session_id: str, *,
                                   ttl_seconds: float | None = None) -> SessionToken:
        return await self._drive(OPS.create_session_token(session_id, ttl_seconds=ttl_seconds))

    async def revert(self, target: str, *, actor: Actor | None = None, dry_run: bool = False,
                     force: bool = False) -> dict[str, Any]:
        return await self._drive(OPS.revert(target, actor=actor, dry_run=dry_run, force=force))

    async def get_session(self, session_id: str) -> Session:
        return await self._drive(OPS.get_session(session_id))

    async def list_sessions(
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
    ) -> Page[Session]:
        return await self._drive(OPS.list_sessions(memory_store_id=memory_store_id,
                                                   statuses=statuses,
                                                   include_archived=include_archived, order=order,
                                                   created_at_gt=created_at_gt,
                                                   created_at_gte=created_at_gte,
                                                   created_at_lt=created_at_lt,
                                                   created_at_lte=created_at_lte, limit=limit,
                                                   page=page))

    async def update_session(
        self, session_id: str, *, metadata: Any = None, title: Any = None
    ) -> Session:
        return await self._drive(OPS.update_session(session_id, metadata=metadata, title=title))

    async def archive_session(self, session_id: str) -> Session:
        return await self._drive(OPS.archive_session(session_id))

    async def delete_session(self, session_id: str) -> None:
        return await self._drive(OPS.delete_session(session_id))

    async def get_session_resource(self, session_id: str, resource_id: str) -> SessionResource:
        return await self._drive(OPS.get_session_resource(session_id, resource_id))

    async def list_session_resources(
        self, session_id: str, *, limit: int | None = None, page: str | None = None
    ) -> Page[SessionResource]:
        return await self._drive(OPS.list_session_resources(session_id, limit=limit, page=page))

    async def list_events(
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
        return await self._drive(OPS.list_events(session_id, types=types, order=order,
                                                 created_at_gt=created_at_gt,
                                                 created_at_gte=created_at_gte,
                                                 created_at_lt=created_at_lt,
                                                 created_at_lte=created_at_lte, limit=limit,
                                                 page=page, after_seq=after_seq))

    async def add_events(
        self, session_id: str | None, events: Sequence[dict[str, Any]], *,
        store_id: str | None = None,
    ) -> list[Event]:
        return await self._drive(OPS.add_events(session_id, events, store_id=store_id))

    send_events = add_events

    # -- dreams (API.md §5) ------------------------------------------------------------------

    async def create_dream(self, inputs: Any, model: Any, *, instructions: Any = None,
                           output_behavior: Any = None, runner: Any = None) -> Dream:
        return await self._drive(OPS.create_dream(inputs, model, instructions=instructions,
                                                  output_behavior=output_behavior, runner=runner))

    async def get_dream(self, dream_id: str) -> Dream:
        return await self._drive(OPS.get_dream(dream_id))

    async def list_dreams(
        self,
        *,
        statuses: Sequence[str] | None = None,
        include_archived: bool = False,
        created_at_gt: str | datetime | None = None,
        created_at_lt: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Page[Dream]:
        return await self._drive(OPS.list_dreams(statuses=statuses,
                                                 include_archived=include_archived,
                                                 created_at_gt=created_at_gt,
                                                 created_at_lt=created_at_lt, limit=limit,
                                                 page=page))

    async def cancel_dream(self, dream_id: str) -> Dream:
        return await self._drive(OPS.cancel_dream(dream_id))

    async def archive_dream(self, dream_id: str) -> Dream:
        return await self._drive(OPS.archive_dream(dream_id))

    # -- API keys (issue 22; memfs extension, an admin key's) ------------------------------

    async def create_key(
        self,
        name: str,
        *,
        workspace: str | None = None,
        role: str = "read_write",
        store_ids: Sequence[str] | None = None,
        expires_in: Any = None,
        created_by: Actor | None = None,
    ) -> ApiKey:
        return await self._drive(OPS.create_key(name, workspace=workspace, role=role,
                                                store_ids=store_ids, expires_in=expires_in,
                                                created_by=created_by))

    async def list_keys(self, *, workspace: str | None = None) -> list[ApiKey]:
        return await self._drive(OPS.list_keys(workspace=workspace))

    async def get_key(self, key_id: str, *, workspace: str | None = None) -> ApiKey:
        return await self._drive(OPS.get_key(key_id, workspace=workspace))

    async def revoke_key(self, key_id: str, *, workspace: str | None = None) -> ApiKey:
        return await self._drive(OPS.revoke_key(key_id, workspace=workspace))
