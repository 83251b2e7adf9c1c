"""The table of errors: every exception an endpoint, the gate or the body reader raises leaves
as one envelope, its HTTP status, ``error.type`` and ``details.error_code`` from :data:`ERRORS`;
and the errors of the HTTP layer itself (a method not allowed, a body too large or too slow)."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from .. import errors
from ..uploads import UploadsFull


class MethodNotAllowed(errors.InvalidRequest):
    """The path exists, the method does not."""


class RequestTooLarge(errors.InvalidRequest):
    """The whole request body is over :data:`MAX_BODY_BYTES`."""


class RequestTimeout(errors.InvalidRequest):
    """The request body did not arrive in time (:data:`BODY_IDLE_SECONDS`,
    :data:`BODY_TOTAL_SECONDS`)."""


class ClientGone(errors.InvalidRequest):
    """The client disconnected before its request body was complete (nobody reads the
    answer; it is not a server failure)."""


#: Exception -> (HTTP status, ``error.type``, ``error.details.error_code``); first match wins.
#: The error codes let :mod:`memfs.client` raise the exact :mod:`memfs.errors` subclass again.
ERRORS: list[tuple[type[BaseException], int, str, str | None]] = [
    (errors.NotFound, 404, "not_found_error", None),
    (errors.DirectoryNotEmpty, 409, "memory_path_conflict_error", "directory_not_empty"),
    (errors.NotADirectory, 409, "memory_path_conflict_error", "not_a_directory"),
    (errors.PathConflict, 409, "memory_path_conflict_error", None),
    (errors.PreconditionFailed, 409, "memory_precondition_failed_error", None),
    (errors.Conflict, 409, "conflict_error", None),
    (MethodNotAllowed, 405, "invalid_request_error", "method_not_allowed"),
    (RequestTooLarge, 413, "invalid_request_error", "request_too_large"),
    (RequestTimeout, 408, "timeout_error", "request_timeout"),
    (ClientGone, 400, "invalid_request_error", "client_disconnected"),
    (errors.PathTooLong, 400, "invalid_request_error", "path_too_long"),
    (errors.PathEncoding, 400, "invalid_request_error", "path_encoding"),
    (errors.InvalidPath, 400, "invalid_request_error", "invalid_path"),
    (errors.InvalidContent, 400, "invalid_request_error", "invalid_content"),
    (errors.ContentTooLarge, 400, "invalid_request_error", "content_too_large"),
    (errors.StoreArchived, 400, "invalid_request_error", "store_archived"),
    (errors.LimitExceeded, 400, "invalid_request_error", "limit_exceeded"),
    (errors.InvalidCursor, 400, "invalid_request_error", "invalid_cursor"),
    (errors.InvalidArchive, 400, "invalid_request_error", "invalid_archive"),
    (errors.ImportRejected, 400, "invalid_request_error", "import_rejected"),
    (errors.InvalidRequest, 400, "invalid_request_error", None),
    (errors.Unauthorized, 401, "authentication_error", None),
    (errors.ReadOnly, 403, "permission_error", "read_only"),
    (errors.Forbidden, 403, "permission_error", "forbidden"),
    (errors.TooManyRequests, 429, "rate_limit_error", "too_many_unfinished_requests"),
    (errors.Busy, 503, "overloaded_error", None),
    (errors.StorageFull, 507, "api_error", "storage_full"),
    (errors.StorageError, 503, "api_error", "storage_error"),
    (BaseException, 500, "api_error", None),
]


def error_body(exc: BaseException, request_id: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    """``(status, envelope, headers)`` for an exception, through :data:`ERRORS`."""
    status, type_, code = next((s, t, c) for cls, s, t, c in ERRORS if isinstance(exc, cls))
    # A bug says so without leaking internals.
    message = exc.message if isinstance(exc, errors.MemfsError) else "internal server error"
    err: dict[str, Any] = {"type": type_, "message": message}
    if code is not None:
        err["details"] = {"error_code": code}
    if isinstance(exc, errors.PathConflict):
        err["conflicting_memory_id"] = exc.conflicting_memory_id
        err["conflicting_path"] = exc.conflicting_path
    if isinstance(exc, errors.ImportRejected):
        err["skipped"] = exc.entries  # every entry that cannot be imported, with its reason
    headers = {}
    if 400 <= status < 500 and status not in (408, 429):
        headers["x-should-retry"] = "false"
    if isinstance(exc, errors.Busy):
        headers["retry-after"] = "1"
    if isinstance(exc, RequestTooLarge | RequestTimeout | errors.TooManyRequests | UploadsFull):
        headers["connection"] = "close"  # the rest of the body is never read
    return status, {"type": "error", "error": err, "request_id": request_id}, headers


def error_response(exc: BaseException, request_id: str) -> JSONResponse:
    status, body, headers = error_body(exc, request_id)
    return JSONResponse(body, status_code=status, headers=headers)
