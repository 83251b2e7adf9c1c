"""What a handler gets, :class:`Call` (the request, the store, the caller, the checked query
and body, the app's hubs and write batcher), and the helpers of the views it shows."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.requests import Request

from .. import errors
from ..models import Actor, Grant, Memory, MemoryVersion
from ..rules import check_view
from ..store import Store
from . import spec

if TYPE_CHECKING:
    from .batching import WriteBatcher
    from .grants import GrantWatch
    from .streams import ChangeHub, EventHub

#: A write sent with this header is applied once per key (:meth:`Call.answer`); the IETF
#: draft's name, as the client spells it (memfs.client.wire).
IDEMPOTENCY_HEADER = "idempotency-key"
#: memfs extension: the time (seconds since the epoch) after which a write must not commit.
DEADLINE_HEADER = "x-memfs-deadline"


@dataclass
class Call:
    """What a handler gets: the request, the store, the caller, the checked query and body,
    and the app's shared pollers of change feeds, session events and its streams'
    credentials."""

    request: Request
    store: Store
    body: dict[str, Any]
    #: The declared query parameters, checked (:class:`memfs.api.spec.Query`).
    q: spec.Query
    hub: ChangeHub
    events: EventHub
    writes: WriteBatcher
    grants: GrantWatch

    @property
    def p(self) -> Mapping[str, str]:
        return self.request.path_params

    @property
    def actor(self) -> Actor:
        actor: Actor = self.request.state.actor
        return actor

    @property
    def grant(self) -> Grant:
        """What the caller's credential may do (:mod:`memfs.api.auth`)."""
        grant: Grant = self.request.state.grant
        return grant

    @property
    def workspace(self) -> str:
        """The caller's workspace: the only one it sees."""
        return self.grant.workspace_id

    def store_scopes(self, actor: Actor | None = None, events: Any = None) -> tuple[str, ...]:
        """What a write to the memories of the store the path names serialises on
        (:meth:`memfs.store.Memories.scopes`): the scopes of its :meth:`write`."""
        return self.store.memories.scopes(self.p["memory_store_id"], actor, events)

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a store method in a worker thread."""
        return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))

    async def read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a short store read on the event loop when it cannot wait (the store's
        ``nowait`` mode: a WAL reader never waits on the writer, and no worker thread is worth
        its handoff for a point look-up), else in a worker thread."""
        try:
            with self.store.nowait():
                return fn(*args, **kwargs)
        except errors.WouldBlock:
            return await self.run(fn, *args, **kwargs)

    async def write(self, fn: Callable[..., Any], *args: Any, scopes: tuple[str, ...] = (),
                    **kwargs: Any) -> Any:
        """Run a store write method, committed together with the writes of other requests
        waiting at the same moment that ask for the same ``scopes`` (:class:`WriteBatcher`:
        what the write serialises on, e.g. :meth:`memfs.store.Memories.scopes`; none: every
        write); returns once it is durable."""
        return await self.writes.run(partial(fn, *args, **kwargs), scopes)

    async def answer(self, shown: Callable[[Any], Any], fn: Callable[..., Any], *args: Any,
                     scopes: tuple[str, ...] = (), **kwargs: Any) -> Any:
        """The answer of a store write, ``shown(result)``, committed as :meth:`write` does
        (``scopes``: as there).

        Sent with an ``Idempotency-Key``, the write is applied once: its answer (or refusal)
        is recorded in its transaction, and the same request sent again is answered with it
        (:meth:`memfs.store.Store.idempotency.write_once`). Sent with ``x-memfs-deadline`` (seconds
        since
        the epoch), a write that cannot commit by then is refused with
        :class:`~memfs.errors.DeadlinePassed`, and never commits later.
        """
        headers = self.request.headers
        key = headers.get(IDEMPOTENCY_HEADER)
        deadline = _deadline(headers.get(DEADLINE_HEADER))
        if key is None and deadline is None:
            return shown(await self.write(fn, *args, scopes=scopes, **kwargs))
        fingerprint = hashlib.sha256(json.dumps(
            [self.request.method, self.request.url.path, str(self.request.query_params),
             self.body, repr(getattr(self.request.state, "actor", None))],
            sort_keys=True).encode()).hexdigest()
        status, body = await self.writes.run(partial(
            self.store.idempotency.write_once, self.workspace, key, fingerprint, deadline,
            partial(fn, *args, **kwargs), shown, scopes), scopes)
        if status >= 400:
            raise errors.from_wire(status, body)
        return body


def _deadline(value: str | None) -> float | None:
    """The ``x-memfs-deadline`` header: seconds since the epoch (a number)."""
    if value is None:
        return None
    try:
        deadline = float(value)
    except ValueError:
        deadline = math.nan
    if not math.isfinite(deadline):
        raise errors.InvalidRequest(
            f"{DEADLINE_HEADER} must be a time in seconds since the epoch, not {value[:40]!r}")
    return deadline


def requested_view(c: Call, default: str) -> str:
    """The ``view`` asked for (the store's rule: basic or full)."""
    return check_view(c.q.text("view") or default)


def shown(m: Memory | MemoryVersion, view: str) -> dict[str, Any]:
    return (dataclasses.replace(m, content=None) if view == "basic" else m).to_dict()
