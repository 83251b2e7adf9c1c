"""The store operations a mount needs, as one protocol that :class:`memfs.store.Store` and
:class:`memfs.client.Client` (a store on a ``memfs serve``) both implement; and
:class:`SearchAPI`, the search a mount's ``.search/`` asks, which both have too.

The filesystem is written against :class:`StoreAPI`, never against either class, so a remote
mount is the same code over another implementation (no ``cast``). Every method may block (on
SQLite's lock, a disk sync or the network): the filesystem calls them in a worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from .models import (
    Change,
    Event,
    Memory,
    MemoryStore,
    MemoryVersion,
    Page,
    RecallResult,
    Session,
    Snapshot,
)


@runtime_checkable
class StoreAPI(Protocol):
    #: The limits the store enforces (:class:`memfs.store.Limits`; a client has its server's).
    limits: Any

    def resolve_store(self, ref: str) -> MemoryStore: ...

    def get_store(self, store_id: str) -> MemoryStore: ...

    def get_session(self, session_id: str) -> Session: ...

    def get_memory(self, store_id: str, memory_id: str, *, view: str = "full") -> Memory: ...

    def tree(self, store_id: str) -> list[Memory]: ...

    def count_memories(self, store_id: str) -> int: ...

    def snapshot(self, store_id: str, at: str | datetime, *, view: str = "basic") -> Snapshot: ...

    def check_can_create(self, store_id: str) -> None: ...

    def last_change(self, store_id: str) -> int: ...

    def changes_since(self, store_id: str, seq: int, limit: int = 1000) -> list[Change]: ...

    # The versions, for a mount's .history/ (memfs.fuse.history); up to a time for a snapshot's
    # (memfs.daemons.snapshot).
    def list_versions(
        self, store_id: str, *, memory_id: str | None = None, operation: str | None = None,
        created_at_lte: str | datetime | None = None, limit: int = 20, page: str | None = None,
        view: str = "basic",
    ) -> Page[MemoryVersion]: ...

    def get_version(
        self, store_id: str, version_id: str, *, view: str = "full"
    ) -> MemoryVersion: ...

    def write_path(
        self, store_id: str, path: str | bytes, content: str | bytes, *, actor: Any,
        events: list[dict[str, Any]] | None = None,
    ) -> Memory: ...

    def delete_path(
        self, store_id: str, path: str, *, actor: Any,
        events: list[dict[str, Any]] | None = None,
    ) -> Memory: ...

    def rename_path(
        self, store_id: str, old: str | bytes, new: str | bytes, *, actor: Any,
        replace: bool = True, events: list[dict[str, Any]] | None = None,
    ) -> Memory: ...

    def rename_prefix(
        self, store_id: str, old_prefix: str, new_prefix: str, *, actor: Any,
        events: list[dict[str, Any]] | None = None,
    ) -> list[Memory]: ...

    def add_events(
        self, session_id: str | None, events: Sequence[dict[str, Any]], *,
        store_id: str | None = None,
    ) -> list[Event]: ...

    def sync(self) -> None: ...

    def check_file(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class CommitsAPI(Protocol):
    """A local store that can tell whether another process committed (:class:`memfs.store.Store`):
    a mount's watcher then skips reading the feed after its own commits."""

    def commits_elsewhere(self) -> int | None: ...


@runtime_checkable
class WordsAPI(Protocol):
    """A local store whose writes queue their words for the words index
    (:class:`memfs.store.Store`): a mount takes the queue in while it is quiet."""

    def catch_up_words(self, store_id: str | None = None) -> int: ...


@runtime_checkable
class SearchAPI(Protocol):
    """A store that answers questions by their words and meaning: :class:`memfs.store.Store`
    and :class:`memfs.client.Client` do, a snapshot (:mod:`memfs.daemons.snapshot`) does not.
    A mount over one has ``.search/``."""

    def search(self, store_id: str, query: str, *, limit: int | None = None,
               path_prefix: str | None = None, threshold: float | None = None,
               channels: tuple[str, ...] = ("words", "meaning")) -> RecallResult: ...

    def search_session(self, session_id: str, query: str, *, limit: int | None = None,
                       path_prefix: str | None = None, threshold: float | None = None,
                       channels: tuple[str, ...] = ("words", "meaning")) -> RecallResult: ...
