"""The read-only ``.describe`` file of a mount's root: what the store holds, computed at each read.

``cat MOUNT/.describe`` prints the store's description (SPEC §8, the same object as ``memfs
stores describe --json`` and the API's: :meth:`memfs.store.typed.Typed.describe`) as JSON,
indented by 2, its keys in the store's order, with a final newline: counts by type, top
directory and tag, what expires soon or has expired, the oldest and newest change, the memories
with warnings, the store's types and expiry mode. So an agent sees what is stored before it
searches, with ``cat`` and ``jq``.

- **Fresh at every read**: each ``open`` asks the store (in a worker thread); the kernel keeps
  no name, attribute or page of it (timeouts 0, no page cache kept), so a write made a moment
  before shows. ``stat`` gives the size of the last answer (0 before the first); a read of an
  answer of another size goes past it, without the page cache.
- **A tool event** (``read``) per open→close, like any file's; a refused describe (the store
  is gone, its database down) fails the open with its errno, logged.
- **Hidden and read-only** like ``.history`` and ``.search``: not in the root's listing (``ls
  -a``, ``grep -r`` and ``find`` of the mount skip it), found by name; every change is EROFS,
  logged. The name is reserved: a memory ``/.describe`` made through the API is shadowed.
- Only where the store describes (:class:`memfs.protocol.DescribeAPI`): a time-travel mount's
  store (:class:`~memfs.daemons.snapshot.SnapshotStore`) does not (the description is of the
  live store, never of a past one), and has no ``.describe`` (ENOENT).

No pyfuse3 here: :class:`memfs.fuse.dotdirs.DescribeFile` answers the kernel with what
:class:`Describe` returns.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .tree import Tree

#: The name of the file in a mount's root (hidden from its listing).
DESCRIBE = ".describe"


def render(description: dict[str, Any]) -> bytes:
    """The file's content: the description as JSON (indent 2, keys as given, UTF-8 as is),
    with a final newline."""
    return (json.dumps(description, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


@dataclass(eq=False, slots=True)
class DNode:
    """``.describe`` itself: its inode, and its last answer."""

    ino: int
    mtime_ns: int
    lookups: int = 0
    handles: int = 0
    #: The last answer (what ``stat`` gives the size of).
    data: bytes = b""
    #: The size the kernel was last told.
    told: int = -1
    display: str = "/" + DESCRIBE
    is_dir: bool = False

    @property
    def size(self) -> int:
        return len(self.data)


class Describe:
    """The ``.describe`` file of one mount.

    :param tree: the mount's tree (its inode allocator).
    :param describe: the store's description of a store (``store.typed.describe``, a server's
        through :class:`memfs.client.Client`).
    :param call: runs a blocking store call off the trio thread
        (:meth:`memfs.fuse.core.Mount.call`).
    """

    def __init__(self, tree: Tree, describe: Callable[[str], dict[str, Any]], store_id: str,
                 call: Callable[..., Awaitable[Any]]) -> None:
        self.tree = tree
        self._describe = describe
        self.store_id = store_id
        self._call = call
        self._node: DNode | None = None
        #: Descriptions read (for tests).
        self.reads = 0

    @property
    def node(self) -> DNode:
        """The file's node (made at first use: a session daemon renumbers the tree's inodes
        before it loads it)."""
        if self._node is None:
            self._node = DNode(self.tree.new_ino(), time.time_ns())
        return self._node

    def known(self, inode: int) -> DNode | None:
        """The node if ``inode`` is its (None: not made yet, or another inode)."""
        return self._node if self._node is not None and self._node.ino == inode else None

    async def read(self) -> bytes:
        """The store's description now, as the file shows it (kept as the last answer).

        :raises MemfsError: the store refused or failed (``NotFound``: it is gone).
        """
        self.reads += 1
        data = render(await self._call(self._describe, self.store_id))
        node = self.node
        node.data = data
        node.mtime_ns = time.time_ns()
        return data
