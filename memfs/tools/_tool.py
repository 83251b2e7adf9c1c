"""The memory tool's commands (written once, as generators of store calls) and the tools that
carry them out, :class:`MemoryTool` and :class:`AsyncMemoryTool` (see :mod:`memfs.tools`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Generator, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818Command,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from .. import errors
from ..launcher.pinned import block
from ..models import Actor, Memory
from ..rules import PINNED_BUDGET, local_user_actor
from ..toolkit import make
from ..toolkit.edit import EDIT_ATTEMPTS, occurrence_lines
from ..toolkit.pinned import pinned as pinned_now
from ._base import (
    DIR_SIZE,
    MAX_LINES,
    ROOT,
    Call,
    Op,
    command_input,
    event_pair,
    failure,
    format_file_size,
    memory_path,
    numbered,
    split_lines_keeping_cr,
    tagged,
    tool_path,
)
from ._typed import DESCRIBE_PATH, describe, describe_text, directory_of, front_matter
from ._typed import add as add_memory

log = logging.getLogger(__name__)

#: What a driven generator returns (a command's text, a describe object).
T = TypeVar("T")


class _Commands:
    """The memory tool's commands on one store, as :data:`Op` generators."""

    def __init__(self, store: Any, memory_store: str, *, session_id: str | None,
                 actor: Actor | None) -> None:
        self.store = store
        self.memory_store = memory_store
        self.store_id: str | None = None
        #: A client acting as a session attributes to it: the events are that session's too.
        self.session_id = session_id or getattr(store, "session_id", None)
        self.actor = actor

    # -- helpers ---------------------------------------------------------------------------

    def _store_id(self) -> Generator[Call, Any, str]:
        if self.store_id is None:
            try:
                ms = yield Call("stores.resolve", (self.memory_store,))
            except errors.NotFound as e:
                raise ToolError(f"The memory store is not available: {e.message}") from None
            self.store_id = ms.id
        return self.store_id

    def _actor(self, store_id: str) -> Generator[Call, Any, Actor | None]:
        """Who writes: the session (checked by a local store: it must be attached read_write
        and running; a server checks it itself), else the actor given."""
        local = hasattr(getattr(self.store, "events", None), "session_writer")  # a Store
        if self.session_id is not None:
            if local:
                actor: Actor = yield Call("events.session_writer", (self.session_id, store_id))
                return actor
            return Actor.session(self.session_id)
        if self.actor is not None:
            return self.actor
        if local:  # a local database: the local user
            return local_user_actor()
        return None  # a server attributes to its API key

    def _record(self, store_id: str, events: list[dict[str, Any]]) -> Generator[Call, Any, None]:
        """Record events no write recorded. A failure is logged, never the command's."""
        try:
            yield Call("events.add", (self.session_id, events), {"store_id": store_id})
        except errors.MemfsError as e:
            log.error("could not record the memory tool's events: %s", e.message)

    def _tree(self, store_id: str) -> Generator[Call, Any, list[Memory]]:
        memories: list[Memory] = yield Call("memories.tree", (store_id,))
        return memories

    def _is_directory(self, store_id: str, path: str) -> Generator[Call, Any, bool]:
        if path == "":
            return True
        memories = yield from self._tree(store_id)
        return any(m.path.startswith(path + "/") for m in memories)

    def _read(self, store_id: str, path: str, shown: str) -> Generator[Call, Any, Memory]:
        """The memory at ``path`` with its content, for an edit.

        :raises ToolError: no such memory, or a directory (the SDK's words)."""
        try:
            if path == "":
                raise errors.NotFound(path)
            memory: Memory = yield Call("memories.get_by_path", (store_id, path))
            return memory
        except errors.NotFound:
            if (yield from self._is_directory(store_id, path)):
                raise ToolError(f"The path {shown} is not a file.") from None
            raise ToolError(
                f"The path {shown} does not exist. Please provide a valid path.") from None

    def run(self, command: Any, op: Generator[Call, Any, tuple[str, dict[str, Any]]]) -> Op:
        """Run a command's generator and record its event pair (unless it recorded it with
        its write). The generator returns ``(text, event)``: the tool result and the event's
        fields (``operation``, ``file_path``, ``new_path``, ``recorded``)."""
        name = getattr(command, "command", None)
        input = command_input(command)
        path = getattr(command, "path", None) or getattr(command, "old_path", None)
        fallback = {"operation": _OPERATIONS.get(name, str(name)) if isinstance(name, str)
                    else str(name),
                    "file_path": path if isinstance(path, str) else ""}
        store_id = yield from self._store_id()
        try:
            try:
                text, event = yield from op
            except errors.MemfsError as e:  # a store error the command did not expect
                raise failure(e, fallback["file_path"], f"The {name} command") from None
        except ToolError as e:
            refused = e.content if isinstance(e.content, str) else str(e)
            info = getattr(e, "memfs_event", None) or fallback
            yield from self._record(store_id, event_pair(
                input, info["operation"], info["file_path"], refused, is_error=True,
                new_path=info.get("new_path")))
            raise
        if not event.get("recorded"):
            pair = event_pair(input, event["operation"], event["file_path"], text,
                               is_error=False, new_path=event.get("new_path"))
            if event.get("memory") is not None:
                m: Memory = event["memory"]
                pair[1]["memory_id"] = m.id
                pair[1]["memory_version_id"] = m.memory_version_id
            yield from self._record(store_id, pair)
        return text

    # -- the commands ----------------------------------------------------------------------

    def view(self, command: BetaMemoryTool20250818ViewCommand
             ) -> Generator[Call, Any, tuple[str, dict[str, Any]]]:
        shown = command.path
        path = memory_path(shown)
        store_id = self.store_id
        assert store_id is not None
        if path == DESCRIBE_PATH:  # computed at each view (memfs.tools._typed)
            d = yield from describe(store_id)
            return describe_text(d), {"operation": "read", "file_path": shown}
        memories = yield from self._tree(store_id)
        match = next((m for m in memories if m.path == path), None) if path else None
        if match is None:
            below = [m for m in memories if m.path.startswith(path + "/")]
            if path and not below:
                raise tagged(ToolError(
                    f"The path {shown} does not exist. Please provide a valid path."),
                    "read", shown)
            return _listing(shown, path, below), {"operation": "list", "file_path": shown}
        try:
            memory = yield Call("memories.get", (store_id, match.id))
        except errors.NotFound:
            raise tagged(ToolError(f"The file {shown} no longer exists (may have been deleted "
                                    "or renamed concurrently)."), "read", shown) from None
        lines = (memory.content or "").split("\n")
        if len(lines) > MAX_LINES:
            raise tagged(ToolError(
                f"File {shown} exceeds maximum line limit of 999,999 lines."), "read", shown)
        display, start = lines, 1
        view_range = getattr(command, "view_range", None)
        if view_range and len(view_range) == 2:
            if not all(isinstance(n, int) and not isinstance(n, bool) for n in view_range):
                raise tagged(ToolError(
                    f"Invalid `view_range` parameter: {view_range}. It should be two line "
                    "numbers."), "read", shown)
            first = max(1, view_range[0]) - 1
            end = len(lines) if view_range[1] == -1 else view_range[1]
            display, start = lines[first:end], first + 1
        text = f"Here's the content of {shown} with line numbers:\n" + numbered(display, start)
        return text, {"operation": "read", "file_path": shown}

    def create(self, command: BetaMemoryTool20250818CreateCommand
               ) -> Generator[Call, Any, tuple[str, dict[str, Any]]]:
        shown = command.path
        path = memory_path(shown)
        file_text = getattr(command, "file_text", None)
        if not isinstance(file_text, str):
            raise tagged(ToolError("Parameter `file_text` is required for command: create"),
                          "create", shown)
        store_id = self.store_id
        assert store_id is not None
        if path == "":
            raise tagged(ToolError(f"File {shown} already exists"), "create", shown)
        actor = yield from self._actor(store_id)
        try:
            memory = yield Call("memories.create", (store_id, path, file_text), {"actor": actor})
        except errors.PathConflict as e:
            raise tagged(_conflict(e, shown, path, "File {shown} already exists"),
                          "create", shown) from None
        except errors.MemfsError as e:
            raise tagged(failure(e, shown, f"Creating {shown}"), "create", shown) from None
        return (f"File created successfully at: {shown}",
                {"operation": "create", "file_path": shown, "memory": memory})

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand
                    ) -> Generator[Call, Any, tuple[str, dict[str, Any]]]:
        shown = command.path
        path = memory_path(shown)
        old, new = getattr(command, "old_str", None), getattr(command, "new_str", None)
        if not isinstance(old, str):
            raise tagged(ToolError(
                "Parameter `old_str` is required for command: str_replace"), "write", shown)
        new = new if isinstance(new, str) else ""
        store_id = self.store_id
        assert store_id is not None
        actor = yield from self._actor(store_id)
        for _ in range(EDIT_ATTEMPTS):
            memory = yield from self._tagged_read(store_id, path, shown, "write")
            content = memory.content or ""
            count = content.count(old)
            if count == 0:
                raise tagged(ToolError(
                    f"No replacement was performed, old_str `{old}` did not appear verbatim "
                    f"in {shown}."), "write", shown)
            if count > 1:
                matching = occurrence_lines(content, old)
                raise tagged(ToolError(
                    f"No replacement was performed. Multiple occurrences of old_str `{old}` in "
                    f"lines: {', '.join(map(str, matching))}. Please ensure it is unique"),
                    "write", shown)
            changed_line = content[:content.find(old)].count("\n")
            new_content = content.replace(old, new)
            try:
                written = yield Call("memories.update", (store_id, memory.id), {
                    "content": new_content, "precondition_sha256": memory.content_sha256,
                    "actor": actor})
            except (errors.PreconditionFailed, errors.NotFound):
                continue  # changed (or moved) since it was read: read it again
            except errors.MemfsError as e:
                raise tagged(failure(e, shown, f"Editing {shown}"), "write", shown) from None
            new_lines = new_content.split("\n")
            first = max(0, changed_line - 2)
            last = min(len(new_lines), changed_line + 3)
            snippet = numbered(new_lines[first:last], first + 1)
            return ("The memory file has been edited. Here is the snippet showing the change "
                    "(with line numbers):\n" + snippet,
                    {"operation": "write", "file_path": shown, "memory": written})
        raise tagged(ToolError(
            f"No replacement was performed: {shown} kept changing while it was edited "
            f"(concurrent writers). View it and try again."), "write", shown)

    def insert(self, command: BetaMemoryTool20250818InsertCommand
               ) -> Generator[Call, Any, tuple[str, dict[str, Any]]]:
        shown = command.path
        path = memory_path(shown)
        line = getattr(command, "insert_line", None)
        text = getattr(command, "insert_text", None)
        if not isinstance(text, str):
            raise tagged(ToolError(
                "Parameter `insert_text` is required for command: insert"), "write", shown)
        store_id = self.store_id
        assert store_id is not None
        actor = yield from self._actor(store_id)
        memory = yield from self._tagged_read(store_id, path, shown, "write")
        lines = split_lines_keeping_cr(memory.content or "")
        if isinstance(line, bool) or not isinstance(line, int) or not 0 <= line <= len(lines):
            raise tagged(ToolError(
                f"Invalid `insert_line` parameter: {line}. "
                f"It should be within the range [0, {len(lines)}]."), "write", shown)
        lines.insert(line, text.rstrip("\n"))
        new_content = "\n".join(lines)
        if not new_content.endswith("\n"):
            new_content += "\n"
        try:
            written = yield Call("memories.update", (store_id, memory.id), {
                "content": new_content, "precondition_sha256": memory.content_sha256,
                "actor": actor})
        except (errors.PreconditionFailed, errors.NotFound):
            # The line number is the model's reading of the old content: never guess.
            raise tagged(ToolError(
                f"No insertion was performed: {shown} was changed by someone else since it "
                "was read. View it again and retry."), "write", shown) from None
        except errors.MemfsError as e:
            raise tagged(failure(e, shown, f"Editing {shown}"), "write", shown) from None
        return (f"The file {shown} has been edited.",
                {"operation": "write", "file_path": shown, "memory": written})

    def delete(self, command: BetaMemoryTool20250818DeleteCommand
               ) -> Generator[Call, Any, tuple[str, dict[str, Any]]]:
        shown = command.path
        path = memory_path(shown)
        if path == "":
            raise tagged(ToolError(f"Cannot delete the {ROOT} directory itself"),
                          "delete", shown)
        store_id = self.store_id
        assert store_id is not None
        actor = yield from self._actor(store_id)
        text = f"Successfully deleted {shown}"
        memories = yield from self._tree(store_id)
        if any(m.path == path for m in memories):
            pair = event_pair(command_input(command), "delete", shown, text, is_error=False)
            try:
                yield Call("memories.delete_path", (store_id, path), {"actor": actor,
                                                                       "events": pair})
            except errors.MemfsError as e:
                raise tagged(failure(e, shown, f"Deleting {shown}"), "delete",
                              shown) from None
            return text, {"recorded": True}
        if not any(m.path.startswith(path + "/") for m in memories):
            raise tagged(ToolError(f"The path {shown} does not exist"), "delete", shown)
        # A directory (the store has none of its own): every memory below it, in one
        # transaction with the event pair, so that a failure leaves the directory whole.
        pair = event_pair(command_input(command), "delete", shown, text, is_error=False)
        try:
            yield Call("memories.delete_prefix", (store_id, path + "/"),
                       {"actor": actor, "events": pair})
        except errors.NotFound:
            # Deleted meanwhile: as good (its event pair is then recorded on its own).
            return text, {"operation": "delete", "file_path": shown}
        except errors.MemfsError as e:
            raise tagged(failure(e, shown, f"Deleting {shown}"), "delete", shown) from None
        return text, {"recorded": True}

    def rename(self, command: BetaMemoryTool20250818RenameCommand
               ) -> Generator[Call, Any, tuple[str, dict[str, Any]]]:
        old_shown = command.old_path
        new_shown = command.new_path
        tag = {"new_path": new_shown if isinstance(new_shown, str) else None}
        old = memory_path(old_shown)
        new = memory_path(new_shown)
        if old == "":
            raise tagged(ToolError(f"Cannot rename the {ROOT} directory itself"),
                          "rename", old_shown, **tag)
        if new == "":
            raise tagged(ToolError(f"The destination {new_shown} already exists"),
                          "rename", old_shown, **tag)
        store_id = self.store_id
        assert store_id is not None
        actor = yield from self._actor(store_id)
        memories = yield from self._tree(store_id)
        exists = "The destination {shown} already exists"
        text = f"Successfully renamed {old_shown} to {new_shown}"
        pair = event_pair(command_input(command), "rename", old_shown, text, is_error=False,
                           new_path=new_shown)
        try:
            if any(m.path == old for m in memories):
                yield Call("memories.rename_path", (store_id, old, new),
                            {"actor": actor, "replace": False, "events": pair})
            elif any(m.path.startswith(old + "/") for m in memories):
                if (new + "/").startswith(old + "/"):
                    raise tagged(ToolError(
                        f"Cannot move {old_shown} into itself ({new_shown})"),
                        "rename", old_shown, **tag)
                yield Call("memories.rename_prefix", (store_id, old + "/", new + "/"),
                            {"actor": actor, "events": pair})
            else:
                raise tagged(ToolError(f"The path {old_shown} does not exist"),
                              "rename", old_shown, **tag)
        except errors.PathConflict as e:
            raise tagged(_conflict(e, new_shown, new, exists), "rename", old_shown,
                          **tag) from None
        except errors.MemfsError as e:
            raise tagged(failure(e, old_shown, f"Renaming {old_shown}"), "rename",
                          old_shown, **tag) from None
        return text, {"recorded": True}

    def _tagged_read(self, store_id: str, path: str, shown: str, operation: str
                     ) -> Generator[Call, Any, Memory]:
        try:
            memory = yield from self._read(store_id, path, shown)
        except ToolError as e:
            raise tagged(e, operation, shown) from None
        return memory


