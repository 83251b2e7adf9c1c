"""The memory section of an agent's system prompt (SPEC §3 step 5, API.md §4.3).

One note per memory store attached to the session: display name, mount path, access mode,
scope (SPEC §8: general or workflow), description and instructions, plus a short preamble
saying how memory works and what a memory may say about itself (its type's directory, front
matter). Used by the session launcher (written to ``MEMFS_SYSTEM_PROMPT_FILE``) and by
``memfs session prompt``.

Depends only on :mod:`memfs.models` and :mod:`.pinned` (and the package's ``__init__`` imports
nothing), so
the CLI reads it without loading the launcher.
"""

from __future__ import annotations

import logging
import posixpath

from ..models import SNAPSHOT_KEY as SNAPSHOT_KEY  # time travel's metadata key (said here)
from ..models import Session, SessionResource, Snapshot
from .history import EventSource, history_for
from .pinned import Reader, pinned_lines

log = logging.getLogger(__name__)

_ACCESS_NOTES = {
    "read_write": "read_write (your changes are saved; every change becomes a new memory version)",
    "read_only": "read_only (you can read these files; any write is rejected with a read-only "
    "file system error)",
}

SCOPE_NOTES = {
    "general": "general (memories for every task)",
    "workflow": "workflow (memories of this piece of work)",
}

#: The types of memory (memfs.store.frontmatter.DEFAULT_TYPES) and the front matter memfs
#: reads, in a sentence: a store may redefine its types, so this says "by default".
TYPES_LINE = (
    "By default a memory's directory gives its type: /preferences/ (the user's choices), "
    "/context/ (what the current work needs; it expires 7 days after its last change), "
    "/knowledge/ (facts and know-how), /decisions/ (a choice made, and why). A memory may "
    "start with YAML front matter between --- lines, of which memfs reads type, importance "
    "(low, medium, high), expires (a date, 7d, never), tags and description.")


def render_memory_prompt(session: Session, read: Reader | None = None, *,
                         history: EventSource | None = None) -> str:
    """The memory section of the system prompt for ``session``, as Markdown text ending in a
    newline; ``""`` when no memory store is attached. After each mount's note, the pinned
    memories the session recorded (:mod:`.pinned`), their texts read by ``read``
    (:func:`~.pinned.version_reader`; needed when a store had pinned memories).

    The text names each mount exactly as the resource's ``mount_path`` says (clients must never
    compute it), and tells the agent that other paths under the root are scratch. A session
    that resumes another ends with that one's last messages (:mod:`.history`), read through
    ``history``, a store or a server's client (needed then: :func:`~.history.history_for`
    raises ValueError without it).
    """
    resources = [r for r in session.resources if r.mount_path]
    if not resources:
        return ""
    # With a trailing "/" ("/" itself stays "/"): the directory the mounts are in.
    root = posixpath.join(
        posixpath.commonpath([posixpath.dirname(r.mount_path.rstrip("/")) for r in resources]),
        "",
    )
    n = len(resources)
    lines = [
        "# Memory",
        "",
        f"{'A memory store is' if n == 1 else f'{n} memory stores are'} mounted as "
        f"{'a directory' if n == 1 else 'directories'} under {root}. Read and write "
        "memories there with your ordinary file tools; what you save under a read_write mount "
        "is kept across sessions. Files written anywhere else under "
        f"{root} are scratch and are discarded when this session ends.",
    ]
    lines += ["", TYPES_LINE]
    live = [r for r in resources if SNAPSHOT_KEY + r.memory_store_id not in session.metadata]
    if live:
        lines += ["", search_line(live[0].mount_path, snapshots=len(live) < n,
                                  session=len(live) > 1)]
    for r in resources:
        lines += ["", *_note(r, session.metadata.get(SNAPSHOT_KEY + r.memory_store_id)),
                  *pinned_lines(r, read)]
    resumed = history_for(session, history)
    return "\n".join(lines) + "\n" + ("\n" + resumed if resumed else "")


def search_line(mount_path: str, *, snapshots: bool = False, session: bool = False) -> str:
    """The line that tells the agent of ``.search/`` (:mod:`memfs.fuse.search`), with an example
    in ``mount_path`` (``snapshots``: some mounts are snapshots, which have none;
    ``session``: several mounts can be searched at once, ``@session``): what an empty answer
    means, that words answer at once, how to write options and a ``/``."""
    example = posixpath.join(mount_path, ".search", "who gets paged at night")
    where = "every mount but a snapshot has" if snapshots else "every mount has"
    options = "@limit=3/@threshold=0.5/@prefix=people/@words"
    every = ("; @session asks every mount at once, each path under its own mount"
             if session else "")
    return ("To find memories by meaning as well as by words, read a question as a file "
            f"({where} a .search/ directory): `cat \"{example}\"` prints the best "
            "matches, best first, one per line as path<TAB>score<TAB>snippet (the path is "
            "the file to read). Nothing printed means that nothing stored scored above the "
            "relevance threshold: treat it as not remembered. Words find a "
            "memory as soon as it is written; meaning catches up a few seconds later. In a "
            "question write each / as %2F. Options are directories before the question, "
            f"any of `.search/{options}/QUESTION` (at most 3 hits, a lower threshold, "
            f"only paths under /people, words alone){every}.")




def snapshot_note(snap: Snapshot) -> str:
    """The metadata value for a store attached as it was at a boundary: the AT it resolved
    to (its first word: ``memfs mount --at`` takes it), then the boundary in words."""
    if snap.at == snap.time:
        return snap.at
    return f"{snap.at} ({snap.boundary_text()})"


def _note(r: SessionResource, at: str | None = None) -> list[str]:
    access = _ACCESS_NOTES.get(r.access, r.access)
    if at is not None:
        access = (f"read_only: a snapshot of this store as it was at {at}, which never "
                  "changes (any write is rejected with a read-only file system error)")
    return store_note(r.name or r.memory_store_id, [("Mount path", r.mount_path),
                                                    ("Access", access)],
                      r.memfs_scope, r.description, r.instructions)


def store_note(title: str, facts: list[tuple[str, str]], scope: str, description: str | None,
               instructions: str | None) -> list[str]:
    """The lines of one store's note: its title, how it is reached (``facts``: a mount's path
    or a store id, and its access, as the reader reaches it), its scope, its description and
    the people's instructions (each multi-line value kept inside its list item). The mount's
    prompt and the MCP server's instructions (:mod:`memfs.mcp.instructions`) share it."""
    lines = [f"## {title}", "", *(f"- {k}: {v}" for k, v in facts),
             f"- Scope: {SCOPE_NOTES.get(scope, scope)}"]
    if description:
        lines.append(f"- Description: {_indent(description)}")
    if instructions:
        lines.append(f"- Instructions: {_indent(instructions)}")
    return lines


def _indent(text: str) -> str:
    """Keep a multi-line value inside its list item."""
    return "\n  ".join(text.strip().splitlines())
