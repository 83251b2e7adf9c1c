"""Request parsing: reading a request body within its bounds of size, time and rate (the
JSON body of every endpoint, checked against its declared fields; the upload of an import),
and the constants of those bounds (tests patch them here)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
from starlette.requests import ClientDisconnect, Request

from .. import errors
from . import spec
from .uploads import Uploads

#: Largest request body accepted (a 100 kB memory is at most ~600 kB as escaped JSON).
MAX_BODY_BYTES = 4 * 1024 * 1024


#: Seconds a request body may go without sending a byte, and seconds it may take in all,
#: before the request is answered 408 and its connection closed: a client that sends headers
#: and then stalls must not hold a connection (and a file descriptor) for ever.
BODY_IDLE_SECONDS = 10.0
BODY_TOTAL_SECONDS = 60.0
#: And past its first :data:`BODY_GRACE_SECONDS` a body must have come at
#: :data:`MIN_BODY_RATE` bytes per second at least: at 1 byte/s (a byte well within every
#: idle limit) a client held its connection for the whole :data:`BODY_TOTAL_SECONDS`.
BODY_GRACE_SECONDS = 5.0
MIN_BODY_RATE = 4096


async def read_json(request: Request, fields: Sequence[spec.Param]) -> dict[str, Any]:
    """The JSON object body, checked against the operation's declared ``fields``
    (:func:`memfs.api.spec.check_body`); empty means ``{}``.

    :raises RequestTooLarge, RequestTimeout, ClientGone, InvalidRequest:
    """
    raw = await read_body(request)
    if not raw.strip():
        body: Any = {}
    else:
        try:
            body = json.loads(raw, parse_constant=_no_constant)
        except (ValueError, RecursionError) as e:
            raise errors.InvalidRequest(f"request body is not valid JSON: {e}") from None
    return spec.check_body(body, fields)


async def body_chunks(request: Request, max_bytes: int, total_seconds: float,
                       what: str) -> AsyncIterator[bytes]:
    """The body's chunks: at most ``max_bytes`` in all, each chunk within
    :data:`BODY_IDLE_SECONDS`, past :data:`BODY_GRACE_SECONDS` at :data:`MIN_BODY_RATE` on
    average, all within ``total_seconds`` (``what`` names the body in the errors). The body
    holds one of the app's :class:`~memfs.api.uploads.Uploads` while it is read: none free, it is
    not read at all.

    :raises RequestTooLarge, RequestTimeout, ClientGone, TooManyRequests, UploadsFull:
    """
    state = request.scope.get("state", {})
    uploads: Uploads = state.get("uploads") or _UNBOUNDED
    client = request.client.host if request.client else ""
    actor, user = state.get("actor"), state.get("user")
    key = actor.id if actor is not None else getattr(user, "key_id", None)
    with uploads.hold(client, key):
        size = 0
        start = anyio.current_time()
        last = start
        stream = request.stream()
        try:
            while True:
                # The next chunk is due within the idle limit, at the minimum average rate
                # past the grace period, and within the whole body's time.
                due = min(last + BODY_IDLE_SECONDS,
                          start + BODY_GRACE_SECONDS + size / MIN_BODY_RATE,
                          start + total_seconds)
                with anyio.move_on_at(due) as timer:
                    chunk = await anext(stream, None)
                if timer.cancelled_caught:
                    raise errors.RequestTimeout(
                        f"the {what} did not arrive in time ({size} bytes in "
                        f"{anyio.current_time() - start:.1f} s; allowed: "
                        f"{BODY_IDLE_SECONDS:g} s without data, {MIN_BODY_RATE} bytes/s "
                        f"after the first {BODY_GRACE_SECONDS:g} s, {total_seconds:g} s in all)"
                    )
                if chunk is None:
                    return
                last = anyio.current_time()
                size += len(chunk)
                if size > max_bytes:
                    raise errors.RequestTooLarge(f"{what} over {max_bytes} bytes")
                yield chunk
        except ClientDisconnect:
            raise errors.ClientGone(
                "the client disconnected before sending the whole body") from None
        finally:
            await stream.aclose()


#: The bodies of an app that was given no :class:`Uploads` (never in ``create_app``).
_UNBOUNDED = Uploads(total=1 << 62, per_client=1 << 62, per_key=1 << 62)


async def read_body(request: Request) -> bytes:
    """The whole body, at most :data:`MAX_BODY_BYTES`, within :data:`BODY_TOTAL_SECONDS`.

    :raises RequestTooLarge, RequestTimeout, ClientGone:
    """
    chunks = body_chunks(request, MAX_BODY_BYTES, BODY_TOTAL_SECONDS, "request body")
    return b"".join([chunk async for chunk in chunks])


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
