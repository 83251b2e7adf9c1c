"""What a write transaction serialises on: its scopes (:meth:`Database.write
<memfs.backends.protocol.Database.write>`).

A scope is a string naming one object whose rules a write relies on: ``store:<id>`` (a
store's limit, its paths and its change feed), ``session:<id>`` (a session's events, in
order), ``key:<id>`` (a key's last use), or another a rule needs (``workspace:<id>``). On
PostgreSQL each scope is one advisory lock (:func:`lock_key`), so writes of different stores
commit side by side; SQLite has one writer and ignores them. A write that names no scope is
serialised with every other write (the safe default for rare administrative writes).
"""

from __future__ import annotations

import hashlib


def store_scope(store_id: str) -> str:
    """The scope of a write to the store ``store_id`` (its memories, versions, feed)."""
    return f"store:{store_id}"


def session_scope(session_id: str) -> str:
    """The scope of a write to the session ``session_id`` (its events, its updates)."""
    return f"session:{session_id}"


def key_scope(key_id: str) -> str:
    """The scope of a write to the API key ``key_id`` (its last use)."""
    return f"key:{key_id}"


def dream_scope(dream_id: str) -> str:
    """The scope of a write to the dream ``dream_id`` (its status, heartbeat, usage)."""
    return f"dream:{dream_id}"


def lock_key(scope: str) -> int:
    """The advisory lock key of ``scope``: its 8-byte BLAKE2b digest as a signed 64-bit
    integer (PostgreSQL's ``bigint``), the same in every process and every release."""
    digest = hashlib.blake2b(scope.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)
