"""The synchronous :class:`Client`: each operation of :mod:`memfs.client.ops` driven over an
``httpx.Client``, and the archive transfers, whose bodies are streamed rather than JSON."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any, TypeVar

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
from .ops import OPS
from .wire import (
    COMMIT_GRACE,
    DEADLINE_HEADER,
    DEFAULT_MOUNT_ROOT,
    DEFAULT_TIMEOUT,
    IDEMPOTENCY_HEADER,
    RESEND_PAUSE,
    Op,
    Request,
    _headers,
    _ms,
    _params,
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

    Each operation is a method that drives its generator of :mod:`memfs.client.ops` (where
    its docstring is) over this client's connection, with the same parameters; mypy checks
    that a Client is a :class:`memfs.protocol.StoreAPI`.
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
        self._http = httpx.Client(base_url=http_url, headers=_headers(api_key, session_id),
                                  timeout=timeout, transport=transport)

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
                return _decode(response)
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
                return _decode(response)
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

    # -- memory stores ---------------------------------------------------------------------

    def create_store(
        self, name: str, description: str | None = None, metadata: dict[str, str] | None = None
    ) -> MemoryStore:
        return self._drive(OPS.create_store(name, description, metadata))

    def get_store(self, store_id: str) -> MemoryStore:
        return self._drive(OPS.get_store(store_id))

    def resolve_store(self, ref: str) -> MemoryStore:
        return self._drive(OPS.resolve_store(ref))

    def namesakes(self, store_id: str) -> list[MemoryStore]:
        return self._drive(OPS.namesakes(store_id))

    def search(self, store_id: str, query: str, *, limit: int | None = None,
               path_prefix: str | None = None, threshold: float | None = None,
               channels: tuple[str, ...] = ("words", "meaning")) -> RecallResult:
        return self._drive(OPS.search(store_id, query, limit=limit, path_prefix=path_prefix,
                                      threshold=threshold, channels=channels))

    def search_session(self, session_id: str, query: str, *, limit: int | None = None,
                       path_prefix: str | None = None, threshold: float | None = None,
                       channels: tuple[str, ...] = ("words", "meaning")) -> RecallResult:
        return self._drive(OPS.search_session(session_id, query, limit=limit,
                                              path_prefix=path_prefix, threshold=threshold,
                                              channels=channels))

    def search_status(self, store_id: str) -> dict[str, Any]:
        return self._drive(OPS.search_status(store_id))

    def update_store(
        self, store_id: str, *, name: Any = None, description: Any = None, metadata: Any = None
    ) -> MemoryStore:
        return self._drive(OPS.update_store(store_id, name=name, description=description,
                                            metadata=metadata))

    def archive_store(self, store_id: str) -> MemoryStore:
        return self._drive(OPS.archive_store(store_id))

    def delete_store(self, store_id: str) -> None:
        return self._drive(OPS.delete_store(store_id))

    def list_stores(
        self,
        *,
        include_archived: bool = False,
        created_at_gte: str | datetime | None = None,
        created_at_lte: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Page[MemoryStore]:
        return self._drive(OPS.list_stores(include_archived=include_archived,
                                           created_at_gte=created_at_gte,
                                           created_at_lte=created_at_lte, limit=limit, page=page))

    # -- memories --------------------------------------------------------------------------

    def create_memory(
        self, store_id: str, path: str | bytes, content: str | bytes | None, *,
        actor: Actor | None = None,
    ) -> Memory:
        return self._drive(OPS.create_memory(store_id, path, content, actor=actor))

    def get_memory(self, store_id: str, memory_id: str, *, view: str = "full") -> Memory:
        return self._drive(OPS.get_memory(store_id, memory_id, view=view))

    def get_memory_by_path(
        self, store_id: str, path: str, *, view: str = "full"
    ) -> Memory:
        return self._drive(OPS.get_memory_by_path(store_id, path, view=view))

    def resolve_memory(self, store_id: str, ref: str, *, view: str = "full") -> Memory:
        return self._drive(OPS.resolve_memory(store_id, ref, view=view))

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
    ) -> Memory:
        return self._drive(OPS.update_memory(store_id, memory_id, content=content, path=path,
                                             precondition_sha256=precondition_sha256, actor=actor,
                                             replace=replace))

    def delete_memory(
        self, store_id: str, memory_id: str, *, expected_sha256: str | None = None,
        actor: Actor | None = None,
    ) -> None:
        return self._drive(OPS.delete_memory(store_id, memory_id, expected_sha256=expected_sha256,
                                             actor=actor))

    def write_path(
        self, store_id: str, path: str | bytes, content: str | bytes, *,
        actor: Actor | None = None, events: list[dict[str, Any]] | None = None,
    ) -> Memory:
        return self._drive(OPS.write_path(store_id, path, content, actor=actor, events=events))

    def delete_path(
        self, store_id: str, path: str, *, actor: Actor | None = None,
        events: list[dict[str, Any]] | None = None,
    ) -> Memory:
        return self._drive(OPS.delete_path(store_id, path, actor=actor, events=events))

    def rename_path(
        self, store_id: str, old: str | bytes, new: str | bytes, *,
        actor: Actor | None = None, replace: bool = True,
        events: list[dict[str, Any]] | None = None,
    ) -> Memory:
        return self._drive(OPS.rename_path(store_id, old, new, actor=actor, replace=replace,
                                           events=events))

    def rename_prefix(
        self, store_id: str, old_prefix: str, new_prefix: str, *, actor: Actor | None = None,
        events: list[dict[str, Any]] | None = None,
    ) -> list[Memory]:
        return self._drive(OPS.rename_prefix(store_id, old_prefix, new_prefix, actor=actor,
                                             events=events))

    def restore_version(self, store_id: str, version_id: str, *,
                        path: str | bytes | None = None,
                        actor: Actor | None = None) -> Memory:
        return self._drive(OPS.restore_version(store_id, version_id, path=path, actor=actor))

    def tree(self, store_id: str) -> list[Memory]:
        return self._drive(OPS.tree(store_id))

    def snapshot(self, store_id: str, at: str | datetime, *, view: str = "basic"
                 ) -> Snapshot:
        return self._drive(OPS.snapshot(store_id, at, view=view))

    def check_can_create(self, store_id: str) -> None:
        return self._drive(OPS.check_can_create(store_id))

    def get_limits(self) -> dict[str, Any]:
        return self._drive(OPS.get_limits())

    def sync(self) -> None:
        return self._drive(OPS.sync())

    # -- change feed -----------------------------------------------------------------------

    def last_change(self, store_id: str) -> int:
        return self._drive(OPS.last_change(store_id))

    def changes_since(self, store_id: str, seq: int, limit: int = 1000) -> list[Change]:
        return self._drive(OPS.changes_since(store_id, seq, limit))

    def list_memories(
        self,
        store_id: str,
        *,
        path_prefix: str | None = None,
        depth: int = 0,
        limit: int = 20,
        page: str | None = None,
        view: str = "basic",
    ) -> Page[Memory | MemoryPrefix]:
        return self._drive(OPS.list_memories(store_id, path_prefix=path_prefix, depth=depth,
                                             limit=limit, page=page, view=view))

    def count_memories(self, store_id: str) -> int:
        return self._drive(OPS.count_memories(store_id))

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
    ) -> Page[MemoryVersion]:
        return self._drive(OPS.list_versions(store_id, memory_id=memory_id, operation=operation,
                                             session_id=session_id, api_key_id=api_key_id,
                                             service_account_id=service_account_id, user_id=user_id,
                                             created_at_gte=created_at_gte,
                                             created_at_lte=created_at_lte, limit=limit, page=page,
                                             view=view))

    def get_version(
        self, store_id: str, version_id: str, *, view: str = "full"
    ) -> MemoryVersion:
        return self._drive(OPS.get_version(store_id, version_id, view=view))

    def redact_version(
        self, store_id: str, version_id: str, *, actor: Actor | None = None
    ) -> MemoryVersion:
        return self._drive(OPS.redact_version(store_id, version_id, actor=actor))

    def prune_versions(self) -> int:
        return self._drive(OPS.prune_versions())

    # -- agents and environments -----------------------------------------------------------

    def create_agent(self, /, *, name: str, model: Any, **fields: Any) -> dict[str, Any]:
        return self._drive(OPS.create_agent(name=name, model=model, **fields))

    def get_agent(self, agent_id: str) -> dict[str, Any]:
        return self._drive(OPS.get_agent(agent_id))

    def create_environment(self, /, *, name: str, **fields: Any) -> dict[str, Any]:
        return self._drive(OPS.create_environment(name=name, **fields))

    def get_environment(self, environment_id: str) -> dict[str, Any]:
        return self._drive(OPS.get_environment(environment_id))

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
    ) -> Session:
        return self._drive(OPS.create_session(resources, root=root, agent=agent,
                                              environment_id=environment_id, metadata=metadata,
                                              title=title, status=status, launcher=launcher))

    def set_session_status(self, session_id: str, status: str) -> Session:
        return self._drive(OPS.set_session_status(session_id, status))

    def create_session_token(self, session_id: str, *,
                             ttl_seconds: float | None = None) -> SessionToken:
        return self._drive(OPS.create_session_token(session_id, ttl_seconds=ttl_seconds))

    def revert(self, target: str, *, actor: Actor | None = None, dry_run: bool = False,
               force: bool = False) -> dict[str, Any]:
        return self._drive(OPS.revert(target, actor=actor, dry_run=dry_run, force=force))

    def get_session(self, session_id: str) -> Session:
        return self._drive(OPS.get_session(session_id))

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
    ) -> Page[Session]:
        return self._drive(OPS.list_sessions(memory_store_id=memory_store_id, statuses=statuses,
                                             include_archived=include_archived, order=order,
                                             created_at_gt=created_at_gt,
                                             created_at_gte=created_at_gte,
                                             created_at_lt=created_at_lt,
                                             created_at_lte=created_at_lte, limit=limit, page=page))

    def update_session(
        self, session_id: str, *, metadata: Any = None, title: Any = None
    ) -> Session:
        return self._drive(OPS.update_session(session_id, metadata=metadata, title=title))

    def archive_session(self, session_id: str) -> Session:
        return self._drive(OPS.archive_session(session_id))

    def delete_session(self, session_id: str) -> None:
        return self._drive(OPS.delete_session(session_id))

    def get_session_resource(self, session_id: str, resource_id: str) -> SessionResource:
        return self._drive(OPS.get_session_resource(session_id, resource_id))

    def list_session_resources(
        self, session_id: str, *, limit: int | None = None, page: str | None = None
    ) -> Page[SessionResource]:
        return self._drive(OPS.list_session_resources(session_id, limit=limit, page=page))

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
    ) -> Page[Event]:
        return self._drive(OPS.list_events(session_id, types=types, order=order,
                                           created_at_gt=created_at_gt,
                                           created_at_gte=created_at_gte,
                                           created_at_lt=created_at_lt,
                                           created_at_lte=created_at_lte, limit=limit, page=page,
                                           after_seq=after_seq))

    def add_events(
        self, session_id: str | None, events: Sequence[dict[str, Any]], *,
        store_id: str | None = None,
    ) -> list[Event]:
        return self._drive(OPS.add_events(session_id, events, store_id=store_id))

    send_events = add_events

    # -- dreams (API.md §5) ------------------------------------------------------------------

    def create_dream(self, inputs: Any, model: Any, *, instructions: Any = None,
                     output_behavior: Any = None, runner: Any = None) -> Dream:
        return self._drive(OPS.create_dream(inputs, model, instructions=instructions,
                                            output_behavior=output_behavior, runner=runner))

    def get_dream(self, dream_id: str) -> Dream:
        return self._drive(OPS.get_dream(dream_id))

    def list_dreams(
        self,
        *,
        statuses: Sequence[str] | None = None,
        include_archived: bool = False,
        created_at_gt: str | datetime | None = None,
        created_at_lt: str | datetime | None = None,
        limit: int = 20,
        page: str | None = None,
    ) -> Page[Dream]:
        return self._drive(OPS.list_dreams(statuses=statuses, include_archived=include_archived,
                                           created_at_gt=created_at_gt, created_at_lt=created_at_lt,
                                           limit=limit, page=page))

    def cancel_dream(self, dream_id: str) -> Dream:
        return self._drive(OPS.cancel_dream(dream_id))

    def archive_dream(self, dream_id: str) -> Dream:
        return self._drive(OPS.archive_dream(dream_id))

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
    ) -> ApiKey:
        return self._drive(OPS.create_key(name, workspace=workspace, role=role,
                                          store_ids=store_ids, expires_in=expires_in,
                                          created_by=created_by))

    def list_keys(self, *, workspace: str | None = None) -> list[ApiKey]:
        return self._drive(OPS.list_keys(workspace=workspace))

    def get_key(self, key_id: str, *, workspace: str | None = None) -> ApiKey:
        return self._drive(OPS.get_key(key_id, workspace=workspace))

    def revoke_key(self, key_id: str, *, workspace: str | None = None) -> ApiKey:
        return self._drive(OPS.revoke_key(key_id, workspace=workspace))


if TYPE_CHECKING:
    from ..protocol import SearchAPI, StoreAPI

    def _a_client_is_a_store(client: Client) -> StoreAPI:
        """Checked by mypy, never run: a :class:`Client` has every method of
        :class:`memfs.protocol.StoreAPI`, typed alike, so that a mount takes one as it takes a
        local Store (and its ``.search/`` asks the server)."""
        return client

    def _a_client_searches(client: Client) -> SearchAPI:
        return client