_OPERATIONS = {"view": "read", "create": "create", "str_replace": "write", "insert": "write",
               "delete": "delete", "rename": "rename"}


def _conflict(e: errors.PathConflict, shown: str, path: str, exists: str) -> ToolError:
    """A path taken (``exists``, in the SDK's words), or blocked by a file above it."""
    other = e.conflicting_path
    if not other or other == path or other.startswith(path + "/") \
            or isinstance(e, errors.DirectoryNotEmpty):
        return ToolError(exists.format(shown=shown))
    return ToolError(f"Cannot write {shown}: {tool_path(other)} is a file, not a directory")


def _listing(shown: str, path: str, below: list[Memory]) -> str:
    """A directory as the SDK's tool lists it: two levels deep, sorted by name in each
    directory, names starting with ``.`` left out (and what is below them)."""
    root: dict[str, Any] = {}
    for m in below:
        node = root
        parts = m.path[len(path) + 1:].split("/")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):  # cannot happen in a store; skip it if it does
                break
            node = child
        else:
            node[parts[-1]] = m
    items: list[tuple[str, str]] = []

    def collect(node: dict[str, Any], relative: str, depth: int) -> None:
        for name in sorted(node):
            if name.startswith("."):
                continue
            item = f"{relative}/{name}" if relative else name
            child = node[name]
            if isinstance(child, dict):
                items.append((format_file_size(DIR_SIZE), f"{item}/"))
                if depth < 2:
                    collect(child, item, depth + 1)
            else:
                items.append((format_file_size(child.content_size_bytes), item))

    collect(root, "", 1)
    header = (f"Here're the files and directories up to 2 levels deep in {shown}, "
              "excluding hidden items:")
    lines = [f"{format_file_size(DIR_SIZE)}\t{shown}"]
    lines.extend(f"{size}\t{shown}/{item}" for size, item in items)
    return f"{header}\n" + "\n".join(lines)


