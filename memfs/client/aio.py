"""The asynchronous :class:`AsyncClient`: each operation of :mod:`memfs.client.ops` driven
over an ``httpx.AsyncClient``, for the parts it holds (:mod:`memfs.client.aio_parts`: the
same as :class:`memfs.client.Client`'s, awaited), and the store's change feed followed as it
is pushed (:mod:`memfs.client.feed`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, TypeVar

import anyio
import httpx

from .. import errors
from .aio_parts import (
    AsyncAgents,
    AsyncDreams,
    AsyncEvents,
    AsyncFeed,
    AsyncKeys,
    AsyncMemories,
    AsyncSearch,
    AsyncSessions,
    AsyncStores,
    AsyncTyped,
    AsyncUndo,
    AsyncVersions,
)
from .decode import decoded
from .feed import FeedEvent, feed_events
from .ops import OPS
from .wire import (
    DEFAULT_TIMEOUT,
    STREAM_READ_TIMEOUT,
    Op,
    Request,
    client_headers,
    rate_wait,
    store_url,
    unix_socket,
)

T = TypeVar("T")


class AsyncClient:
    """The asynchronous twin of :class:`Client` (same parts and methods, awaited), and
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
        self._http = httpx.AsyncClient(base_url=http_url,
                                       headers=client_headers(api_key, session_id),
                                       timeout=timeout, transport=transport)
        self.stores = AsyncStores(self._drive)
        self.memories = AsyncMemories(self._drive)
        self.versions = AsyncVersions(self._drive)
        self.feed = AsyncFeed(self._drive)
        self.search = AsyncSearch(self._drive)
        self.typed = AsyncTyped(self._drive)
        self.agents = AsyncAgents(self._drive)
        self.sessions = AsyncSessions(self._drive)
        self.events = AsyncEvents(self._drive)
        self.undo = AsyncUndo(self._drive)
        self.dreams = AsyncDreams(self._drive)
        self.keys = AsyncKeys(self._drive)

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
            async with self._http.stream("GET", store_url(store_id) + "/changes/stream",
                                         params=params, timeout=timeout) as response:
                if not response.is_success:
                    await response.aread()
                    decoded(response)
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
                return decoded(response)
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

    async def get_limits(self) -> dict[str, Any]:
        return await self._drive(OPS.get_limits())

    async def sync(self) -> None:
        return await self._drive(OPS.sync())
