"""The MCP tools over a store's files: list the stores, list a directory, read (a line range;
as it was at a version, a time or a session's end) and write (create-only unless told to
overwrite, with an optional sha256 precondition)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from .. import errors
from ..models import Memory, MemoryPrefix, MemoryVersion, Page, Snapshot
from ..toolkit import Call
from .tooling import Act, Outcome, ToolSpec, tool

#: Items a listing gives at most (and by default), as every list of the server.
MOST_ITEMS, ITEMS = 100, 50
#: Lines a read gives at most (and by default): a long memory is read in ranges.
MOST_LINES = 2000
#: How wide line numbers are (as the SDK's memory tool numbers them).
LINE_NUMBER_WIDTH = 6
#: A preview's characters at most.
PREVIEW_CHARS = 120

STORE = {"type": "string", "minLength": 1, "maxLength": 256,
         "description": "the memory store's id or name (memory_list_stores lists them)"}
PATH = {"type": "string", "minLength": 1, "maxLength": 1024,
        "description": "a memory's path in the store, e.g. /notes/deploys.md"}
LIMIT = {"type": "integer", "minimum": 1, "maximum": MOST_ITEMS,
         "description": f"how many at most (default {ITEMS})"}
PAGE = {"type": "string", "maxLength": 2048,
        "description": "the next_page a previous call returned, to go on from there"}
SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$",
          "description": "the content's sha256 as you last read it: the change is made only "
                         "if the memory still has it"}


def memory_path(value: Any) -> str:
    """A path argument as the store's path: ``/`` added in front if missing."""
    if not isinstance(value, str):
        raise errors.InvalidRequest("path must be a string")
    return value if value.startswith("/") else "/" + value


def directory(value: Any) -> str:
    """A directory argument as a path prefix (``/`` or ``/a/b/``)."""
    path = memory_path("/" if value is None else value)
    return path if path.endswith("/") else path + "/"


def where(act: Act) -> str:
    assert act.store is not None
    return act.store.name or act.store.id


def numbered(lines: list[str], start: int) -> str:
    return "\n".join(f"{str(i + start).rjust(LINE_NUMBER_WIDTH)}\t{line}"
                     for i, line in enumerate(lines))


def paged(text: str, next_page: str | None) -> str:
    if next_page:
        return f"{text}\nMore: call again with page={next_page}"
    return text


# -- memory_list_stores ------------------------------------------------------------------------


def list_stores(act: Act) -> Generator[Call, Any, Outcome]:
    limit, page = act.args.get("limit", ITEMS), act.args.get("page")
    if act.reach.pages_stores:
        seen, next_page = yield from act.reach.visible(page, limit)
    else:  # a session's stores, or the stores named: one list, paged here
        every, _ = yield from act.reach.visible()
        start = int(page) if isinstance(page, str) and page.isdigit() else 0
        seen = every[start:start + limit]
        next_page = str(start + limit) if len(every) > start + limit else None
    rows = []
    for s in seen:
        try:
            count: int = yield Call("memories.count", (s.id,))
        except errors.MemfsError:
            count = -1
        rows.append({"id": s.id, "name": s.name, "description": s.description,
                     "access": s.access, "archived": s.archived, "memories": count})
    act.operation = "list"
    if not rows:
        text = "No memory store is visible here."
    else:
        text = "\n".join(
            f"{r['name'] or r['id']} ({r['id']}): {r['access']}"
            f"{', archived' if r['archived'] else ''}, {r['memories']} memories"
            + (f" — {r['description']}" if r["description"] else "") for r in rows)
    return Outcome(paged(text, next_page), {"stores": rows, "next_page": next_page})


LIST_STORES = tool(
    "memory_list_stores", "List memory stores",
    "The memory stores you can use: id, name, description, your access (read_write or "
    "read_only) and how many memories each holds. Every other tool takes a store's id or "
    "name.",
    {"limit": LIMIT, "page": PAGE}, [], list_stores, read_only=True, idempotent=True)


# -- memory_list -------------------------------------------------------------------------------


