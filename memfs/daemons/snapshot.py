"""A store as it was at a boundary, as a read-only :class:`~memfs.protocol.StoreAPI`: what a
time-travel mount (``memfs mount STORE DIR --at AT``, ``memfs run --store NAME@AT``) serves.

:class:`SnapshotStore` wraps the store (local :class:`~memfs.store.Store` or a server's
:class:`~memfs.client.Client`) and one :class:`~memfs.models.Snapshot` of it: ``tree()`` is
the snapshot's memories, a memory's content is that of its version in effect (read with
``get_version`` when the file is first read; a redacted one is empty), the change feed is
empty (a snapshot never changes), and every write raises :class:`~memfs.errors.ReadOnly`.
Version listings and look-ups stop at the boundary, so history shown inside a snapshot mount
ends there too. An unchanged :class:`memfs.fuse.ops.Operations` mounts it (with ``read_only``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..errors import NotFound, ReadOnly
from ..models import Change, Event, Memory, MemoryStore, MemoryVersion, Page, Session, Snapshot
from ..protocol import StoreAPI
from ..rules import format_time, parse_time


class SnapshotStore:
    """A read-only view of ``snap.memory_store_id`` as ``snap`` says it was (see the module
    docstring). Other stores pass through to ``store`` unchanged."""

    def __init__(self, store: StoreAPI, snap: Snapshot) -> None:
        self.base = store
        self.snap = snap
        self.limits = store.limits
        self._by_id = {m.id: m for m in snap.memories}

    @property
    def path(self) -> str:
        """The base store's database (what the local change watcher would watch)."""
        return str(getattr(self.base, "path", ""))

    def _refuse(self) -> ReadOnly:
        return ReadOnly(f"memory store {self.snap.memory_store_id} is mounted as it was at "
                        f"{self.snap.boundary_text()}: a snapshot is read-only")

    def redacted_at(self, version_id: str) -> str | None:
        """When the version in effect ``version_id`` was redacted (None: it was not): its file
        is empty (the xattr ``user.memfs.redacted`` of SPEC's history decisions)."""
        return self.snap.redacted.get(version_id)

    # -- reads --------------------------------------------------------------------------------

    def resolve_store(self, ref: str) -> MemoryStore:
        return self.base.resolve_store(ref)

    def get_store(self, store_id: str) -> MemoryStore:
        return self.base.get_store(store_id)

    def get_session(self, session_id: str) -> Session:
        return self.base.get_session(session_id)

    def _mine(self, store_id: str) -> bool:
        return store_id == self.snap.memory_store_id

    def get_memory(self, store_id: str, memory_id: str, *, view: str = "full") -> Memory:
        if not self._mine(store_id):
            return self.base.get_memory(store_id, memory_id, view=view)
        m = self._by_id.get(memory_id)
        if m is None:
            raise NotFound(f"memory {memory_id!r} not found in {store_id} at "
                           f"{self.snap.boundary_text()}")
        if view != "full":
            return m
        if m.memory_version_id in self.snap.redacted:
            return replace(m, content="")
        if m.content is not None:
            return m
        v = self.base.get_version(store_id, m.memory_version_id, view="full")
        return replace(m, content=v.content or "")

    def tree(self, store_id: str) -> list[Memory]:
        if not self._mine(store_id):
            return self.base.tree(store_id)
        return [replace(m, content=None) for m in self.snap.memories]

    def count_memories(self, store_id: str) -> int:
        if not self._mine(store_id):
            return self.base.count_memories(store_id)
        return len(self.snap.memories)

    def last_change(self, store_id: str) -> int:
        return 0 if self._mine(store_id) else self.base.last_change(store_id)

    def changes_since(self, store_id: str, seq: int, limit: int = 1000) -> list[Change]:
        if not self._mine(store_id):
            return self.base.changes_since(store_id, seq, limit)
        return []

    def list_versions(self, store_id: str, *, created_at_lte: str | datetime | None = None,
                      **filters: Any) -> Page[MemoryVersion]:
        """The base store's listing, ending at the boundary (a page may hold fewer versions
        than asked for: those of the boundary's instant that come after it are left out)."""
        if not self._mine(store_id):
            return self.base.list_versions(store_id, created_at_lte=created_at_lte, **filters)
        lte = self.snap.time
        if created_at_lte is not None:
            lte = min(lte, format_time(parse_time(created_at_lte)))
        page = self.base.list_versions(store_id, created_at_lte=lte, **filters)
        return Page([v for v in page.data if self.snap.includes(v.created_at, v.id)],
                    page.next_page, page.prev_page)

    def get_version(self, store_id: str, version_id: str, *, view: str = "full"
                    ) -> MemoryVersion:
        v = self.base.get_version(store_id, version_id, view=view)
        if self._mine(store_id) and not self.snap.includes(v.created_at, v.id):
            raise NotFound(f"memory version {version_id!r} is after "
                           f"{self.snap.boundary_text()}, the time of this snapshot")
        return v

    # -- writes: refused ----------------------------------------------------------------------

    def check_can_create(self, store_id: str) -> None:
        raise self._refuse()

    def write_path(self, store_id: str, path: str | bytes, content: str | bytes, *,
                   actor: Any, events: list[dict[str, Any]] | None = None) -> Memory:
        raise self._refuse()

    def delete_path(self, store_id: str, path: str, *, actor: Any,
                    events: list[dict[str, Any]] | None = None) -> Memory:
        raise self._refuse()

    def rename_path(self, store_id: str, old: str | bytes, new: str | bytes, *, actor: Any,
                    replace: bool = True, events: list[dict[str, Any]] | None = None) -> Memory:
        raise self._refuse()

    def rename_prefix(self, store_id: str, old_prefix: str, new_prefix: str, *, actor: Any,
                      events: list[dict[str, Any]] | None = None) -> list[Memory]:
        raise self._refuse()

    def snapshot(self, store_id: str, at: str | datetime, *, view: str = "basic") -> Snapshot:
        return self.base.snapshot(store_id, at, view=view)

    # -- the rest: the base store's --------------------------------------------------------

    def add_events(self, session_id: str | None, events: Sequence[dict[str, Any]], *,
                   store_id: str | None = None) -> list[Event]:
        """Tool events (a refused write is logged like any other) go to the real store."""
        return self.base.add_events(session_id, events, store_id=store_id)

    def sync(self) -> None:
        return None

    def check_file(self) -> None:
        self.base.check_file()

    def close(self) -> None:
        """Nothing of its own: whoever opened the base store closes it."""
