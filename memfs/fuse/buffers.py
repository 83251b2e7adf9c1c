"""Write buffers and commits (:class:`Buffers`, the ``buffers`` of
:class:`~memfs.fuse.ops.Operations`): one buffer per written file (shared by every handle),
saved with ``write_path`` at ``fsync`` and at the last close, a failed write or a refused
commit discarding it; truncation; open handles; the store calls of a rename.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import functools
import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

import pyfuse3
import trio
from pyfuse3 import FileHandleT

from .. import errors
from ..models import Memory, ToolPair
from .core import Handle, Mount
from .kernel import Failure, fds_on
from .scratch import Scratch, is_scratch
from .toolevents import WrittenVersion
from .tree import Node

log = logging.getLogger(__name__)

#: How long at most a commit waits, while other files of the mount are open for writing,
#: for the trio thread to have served every request it can (their closes join the commit, in
#: one transaction), in seconds.
GATHER_PATIENCE = 0.002
#: Turns of the trio thread in a row with no other task runnable that end the wait (reading
#: a request takes pyfuse3 several: 3 made groups of 1-2 closes, 10 of 1-7).
GATHER_IDLE_TURNS = 10


@dataclass(eq=False)
class _Commit:
    """A commit waiting for the mutex (:meth:`Buffers.commit`), and its outcome."""

    node: Node
    pair: Callable[[int], ToolPair | None]
    done: bool = False
    path: str | None = None
    data: bytes | None = None
    gen: int = 0
    events: ToolPair | None = None
    memory: Memory | None = None
    failure: Failure | None = None
    #: When the close must have its answer (trio time), counted from the close: a store
    #: with a ``deadline`` (a server's client) only; None: as long as the store takes.
    deadline: float | None = None
    #: Not a store error (a bug, a cancellation): raised by the close that waited for it.
    error: BaseException | None = None
    #: What a cancelled close waits on while a batch that took this commit runs: set (and
    #: dropped) when that batch ends, done or put back in the queue (None: nobody waits).
    settled: trio.Event | None = None


def too_big(size: int, limit: int) -> Failure:
    return Failure(errno.EFBIG, f"content would be {size} bytes; the limit is {limit} bytes")


def _resize(buf: bytearray, size: int) -> None:
    """Cut ``buf`` to ``size`` bytes, or extend it with NUL bytes (a hole) to that size."""
    if size < len(buf):
        del buf[size:]
    else:
        buf.extend(b"\0" * (size - len(buf)))


def splice(buf: bytearray, off: int, data: bytes) -> None:
    """Write ``data`` into ``buf`` at ``off``, past its end with a hole of NUL bytes."""
    if off > len(buf):
        buf.extend(b"\0" * (off - len(buf)))
    buf[off:off + len(data)] = data


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def utf8_possible(buf: bytes | bytearray, off: int, data: bytes) -> bool:
    """Could ``buf`` with ``data`` written at ``off`` still be completed into UTF-8 text?

    False when the written bytes hold a sequence no later write at the end can mend: a byte
    never used in UTF-8 (``\\xff``), a stray continuation byte, a surrogate, an overlong form,
    a sequence cut short by the next character. A sequence begun by an earlier write (up to
    three bytes back) is decoded with its start, and one left incomplete at the end of the
    file may be finished by the next write.
    """
    start = off
    for back in range(1, 4):
        p = off - back
        if p < 0 or p >= len(buf):
            break
        if not _is_continuation(buf[p]):
            if buf[p] >= 0xC0:
                start = p  # a lead byte whose sequence may continue in ``data``
            break
    end = off + len(data)
    region = bytes(buf[start:off]) + data + bytes(buf[end : end + 3])
    try:
        codecs.getincrementaldecoder("utf-8")("strict").decode(region, final=False)
    except UnicodeDecodeError:
        return False
    return True


class Buffers:
    """A file's content, its write buffer, its commits; the open handles of the tree's files;
    the store's side of a rename and of a scratch file's unlink."""

    def __init__(self, mount: Mount) -> None:
        self.mount = mount
        self.store = mount.store
        self.store_id = mount.store_id
        self.actor = mount.actor
        self.tree = mount.tree
        #: Commits waiting for the mutex, which the next one to hold it makes together in one
        #: transaction (:meth:`commit`).
        self._queued_commits: list[_Commit] = []

    def discard_all(self) -> None:
        """At unmount: drop every uncommitted buffer (nothing half-written reaches the store)."""
        for path in self.tree.discard_all():
            log.warning("unmounting with %s unsaved (still open for writing)", path)

    async def data(self, node: Node) -> bytes | bytearray:
        """The content this mount shows: the write buffer, else the committed content."""
        if node.buffer is not None:
            return node.buffer
        if node.memory is None:
            return node.content or b""
        if node.content is None or node.content_stale:
            await self.load_content(node)
            if node.buffer is not None:  # a writer came in meanwhile
                return node.buffer
        return node.content or b""

    async def load_content(self, node: Node) -> None:
        """Read a file's committed content into the cache. A memory deleted meanwhile keeps
        the content an open file had.

        :raises Failure: ENOENT (gone, and nothing cached), or the store's error.
        """
        assert node.memory is not None
        memory_id = node.memory.id
        try:
            m = await self.mount.call(self.store.memories.get, self.store_id, memory_id)
        except errors.NotFound:
            if node.content is not None:
                node.content_stale = False
                return
            raise Failure(errno.ENOENT, f"{node.path} was deleted") from None
        except errors.MemfsError as e:
            raise Failure.of(e) from None
        if node.memory is None or node.memory.id != memory_id:
            return
        if node.content is not None and not node.content_stale:
            return  # a commit of this mount cached newer content meanwhile
        if m.memory_version_id != node.memory.memory_version_id:
            # Changed elsewhere and the feed has not brought it yet: take the new metadata
            # with the new content, and have the kernel refresh its attributes.
            self.tree.set_memory(node, replace(m, content=None), node.seq)
            self.tree.stale_inodes.append(node.ino)
        self.tree.cache_content(node, (m.content or "").encode("utf-8"))

    async def buffer(self, node: Node) -> bytearray:
        if node.buffer is None:
            data = await self.data(node)
            if node.buffer is None:
                node.buffer = bytearray(data)
        return node.buffer
    # -- commits ---------------------------------------------------------------------------

    def still_held(self, h: Handle) -> bool:
        """Is this flush the close of a copy (a ``dup``, or a child's inherited descriptor),
        while the process that opened the file still holds it?"""
        if self.mount.mountpoint is None:
            return False
        mine = sum(1 for x in self.mount.handles.values() if x.node is h.node and x.pid == h.pid)
        return fds_on(h.pid, self.mount.mountpoint, h.node.ino) >= mine

    async def commit(self, node: Node, pair: Callable[[int], ToolPair | None],
                     ) -> Memory | None:
        """Write the node's buffer to the store: one version, or none if unchanged. The tool
        events ``pair(size)`` makes are recorded in the same transaction.

        Commits that wait for the mutex together are made together: the first to hold it
        makes every one queued by then in one transaction (:meth:`Store.batch`, each call in
        a savepoint of its own, so one refused leaves the others saved), after letting the
        closes of the other files being written here join (:meth:`_gather`).
        Each commit's outcome is the one it would have had alone.

        :returns: the memory; None if there is nothing left to save once the mutex is ours: a
            request that held it meanwhile (an unlink, a rename over the file) removed the file
            here, which drops its unsaved writes (POSIX), or a commit saved it already.
        :raises Failure: the store refused; nothing was written, the buffer is discarded (the
            file shows its previous version again).
        """
        seconds = getattr(self.store, "deadline", None)
        job = _Commit(node, pair,
                      deadline=None if seconds is None else trio.current_time() + seconds)
        self._queued_commits.append(job)
        try:
            while not job.done:
                async with self.mount.mutex:
                    if not job.done:
                        await self._gather()
                        jobs, self._queued_commits = self._queued_commits, []
                        await self._commit_jobs(jobs)
        except trio.Cancelled:
            if not await self._settle_cancelled(job):
                raise
        if job.error is not None:
            raise job.error
        if job.failure is None:
            return job.memory
        # Outside the mutex: the kernel may hold the directory locked for a request (an
        # unlink) that waits for the mutex, and forgetting the name needs that lock.
        await self.mount.invalidate_now(node)
        raise job.failure

    async def _settle_cancelled(self, job: _Commit) -> bool:
        """A close cancelled (the mount ends: its stop signal's grace ran out) while ``job``,
        its commit, waited: is it answered all the same? A close that is not answered fails
        (the kernel says ECONNABORTED), so it must never be committed (issue 38, N3).

        :returns: True when ``job`` was made anyway, by the batch of another close that had
            taken it: its outcome is this close's (waited for, shielded: the batch's thread
            ends at once, its store no longer waiting for locks by then, see
            :meth:`~memfs.fuse.core.Mount.stop_waiting`). False when it was still queued: it
            is taken out of the queue, never to be committed.
        """
        while not job.done:
            if job in self._queued_commits:
                self._queued_commits.remove(job)
                return False
            if job.settled is None:
                job.settled = trio.Event()
            with trio.CancelScope(shield=True):
                await job.settled.wait()
        return True

    async def _gather(self) -> None:
        """While other files of this mount are open for writing, let the trio thread serve
        the requests it has (until every task waits, :data:`GATHER_PATIENCE` at most) before
        committing: the closes among them join this commit. Alone, a close never waits."""
        if not hasattr(self.store, "batch"):
            return
        mine = {j.node for j in self._queued_commits}
        if any(h.writable and h.node not in mine for h in self.mount.handles.values()):
            # Until no other task has been runnable for a few turns: the kernel's queue of
            # requests read (trio looks at the descriptor at each turn), every handler waiting.
            # The spinner, turning, is runnable at every turn: it is not waited for.
            deadline, idle = trio.current_time() + GATHER_PATIENCE, 0
            spinner = self.mount.spinner
            while idle < GATHER_IDLE_TURNS and trio.current_time() < deadline:
                await trio.lowlevel.checkpoint()
                others = trio.lowlevel.current_statistics().tasks_runnable - (
                    spinner is not None and spinner.spinning)
                idle = 0 if others > 0 else idle + 1

    async def _commit_jobs(self, jobs: list[_Commit]) -> None:
        """Make the queued commits ``jobs`` (under the mutex): each job gets its outcome."""
        ready: list[_Commit] = []
        outcomes: list[Any] = []
        try:
            await self.mount.events_in_order()
            for job in jobs:
                node = job.node
                # A second close of a file in the same batch has nothing left to save (as
                # when the first's commit had saved it before this one got the mutex).
                if self.save_path(node) is None or not node.dirty or any(
                        r.node is node for r in ready):
                    job.done = True
                    continue
                data = bytes(await self.data(node))
                path = self.save_path(node)
                if path is None:
                    job.done = True
                    continue
                job.path, job.data, job.gen = path, data, node.gen
                job.events = job.pair(len(data))
                ready.append(job)
            await self._write_all(ready, outcomes)
            for job, outcome in zip(ready, outcomes, strict=True):
                self._saved(job, outcome)
        except Exception as e:  # a bug: every close that waited for it fails (EIO)
            for job in jobs:
                if not job.done:
                    job.done, job.error = True, e
        except BaseException:
            # Cancelled (the mount ends). The commits made before it (one at a time, without
            # group commit) keep their outcome: their closes are answered (_settle_cancelled).
            # The others' go back in the queue, never made by this task, whose Cancelled is
            # never raised in theirs.
            for job, outcome in zip(ready, outcomes, strict=False):
                self._saved(job, outcome)
            self._queued_commits[:0] = [j for j in jobs if not j.done]
            raise
        finally:
            for job in jobs:  # wakes the closes that wait for this batch, cancelled
                if job.settled is not None:
                    job.settled.set()
                    job.settled = None

    async def _write_all(self, jobs: list[_Commit], outcomes: list[Any]) -> None:
        """``write_path`` of each job (in one transaction when there are several), its outcome
        appended to ``outcomes`` as soon as it is known: each one's memory, or the store error
        that refused it (cancelled midway, those made are there)."""
        if not jobs:
            return

        def write(job: _Commit, left: float | None = None) -> Memory:
            assert job.path is not None and job.data is not None
            # A server's client ends the write by the close's deadline (answer_by): its
            # server refuses it from then on, so a close that fails is never saved later.
            answer_by = getattr(self.store, "answer_by", None)
            with nullcontext() if left is None or answer_by is None else answer_by(left):
                return self.store.memories.write_path(self.store_id, job.path, job.data,
                                             actor=self.actor, events=job.events)

        if len(jobs) == 1 or not hasattr(self.store, "batch"):
            for job in jobs:
                left = None if job.deadline is None else job.deadline - trio.current_time()
                try:
                    outcomes.append(await self.mount.call(write, job, left))
                except errors.MemfsError as e:
                    outcomes.append(e)
            return
        # The batch holds what its writes serialise on: the store, and the session whose
        # tool events they record (a local store's Memories.scopes).
        memories = self.store.memories
        scopes = (memories.scopes(self.store_id, self.actor, any(j.events for j in jobs))
                  if hasattr(memories, "scopes") else ())
        outcomes.extend(await self.mount.call(self.store.batch,
                                              [functools.partial(write, j) for j in jobs],
                                              scopes))

    def _saved(self, job: _Commit, outcome: Any) -> None:
        """Take a commit's outcome into the tree (under the mutex)."""
        node = job.node
        job.done = True
        if isinstance(outcome, errors.MemfsError):
            log.info("commit of %s refused: %s", job.path, outcome.message)
            self.tree.discard(node)
            job.failure = Failure.of(outcome)
            return
        if isinstance(outcome, BaseException):
            job.error = outcome
            return
        m: Memory = outcome
        self.tree.own_change(m.seq)
        self.mount.logged(job.events)
        if node.attached:
            self.tree.set_memory(node, m, m.seq)
        else:
            # Deleted (or its path taken) elsewhere while written here: saved at its path all
            # the same, it is the file there again.
            log.info("%s: saved again after a change made elsewhere", job.path)
            self.tree.restore(node, m, m.seq)
        self.mount.history_saw("put", m.id, m.path)
        if node.attrs_kept:
            # Created and saved with no write: the kernel still has the create's mtime.
            node.attrs_kept = False
            self.mount.forget_attrs(node)
        if node.gen == job.gen:
            node.dirty = False
        assert job.data is not None
        self.tree.cache_content(node, job.data)
        job.memory = m

    def save_path(self, node: Node) -> str | None:
        """Where a file's writes are saved: its path, or the path it had when a change made
        elsewhere took it out of the tree (:attr:`Node.save_at`); None once this mount
        unlinked it or renamed over it (POSIX: its unsaved writes are dropped)."""
        return node.path if node.attached else node.save_at

    def file_pair(self, h: Handle, size: int | None = None,
                  memory: WrittenVersion | None = None,
                  failure: Failure | None = None, removed: bool = False,
                  ) -> ToolPair | None:
        """The event pair of a file's open→close (or of a commit at fsync). ``removed``: its
        writes were dropped, the file unlinked or renamed over by this mount first."""
        op = "create" if h.created else ("write" if h.wrote or h.truncated else "read")
        path = h.file_path
        m = self.mount
        if failure is not None:
            return m.pair(h.comm, h.pid, op, path, failure=failure)
        if op == "read":
            return m.pair(h.comm, h.pid, op, path, text=f"read {m.display(path)}")
        if size is not None:
            saved = self.save_path(h.node) or h.node.path
            return m.pair(h.comm, h.pid, op, path, memory=memory,
                          text=f"wrote {size} bytes to {m.display(saved)}")
        if removed:
            return m.pair(h.comm, h.pid, op, path,
                          text=f"{m.display(path)} was removed before it was saved")
        return m.pair(h.comm, h.pid, op, path, text=f"{m.display(path)} unchanged",
                      memory=h.node.memory)

    async def commit_handle(self, h: Handle) -> None:
        """Commit for a handle, its event pair recorded with the version (or, refused, logged
        with the failure)."""
        try:
            saved = await self.commit(h.node, lambda size: self.file_pair(h, size))
        except Failure as f:
            h.failure = f
            self.mount.emit(self.file_pair(h, failure=f))
            h.logged = True
            raise
        # Nothing saved (removed here meanwhile, or saved by another close): the event pair is
        # the close's, at release, which tells which.
        h.logged = saved is not None

    async def refuse(self, h: Handle) -> None:
        """Close of an open→close in which a write failed: nothing is committed, the file
        shows its previous version, the close fails with the write's error."""
        f = h.failure
        assert f is not None
        node = h.node
        log.info("%s not saved: a write failed (%s)", node.path, f.text())
        self.tree.discard(node)
        await self.mount.invalidate_now(node)
        if not h.logged:
            self.mount.emit(self.file_pair(h, failure=f))
            h.logged = True
        raise f
    def _check_truncate(self, size: int) -> None:
        """:raises Failure: EROFS, or EFBIG for a size over the content limit."""
        self.mount.check_writable()
        limit = self.store.limits.max_content_bytes
        if size > limit:
            raise too_big(size, limit)

    async def truncate_open(self, node: Node, size: int, h: Handle) -> None:
        """ftruncate(2): part of the handle's open→close (its event tells a failure)."""
        if node.scratch is not None:
            self._truncate_scratch(node, size)
            return
        try:
            self._check_truncate(size)
        except Failure as f:
            h.failure = f
            raise
        _resize(await self.buffer(node), size)
        node.dirty = h.truncated = h.changed = True
        node.gen += 1
        node.touch()

    async def truncate_path(self, node: Node, size: int, ctx: pyfuse3.RequestContext) -> None:
        """truncate(2): an event pair of its own. Committed at once, unless the file is open
        for writing: then it changes the shared buffer that the writers' close commits."""
        if node.scratch is not None:
            self._truncate_scratch(node, size)
            return
        comm_, pid = self.mount.ctx_name(ctx)
        path = node.path
        try:
            self._check_truncate(size)
        except Failure as f:
            self.mount.emit(self.mount.pair(comm_, pid, "truncate", path, failure=f))
            raise
        _resize(await self.buffer(node), size)
        node.dirty = True
        node.gen += 1
        node.touch()
        text = f"truncated {self.mount.display(path)} to {size} bytes"
        if self.save_path(node) is None:
            # Unlinked here while still open (truncate(2) of /proc/PID/fd/N): POSIX, the open
            # file changes and nothing is saved.
            self.mount.emit(self.mount.pair(comm_, pid, "truncate", path, text=text))
            return
        if node.writers:
            self.mount.emit(self.mount.pair(comm_, pid, "truncate", path,
                                  text=text + " (saved when the file is closed)"))
            return
        try:
            saved = await self.commit(node, lambda _size: self.mount.pair(comm_, pid, "truncate",
                                                                          path, text=text))
            if saved is None:  # removed here (or saved) while it waited for the mutex
                self.mount.emit(self.mount.pair(comm_, pid, "truncate", path, text=text))
        except Failure as f:
            self.mount.emit(self.mount.pair(comm_, pid, "truncate", path, failure=f))
            raise
        finally:
            if not node.writers and not node.handles:
                node.buffer = None

    def _truncate_scratch(self, node: Node, size: int) -> None:
        """truncate(2) or ftruncate(2) of a scratch file: within the scratch budget."""
        self.mount.check_writable()
        assert node.buffer is not None
        if self.tree.scratch_full(size - len(node.buffer)):
            raise Failure(errno.ENOSPC, "scratch files are full")
        _resize(node.buffer, size)
        node.touch()

    def register(self, h: Handle) -> FileHandleT:
        """Give an open file or directory its handle number; its path is taken now (for the
        event, which names the path at open time)."""
        fh = self.mount.new_fh()
        self.mount.handles[fh] = h
        h.node.handles += 1
        h.file_path = h.node.path
        return fh

    def open_handle(self, h: Handle) -> pyfuse3.FileInfo:
        fh = self.register(h)
        if h.writable:
            h.node.writers += 1
        # keep_cache: page caches stay valid across opens; changes made elsewhere reach the
        # kernel through the watcher's invalidate_inode.
        return pyfuse3.FileInfo(fh=fh, keep_cache=True)

    # -- renames ----------------------------------------------------------------------------

    async def rename(
        self, src: Node | None, old_path: str, new_parent: Node, name_new: bytes, flags: int,
        pair: Callable[[WrittenVersion | None], ToolPair | None],
        deadline: float,
    ) -> tuple[ToolPair | None, bool]:
        """Rename under the mutex, waiting for the database until ``deadline``; returns the
        events and whether the store recorded them."""
        self.mount.check_writable()
        if flags & pyfuse3.RENAME_EXCHANGE:
            raise Failure(errno.EINVAL, "RENAME_EXCHANGE is not supported")
        if src is None:
            raise Failure(errno.ENOENT, f"no such file {old_path}")
        new_path = self.mount.new_path(new_parent, name_new)
        if new_path == old_path:
            return pair(src.memory), False
        dst = self.mount.child(new_parent, name_new)
        if dst is not None and flags & pyfuse3.RENAME_NOREPLACE:
            raise Failure(errno.EEXIST, f"{new_path} exists")
        if src.is_dir:
            return await self._rename_dir(src, old_path, new_parent, new_path, dst, pair,
                                          deadline)
        if dst is not None and dst.is_dir:
            raise Failure(errno.EISDIR, f"{new_path} is a directory")
        if is_scratch(new_path.rpartition("/")[2]):
            return await self._rename_to_scratch(src, new_parent, new_path, dst, pair,
                                                 deadline)
        if src.scratch is not None:
            return await self._rename_scratch(src, new_parent, new_path, pair, deadline)
        events = pair(None)
        gen = src.gen
        await self.mount.events_in_order(deadline)
        try:
            if src.memory is None:
                # Never committed (a new file not closed yet): its content becomes the
                # content at the new path in one write, over the memory there if any.
                data = bytes(await self.data(src))
                moved = await self.mount.call_by(deadline, self.store.memories.write_path,
                                                 self.store_id,
                                                 new_path, data, actor=self.actor, events=events)
                if src.gen == gen:
                    src.dirty = False
            else:
                moved = await self.mount.call_by(
                    deadline, self.store.memories.rename_path, self.store_id, old_path, new_path,
                    actor=self.actor, replace=not flags & pyfuse3.RENAME_NOREPLACE,
                    events=events)
        except errors.MemfsError as e:
            raise Failure.of(e) from None
        self.tree.own_change(moved.seq)
        # Whatever holds the new name now (also one made while the store worked) is renamed
        # over: open descriptors keep its content, its unsaved data is never saved.
        dst = self.mount.child(new_parent, name_new)
        if dst is not None and dst is not src:
            dst.dirty = False
            self.tree.detach(dst)
        self.tree.detach(src, pin_parent=True)
        self.tree.place(src, new_parent, new_path.rpartition("/")[2])
        self.tree.set_memory(src, moved, moved.seq)
        self.mount.history_saw("put", moved.id, new_path, old_path)
        return events, True

    def _parked(self, node: Node) -> str | None:
        """The path of the memory a scratch file parks (:class:`~memfs.fuse.scratch.Scratch`),
        while the store is still to delete or move it: nothing took its path or its memory
        in this mount since (a save at the path, a change made elsewhere). Else None."""
        sc = node.scratch
        if sc is None or sc.parked_path is None or sc.parked_id is None:
            return None
        if sc.parked_id in self.tree.by_memory or self.tree.find(sc.parked_path) is not None:
            return None
        return sc.parked_path

    async def _still_parked(self, node: Node, deadline: float) -> str | None:
        """:meth:`_parked`, asked of the store too: the memory is still at that path (the
        change feed may not have brought a change made elsewhere yet)."""
        path = self._parked(node)
        if path is None:
            return None
        assert node.scratch is not None and node.scratch.parked_id is not None
        try:
            m = await self.mount.call_by(deadline, self.store.memories.get, self.store_id,
                                         node.scratch.parked_id, view="basic")
        except errors.NotFound:
            return None
        except errors.MemfsError as e:
            raise Failure.of(e) from None
        return path if m.path == path else None

    async def unlink_scratch(self, node: Node, comm_: str, pid: int, deadline: float) -> None:
        """Delete a scratch file (under the mutex). One that parks a memory deletes it: the
        memory was renamed onto this name, then deleted (``mv x.md x.md~; rm x.md~``)."""
        parked = await self._still_parked(node, deadline)
        if parked is not None:
            assert node.scratch is not None
            memory_id = node.scratch.parked_id
            assert memory_id is not None
            events = self.mount.pair(comm_, pid, "delete", parked, memory_id=memory_id,
                                     text=f"deleted {self.mount.display(parked)} (renamed to "
                                     f"{self.mount.display(node.path)} before)")
            await self.mount.events_in_order(deadline)
            try:
                gone = await self.mount.call_by(deadline, self.store.memories.delete_path,
                                                self.store_id,
                                                parked, actor=self.actor, events=events)
                self.tree.own_change(gone.seq)
                self.mount.logged(events)
                self.mount.history_saw("delete", memory_id, parked)
            except errors.NotFound:
                await self.deleted_elsewhere(deadline)
            except errors.MemfsError as e:
                raise Failure.of(e) from None
        self.tree.detach(node, pin_parent=True)

    async def deleted_elsewhere(self, deadline: float) -> None:
        """A memory this mount deletes was deleted elsewhere meanwhile: that delete is behind
        the store's newest change, and a late state from before it must not bring the file
        back either (as :meth:`unlink`)."""
        with contextlib.suppress(errors.MemfsError):
            self.tree.own_change(await self.mount.call_by(deadline, self.store.feed.last,
                                                          self.store_id))

    async def _replace_for_scratch(self, dst: Node | None, deadline: float) -> None:
        """Remove what a rename onto a scratch name replaces: a memory that has a scratch name
        (made elsewhere) is deleted in the store, as an unlink would."""
        if dst is None:
            return
        if dst.memory is not None:
            try:
                gone = await self.mount.call_by(deadline, self.store.memories.delete_path,
                                                self.store_id,
                                                dst.path, actor=self.actor)
                self.tree.own_change(gone.seq)
                self.mount.history_saw("delete", dst.memory.id, dst.path)
            except errors.NotFound:
                await self.deleted_elsewhere(deadline)
            except errors.MemfsError as e:
                raise Failure.of(e) from None
        dst.dirty = False
        self.tree.detach(dst)

    async def _rename_to_scratch(
        self, src: Node, new_parent: Node, new_path: str, dst: Node | None,
        pair: Callable[[WrittenVersion | None], ToolPair | None],
        deadline: float,
    ) -> tuple[ToolPair | None, bool]:
        """A file renamed onto a scratch name becomes scratch with its content. A memory is
        parked (:class:`~memfs.fuse.scratch.Scratch`): the store changes nothing yet."""
        data = await self.data(src)
        if src.scratch is None and (self.tree.scratch_crowded()
                                    or self.tree.scratch_full(len(data))):
            # Its content moves into the daemon's memory, as a scratch file's.
            raise Failure(errno.ENOSPC, f"{new_path}: no room left for scratch files")
        if dst is not None and dst is not src:
            await self._replace_for_scratch(dst, deadline)
        if src.scratch is None:
            parked = Scratch()
            if src.memory is not None:
                parked = Scratch(src.path, src.memory.id, src.memory.memory_version_id)
            if src.buffer is None:
                src.buffer = bytearray(data)
            self.tree.drop_content(src)
            self.tree.make_scratch(src, parked)
            self.tree.stale_inodes.append(src.ino)  # no memory's xattrs, no cached attributes
        self.tree.detach(src, pin_parent=True)
        self.tree.place(src, new_parent, new_path.rpartition("/")[2])
        return None, False

    async def _rename_scratch(
        self, src: Node, new_parent: Node, new_path: str,
        pair: Callable[[WrittenVersion | None], ToolPair | None],
        deadline: float,
    ) -> tuple[ToolPair | None, bool]:
        """A scratch file renamed onto a real name (``sed -i``'s temporary file, a backup put
        back): its content is saved there in one write, over the memory there if any, as
        one version. A parked memory moves there first (the same memory goes on)."""
        assert src.buffer is not None and src.scratch is not None
        data = bytes(src.buffer)
        events = pair(None)
        parked = await self._still_parked(src, deadline)
        await self.mount.events_in_order(deadline)
        try:
            if parked is not None and parked != new_path:
                renamed = await self.mount.call_by(deadline, self.store.memories.rename_path,
                                                   self.store_id,
                                                   parked, new_path, actor=self.actor, replace=True)
                self.tree.own_change(renamed.seq)
            moved = await self.mount.call_by(deadline, self.store.memories.write_path,
                                             self.store_id,
                                             new_path, data, actor=self.actor, events=events)
        except errors.MemfsError as e:
            raise Failure.of(e) from None
        self.tree.own_change(moved.seq)
        dst = self.mount.child(new_parent, new_path.rpartition("/")[2].encode())
        if dst is not None and dst is not src:
            dst.dirty = False
            self.tree.detach(dst)
        self.tree.unscratch(src)
        self.tree.detach(src, pin_parent=True)
        self.tree.place(src, new_parent, new_path.rpartition("/")[2])
        self.tree.set_memory(src, moved, moved.seq)
        if not src.handles:
            src.buffer = None
            self.tree.cache_content(src, data)
        self.tree.stale_inodes.append(src.ino)
        self.mount.history_saw("put", moved.id, new_path, parked)
        return events, True

    async def _rename_dir(
        self, src: Node, old_path: str, new_parent: Node, new_path: str, dst: Node | None,
        pair: Callable[[WrittenVersion | None], ToolPair | None],
        deadline: float,
    ) -> tuple[ToolPair | None, bool]:
        if dst is not None:
            if not dst.is_dir:
                raise Failure(errno.ENOTDIR, f"{new_path} is not a directory")
            if dst.children:
                raise Failure(errno.ENOTEMPTY, f"{new_path} is not empty")
        events = pair(None)
        await self.mount.events_in_order(deadline)
        try:
            moved = await self.mount.call_by(
                deadline, self.store.memories.rename_prefix, self.store_id, old_path + "/",
                new_path + "/", actor=self.actor, events=events)
        except errors.MemfsError as e:
            raise Failure.of(e) from None
        for m in moved:
            self.tree.own_change(m.seq)
        dst = self.mount.child(new_parent, new_path.rpartition("/")[2].encode())
        if dst is not None and dst is not src:
            self.tree.detach(dst)
        self.tree.detach(src, pin_parent=True)
        self.tree.place(src, new_parent, new_path.rpartition("/")[2])
        for m in moved:
            node = self.tree.by_memory.get(m.id)
            if node is not None and node.path == m.path:
                self.tree.set_memory(node, m, m.seq)
            else:
                self.tree.attach_memory(m, m.seq)  # one this mount had not seen yet
        if self.mount.search is not None:
            self.mount.search.changed()
        return events, True
