"""The synchronous :class:`Client`: its connection (an ``httpx.Client``), which drives each
operation of :mod:`memfs.client.ops` for the parts it holds (:mod:`memfs.client.sync_parts`,
the archive transfers among them)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from .. import errors
from .decode import decoded
from .ops import OPS
from .sync_parts import (
    Agents,
    Archive,
    Dreams,
    Events,
    Feed,
    Keys,
    Memories,
    Search,
    Sessions,
    Stores,
    Typed,
    Undo,
    Versions,
)
from .wire import (
    COMMIT_GRACE,
    DEADLINE_HEADER,
    DEFAULT_TIMEOUT,
    IDEMPOTENCY_HEADER,
    RESEND_PAUSE,
    Op,
    Request,
    client_headers,
    rate_wait,
    unix_socket,
)

T = TypeVar("T")


class Client:
    """A synchronous client of a memfs server, with the Store's methods.

    :param base_url: e.g. ``http://127.0.0.1:8000`` (a path prefix is kept), or
        ``unix:/PATH`` (:func:`unix_socket`).
    :param api_key: sent as ``x-api-key``.
    :param session_id: act as this session (memfs extension header): memory writes are
        attributed to its ``session_actor`` (the server refuses them with ReadOnly unless the
        session may write the store) and tool events may be recorded for it.
    :param transport: an httpx transport (tests pass ``httpx.MockTransport``).
    :param deadline: seconds a write (any request but a GET) may take in all, answer
        included (None: each request waits ``timeout`` for each step, and fails when the
        connection does). A write then carries its own ``Idempotency-Key`` and asks the server
        to commit it only within ``deadline - COMMIT_GRACE`` seconds (``x-memfs-deadline``);
        it is sent again with the same key when its connection fails, and fails once
        ``deadline`` is over without an answer: the server refuses it from then on, so a
        write that failed is never committed later (what a remote mount's close needs).

    The operations are in parts named as the Store's (``client.memories.create``, as
    ``store.memories.create``; :mod:`memfs.client.sync_parts`), each method driving its
    generator of :data:`memfs.client.ops.OPS` (where its docstring is) over this client's
    connection, with the same parameters; mypy checks that a Client is a
    :class:`memfs.protocol.StoreAPI`. The client itself keeps what is its own: the
    connection (:meth:`close`, :meth:`answer_by`), and the server's :meth:`get_limits`.
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
        deadline: float | None = None,
    ) -> None:
        self.base_url = base_url
        self.session_id = session_id
        self.deadline = deadline
        self._until = threading.local()  # answer_by(): this thread's writes end by then
        uds, http_url = unix_socket(base_url)
        if uds is not None and transport is None:
            transport = httpx.HTTPTransport(uds=uds)
        self._http = httpx.Client(base_url=http_url, headers=client_headers(api_key, session_id),
                                  timeout=timeout, transport=transport)
        self.stores = Stores(self._drive)
        self.memories = Memories(self._drive)
        self.versions = Versions(self._drive)
        self.feed = Feed(self._drive)
        self.search = Search(self._drive)
        self.typed = Typed(self._drive)
        self.agents = Agents(self._drive)
        self.sessions = Sessions(self._drive)
        self.events = Events(self._drive)
        self.undo = Undo(self._drive)
        self.dreams = Dreams(self._drive)
        self.keys = Keys(self._drive)
        self.archive = Archive(self._http, base_url)

    def close(self) -> None:
        self._http.close()

    @contextmanager
    def answer_by(self, seconds: float) -> Iterator[None]:
        """Writes sent in this block (this thread) by a client with a ``deadline`` end within
        ``seconds`` in all, as their own deadline does (a write that has not begun by then
        fails at once, unsent): a remote mount's close that queued behind others keeps to
        the deadline counted from the close, not from its own request."""
        before = getattr(self._until, "at", None)
        self._until.at = time.monotonic() + seconds
        try:
            yield
        finally:
            self._until.at = before

    def check_file(self) -> None:
        """Nothing to check: the server watches its own database file."""

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, req: Request) -> Any:
        if self.deadline is not None and req.method != "GET":
            return self._send_by(self.deadline, req)
        attempt = 0
        while True:
            try:
                response = self._http.request(req.method, req.path, params=req.params,
                                              json=req.json)
            except httpx.TransportError as e:
                raise errors.MemfsError(f"cannot reach memfs server {self.base_url}: {e}") from e
            attempt += 1
            wait = rate_wait(response, attempt)
            if wait is None:
                return decoded(response)
            time.sleep(wait)

    def _send_by(self, seconds: float, req: Request) -> Any:
        """Send a write that must be answered within ``seconds`` (see ``deadline``)."""
        now = time.monotonic()
        give_up = min(now + seconds, getattr(self._until, "at", None) or now + seconds)
        if give_up <= now:
            raise errors.MemfsError(f"no time left to send a write to memfs server "
                                    f"{self.base_url} (its deadline passed): not written")
        headers = {IDEMPOTENCY_HEADER: uuid.uuid4().hex,
                   DEADLINE_HEADER: f"{time.time() + (give_up - now) - COMMIT_GRACE:.3f}"}
        attempt = 0
        while True:
            left = give_up - time.monotonic()
            try:
                if left <= 0:
                    raise httpx.TimeoutException("no answer")
                response = self._http.request(req.method, req.path, params=req.params,
                                              json=req.json, headers=headers, timeout=left)
            except httpx.ConnectError as e:  # nothing was sent: it failed at once
                raise errors.MemfsError(f"cannot reach memfs server {self.base_url}: {e}") from e
            except httpx.TransportError as e:
                if give_up - time.monotonic() > RESEND_PAUSE:
                    time.sleep(RESEND_PAUSE)  # the connection failed: the same write again
                    continue
                raise errors.MemfsError(
                    f"no answer from memfs server {self.base_url} by its deadline: the "
                    f"write was not made (the server refuses it after its deadline): {e}"
                ) from e
            attempt += 1
            wait = rate_wait(response, attempt)
            if wait is None:
                return decoded(response)
            time.sleep(max(0.0, min(wait, give_up - time.monotonic())))

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

    def get_limits(self) -> dict[str, Any]:
        return self._drive(OPS.get_limits())

    def sync(self) -> None:
        return self._drive(OPS.sync())


if TYPE_CHECKING:
    from ..protocol import DescribeAPI, SearchAPI, StoreAPI

    def _a_client_is_a_store(client: Client) -> StoreAPI:
        """Checked by mypy, never run: a :class:`Client` has every method of
        :class:`memfs.protocol.StoreAPI`, typed alike, so that a mount takes one as it takes a
        local Store (and its ``.search/`` asks the server)."""
        return client

    def _a_client_searches(client: Client) -> SearchAPI:
        return client

    def _a_client_describes(client: Client) -> DescribeAPI:
        """A remote mount has ``.describe`` too (the server's description)."""
        return client
