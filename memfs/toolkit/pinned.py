"""A store's pinned memories now (SPEC §9), for the memory tool
(:meth:`memfs.tools.MemoryTool.pinned`) and MCP (``memory_pinned``, the server's
instructions): over any store (a Store, a Client), with the rules a session applies when it
records them (:mod:`memfs.rules`: the prefix, what is pinned and not expired, the order, the
budgets), so that the text :func:`memfs.launcher.pinned.block` makes of them is what a session
started now would put after the store's note."""

from __future__ import annotations

from collections.abc import Generator
from datetime import UTC, datetime
from typing import Any

from ..models import Memory, MemoryStore, SessionPinned
from ..rules import (
    PINNED_BUDGET,
    SESSION_PINNED_BUDGET,
    PinnedCandidate,
    fit_pinned,
    format_time,
    is_pinned,
    pinned_order,
    pinned_prefix,
)
from . import Call


def pinned(store_id: str, budget: int = PINNED_BUDGET, left: int = SESSION_PINNED_BUDGET
           ) -> Generator[Call, Any, tuple[list[SessionPinned], dict[str, str | None], int]]:
    """The store's pinned memories within ``budget`` and what is ``left`` of a session's
    (each shown or listed with why), the texts of those shown by version id, and how many
    more the store has past the first :data:`~memfs.rules.MOST_PINNED` (the block says how
    many)."""
    store: MemoryStore = yield Call("stores.get", (store_id,))
    prefix = pinned_prefix(store.metadata)
    now = format_time(datetime.now(UTC))
    tree: list[Memory] = yield Call("memories.tree", (store_id,))
    found = [m for m in tree if is_pinned(
        m.path, bool(m.memfs_meta and m.memfs_meta.pinned),
        m.memfs_meta.expires_at if m.memfs_meta else None, prefix, now)]
    ordered = pinned_order([PinnedCandidate(
        m.path, m.id, m.memory_version_id, 0,
        m.memfs_meta.importance if m.memfs_meta else None, m.updated_at) for m in found])
    texts: dict[str, str | None] = {}
    candidates = []
    for c in ordered:
        m = yield Call("memories.get", (store_id, c.memory_id))
        texts[m.memory_version_id] = m.content
        candidates.append(PinnedCandidate(m.path, m.id, m.memory_version_id,
                                          len(m.content or ""), c.importance, c.updated_at))
    entries, _ = fit_pinned(candidates, budget, left)
    return entries, texts, len(found) - len(ordered)
