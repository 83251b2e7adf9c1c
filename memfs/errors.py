"""The memfs exception tree.

Every rule of a memory store is checked in :mod:`memfs.store`, which raises one of these.
The other layers translate them through one table each: :mod:`memfs.fuse.kernel` to an errno,
:mod:`memfs.api` to an HTTP status and error type, :mod:`memfs.cli` to a one-line message and
an exit code. They never re-check a rule themselves.

::

    MemfsError
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
    │   ├── InvalidArchive       an import archive that is damaged or of an unknown format
    │   └── ImportRejected       an import with entries that break a rule (all or nothing)
    ├── Conflict                 HTTP 409, never worth retrying
    │   ├── PathConflict         the path is taken, or overlaps another memory's path
    │   │   ├── DirectoryNotEmpty    a directory rename onto a directory that holds memories
    │   │   └── NotADirectory        a directory rename onto (or below) a memory's path
    │   └── PreconditionFailed   the content hash does not match
    ├── ReadOnly                 a write through a read-only attachment
    ├── Forbidden                a call the credential may not make (HTTP 403)
    ├── Unauthorized             a missing or wrong API key (HTTP 401)
    ├── FeedGap                  the change feed no longer holds changes after a position
    ├── Busy                     the database stayed locked past every retry
    │   └── TooManyRequests      a client or key has too many requests unfinished (HTTP 429)
    └── StorageError             the database cannot be written or read (EIO, HTTP 503)
        ├── StorageFull          the disk under the database is full (ENOSPC)
        ├── DatabaseGone         the database file was deleted or replaced while in use
        └── DatabaseUnavailable  the database cannot be opened (missing, not a database, ...)
"""

from __future__ import annotations


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


class InvalidArchive(InvalidRequest):
    """An archive to import that is damaged (truncated, corrupt, not ours) or of a format
    version this memfs does not know; nothing was imported."""


class ImportRejected(InvalidRequest):
    """Some entries of an import break a rule, and the import is all or nothing: nothing was
    imported. ``entries`` lists every one (``{"path", "reason"}``)."""

    def __init__(self, message: str, *, entries: list[dict[str, object]]):
        super().__init__(message)
        self.entries = entries


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


class FeedGap(MemfsError):
    """Changes after the position asked for were pruned from the change feed: the follower
    must reload the whole tree (and continue from :meth:`memfs.store.Store.last_change`)."""


class Busy(MemfsError):
    """The database stayed locked by other writers for longer than we wait."""


class TooManyRequests(Busy):
    """One client address or API key has too many requests unfinished already (HTTP 429;
    :mod:`memfs.uploads`)."""


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
