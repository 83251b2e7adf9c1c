"""The FUSE filesystem of one memory store: :class:`Operations` over a :class:`~memfs.store.Store`.

A store is shown as a directory tree (SPEC §2): a memory ``/a/b.md`` is the regular file
``MOUNT/a/b.md``; directories are the path prefixes shared by memories, plus empty directories
made with ``mkdir`` that live in this mount only until a file is written into them.

How it works:

* The whole tree (paths, sizes, hashes, no content) is loaded with :meth:`Store.tree` at start and
  kept in memory; lookup, getattr and readdir never touch the database. Content is read lazily
  and cached. The kernel may cache entries and attributes for a long time (``timeout``, 300 s by
  default) and keep page caches across opens, because every change made elsewhere is pushed to
  it by :class:`ChangeWatcher` (``invalidate_entry`` / ``invalidate_inode``).
* Writes are buffered per file (one buffer per inode, shared by every handle, so readers in this
  mount see it) and committed with :meth:`Store.write_path` once: at ``fsync``, or when the last
  writer closes the file. The commit happens in ``flush`` (the only close-time reply the kernel
  passes back to ``close(2)``), so a failed commit (EILSEQ, ENOSPC, EROFS…) is what ``close``
  returns. A flush that follows no ``write()`` does not commit, because shells ``dup2`` and close
  a redirected descriptor before writing to it; whatever is still uncommitted (an empty new
  file, an ``O_TRUNC`` without writes) is committed at ``release``.
* Inode numbers are stable while mounted: one per memory id, one per directory node (a renamed
  directory keeps its inode). Inode numbers are never reused, so ``generation`` is always 0.
* Each file open→close, directory listing, unlink, rename, mkdir, rmdir and path truncate is
  logged as an ``agent.tool_use`` / ``agent.tool_result`` pair (SPEC §4) through an
  :class:`EventSink`, after the store commit it reports on.
* Every handler maps :mod:`memfs.errors` through :data:`ERRNO_BY_ERROR` and raises only
  ``FUSEError``; any other exception is logged with its traceback and answered with EIO, so a
  bug fails one call instead of hanging the mount.

Known limitations:

* A file open for writing that is unlinked or renamed over is discarded at close, as POSIX says
  (its data never reaches the store).
* A file renamed while still pending (created, not yet committed) is committed at its old path
  first, so the rename is one store transaction; that makes a ``created`` plus a ``modified``
  version instead of one.
* Two writers of one file in two different mounts: the last close wins (the store keeps the
  overwritten content in the history).
* chmod/chown/utimes are accepted and not stored; modes are always 0644 / 0755.
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import IO, Any, ParamSpec, TypeVar

import pyfuse3
import trio
from pyfuse3 import FileHandleT, FileNameT, FlagT, FUSEError, InodeT, ModeT, XAttrNameT

from . import errors
from .models import Actor, Change, Memory
from .store import Store, format_time, local_user_actor, new_id, parse_time, validate_path

log = logging.getLogger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: The one translation of store errors to errno (SPEC §2); the first matching class wins.
ERRNO_BY_ERROR: list[tuple[type[errors.MemfsError], int]] = [
    (errors.NotFound, errno.ENOENT),
    (errors.PathTooLong, errno.ENAMETOOLONG),
    (errors.PathEncoding, errno.EILSEQ),
    (errors.InvalidPath, errno.EINVAL),
    (errors.InvalidContent, errno.EILSEQ),
    (errors.ContentTooLarge, errno.EFBIG),
    (errors.StoreArchived, errno.EROFS),
    (errors.LimitExceeded, errno.ENOSPC),
    (errors.InvalidRequest, errno.EINVAL),
    (errors.DirectoryNotEmpty, errno.ENOTEMPTY),
    (errors.NotADirectory, errno.ENOTDIR),
    (errors.PathConflict, errno.EEXIST),
    (errors.PreconditionFailed, errno.EBUSY),
    (errors.Conflict, errno.EEXIST),
    (errors.ReadOnly, errno.EROFS),
    (errors.Busy, errno.EBUSY),
    (errors.MemfsError, errno.EIO),
]

#: Read-only extended attributes of every committed file.
XATTRS = (b"user.memfs.memory_id", b"user.memfs.memory_version_id", b"user.memfs.content_sha256")

#: Upper bound of the content cache (committed content of files not open), in bytes.
CONTENT_CACHE_BYTES = 64 * 1024 * 1024

_BLOCK = 4096


def errno_for(exc: errors.MemfsError) -> int:
    """The errno that stands for a store error (:data:`ERRNO_BY_ERROR`)."""
    return next(code for cls, code in ERRNO_BY_ERROR if isinstance(exc, cls))


class _Failure(Exception):
    """An expected failure of one handler: the errno, and the line for the event log."""

    def __init__(self, errno_: int, why: str) -> None:
        super().__init__(errno_, why)
        self.errno = errno_
        self.why = why

    @classmethod
    def of(cls, exc: errors.MemfsError) -> _Failure:
        code = errno_for(exc)
        if code == errno.EIO:  # not a rule of the store: the database or server failed
            log.warning("answering EIO: %s", exc.message)
        return cls(code, exc.message)

    def text(self) -> str:
        return f"{errno.errorcode.get(self.errno, str(self.errno))}: {self.why}"


def _too_big(size: int, limit: int) -> _Failure:
    return _Failure(errno.EFBIG, f"content would be {size} bytes; the limit is {limit} bytes")


def _resize(buf: bytearray, size: int) -> None:
    """Cut ``buf`` to ``size`` bytes, or extend it with NUL bytes (a hole) to that size."""
    if size < len(buf):
        del buf[size:]
    else:
        buf.extend(b"\0" * (size - len(buf)))


def _handler(fn: Callable[_P, Awaitable[_R]]) -> Callable[_P, Awaitable[_R]]:
    """Make a handler keep pyfuse3's contract: only FUSEError leaves it.

    Store errors become their errno; anything else is a bug, logged with its traceback and
    answered with EIO for this call only (an exception escaping into pyfuse3's main loop would
    leave the request unanswered and the mount hung).
    """

    @functools.wraps(fn)
    async def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return await fn(*args, **kwargs)
        except FUSEError:
            raise
        except _Failure as e:
            raise FUSEError(e.errno) from None
        except errors.MemfsError as e:
            raise FUSEError(_Failure.of(e).errno) from None
        except Exception:
            log.exception("bug in %s; answering EIO", fn.__name__)
            raise FUSEError(errno.EIO) from None

    return wrapper


# --------------------------------------------------------------------------------------------
# tool events


class EventSink:
    """Where the mount's tool events go: a JSON-lines file (one object per line, flushed as
    written) and the database (:meth:`Store.add_events`, in batches).

    Database inserts are queued and written by :meth:`flush` (the daemon calls it every few
    hundred milliseconds and at exit), so an event costs a list append on the request path
    instead of a synced transaction.
    """

    def __init__(
        self,
        store: Store,
        store_id: str,
        session_id: str | None,
        path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.store = store
        self.store_id = store_id
        self.session_id = session_id
        self._file: IO[str] | None = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115
        self._pending: list[dict[str, Any]] = []

    def emit(self, events: Sequence[dict[str, Any]]) -> None:
        """Record events (complete wire objects, with ``id`` and ``processed_at``)."""
        if self._file is not None:
            for e in events:
                self._file.write(json.dumps(e, ensure_ascii=False) + "\n")
            self._file.flush()
        self._pending.extend(events)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def flush(self) -> None:
        """Write the queued events to the database. On a store error they stay queued (and the
        error propagates); they are in the JSON-lines file already."""
        if not self._pending:
            return
        batch = list(self._pending)
        try:
            self.store.add_events(self.session_id, batch, store_id=self.store_id)
        except (errors.NotFound, errors.InvalidRequest, errors.ReadOnly) as e:
            # The session was deleted (or a server refuses them for good): these events can
            # never be recorded (the JSON-lines file has them); keeping them would only make
            # the queue grow.
            log.error("dropping %d tool events: %s", len(batch), e)
        del self._pending[: len(batch)]

    def close(self) -> None:
        try:
            self.flush()
        except errors.MemfsError as e:
            log.error("could not record %d tool events in the database: %s", self.pending, e)
        finally:
            if self._file is not None:
                self._file.close()
                self._file = None


def _comm(pid: int) -> str:
    """The command name of a process (``/proc/<pid>/comm``), or ``"unknown"``.

    Read at every open, never cached: a forked shell opens a redirect as ``bash`` and then
    execs the command under the same pid.
    """
    try:
        fd = os.open(f"/proc/{pid}/comm", os.O_RDONLY)
    except OSError:
        return "unknown"
    try:
        return os.read(fd, 64).decode("utf-8", "replace").strip() or "unknown"
    except OSError:
        return "unknown"
    finally:
        os.close(fd)


def _version_key(m: Memory) -> tuple[str, str]:
    """Orders two states of one memory: later ``updated_at`` first, then the version id."""
    return (m.updated_at, m.memory_version_id)


def actor_for(session_id: str | None) -> Actor:
    """Who a mount's versions are attributed to: the session, else the local user."""
    return Actor.session(session_id) if session_id else local_user_actor()


