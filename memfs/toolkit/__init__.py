"""What a tool for agents needs over a store, without any agent SDK: a store call a tool's
logic wants made (:class:`Call`), the drivers that make them (:func:`drive` on a sync
:class:`memfs.protocol.StoreAPI`, :func:`drive_async` on a :class:`memfs.client.AsyncClient`
or in a worker thread), and the ``agent.tool_use`` / ``agent.tool_result`` pair of one tool
call (:func:`event_pair`, SPEC §4).

A tool's logic is written once, as a generator that yields the :class:`Call` s it needs and
receives their results (or has their :class:`memfs.errors.MemfsError` thrown in), like
:mod:`memfs.client`'s operations: the SDK's memory tool (:mod:`memfs.tools`, which needs the
``anthropic`` package) and the MCP server (:mod:`memfs.mcp`, which needs the ``mcp`` package)
both drive theirs with this package, which needs neither.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Generator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import anyio.to_thread

from .. import errors
from ..rules import format_time, new_id

log = logging.getLogger(__name__)

#: What a driven generator returns.
T = TypeVar("T")

#: A tool result longer than this is cut in its event (a read of a large file).
EVENT_TEXT_CHARS = 4000


@dataclass(frozen=True)
class Call:
    """A store call a tool wants made: ``store.<part>.<method>(*args, **kwargs)``, named
    ``"part.method"`` (:meth:`method_of`)."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def method_of(self, store: Any) -> Any:
        """The method of ``store`` this call names (``"memories.get"``: store.memories.get)."""
        part, method = self.name.split(".")
        return getattr(getattr(store, part), method)


def drive(store: Any, op: Generator[Call, Any, T]) -> T:
    """Run ``op`` on a sync store (:class:`memfs.store.Store`, :class:`memfs.client.Client`):
    each call made in turn, its result sent in, its failure thrown in (as a MemfsError:
    :func:`unexpected`).

    :raises MemfsError: one the generator did not catch."""
    try:
        call = next(op)
        while True:
            try:
                result = call.method_of(store)(*call.args, **call.kwargs)
            except Exception as e:
                call = op.throw(unexpected(call, e))
            else:
                call = op.send(result)
    except StopIteration as stop:
        returned: T = stop.value  # what the generator returns
        return returned


def unexpected(call: Call, e: Exception) -> errors.MemfsError:
    """The MemfsError a store call's failure is to a tool: itself, or for anything else (a
    bug, or input the store's own checks let through, such as a lone surrogate that sqlite
    cannot encode) a plain :class:`MemfsError` (``api_error``), logged here once with its
    traceback, whose message keeps the internals back."""
    if isinstance(e, errors.MemfsError):
        return e
    log.error("the store call %s failed", call.name, exc_info=e)
    return errors.MemfsError(f"internal error in {call.name} (logged by the server)")


async def make(store: Any, call: Call) -> Any:
    """One call: awaited on an async store (:class:`memfs.client.AsyncClient`), else made in a
    worker thread (a sync store blocks: on SQLite's lock, a disk sync, the network)."""
    method = call.method_of(store)
    if inspect.iscoroutinefunction(method):
        return await method(*call.args, **call.kwargs)
    return await anyio.to_thread.run_sync(functools.partial(method, *call.args, **call.kwargs))


async def drive_async(store: Any, op: Generator[Call, Any, T]) -> T:
    """:func:`drive` for an event loop: each call through :func:`make`.

    :raises MemfsError: one the generator did not catch."""
    try:
        call = next(op)
        while True:
            try:
                result = await make(store, call)
            except Exception as e:
                call = op.throw(unexpected(call, e))
            else:
                call = op.send(result)
    except StopIteration as stop:
        returned: T = stop.value
        return returned


def event_pair(input: dict[str, Any], operation: str, file_path: str, text: str, *,
               is_error: bool, new_path: str | None = None, name: str = "memory"
               ) -> list[dict[str, Any]]:
    """The ``agent.tool_use`` / ``agent.tool_result`` pair of one tool call (SPEC §4, API.md
    §4.7): ``name`` is the tool's, ``input`` the call's arguments as the model sent them plus
    the ``operation`` and ``file_path`` every mount event has; the result's text is the tool
    result (cut past :data:`EVENT_TEXT_CHARS`)."""
    now = format_time(datetime.now(UTC))
    use_id = new_id("sevt")
    inp = dict(input)
    inp["operation"] = operation
    inp["file_path"] = file_path
    if new_path is not None:
        inp["new_path"] = new_path
    if len(text) > EVENT_TEXT_CHARS:
        text = text[:EVENT_TEXT_CHARS] + f"\n[... {len(text) - EVENT_TEXT_CHARS} more characters]"
    return [
        {
            "type": "agent.tool_use", "id": use_id, "name": name, "input": inp,
            "processed_at": now, "evaluated_permission": "allow",
            "evaluation": {"type": "always_allow"}, "session_thread_id": None,
        },
        {
            "type": "agent.tool_result", "id": new_id("sevt"), "tool_use_id": use_id,
            "processed_at": now, "is_error": is_error,
            "content": [{"type": "text", "text": text}],
        },
    ]