def list_directory(act: Act) -> Generator[Call, Any, Outcome]:
    store = yield from act.store_of(act.args["store"])
    prefix = directory(act.args.get("path"))
    depth = act.args.get("depth", 1)
    preview = bool(act.args.get("preview", False))
    limit = act.args.get("limit", ITEMS)
    act.operation, act.file_path = "list", prefix
    page: Page[Memory | MemoryPrefix] = yield Call("memories.list", (store.id,), {
        "path_prefix": prefix, "depth": depth, "limit": limit, "page": act.args.get("page"),
        "view": "full" if preview else "basic"})
    items: list[dict[str, Any]] = []
    lines = []
    for item in page.data:
        if isinstance(item, MemoryPrefix):
            items.append({"type": "directory", "path": item.path})
            lines.append(item.path)
            continue
        row: dict[str, Any] = {"type": "memory", "path": item.path,
                               "size": item.content_size_bytes,
                               "sha256": item.content_sha256, "updated_at": item.updated_at}
        line = f"{item.path}\t{item.content_size_bytes} bytes\t{item.updated_at}"
        if preview:
            row["preview"] = preview_of(item)
            line += f"\t{row['preview']}"
        items.append(row)
        lines.append(line)
    if not items and not act.args.get("page"):
        if prefix != "/":
            try:
                yield Call("memories.get_by_path", (store.id, prefix[:-1]), {"view": "basic"})
            except errors.NotFound:
                raise errors.NotFound(
                    f"nothing at {prefix} in {where(act)}: list / to see what it holds"
                ) from None
            raise errors.InvalidRequest(
                f"{prefix[:-1]} is a memory, not a directory: read it with memory_read")
        text = f"{where(act)} is empty."
    else:
        text = "\n".join(lines)
    return Outcome(paged(text, page.next_page), {"store": store.id, "path": prefix,
                                                 "items": items, "next_page": page.next_page})


def preview_of(m: Memory) -> str:
    """A memory's description, else its first line with words (front matter skipped)."""
    meta = m.memfs_meta
    if meta is not None and meta.description:
        return meta.description[:PREVIEW_CHARS]
    lines = (m.content or "").split("\n")
    if lines and lines[0].strip() == "---":
        end = next((i for i, x in enumerate(lines[1:], 1) if x.strip() == "---"), 0)
        lines = lines[end + 1:]
    first = next((x.strip() for x in lines if x.strip()), "")
    return first[:PREVIEW_CHARS]


LIST = tool(
    "memory_list", "List a directory",
    "The memories and directories under a directory of a store, in path order, with size "
    "and last change; depth 2 or more goes further down; preview adds each memory's "
    "description or first line.",
    {"store": STORE,
     "path": {**PATH, "description": "the directory (default /, the whole store)"},
     "depth": {"type": "integer", "minimum": 1, "maximum": 20,
               "description": "how many levels down to list (default 1)"},
     "preview": {"type": "boolean", "description": "add each memory's first line"},
     "limit": LIMIT, "page": PAGE},
    ["store"], list_directory, read_only=True, idempotent=True)


# -- memory_read -------------------------------------------------------------------------------


def read(act: Act) -> Generator[Call, Any, Outcome]:
    store = yield from act.store_of(act.args["store"])
    path = memory_path(act.args["path"])
    act.operation, act.file_path = "read", path
    at = act.args.get("at")
    if at is None:
        try:
            m: Memory = yield Call("memories.get_by_path", (store.id, path))
        except errors.NotFound:
            raise (yield from _missing(act, path)) from None
        content, sha, version = m.content or "", m.content_sha256, m.memory_version_id
    else:
        v = yield from _version_at(act, path, at)
        if v.content is None:
            raise errors.NotFound(f"the content of {v.id} was redacted")
        content, sha, version = v.content, v.content_sha256 or "", v.id
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    total = len(lines)
    start = act.args.get("start_line", 1)
    end = min(act.args.get("end_line", total), total, start + MOST_LINES - 1)
    if start > max(total, 1):
        raise errors.InvalidRequest(f"{path} has {total} lines: start_line must be at most "
                                    f"{max(total, 1)}")
    shown = lines[start - 1:end]
    header = f"{path} (sha256 {sha}, version {version}"
    if at is not None:
        header += f", as at {at}"
    if start > 1 or end < total:
        header += f"; lines {start}-{end} of {total}"
        if end < total:
            header += f", read on with start_line={end + 1}"
    header += ")"
    text = header + ("\n" + numbered(shown, start) if shown else "\n(empty)")
    return Outcome(text, {"store": store.id, "path": path, "sha256": sha,
                          "version_id": version, "start_line": start, "end_line": end,
                          "total_lines": total, "content": "\n".join(shown)})


