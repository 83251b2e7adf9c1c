"""The read-only ``.sessions/`` directory of a live mount: the sessions this store was attached
to, each a folder with what it said, did and was told.

``ls MOUNT/.sessions/`` lists one folder per session, named ``<created>-<session id>`` (the
time the session started, UTC, ``20261206T153906Z-sesn_01…``); each holds three files:

- ``transcript.md``: the conversation, messages in full and tool calls one line each (the
  store's formatter, :func:`memfs.store.transcript.transcript_markdown`, handed in by the mount
  daemon: a mount given none shows no ``transcript.md``).
- ``events.jsonl``: the session's events, one JSON object per line, oldest first (as the API's
  ``GET /v1/sessions/{id}/events`` gives them).
- ``prompt.md``: the memory section of the session's system prompt, what ``memfs session
  prompt`` prints (:func:`memfs.launcher.prompt.render_memory_prompt`).

**Which sessions** (:func:`memfs.rules.sessions_visibility`): a mount acting as a session
shows that session's folder only, since transcripts hold people's words; the store's metadata
``memfs_sessions_visibility=workspace`` widens that to every session that had this store
attached (all of them are of the store's workspace; archived ones too). A mount acting as no
session (a person's ``memfs mount``) shows every session of the store. At most
:data:`MAX_SESSIONS`, the newest (and the mount's own session always). A server decides what
its credential may see: through a session's token, a remote mount lists that session only,
whatever the store says.

**Order**: the directory lists its folders newest first (``ls -U``, ``find``); ``ls`` sorts
names, which begin with the start time, so ``ls`` shows the oldest first and ``ls -r`` (or
``ls -t``: a folder's time is its session's start) the newest first.

**Fresh, and bounded**: a file's content is read from the store when it is looked up (so
``stat`` and ``ls -l`` give its size) and at each open, reused for :data:`REUSE_SECONDS` (a
``cat`` looks up, then opens); the kernel keeps no name, attribute or page of it. A file shows
at most :data:`MAX_FILE_BYTES`: past that, it ends with a line that says it was cut and where
the rest is. At most :data:`KEPT` contents are kept between opens.

Read-only (every change is EROFS, logged), hidden from the root's listing, found by name, and
only where the store is live (not a snapshot's mount) — like ``.history``, ``.search`` and
``.describe``. Listings and reads are tool events (:class:`memfs.fuse.sessions_dir.SessionsDir`).

No pyfuse3 here: the handlers answer the kernel with what :class:`SessionLog` returns.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import NotFound
from ..launcher.pinned import version_reader
from ..launcher.prompt import render_memory_prompt
from ..models import Event, Session
from ..protocol import StoreAPI
from ..rules import parse_time, sessions_visibility
from .tree import Tree

__all__ = ["SESSIONS", "SessionLog", "XNode", "folder_name", "session_of", "MAX_FILE_BYTES",
           "MAX_SESSIONS", "REUSE_SECONDS", "EVENTS_FILE", "PROMPT_FILE", "TRANSCRIPT_FILE"]

#: The name of the directory in a mount's root (hidden from its listing).
SESSIONS = ".sessions"
TRANSCRIPT_FILE = "transcript.md"
EVENTS_FILE = "events.jsonl"
PROMPT_FILE = "prompt.md"
#: The most a file shows, in bytes (its last line says so when there was more).
MAX_FILE_BYTES = 1 << 20
#: The events a transcript is made from, at most (their JSON, in bytes).
MAX_TRANSCRIPT_INPUT = 4 * MAX_FILE_BYTES
#: Folders listed at most (the newest sessions).
MAX_SESSIONS = 100
#: Seconds a content (or the list of sessions) read by a lookup is what the next request
#: (the open after it) gets.
REUSE_SECONDS = 1.0
#: Contents kept between opens, at most (the least recently read dropped first).
KEPT = 8
#: Events read per store call.
_PAGE = 100

Transcript = Callable[[Iterable[Event]], str]


def folder_name(session: Session) -> str:
    """A session's folder: its start time (UTC, to the second) then its id."""
    return f"{parse_time(session.created_at).strftime('%Y%m%dT%H%M%SZ')}-{session.id}"


def session_of(name: str) -> str | None:
    """The session id a folder name ends with (None: not a folder's name)."""
    _, dash, sid = name.partition("-")
    return sid if dash and sid.startswith("sesn_") else None


def _time_ns(value: str) -> int:
    return int(parse_time(value).timestamp() * 1_000_000_000)


@dataclass(eq=False, slots=True)
class XNode:
    """``.sessions`` itself (``session_id`` None), a session's folder (``file`` None) or one of
    its files."""

    ino: int
    display: str
    mtime_ns: int
    session_id: str | None = None
    file: str | None = None
    parent: XNode | None = None
    lookups: int = 0
    handles: int = 0
    #: The last content read (None: none kept).
    data: bytes | None = None
    #: When it was read (``time.monotonic``).
    at: float = 0.0
    #: The size the kernel was last told.
    told: int = -1

    @property
    def is_dir(self) -> bool:
        return self.file is None

    @property
    def size(self) -> int:
        return 4096 if self.file is None else len(self.data or b"")


