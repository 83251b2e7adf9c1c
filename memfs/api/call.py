"""What a handler gets, :class:`Call` (the request, the store, the caller, the checked query
and body, the app's hubs and write batcher), and the helpers of the views it shows."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.requests import Request

from .. import errors
from ..models import Actor, Grant, Memory, MemoryVersion
from ..rules import _check_view
from ..store import Store
from . import spec

if TYPE_CHECKING:
    from ..grants import GrantWatch
    from .batching import WriteBatcher
    from .streams import ChangeHub, EventHub


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

    async def write(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a store write method, committed together with the writes of other requests
        waiting at the same moment (:class:`WriteBatcher`); returns once it is durable."""
        return await self.writes.run(partial(fn, *args, **kwargs))


def _view(c: Call, default: str) -> str:
    """The ``view`` asked for (the store's rule: basic or full)."""
    return _check_view(c.q.text("view") or default)


def _shown(m: Memory | MemoryVersion, view: str) -> dict[str, Any]:
    return (dataclasses.replace(m, content=None) if view == "basic" else m).to_dict()
