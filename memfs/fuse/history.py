"""The read-only ``.history/`` directory of a mount: every retained version as a file.

``MOUNT/.history/<P>/`` lists the retained versions of every memory whose *final path* is
``P`` (a live memory's current path, or a deleted memory's path at its deletion), one file per
version named ``<UTC time, ISO 8601 basic, microseconds>Z-<operation>-<last 8 characters of
the version id>``, so that ``ls`` sorts them in time order. A renamed memory's whole history is
under its current path; each version is in exactly one directory. A version file's content is
that version's content; a ``deleted`` version and a redacted one are empty files (the xattrs
say which). The directories of ``.history`` mirror the paths with a history: ``.history/a/``
holds ``b.md/`` for a memory ``/a/b.md``; a path that is both a memory's final path and a
directory of other memories' paths (a deleted ``/a``, a live ``/a/b.md``) lists both the
version files of ``/a`` and the subdirectory ``b.md/`` (a version file wins over a
subdirectory of the same name, which only a memory named like a version file could make).
A deleted memory whose ``deleted`` version was redacted has no final path left and is not
shown.

What is shown comes from the store through :class:`~memfs.protocol.StoreAPI` calls only
(``versions.list`` and ``versions.get``: a local and a remote mount share this code), made on
first use and cached: the final paths of deleted memories (loaded once, then kept current from
the change feed's ``delete`` changes), the versions of each memory listed (dropped when the
feed brings a ``put``, ``delete`` or ``history`` change for it: a ``history`` change is
written by a redaction and by pruning), and recently read contents. The live memories' paths
are the mount's :class:`~memfs.fuse.tree.Tree`. Inode numbers come from the tree's allocator (a
session daemon gives each store's tree its own range).

No pyfuse3 here: :mod:`memfs.fuse.ops` answers the kernel with what :class:`History` returns, and
this module is tested alone.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import trio

from ..models import Change, MemoryVersion
from ..protocol import StoreAPI
from ..rules import parse_time
from .tree import Node, Tree, time_ns

#: The name of the history directory in a mount's root (hidden from its listing).
HISTORY = ".history"
#: Cached version contents of a mount, in bytes (least recently read dropped first).
CONTENT_CACHE_BYTES = 8 * 1024 * 1024
#: What a version file name looks like (a lookup of another name is a subdirectory's).
VERSION_NAME = re.compile(r"^\d{8}T\d{6}\.\d{6}Z-(created|modified|deleted)-.+$")

XATTR_MEMORY_ID = b"user.memfs.memory_id"
XATTR_VERSION_ID = b"user.memfs.memory_version_id"
XATTR_OPERATION = b"user.memfs.operation"
XATTR_PATH = b"user.memfs.path"
XATTR_CREATED_BY = b"user.memfs.created_by"
XATTR_SHA256 = b"user.memfs.content_sha256"
XATTR_REDACTED = b"user.memfs.redacted"

Call = Callable[..., Awaitable[Any]]


def version_name(v: MemoryVersion) -> str:
    """``20261201T111629.123456Z-modified-3f9a1c2b``: fixed width, so names sort by time."""
    stamp = parse_time(v.created_at).strftime("%Y%m%dT%H%M%S.%fZ")
    return f"{stamp}-{v.operation}-{v.id[-8:]}"


def version_xattrs(v: MemoryVersion) -> dict[bytes, bytes]:
    """The extended attributes of a version file (those with a value)."""
    out = {XATTR_MEMORY_ID: v.memory_id.encode(), XATTR_VERSION_ID: v.id.encode(),
           XATTR_OPERATION: v.operation.encode()}
    if v.path is not None:
        out[XATTR_PATH] = v.path.encode("utf-8")
    if v.created_by is not None:
        out[XATTR_CREATED_BY] = f"{v.created_by.type}:{v.created_by.id}".encode()
    if v.content_sha256 is not None:
        out[XATTR_SHA256] = v.content_sha256.encode()
    if v.redacted_at is not None:
        out[XATTR_REDACTED] = v.redacted_at.encode()
    return out


def version_size(v: MemoryVersion) -> int:
    """The size of a version file: its content's, 0 for a deletion or a redacted version."""
    if v.operation == "deleted" or v.redacted_at is not None:
        return 0
    return v.content_size_bytes or 0


