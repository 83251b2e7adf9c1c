"""Loading a mount's tree and applying the store's change feed to it (:class:`Feed`, the
``feed`` of :class:`~memfs.fuse.ops.Operations`): the tree, ``.history`` and ``.search`` follow
every change the store made, in the store's order (under the mount's mutex), and what the
kernel must forget is queued for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from .. import errors
from ..models import Change, Memory
from .core import Mount
from .tree import FileState

log = logging.getLogger(__name__)


class Feed:
    """Loading the tree and the change feed: the part of :class:`~memfs.fuse.ops.Operations`
    that the daemon's watchers call (:mod:`memfs.fuse.watch`)."""

    def __init__(self, mount: Mount) -> None:
        self.mount = mount
        self.store = mount.store
        self.store_id = mount.store_id
        self.tree = mount.tree
        #: The store's tree read by :meth:`read_changes` after a ``store`` change, until
        #: :meth:`apply_read_changes` takes what its memories say about themselves.
        self.retyped: list[Memory] | None = None

    def load(self) -> None:
        """Read the store's state and its whole tree (no content). Blocking: call it before
        serving."""
        # The feed position first: a change racing the load is applied again, harmlessly.
        seq, tree, archived = self._read_all()
        self.tree.load(tree, seq, archived)

    def _read_all(self) -> tuple[int, list[Memory], bool]:
        """The feed position, then every memory and the archive state (blocking)."""
        seq = self.store.feed.last(self.store_id)
        archived = self.store.stores.get(self.store_id).archived_at is not None
        return seq, self.store.memories.tree(self.store_id), archived

    def read_changes(
        self,
        changes: Sequence[Change],
        known: Mapping[str, Memory | FileState | None] | None = None,
    ) -> tuple[dict[str, Memory | FileState | None], str | None]:
        """What applying ``changes`` needs from the store (blocking: run it in a thread):
        the current state of each memory a ``put`` names (``known`` ones are not read), and
        the store's state after a ``store`` change (``live``, ``archived`` or ``gone``). After
        a ``store`` change, the store's tree too (:attr:`retyped`): its types may have
        changed, and with them what every memory says about itself (its xattrs)."""
        current: dict[str, Memory | FileState | None] = dict(known or {})
        for ch in changes:
            if ch.op == "put" and ch.memory_id is not None and ch.memory_id not in current:
                try:
                    current[ch.memory_id] = self.store.memories.get(
                        self.store_id, ch.memory_id, view="basic"
                    )
                except errors.NotFound:
                    current[ch.memory_id] = None
        state: str | None = None
        if any(ch.op == "store" for ch in changes):
            try:
                archived = self.store.stores.get(self.store_id).archived_at is not None
                state = "archived" if archived else "live"
                self.retyped = self.store.memories.tree(self.store_id)
            except errors.NotFound:
                state = "gone"
        return current, state

    def apply_read_changes(
        self, changes: Sequence[Change], current: Mapping[str, Memory | FileState | None],
        store_state: str | None,
    ) -> None:
        """Apply changes with what :meth:`read_changes` returned (on the trio thread). A store
        that is gone empties the mount, which becomes read-only."""
        if store_state is not None:
            self.tree.archived = store_state != "live"
            if store_state == "gone":
                self.tree.delete_all()
        if self.retyped is not None:
            self.tree.refresh_meta(self.retyped)
            self.retyped = None
        self.tree.apply_changes(changes, current)
        if self.mount.history is not None:
            self.mount.history.apply_changes(changes)
        if self.mount.search is not None and changes:
            self.mount.search.changed()
        self.mount.kick()

    def apply_changes(
        self,
        changes: Sequence[Change],
        known: Mapping[str, Memory | FileState | None] | None = None,
    ) -> None:
        """Bring the tree up to date with changes from the store's feed (blocking version:
        reads the store on this thread). Idempotent."""
        current, state = self.read_changes(changes, known)
        self.apply_read_changes(changes, current, state)

    async def poll_changes(self) -> int:
        """Apply every change made to the store since the tree's position; returns how many.
        When the feed no longer holds that position (pruned), the whole tree is reloaded."""
        try:
            changes = await self.mount.call(self.store.feed.since, self.store_id, self.tree.seq)
        except errors.FeedGap:
            log.info("change feed: position %d was pruned; reloading the tree", self.tree.seq)
            seq, tree, archived = await self.mount.call(self._read_all)
            await self.reload(tree, seq, archived)
            return len(tree)
        if not changes:
            return 0
        async with self.mount.mutex:
            # The states are read under the mutex: no commit of this mount runs meanwhile, so
            # what is read is at least as new as anything this mount holds.
            current, state = await self.mount.call(self.read_changes, changes, self._held(changes))
            self.apply_read_changes(changes, current, state)
        return len(changes)

    async def pass_own_changes(self, nobody_else: Callable[[], bool]) -> bool:
        """Move the tree's feed position past this mount's own commits without reading them
        back: under the mutex (no commit of this mount in flight, and each one's change is in
        the tree already), the store's last change is read, then ``nobody_else()`` confirms
        that no other process committed meanwhile, so every change up to it is this mount's.
        False (nothing moved) when it cannot: then read the feed."""
        async with self.mount.mutex:
            seq = await self.mount.call(self.store.feed.last, self.store_id)
            if not nobody_else():
                return False
            self.tree.seq = max(self.tree.seq, seq)
        return True

    def _held(self, changes: Sequence[Change]) -> dict[str, Memory | FileState | None]:
        """The memories whose every ``put`` in ``changes`` this mount's tree holds already
        (its own commits, read back from the feed): the tree skips those puts
        (:meth:`Tree.apply_put`), so they need no read. One store read per close saved."""
        last: dict[str, int] = {}
        for ch in changes:
            if ch.op == "put" and ch.memory_id is not None:
                last[ch.memory_id] = max(ch.seq, last.get(ch.memory_id, 0))
        held: dict[str, Memory | FileState | None] = {}
        for memory_id, seq in last.items():
            node = self.tree.by_memory.get(memory_id)
            if node is not None and node.attached and node.memory is not None \
                    and node.seq >= seq:
                held[memory_id] = node.memory
        return held

    async def apply_feed(self, change: Change, memory: Memory | None) -> None:
        """Apply one change pushed by a server, with the memory as the server sent it.

        The server read that memory when it polled its feed, which may be before this
        mount's later changes reached it: a file written, then unlinked or renamed over here,
        would come back with the write's state (and an unlinked name be listed again, a create
        there fail with EEXIST, a new file at that path be taken away). So the sent state is
        taken only when this mount changed nothing after the change (its own changes' feed
        positions, :attr:`Tree.own_seq`); otherwise the memory is read again under the mutex,
        as a local mount reads it (:meth:`poll_changes`): as new as anything the mount holds.
        A put of the mount's own write that the tree holds already needs neither.
        """
        async with self.mount.mutex:
            known = self._held([change])
            if change.op == "put" and change.memory_id and change.memory_id not in known \
                    and change.seq >= self.tree.own_seq:
                known[change.memory_id] = memory
            current, state = await self.mount.call(self.read_changes, [change], known)
            self.apply_read_changes([change], current, state)

    async def reload(self, tree: Sequence[Memory], seq: int, archived: bool) -> None:
        async with self.mount.mutex:
            self.tree.reload(tree, seq, archived)
            if self.mount.history is not None:
                self.mount.history.reset()
            if self.mount.search is not None:
                self.mount.search.changed()
        self.mount.kick()
