"""The memfs exception tree, and the one table of how each error leaves memfs.

Every rule of a memory store is checked in :mod:`memfs.store`, which raises one of these.
The other layers translate them through one table, :data:`WIRE`: a :class:`Wire` row per class
gives its errno (:mod:`memfs.fuse.kernel`), its HTTP status, ``error.type`` and
``details.error_code`` (:mod:`memfs.api`, :func:`to_wire`), and its exit code
(:mod:`memfs.cli`); :mod:`memfs.client` raises the same class again from an error response with
:func:`from_wire`, the table read backwards. They never re-check a rule themselves.

Every class of this module has a row of its own, with its own ``(error.type,
details.error_code)``, so that an error comes back out of the API as the class it went in as
(tests/unit/test_errors.py); a subclass defined elsewhere (:class:`memfs.fuse.runtime.MountError`,
``memfs.backends.postgresql.ConnectionLost``...) has the row of its nearest ancestor.
Anything that is not a :class:`MemfsError` (a bug) leaves as :class:`MemfsError`'s row (HTTP
500, its message kept back).

::

    MemfsError                   (EIO, HTTP 500, exit 1: what nothing below says)
    ├── NotFound                 unknown or deleted id / path
    ├── InvalidRequest           bad input (HTTP 400)
    │   ├── InvalidPath          a path or prefix breaks the rules of API.md §2.16
    │   │   ├── PathTooLong      over 1,024 bytes or 20 segments
    │   │   └── PathEncoding     not valid UTF-8, or not NFC
    │   ├── InvalidContent       content that is not valid UTF-8
    │   ├── ContentTooLarge      content over 102,400 bytes
    │   ├── StoreArchived        a write to an archived store
    │   ├── LimitExceeded        a store already holds its maximum of memories
    │   ├── InvalidCursor        a page cursor that this listing did not hand out
    │   ├── InvalidMetadata      a store metadata key memfs reads (memfs_types, memfs_expiry)
    │   ├── InvalidArchive       an import archive that is damaged or of an unknown format
    │   ├── ImportRejected       an import with entries that break a rule (all or nothing)
    │   ├── MethodNotAllowed     HTTP: the path exists, the method does not (405)
    │   ├── RequestTooLarge      HTTP: a request body over its limit (413)
    │   ├── RequestTimeout       HTTP: a request body that came too slowly (408)
    │   └── ClientGone           HTTP: the client left before its body was complete
    ├── DeadlinePassed           a write whose client's deadline passed before it could commit
    ├── Conflict                 HTTP 409, never worth retrying
    │   ├── PathConflict         the path is taken, or overlaps another memory's path
    │   │   ├── DirectoryNotEmpty    a directory rename onto a directory that holds memories
    │   │   └── NotADirectory        a directory rename onto (or below) a memory's path
    │   └── PreconditionFailed   the content hash does not match
    ├── Forbidden                a call the credential may not make (HTTP 403)
    ├── ReadOnly                 a write through a read-only attachment
    ├── Unauthorized             a missing or wrong API key (HTTP 401)
    │   └── UnknownKey           a key that is none of the server's (a guess; throttled)
    ├── FeedGap                  the change feed no longer holds changes after a position
    ├── Busy                     the database stayed locked past every retry
    │   ├── TooManyRequests      a client or key has too many requests unfinished (HTTP 429)
    │   │   └── RateLimited      a key sent more requests than its rate allows (HTTP 429)
    │   └── UploadsFull          HTTP: the server reads as many request bodies as it may
    └── StorageError             the database cannot be written or read (EIO, HTTP 503)
        ├── StorageFull          the disk under the database is full (ENOSPC)
        ├── DatabaseGone         the database file was deleted or replaced while in use
        └── DatabaseUnavailable  the database cannot be opened (missing, not a database, ...)
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Any


class MemfsError(Exception):
    """Base class of every error memfs raises on purpose."""

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.__class__.__name__


class NotFound(MemfsError):
    """The object does not exist (or no longer does)."""


class InvalidRequest(MemfsError):
    """The input breaks a rule; nothing was changed."""


class InvalidPath(InvalidRequest):
    """A memory path or path prefix breaks the path rules."""


class PathTooLong(InvalidPath):
    """A path over the byte or segment limit."""


class PathEncoding(InvalidPath):
    """A path that is not valid UTF-8 or not in Unicode NFC."""


class InvalidContent(InvalidRequest):
    """Content that is not valid UTF-8 text."""


class ContentTooLarge(InvalidRequest):
    """Content over the per-memory byte limit."""


class StoreArchived(InvalidRequest):
    """The store is archived: it can be read and cleaned up, not written."""


class LimitExceeded(InvalidRequest):
    """A count limit (memories per store, stores per session) is reached."""


class InvalidCursor(InvalidRequest):
    """A page cursor that does not belong to this listing."""


class InvalidMetadata(InvalidRequest):
    """A store metadata value that memfs reads and cannot use (``memfs_types``,
    ``memfs_expiry``: :func:`memfs.store.frontmatter.check_metadata`); nothing was changed.
    On the wire ``details.error_code`` ``invalid_metadata``, which the SDK reads as its
    ``BetaInvalidMetadataError`` (API.md §1.6)."""


class InvalidArchive(InvalidRequest):
    """An archive to import that is damaged (truncated, corrupt, not ours) or of a format
    version this memfs does not know; nothing was imported."""


class ImportRejected(InvalidRequest):
    """Some entries of an import break a rule, and the import is all or nothing: nothing was
    imported. ``entries`` lists every one (``{"path", "reason"}``)."""

    def __init__(self, message: str, *, entries: list[dict[str, object]]):
        super().__init__(message)
        self.entries = entries


class MethodNotAllowed(InvalidRequest):
    """The path exists, the method does not (HTTP 405)."""


class RequestTooLarge(InvalidRequest):
    """The whole request body is over its limit (:data:`memfs.api.body.MAX_BODY_BYTES`, an
    import's :data:`memfs.api.archive.MAX_IMPORT_BYTES`)."""


class RequestTimeout(InvalidRequest):
    """The request body did not arrive in time (:data:`memfs.api.body.BODY_IDLE_SECONDS`,
    :data:`memfs.api.body.BODY_TOTAL_SECONDS`)."""


class ClientGone(InvalidRequest):
    """The client disconnected before its request body was complete (nobody reads the
    answer; it is not a server failure)."""


class DeadlinePassed(MemfsError):
    """A write refused because the deadline its client set (the ``x-memfs-deadline`` header)
    passed before it could commit: nothing was written, and the same request (its
    ``Idempotency-Key``) is answered so again. A remote mount sets one on each write so that a
    close it reports as failed is never committed later (docs/http-api.md)."""


class Conflict(MemfsError):
    """The request conflicts with the current state; retrying will not help."""


class PathConflict(Conflict):
    """The path is in use by another memory, or overlaps one."""

    def __init__(self, message: str, *, conflicting_memory_id: str, conflicting_path: str):
        super().__init__(message)
        self.conflicting_memory_id = conflicting_memory_id
        self.conflicting_path = conflicting_path


class DirectoryNotEmpty(PathConflict):
    """A directory rename whose target directory already holds memories (POSIX ENOTEMPTY):
    directories are never merged."""


class NotADirectory(PathConflict):
    """A directory rename whose target, or one of its parents, is a memory (POSIX ENOTDIR)."""


class PreconditionFailed(Conflict):
    """The expected content hash does not match the memory's current one."""


class ReadOnly(MemfsError):
    """A write through a read-only attachment."""


class Forbidden(MemfsError):
    """The credential may not make this call: a session token (the agent's) asking for what
    only the owner of the server may do (create or delete stores, sessions, dreams...)."""


class Unauthorized(MemfsError):
    """The request carries no API key, or one the server does not accept."""


class UnknownKey(Unauthorized):
    """The key presented is none of the server's: not a server key, nor a stored key or
    session token it knows (a revoked or expired one is plain :class:`Unauthorized`). What a
    guess gets: counted per client address (:class:`memfs.api.limits.AuthFailures`)."""


class FeedGap(MemfsError):
    """Changes after the position asked for were pruned from the change feed: the follower
    must reload the whole tree (and continue from :meth:`memfs.store.Store.feed.last`)."""


class Busy(MemfsError):
    """The database stayed locked by other writers for longer than we wait."""


class TooManyRequests(Busy):
    """One client address or API key has too many requests unfinished already (HTTP 429;
    :mod:`memfs.api.uploads`)."""


class RateLimited(TooManyRequests):
    """An API key sent more requests than its rate allows (HTTP 429 with ``retry-after``:
    :class:`memfs.api.limits.KeyRates`)."""

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UploadsFull(Busy):
    """The server is reading as many request bodies as it reads at once
    (:class:`memfs.api.uploads.Uploads`)."""


class StorageError(MemfsError):
    """The database failed (an I/O error, a damaged file); nothing was changed."""


class StorageFull(StorageError):
    """No space is left for the database; nothing was changed."""


class DatabaseGone(StorageError):
    """The database file was deleted, renamed over or overwritten while in use."""


class DatabaseUnavailable(StorageError):
    """The database cannot be used: missing (and not to be created), not an SQLite file, a
    directory, unreadable, or no place for it (no HOME)."""


class WouldBlock(Exception):  # noqa: N818 (a signal between layers, not an error of memfs)
    """A store call made in ``nowait`` mode would have had to wait for a lock; nothing was done
    (the caller runs it again where waiting is fine). Never reaches a user."""


# --------------------------------------------------------------------------------------------
# the one table: how each error leaves memfs, and comes back


@dataclass(frozen=True)
class Wire:
    """How one class of error leaves each layer of memfs."""

    #: What a handler of the mount answers the kernel (:mod:`memfs.fuse.kernel`).
    errno: int
    #: The HTTP status of the API's answer (:mod:`memfs.api.errortable`).
    status: int
    #: ``error.type`` of the envelope: one of the SDK's types (API.md §1.6).
    type: str
    #: ``error.details.error_code`` (None: the envelope has no ``details``); with ``type``,
    #: what :func:`from_wire` reads the class back from.
    code: str | None
    #: The ``memfs`` command's exit code (:mod:`memfs.cli`; 2 is click's, for usage errors).
    exit: int


_EIO, _EINVAL, _EBUSY = errno.EIO, errno.EINVAL, errno.EBUSY
_BAD = "invalid_request_error"

#: Every class of this module and its :class:`Wire`, parents before their children. The first
#: row of an HTTP status is the class a bare status stands for (:func:`from_wire`: an answer
#: without the envelope, from a proxy say): so Forbidden comes before ReadOnly.
WIRE: dict[type[MemfsError], Wire] = {
    MemfsError: Wire(_EIO, 500, "api_error", None, 1),
    NotFound: Wire(errno.ENOENT, 404, "not_found_error", None, 3),
    InvalidRequest: Wire(_EINVAL, 400, _BAD, None, 5),
    InvalidPath: Wire(_EINVAL, 400, _BAD, "invalid_path", 5),
    PathTooLong: Wire(errno.ENAMETOOLONG, 400, _BAD, "path_too_long", 5),
    PathEncoding: Wire(errno.EILSEQ, 400, _BAD, "path_encoding", 5),
    InvalidContent: Wire(errno.EILSEQ, 400, _BAD, "invalid_content", 5),
    ContentTooLarge: Wire(errno.EFBIG, 400, _BAD, "content_too_large", 5),
    StoreArchived: Wire(errno.EROFS, 400, _BAD, "store_archived", 5),
    LimitExceeded: Wire(errno.ENOSPC, 400, _BAD, "limit_exceeded", 5),
    InvalidCursor: Wire(_EINVAL, 400, _BAD, "invalid_cursor", 5),
    InvalidMetadata: Wire(_EINVAL, 400, _BAD, "invalid_metadata", 5),
    InvalidArchive: Wire(_EINVAL, 400, _BAD, "invalid_archive", 5),
    ImportRejected: Wire(_EINVAL, 400, _BAD, "import_rejected", 5),
    MethodNotAllowed: Wire(_EINVAL, 405, _BAD, "method_not_allowed", 5),
    RequestTooLarge: Wire(_EINVAL, 413, _BAD, "request_too_large", 5),
    # The body came too slowly: a failure of the way there, not of the input (the API does
    # not tell the client not to retry it), so EIO and 1 where a client sees it.
    RequestTimeout: Wire(_EIO, 408, "timeout_error", "request_timeout", 1),
    ClientGone: Wire(_EINVAL, 400, _BAD, "client_disconnected", 5),
    # Not written, and never will be: a failure of the way there (EIO), as RequestTimeout.
    DeadlinePassed: Wire(_EIO, 408, "timeout_error", "deadline_passed", 1),
    Conflict: Wire(errno.EEXIST, 409, "conflict_error", None, 4),
    PathConflict: Wire(errno.EEXIST, 409, "memory_path_conflict_error", None, 4),
    DirectoryNotEmpty: Wire(errno.ENOTEMPTY, 409, "memory_path_conflict_error",
                            "directory_not_empty", 4),
    NotADirectory: Wire(errno.ENOTDIR, 409, "memory_path_conflict_error", "not_a_directory", 4),
    PreconditionFailed: Wire(_EBUSY, 409, "memory_precondition_failed_error", None, 4),
    Forbidden: Wire(errno.EACCES, 403, "permission_error", "forbidden", 6),
    ReadOnly: Wire(errno.EROFS, 403, "permission_error", "read_only", 6),
    Unauthorized: Wire(_EIO, 401, "authentication_error", None, 1),
    UnknownKey: Wire(_EIO, 401, "authentication_error", "unknown_key", 1),
    # Never on the wire (the API answers a pruned position with "reset"); a row all the same.
    FeedGap: Wire(_EIO, 500, "api_error", "feed_gap", 1),
    Busy: Wire(_EBUSY, 503, "overloaded_error", None, 7),
    TooManyRequests: Wire(_EBUSY, 429, "rate_limit_error", "too_many_unfinished_requests", 7),
    RateLimited: Wire(_EBUSY, 429, "rate_limit_error", "rate_limited", 7),
    UploadsFull: Wire(_EBUSY, 503, "overloaded_error", "uploads_full", 7),
    StorageError: Wire(_EIO, 503, "api_error", "storage_error", 8),
    StorageFull: Wire(errno.ENOSPC, 507, "api_error", "storage_full", 8),
    DatabaseGone: Wire(_EIO, 503, "api_error", "database_gone", 8),
    DatabaseUnavailable: Wire(_EIO, 503, "api_error", "database_unavailable", 8),
}


def wire(exc: BaseException | type[BaseException]) -> Wire:
    """The row of an exception (or of its class): its class's, else the nearest ancestor's
    that has one; anything that is no :class:`MemfsError` (a bug) has MemfsError's."""
    cls = exc if isinstance(exc, type) else type(exc)
    return next((WIRE[c] for c in cls.__mro__ if c in WIRE), WIRE[MemfsError])


def to_wire(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """``(HTTP status, the envelope's error object)`` of an exception: its :func:`wire` row's
    type and code, its message (a bug's is kept back: "internal server error"), and the fields
    of the classes that have some (:func:`from_wire` reads them back)."""
    row = wire(exc)
    message = exc.message if isinstance(exc, MemfsError) else "internal server error"
    err: dict[str, Any] = {"type": row.type, "message": message}
    if row.code is not None:
        err["details"] = {"error_code": row.code}
    if isinstance(exc, PathConflict):
        err["conflicting_memory_id"] = exc.conflicting_memory_id
        err["conflicting_path"] = exc.conflicting_path
    if isinstance(exc, ImportRejected):
        err["skipped"] = exc.entries  # every entry that cannot be imported, with its reason
    return row.status, err


#: ``(error.type, details.error_code)`` -> the class: :data:`WIRE` read backwards.
#: MemfsError's own row is no class to read back: it is what an unknown answer becomes.
_BY_WIRE: dict[tuple[str | None, str | None], type[MemfsError]] = {
    (w.type, w.code): cls for cls, w in WIRE.items() if cls is not MemfsError}
#: An HTTP status -> the class of its first row (the most general; read from the end, so that
#: the first row is the one kept); 500 says nothing more than MemfsError's row does.
_BY_STATUS: dict[int, type[MemfsError]] = {
    w.status: cls for cls, w in reversed(WIRE.items()) if w.status != 500}


def from_wire(status: int, body: Any) -> MemfsError:
    """The :mod:`memfs.errors` exception of an error answer (its status and parsed body), the
    inverse of :func:`to_wire`: the class of ``(error.type, details.error_code)``, else of
    the type alone (a code this memfs does not know yet), else of the status (an answer
    without the envelope); else a 4xx is an :class:`InvalidRequest`, a 529 (overloaded) a
    :class:`Busy`, and anything else a :class:`MemfsError` that says "server error (HTTP n)".
    """
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        err = {}
    details = err.get("details")
    type_ = _text(err.get("type"))
    code = _text(details.get("error_code")) if isinstance(details, dict) else None
    message = err.get("message") or f"HTTP {status}"
    cls = _BY_WIRE.get((type_, code)) or _BY_WIRE.get((type_, None)) or _BY_STATUS.get(status)
    if cls is None and 400 <= status < 500:
        cls = InvalidRequest
    if cls is None and status == 529:
        cls = Busy
    if cls is None:
        return MemfsError(f"server error (HTTP {status}): {message}")
    if issubclass(cls, PathConflict):
        return cls(message, conflicting_memory_id=err.get("conflicting_memory_id") or "",
                   conflicting_path=err.get("conflicting_path") or "")
    if issubclass(cls, ImportRejected):
        skipped = err.get("skipped")
        return cls(message, entries=skipped if isinstance(skipped, list) else [])
    return cls(message)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
