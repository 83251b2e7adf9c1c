"""memfs: self-hosted memory stores for AI agents."""

from __future__ import annotations

from .errors import (
    Busy,
    Conflict,
    ContentTooLarge,
    DatabaseUnavailable,
    InvalidContent,
    InvalidCursor,
    InvalidPath,
    InvalidRequest,
    LimitExceeded,
    MemfsError,
    NotFound,
    PathConflict,
    PathEncoding,
    PathTooLong,
    PreconditionFailed,
    ReadOnly,
    StoreArchived,
    Unauthorized,
)
from .models import (
    Actor,
    Change,
    Event,
    Memory,
    MemoryPrefix,
    MemoryStore,
    MemoryVersion,
    Page,
    Session,
    SessionResource,
)
from .store import Limits, Store

__version__ = "0.1.0"

__all__ = [
    "Actor",
    "Busy",
    "Change",
    "Conflict",
    "ContentTooLarge",
    "DatabaseUnavailable",
    "Event",
    "InvalidContent",
    "InvalidCursor",
    "InvalidPath",
    "InvalidRequest",
    "LimitExceeded",
    "Limits",
    "MemfsError",
    "Memory",
    "MemoryPrefix",
    "MemoryStore",
    "MemoryVersion",
    "NotFound",
    "Page",
    "PathConflict",
    "PathEncoding",
    "PathTooLong",
    "PreconditionFailed",
    "ReadOnly",
    "Session",
    "SessionResource",
    "Store",
    "StoreArchived",
    "Unauthorized",
    "__version__",
]