def _names_the_description(command: Any) -> bool:
    """The command would change ``/memories/.describe``."""
    for attr in ("path", "old_path", "new_path"):
        try:
            if memory_path(getattr(command, attr, None)) == DESCRIBE_PATH:
                return True
        except ToolError:
            continue  # not a tool path: the command says so itself
    return False


def _parameters_error(command: Any) -> ToolError | None:
    """A command without the parameters every command needs (the model can omit them)."""
    name = getattr(command, "command", None)
    needed = ("old_path", "new_path") if name == "rename" else ("path",)
    for p in needed:
        if not isinstance(getattr(command, p, None), str):
            return ToolError(f"Parameter `{p}` is required for command: {name}")
    return None


# --------------------------------------------------------------------------------------------
# the tools


if TYPE_CHECKING:
    class _SDKTool:
        """What follows :class:`_Common` in a tool's MRO, for the type checker: the SDK's
        memory tool base, sync or async (their ``__init__`` is the same)."""

        def __init__(self, *, cache_control: BetaCacheControlEphemeralParam | None = None
                     ) -> None: ...
else:
    _SDKTool = object


class _Common(_SDKTool):
    """What the sync and async tools share (before the SDK's base class in their MRO)."""

    def __init__(self, store: Any, memory_store: str, *, session_id: str | None = None,
                 actor: Actor | None = None, read_only: bool = False,
                 cache_control: BetaCacheControlEphemeralParam | None = None) -> None:
        super().__init__(cache_control=cache_control)
        self.store = store
        self.read_only = read_only
        self._commands = _Commands(store, memory_store, session_id=session_id, actor=actor)

    @property
    def session_id(self) -> str | None:
        return self._commands.session_id

    def _op(self, command: Any, name: str) -> Op:
        missing = _parameters_error(command)
        if missing is not None:
            return self._commands.run(command, _raise(missing))
        if self.read_only and name != "view":
            return self._commands.run(command, _raise(ToolError(
                f"The {name} command is not allowed: {ROOT} is read-only here")))
        if name != "view" and _names_the_description(command):
            return self._commands.run(command, _raise(ToolError(
                f"{ROOT}{DESCRIBE_PATH} is computed by memfs at each view: it cannot be "
                "changed")))
        return self._commands.run(command, getattr(self._commands, name)(command))

    def _describe(self) -> Generator[Call, Any, dict[str, Any]]:
        store_id = yield from self._commands._store_id()
        return (yield from describe(store_id))

    def _pinned(self, budget: int | None) -> Generator[Call, Any, str]:
        store_id = yield from self._commands._store_id()
        entries, texts, more = yield from pinned_now(
            store_id, PINNED_BUDGET if budget is None else budget)
        return block(entries, texts, more)

    def _add(self, text: str, type_: str, name: str | None, tags: Iterable[str],
             importance: str | float | None, description: str | None
             ) -> Generator[Call, Any, str]:
        """A typed memory (no tool event: no model asked). :raises ToolError:"""
        if self.read_only:
            raise ToolError(f"{ROOT} is read-only here")
        if not isinstance(text, str) or text.startswith("---"):
            raise ToolError("text must be a string without front matter of its own (write "
                            "such a memory with create)")
        store_id = yield from self._commands._store_id()
        directory = directory_of((yield from describe(store_id)), type_)
        content = front_matter(text, type_, tags=tags, importance=importance,
                               description=description)
        actor = yield from self._commands._actor(store_id)
        return (yield from add_memory(store_id, directory, name, text, content, actor))

    def _clear(self) -> Generator[Call, Any, str]:
        """Delete every memory (each a ``deleted`` version; no tool event: no model asked)."""
        if self.read_only:
            raise ToolError(f"{ROOT} is read-only here")
        store_id = yield from self._commands._store_id()
        actor = yield from self._commands._actor(store_id)
        for m in (yield from self._commands._tree(store_id)):
            with contextlib.suppress(errors.NotFound):  # deleted meanwhile: as good
                yield Call("memories.delete_path", (store_id, m.path), {"actor": actor})
        return "All memory cleared"


