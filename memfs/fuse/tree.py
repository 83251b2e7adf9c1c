"""The inode tree of a mount: what the kernel sees of one store, kept in memory.

A :class:`Tree` holds a :class:`Node` per file and directory the kernel may know: the store's
memories (paths, sizes, hashes; content cached on demand), directories (the path prefixes
shared by memories, plus empty ones made by ``mkdir``), and files not committed yet. Nodes stay
in the inode table while the kernel or an open handle still refers to them, even once they are
out of the tree (unlinked, renamed over, deleted elsewhere): POSIX keeps an open file readable
until its last close.

The tree is brought up to date with the store's change feed by :meth:`Tree.apply_changes`,
which orders what it learns by the feed's sequence numbers (never by the wall clock), and queues
what the kernel must forget in :attr:`Tree.stale_entries` and :attr:`Tree.stale_inodes`.

No pyfuse3, no store, no I/O here (times are parsed by :mod:`memfs.rules`): :mod:`memfs.fuse.ops`
drives it, and it is tested alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from ..models import Change, Memory, MemoryMeta
from ..rules import parse_time
from .scratch import SCRATCH_BUDGET, SCRATCH_FILES, Scratch

log = logging.getLogger(__name__)

#: The inode number of the root directory (FUSE's, pyfuse3.ROOT_INODE).
ROOT_INODE = 1
#: Upper bound of the content cache (committed content of files not open), in bytes.
CONTENT_CACHE_BYTES = 64 * 1024 * 1024
#: What a memory that says nothing about itself has.
_NO_META = MemoryMeta()


def time_ns(value: str) -> int:
    """Nanoseconds since the epoch of an RFC 3339 time with microseconds (``…Z``)."""
    dt = parse_time(value)
    return int(dt.timestamp()) * 1_000_000_000 + dt.microsecond * 1000


def kept_meta(m: Memory) -> MemoryMeta | None:
    """What a file keeps of what its memory says about itself (None: nothing)."""
    meta = m.memfs_meta
    return None if meta is None or meta == _NO_META else meta


class FileState:
    """What a mount keeps of a file's committed state: what its handlers need (the xattrs,
    the tool events, telling a new version or new content from the one held). Not the whole
    :class:`Memory`: its path is the tree's, its times the node's, and the rest would cost
    about 600 bytes per file (a session holds tens of thousands of files). ``meta`` is what the
    memory says about itself (its xattrs, :mod:`memfs.fuse.xattrs`): None when it says nothing
    (an untyped memory without front matter, most of them), so they cost a pointer."""

    __slots__ = ("id", "memory_version_id", "content_size_bytes", "_sha256", "meta")

    id: str
    memory_version_id: str
    content_size_bytes: int
    _sha256: bytes
    meta: MemoryMeta | None

    def __init__(self, m: Memory | FileState) -> None:
        self.id = m.id
        self.memory_version_id = m.memory_version_id
        self.content_size_bytes = m.content_size_bytes
        self._sha256 = bytes.fromhex(m.content_sha256)  # 65 bytes instead of 113
        self.meta = m.meta if isinstance(m, FileState) else kept_meta(m)

    @property
    def content_sha256(self) -> str:
        return self._sha256.hex()


@dataclass(eq=False, slots=True)
class Node:
    """A file or directory of the mount.

    A node is *attached* while it is in the tree (``parent`` set, listed in its parent's
    ``children``). Detached nodes stay in the inode table while the kernel still knows them.
    """

    ino: int
    is_dir: bool
    name: str
    parent: Node | None
    children: dict[str, Node] | None = None
    #: Files: the store's state of the memory; None while the file is new and uncommitted.
    memory: FileState | None = None
    #: The change-feed position of the state in ``memory``: a state from the feed is taken
    #: only if it is newer (a remote feed can deliver one older than this mount's own write).
    seq: int = 0
    #: Files: cached committed content (kept while the file is open, whatever happens to it).
    content: bytes | None = None
    #: ``content`` may be older than ``memory`` (changed elsewhere while open): re-read it,
    #: and keep it if the memory is gone.
    content_stale: bool = False
    #: Files: the write buffer shared by every handle while open for writing.
    buffer: bytearray | None = None
    #: The buffer differs from the store (a commit is due).
    dirty: bool = False
    #: Bumped at every change of the buffer: a commit knows whether writes came in meanwhile.
    gen: int = 0
    #: Files: the kernel keeps the attributes of a create's reply until a write makes it
    #: forget them; the save, which gives the file the version's mtime, must then.
    attrs_kept: bool = False
    handles: int = 0
    writers: int = 0
    #: Kernel lookup count (lookup, create, mkdir, readdirplus entries minus forget).
    lookups: int = 0
    #: Directories: how many of ``children`` are directories (st_nlink is 2 + this), kept by
    #: :meth:`Tree._link` and :meth:`Tree._unlink`: the kernel asks for a directory's
    #: attributes at every create in it.
    subdirs: int = 0
    #: Directories: kept although empty (made by mkdir, or emptied by this mount).
    pinned: bool = False
    #: Directories: the entries in name order as the last listing sorted them (never
    #: changed in place: listings open hold it); None once an entry came or went.
    listing: list[Node] | None = None
    attached: bool = True
    #: Files: taken out of the tree by a change made elsewhere (deleted, or its path taken)
    #: while open for writing: the path it had, where its writes are still saved (the last
    #: close wins, SPEC §2). None for a file this mount unlinked or renamed over (POSIX: its
    #: unsaved writes are dropped).
    save_at: str | None = None
    #: Files: session scratch (:mod:`memfs.fuse.scratch`): its content is its ``buffer``,
    #: never stored, never ``dirty``. None for every other file.
    scratch: Scratch | None = None
    mtime_ns: int = field(default_factory=time.time_ns)
    ctime_ns: int = 0

    def __post_init__(self) -> None:
        if self.is_dir and self.children is None:
            self.children = {}
        if not self.ctime_ns:
            self.ctime_ns = self.mtime_ns

    @property
    def path(self) -> str:
        """The memory path (``/a/b.md``); ``/`` for the root."""
        parts: list[str] = []
        node: Node | None = self
        while node is not None and node.parent is not None:
            parts.append(node.name)
            node = node.parent
        return "/" + "/".join(reversed(parts))

    @property
    def size(self) -> int:
        if self.buffer is not None:
            return len(self.buffer)
        if self.memory is not None:
            return self.memory.content_size_bytes
        return 0

    def touch(self) -> None:
        """The content changed here: mtime and ctime are now."""
        self.mtime_ns = self.ctime_ns = time.time_ns()


class Tree:
    """The nodes of one mount and the rules that keep them in step with the store."""

    def __init__(self) -> None:
        self.root = Node(ROOT_INODE, True, "", None, pinned=True, lookups=1)
        self.nodes: dict[int, Node] = {ROOT_INODE: self.root}
        self.by_memory: dict[str, Node] = {}
        self._next_ino = ROOT_INODE + 1
        self._cached_bytes = 0
        #: The content cache's budget (a session's daemon shares one among its stores).
        self.cache_limit = CONTENT_CACHE_BYTES
        #: The change-feed position this tree reflects.
        self.seq = 0
        #: The change-feed position of this mount's newest own change (a commit, an unlink, a
        #: rename): a state of a memory read before it may be older than what the tree holds
        #: of the names this mount changed (:meth:`memfs.fuse.feed.Feed.apply_feed`).
        self.own_seq = 0
        #: The store is archived (or gone): the mount refuses writes.
        self.archived = False
        #: (parent inode, name, deleted inode) entries and inodes the kernel must forget.
        self.stale_entries: list[tuple[int, str, int]] = []
        self.stale_inodes: list[int] = []
        #: The scratch files still in the inode table (their bytes count against
        #: :data:`~memfs.fuse.scratch.SCRATCH_BUDGET`).
        self.scratch_nodes: set[Node] = set()
        self.scratch_budget = SCRATCH_BUDGET
        self.scratch_files = SCRATCH_FILES

    # -- building -----------------------------------------------------------------------------

    def new_ino(self) -> int:
        ino = self._next_ino
        self._next_ino += 1
        return ino

    def load(self, memories: Sequence[Memory], seq: int, archived: bool) -> None:
        """Fill an empty tree with the store's memories as of feed position ``seq``."""
        self.seq = seq
        self.archived = archived
        queued = len(self.stale_entries)
        for m in memories:
            self.attach_memory(m, seq)
        # The kernel has seen none of these names: nothing to forget (and no 2,000 tuples
        # kept per store until the first invalidation).
        del self.stale_entries[queued:]

    def new_file(self, parent: Node, name: str, scratch: bool = False) -> Node:
        """A new, uncommitted file (``create``), or a new scratch file."""
        assert parent.children is not None
        node = Node(self.new_ino(), False, name, parent)
        node.buffer = bytearray()
        if scratch:
            self.make_scratch(node, Scratch())
        else:
            node.dirty = True
        self.nodes[node.ino] = node
        self._link(parent, name, node)
        parent.mtime_ns = parent.ctime_ns = node.mtime_ns
        return node

    def dir_for(self, path: str, pin: bool = False) -> Node:
        """The directory node at ``path`` (``/a/b``), created with its ancestors if missing.
        A file in the way is detached (the store says a directory is there now)."""
        node = self.root
        if path == "/":
            return node
        for name in path[1:].split("/"):
            assert node.children is not None
            child = node.children.get(name)
            if child is not None and not child.is_dir:
                self.detach(child, notify=True)
                child = None
            if child is None:
                child = Node(self.new_ino(), True, name, node)
                self.nodes[child.ino] = child
                self._link(node, name, child)
                node.touch()
            node = child
        node.pinned = node.pinned or pin
        return node

    def attach_memory(self, m: Memory, seq: int) -> Node:
        """Put a memory in the tree at its path (reusing its node when known)."""
        parent_path, _, name = m.path.rpartition("/")
        parent = self.dir_for(parent_path or "/")
        assert parent.children is not None
        node = self.by_memory.get(m.id)
        if node is None:
            existing = parent.children.get(name)
            if existing is not None and not existing.is_dir and existing.memory is None and (
                    existing.scratch is None):
                node = existing  # our pending file: the store now has a memory there
            else:
                node = Node(self.new_ino(), False, name, parent, attached=False)
                self.nodes[node.ino] = node
            self.by_memory[m.id] = node
        self.set_memory(node, m, seq)
        if node.attached and (node.parent is not parent or node.name != name):
            self.detach(node, notify=True)
        if not node.attached:
            in_the_way = parent.children.get(name)
            if in_the_way is not None and in_the_way is not node:
                self.detach(in_the_way, notify=True)
            self.place(node, parent, name)
            self.stale_entries.append((parent.ino, name, 0))
        return node

    def own_change(self, seq: int) -> None:
        """This mount changed the store at feed position ``seq`` (0: nothing changed)."""
        self.own_seq = max(self.own_seq, seq)

    def set_memory(self, node: Node, m: Memory, seq: int) -> None:
        """Give a file node the store's state ``m`` (as of feed position ``seq``)."""
        old = node.memory
        if old is not None and old.id != m.id and self.by_memory.get(old.id) is node:
            del self.by_memory[old.id]
        self.by_memory[m.id] = node
        node.memory = FileState(m)
        node.seq = max(node.seq, seq)
        if old is None or old.memory_version_id != m.memory_version_id:
            node.mtime_ns = node.ctime_ns = time_ns(m.updated_at)
        if old is not None and old._sha256 != node.memory._sha256:
            if node.handles:
                node.content_stale = True  # re-read at the next read; kept if the memory is gone
            else:
                self.drop_content(node)

    # -- scratch files -------------------------------------------------------------------------

    def make_scratch(self, node: Node, scratch: Scratch) -> None:
        """Make a file node a scratch file with the content it shows (its buffer)."""
        if node.memory is not None and self.by_memory.get(node.memory.id) is node:
            del self.by_memory[node.memory.id]
        node.memory = None
        node.scratch = scratch
        node.dirty = False
        node.save_at = None
        self.scratch_nodes.add(node)

    def unscratch(self, node: Node) -> None:
        """A scratch file renamed onto a real name: a file like any other from now on."""
        node.scratch = None
        self.scratch_nodes.discard(node)

    def _live_scratch(self) -> Iterator[Node]:
        """The scratch files that count against their bounds: those deleted count no more
        once no descriptor holds them."""
        return (n for n in self.scratch_nodes if n.attached or n.handles)

    def scratch_crowded(self) -> bool:
        """Are there as many scratch files as :attr:`scratch_files`?"""
        return sum(1 for _ in self._live_scratch()) >= self.scratch_files

    def scratch_full(self, grows: int) -> bool:
        """Would the scratch files, grown by ``grows`` bytes, hold more than their budget?"""
        return grows > 0 and grows + sum(
            len(n.buffer) for n in self._live_scratch() if n.buffer is not None
        ) > self.scratch_budget

    def find(self, path: str) -> Node | None:
        """The attached node at ``path`` (``/a/b.md``), or None."""
        node: Node | None = self.root
        for name in path.strip("/").split("/"):
            if node is None or not node.children:
                return None
            node = node.children.get(name)
        return node

    # -- content cache -------------------------------------------------------------------------

    def drop_content(self, node: Node) -> None:
        if node.content is not None:
            self._cached_bytes -= len(node.content)
            node.content = None
        node.content_stale = False

    def cache_content(self, node: Node, data: bytes) -> None:
        self.drop_content(node)
        if self._cached_bytes + len(data) > self.cache_limit:
            for other in self.nodes.values():
                if other.handles == 0:
                    self.drop_content(other)
        node.content = data
        self._cached_bytes += len(data)

    # -- shape -----------------------------------------------------------------------------

    @staticmethod
    def _link(parent: Node, name: str, node: Node) -> None:
        """``parent``'s entry ``name`` is ``node`` (the only way an entry is set)."""
        assert parent.children is not None
        old = parent.children.get(name)
        parent.children[name] = node
        parent.subdirs += node.is_dir - (old is not None and old.is_dir)
        parent.listing = None

    @staticmethod
    def _unlink(parent: Node, name: str) -> None:
        """Remove ``parent``'s entry ``name`` (the only way an entry is removed)."""
        assert parent.children is not None
        if parent.children.pop(name).is_dir:
            parent.subdirs -= 1
        parent.listing = None

    def detach(self, node: Node, *, notify: bool = False, pin_parent: bool = False) -> None:
        """Take a node (and its subtree) out of the tree. With ``notify`` the change was made
        elsewhere: the kernel is told, and a file open for writing keeps the path it had
        (:attr:`Node.save_at`)."""
        parent = node.parent
        if not node.attached or parent is None:
            return
        assert parent.children is not None
        if parent.children.get(node.name) is node:
            self._unlink(parent, node.name)
        node.attached = False
        parent.touch()
        if pin_parent:
            parent.pinned = True
        if notify:
            self.stale_entries.append((parent.ino, node.name, node.ino))
        for sub in self.subtree(node):
            sub.attached = False
            if notify and not sub.is_dir and (sub.dirty or sub.writers):
                sub.save_at = sub.path  # the parent links are kept: still the path it had
            self.forget_if_unused(sub)

    def place(self, node: Node, parent: Node, name: str) -> None:
        """Attach a detached node (with its subtree) as ``parent``'s entry ``name``.

        Detaching forgot the nodes the kernel held no lookup on: attached again, they must be
        known again, else lookup finds what getattr, open and opendir answer with ENOENT.
        """
        assert parent.children is not None
        node.parent, node.name = parent, name
        self._link(parent, name, node)
        for sub in self.subtree(node):
            sub.attached = True
            sub.save_at = None
            self.nodes[sub.ino] = sub
            if sub.memory is not None:
                self.by_memory[sub.memory.id] = sub
        parent.touch()

    @staticmethod
    def subtree(node: Node) -> list[Node]:
        out, todo = [], [node]
        while todo:
            n = todo.pop()
            out.append(n)
            if n.children:
                todo.extend(n.children.values())
        return out

    def forget_if_unused(self, node: Node) -> None:
        """Drop a detached node that neither the kernel (lookups) nor a handle refers to
        any more; an attached node is always kept."""
        if node.attached or node.lookups > 0 or node.handles:
            return
        self.nodes.pop(node.ino, None)
        self.drop_content(node)
        node.buffer = None
        self.scratch_nodes.discard(node)
        if node.memory is not None and self.by_memory.get(node.memory.id) is node:
            del self.by_memory[node.memory.id]

    def prune(self, d: Node | None) -> None:
        """Remove directories that became empty through changes made elsewhere, unless this
        mount keeps them (mkdir, or emptied here)."""
        while d is not None and d is not self.root and d.attached and not d.children:
            if d.pinned or d.handles:
                return
            parent = d.parent
            self.detach(d, notify=True)
            d = parent

    def discard(self, node: Node) -> None:
        """Drop an uncommitted buffer (the commit failed or was refused, or the file is
        gone): the file shows its committed content again, or leaves the tree if it never
        had any. A scratch file keeps its content (it has nothing committed to go back to)."""
        if node.scratch is not None:
            return
        node.buffer = None
        node.gen += 1
        if node.dirty:
            node.dirty = False
            self.stale_inodes.append(node.ino)  # the page cache may hold the refused data
            if node.memory is None and node.attached:
                parent = node.parent
                assert parent is not None
                self.detach(node)  # this mount's own change: nothing left to save
                self.stale_entries.append((parent.ino, node.name, node.ino))

    def restore(self, node: Node, m: Memory, seq: int) -> None:
        """A file detached by a change made elsewhere was saved at its path
        (:attr:`Node.save_at`) as ``m``: it is that memory's file again, there, in place of
        whatever the tree holds at that path now."""
        self.set_memory(node, m, seq)
        self.attach_memory(m, seq)
        self.stale_inodes.append(node.ino)  # its link count and attributes are back

    # -- changes made elsewhere ----------------------------------------------------------------

    def apply_changes(
        self, changes: Sequence[Change], current: Mapping[str, Memory | FileState | None]
    ) -> None:
        """Bring the tree up to date with changes from the store's feed, in feed order.

        ``current`` gives, for each memory a ``put`` names, a state at least as new as that
        change (None: deleted since). A change at or before a node's own position (a write this
        mount made, or one applied already) is skipped. Idempotent.
        """
        emptied: list[Node] = []
        for ch in changes:
            self.seq = max(self.seq, ch.seq)
            if ch.op == "delete" and ch.memory_id is not None:
                node = self.by_memory.get(ch.memory_id)
                if node is not None and node.attached and node.seq < ch.seq:
                    self.remove_deleted(node, emptied)
            elif ch.op == "put" and ch.memory_id is not None:
                m = current.get(ch.memory_id)
                if m is not None:
                    self.apply_put(m, ch.seq, emptied)
        for d in emptied:
            self.prune(d)

    def remove_deleted(self, node: Node, emptied: list[Node]) -> None:
        """Take out the file of a memory deleted elsewhere; its parent joins ``emptied``
        (to be pruned if nothing is left in it). An open file keeps its content."""
        emptied.append(node.parent)  # type: ignore[arg-type]
        self.detach(node, notify=True)
        if not node.handles:
            self.drop_content(node)

    def apply_put(self, m: Memory | FileState, seq: int, emptied: list[Node]) -> None:
        if any(n.scratch is not None and n.scratch.parked_id == m.id
               and n.scratch.parked_version == m.memory_version_id for n in self.scratch_nodes):
            # The version this mount parked (renamed onto a scratch name, docs/mounts.md): the
            # store holds it at its old path until the mount says what becomes of it, and it
            # must not come back there meanwhile (``mv x.md x.md~; rm x.md~`` would list x.md
            # again). A version made elsewhere since does come back.
            return
        node = self.by_memory.get(m.id)
        if node is not None and node.attached and node.memory is not None and (
            node.seq >= seq or node.memory.memory_version_id == m.memory_version_id
        ):
            node.seq = max(node.seq, seq)
            if isinstance(m, Memory) and node.memory.memory_version_id == m.memory_version_id:
                node.memory.meta = kept_meta(m)  # derived again (the store's types changed)
            return
        if isinstance(m, FileState):
            # A state this mount holds (its own commit): the node took a newer state since.
            return
        if node is not None and node.attached and node.parent is not None:
            emptied.append(node.parent)
        node = self.attach_memory(m, seq)
        # Content or at least mtime changed: the kernel drops its attributes and pages.
        self.stale_inodes.append(node.ino)

    def refresh_meta(self, tree: Sequence[Memory]) -> None:
        """Take what the memories of ``tree`` (every live one, read after a change of the
        store's types) say about themselves now: the store derives it again without a new
        version, so no ``put`` brings it. A file holding another version is left to the feed."""
        for m in tree:
            node = self.by_memory.get(m.id)
            if node is not None and node.memory is not None and (
                    node.memory.memory_version_id == m.memory_version_id):
                node.memory.meta = kept_meta(m)

    def delete_all(self) -> None:
        """The store is gone: every entry leaves the mount."""
        for child in list((self.root.children or {}).values()):
            self.detach(child, notify=True)

    def reload(self, tree: Sequence[Memory], seq: int, archived: bool) -> None:
        """Replace what this mount knows of the store by ``tree`` (every live memory, at feed
        position ``seq``): when the feed lost track of this mount's position. Memories gone
        from ``tree`` leave the mount, the others are placed as in :meth:`apply_changes`
        (kernel invalidations queued the same way); files not committed yet stay."""
        self.archived = archived
        live = {m.id for m in tree}
        emptied: list[Node] = []
        for memory_id, node in list(self.by_memory.items()):
            # A state newer than ``seq`` is this mount's own commit, made after ``tree`` was
            # read: kept (a deletion after it comes with the feed).
            if memory_id not in live and node.attached and node.seq <= seq:
                self.remove_deleted(node, emptied)
        for m in tree:
            self.apply_put(m, seq, emptied)
        for d in emptied:
            self.prune(d)
        self.seq = max(self.seq, seq)

    def discard_all(self) -> list[str]:
        """At unmount: drop every uncommitted buffer; returns the paths that were unsaved."""
        unsaved = []
        for node in self.nodes.values():
            if node.dirty:
                unsaved.append(node.path)
            node.buffer = None
            node.dirty = False
        return unsaved