def _missing(act: Act, path: str) -> Generator[Call, Any, errors.MemfsError]:
    """Why nothing is at ``path``: a directory (list it), or nothing (list its parent)."""
    assert act.store is not None
    page: Page[Memory | MemoryPrefix] = yield Call("memories.list", (act.store.id,), {
        "path_prefix": path.rstrip("/") + "/", "depth": 1, "limit": 1})
    if page.data:
        return errors.InvalidRequest(f"{path} is a directory: list it with memory_list")
    parent = path.rsplit("/", 1)[0] or "/"
    return errors.NotFound(f"no memory at {path} in {where(act)}: memory_list {parent} "
                           "shows what is there, memory_search finds memories by meaning")


def _version_at(act: Act, path: str, at: str) -> Generator[Call, Any, MemoryVersion]:
    """The version of ``path`` that ``at`` names: a version id, a session's last version of
    it, or the one in effect at a time."""
    assert act.store is not None
    sid = act.store.id
    if at.startswith("memver_"):
        v: MemoryVersion = yield Call("versions.get", (sid, at))
        return v
    if at.startswith("sesn_"):
        page: Page[MemoryVersion] = yield Call("versions.list", (sid,), {
            "session_id": at, "limit": MOST_ITEMS, "view": "basic"})
        while True:
            mine = next((v for v in page.data if v.path == path), None)
            if mine is not None:
                if mine.operation == "deleted":
                    raise errors.NotFound(f"session {at} deleted {path}")
                found: MemoryVersion = yield Call("versions.get", (sid, mine.id))
                return found
            if not page.next_page:
                raise errors.NotFound(f"session {at} wrote no version of {path}: "
                                      "memory_history lists what it wrote")
            page = yield Call("versions.list", (sid,), {
                "session_id": at, "limit": MOST_ITEMS, "view": "basic",
                "page": page.next_page})
    snap: Snapshot = yield Call("versions.snapshot", (sid, at))
    m = next((x for x in snap.memories if x.path == path), None)
    if m is None:
        raise errors.NotFound(f"no memory was at {path} at {snap.at}")
    then: MemoryVersion = yield Call("versions.get", (sid, m.memory_version_id))
    return then


READ = tool(
    "memory_read", "Read a memory",
    "A memory's lines, numbered, with its sha256 (pass it to memory_write or memory_edit as "
    f"the precondition) and version id. At most {MOST_LINES} lines a call: start_line and "
    "end_line read a range. at reads it as it was: a version id (memver_…), a time (RFC "
    "3339) or a session id (sesn_…: as that session left it).",
    {"store": STORE, "path": PATH,
     "start_line": {"type": "integer", "minimum": 1, "description": "first line (from 1)"},
     "end_line": {"type": "integer", "minimum": 1, "description": "last line"},
     "at": {"type": "string", "minLength": 1, "maxLength": 64,
            "description": "a version id, an RFC 3339 time, or a session id"}},
    ["store", "path"], read, read_only=True, idempotent=True)


# -- memory_write ------------------------------------------------------------------------------


