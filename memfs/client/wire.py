"""What goes on the wire: the :class:`Request` an operation yields, the constants of the
protocol, and the helpers that encode ids, query parameters and bodies as the API reads them
(the SDK's encoding: ``created_at[gte]``, ``name[]`` repeats, ``true``/``false``)."""

from __future__ import annotations

from collections.abc import Awaitable, Generator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

from .. import errors

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0
DEFAULT_MOUNT_ROOT = "/mnt/memory"
#: memfs extension: a request with this header acts as that session (see memfs.api).
SESSION_HEADER = "x-memfs-session-id"
#: Sent with each write of a client with a deadline (:class:`memfs.client.Client`'s
#: ``deadline``): a key of its own, the same when the write is sent again, so that the server
#: applies it once and answers it the same (memfs.api.call).
IDEMPOTENCY_HEADER = "idempotency-key"
#: memfs extension: the time (seconds since the epoch, the server's clock) after which the
#: server must not commit the write; it refuses it then (DeadlinePassed).
DEADLINE_HEADER = "x-memfs-deadline"
#: Seconds before its own deadline at which a client asks the server to stop committing a
#: write: the time an answer of a write committed just before may take to come back.
COMMIT_GRACE = 2.0
#: Seconds between sending a write again after its connection failed (its deadline not over).
RESEND_PAUSE = 0.2
#: Event types a mount records (memfs.store.TOOL_EVENT_TYPES).
TOOL_EVENT_TYPES = ("agent.tool_use", "agent.tool_result")
#: Seconds of silence after which a change stream is taken for dead (the server pings every
#: few seconds).
STREAM_READ_TIMEOUT = 20.0


#: Times a request refused for its key's rate (429 ``rate_limited``: refused before anything
#: was done, so safe to send again, a write too) is sent again after its ``retry-after``, and
#: the longest wait honoured, in seconds.
RATE_RETRIES = 5
RATE_WAIT_MAX = 5.0


def rate_wait(response: Any, attempt: int) -> float | None:
    """Seconds to wait before sending again a request refused for its key's rate (its
    ``attempt``-th refusal), or None: another answer, or retried enough. (The API's other 429,
    too many unfinished uploads, is not sent again here.)"""
    if response.status_code != 429 or attempt > RATE_RETRIES:
        return None
    try:
        code = response.json()["error"]["details"]["error_code"]
    except (ValueError, KeyError, TypeError):
        return None
    if code != "rate_limited":
        return None
    try:
        wait = float(response.headers.get("retry-after", "1"))
    except ValueError:
        wait = 1.0
    return min(max(wait, 0.05), RATE_WAIT_MAX)


@dataclass(frozen=True)
class Request:
    """One HTTP call an operation wants made."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    json: dict[str, Any] | None = None


Op = Generator[Request, Any, T]


class Drive(Protocol):
    """How a part of :class:`memfs.client.Client` runs an operation: sends each request it
    yields over the client's connection, and returns its result (the client's own, handed to
    each part, so that a part needs nothing else of the client)."""

    def __call__(self, op: Op[T], /) -> T: ...


class AsyncDrive(Protocol):
    """The same for a part of :class:`memfs.client.AsyncClient`, awaited."""

    def __call__(self, op: Op[T], /) -> Awaitable[T]: ...


def _given(value: Any) -> bool:
    """False for "leave it alone": None, or the store's UNSET sentinel (a CLI written against
    the Store may pass it through)."""
    return value is not None and type(value).__name__ != "_Unset"


def json_body(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if _given(v)}


def query_params(**fields: Any) -> dict[str, Any]:
    """Query parameters as the SDK encodes them: ``created_at_gte`` -> ``created_at[gte]``,
    lists as ``name[]`` repeats, booleans ``true``/``false``, datetimes in ISO form. An empty
    string is left out, as the store reads it (the server refuses an empty value)."""
    out: dict[str, Any] = {}
    for k, v in fields.items():
        if not _given(v) or v == "":
            continue
        for bound in ("_gte", "_lte", "_gt", "_lt"):
            if k.startswith("created_at") and k.endswith(bound):
                k = f"created_at[{bound[1:]}]"
                break
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, datetime):
            v = v.isoformat()
        elif isinstance(v, list | tuple):
            k, v = k + "[]", list(v)
        out[k] = v
    return out


def utf8(value: str | bytes | None, what: str) -> str | None:
    """JSON carries text only: bytes must be UTF-8 (the server sees what the store would)."""
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            cls = errors.PathEncoding if what == "path" else errors.InvalidContent
            raise cls(f"{what} is not valid UTF-8") from None
    return value


def quoted(segment: str) -> str:
    return quote(segment, safe="")


def store_url(store_id: str) -> str:
    return f"/v1/memory_stores/{quoted(store_id)}"


def client_headers(api_key: str | None, session_id: str | None = None) -> dict[str, str]:
    headers = {"user-agent": "memfs-client", "anthropic-version": "2023-06-01"}
    if api_key:
        headers["x-api-key"] = api_key
    if session_id:
        headers[SESSION_HEADER] = session_id
    return headers


def unix_socket(url: str) -> tuple[str | None, str]:
    """``(socket path, base URL)`` for a server URL: ``unix:/PATH`` (or ``unix:///PATH``, a
    local session's API: memfs.launcher.sessionapi) is served on that unix socket; anything else is
    an HTTP URL, no socket."""
    if url.startswith("unix:"):
        path = url[len("unix:"):]
        if path.startswith("//"):
            path = path[2:]
        return path, "http://memfs.local"
    return None, url