def _raise(e: ToolError) -> Generator[Call, Any, tuple[str, dict[str, Any]]]:
    raise e
    yield  # a generator  # type: ignore[unreachable]


class MemoryTool(_Common, BetaAbstractMemoryTool):
    """The memory tool on a memfs store, for ``client.beta.messages.tool_runner``.

    :param store: a :class:`memfs.store.Store` or :class:`memfs.client.Client`.
    :param memory_store: the memory store's id or name.
    :param session_id: attribute changes and events to this session (a local store checks
        that it has the store attached ``read_write``). A client acts as its own session.
    :param actor: who the changes are by without a session (default: the local user on a
        database, the API key on a server).
    :param read_only: only ``view``: every other command is refused (with its event), e.g.
        for a store a model may consult but not change.
    """

    def _drive(self, op: Generator[Call, Any, T]) -> T:
        try:
            call = next(op)
            while True:
                try:
                    result = call.method_of(self.store)(*call.args, **call.kwargs)
                except errors.MemfsError as e:
                    call = op.throw(e)
                else:
                    call = op.send(result)
        except StopIteration as stop:
            returned: T = stop.value  # what the generator returns
            return returned
        except errors.MemfsError as e:  # a store error no command expected
            raise failure(e, "", "The memory tool") from None

    def execute(self, command: BetaMemoryTool20250818Command) -> str:
        name = getattr(command, "command", None)
        if name not in _OPERATIONS:
            raise ToolError(f"Unknown command: {name}")
        return self._drive(self._op(command, name))

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self._drive(self._op(command, "view"))

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self._drive(self._op(command, "create"))

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._drive(self._op(command, "str_replace"))

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self._drive(self._op(command, "insert"))

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self._drive(self._op(command, "delete"))

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self._drive(self._op(command, "rename"))

    def clear_all_memory(self) -> str:
        return self._drive(self._clear())

    def describe(self) -> dict[str, Any]:
        """What the store holds: its describe object (``memfs_store_description``: counts by
        type, directory and tag, what expires soon, the oldest and newest change, warnings,
        its types). The model reads the same as text by viewing ``/memories/.describe``."""
        return self._drive(self._describe())

    def pinned(self, budget: int | None = None) -> str:
        """The store's pinned memories as the block a session's prompt puts after the store's
        note (SPEC §9): framed as saved data, each memory whole within ``budget`` characters
        (default 4,000), what did not fit listed by path and size; ``""`` when none is
        pinned. For an application to put in its system prompt."""
        return self._drive(self._pinned(budget))

    def add(self, text: str, *, type: str, name: str | None = None,
            tags: Iterable[str] = (), importance: str | float | None = None,
            description: str | None = None) -> str:
        """Write ``text`` as a memory of the type ``type`` (one of the store's types), under
        its directory with front matter saying so (``type``, and ``importance``, ``tags``,
        ``description`` when given), attributed as the tool's other changes are.

        :param name: its file name in the directory (``.md`` added without an extension);
            None: made from the text's first line (``-2``, ``-3``… if taken).
        :returns: its path as the model sees it (``/memories/decisions/deploy-day.md``).
        :raises ToolError: an unknown type, a name taken, a read-only tool, the store's
            refusal. A value the store cannot use is kept, and reported in the memory's
            warnings (``memfs_meta``).
        """
        return self._drive(self._add(text, type, name, tags, importance, description))


