"""A store's change feed as the server pushes it (memfs extension, server-sent events): the
:class:`FeedEvent` of each frame, read from the lines of a stream
(:meth:`memfs.client.AsyncClient.stream_changes` opens it)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any

from .. import errors
from ..errors import from_wire as error_from_response
from ..models import Change, Memory
from .decode import to_change, to_memory


@dataclass(frozen=True)
class FeedEvent:
    """One frame of a change stream: ``kind`` is ``change`` (``change``, and ``memory``: the
    memory as it is now for a ``put``, None once deleted), ``reset`` (the position asked for
    is unknown to the server: reload everything, then continue from ``seq``) or ``ping``
    (``seq``: the server's newest position)."""

    kind: str
    seq: int
    change: Change | None = None
    memory: Memory | None = None


def _feed_event(name: str, data: dict[str, Any], store_id: str) -> FeedEvent | None:
    if name == "memfs.change":
        m = data.get("memory")
        return FeedEvent("change", int(data["seq"]), to_change(data, store_id),
                         to_memory(m) if isinstance(m, dict) else None)
    if name == "memfs.reset":
        return FeedEvent("reset", int(data["last_seq"]))
    if name == "ping":
        return FeedEvent("ping", int(data.get("last_seq") or 0))
    if name == "error":
        raise error_from_response(500, data)
    return None  # a frame type this client does not know: skipped


async def feed_events(lines: AsyncIterator[str], store_id: str
                      ) -> AsyncGenerator[FeedEvent, None]:
    """The events of a stream's ``lines`` (``event:`` and ``data:`` fields, a blank line
    ends a frame); frames of a kind this client does not know are skipped.

    :raises MemfsError: a frame's data is not JSON, or the server sent an ``error`` frame.
    """
    name, data = "", []
    async for line in lines:
        if line:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
            continue
        if name and data:
            try:
                payload = json.loads("\n".join(data))
            except ValueError:
                raise errors.MemfsError(
                    "the server sent a malformed change frame") from None
            event = _feed_event(name, payload, store_id)
            if event is not None:
                yield event
        name, data = "", []