# --------------------------------------------------------------------------------------------
# the tree


@dataclass(eq=False)
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
    #: Files: the store's memory (no content); None while the file is new and uncommitted.
    memory: Memory | None = None
    #: Files: cached committed content.
    content: bytes | None = None
    #: Files: the write buffer shared by every handle while open for writing.
    buffer: bytearray | None = None
    #: The buffer differs from the store (a commit is due).
    dirty: bool = False
    #: Dirty through write() or ftruncate() since the last commit, not only O_TRUNC/creation.
    written: bool = False
    handles: int = 0
    writers: int = 0
    #: Kernel lookup count (lookup, create, mkdir, readdirplus entries minus forget).
    lookups: int = 0
    #: Directories: kept although empty (made by mkdir, or emptied by this mount).
    pinned: bool = False
    attached: bool = True
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


def _time_ns(value: str) -> int:
    dt = parse_time(value)
    return int(dt.timestamp()) * 1_000_000_000 + dt.microsecond * 1000


@dataclass(eq=False)
class _Handle:
    """One open file (or directory) description, with what its event will say."""

    node: Node
    writable: bool
    pid: int
    comm: str
    created: bool = False
    wrote: bool = False
    truncated: bool = False
    file_path: str = ""
    failure: _Failure | None = None
    result: Memory | None = None
    listing: list[Node] | None = None


# --------------------------------------------------------------------------------------------
# operations


