"""The envelope of errors: every exception an endpoint, the gate or the body reader raises
leaves as ``{"type": "error", "error": {...}, "request_id"}``, its HTTP status, ``error.type``
and ``details.error_code`` from the one table of errors (:data:`memfs.errors.WIRE`, through
:func:`memfs.errors.to_wire`), with the headers that tell a client whether to retry and whether
the connection is kept."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from .. import errors


def error_body(exc: BaseException, request_id: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    """``(status, envelope, headers)`` for an exception, through :data:`memfs.errors.WIRE`."""
    status, err = errors.to_wire(exc)
    headers = {}
    if 400 <= status < 500 and status not in (408, 429):
        headers["x-should-retry"] = "false"
    if isinstance(exc, errors.Busy):
        headers["retry-after"] = str(getattr(exc, "retry_after", 1))
    if isinstance(exc, errors.RequestTooLarge | errors.RequestTimeout | errors.TooManyRequests
                  | errors.UploadsFull):
        headers["connection"] = "close"  # the rest of the body is never read
    return status, {"type": "error", "error": err, "request_id": request_id}, headers


def error_response(exc: BaseException, request_id: str) -> JSONResponse:
    status, body, headers = error_body(exc, request_id)
    return JSONResponse(body, status_code=status, headers=headers)