class SessionLog:
    """The ``.sessions`` directory of one mount.

    :param tree: the mount's tree (its inode allocator).
    :param store: the store (sessions, their events, the store's metadata).
    :param call: runs blocking store calls off the trio thread (:meth:`Mount.in_thread`).
    :param viewer: the session the mount acts as (None: none, a person's mount).
    :param transcript: makes ``transcript.md`` of events (None: no such file).
    """

    def __init__(self, tree: Tree, store: StoreAPI, store_id: str,
                 call: Callable[..., Awaitable[Any]], viewer: str | None,
                 transcript: Transcript | None = None) -> None:
        self.tree = tree
        self.store = store
        self.store_id = store_id
        self._call = call
        self.viewer = viewer
        self._transcript = transcript
        self.files = tuple(f for f in (TRANSCRIPT_FILE, EVENTS_FILE, PROMPT_FILE)
                           if f != TRANSCRIPT_FILE or transcript is not None)
        self.nodes: dict[int, XNode] = {}
        self._by_display: dict[str, XNode] = {}
        self._root: XNode | None = None
        self._shown: tuple[float, list[Session]] | None = None
        self._kept: OrderedDict[int, None] = OrderedDict()
        #: Store reads of a session list or a file (for tests).
        self.reads = 0

    @property
    def root(self) -> XNode:
        """``.sessions`` itself (made at first use: a session daemon renumbers the tree's
        inodes before it loads it)."""
        if self._root is None:
            self._root = XNode(self.tree.new_ino(), "/" + SESSIONS, time.time_ns())
            self.nodes[self._root.ino] = self._root
        return self._root

    # -- which sessions ------------------------------------------------------------------------

    async def sessions(self) -> list[Session]:
        """The sessions shown, newest first (read again after :data:`REUSE_SECONDS`)."""
        if self._shown is not None and time.monotonic() - self._shown[0] < REUSE_SECONDS:
            return self._shown[1]
        found: list[Session] = await self._call(self._sessions_now)
        self._shown = (time.monotonic(), found)
        return found

    def _sessions_now(self) -> list[Session]:
        """Blocking: the sessions this mount shows (the module's rule)."""
        self.reads += 1
        store, viewer = self.store, self.viewer
        if viewer is not None:
            meta = store.stores.get(self.store_id).metadata
            if sessions_visibility(meta) != "workspace":
                own = store.sessions.get(viewer)
                attached = any(r.memory_store_id == self.store_id for r in own.resources)
                return [own] if attached else []
        found: list[Session] = []
        page: str | None = None
        while len(found) < MAX_SESSIONS:
            got = store.sessions.list(memory_store_id=self.store_id, include_archived=True,
                                      order="desc", limit=min(_PAGE, MAX_SESSIONS - len(found)),
                                      page=page)
            found += got.data
            page = got.next_page
            if page is None:
                break
        if viewer is not None and all(s.id != viewer for s in found):
            own = store.sessions.get(viewer)
            if any(r.memory_store_id == self.store_id for r in own.resources):
                found.append(own)
        return found

    # -- nodes ---------------------------------------------------------------------------------

    def _node(self, parent: XNode, name: str, mtime_ns: int, session_id: str,
              file: str | None) -> XNode:
        display = f"{parent.display}/{name}"
        node = self._by_display.get(display)
        if node is None:
            node = XNode(self.tree.new_ino(), display, mtime_ns, session_id, file, parent)
            self.nodes[node.ino] = node
            self._by_display[display] = node
        return node

    def _folder(self, session: Session) -> XNode:
        return self._node(self.root, folder_name(session), _time_ns(session.created_at),
                          session.id, None)

    async def shown(self, session_id: str) -> None:
        """Is the session ``session_id``'s folder still shown? Asked at each request on a node
        the kernel or a process keeps (a descriptor, a directory handle, a working directory),
        as a lookup asks: the store's setting may have narrowed since it was found.

        :raises NotFound: no longer shown (ENOENT).
        """
        if all(s.id != session_id for s in await self.sessions()):
            raise NotFound(f"session {session_id} is no longer shown in {SESSIONS} (the "
                           "store's memfs_sessions_visibility)")

    async def listing(self, node: XNode) -> list[XNode]:
        """A directory's entries: the folders shown (newest first), or a folder's files.

        :raises NotFound: the folder is no longer shown.
        """
        if node.session_id is None:
            return [self._folder(s) for s in await self.sessions()]
        await self.shown(node.session_id)
        return [self._node(node, f, node.mtime_ns, node.session_id, f) for f in self.files]

    async def lookup(self, parent: XNode, name: str) -> XNode | None:
        """The entry ``name`` of a directory (None: there is none); a file's content is read
        now, so that its size is right."""
        if parent.session_id is None:
            sid = session_of(name)
            if sid is None:
                return None
            shown = next((s for s in await self.sessions() if s.id == sid), None)
            if shown is None or folder_name(shown) != name:
                return None
            return self._folder(shown)
        if parent.file is not None or name not in self.files:
            return None
        if all(s.id != parent.session_id for s in await self.sessions()):
            return None  # no longer shown (the store's setting changed)
        node = self._node(parent, name, parent.mtime_ns, parent.session_id, name)
        await self.content(node)
        return node

    async def content(self, node: XNode) -> bytes:
        """A file's content: the one read within :data:`REUSE_SECONDS`, else read now.

        :raises MemfsError: the store refused or failed (``NotFound``: the session is gone,
            or no longer shown: a descriptor kept from a wider view reads nothing new).
        """
        assert node.file is not None and node.session_id is not None
        await self.shown(node.session_id)
        if node.data is not None and time.monotonic() - node.at < REUSE_SECONDS:
            return node.data
        data: bytes
        mtime_ns: int | None
        data, mtime_ns = await self._call(self._read, node.session_id, node.file)
        node.data, node.at = data, time.monotonic()
        if mtime_ns is not None:
            node.mtime_ns = mtime_ns
        self._kept[node.ino] = None
        self._kept.move_to_end(node.ino)
        while len(self._kept) > KEPT:
            old, _ = self._kept.popitem(last=False)
            dropped = self.nodes.get(old)
            if dropped is not None:
                dropped.data = None
        return data

    # -- contents (blocking: in a worker thread) -----------------------------------------------

    def _read(self, session_id: str, file: str) -> tuple[bytes, int | None]:
        """A file's content, and the time of the last event it shows (None: no event)."""
        self.reads += 1
        if file == PROMPT_FILE:
            return render_memory_prompt(self.store.sessions.get(session_id),
                                        version_reader(self.store),
                                        history=self.store).encode(), None
        if file == EVENTS_FILE:
            return self._events_jsonl(session_id)
        return self._transcript_md(session_id)

    def _events(self, session_id: str, budget: int) -> Iterable[tuple[Event, bytes]]:
        """The session's events, oldest first, each with its JSON line, while their lines
        total at most ``budget`` bytes (one more is yielded: the caller sees it was cut)."""
        page: str | None = None
        total = 0
        while True:
            got = self.store.events.list(session_id, order="asc", limit=_PAGE, page=page)
            for e in got.data:
                line = (json.dumps(e.to_dict(), ensure_ascii=False) + "\n").encode()
                total += len(line)
                yield e, line
                if total > budget:
                    return
            page = got.next_page
            if page is None:
                return

    def _events_jsonl(self, session_id: str) -> tuple[bytes, int | None]:
        out = bytearray()
        last: str | None = None
        for shown, (e, line) in enumerate(self._events(session_id, MAX_FILE_BYTES)):
            if len(out) + len(line) > MAX_FILE_BYTES - 512:
                note = {"type": "memfs.truncated", "shown_events": shown,
                        "note": f"{EVENTS_FILE} shows the first {MAX_FILE_BYTES} bytes of "
                                f"the session's events; the rest: memfs session events "
                                f"{session_id} (or GET /v1/sessions/{session_id}/events)"}
                out += (json.dumps(note) + "\n").encode()
                break
            out += line
            last = e.processed_at
        return bytes(out), None if last is None else _time_ns(last)

    def _transcript_md(self, session_id: str) -> tuple[bytes, int | None]:
        assert self._transcript is not None
        events: list[Event] = []
        cut = False
        used = 0
        for e, line in self._events(session_id, MAX_TRANSCRIPT_INPUT):
            used += len(line)
            if used > MAX_TRANSCRIPT_INPUT:
                cut = True
                break
            events.append(e)
        text = self._transcript(events).encode()
        if len(text) > MAX_FILE_BYTES - 512:
            text = text[: text.rfind(b"\n", 0, MAX_FILE_BYTES - 512) + 1]
            cut = True
        if cut:
            text += (f"\n*(cut here: {TRANSCRIPT_FILE} shows at most {MAX_FILE_BYTES} bytes of "
                     f"the session's first events; the rest: memfs session events "
                     f"{session_id})*\n").encode()
        return text, _time_ns(events[-1].processed_at) if events else None

    # -- the kernel's references ---------------------------------------------------------------

    def forget(self, ino: int, n: int) -> None:
        node = self.nodes.get(ino)
        if node is None:
            return
        node.lookups -= n
        self.release_if_unused(node)

    def release_if_unused(self, node: XNode) -> None:
        """Drop a node nobody refers to (looked up again, it gets a new inode)."""
        if node.lookups > 0 or node.handles or node.parent is None:
            return
        if any(c.parent is node for c in self._by_display.values()):
            return  # a folder whose files the kernel still knows
        self.nodes.pop(node.ino, None)
        self._kept.pop(node.ino, None)
        if self._by_display.get(node.display) is node:
            del self._by_display[node.display]
        if node.parent.parent is not None:
            self.release_if_unused(node.parent)  # a folder left for its files
