"""The store operations a mount needs, as protocols of the parts that :class:`memfs.store.Store` and
:class:`memfs.client.Client` (a store on a ``memfs serve``) both implement; and
:class:`SearchAPI`, the search a mount's ``.search/`` asks, and :class:`DescribeAPI`, what its
``.describe`` reads, which both have too.

The filesystem is written against :class:`StoreAPI`, never against either class, so a remote
mount is the same code over another implementation (no ``cast``). Every method may block (on
SQLite's lock, a disk sync or the network): the filesystem calls them in a worker thread.
"""

from __future__ import annotations

import builtins
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
    ToolEvents,
)


class StoresAPI(Protocol):
    """The stores a mount looks up (:class:`memfs.store.stores.Stores`)."""

    def resolve(self, ref: str) -> MemoryStore: ...

    def get(self, store_id: str) -> MemoryStore: ...


class SessionsAPI(Protocol):
    """The session a mount writes for, and the sessions its ``.sessions/`` lists
    (:class:`memfs.store.sessions.Sessions`)."""

    def get(self, session_id: str) -> Session: ...

    def list(
        self, *, memory_store_id: str | None = None, include_archived: bool = False,
        order: str = "desc", limit: int = 20, page: str | None = None,
    ) -> Page[Session]: ...


class MemoriesAPI(Protocol):
    """A store's memories, and the filesystem's path operations
    (:class:`memfs.store.memories.Memories`)."""

    def get(self, store_id: str, memory_id: str, *, view: str = "full") -> Memory: ...

    def tree(self, store_id: str) -> list[Memory]: ...

    def count(self, store_id: str) -> int: ...

    def check_can_create(self, store_id: str) -> None: ...

    def write_path(
        self, store_id: str, path: str | bytes, content: str | bytes, *, actor: Any,
        events: ToolEvents = None,
    ) -> Memory: ...

    def delete_path(
        self, store_id: str, path: str, *, actor: Any,
        events: ToolEvents = None,
    ) -> Memory: ...

    def rename_path(
        self, store_id: str, old: str | bytes, new: str | bytes, *, actor: Any,
        replace: bool = True, events: ToolEvents = None,
    ) -> Memory: ...

    def rename_prefix(
        self, store_id: str, old_prefix: str, new_prefix: str, *, actor: Any,
        events: ToolEvents = None,
    ) -> list[Memory]: ...

    def delete_prefix(
        self, store_id: str, prefix: str, *, actor: Any,
        events: ToolEvents = None,
    ) -> list[Memory]: ...


class VersionsAPI(Protocol):
    """A store's versions, for a mount's .history/ (memfs.fuse.history); up to a time for a
    snapshot's (memfs.daemons.snapshot) (:class:`memfs.store.versions.Versions`)."""

    def snapshot(self, store_id: str, at: str | datetime, *, view: str = "basic") -> Snapshot: ...

    def get(self, store_id: str, version_id: str, *, view: str = "full") -> MemoryVersion: ...

    def list(
        self, store_id: str, *, memory_id: str | None = None, operation: str | None = None,
        created_at_lte: str | datetime | None = None, limit: int = 20, page: str | None = None,
        view: str = "basic",
    ) -> Page[MemoryVersion]: ...


class FeedAPI(Protocol):
    """A store's change feed, which a mount follows (:class:`memfs.store.feed.Feed`)."""

    def last(self, store_id: str) -> int: ...

    def since(self, store_id: str, seq: int, limit: int = 1000) -> list[Change]: ...


class EventsAPI(Protocol):
    """The tool events a mount records, and a session's events its ``.sessions/`` shows (a
    resumed session's prompt among them: :mod:`memfs.launcher.history` reads them too)
    (:class:`memfs.store.events.Events`)."""

    def list(
        self, session_id: str, *, types: Sequence[str] | None = None, order: str = "asc",
        created_at_lte: str | datetime | None = None, limit: int = 20, page: str | None = None,
    ) -> Page[Event]: ...

    def add(
        self, session_id: str | None, events: Sequence[dict[str, Any]], *,
        store_id: str | None = None,
    ) -> builtins.list[Event]: ...


@runtime_checkable
class StoreAPI(Protocol):
    """What a mount needs of a store: the parts above, by the names :class:`memfs.store.Store`
    and :class:`memfs.client.Client` both give them."""

    #: The limits the store enforces (:class:`memfs.store.Limits`; a client has its server's).
    limits: Any

    @property
    def stores(self) -> StoresAPI: ...

    @property
    def sessions(self) -> SessionsAPI: ...

    @property
    def memories(self) -> MemoriesAPI: ...

    @property
    def versions(self) -> VersionsAPI: ...

    @property
    def feed(self) -> FeedAPI: ...

    @property
    def events(self) -> EventsAPI: ...

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
    """The search part of a local store, whose writes queue their words for the words index
    (:class:`memfs.store.search.Search`): a mount takes the queue in while it is quiet."""

    def catch_up_words(self, store_id: str | None = None) -> int: ...


class RecallAPI(Protocol):
    """Questions answered by their words and meaning (:class:`memfs.store.search.Search`)."""

    def in_store(self, store_id: str, query: str, *, limit: int | None = None,
                 path_prefix: str | None = None, threshold: float | None = None,
                 channels: tuple[str, ...] = ("words", "meaning"),
                 memory_type: str | None = None) -> RecallResult: ...

    def in_session(self, session_id: str, query: str, *, limit: int | None = None,
                   path_prefix: str | None = None, threshold: float | None = None,
                   channels: tuple[str, ...] = ("words", "meaning"),
                   memory_type: str | None = None) -> RecallResult: ...


@runtime_checkable
class SearchAPI(Protocol):
    """A store that answers questions by their words and meaning: :class:`memfs.store.Store`
    and :class:`memfs.client.Client` do, a snapshot (:mod:`memfs.daemons.snapshot`) does not.
    A mount over one has ``.search/``."""

    @property
    def search(self) -> RecallAPI: ...


class TypedAPI(Protocol):
    """What a store says of its typed memories (SPEC §8; :class:`memfs.store.typed.Typed`)."""

    def describe(self, store_id: str) -> dict[str, Any]: ...


@runtime_checkable
class DescribeAPI(Protocol):
    """A store that describes what it holds (counts by type, directory and tag, what expires,
    warnings: :meth:`memfs.store.typed.Typed.describe`): :class:`memfs.store.Store` and
    :class:`memfs.client.Client` do; a snapshot (:mod:`memfs.daemons.snapshot`) does not (the
    description is of the live store, never of a past one). A mount over one has
    ``.describe``."""

    @property
    def typed(self) -> TypedAPI: ...
