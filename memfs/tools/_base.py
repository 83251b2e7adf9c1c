"""What the memory tool's modules share: the SDK's formats, tool paths, and the tool error of a
store error; a store call a command wants made (:class:`Call`) and the event pair of a command
are :mod:`memfs.toolkit`'s (the MCP server's too)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from anthropic.lib.tools import ToolError

from .. import errors
from ..toolkit import Call as Call
from ..toolkit import event_pair as event_pair
from ..toolkit.edit import numbered as numbered
from ..toolkit.edit import split_lines_keeping_cr as split_lines_keeping_cr

#: The directory the model sees; the store's root.
ROOT = "/memories"
#: What the SDK's tool refuses to show (memfs.toolkit.edit numbers lines as wide).
MAX_LINES = 999999
#: The size a directory shows in a listing: what a mount (and ext4) reports.
DIR_SIZE = 4096


# --------------------------------------------------------------------------------------------
# the SDK's formats (anthropic.lib.tools._beta_builtin_memory_tool, 2.14.0)


def format_file_size(size: int) -> str:
    """A size as the SDK's listing shows it: ``0B``, ``512B``, ``4K``, ``1.5M``."""
    if size == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    i = min((size.bit_length() - 1) // 10, len(units) - 1)
    value = size / (1024**i)
    return f"{int(value)}{units[i]}" if value == int(value) else f"{value:.1f}{units[i]}"


# --------------------------------------------------------------------------------------------
# paths


def memory_path(path: Any) -> str:
    """The memory path of a tool path: ``/memories/a/b.md`` -> ``/a/b.md``, ``/memories`` ->
    ``""`` (the root). Empty segments, ``.`` and a trailing ``/`` are dropped, as the SDK's
    filesystem tool resolves them; the store's own rules check the rest when it writes.

    :raises ToolError: not a string, not under ``/memories``, or a ``..`` segment.
    """
    if not isinstance(path, str) or not path:
        raise ToolError(f"Path must start with {ROOT}, got: {path!r}")
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise ToolError(f"Path must start with {ROOT}, got: {path}")
    segments = [s for s in path[len(ROOT):].split("/") if s not in ("", ".")]
    if ".." in segments:
        depth = 0
        for s in segments:
            depth += -1 if s == ".." else 1
            if depth < 0:
                raise ToolError(f"Path {path} would escape {ROOT} directory")
        raise ToolError(f"Path {path} contains '..': give the path without it")
    return "".join("/" + s for s in segments)


def tool_path(path: str) -> str:
    """The tool path of a memory path (``/a/b.md`` -> ``/memories/a/b.md``)."""
    return ROOT + path


# --------------------------------------------------------------------------------------------
# events


def command_input(command: Any) -> dict[str, Any]:
    """The command as the model sent it (the fields it gave, JSON values)."""
    try:
        return {k: v for k, v in vars(command).items() if not k.startswith("_")}
    except TypeError:
        return {}


# --------------------------------------------------------------------------------------------
# the command logic, written once


#: A command: yields store calls, receives their results (or has their MemfsError thrown
#: in), returns the tool result text or raises ToolError.
Op = Generator[Call, Any, str]


def failure(e: errors.MemfsError, shown: str, what: str) -> ToolError:
    """The tool error of a store error, in the SDK's words where it has some."""
    if isinstance(e, errors.NotFound):
        return ToolError(f"The path {shown} does not exist")
    if isinstance(e, errors.ReadOnly):
        return ToolError(f"{what} failed: the memory store is read-only here ({e.message})")
    if isinstance(e, errors.StoreArchived):
        return ToolError(f"{what} failed: the memory store is archived and cannot be changed")
    if isinstance(e, errors.Busy | errors.StorageError):
        return ToolError(f"{what} failed: the memory store is unavailable ({e.message}); "
                         "try again later")
    return ToolError(f"{what} failed: {e.message}")


def tagged(e: ToolError, operation: str, file_path: str, new_path: str | None = None
            ) -> ToolError:
    """A ToolError that says what its event pair is about."""
    e.memfs_event = {  # type: ignore[attr-defined]
        "operation": operation, "file_path": file_path, "new_path": new_path}
    return e
