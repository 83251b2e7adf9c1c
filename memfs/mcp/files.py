"""The MCP tools over a store's files: list the stores, list a directory, read (a line range;
as it was at a version, a time or a session's end), write (create-only unless told to
overwrite, with an optional sha256 precondition), edit (str_replace, insert, append), move
and delete (a directory in one transaction)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from .. import errors
from ..models import Memory, MemoryPrefix, MemoryVersion, Page, Snapshot
from ..toolkit import Call
from ..toolkit.edit import EDIT_ATTEMPTS, numbered, occurrence_lines, split_lines_keeping_cr
from .tooling import Act, Outcome, ToolSpec, tool

#: Items a listing gives at most (and by default), as every list of the server.
MOST_ITEMS, ITEMS = 100, 50
#: Lines a read gives at most (and by default): a long memory is read in ranges.
MOST_LINES = 2000
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
    lines = split_lines_keeping_cr(content)
    total = len(lines)
    start = act.args.get("start_line", 1)
    if act.args.get("end_line", start) < start:
        raise errors.InvalidRequest(f"end_line must be at least start_line ({start})")
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
        if v.path != path:  # of this memory only: under a path it had then, or renamed since
            try:
                now: Memory | None = yield Call("memories.get_by_path", (sid, path))
            except errors.NotFound:
                now = None
            if now is None or now.id != v.memory_id:
                raise errors.NotFound(f"{at} is a version of {v.path or 'another memory'}, "
                                      f"not {path}: "
                                      f"memory_history {path} lists its versions")
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
    if sha is None:  # its pair recorded after it, as a create's: it says the new version
        m = yield Call("memories.write_path", (store.id, path, content), {"actor": actor})
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


# -- memory_edit -------------------------------------------------------------------------------

def edit(act: Act) -> Generator[Call, Any, Outcome]:
    store = yield from act.store_of(act.args["store"])
    path = memory_path(act.args["path"])
    mode, sha = act.args["mode"], act.args.get("sha256")
    act.operation, act.file_path = "write", path
    needed = {"str_replace": ("old_str",), "insert": ("insert_line", "text"),
              "append": ("text",)}[mode]
    missing = [n for n in needed if n not in act.args]
    if missing:
        raise errors.InvalidRequest(f"mode {mode} needs {' and '.join(missing)}")
    actor = yield from act.writer()
    for _ in range(EDIT_ATTEMPTS if sha is None and mode != "insert" else 1):
        try:
            m: Memory = yield Call("memories.get_by_path", (store.id, path))
        except errors.NotFound:
            raise (yield from _missing(act, path)) from None
        if sha is not None and m.content_sha256 != sha:
            raise (yield from _changed(act, path, sha))
        content = _edited(path, m.content or "", mode, act.args)
        try:
            written: Memory = yield Call("memories.update", (store.id, m.id), {
                "content": content, "precondition_sha256": m.content_sha256, "actor": actor})
        except (errors.PreconditionFailed, errors.NotFound):
            if sha is not None or mode == "insert":  # the line named is of what was read
                raise (yield from _changed(act, path, sha or m.content_sha256)) from None
            continue
        act.memory = written
        return _written(act, written, "edited")
    raise errors.PreconditionFailed(
        f"{path} kept changing while it was edited (other writers): read it and try again")


def _edited(path: str, content: str, mode: str, args: dict[str, Any]) -> str:
    """``content`` with the edit made. :raises InvalidRequest: it cannot be made."""
    if mode == "append":
        text: str = args["text"]
        if content and not content.endswith("\n"):
            content += "\n"
        return content + text
    if mode == "insert":
        lines = split_lines_keeping_cr(content)
        line: int = args["insert_line"]
        if line > len(lines):
            raise errors.InvalidRequest(
                f"insert_line must be 0 to {len(lines)} ({path} has {len(lines)} lines): 0 "
                "inserts at the top, n after line n")
        lines.insert(line, str(args["text"]).rstrip("\n"))
        return "\n".join(lines) + "\n"
    old: str = args["old_str"]
    new: str = args.get("new_str", "")
    count = content.count(old)
    if count == 0:
        raise errors.InvalidRequest(
            f"old_str does not appear verbatim in {path}: read it (memory_read) and copy the "
            "text exactly, without the line numbers")
    if count > 1:
        starts = occurrence_lines(content, old)
        raise errors.InvalidRequest(
            f"old_str appears {count} times in {path} (lines "
            f"{', '.join(map(str, starts[:20]))}): give more of the text around it, so that it "
            "appears once")
    return content.replace(old, new)


EDIT = tool(
    "memory_edit", "Edit a memory",
    "Change part of a memory: str_replace replaces old_str (which must appear exactly once) "
    "with new_str; insert puts text after line insert_line (0: at the top); append adds text "
    "at the end. Without sha256 a str_replace or append is made on what the memory holds "
    "when it is written; with it (or for insert) only if the memory is as you read it.",
    {"store": STORE, "path": PATH,
     "mode": {"type": "string", "enum": ["str_replace", "insert", "append"]},
     "old_str": {"type": "string", "minLength": 1, "description": "str_replace: the text to "
                                                                   "replace"},
     "new_str": {"type": "string", "description": "str_replace: its replacement"},
     "insert_line": {"type": "integer", "minimum": 0,
                     "description": "insert: the line after which text goes (0: the top)"},
     "text": {"type": "string", "description": "insert, append: the text to add"},
     "sha256": SHA256},
    ["store", "path", "mode"], edit, read_only=False, destructive=True)


# -- memory_move -------------------------------------------------------------------------------


def move(act: Act) -> Generator[Call, Any, Outcome]:
    store = yield from act.store_of(act.args["store"])
    old, new = memory_path(act.args["path"]).rstrip("/"), memory_path(act.args["new_path"])
    new = new.rstrip("/")
    overwrite = bool(act.args.get("overwrite", False))
    act.operation, act.file_path, act.new_path = "rename", old, new
    if not old or not new:
        raise errors.InvalidRequest("the root of a store cannot be moved, nor be moved onto")
    actor = yield from act.writer()
    text = f"moved {old} to {new}"
    try:
        try:
            m: Memory = yield Call("memories.rename_path", (store.id, old, new), {
                "actor": actor, "replace": overwrite, "events": act.events_for(text)})
        except errors.NotFound:
            if (new + "/").startswith(old + "/"):
                raise errors.InvalidRequest(f"cannot move {old} into itself ({new})") from None
            # its pair is in its transaction, written before it: the count is in "count",
            # the first MOST_ITEMS paths in "moved"
            text = f"moved {old}/ to {new}/ (everything below it)"
            moved: list[Memory] = yield Call("memories.rename_prefix", (
                store.id, old + "/", new + "/"), {"actor": actor,
                                                  "events": act.events_for(text)})
            return Outcome(text, {
                "store": store.id, "path": old, "new_path": new, "count": len(moved),
                "moved": [x.path for x in moved[:MOST_ITEMS]]})
    except errors.PathConflict as e:
        other = e.conflicting_path
        if other == new and not isinstance(e, errors.DirectoryNotEmpty):
            raise errors.PathConflict(
                f"{new} already exists: pass overwrite=true to replace it, or choose another "
                "new_path", conflicting_memory_id=e.conflicting_memory_id,
                conflicting_path=other) from None
        raise errors.PathConflict(f"cannot move {old} to {new}: {e.message}",
                                  conflicting_memory_id=e.conflicting_memory_id,
                                  conflicting_path=other) from None
    except errors.NotFound:
        raise (yield from _missing(act, old)) from None
    act.memory = m
    return Outcome(text, {"store": store.id, "path": old, "new_path": new,
                          "sha256": m.content_sha256, "version_id": m.memory_version_id})


MOVE = tool(
    "memory_move", "Move a memory or a directory",
    "Move (rename) a memory, or a directory with everything below it, in one change. An "
    "existing memory at new_path is replaced only with overwrite; directories are never "
    "merged.",
    {"store": STORE, "path": PATH,
     "new_path": {**PATH, "description": "where it goes"},
     "overwrite": {"type": "boolean", "description": "replace a memory at new_path"}},
    ["store", "path", "new_path"], move, read_only=False, destructive=True)


# -- memory_delete -----------------------------------------------------------------------------


def delete(act: Act) -> Generator[Call, Any, Outcome]:
    store = yield from act.store_of(act.args["store"])
    path = memory_path(act.args["path"]).rstrip("/")
    act.operation, act.file_path = "delete", path or "/"
    if not path:
        raise errors.InvalidRequest("the root of a store cannot be deleted: delete its "
                                    "directories one by one")
    actor = yield from act.writer()
    text = f"deleted {path}"
    try:
        yield Call("memories.delete_path", (store.id, path), {
            "actor": actor, "events": act.events_for(text)})
        return Outcome(text, {"store": store.id, "path": path, "count": 1, "deleted": [path]})
    except errors.NotFound:  # no memory there: a directory?
        act.recorded = False
    below: Page[Memory | MemoryPrefix] = yield Call("memories.list", (store.id,), {
        "path_prefix": path + "/", "depth": 0, "limit": 1})
    if not below.data:
        raise (yield from _missing(act, path))
    if not act.args.get("recursive"):
        raise errors.InvalidRequest(
            f"{path} is a directory: pass recursive=true to delete everything below it (in "
            "one change, which memfs session revert undoes)")
    # its pair is in its transaction, written before it: the count is in "count", the
    # first MOST_ITEMS paths in "deleted"
    text = f"deleted {path}/ (everything below it)"
    gone: list[Memory] = yield Call("memories.delete_prefix", (store.id, path + "/"), {
        "actor": actor, "events": act.events_for(text)})
    act.file_path = path + "/"
    return Outcome(text,
                   {"store": store.id, "path": path + "/", "count": len(gone),
                    "deleted": [m.path for m in gone[:MOST_ITEMS]]})


DELETE = tool(
    "memory_delete", "Delete a memory or a directory",
    "Delete a memory; or, with recursive, a directory and everything below it in one change. "
    "Its versions are kept: memory_history lists them and memory_restore brings one back.",
    {"store": STORE, "path": PATH,
     "recursive": {"type": "boolean", "description": "delete a directory and all below it"}},
    ["store", "path"], delete, read_only=False, destructive=True, idempotent=True)


TOOLS: tuple[ToolSpec, ...] = (LIST_STORES, LIST, READ, WRITE, EDIT, MOVE, DELETE)