class Operations(pyfuse3.Operations):
    """pyfuse3 request handlers over one store.

    :param store: the database.
    :param store_id: the store to show.
    :param actor: who the versions are attributed to.
    :param read_only: refuse every change with EROFS.
    :param events: where tool events go (None: not logged).
    :param display_root: the mount path as the agent sees it (event ``file_path`` prefix).
    :param timeout: kernel entry/attribute cache timeout in seconds.
    """

    supports_dot_lookup = True
    enable_writeback_cache = False

    def __init__(
        self,
        store: Store,
        store_id: str,
        *,
        actor: Actor,
        read_only: bool = False,
        events: EventSink | None = None,
        display_root: str = "/",
        timeout: float = 300.0,
    ) -> None:
        super().__init__()
        self.store = store
        self.store_id = store_id
        self.actor = actor
        self.read_only = read_only
        self.events = events
        self.display_root = display_root.rstrip("/")
        self.timeout = timeout
        self.uid = os.getuid()
        self.gid = os.getgid()
        self.archived = False
        self.root = Node(pyfuse3.ROOT_INODE, True, "", None, pinned=True, lookups=1)
        self._nodes: dict[int, Node] = {pyfuse3.ROOT_INODE: self.root}
        self._by_memory: dict[str, Node] = {}
        self._next_ino = pyfuse3.ROOT_INODE + 1
        self._handles: dict[int, _Handle] = {}
        self._next_fh = 1
        self._cached_bytes = 0
        #: The change-feed position this tree reflects.
        self.seq = 0
        #: (parent inode, name, deleted inode) entries and inodes the kernel must forget;
        #: filled by :meth:`apply_changes`, drained by :class:`ChangeWatcher`.
        self.stale_entries: list[tuple[int, str, int]] = []
        self.stale_inodes: list[int] = []

    # -- loading ---------------------------------------------------------------------------

    def load(self) -> None:
        """Read the store's state and its whole tree (no content)."""
        # The feed position first: a change racing the load is applied again, harmlessly.
        self.seq = self.store.last_change(self.store_id)
        self.archived = self.store.get_store(self.store_id).archived_at is not None
        for m in self.store.tree(self.store_id):
            self._attach_memory(m)

    def _new_ino(self) -> int:
        ino = self._next_ino
        self._next_ino += 1
        return ino

    def _dir_for(self, path: str, pin: bool = False) -> Node:
        """The directory node at ``path`` (``/a/b``), created with its ancestors if missing.
        A file in the way is detached (the store says a directory is there now)."""
        node = self.root
        if path == "/":
            return node
        for name in path[1:].split("/"):
            assert node.children is not None
            child = node.children.get(name)
            if child is not None and not child.is_dir:
                self._detach(child, notify=True)
                child = None
            if child is None:
                child = Node(self._new_ino(), True, name, node)
                self._nodes[child.ino] = child
                node.children[name] = child
                node.mtime_ns = node.ctime_ns = time.time_ns()
            node = child
        node.pinned = node.pinned or pin
        return node

    def _attach_memory(self, m: Memory) -> Node:
        """Put a memory in the tree at its path (reusing its node when known)."""
        parent_path, _, name = m.path.rpartition("/")
        parent = self._dir_for(parent_path or "/")
        assert parent.children is not None
        node = self._by_memory.get(m.id)
        if node is None:
            existing = parent.children.get(name)
            if existing is not None and not existing.is_dir and existing.memory is None:
                node = existing  # our pending file: the store now has a memory there
            else:
                node = Node(self._new_ino(), False, name, parent, attached=False)
                self._nodes[node.ino] = node
            self._by_memory[m.id] = node
        self._set_memory(node, m)
        if node.attached and (node.parent is not parent or node.name != name):
            self._detach(node, notify=True)
        if not node.attached:
            in_the_way = parent.children.get(name)
            if in_the_way is not None and in_the_way is not node:
                self._detach(in_the_way, notify=True)
            self._place(node, parent, name)
            self.stale_entries.append((parent.ino, name, 0))
        return node

    def _set_memory(self, node: Node, m: Memory) -> None:
        old = node.memory
        node.memory = m
        if old is None or old.memory_version_id != m.memory_version_id:
            node.mtime_ns = node.ctime_ns = _time_ns(m.updated_at)
        if old is not None and old.content_sha256 != m.content_sha256:
            self._drop_content(node)

    def _drop_content(self, node: Node) -> None:
        if node.content is not None:
            self._cached_bytes -= len(node.content)
            node.content = None

    def _cache_content(self, node: Node, data: bytes) -> None:
        self._drop_content(node)
        if self._cached_bytes + len(data) > CONTENT_CACHE_BYTES:
            for other in self._nodes.values():
                if other.handles == 0:
                    self._drop_content(other)
        node.content = data
        self._cached_bytes += len(data)

    def _detach(self, node: Node, *, notify: bool = False, pin_parent: bool = False) -> None:
        """Take a node (and its subtree) out of the tree. With ``notify`` the kernel is told
        (for changes it did not make itself)."""
        parent = node.parent
        if not node.attached or parent is None:
            return
        assert parent.children is not None
        if parent.children.get(node.name) is node:
            del parent.children[node.name]
        node.attached = False
        parent.mtime_ns = parent.ctime_ns = time.time_ns()
        if pin_parent:
            parent.pinned = True
        if notify:
            self.stale_entries.append((parent.ino, node.name, node.ino))
        for sub in self._subtree(node):
            sub.attached = False
            self._forget_if_unused(sub)

    def _place(self, node: Node, parent: Node, name: str) -> None:
        """Attach a detached node (with its subtree) as ``parent``'s entry ``name``.

        Detaching forgot the nodes the kernel held no lookup on: attached again, they must be
        known again, else lookup finds what getattr, open and opendir answer with ENOENT.
        """
        assert parent.children is not None
        node.parent, node.name = parent, name
        parent.children[name] = node
        for sub in self._subtree(node):
            sub.attached = True
            self._nodes[sub.ino] = sub
            if sub.memory is not None:
                self._by_memory[sub.memory.id] = sub
        parent.mtime_ns = parent.ctime_ns = time.time_ns()

    def _subtree(self, node: Node) -> list[Node]:
        out, todo = [], [node]
        while todo:
            n = todo.pop()
            out.append(n)
            if n.children:
                todo.extend(n.children.values())
        return out

    def _forget_if_unused(self, node: Node) -> None:
        """Drop a detached node that neither the kernel (lookups) nor a handle refers to
        any more; an attached node is always kept."""
        if node.attached or node.lookups > 0 or node.handles:
            return
        self._nodes.pop(node.ino, None)
        self._drop_content(node)
        if node.memory is not None and self._by_memory.get(node.memory.id) is node:
            del self._by_memory[node.memory.id]

    def _prune(self, d: Node | None) -> None:
        """Remove directories that became empty through changes made elsewhere, unless this
        mount keeps them (mkdir, or emptied here)."""
        while d is not None and d is not self.root and d.attached and not d.children:
            if d.pinned or d.handles:
                return
            parent = d.parent
            self._detach(d, notify=True)
            d = parent

    # -- helpers ---------------------------------------------------------------------------

    def _node(self, inode: int) -> Node:
        node = self._nodes.get(inode)
        if node is None:
            raise FUSEError(errno.ENOENT)
        return node

    def _child(self, parent: Node, name: bytes) -> Node | None:
        if not parent.is_dir or not parent.attached:
            return None
        try:
            s = name.decode("utf-8")
        except UnicodeDecodeError:
            return None
        assert parent.children is not None
        return parent.children.get(s)

    @staticmethod
    def _entry_path(parent: Node, name: bytes) -> str:
        """The path of ``parent``'s entry ``name`` for messages and events: no rule checked
        (a name that is not UTF-8 is shown with replacement characters)."""
        return parent.path.rstrip("/") + "/" + name.decode("utf-8", "replace")

    def _new_path(self, parent: Node, name: bytes) -> str:
        """The memory path of a new entry, checked by the store's path rules.

        :raises _Failure: ENOENT (parent gone) or the errno of the broken rule.
        """
        if not parent.is_dir:
            raise _Failure(errno.ENOTDIR, f"{parent.path} is not a directory")
        if not parent.attached:
            raise _Failure(errno.ENOENT, "the directory was removed")
        base = parent.path.encode() if parent is not self.root else b""
        try:
            return validate_path(base + b"/" + name, self.store.limits)
        except errors.MemfsError as e:
            raise _Failure.of(e) from None

    def _check_writable(self) -> None:
        if self.read_only:
            raise _Failure(errno.EROFS, "the store is mounted read-only")
        if self.archived:
            raise _Failure(errno.EROFS, "the memory store is archived")

    def _display(self, path: str) -> str:
        return (self.display_root + path) if path != "/" else (self.display_root or "/")

    def _attrs(self, node: Node) -> pyfuse3.EntryAttributes:
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = InodeT(node.ino)
        entry.generation = 0
        entry.entry_timeout = self.timeout
        entry.attr_timeout = self.timeout
        if node.is_dir:
            entry.st_mode = ModeT(stat.S_IFDIR | 0o755)
            entry.st_nlink = 2
            size = 4096
        else:
            entry.st_mode = ModeT(stat.S_IFREG | 0o644)
            entry.st_nlink = 1
            size = node.size
        entry.st_uid = self.uid
        entry.st_gid = self.gid
        entry.st_rdev = 0
        entry.st_size = size
        entry.st_blksize = _BLOCK
        entry.st_blocks = (size + 511) // 512
        entry.st_atime_ns = node.mtime_ns
        entry.st_mtime_ns = node.mtime_ns
        entry.st_ctime_ns = node.ctime_ns
        return entry

    def _lookup_reply(self, node: Node) -> pyfuse3.EntryAttributes:
        node.lookups += 1
        return self._attrs(node)

    def _data(self, node: Node) -> bytes | bytearray:
        """The content this mount shows: the write buffer, else the committed content."""
        if node.buffer is not None:
            return node.buffer
        if node.content is None:
            if node.memory is None:
                return b""
            m = self.store.get_memory(self.store_id, node.memory.id)
            data = (m.content or "").encode("utf-8")
            if m.memory_version_id != node.memory.memory_version_id:
                # Changed elsewhere and the watcher has not seen it yet: take the new
                # metadata with the new content, and have the kernel refresh its attributes.
                self._set_memory(node, replace(m, content=None))
                self.stale_inodes.append(node.ino)
            self._cache_content(node, data)
            return data
        return node.content

    def _buffer(self, node: Node) -> bytearray:
        if node.buffer is None:
            node.buffer = bytearray(self._data(node))
        return node.buffer

    def _pair(
        self,
        name: str,
        pid: int,
        operation: str,
        file_path: str,
        *,
        failure: _Failure | None = None,
        text: str = "",
        memory: Memory | None = None,
        memory_id: str | None = None,
        new_path: str | None = None,
    ) -> None:
        """Log one agent.tool_use / agent.tool_result pair; ``memory`` names the memory and
        version a write produced (``memory_id`` alone: a deletion)."""
        if self.events is None:
            return
        now = format_time(datetime.now(UTC))
        use_id = new_id("sevt")
        inp: dict[str, Any] = {"operation": operation, "file_path": self._display(file_path)}
        if new_path is not None:
            inp["new_path"] = self._display(new_path)
        inp["pid"] = pid
        use = {
            "type": "agent.tool_use",
            "id": use_id,
            "name": name,
            "input": inp,
            "processed_at": now,
            "evaluated_permission": "allow",
            "evaluation": {"type": "always_allow"},
            "session_thread_id": None,
        }
        result: dict[str, Any] = {
            "type": "agent.tool_result",
            "id": new_id("sevt"),
            "tool_use_id": use_id,
            "processed_at": now,
            "is_error": failure is not None,
            "content": [{"type": "text", "text": failure.text() if failure else text}],
        }
        if memory is not None and failure is None:
            result["memory_id"] = memory.id
            result["memory_version_id"] = memory.memory_version_id
        elif memory_id is not None and failure is None:
            result["memory_id"] = memory_id
        self.events.emit([use, result])

    def _ctx_name(self, ctx: pyfuse3.RequestContext) -> tuple[str, int]:
        return _comm(ctx.pid), ctx.pid

    # -- commits ---------------------------------------------------------------------------

    def _commit(self, node: Node) -> Memory:
        """Write the node's buffer to the store (one version, or none if unchanged).

        :raises _Failure: the store refused; nothing was written and the node stays dirty.
        """
        data = bytes(self._data(node))
        path = node.path
        try:
            m = self.store.write_path(self.store_id, path, data, actor=self.actor)
        except errors.MemfsError as e:
            log.info("commit of %s refused: %s", path, e.message)
            raise _Failure.of(e) from None
        if node.memory is None or node.memory.id != m.id:
            if node.memory is not None and self._by_memory.get(node.memory.id) is node:
                del self._by_memory[node.memory.id]
            self._by_memory[m.id] = node
        self._set_memory(node, m)
        node.dirty = node.written = False
        self._cache_content(node, data)
        return m

    def _commit_handle(self, h: _Handle) -> None:
        """Commit for a handle, remembering the outcome for its event."""
        try:
            h.result = self._commit(h.node)
        except _Failure as f:
            h.failure = f
            raise

    def _discard(self, node: Node) -> None:
        """Drop an uncommitted buffer (the commit failed, or the file is gone)."""
        node.buffer = None
        if node.dirty:
            node.dirty = node.written = False
            self.stale_inodes.append(node.ino)  # the page cache may hold the refused data
            if node.memory is None and node.attached:
                self._detach(node, notify=True)

    # -- handlers: names and attributes -----------------------------------------------------

    @_handler
    async def lookup(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        parent = self._node(parent_inode)
        if name == b".":
            return self._lookup_reply(parent)
        if name == b"..":
            return self._lookup_reply(parent.parent or self.root)
        child = self._child(parent, name)
        if child is None:
            # ENOENT rather than a negative entry: a file created elsewhere must not stay
            # hidden for `timeout` seconds.
            raise FUSEError(errno.ENOENT)
        return self._lookup_reply(child)

    async def forget(self, inode_list: Sequence[tuple[InodeT, int]]) -> None:
        # forget has no reply to carry an error: a bug here is logged, never raised.
        try:
            for inode, nlookup in inode_list:
                node = self._nodes.get(inode)
                if node is None or node is self.root:
                    continue
                node.lookups -= nlookup
                self._forget_if_unused(node)
        except Exception:
            log.exception("bug in forget")

    @_handler
    async def getattr(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        return self._attrs(self._node(inode))

    @_handler
    async def setattr(
        self,
        inode: InodeT,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: FileHandleT | None,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        node = self._node(inode)
        if fields.update_size:
            if node.is_dir:
                raise FUSEError(errno.EISDIR)
            h = self._handles.get(fh) if fh is not None else None
            if h is not None:
                self._truncate_open(node, attr.st_size, h)
            else:
                self._truncate_path(node, attr.st_size, ctx)
        # chmod, chown and utimes are accepted and not stored (SPEC §2), so `cp -p`, `touch`
        # and `rsync` work; modes and owners are fixed, times are the store's.
        return self._attrs(node)

    def _check_truncate(self, size: int) -> None:
        """:raises _Failure: EROFS, or EFBIG for a size over the content limit."""
        self._check_writable()
        limit = self.store.limits.max_content_bytes
        if size > limit:
            raise _too_big(size, limit)

    def _truncate_open(self, node: Node, size: int, h: _Handle) -> None:
        """ftruncate(2): part of the handle's open→close (its event tells a failure)."""
        try:
            self._check_truncate(size)
        except _Failure as f:
            h.failure = f
            raise
        _resize(self._buffer(node), size)
        node.dirty = h.truncated = True
        # ftruncate(fd, 0) before any write is O_TRUNC done by hand: like O_TRUNC it must
        # not make a dup2-close flush commit an empty version.
        if size or h.wrote:
            h.wrote = node.written = True

    def _truncate_path(self, node: Node, size: int, ctx: pyfuse3.RequestContext) -> None:
        """truncate(2): an event pair of its own. Committed at once, unless the file is open
        for writing: then it changes the shared buffer that the last writer's close commits."""
        comm, pid = self._ctx_name(ctx)
        path = node.path
        m: Memory | None = None
        try:
            self._check_truncate(size)
            _resize(self._buffer(node), size)
            node.dirty = True
            if node.writers:
                node.written = True
            else:
                try:
                    m = self._commit(node)
                finally:
                    node.buffer = None
                    node.dirty = node.written = False
        except _Failure as f:
            self._pair(comm, pid, "truncate", path, failure=f)
            raise
        text = f"truncated {self._display(path)} to {size} bytes"
        if node.writers:
            text += " (saved when the file is closed)"
        self._pair(comm, pid, "truncate", path, memory=m, text=text)

    # -- handlers: files --------------------------------------------------------------------

    def _register(self, h: _Handle) -> FileHandleT:
        """Give an open file or directory its handle number; its path is taken now (for the
        event, which names the path at open time)."""
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = h
        h.node.handles += 1
        h.file_path = h.node.path
        return FileHandleT(fh)

    def _open_handle(self, h: _Handle) -> pyfuse3.FileInfo:
        fh = self._register(h)
        if h.writable:
            h.node.writers += 1
        # keep_cache: page caches stay valid across opens; changes made elsewhere reach the
        # kernel through ChangeWatcher's invalidate_inode.
        return pyfuse3.FileInfo(fh=fh, keep_cache=True)

    @_handler
    async def open(
        self, inode: InodeT, flags: FlagT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.FileInfo:
        node = self._node(inode)
        if node.is_dir:
            raise FUSEError(errno.EISDIR)
        writable = flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR)
        comm, pid = self._ctx_name(ctx)
        h = _Handle(node, writable, pid, comm)
        if writable or flags & os.O_TRUNC:
            try:
                self._check_writable()
            except _Failure as f:
                self._pair(comm, pid, "write", node.path, failure=f)
                raise
        if writable and flags & os.O_TRUNC:
            if node.size:
                node.dirty = True
            if node.buffer is None:
                node.buffer = bytearray()
            else:
                del node.buffer[:]  # shared with the other handles open on this file
            h.truncated = True
        return self._open_handle(h)

    @_handler
    async def create(
        self,
        parent_inode: InodeT,
        name: FileNameT,
        mode: ModeT,
        flags: FlagT,
        ctx: pyfuse3.RequestContext,
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        parent = self._node(parent_inode)
        comm, pid = self._ctx_name(ctx)
        entry = self._entry_path(parent, name)
        try:
            self._check_writable()
            path = self._new_path(parent, name)
            if not stat.S_ISREG(mode) and stat.S_IFMT(mode):
                raise _Failure(errno.EPERM, "only regular files can be stored")
            existing = self._child(parent, name)
            if existing is not None:
                raise _Failure(errno.EEXIST, f"{path} exists")
            try:
                # The limit and the archive state are checked now, so that open(O_CREAT)
                # fails at once; the commit checks again under the write lock.
                self.store.check_can_create(self.store_id)
            except errors.MemfsError as e:
                raise _Failure.of(e) from None
        except _Failure as f:
            self._pair(comm, pid, "create", entry, failure=f)
            raise
        assert parent.children is not None
        node = Node(self._new_ino(), False, path.rpartition("/")[2], parent)
        node.buffer = bytearray()
        node.dirty = True
        self._nodes[node.ino] = node
        parent.children[node.name] = node
        parent.mtime_ns = parent.ctime_ns = node.mtime_ns
        h = _Handle(node, True, pid, comm, created=True)
        info = self._open_handle(h)
        return info, self._lookup_reply(node)

    @_handler
    async def read(self, fh: FileHandleT, off: int, size: int) -> bytes:
        h = self._handles.get(fh)
        if h is None:
            raise FUSEError(errno.EBADF)
        data = self._data(h.node)
        return bytes(data[off : off + size])

    @_handler
    async def write(self, fh: FileHandleT, off: int, buf: bytes) -> int:
        h = self._handles.get(fh)
        if h is None:
            raise FUSEError(errno.EBADF)
        node = h.node
        limit = self.store.limits.max_content_bytes
        end = off + len(buf)
        if end > limit:
            h.failure = _too_big(end, limit)
            raise FUSEError(errno.EFBIG)
        data = self._buffer(node)
        if off > len(data):
            data.extend(b"\0" * (off - len(data)))
        data[off:end] = buf
        node.dirty = node.written = True
        h.wrote = True
        return len(buf)

    @_handler
    async def flush(self, fh: FileHandleT) -> None:
        h = self._handles.get(fh)
        if h is None:
            return
        node = h.node
        # Commit at the last writer's close. A flush after no write() is most likely a shell's
        # dup2-then-close of a redirect, before anything is written: leave that to release().
        if (h.writable and node.dirty and node.written and node.writers == 1
                and node.attached):  # fmt: skip
            self._commit_handle(h)

    @_handler
    async def fsync(self, fh: FileHandleT, datasync: bool) -> None:
        h = self._handles.get(fh)
        if h is None:
            return
        if h.node.dirty and h.node.attached:
            self._commit_handle(h)
        # The store commits with synchronous=NORMAL: fsync() is where the data must reach
        # the disk, this file's and every earlier commit's.
        self.store.sync()

    @_handler
    async def release(self, fh: FileHandleT) -> None:
        h = self._handles.pop(fh, None)
        if h is None:
            return
        node = h.node
        node.handles -= 1
        if h.writable:
            node.writers -= 1
        try:
            if node.writers == 0 and node.dirty and node.attached:
                try:
                    self._commit_handle(h)
                except _Failure as f:
                    # The kernel ignores release() errors: the event log has to tell.
                    log.warning("%s not saved: %s", node.path, f.text())
            if node.writers == 0 and node.dirty:
                self._discard(node)  # refused, or unlinked while open
            if node.handles == 0 and not node.dirty:
                node.buffer = None
        finally:
            self._file_event(h)
            self._forget_if_unused(node)

    def _file_event(self, h: _Handle) -> None:
        if h.created:
            op = "create"
        elif h.wrote or h.truncated:
            op = "write"
        else:
            op = "read"
        path = h.file_path
        if h.failure is not None:
            self._pair(h.comm, h.pid, op, path, failure=h.failure)
        elif op == "read":
            self._pair(h.comm, h.pid, op, path, text=f"read {self._display(path)}")
        elif h.result is None and not h.node.attached:
            self._pair(h.comm, h.pid, op, path,
                       text=f"{self._display(path)} was removed before it was saved")
        elif h.result is None:
            self._pair(h.comm, h.pid, op, path, text=f"{self._display(path)} unchanged",
                       memory=h.node.memory)
        else:
            m = h.result
            self._pair(h.comm, h.pid, op, path, memory=m,
                       text=f"wrote {m.content_size_bytes} bytes to {self._display(m.path)}")

    # -- handlers: directories ---------------------------------------------------------------

    @_handler
    async def opendir(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> FileHandleT:
        node = self._node(inode)
        if not node.is_dir:
            raise FUSEError(errno.ENOTDIR)
        comm, pid = self._ctx_name(ctx)
        assert node.children is not None
        # A snapshot, so that readdir offsets stay stable while entries come and go.
        listing = [node.children[k] for k in sorted(node.children)]
        return self._register(_Handle(node, False, pid, comm, listing=listing))

    @_handler
    async def readdir(self, fh: FileHandleT, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        h = self._handles.get(fh)
        if h is None or h.listing is None:
            raise FUSEError(errno.EBADF)
        listing = h.listing
        for index in range(start_id, len(listing)):
            child = listing[index]
            if not child.attached:
                continue
            if not pyfuse3.readdir_reply(
                token, FileNameT(child.name.encode("utf-8")), self._attrs(child), index + 1
            ):
                return
            # pyfuse3 answers READDIRPLUS: each entry counts as a lookup in the kernel.
            child.lookups += 1

    @_handler
    async def releasedir(self, fh: FileHandleT) -> None:
        h = self._handles.pop(fh, None)
        if h is None:
            return
        h.node.handles -= 1
        n = len(h.listing or ())
        self._pair(h.comm, h.pid, "list", h.file_path,
                   text=f"listed {self._display(h.file_path)}: {n} entr{'y' if n == 1 else 'ies'}")
        self._forget_if_unused(h.node)

    async def fsyncdir(self, fh: FileHandleT, datasync: bool) -> None:
        return None

    @_handler
    async def mkdir(
        self, parent_inode: InodeT, name: FileNameT, mode: ModeT, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        parent = self._node(parent_inode)
        comm, pid = self._ctx_name(ctx)
        entry = self._entry_path(parent, name)
        try:
            self._check_writable()
            path = self._new_path(parent, name)
            if self._child(parent, name) is not None:
                raise _Failure(errno.EEXIST, f"{path} exists")
        except _Failure as f:
            self._pair(comm, pid, "mkdir", entry, failure=f)
            raise
        node = self._dir_for(path, pin=True)
        self._pair(comm, pid, "mkdir", path,
                   text=f"created directory {self._display(path)} (kept in this mount until a "
                   "file is written into it)")
        return self._lookup_reply(node)

    @_handler
    async def rmdir(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        parent = self._node(parent_inode)
        comm, pid = self._ctx_name(ctx)
        node = self._child(parent, name)
        entry = self._entry_path(parent, name)
        try:
            self._check_writable()
            if node is None:
                raise _Failure(errno.ENOENT, f"no directory {entry}")
            if not node.is_dir:
                raise _Failure(errno.ENOTDIR, f"{entry} is not a directory")
            if node.children:
                raise _Failure(errno.ENOTEMPTY, f"{entry} is not empty")
        except _Failure as f:
            self._pair(comm, pid, "rmdir", entry, failure=f)
            raise
        self._detach(node, pin_parent=True)
        self._pair(comm, pid, "rmdir", entry,
                   text=f"removed directory {self._display(entry)}")

    @_handler
    async def unlink(
        self, parent_inode: InodeT, name: FileNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        parent = self._node(parent_inode)
        comm, pid = self._ctx_name(ctx)
        node = self._child(parent, name)
        entry = self._entry_path(parent, name)
        deleted: Memory | None = None
        try:
            self._check_writable()
            if node is None:
                raise _Failure(errno.ENOENT, f"no file {entry}")
            if node.is_dir:
                raise _Failure(errno.EISDIR, f"{entry} is a directory")
            if node.memory is not None:
                try:
                    deleted = self.store.delete_path(self.store_id, node.path, actor=self.actor)
                except errors.NotFound:
                    pass  # deleted elsewhere meanwhile: the file is gone either way
                except errors.MemfsError as e:
                    raise _Failure.of(e) from None
        except _Failure as f:
            self._pair(comm, pid, "delete", entry, failure=f)
            raise
        assert node is not None
        self._detach(node, pin_parent=True)
        text = f"deleted {self._display(entry)}"
        if deleted is None:
            text += " (it was never saved)"
        self._pair(comm, pid, "delete", entry, text=text,
                   memory_id=deleted.id if deleted else None)

    @_handler
    async def rename(
        self,
        parent_inode_old: InodeT,
        name_old: FileNameT,
        parent_inode_new: InodeT,
        name_new: FileNameT,
        flags: FlagT,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        old_parent = self._node(parent_inode_old)
        new_parent = self._node(parent_inode_new)
        comm, pid = self._ctx_name(ctx)
        src = self._child(old_parent, name_old)
        old_entry = self._entry_path(old_parent, name_old)
        new_entry = self._entry_path(new_parent, name_new)
        try:
            moved = self._rename(src, old_entry, new_parent, name_new, flags)
        except _Failure as f:
            self._pair(comm, pid, "rename", old_entry, new_path=new_entry, failure=f)
            raise
        self._pair(comm, pid, "rename", old_entry, new_path=new_entry,
                   text=f"renamed {self._display(old_entry)} to {self._display(new_entry)}",
                   memory=moved)

    def _rename(
        self, src: Node | None, old_path: str, new_parent: Node, name_new: bytes, flags: int
    ) -> Memory | None:
        self._check_writable()
        if flags & pyfuse3.RENAME_EXCHANGE:
            raise _Failure(errno.EINVAL, "RENAME_EXCHANGE is not supported")
        if src is None:
            raise _Failure(errno.ENOENT, f"no such file {old_path}")
        new_path = self._new_path(new_parent, name_new)
        if new_path == old_path:
            return src.memory
        dst = self._child(new_parent, name_new)
        if dst is not None and flags & pyfuse3.RENAME_NOREPLACE:
            raise _Failure(errno.EEXIST, f"{new_path} exists")
        if src.is_dir:
            return self._rename_dir(src, old_path, new_parent, new_path, dst)
        if dst is not None and dst.is_dir:
            raise _Failure(errno.EISDIR, f"{new_path} is a directory")
        moved: Memory | None = None
        try:
            if src.memory is None:
                # Not committed yet (a new file whose release has not come): commit it first,
                # so that the rename over `dst` stays one store transaction.
                self._commit(src)
            moved = self.store.rename_path(
                self.store_id, old_path, new_path, actor=self.actor,
                replace=not flags & pyfuse3.RENAME_NOREPLACE,
            )
        except errors.MemfsError as e:
            raise _Failure.of(e) from None
        if dst is not None:
            if dst.memory is None:  # a new file renamed over: its data never reaches the store
                dst.buffer = None
                dst.dirty = dst.written = False
            self._detach(dst)
        self._detach(src, pin_parent=True)
        self._place(src, new_parent, new_path.rpartition("/")[2])
        self._set_memory(src, moved)
        return moved

    def _rename_dir(
        self, src: Node, old_path: str, new_parent: Node, new_path: str, dst: Node | None
    ) -> None:
        if dst is not None:
            if not dst.is_dir:
                raise _Failure(errno.ENOTDIR, f"{new_path} is not a directory")
            if dst.children:
                raise _Failure(errno.ENOTEMPTY, f"{new_path} is not empty")
        try:
            moved = self.store.rename_prefix(
                self.store_id, old_path + "/", new_path + "/", actor=self.actor
            )
        except errors.MemfsError as e:
            raise _Failure.of(e) from None
        if dst is not None:
            self._detach(dst)
        self._detach(src, pin_parent=True)
        self._place(src, new_parent, new_path.rpartition("/")[2])
        for m in moved:
            node = self._by_memory.get(m.id)
            if node is not None and node.path == m.path:
                self._set_memory(node, m)
            else:
                self._attach_memory(m)  # one this mount had not seen yet

    # -- handlers: refused node types -------------------------------------------------------

    async def symlink(
        self, parent_inode: InodeT, name: FileNameT, target: FileNameT,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        raise FUSEError(errno.EPERM)

    async def link(
        self, inode: InodeT, new_parent_inode: InodeT, new_name: FileNameT,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        raise FUSEError(errno.EPERM)

    async def mknod(
        self, parent_inode: InodeT, name: FileNameT, mode: ModeT, rdev: int,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        raise FUSEError(errno.EPERM)

    async def readlink(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> FileNameT:
        raise FUSEError(errno.EINVAL)

    # -- handlers: filesystem and xattrs ------------------------------------------------------

    @_handler
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        lim = self.store.limits
        live = self.store.count_memories(self.store_id)
        data = pyfuse3.StatvfsData()
        data.f_bsize = data.f_frsize = _BLOCK
        data.f_blocks = lim.max_memories * lim.max_content_bytes // _BLOCK
        used = sum(n.size for n in self._by_memory.values() if n.attached) // _BLOCK
        data.f_bfree = data.f_bavail = max(0, data.f_blocks - used)
        data.f_files = lim.max_memories
        data.f_ffree = data.f_favail = max(0, lim.max_memories - live)
        data.f_namemax = 255
        return data

    @_handler
    async def getxattr(
        self, inode: InodeT, name: XAttrNameT, ctx: pyfuse3.RequestContext
    ) -> bytes:
        node = self._node(inode)
        m = node.memory
        if m is None or node.is_dir or name not in XATTRS:
            raise FUSEError(pyfuse3.ENOATTR)
        if name == XATTRS[0]:
            return m.id.encode()
        if name == XATTRS[1]:
            return m.memory_version_id.encode()
        return m.content_sha256.encode()

    @_handler
    async def listxattr(self, inode: InodeT, ctx: pyfuse3.RequestContext) -> Sequence[XAttrNameT]:
        node = self._node(inode)
        if node.is_dir or node.memory is None:
            return []
        return [XAttrNameT(n) for n in XATTRS]

    async def setxattr(
        self, inode: InodeT, name: XAttrNameT, value: bytes, ctx: pyfuse3.RequestContext
    ) -> None:
        # EPERM for ours (read-only facts); ENOTSUP for the rest, which `cp -a` and rsync skip.
        raise FUSEError(errno.EPERM if name in XATTRS else errno.ENOTSUP)

    async def removexattr(
        self, inode: InodeT, name: XAttrNameT, ctx: pyfuse3.RequestContext
    ) -> None:
        raise FUSEError(errno.EPERM if name in XATTRS else errno.ENOTSUP)

    # -- changes made elsewhere ----------------------------------------------------------------

    def apply_changes(
        self, changes: Sequence[Change], known: Mapping[str, Memory | None] | None = None
    ) -> None:
        """Bring the tree up to date with changes from the store's feed (made by this mount
        or elsewhere), in feed order, queueing kernel invalidations in :attr:`stale_entries`
        and :attr:`stale_inodes`. Idempotent: a change this mount made itself is a no-op.

        ``known`` gives the current state of memories the caller already has (a remote feed
        sends it with each change; None: deleted since); the others are read from the store.
        """
        # The current state of every memory a `put` names, read once per batch.
        current: dict[str, Memory | None] = dict(known or {})
        for ch in changes:
            if ch.op == "put" and ch.memory_id is not None and ch.memory_id not in current:
                try:
                    current[ch.memory_id] = self.store.get_memory(
                        self.store_id, ch.memory_id, view="basic"
                    )
                except errors.NotFound:
                    current[ch.memory_id] = None
        emptied: list[Node] = []
        for ch in changes:
            self.seq = max(self.seq, ch.seq)
            if ch.op == "store":
                try:
                    self.archived = self.store.get_store(self.store_id).archived_at is not None
                except errors.NotFound:
                    self.archived = True
                    for child in list((self.root.children or {}).values()):
                        self._detach(child, notify=True)
            elif ch.op == "delete" and ch.memory_id is not None:
                node = self._by_memory.get(ch.memory_id)
                if node is not None and node.attached:
                    self._remove_deleted(node, emptied)
            elif ch.op == "put" and ch.memory_id is not None:
                m = current.get(ch.memory_id)
                if m is not None:
                    self._apply_put(m, emptied)
        for d in emptied:
            self._prune(d)

    def _remove_deleted(self, node: Node, emptied: list[Node]) -> None:
        """Take out the file of a memory deleted elsewhere; its parent joins ``emptied``
        (to be pruned if nothing is left in it)."""
        emptied.append(node.parent)  # type: ignore[arg-type]
        self._detach(node, notify=True)
        self._drop_content(node)

    def _apply_put(self, m: Memory, emptied: list[Node]) -> None:
        node = self._by_memory.get(m.id)
        if (node is not None and node.attached and node.memory is not None
                and _version_key(node.memory) >= _version_key(m)):  # fmt: skip
            # Our own change, one applied already, or an older state than the node's: a
            # remote feed sends each memory as it was when the change was sent, so a put for
            # a file's creation can arrive after this mount renamed it (it must not move the
            # file back until the rename's own put arrives).
            return
        if node is not None and node.attached and node.parent is not None:
            emptied.append(node.parent)
        node = self._attach_memory(m)
        # Content or at least mtime changed: the kernel drops its attributes and pages.
        self.stale_inodes.append(node.ino)

    def reload(self, tree: Sequence[Memory], seq: int, archived: bool) -> None:
        """Replace what this mount knows of the store by ``tree`` (every live memory, at feed
        position ``seq``): when the feed lost track of this mount's position. Memories gone
        from ``tree`` leave the mount, the others are placed as in :meth:`apply_changes`
        (kernel invalidations queued the same way); files not committed yet stay."""
        self.archived = archived
        live = {m.id for m in tree}
        emptied: list[Node] = []
        for memory_id, node in list(self._by_memory.items()):
            if memory_id not in live and node.attached:
                self._remove_deleted(node, emptied)
        for m in tree:
            self._apply_put(m, emptied)
        for d in emptied:
            self._prune(d)
        self.seq = seq

    def discard_all(self) -> None:
        """At unmount: drop every uncommitted buffer (nothing half-written reaches the store)."""
        for node in self._nodes.values():
            if node.dirty:
                log.warning("unmounting with %s unsaved (still open for writing)", node.path)
            node.buffer = None
            node.dirty = False


# --------------------------------------------------------------------------------------------
# background services


class _Periodic:
    """A background service that calls :meth:`tick` every ``interval`` seconds until
    :meth:`stop` (which ends :meth:`run` at once, without a last tick)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._stopped = trio.Event()

    def stop(self) -> None:
        self._stopped.set()

    async def run(self) -> None:
        while True:
            with trio.move_on_after(self.interval):
                await self._stopped.wait()
            if self._stopped.is_set():
                return
            await self.tick()

    async def tick(self) -> None:
        raise NotImplementedError


class ChangeWatcher(_Periodic):
    """Polls the store's change feed and keeps the tree and the kernel caches current.

    Every ``interval`` seconds it compares :meth:`Store.last_change` (a cheap indexed query)
    with the tree's position, applies new changes, and tells the kernel which entries and
    inodes to forget (:func:`flush_invalidations`).
    """

    def __init__(self, ops: Operations, interval: float = 0.15) -> None:
        super().__init__(interval)
        self.ops = ops

    async def tick(self) -> None:
        try:
            await self.poll()
        except errors.MemfsError as e:
            log.warning("change feed: %s", e)
        except Exception:
            log.exception("change feed poll failed")

    async def poll(self) -> int:
        """Apply pending changes; returns how many were applied."""
        ops = self.ops
        n = 0
        while ops.store.last_change(ops.store_id) > ops.seq:
            changes = ops.store.changes_since(ops.store_id, ops.seq)
            if not changes:
                break
            ops.apply_changes(changes)
            n += len(changes)
        await flush_invalidations(ops)
        return n


async def flush_invalidations(ops: Operations) -> None:
    """Tell the kernel to forget the entries and inodes ``ops`` queued (and empty the queues).

    ``invalidate_entry_async`` runs in pyfuse3's notify thread, and ``invalidate_inode`` in a
    worker thread, because both may wait for requests this (single) trio thread has to answer.
    """
    entries, ops.stale_entries = ops.stale_entries, []
    inodes, ops.stale_inodes = list(dict.fromkeys(ops.stale_inodes)), []
    for parent, name, deleted in entries:
        pyfuse3.invalidate_entry_async(
            InodeT(parent), FileNameT(name.encode("utf-8")), deleted=InodeT(deleted),
            ignore_enoent=True,
        )
    if inodes:
        await trio.to_thread.run_sync(_invalidate_inodes, inodes)


def _invalidate_inodes(inodes: list[int]) -> None:
    for ino in inodes:
        try:
            pyfuse3.invalidate_inode(InodeT(ino))
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOTCONN):
                log.warning("invalidate_inode(%d): %s", ino, e)


class EventFlusher(_Periodic):
    """Writes queued tool events to the database every ``interval`` seconds (the last ones
    are written by :meth:`EventSink.close`, at unmount)."""

    def __init__(self, sink: EventSink, interval: float = 0.25) -> None:
        super().__init__(interval)
        self.sink = sink

    async def tick(self) -> None:
        try:
            # In a thread: encoding and inserting a batch must not hold up the requests the
            # kernel is waiting for (the store is thread-safe; new events are only appended to
            # the queue meanwhile).
            await trio.to_thread.run_sync(self.sink.flush)
        except errors.MemfsError as e:
            log.warning("tool events not recorded yet: %s", e)
