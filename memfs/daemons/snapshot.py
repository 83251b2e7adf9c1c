"""A store as it was at a boundary, as a read-only :class:`~memfs.protocol.StoreAPI`: what a
time-travel mount (``memfs mount STORE DIR --at AT``, ``memfs run --store NAME@AT``) serves.

:class:`SnapshotStore` wraps the store (local :class:`~memfs.store.Store` or a server's
:class:`~memfs.client.Client`) and one :class:`~memfs.models.Snapshot` of it: ``memories.tree()``
is the snapshot's memories, a memory's content is that of its version in effect (read with
``versions.get`` when the file is first read; a redacted one is empty), the change feed is
empty (a snapshot never changes), and every write raises :class:`~memfs.errors.ReadOnly`.
Version listings and look-ups stop at the boundary, so history shown inside a snapshot mount
ends there too. An unchanged :class:`memfs.fuse.ops.Operations` mounts it (with ``read_only``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from ..errors import NotFound, ReadOnly
from ..models import Change, Memory, MemoryVersion, Page, Snapshot, ToolEvents
from ..protocol import EventsAPI, SessionsAPI, StoreAPI, StoresAPI
from ..rules import format_time, parse_time


class SnapshotStore:
    """A read-only view of ``snap.memory_store_id`` as ``snap`` says it was (see the module
    docstring). Other stores pass through to ``store`` unchanged, and so do its stores,
    sessions and events (tool events, a refused write's too, go to the real store)."""

    def __init__(self, store: StoreAPI, snap: Snapshot) -> None:
        self.base = store
        self.snap = snap
        self.limits = store.limits
        self.stores: StoresAPI = store.stores
        self.sessions: SessionsAPI = store.sessions
        self.events: EventsAPI = store.events
        self.memories = SnapshotMemories(self)
        self.versions = SnapshotVersions(self)
        self.feed = SnapshotFeed(self)

    @property
    def path(self) -> str:
        """The base store's database (what the local change watcher would watch)."""
        return str(getattr(self.base, "path", ""))

    def refuse(self) -> ReadOnly:
        """What every write raises."""
        return ReadOnly(f"memory store {self.snap.memory_store_id} is mounted as it was at "
                        f"{self.snap.boundary_text()}: a snapshot is read-only")

    def redacted_at(self, version_id: str) -> str | None:
        """When the version in effect ``version_id`` was redacted (None: it was not): its file
        is empty (the xattr ``user.memfs.redacted`` of SPEC's history decisions)."""
        return self.snap.redacted.get(version_id)

    def mine(self, store_id: str) -> bool:
        """Whether ``store_id`` is the snapshot's store (else: the base store's, unchanged)."""
        return store_id == self.snap.memory_store_id

    def sync(self) -> None:
        return None

    def check_file(self) -> None:
        self.base.check_file()

    def close(self) -> None:
        """Nothing of its own: whoever opened the base store closes it."""


class SnapshotMemories:
    """The snapshot's memories; every write refused."""

    def __init__(self, view: SnapshotStore) -> None:
        self.view = view
        self.base = view.base
        self._by_id = {m.id: m for m in view.snap.memories}

    def get(self, store_id: str, memory_id: str, *, view: str = "full") -> Memory:
        snap = self.view.snap
        if not self.view.mine(store_id):
            return self.base.memories.get(store_id, memory_id, view=view)
        m = self._by_id.get(memory_id)
        if m is None:
            raise NotFound(f"memory {memory_id!r} not found in {store_id} at "
                           f"{snap.boundary_text()}")
        if view != "full":
            return m
        if m.memory_version_id in snap.redacted:
            return replace(m, content="")
        if m.content is not None:
            return m
        v = self.base.versions.get(store_id, m.memory_version_id, view="full")
        return replace(m, content=v.content or "")

    def tree(self, store_id: str) -> list[Memory]:
        if not self.view.mine(store_id):
            return self.base.memories.tree(store_id)
        return [replace(m, content=None) for m in self.view.snap.memories]

    def count(self, store_id: str) -> int:
        if not self.view.mine(store_id):
            return self.base.memories.count(store_id)
        return len(self.view.snap.memories)

    def check_can_create(self, store_id: str) -> None:
        raise self.view.refuse()

    def write_path(self, store_id: str, path: str | bytes, content: str | bytes, *,
                   actor: Any, events: ToolEvents = None) -> Memory:
        raise self.view.refuse()

    def delete_path(self, store_id: str, path: str, *, actor: Any,
                    events: ToolEvents = None) -> Memory:
        raise self.view.refuse()

    def rename_path(self, store_id: str, old: str | bytes, new: str | bytes, *, actor: Any,
                    replace: bool = True, events: ToolEvents = None) -> Memory:
        raise self.view.refuse()

    def rename_prefix(self, store_id: str, old_prefix: str, new_prefix: str, *, actor: Any,
                      events: ToolEvents = None) -> list[Memory]:
        raise self.view.refuse()

    def delete_prefix(self, store_id: str, prefix: str, *, actor: Any,
                      events: ToolEvents = None) -> list[Memory]:
        raise self.view.refuse()


class SnapshotVersions:
    """The base store's versions, ending at the snapshot's boundary."""

    def __init__(self, view: SnapshotStore) -> None:
        self.view = view
        self.base = view.base

    def list(self, store_id: str, *, created_at_lte: str | datetime | None = None,
             **filters: Any) -> Page[MemoryVersion]:
        """The base store's listing, ending at the boundary (a page may hold fewer versions
        than asked for: those of the boundary's instant that come after it are left out)."""
        if not self.view.mine(store_id):
            return self.base.versions.list(store_id, created_at_lte=created_at_lte, **filters)
        snap = self.view.snap
        lte = snap.time
        if created_at_lte is not None:
            lte = min(lte, format_time(parse_time(created_at_lte)))
        page = self.base.versions.list(store_id, created_at_lte=lte, **filters)
        return Page([v for v in page.data if snap.includes(v.created_at, v.id)],
                    page.next_page, page.prev_page)

    def get(self, store_id: str, version_id: str, *, view: str = "full") -> MemoryVersion:
        v = self.base.versions.get(store_id, version_id, view=view)
        snap = self.view.snap
        if self.view.mine(store_id) and not snap.includes(v.created_at, v.id):
            raise NotFound(f"memory version {version_id!r} is after "
                           f"{snap.boundary_text()}, the time of this snapshot")
        return v

    def snapshot(self, store_id: str, at: str | datetime, *, view: str = "basic") -> Snapshot:
        return self.base.versions.snapshot(store_id, at, view=view)


class SnapshotFeed:
    """An empty feed for the snapshot's store (a snapshot never changes)."""

    def __init__(self, view: SnapshotStore) -> None:
        self.view = view
        self.base = view.base

    def last(self, store_id: str) -> int:
        return 0 if self.view.mine(store_id) else self.base.feed.last(store_id)

    def since(self, store_id: str, seq: int, limit: int = 1000) -> list[Change]:
        if not self.view.mine(store_id):
            return self.base.feed.since(store_id, seq, limit)
        return []
