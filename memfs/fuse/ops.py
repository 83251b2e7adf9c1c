"""The FUSE filesystem of one memory store: the pyfuse3 handlers of :class:`Operations`.

The handlers only: what they build on is in the parts :class:`Operations` holds and calls by
name (:mod:`memfs.fuse.core`, which lists them: ``self.mount``, ``self.feed``,
``self.buffers``), the errnos and the kernel's calls in :mod:`memfs.fuse.kernel`, the tree in
:mod:`memfs.fuse.tree`.

A store is shown as a directory tree (SPEC §2): a memory ``/a/b.md`` is the regular file
``MOUNT/a/b.md``; directories are the path prefixes shared by memories, plus empty directories
made with ``mkdir`` that live in this mount only until a file is written into them.

How it works:

* The whole tree (paths, sizes, hashes, no content) is loaded at start and kept in memory
  (:mod:`memfs.fuse.tree`); lookup, getattr and readdir never touch the store. The kernel may cache
  entries and attributes for a long time (``timeout``, 300 s by default) and keep page caches
  across opens, because every change made elsewhere is pushed to it (:mod:`memfs.fuse.watch`).
* **Nothing that can wait runs on the trio thread.** Every store call (SQLite, or HTTP for a
  remote mount) runs in a worker thread, so a mount keeps answering ``ls`` and cached reads
  while another process holds SQLite's write lock or a server is slow. Changes to the store
  (commits, unlink, rename) and the application of the change feed take one lock per mount
  (:attr:`~memfs.fuse.core.Mount.mutex`), so the tree changes in the order the store did;
  reads never take it.
* **An unlink or rename waits for the database at most**
  :data:`~memfs.fuse.core.DIRECTORY_PATIENCE`: the kernel runs them with their directory
  locked, so every lookup of a name it has not cached and every listing of that directory waits
  for them. Another process's transaction that holds the write lock for seconds makes them fail
  with EBUSY (nothing changed, the failure logged) instead of freezing ``ls`` and ``stat``
  there meanwhile. Closes and fsyncs lock no directory and wait as long as the store does. (A
  remote mount's server call is not bounded so: it ends at the client's timeout.)
* Writes are buffered per file (one buffer per inode, shared by every handle) and committed
  with ``write_path`` at ``fsync`` and at ``close``: in ``flush``, the only close-time reply
  the kernel passes back to ``close(2)``, so what ``close`` returned is what was saved. The
  kernel sends a flush for *every* ``close`` of a descriptor, also for a copy closed by
  ``dup2`` or by a forked child; the flush commits only when the process that opened the file
  holds no descriptor of that open file any more (:func:`~memfs.fuse.kernel.fds_on`, from
  ``/proc``), so ``echo x > f`` saves one version and a child closing its copy saves nothing.
* A file deleted elsewhere (or whose path another memory took) while open for writing here
  leaves the tree, and its writes are still saved at its path at close/fsync: the memory is
  made again, or the one now at the path gets them (the last close wins), and the file is
  back in the tree under the inode the writer holds. Only this mount's own unlink or rename
  over an open file drops its unsaved writes (POSIX); the event says so.
* An open→close in which a write failed (EFBIG, EILSEQ) commits nothing: the file keeps its
  previous version, and ``close`` fails with that error. A commit the store refuses (or a full
  disk) is discarded the same way, and the kernel forgets the refused data before ``close``
  returns.
* Tool events: each file open→close, listing, unlink, rename, mkdir, rmdir and path truncate is
  an ``agent.tool_use`` / ``agent.tool_result`` pair (SPEC §4). The pair of a write is
  recorded by the store in the write's own transaction; the others go through the
  :class:`~memfs.fuse.toolevents.EventSink`.
* Inode numbers are stable while mounted (one per memory id, one per directory node); never
  reused, so ``generation`` is always 0. An open file keeps its content after it is unlinked,
  renamed over or deleted elsewhere, until its last close.
* Every listing (the tree's and ``.history``'s) begins with "." and ".." (readdir offsets 1
  and 2), which the kernel counts as no lookup; its event counts the real entries only.
* Every handler maps :mod:`memfs.errors` to their errno in :data:`memfs.errors.WIRE`
  (:func:`~memfs.fuse.kernel.errno_for`) and raises only ``FUSEError``; any other exception is
  logged with its traceback and answered with EIO.
* ``.history/`` and ``.search/`` are objects of their own (:mod:`memfs.fuse.dotdirs`):
  every handler here that a request about one of their nodes, handles or entries reaches is
  decorated with the dispatch (``by_inode``, ``by_handle``, ``by_entry``) that hands it to
  their handler of the same name instead, so the handlers below only ever see the tree.

Known limitations:

* A failed write in one handle discards the whole shared buffer of that file, including
  uncommitted writes made through other descriptors of the same file in this mount.
* Two writers of one file in two different mounts: the last close wins (the store keeps the
  overwritten content in the history).
* The "does the opener still hold it" test at close reads ``/proc``; a process in another PID
  namespace (or a kernel without ``ino:`` in fdinfo) makes every flush commit, which can only
  add versions, never lose one.
* chmod/chown/utimes are accepted and not stored; modes are always 0644 / 0755.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Sequence
from typing import Any

import pyfuse3
from pyfuse3 import FileHandleT, FileNameT, FlagT, FUSEError, InodeT, ModeT, XAttrNameT

from .. import errors
from ..models import Actor, ToolPair
from ..protocol import StoreAPI
from .buffers import Buffers, splice, too_big, utf8_possible
from .core import BLOCK, Handle, Mount
from .dotdirs import DotDir, by_entry, by_handle, by_inode
from .feed import Feed
from .kernel import DOTS, NAME_MAX, Failure, handler
from .scratch import is_scratch
from .sessionlog import Transcript
from .toolevents import EventSink, WrittenVersion
from .tree import Node
from .xattrs import READ_ONLY, XATTR_PREFIX, file_xattrs

log = logging.getLogger(__name__)



class Operations(pyfuse3.Operations):
    """pyfuse3 request handlers over one store, and the parts they call by name: the
    :attr:`mount` (its state, :class:`~memfs.fuse.core.Mount`), the :attr:`feed`
    (:class:`~memfs.fuse.feed.Feed`) and the :attr:`buffers`
    (:class:`~memfs.fuse.buffers.Buffers`).

    :param store: the store (a local :class:`~memfs.store.Store` or a server's client).
    :param store_id: the store to show.
    :param actor: who the versions are attributed to.
    :param read_only: refuse every change with EROFS.
    :param events: where tool events go (None: not logged).
    :param display_root: the mount path as the agent sees it (event ``file_path`` prefix).
    :param timeout: kernel entry/attribute cache timeout in seconds.
    :param mountpoint: the real mount point, as ``/proc/<pid>/fd`` links show it (None: every
        flush of a written file commits).
    :param owner: the ``(uid, gid)`` every file and directory shows (default: the daemon's).
    :param private: modes 0600/0700 (the owner only: what a mount with ``allow_other`` for
        one agent user shows) instead of 0644/0755. The kernel enforces them
        (``default_permissions``); the access mode of the store is the daemon's to enforce,
        so a read-only store shows the same modes and refuses changes with EROFS itself,
        every refusal logged.
    :param transcript: makes a session's ``transcript.md`` in ``.sessions/`` of its events
        (:func:`memfs.store.transcript.transcript_markdown`, which the daemon hands in; None:
        no ``transcript.md``).
    """

    supports_dot_lookup = True
    enable_writeback_cache = False

    def __init__(
        self,
        store: StoreAPI,
        store_id: str,
        *,
        actor: Actor,
        read_only: bool = False,
        events: EventSink | None = None,
        display_root: str = "/",
        timeout: float = 300.0,
        mountpoint: str | None = None,
        owner: tuple[int, int] | None = None,
        private: bool = False,
        transcript: Transcript | None = None,
    ) -> None:
        super().__init__()
        #: The state every part shares (the tree, the open handles, the mutex, store calls,
        #: entry attributes, tool events).
        self.mount = Mount(store, store_id, actor=actor, read_only=read_only, events=events,
                           display_root=display_root, timeout=timeout, mountpoint=mountpoint,
                           owner=owner, private=private, transcript=transcript)
        #: Loading the tree, following the store's changes (what the watchers call).
        self.feed = Feed(self.mount)
        #: Write buffers and commits; the store's side of renames.
        self.buffers = Buffers(self.mount)
        # The mount's, under the names the handlers, the daemons and the services use.
        self.store = store
        self.store_id = store_id
        self.actor = actor
        self.events = events
        self.tree = self.mount.tree
        self.root = self.mount.root
        self.history = self.mount.history
        self.search = self.mount.search
        self.dotdirs: tuple[DotDir[Any], ...] = self.mount.dotdirs

    def load(self) -> None:
        """Read the store's state and its whole tree (:meth:`Feed.load`). Blocking: call it
        before serving."""
        self.feed.load()

    # -- the tree's state, as the daemon and tests see it -------------------------------------

    @property
    def seq(self) -> int:
        return self.tree.seq

    @property
    def archived(self) -> bool:
        return self.tree.archived

    @property
    def stale_entries(self) -> list[tuple[int, str, int]]:
        return self.tree.stale_entries

    @property
    def stale_inodes(self) -> list[int]:
        return self.tree.stale_inodes

    # -- handlers: names and attributes -----------------------------------------------------

    @handler
    @by_entry()
    async def lookup(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        parent = self.mount.node(parent_inode)
        if name == b".":
            return self.mount.lookup_reply(parent)
        if name == b"..":
            return self.mount.lookup_reply(parent.parent or self.root)
        if len(name) > NAME_MAX:
            raise FUSEError(errno.ENAMETOOLONG)
        child = self.mount.child(parent, name)
        if child is None:
            # ENOENT rather than a negative entry: a file created elsewhere must not stay
            # hidden for `timeout` seconds.
            raise FUSEError(errno.ENOENT)
        return self.mount.lookup_reply(child)

    async def forget(self, inode_list: Sequence[tuple[InodeT, int]]) -> None:
        # forget has no reply to carry an error: a bug here is logged, never raised.
        try:
            for inode, nlookup in inode_list:
                node = self.tree.nodes.get(inode)
                if node is None:
                    for d in self.dotdirs:
                        d.forget(inode, nlookup)
                if node is None or node is self.root:
                    continue
                node.lookups -= nlookup
                self.tree.forget_if_unused(node)
        except Exception:
            log.exception("bug in forget")

    @handler
    @by_inode
    async def getattr(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        return self.mount.attrs.of(self.mount.node(inode))

    @handler
    @by_inode
    async def setattr(
        self,
        inode: InodeT,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: FileHandleT | None,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        node = self.mount.node(inode)
        changes = [op for op, asked in (
            ("chmod", fields.update_mode), ("chown", fields.update_uid or fields.update_gid),
            ("utimes", fields.update_atime or fields.update_mtime or fields.update_ctime),
        ) if asked]
        if changes:
            # A store that takes no changes refuses these too (the mount has no kernel `ro`,
            # so that every refusal reaches the event log).
            self.mount.refuse_if_read_only(changes[0], node.path, ctx)
        if fields.update_size:
            if node.is_dir:
                raise FUSEError(errno.EISDIR)
            h = self.mount.handles.get(fh) if fh is not None else None
            if h is not None:
                await self.buffers.truncate_open(node, attr.st_size, h)
            else:
                await self.buffers.truncate_path(node, attr.st_size, ctx)
        # chmod, chown and utimes are accepted and not stored (SPEC §2), so `cp -p`, `touch`
        # and `rsync` work; modes and owners are fixed, times are the store's.
        return self.mount.attrs.of(node)

    # -- handlers: files --------------------------------------------------------------------

    @handler
    @by_inode
    async def open(
        self, inode: InodeT, flags: FlagT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.FileInfo:
        node = self.mount.node(inode)
        if node.is_dir:
            raise FUSEError(errno.EISDIR)
        if not node.attached:
            # The kernel still has a name for a file that is gone (unlinked or refused, and
            # not forgotten yet): ESTALE makes it look the name up again (LOOKUP_REVAL), so
            # `printf … > f` after a refused one creates a new file instead of writing to
            # the dead one.
            raise FUSEError(errno.ESTALE)
        writable = flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR)
        comm_, pid = self.mount.ctx_name(ctx)
        h = Handle(node, writable, pid, comm_)
        if writable or flags & os.O_TRUNC:
            try:
                self.mount.check_writable()
                await self.mount.check_backend()
            except Failure as f:
                self.mount.emit(self.mount.pair(comm_, pid, "write", node.path, failure=f))
                raise
        if writable and flags & os.O_TRUNC and node.scratch is not None:
            assert node.buffer is not None
            del node.buffer[:]
            node.touch()
        elif writable and flags & os.O_TRUNC:
            if node.size:
                # Emptying the file is this descriptor's change: saved at its close, whoever
                # else holds the file (an O_TRUNC of an empty file changes nothing).
                node.dirty = h.changed = True
            if node.buffer is None:
                node.buffer = bytearray()
            else:
                del node.buffer[:]  # shared with the other handles open on this file
            node.gen += 1
            h.truncated = True
        elif node.buffer is None and node.memory is not None and (
            node.content is None or node.content_stale
        ):
            # Read the content now: an open file keeps it, whatever happens to the memory.
            await self.buffers.load_content(node)
        return self.buffers.open_handle(h)

    @handler
    @by_entry()
    async def create(
        self,
        parent_inode: InodeT,
        name: FileNameT,
        mode: ModeT,
        flags: FlagT,
        ctx: pyfuse3.RequestContext,
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        parent = self.mount.node(parent_inode)
        comm_, pid = self.mount.ctx_name(ctx)
        entry = self.mount.entry_path(parent, name)
        scratch = False
        try:
            self.mount.check_writable()
            await self.mount.check_backend()
            path = self.mount.new_path(parent, name)
            scratch = is_scratch(path.rpartition("/")[2])
            if not stat.S_ISREG(mode) and stat.S_IFMT(mode):
                raise Failure(errno.EPERM, "only regular files can be stored")
            if self.mount.child(parent, name) is not None:
                raise Failure(errno.EEXIST, f"{path} exists")
            if scratch and self.tree.scratch_crowded():
                raise Failure(errno.ENOSPC, f"{path}: this mount holds "
                               f"{self.tree.scratch_files} scratch files already")
            if not scratch and len(self.tree.by_memory) + 1 >= self.store.limits.max_memories:
                # Near the limit, ask the store, so that open(O_CREAT) fails at once with
                # ENOSPC (the commit checks again under the write lock). Not otherwise: the
                # kernel holds the directory locked during CREATE, and a wait here (another
                # process's write lock, a hung server) would stall every listing of it.
                try:
                    await self.mount.call(self.store.memories.check_can_create, self.store_id)
                except errors.MemfsError as e:
                    raise Failure.of(e) from None
                # Checked again: another request may have made the name while we waited.
                path = self.mount.new_path(parent, name)
                if self.mount.child(parent, name) is not None:
                    raise Failure(errno.EEXIST, f"{path} exists")
        except Failure as f:
            self.mount.emit(self.mount.pair(comm_, pid, "create", entry, failure=f))
            raise
        node = self.tree.new_file(parent, path.rpartition("/")[2], scratch=scratch)
        # The new file is this descriptor's change: saved at its close, whoever else opened it.
        h = Handle(node, True, pid, comm_, created=True, changed=True)
        info = self.buffers.open_handle(h)
        reply = self.mount.lookup_reply(node)
        if scratch:
            return info, reply  # never saved: the kernel asks for its attributes each time
        # Kept by the kernel although the file is unsaved: it checks the opener's permission
        # right after, and would ask for them again (a GETATTR per create). The file's first
        # write makes it forget them, or else its save (Buffers._saved).
        reply.attr_timeout = self.mount.timeout
        node.attrs_kept = True
        return info, reply

    @handler
    @by_handle
    async def read(self, fh: FileHandleT, off: int, size: int) -> bytes:
        h = self.mount.handles.get(fh)
        if h is None:
            raise FUSEError(errno.EBADF)
        data = await self.buffers.data(h.node)
        return bytes(data[off : off + size])

    @handler
    async def write(self, fh: FileHandleT, off: int, buf: bytes) -> int:
        h = self.mount.handles.get(fh)
        if h is None:
            raise FUSEError(errno.EBADF)
        node = h.node
        end = off + len(buf)
        if node.scratch is not None:
            return self._write_scratch(node, off, buf)
        limit = self.store.limits.max_content_bytes
        if end > limit:
            h.failure = too_big(end, limit)
            raise FUSEError(errno.EFBIG)
        data = await self.buffers.buffer(node)
        if not utf8_possible(data, off, buf):
            h.failure = Failure(
                errno.EILSEQ, f"bytes written at offset {off} cannot be part of UTF-8 text")
            raise FUSEError(errno.EILSEQ)
        splice(data, off, buf)
        node.dirty = True
        node.gen += 1
        node.touch()
        node.attrs_kept = False  # the kernel forgets them after a write (its size and mtime)
        h.wrote = h.changed = True
        return len(buf)

    def _write_scratch(self, node: Node, off: int, buf: bytes) -> int:
        """A write to a scratch file: any bytes, within the mount's scratch budget."""
        data = node.buffer
        assert data is not None
        end = off + len(buf)
        if self.tree.scratch_full(end - len(data)):
            raise FUSEError(errno.ENOSPC)
        splice(data, off, buf)
        node.touch()
        return len(buf)

    @handler
    async def flush(self, fh: FileHandleT) -> None:
        h = self.mount.handles.get(fh)
        if h is None or not h.writable or h.node.scratch is not None:
            return
        node = h.node
        if h.failure is None and (
            not node.dirty or self.buffers.save_path(node) is None
            or (not h.changed and node.writers > 1)
        ):
            # Nothing to refuse or save, whoever still holds the file: no need to read /proc.
            return
        if self.buffers.still_held(h):
            return  # a copy was closed (dup2, or a child): the opener's last close commits
        if h.failure is not None:
            await self.buffers.refuse(h)
        if not h.changed and node.writers > 1:
            return  # nothing written through it: the writes of the others commit at theirs
        if node.dirty and self.buffers.save_path(node) is not None:
            await self.buffers.commit_handle(h)

    @handler
    async def fsync(self, fh: FileHandleT, datasync: bool) -> None:
        h = self.mount.handles.get(fh)
        if h is None or h.node.scratch is not None:
            return  # a scratch file has nothing to save
        if h.failure is not None:
            raise h.failure
        if h.node.dirty and self.buffers.save_path(h.node) is not None:
            await self.buffers.commit_handle(h)
        # The store commits with synchronous=NORMAL: fsync() is where the data must reach
        # the disk, this file's and every earlier commit's.
        await self.mount.in_thread(self.store.sync)

    @handler
    @by_handle
    async def release(self, fh: FileHandleT) -> None:
        h = self.mount.handles.pop(fh, None)
        if h is None:
            return
        node = h.node
        node.handles -= 1
        if h.writable:
            node.writers -= 1
        removed = False
        try:
            savable = self.buffers.save_path(node) is not None
            if node.writers == 0 and node.dirty and savable and h.failure is None:
                # No flush committed (the opener still held a copy at each close).
                try:
                    await self.buffers.commit_handle(h)
                except Failure as f:
                    # The kernel ignores release() errors: the event log has to tell.
                    log.warning("%s not saved: %s", node.path, f.text())
            removed = node.dirty and self.buffers.save_path(node) is None
            if node.writers == 0 and node.dirty and (node.attached or not node.handles):
                # A failed write; or unlinked while open, once nobody holds it any more (until
                # then the data stays readable through the other descriptors, as POSIX says).
                self.tree.discard(node)
            if node.handles == 0 and not node.dirty and node.scratch is None:
                node.buffer = None
        finally:
            if node.scratch is None and not h.logged:  # a scratch file leaves no event
                if self.events is not None and h.failure is None and not (
                    h.created or h.wrote or h.truncated
                ):
                    # A read: only what the pair will say is queued (built by the flusher).
                    path = self.mount.display(h.file_path)
                    self.events.emit_pair(h.comm, h.pid, "read", path, text=f"read {path}")
                else:
                    self.mount.emit(self.buffers.file_pair(h, failure=h.failure, removed=removed))
            self.tree.forget_if_unused(node)

    # -- handlers: directories ---------------------------------------------------------------

    @handler
    @by_inode
    async def opendir(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> FileHandleT:
        node = self.mount.node(inode)
        if not node.is_dir:
            raise FUSEError(errno.ENOTDIR)
        comm_, pid = self.mount.ctx_name(ctx)
        assert node.children is not None
        # A snapshot, so that readdir offsets stay stable while entries come and go (sorted
        # again only after a change). The root never lists .history nor .search (asked for
        # by name only: `ls -a`, `grep -r` skip them).
        listing = node.listing
        if listing is None:
            listing = node.listing = [node.children[k] for k in sorted(node.children)
                                      if node is not self.root or k not in self.mount.reserved]
        return self.buffers.register(Handle(node, False, pid, comm_, listing=listing))

    @handler
    @by_handle
    async def readdir(self, fh: FileHandleT, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        # Offsets: 1 after ".", 2 after "..", 2 + n after the listing's n-th entry.
        h = self.mount.handles.get(fh)
        if h is None or h.listing is None:
            raise FUSEError(errno.EBADF)
        node = h.node
        up = node.parent.ino if node.parent is not None else (
            self.mount.root_parent_ino or self.root.ino)
        if not self.mount.reply_dots(token, start_id, node.ino, up):
            return
        listing = h.listing
        put, (file, directory, unsaved) = self.mount.attrs.put, self.mount.attrs.reused
        for index in range(max(0, start_id - DOTS), len(listing)):
            child = listing[index]
            if not child.attached:
                continue
            entry = (directory if child.is_dir else
                     unsaved if child.dirty or child.scratch is not None else file)
            if not pyfuse3.readdir_reply(
                token, FileNameT(child.name.encode()), put(child, entry), DOTS + index + 1
            ):
                return
            # pyfuse3 answers READDIRPLUS: each entry counts as a lookup in the kernel.
            child.lookups += 1

    @handler
    @by_handle
    async def releasedir(self, fh: FileHandleT) -> None:
        h = self.mount.handles.pop(fh, None)
        if h is None:
            return
        h.node.handles -= 1
        if not h.node.handles:
            # Emptied from elsewhere while it was being listed: the prune skipped it then
            # (the kernel sends RELEASEDIR after closedir returns, so this is common).
            self.tree.prune(h.node)
        if self.events is not None:
            # Only what the pair will say is queued (built by the flusher), as for a read.
            n, path = len(h.listing or ()), self.mount.display(h.file_path)
            self.events.emit_pair(h.comm, h.pid, "list", path,
                                  text=f"listed {path}: {n} entr{'y' if n == 1 else 'ies'}")
        self.tree.forget_if_unused(h.node)

    async def fsyncdir(self, fh: FileHandleT, datasync: bool) -> None:
        return None

    @handler
    @by_entry()
    async def mkdir(
        self, parent_inode: InodeT, name: FileNameT, mode: ModeT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        parent = self.mount.node(parent_inode)
        comm_, pid = self.mount.ctx_name(ctx)
        entry = self.mount.entry_path(parent, name)
        try:
            self.mount.check_writable()
            path = self.mount.new_path(parent, name)
            if self.mount.child(parent, name) is not None:
                raise Failure(errno.EEXIST, f"{path} exists")
        except Failure as f:
            self.mount.emit(self.mount.pair(comm_, pid, "mkdir", entry, failure=f))
            raise
        node = self.tree.dir_for(path, pin=True)
        self.mount.emit(self.mount.pair(
            comm_, pid, "mkdir", path,
            text=f"created directory {self.mount.display(path)} (kept in this mount until a file "
                 "is written into it)"))
        return self.mount.lookup_reply(node)

    @handler
    @by_entry()
    async def rmdir(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        parent = self.mount.node(parent_inode)
        comm_, pid = self.mount.ctx_name(ctx)
        node = self.mount.child(parent, name)
        entry = self.mount.entry_path(parent, name)
        try:
            self.mount.check_writable()
            if node is None:
                raise Failure(errno.ENOENT, f"no directory {entry}")
            if not node.is_dir:
                raise Failure(errno.ENOTDIR, f"{entry} is not a directory")
            if node.children:
                raise Failure(errno.ENOTEMPTY, f"{entry} is not empty")
        except Failure as f:
            self.mount.emit(self.mount.pair(comm_, pid, "rmdir", entry, failure=f))
            raise
        self.tree.detach(node, pin_parent=True)
        self.mount.emit(self.mount.pair(comm_, pid, "rmdir", entry,
                              text=f"removed directory {self.mount.display(entry)}"))

    @handler
    @by_entry()
    async def unlink(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        parent = self.mount.node(parent_inode)
        comm_, pid = self.mount.ctx_name(ctx)
        entry = self.mount.entry_path(parent, name)
        try:
            async with self.mount.directory_change() as deadline:
                self.mount.check_writable()
                node = self.mount.child(parent, name)
                if node is None:
                    raise Failure(errno.ENOENT, f"no file {entry}")
                if node.is_dir:
                    raise Failure(errno.EISDIR, f"{entry} is a directory")
                if node.scratch is not None:
                    await self.buffers.unlink_scratch(node, comm_, pid, deadline)
                    return
                recorded = False
                if node.memory is None:
                    pair = self.mount.pair(
                        comm_, pid, "delete", entry,
                        text=f"deleted {self.mount.display(entry)} (it was never saved)")
                else:
                    pair = self.mount.pair(comm_, pid, "delete", entry, memory_id=node.memory.id,
                                           text=f"deleted {self.mount.display(entry)}")
                    await self.mount.events_in_order(deadline)
                    try:
                        gone = await self.mount.call_by(deadline, self.store.memories.delete_path,
                                                        self.store_id, node.path, actor=self.actor,
                                                        events=pair)
                        self.tree.own_change(gone.seq)
                        recorded = True
                        self.mount.history_saw("delete", node.memory.id, node.path)
                    except errors.NotFound:
                        # Deleted elsewhere meanwhile: the file is gone either way.
                        await self.buffers.deleted_elsewhere(deadline)
                    except errors.MemfsError as e:
                        raise Failure.of(e) from None
                self.tree.detach(node, pin_parent=True)
                (self.mount.logged if recorded else self.mount.emit)(pair)
        except Failure as f:
            self.mount.emit(self.mount.pair(comm_, pid, "delete", entry, failure=f))
            raise

    @handler
    @by_entry(0, 2)
    async def rename(
        self,
        parent_inode_old: InodeT,
        name_old: FileNameT,
        parent_inode_new: InodeT,
        name_new: FileNameT,
        flags: FlagT,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        old_parent = self.mount.node(parent_inode_old)
        new_parent = self.mount.node(parent_inode_new)
        comm_, pid = self.mount.ctx_name(ctx)
        old_entry = self.mount.entry_path(old_parent, name_old)
        new_entry = self.mount.entry_path(new_parent, name_new)

        def pair(memory: WrittenVersion | None = None) -> ToolPair | None:
            return self.mount.pair(
                comm_, pid, "rename", old_entry, new_path=new_entry, memory=memory,
                text=f"renamed {self.mount.display(old_entry)} to {self.mount.display(new_entry)}")

        try:
            async with self.mount.directory_change() as deadline:
                src = self.mount.child(old_parent, name_old)
                events, recorded = await self.buffers.rename(src, old_entry, new_parent, name_new,
                                                             flags, pair, deadline)
        except Failure as f:
            self.mount.emit(self.mount.pair(comm_, pid, "rename", old_entry, new_path=new_entry,
                                  failure=f))
            raise
        (self.mount.logged if recorded else self.mount.emit)(events)

    # -- handlers: refused node types -------------------------------------------------------

    @by_entry()
    async def symlink(
        self, parent_inode: InodeT, name: FileNameT, target: FileNameT,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        self.mount.refuse_if_read_only(
            "symlink", self.mount.entry_path(self.mount.node(parent_inode), name), ctx)
        raise FUSEError(errno.EPERM)

    @by_entry(1)
    async def link(
        self, inode: InodeT, new_parent_inode: InodeT, new_name: FileNameT,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        self.mount.refuse_if_read_only(
            "link", self.mount.entry_path(self.mount.node(new_parent_inode), new_name), ctx)
        raise FUSEError(errno.EPERM)

    @by_entry()
    async def mknod(
        self, parent_inode: InodeT, name: FileNameT, mode: ModeT, rdev: int,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        self.mount.refuse_if_read_only(
            "mknod", self.mount.entry_path(self.mount.node(parent_inode), name), ctx)
        raise FUSEError(errno.EPERM)

    async def readlink(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> FileNameT:
        raise FUSEError(errno.EINVAL)

    # -- handlers: filesystem and xattrs ------------------------------------------------------

    @handler
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        lim = self.store.limits
        live = await self.mount.call(self.store.memories.count, self.store_id)
        data = pyfuse3.StatvfsData()
        data.f_bsize = data.f_frsize = BLOCK
        data.f_blocks = lim.max_memories * lim.max_content_bytes // BLOCK
        used = sum(n.size for n in self.tree.by_memory.values() if n.attached) // BLOCK
        data.f_bfree = data.f_bavail = max(0, data.f_blocks - used)
        data.f_files = lim.max_memories
        data.f_ffree = data.f_favail = max(0, lim.max_memories - live)
        data.f_namemax = NAME_MAX
        return data

    async def getxattr(
        self, inode: InodeT, name: XAttrNameT, ctx: pyfuse3.RequestContext
    ) -> bytes:
        """Only ``user.memfs.*`` names exist here. Any other is ENOATTR at once, before the
        dispatch: the kernel asks for ``security.capability`` at every write and truncating
        open (it stops asking only after ENOSYS, which would hide ``user.memfs.*`` too)."""
        if not name.startswith(XATTR_PREFIX):
            raise FUSEError(pyfuse3.ENOATTR)
        return await self._getxattr(inode, name, ctx)

    @handler
    @by_inode
    async def _getxattr(
        self, inode: InodeT, name: XAttrNameT, ctx: pyfuse3.RequestContext
    ) -> bytes:
        value = self._xattrs(self.mount.node(inode)).get(name)
        if value is None:
            raise FUSEError(pyfuse3.ENOATTR)
        return value

    @handler
    @by_inode
    async def listxattr(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> Sequence[XAttrNameT]:
        return [XAttrNameT(n) for n in self._xattrs(self.mount.node(inode))]

    def _xattrs(self, node: Node) -> dict[bytes, bytes]:
        """A file's extended attributes (:mod:`memfs.fuse.xattrs`); none for a directory or
        a file not saved yet. A time-travel mount's store knows when the version a file shows
        was redacted (:meth:`memfs.daemons.snapshot.SnapshotStore.redacted_at`, a lookup in
        memory); a live store's files always show a memory's head, which cannot be."""
        m = node.memory
        if m is None or node.is_dir:
            return {}
        redacted_at = getattr(self.store, "redacted_at", None)
        return file_xattrs(m, redacted_at(m.memory_version_id) if redacted_at else None)

    @by_inode
    async def setxattr(
        self, inode: InodeT, name: XAttrNameT, value: bytes, ctx: pyfuse3.RequestContext
    ) -> None:
        self.mount.refuse_if_read_only("setxattr", self.mount.node(inode).path, ctx)
        # EPERM for ours (read-only facts); ENOTSUP for the rest, which `cp -a` and rsync skip.
        raise FUSEError(errno.EPERM if name in READ_ONLY else errno.ENOTSUP)

    @by_inode
    async def removexattr(
        self, inode: InodeT, name: XAttrNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        self.mount.refuse_if_read_only("removexattr", self.mount.node(inode).path, ctx)
        raise FUSEError(errno.EPERM if name in READ_ONLY else errno.ENOTSUP)