def write(act: Act) -> Generator[Call, Any, Outcome]:
    store = yield from act.store_of(act.args["store"])
    path = memory_path(act.args["path"])
    content: str = act.args["content"]
    sha = act.args.get("sha256")
    overwrite = bool(act.args.get("overwrite", False)) or sha is not None
    act.operation, act.file_path = "write" if overwrite else "create", path
    actor = yield from act.writer()
    if not overwrite:
        try:
            m: Memory = yield Call("memories.create", (store.id, path, content),
                                   {"actor": actor})
        except errors.PathConflict as e:
            raise (yield from _taken(act, path, e)) from None
        act.memory = m
        return _written(act, m, "created")
    if sha is None:
        text = f"wrote {path}"
        m = yield Call("memories.write_path", (store.id, path, content), {
            "actor": actor, "events": act.events_for(text)})
        act.memory = m
        return _written(act, m, "written")
    try:
        old: Memory = yield Call("memories.get_by_path", (store.id, path), {"view": "basic"})
    except errors.NotFound:
        raise errors.NotFound(f"no memory at {path} to overwrite: leave sha256 out to "
                              "create it") from None
    try:
        m = yield Call("memories.update", (store.id, old.id), {
            "content": content, "precondition_sha256": sha, "actor": actor})
    except errors.PreconditionFailed:
        raise (yield from _changed(act, path, sha)) from None
    act.memory = m
    return _written(act, m, "written")


def _written(act: Act, m: Memory, how: str) -> Outcome:
    return Outcome(f"{how} {m.path} (sha256 {m.content_sha256}, version "
                   f"{m.memory_version_id})",
                   {"store": m.memory_store_id, "path": m.path, "sha256": m.content_sha256,
                    "version_id": m.memory_version_id, "size": m.content_size_bytes})


def _taken(act: Act, path: str, e: errors.PathConflict
           ) -> Generator[Call, Any, errors.MemfsError]:
    """A create refused: the path exists (say its sha256 and how to replace or edit it), or
    a memory's path is in its way (a file above it, or a directory at it)."""
    assert act.store is not None
    other = e.conflicting_path
    if other == path:
        try:
            m: Memory = yield Call("memories.get_by_path", (act.store.id, path),
                                   {"view": "basic"})
            sha = m.content_sha256
        except errors.NotFound:
            sha = "(read it)"
        return errors.PathConflict(
            f"{path} already exists (sha256 {sha}): to replace it, pass overwrite=true with "
            "its sha256; to change part of it, use memory_edit",
            conflicting_memory_id=e.conflicting_memory_id, conflicting_path=other)
    if other and other.startswith(path + "/"):
        why = f"{path} is a directory (it holds {other})"
    else:
        why = f"{other} is a memory, so it cannot be a directory"
    return errors.PathConflict(f"cannot write {path}: {why}; choose another path",
                               conflicting_memory_id=e.conflicting_memory_id,
                               conflicting_path=other)


def _changed(act: Act, path: str, sha: str) -> Generator[Call, Any, errors.MemfsError]:
    """A precondition that failed: say the sha256 the memory has now."""
    assert act.store is not None
    try:
        m: Memory = yield Call("memories.get_by_path", (act.store.id, path), {"view": "basic"})
        now = f"its sha256 is now {m.content_sha256}"
    except errors.NotFound:
        now = "it was deleted"
    return errors.PreconditionFailed(
        f"{path} changed since you read it (you gave sha256 {sha}; {now}): read it again "
        "with memory_read, then make your change on what it holds now")


WRITE = tool(
    "memory_write", "Write a memory",
    "Create a memory with this content. An existing memory is never overwritten unless "
    "overwrite is true; give its sha256 (from memory_read) too, so that a change someone "
    "made since you read it is not lost. To change part of a memory use memory_edit.",
    {"store": STORE, "path": PATH,
     "content": {"type": "string", "description": "the whole content, as it is to be stored"},
     "overwrite": {"type": "boolean",
                   "description": "replace the memory at path if there is one"},
     "sha256": SHA256},
    ["store", "path", "content"], write, read_only=False, destructive=True)


TOOLS: tuple[ToolSpec, ...] = (LIST_STORES, LIST, READ, WRITE)