@dataclass(eq=False, slots=True)
class HNode:
    """A directory or version file of ``.history``.

    ``path`` is the memory path a directory stands for (``/`` for ``.history`` itself), or a
    version file's directory path; ``version`` is a file's version (basic view).
    """

    ino: int
    is_dir: bool
    path: str
    name: str
    version: MemoryVersion | None = None
    lookups: int = 0
    handles: int = 0
    mtime_ns: int = 0

    @property
    def display(self) -> str:
        """The path below the mount root, as an agent sees it (``/.history/a.md/2026…``)."""
        base = "/" + HISTORY + (self.path if self.path != "/" else "")
        return base if self.is_dir else f"{base}/{self.name}"

    @property
    def size(self) -> int:
        return version_size(self.version) if self.version is not None else 4096

    def parent_path(self) -> str | None:
        """The directory path of this node's parent (None: the parent is the mount root)."""
        if not self.is_dir:
            return self.path
        if self.path == "/":
            return None
        return self.path.rpartition("/")[0] or "/"


class History:
    """The ``.history`` directory of one mount.

    :param tree: the mount's tree (live paths, and the inode allocator).
    :param store: the store (its ``versions.list`` and ``versions.get``).
    :param call: runs a blocking store call without blocking the trio thread
        (:meth:`memfs.fuse.core.Mount.call`).
    :param call_long: the same for a read of many pages (the deleted memories of a store):
        in a worker thread even when the store could answer at once (default: ``call``).
    """

    def __init__(self, tree: Tree, store: StoreAPI, store_id: str, call: Call,
                 call_long: Call | None = None) -> None:
        self.tree = tree
        self.store = store
        self.store_id = store_id
        self._call = call
        self._call_long = call_long or call
        self.nodes: dict[int, HNode] = {}
        self._dirs: dict[str, HNode] = {}
        self._files: dict[tuple[str, str], HNode] = {}
        #: memory id -> its versions (basic view, oldest first), by file name.
        self._versions: dict[str, dict[str, MemoryVersion]] = {}
        #: memory id -> bumped by every change of its history (a load that raced one is
        #: returned, not kept).
        self._gen: dict[str, int] = {}
        #: Bumped by :meth:`reset` (every memory's history may have changed).
        self._resets = 0
        #: Deleted memories: memory id -> final path (None: not loaded yet).
        self._deleted: dict[str, str] | None = None
        self._deleted_at: dict[str, set[str]] = {}
        #: directory path -> child name -> how many deleted final paths go through it.
        self._deleted_dirs: dict[str, dict[str, int]] = {}
        #: Changes to the deleted index that arrived while it was loading.
        self._pending: list[tuple[str, str | None]] | None = None
        self._epoch = 0
        self._loading = trio.Lock()
        #: (memory id, version id) -> content, least recently read first.
        self._content: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._content_bytes = 0
        #: Store calls made (for tests and the benchmark).
        self.calls = 0

    # -- nodes -------------------------------------------------------------------------------

    @property
    def root(self) -> HNode:
        """``.history`` itself (made at first use: a session daemon renumbers the tree's
        inodes before it loads it)."""
        return self._dir("/")

    def _dir(self, path: str) -> HNode:
        node = self._dirs.get(path)
        if node is None:
            name = HISTORY if path == "/" else path.rpartition("/")[2]
            node = HNode(self.tree.new_ino(), True, path, name, mtime_ns=time.time_ns())
            self._dirs[path] = node
            self.nodes[node.ino] = node
        return node

    def _file(self, path: str, name: str, v: MemoryVersion) -> HNode:
        node = self._files.get((path, v.id))
        if node is None:
            node = HNode(self.tree.new_ino(), False, path, name)
            self._files[(path, v.id)] = node
            self.nodes[node.ino] = node
        node.version = v
        node.name = name
        node.mtime_ns = time_ns(v.created_at)
        return node

    def forget(self, ino: int, n: int) -> None:
        """The kernel forgot ``n`` lookups of ``ino``."""
        node = self.nodes.get(ino)
        if node is None:
            return
        node.lookups -= n
        self.release_if_unused(node)

    def release_if_unused(self, node: HNode) -> None:
        """Drop a node nobody refers to (it is made again, with a new inode, when needed)."""
        if node.lookups > 0 or node.handles or (node.is_dir and node.path == "/"):
            return
        self.nodes.pop(node.ino, None)
        if node.is_dir:
            if self._dirs.get(node.path) is node:
                del self._dirs[node.path]
        else:
            assert node.version is not None
            key = (node.path, node.version.id)
            if self._files.get(key) is node:
                del self._files[key]

    # -- the change feed ---------------------------------------------------------------------

    def apply_changes(self, changes: Iterable[Change]) -> None:
        """Forget what the changes make stale (on the trio thread, in feed order)."""
        moved: set[str] = set()
        for ch in changes:
            mid = ch.memory_id
            if ch.op == "store" or mid is None:
                continue
            if ch.op not in ("put", "delete", "history"):
                continue
            self._gen[mid] = self._gen.get(mid, 0) + 1
            self._versions.pop(mid, None)
            if ch.op == "history" or ch.old_path is not None:
                # Versions redacted or pruned, or all moved to another directory: the kernel
                # forgets this memory's version files (and the directories of the old path,
                # which may be gone now); one pass over the files for the whole batch (a
                # directory rename brings a change per memory).
                moved.add(mid)
                if ch.old_path is not None:
                    self._invalidate_dirs(ch.old_path)
            if ch.op == "put":
                self._deleted_change(mid, None)  # a memory alive again (if ever)
            elif ch.op == "delete" and ch.path is not None:
                self._deleted_change(mid, ch.path)
            elif ch.op == "history":
                # A redaction (the content, maybe the path at deletion, is gone) or pruning.
                for key in [k for k in self._content if k[0] == mid]:
                    self._content_bytes -= len(self._content.pop(key))
                if self._deleted is not None and mid in self._deleted:
                    self._invalidate_dirs(self._deleted[mid])
                    self._forget_deleted()
                elif self._pending is not None:
                    self._invalidate_dirs(None)
                    self._forget_deleted()
        if moved:
            self._invalidate(moved)

    def _invalidate(self, memory_ids: set[str] | None) -> None:
        """Queue kernel invalidations of the version files of ``memory_ids`` (None: all)."""
        for node in self._files.values():
            assert node.version is not None
            if memory_ids is None or node.version.memory_id in memory_ids:
                self.tree.stale_inodes.append(node.ino)
                parent = self._dirs.get(node.path)
                if parent is not None:
                    self.tree.stale_entries.append((parent.ino, node.name, 0))

    def _invalidate_dirs(self, path: str | None) -> None:
        """Queue kernel invalidations of the directory ``path`` of ``.history`` and of its
        ancestors (None: of every directory), which may be gone: the kernel caches them."""
        if path is None:
            paths = [p for p in self._dirs if p != "/"]
        else:
            paths, p = [], path
            while p not in ("/", ""):
                paths.append(p)
                p = p.rpartition("/")[0]
        for p in paths:
            parent_path, _, name = p.rpartition("/")
            parent = self._dirs.get(parent_path or "/")
            if parent is not None:
                self.tree.stale_entries.append((parent.ino, name, 0))

    def reset(self) -> None:
        """Forget everything cached (the mount reloaded its whole tree)."""
        self._invalidate(None)
        self._invalidate_dirs(None)
        self._versions.clear()
        self._resets += 1
        self._content.clear()
        self._content_bytes = 0
        self._forget_deleted()

    def _forget_deleted(self) -> None:
        self._deleted = None
        self._deleted_at = {}
        self._deleted_dirs = {}
        self._epoch += 1

    def _deleted_change(self, memory_id: str, path: str | None) -> None:
        if self._pending is not None:
            self._pending.append((memory_id, path))
        if self._deleted is None:
            return
        old = self._deleted.pop(memory_id, None)
        if old is not None:
            self._index(memory_id, old, -1)
            if path is None:
                self._invalidate_dirs(old)  # alive again: its final path is its live one
        if path is not None:
            self._deleted[memory_id] = path
            self._index(memory_id, path, +1)

    def _index(self, memory_id: str, path: str, delta: int) -> None:
        at = self._deleted_at.setdefault(path, set())
        if delta > 0:
            at.add(memory_id)
        else:
            at.discard(memory_id)
            if not at:
                del self._deleted_at[path]
        parent, name = "/", ""
        for part in path[1:].split("/"):
            name = part
            names = self._deleted_dirs.setdefault(parent, {})
            names[name] = names.get(name, 0) + delta
            if names[name] <= 0:
                del names[name]
                if not names:
                    del self._deleted_dirs[parent]
            parent = (parent.rstrip("/") + "/" + name)

    # -- loading -----------------------------------------------------------------------------

    def _read_deleted(self) -> dict[str, str]:
        """Every deleted memory's final path (blocking: run through ``call``)."""
        out: dict[str, str] = {}
        page: str | None = None
        while True:
            self.calls += 1
            got = self.store.versions.list(self.store_id, operation="deleted",
                                           limit=self._page_size(), page=page)
            for v in got.data:
                # Newest first: a memory deleted twice (alive again between) ends at the first.
                if v.path is not None and v.memory_id not in out:
                    out[v.memory_id] = v.path
                elif v.path is None:
                    out.setdefault(v.memory_id, "")
            if not got.next_page:
                return {k: p for k, p in out.items() if p}
            page = got.next_page

    def _read_versions(self, memory_id: str) -> list[MemoryVersion]:
        """A memory's retained versions, oldest first (blocking)."""
        out: list[MemoryVersion] = []
        page: str | None = None
        while True:
            self.calls += 1
            got = self.store.versions.list(self.store_id, memory_id=memory_id,
                                           limit=self._page_size(), page=page)
            out.extend(got.data)
            if not got.next_page:
                out.reverse()
                return out
            page = got.next_page

    def _page_size(self) -> int:
        return int(getattr(self.store.limits, "max_page_size", 100))

    async def _ensure_deleted(self) -> None:
        async with self._loading:
            while self._deleted is None:
                epoch = self._epoch
                self._pending = []
                try:
                    found = await self._call_long(self._read_deleted)
                except BaseException:
                    self._pending = None
                    raise
                pending, self._pending = self._pending, None
                if epoch != self._epoch:
                    continue  # a redaction of a deletion came in meanwhile: read again
                self._deleted = {}
                for memory_id, path in found.items():
                    node = self.tree.by_memory.get(memory_id)
                    if node is not None and node.attached:
                        continue  # alive again
                    self._deleted[memory_id] = path
                    self._index(memory_id, path, +1)
                for memory_id, p in pending:
                    self._deleted_change(memory_id, p)

    def _token(self, memory_id: str) -> tuple[int, int]:
        """Changes when the history of ``memory_id`` may have changed: what a store read
        returns is cached only if it did not change meanwhile."""
        return self._gen.get(memory_id, 0), self._resets

    async def versions(self, memory_id: str) -> dict[str, MemoryVersion]:
        """A memory's retained versions by file name, oldest first (cached until its history
        changes). Names are unique: two versions of a store would need the same microsecond
        and the same last 8 characters of their (random) ids."""
        cached = self._versions.get(memory_id)
        if cached is not None:
            return cached
        gen = self._token(memory_id)
        got: list[MemoryVersion] = await self._call(self._read_versions, memory_id)
        named = {version_name(v): v for v in got}
        if self._token(memory_id) == gen:
            self._versions[memory_id] = named
        return named

    # -- the paths ---------------------------------------------------------------------------

    def _live(self, path: str) -> Node | None:
        """The mount's attached node at ``path``, if any."""
        node: Node | None = self.tree.root
        if path == "/":
            return node
        for part in path[1:].split("/"):
            if node is None or node.children is None:
                return None
            node = node.children.get(part)
        return node

    @staticmethod
    def _has_history(node: Node) -> bool:
        """A committed file, or a directory holding one (at any depth)."""
        todo = [node]
        while todo:
            n = todo.pop()
            if n.is_dir:
                todo.extend((n.children or {}).values())
            elif n.memory is not None:
                return True
        return False

    def _memories_at(self, path: str) -> list[str]:
        """The memories whose final path is ``path``: the live one, then the deleted ones."""
        out: list[str] = []
        live = self._live(path) if path != "/" else None
        if live is not None and not live.is_dir and live.memory is not None:
            out.append(live.memory.id)
        for memory_id in sorted(self._deleted_at.get(path, ())):
            node = self.tree.by_memory.get(memory_id)
            if memory_id not in out and not (node is not None and node.attached):
                out.append(memory_id)
        return out

    def _subdirs(self, path: str) -> set[str]:
        names = set(self._deleted_dirs.get(path, ()))
        live = self._live(path)
        if live is not None and live.is_dir:
            names.update(name for name, c in (live.children or {}).items()
                         if self._has_history(c))
        return names

    def _is_history_path(self, path: str) -> bool:
        if path == "/":
            return True
        parent, _, name = path.rpartition("/")
        if name in self._deleted_dirs.get(parent or "/", ()):
            return True
        live = self._live(path)
        return live is not None and self._has_history(live)

    async def _version_files(self, path: str) -> dict[str, MemoryVersion]:
        out: dict[str, MemoryVersion] = {}
        for memory_id in self._memories_at(path):
            out.update(await self.versions(memory_id))
        return out

    # -- what the handlers ask ---------------------------------------------------------------

    async def lookup(self, parent: HNode, name: str) -> HNode | None:
        """The entry ``name`` of the directory ``parent`` (None: there is none)."""
        if not parent.is_dir:
            return None
        await self._ensure_deleted()
        if VERSION_NAME.match(name):
            for memory_id in self._memories_at(parent.path):
                v = (await self.versions(memory_id)).get(name)
                if v is not None:
                    return self._file(parent.path, name, v)
        path = (parent.path.rstrip("/") + "/" + name)
        if self._is_history_path(path):
            return self._dir(path)
        return None

    async def listing(self, d: HNode) -> list[HNode]:
        """The entries of directory ``d``, sorted by name (version files sort by time)."""
        await self._ensure_deleted()
        entries: dict[str, HNode] = {}
        for name, v in (await self._version_files(d.path)).items():
            entries[name] = self._file(d.path, name, v)
        for name in self._subdirs(d.path):
            if name not in entries:
                entries[name] = self._dir(d.path.rstrip("/") + "/" + name)
        return [entries[k] for k in sorted(entries)]

    async def refresh(self, node: HNode) -> HNode:
        """A version file with its version as the store has it now (redacted since?)."""
        v = node.version
        if v is not None:
            current = (await self.versions(v.memory_id)).get(node.name)
            if current is not None:
                node.version = current
        return node

    def parent_of(self, node: HNode) -> HNode | None:
        """A node's parent directory (None: the mount root)."""
        p = node.parent_path()
        return None if p is None else self._dir(p)

    async def content(self, node: HNode) -> bytes:
        """A version file's content (empty for a deletion or a redacted version)."""
        v = node.version
        assert v is not None
        if version_size(v) == 0 and (v.operation == "deleted" or v.redacted_at is not None):
            return b""
        key = (v.memory_id, v.id)
        data = self._content.get(key)
        if data is not None:
            self._content.move_to_end(key)
            return data
        gen = self._token(v.memory_id)
        self.calls += 1
        full: MemoryVersion = await self._call(self.store.versions.get, self.store_id, v.id,
                                               view="full")
        if full.redacted_at is not None:
            node.version = full
            return b""
        data = (full.content or "").encode("utf-8")
        if self._token(v.memory_id) == gen and len(data) <= CONTENT_CACHE_BYTES:
            self._content[key] = data
            self._content_bytes += len(data)
            while self._content_bytes > CONTENT_CACHE_BYTES:
                _, old = self._content.popitem(last=False)
                self._content_bytes -= len(old)
        return data


