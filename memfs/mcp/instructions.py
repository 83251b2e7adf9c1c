"""The instructions an MCP server sends at initialize: the memory section of a session's
system prompt (:mod:`memfs.launcher.prompt`), worded for tools instead of paths: which stores
the agent has, with their access, scope, description and instructions, and how to use the
tools on them, and for a session, after each store's note, the pinned memories its prompt
holds (:mod:`memfs.launcher.pinned`, the versions the session recorded; ``memory_pinned``
gives a store's now). The facts are the
prompt's (the types line, the scopes); the wording of a mount (paths, file errors,
``.search/``) is not."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from ..errors import MemfsError
from ..launcher.pinned import block_lines
from ..launcher.prompt import TYPES_LINE, store_note
from ..models import MemoryVersion, Session, SessionPinned
from ..toolkit import Call
from .reach import READ_WRITE, Reach, StoreView

#: Stores named one by one at most (the others: memory_list_stores).
MOST_STORES = 20

ACCESS_NOTES = {
    "read_write": "read_write (your changes are saved; every change becomes a new memory "
                  "version)",
    "read_only": "read_only (you can read these memories; any write is refused with a "
                 "permission_error)",
}

#: The prompt's line of types, of a store's directories.
_TYPES = TYPES_LINE.replace("a memory's directory", "a memory's directory in a store")

HOW = (
    "Use them through this server's memory_ tools, naming a store by its id or name. Before "
    "you answer from what you know, look: memory_search finds memories by meaning as well "
    "as by words, best first (nothing found means nothing stored scored above the relevance "
    "threshold: treat it as not remembered; words find a memory as soon as it is written, "
    "meaning a few seconds later); memory_list and memory_read show a store's memories, "
    "numbered by line, with their sha256. memory_write creates a memory and never replaces "
    "one unless told to (overwrite, with the sha256 you read, so that nobody's change is "
    "lost); memory_edit changes part of one; memory_add saves a typed memory. Every change "
    "is a version: memory_history lists them, memory_restore brings one back. A failed tool "
    "says what went wrong and how to go on.")


def _reader(texts: dict[str, str | None]) -> Callable[[SessionPinned], str | None]:
    return lambda e: texts.get(e.memory_version_id)


def render(stores: list[StoreView], *, session: bool, more: bool = False,
           pinned: dict[str, list[str]] | None = None) -> str:
    """The memory section for ``stores`` (``more``: the reach sees others besides), each
    store's note followed by its ``pinned`` block's lines (by store id)."""
    n = len(stores)
    if n == 0:
        lines = ["# Memory", "", "No memory store is available to you here yet "
                 "(memory_list_stores lists them once there are)."]
        return "\n".join(lines) + "\n"
    kept = "in this session" if session else "here"
    lines = [
        "# Memory", "",
        f"{'A memory store is' if n == 1 else f'{n} memory stores are'} available {kept}"
        f"{' (and more: memory_list_stores lists them all)' if more else ''}. What you save "
        "in a read_write store is kept across sessions. " + HOW,
        "", _TYPES,
    ]
    if not any(s.access == READ_WRITE for s in stores):
        lines += ["", "Every store here is read_only: you can read and search, not write."]
    for s in stores:
        lines += ["", *_note(s), *(pinned or {}).get(s.id, [])]
    return "\n".join(lines) + "\n"


def without_stores() -> str:
    """The memory section when the stores cannot be named (the reach cannot be asked yet)."""
    return "\n".join(["# Memory", "", "Your memory stores are listed by memory_list_stores. "
                      "What you save in a read_write store is kept across sessions. " + HOW,
                      "", _TYPES]) + "\n"


def _note(s: StoreView) -> list[str]:
    return store_note(s.name or s.id, [("Store", s.id),
                                       ("Access", ACCESS_NOTES.get(s.access, s.access))],
                      s.scope, s.description, s.instructions)


def instructions(reach: Reach) -> Generator[Call, Any, str]:
    """The instructions of ``reach``: its own, else worded from the stores it sees."""
    if reach.instructions is not None:
        return reach.instructions
    stores, next_page = yield from reach.visible(limit=MOST_STORES)
    live = [s for s in stores if not s.archived]
    pinned: dict[str, list[str]] = {}
    if reach.session is not None:
        # A session's pinned memories as it recorded them when it started (its prompt's block,
        # what `memfs session prompt` prints), read by version: a few reads, at most its 8
        # attachments'. A reach of no session (a key over every store it sees) names none here
        # (a request per store at every initialize): memory_pinned gives a store's.
        session: Session = yield Call("sessions.get", (reach.session,))
        recorded: dict[str, list[SessionPinned]] = {
            r.memory_store_id: list(r.memfs_pinned or []) for r in session.resources}
        more = {r.memory_store_id: r.memfs_pinned_more for r in session.resources}
        for s in live[:MOST_STORES]:
            texts: dict[str, str | None] = {}
            for e in recorded.get(s.id, []):
                if e.shown:
                    try:
                        v: MemoryVersion = yield Call("versions.get", (s.id, e.memory_version_id))
                        texts[e.memory_version_id] = v.content
                    except MemfsError:
                        texts[e.memory_version_id] = None  # gone since: listed, with why
            pinned[s.id] = block_lines(recorded.get(s.id, []), _reader(texts),
                                       more.get(s.id, 0))
    return render(live[:MOST_STORES], session=reach.session is not None,
                  more=bool(next_page) or len(live) > MOST_STORES, pinned=pinned)