class AsyncMemoryTool(_Common, BetaAsyncAbstractMemoryTool):
    """The memory tool for ``AsyncAnthropic``'s ``tool_runner``: on a
    :class:`memfs.client.AsyncClient` (awaited), or on a sync store (each call in a worker
    thread). Parameters as :class:`MemoryTool`."""

    async def _call(self, call: Call) -> Any:
        return await make(self.store, call)

    async def _drive(self, op: Generator[Call, Any, T]) -> T:
        try:
            call = next(op)
            while True:
                try:
                    result = await self._call(call)
                except errors.MemfsError as e:
                    call = op.throw(e)
                else:
                    call = op.send(result)
        except StopIteration as stop:
            returned: T = stop.value  # what the generator returns
            return returned
        except errors.MemfsError as e:
            raise failure(e, "", "The memory tool") from None

    async def execute(self, command: BetaMemoryTool20250818Command) -> str:
        name = getattr(command, "command", None)
        if name not in _OPERATIONS:
            raise ToolError(f"Unknown command: {name}")
        return await self._drive(self._op(command, name))

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self._drive(self._op(command, "view"))

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self._drive(self._op(command, "create"))

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self._drive(self._op(command, "str_replace"))

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self._drive(self._op(command, "insert"))

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self._drive(self._op(command, "delete"))

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self._drive(self._op(command, "rename"))

    async def clear_all_memory(self) -> str:
        return await self._drive(self._clear())

    async def describe(self) -> dict[str, Any]:
        """As :meth:`MemoryTool.describe`."""
        return await self._drive(self._describe())

    async def pinned(self, budget: int | None = None) -> str:
        """As :meth:`MemoryTool.pinned`."""
        return await self._drive(self._pinned(budget))

    async def add(self, text: str, *, type: str, name: str | None = None,
                  tags: Iterable[str] = (), importance: str | float | None = None,
                  description: str | None = None) -> str:
        """As :meth:`MemoryTool.add`."""
        return await self._drive(self._add(text, type, name, tags, importance, description))
