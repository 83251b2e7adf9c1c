"""The asynchronous :class:`AsyncClient`: each operation of :mod:`memfs.client.ops` driven
over an ``httpx.AsyncClient`` (the same methods as :class:`memfs.client.Client`, awaited),
and the store's change feed followed as it is pushed (:mod:`memfs.client.feed`)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import aclosing
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from .. import errors
from .decode import _decode
from .feed import FeedEvent, feed_events
from .ops import OPS, Ops
from .wire import DEFAULT_TIMEOUT, STREAM_READ_TIMEOUT, Op, Request, _headers, _ms, unix_socket

T = TypeVar("T")
P = ParamSpec("P")


def _async_method(gen: Callable[Concatenate[Ops, P], Op[T]]
                  ) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]:
    """The :class:`AsyncClient` method of an operation: its arguments, its result awaited."""
    @functools.wraps(gen)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._drive(gen(OPS, *args, **kwargs))

    return method


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

    # -- the operations: each one of :class:`Ops`, typed as it is written there -----------

    add_events = _async_method(Ops.add_events)
    archive_dream = _async_method(Ops.archive_dream)
    archive_session = _async_method(Ops.archive_session)
    archive_store = _async_method(Ops.archive_store)
    cancel_dream = _async_method(Ops.cancel_dream)
    changes_since = _async_method(Ops.changes_since)
    check_can_create = _async_method(Ops.check_can_create)
    count_memories = _async_method(Ops.count_memories)
    create_agent = _async_method(Ops.create_agent)
    create_dream = _async_method(Ops.create_dream)
    create_environment = _async_method(Ops.create_environment)
    create_memory = _async_method(Ops.create_memory)
    create_session = _async_method(Ops.create_session)
    create_session_token = _async_method(Ops.create_session_token)
    create_store = _async_method(Ops.create_store)
    delete_memory = _async_method(Ops.delete_memory)
    delete_path = _async_method(Ops.delete_path)
    delete_session = _async_method(Ops.delete_session)
    delete_store = _async_method(Ops.delete_store)
    get_agent = _async_method(Ops.get_agent)
    get_dream = _async_method(Ops.get_dream)
    get_environment = _async_method(Ops.get_environment)
    get_limits = _async_method(Ops.get_limits)
    get_memory = _async_method(Ops.get_memory)
    get_memory_by_path = _async_method(Ops.get_memory_by_path)
    get_session = _async_method(Ops.get_session)
    get_session_resource = _async_method(Ops.get_session_resource)
    get_store = _async_method(Ops.get_store)
    get_version = _async_method(Ops.get_version)
    last_change = _async_method(Ops.last_change)
    list_dreams = _async_method(Ops.list_dreams)
    list_events = _async_method(Ops.list_events)
    list_memories = _async_method(Ops.list_memories)
    list_session_resources = _async_method(Ops.list_session_resources)
    list_sessions = _async_method(Ops.list_sessions)
    list_stores = _async_method(Ops.list_stores)
    list_versions = _async_method(Ops.list_versions)
    namesakes = _async_method(Ops.namesakes)
    prune_versions = _async_method(Ops.prune_versions)
    redact_version = _async_method(Ops.redact_version)
    rename_path = _async_method(Ops.rename_path)
    rename_prefix = _async_method(Ops.rename_prefix)
    resolve_memory = _async_method(Ops.resolve_memory)
    resolve_store = _async_method(Ops.resolve_store)
    restore_version = _async_method(Ops.restore_version)
    revert = _async_method(Ops.revert)
    search = _async_method(Ops.search)
    search_status = _async_method(Ops.search_status)
    send_events = _async_method(Ops.send_events)
    set_session_status = _async_method(Ops.set_session_status)
    snapshot = _async_method(Ops.snapshot)
    sync = _async_method(Ops.sync)
    tree = _async_method(Ops.tree)
    update_memory = _async_method(Ops.update_memory)
    update_session = _async_method(Ops.update_session)
    update_store = _async_method(Ops.update_store)
    write_path = _async_method(Ops.write_path)


