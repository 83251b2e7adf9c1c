"""``.history`` (:mod:`memfs.fuse.history`) and ``.search`` (:mod:`memfs.fuse.search`) as a
mount shows them (:class:`DotDirs`): their nodes are not the tree's, so each handler first asks
:meth:`DotDirs._hist` and :meth:`DotDirs._srch` and answers for them with what is here. Both are
read-only (every change is EROFS, logged as a failed tool call); listings and reads are tool
events.
"""

from __future__ import annotations

import errno
import os

import pyfuse3
from pyfuse3 import FileHandleT, FUSEError

from .. import errors
from ..models import Change
from .core import _HistoryHandle, _SearchHandle
from .feed import Feed
from .history import HNode
from .kernel import DOTS, _Failure, reply_dots
from .search import SEARCH, Answer, Refused, SNode, question_of


class DotDirs(Feed):
    """The handlers' answers for ``.history`` and ``.search``, and a listing's "." and ".."
    (which may be either's)."""

    # -- .history (memfs.fuse.history): read-only; listings never cached by the kernel ------------

    def _hist(self, inode: int) -> HNode | None:
        return self.history.nodes.get(inode) if self.history is not None else None

    def _history_attrs(self, node: HNode) -> pyfuse3.EntryAttributes:
        # The kernel caches names and attributes as long as the mount's other entries; what
        # changes (a version redacted or pruned, a directory gone with a rename or a redacted
        # deletion) is invalidated by History.apply_changes. Directory listings are never
        # cached (no cache_readdir), so new versions show at once. The mount's own modes, as
        # a read-only store shows them: the kernel lets a change through to the daemon, which
        # refuses it with EROFS and logs the attempt (modes without write bits would have the
        # kernel answer an unprivileged agent EACCES, unlogged).
        return self._entry(node.ino, node.is_dir, 2 if node.is_dir else 1, node.size,
                           node.mtime_ns, node.mtime_ns)

    def _history_reply(self, node: HNode) -> pyfuse3.EntryAttributes:
        node.lookups += 1
        return self._history_attrs(node)

    async def _history_lookup(self, parent: HNode, name: bytes) -> pyfuse3.EntryAttributes:
        assert self.history is not None
        if name == b".":
            return self._history_reply(parent)
        if name == b"..":
            up = self.history.parent_of(parent)
            return self._lookup_reply(self.root) if up is None else self._history_reply(up)
        try:
            s = name.decode("utf-8")
        except UnicodeDecodeError:
            raise FUSEError(errno.ENOENT) from None
        child = await self.history.lookup(parent, s)
        if child is None:
            raise FUSEError(errno.ENOENT)
        return self._history_reply(child)

    def _history_path(self, parent_inode: int, name: bytes | None = None) -> str | None:
        """The path (below the mount root) of ``.history`` or ``.search`` or an entry in them
        that a request would change (None: in neither). Both names in the mount root are
        reserved: they cannot be made, removed or renamed either."""
        vp: HNode | SNode | None = self._hist(parent_inode) or self._srch(parent_inode)
        if vp is not None:
            return vp.display + ("" if name is None else "/" + name.decode("utf-8", "replace"))
        if parent_inode == self.root.ino and name is not None and \
                name.decode("utf-8", "replace") in self._reserved:
            return "/" + name.decode()
        return None

    def _refuse_history(self, operation: str, path: str | None, new_path: str | None = None,
                        *, ctx: pyfuse3.RequestContext) -> None:
        """EROFS for a change under ``.history`` or ``.search`` (``path`` not None), logged
        like the refusals of a read-only mount."""
        if path is None:
            return
        searched = any(p is not None and (p == "/" + SEARCH or p.startswith(f"/{SEARCH}/"))
                       for p in (path, new_path))
        what = "search results" if searched else "the store's history"
        f = _Failure(errno.EROFS, f"{self._display(path)} is read-only ({what})")
        comm_, pid = self._ctx_name(ctx)
        self._emit(self._pair(comm_, pid, operation, path, failure=f, new_path=new_path))
        raise FUSEError(errno.EROFS)

    def _history_saw(self, op: str, memory_id: str, path: str,
                     old_path: str | None = None) -> None:
        """This mount changed a memory: its history and its searches show it at once (not
        only once the change feed brings it back)."""
        if self.search is not None:
            self.search.changed()
        if self.history is not None:
            self.history.apply_changes(
                [Change(self.tree.seq, self.store_id, op, memory_id, path, old_path)])

    def _history_register(self, h: _HistoryHandle) -> FileHandleT:
        fh = self._next_fh
        self._next_fh += 1
        self._history_handles[fh] = h
        h.node.handles += 1
        return FileHandleT(fh)

    def _history_release(self, fh: int) -> None:
        h = self._history_handles.pop(fh)
        h.node.handles -= 1
        path = h.node.display
        if h.listing is None:
            self._emit(self._pair(h.comm, h.pid, "read", path, text=f"read {self._display(path)}"))
        else:
            n = len(h.listing)
            self._emit(self._pair(
                h.comm, h.pid, "list", path,
                text=f"listed {self._display(path)}: {n} entr{'y' if n == 1 else 'ies'}"))
        assert self.history is not None
        self.history.release_if_unused(h.node)

    # -- .search (memfs.fuse.search): read-only; the kernel caches no question ---------------------

    def _srch(self, inode: int) -> SNode | None:
        return self.search.nodes.get(inode) if self.search is not None else None

    def _search_attrs(self, node: SNode) -> pyfuse3.EntryAttributes:
        # The mount's own modes, as for .history (a change is refused by the daemon, logged).
        entry = self._entry(node.ino, node.is_dir, 2 if node.is_dir else 1, node.size,
                            node.answer.mtime_ns if node.answer else node.mtime_ns,
                            node.mtime_ns)
        if not node.is_dir:
            # Never cached: every lookup (cat, stat) asks the question again.
            entry.entry_timeout = entry.attr_timeout = 0
            node.told = node.size
        return entry

    def _search_reply(self, node: SNode) -> pyfuse3.EntryAttributes:
        node.lookups += 1
        return self._search_attrs(node)

    async def _search_lookup(self, parent: SNode, name: bytes,
                             ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        if name == b".":
            return self._search_reply(parent)
        if name == b"..":
            return self._lookup_reply(self.root)
        if not parent.is_dir:
            raise FUSEError(errno.ENOTDIR)
        assert self.search is not None
        path = f"/{SEARCH}/{name.decode('utf-8', 'replace')}"
        try:
            node = self.search.file(question_of(name))
            if self.search.reusable(node, ctx.pid) is None:
                await self._ask(node, ctx)
        except Refused as r:
            comm_, pid = self._ctx_name(ctx)
            self._emit(self._pair(comm_, pid, "search", path,
                                  failure=_Failure(r.errno, r.why)))
            raise FUSEError(r.errno) from None
        return self._search_reply(node)

    async def _ask(self, node: SNode, ctx: pyfuse3.RequestContext) -> Answer:
        """Search for the node's question now: a tool event, failed or not."""
        assert self.search is not None and node.question is not None
        comm_, pid = self._ctx_name(ctx)
        try:
            answer = await self.search.ask(node, pid)
        except errors.MemfsError as e:
            self.search.release_if_unused(node)  # a refused question is not kept
            f = _Failure.of(e)
            self._emit(self._pair(comm_, pid, "search", node.display, failure=f))
            raise f from None
        self._emit(self._pair(comm_, pid, "search", node.display,
                              text=answer.summary(node.question)))
        return answer

    async def _search_answer(self, node: SNode, ctx: pyfuse3.RequestContext, *,
                             latest: bool = False) -> Answer:
        """The answer a lookup just gave the kernel (``latest``: the last one, however old),
        else a new one."""
        assert self.search is not None
        found = node.answer if latest else self.search.recent(node)
        return found or await self._ask(node, ctx)

    async def _search_open(self, node: SNode, flags: int,
                           ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        if node.is_dir:
            raise FUSEError(errno.EISDIR)
        if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR) or flags & os.O_TRUNC:
            self._refuse_history("write", node.display, ctx=ctx)
        answer = await self._search_answer(node, ctx)
        comm_, pid = self._ctx_name(ctx)
        fh = self._next_fh
        self._next_fh += 1
        self._search_handles[fh] = _SearchHandle(node, pid, comm_, answer.data)
        node.handles += 1
        # The kernel reads up to the size it was told: an answer of another size (asked again
        # since) is read past it, without the page cache.
        return pyfuse3.FileInfo(fh=FileHandleT(fh), keep_cache=False,
                                direct_io=len(answer.data) != node.told)

    def _search_release(self, fh: int) -> None:
        h = self._search_handles.pop(fh)
        h.node.handles -= 1
        if h.node.is_dir:
            self._emit(self._pair(h.comm, h.pid, "list", h.node.display,
                                  text=f"listed {self._display(h.node.display)}: 0 entries"))
        assert self.search is not None
        self.search.release_if_unused(h.node)
    async def _history_open(self, hn: HNode, flags: int,
                            ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        if hn.is_dir:
            raise FUSEError(errno.EISDIR)
        if flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR) or flags & os.O_TRUNC:
            self._refuse_history("write", hn.display, ctx=ctx)
        assert self.history is not None
        comm_, pid = self._ctx_name(ctx)
        data = await self.history.content(hn)
        # No keep_cache: a version redacted since the last open reads empty at once.
        fh = self._history_register(_HistoryHandle(hn, pid, comm_, data=data))
        return pyfuse3.FileInfo(fh=fh, keep_cache=False)
    def _reply_dots(self, token: pyfuse3.ReaddirToken, start_id: int, ino: int,
                    parent_ino: int) -> bool:
        """Send "." and ".." (those from ``start_id`` on); False when the kernel's buffer is
        full. The kernel takes only their inode numbers and types from a READDIRPLUS reply: it
        caches no attributes for them and counts no lookup, so neither does the mount."""
        if start_id >= DOTS:
            return True
        return reply_dots(token, start_id, (ino, self._dot_attrs(ino)),
                          (parent_ino, self._dot_attrs(parent_ino)))

    def _dot_attrs(self, ino: int) -> pyfuse3.EntryAttributes:
        node = self.tree.nodes.get(ino)
        if node is not None:
            return self._attrs(node)
        hn = self._hist(ino)
        if hn is not None:
            return self._history_attrs(hn)
        sn = self._srch(ino)
        if sn is not None:
            return self._search_attrs(sn)
        return self._entry(ino, True, 2, 4096, 0, 0)  # outside this tree (a session's root)
