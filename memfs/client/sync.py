"""The synchronous :class:`Client`: each operation of :mod:`memfs.client.ops` driven over an
``httpx.Client``, and the archive transfers, whose bodies are streamed rather than JSON."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import IO, Any, Concatenate, ParamSpec, TypeVar

import httpx

from .. import errors
from .decode import _decode
from .ops import OPS, Ops
from .wire import DEFAULT_TIMEOUT, Op, Request, _headers, _ms, _params, unix_socket

T = TypeVar("T")
P = ParamSpec("P")


def _sync_method(gen: Callable[Concatenate[Ops, P], Op[T]]
                 ) -> Callable[Concatenate[Client, P], T]:
    """The :class:`Client` method of an operation: its arguments, its result."""
    @functools.wraps(gen)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._drive(gen(OPS, *args, **kwargs))

    return method


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

    # -- the operations: each one of :class:`Ops`, typed as it is written there -----------

    add_events = _sync_method(Ops.add_events)
    archive_dream = _sync_method(Ops.archive_dream)
    archive_session = _sync_method(Ops.archive_session)
    archive_store = _sync_method(Ops.archive_store)
    cancel_dream = _sync_method(Ops.cancel_dream)
    changes_since = _sync_method(Ops.changes_since)
    check_can_create = _sync_method(Ops.check_can_create)
    count_memories = _sync_method(Ops.count_memories)
    create_agent = _sync_method(Ops.create_agent)
    create_dream = _sync_method(Ops.create_dream)
    create_environment = _sync_method(Ops.create_environment)
    create_memory = _sync_method(Ops.create_memory)
    create_session = _sync_method(Ops.create_session)
    create_session_token = _sync_method(Ops.create_session_token)
    create_store = _sync_method(Ops.create_store)
    delete_memory = _sync_method(Ops.delete_memory)
    delete_path = _sync_method(Ops.delete_path)
    delete_session = _sync_method(Ops.delete_session)
    delete_store = _sync_method(Ops.delete_store)
    get_agent = _sync_method(Ops.get_agent)
    get_dream = _sync_method(Ops.get_dream)
    get_environment = _sync_method(Ops.get_environment)
    get_limits = _sync_method(Ops.get_limits)
    get_memory = _sync_method(Ops.get_memory)
    get_memory_by_path = _sync_method(Ops.get_memory_by_path)
    get_session = _sync_method(Ops.get_session)
    get_session_resource = _sync_method(Ops.get_session_resource)
    get_store = _sync_method(Ops.get_store)
    get_version = _sync_method(Ops.get_version)
    last_change = _sync_method(Ops.last_change)
    list_dreams = _sync_method(Ops.list_dreams)
    list_events = _sync_method(Ops.list_events)
    list_memories = _sync_method(Ops.list_memories)
    list_session_resources = _sync_method(Ops.list_session_resources)
    list_sessions = _sync_method(Ops.list_sessions)
    list_stores = _sync_method(Ops.list_stores)
    list_versions = _sync_method(Ops.list_versions)
    namesakes = _sync_method(Ops.namesakes)
    prune_versions = _sync_method(Ops.prune_versions)
    redact_version = _sync_method(Ops.redact_version)
    rename_path = _sync_method(Ops.rename_path)
    rename_prefix = _sync_method(Ops.rename_prefix)
    resolve_memory = _sync_method(Ops.resolve_memory)
    resolve_store = _sync_method(Ops.resolve_store)
    restore_version = _sync_method(Ops.restore_version)
    revert = _sync_method(Ops.revert)
    search = _sync_method(Ops.search)
    search_status = _sync_method(Ops.search_status)
    send_events = _sync_method(Ops.send_events)
    set_session_status = _sync_method(Ops.set_session_status)
    snapshot = _sync_method(Ops.snapshot)
    sync = _sync_method(Ops.sync)
    tree = _sync_method(Ops.tree)
    update_memory = _sync_method(Ops.update_memory)
    update_session = _sync_method(Ops.update_session)
    update_store = _sync_method(Ops.update_store)
    write_path = _sync_method(Ops.write_path)

