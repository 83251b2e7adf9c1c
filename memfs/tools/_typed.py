"""What a store holds, and a memory with a type (SPEC §8), for the memory tool.

The SDK's memory tool has six commands (``view``, ``create``, ``str_replace``, ``insert``,
``delete``, ``rename``) and a model is trained on them, so nothing is added to the command
set: the model reads what is stored by viewing ``/memories/.describe``, a file memfs computes
at each view (as a mount's ``.describe``; hidden from listings, as every dot name is, and never
written). An application calls :meth:`~memfs.tools.MemoryTool.describe` (the store's describe
object, ``memfs_store_description``) and :meth:`~memfs.tools.MemoryTool.add` (a memory under
its type's directory with its front matter). Both are the store's ``typed.describe``: the
types and their directories are the store's (its metadata may redefine or turn them off), and
what a value means is the store's rule too (a value it cannot use is kept and reported in the
memory's warnings: front matter never makes a write fail).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from anthropic.lib.tools import ToolError

from .. import errors
from ..models import Actor
from ..toolkit import typed
from ..toolkit.typed import file_names
from ..toolkit.typed import front_matter as front_matter
from ._base import ROOT, Call, failure, memory_path, tool_path

#: The memory path of the computed description (``/memories/.describe``).
DESCRIBE_PATH = "/.describe"


def describe(store_id: str) -> Generator[Call, Any, dict[str, Any]]:
    """The store's describe object (``store.typed.describe``: a Store or a Client)."""
    found: dict[str, Any] = yield Call("typed.describe", (store_id,))
    return found


def describe_text(d: dict[str, Any]) -> str:
    """The describe object as the model reads it, paths shown under ``/memories``."""
    return typed.describe_text(d, tool_path)


def directory_of(d: dict[str, Any], type_: str) -> str:
    """The directory of the type ``type_`` in the store's types (its describe object).

    :raises ToolError: the store has no such type, or none at all."""
    try:
        return typed.directory_of(d, type_)
    except errors.InvalidRequest as e:
        raise ToolError(e.message) from None


def add(store_id: str, directory: str, name: str | None, text: str, content: str,
        actor: Actor | None) -> Generator[Call, Any, str]:
    """Create ``content`` as ``name`` in ``directory`` (a name made from ``text`` if None:
    ``NAME``, then ``NAME-2``, … if taken); a name given that is taken is an error.

    :returns: the memory's tool path. :raises ToolError:"""
    names = file_names(name, text)
    for file_name in names:
        shown = ROOT + directory + file_name
        path = memory_path(shown)
        try:
            yield Call("memories.create", (store_id, path, content), {"actor": actor})
        except errors.PathConflict as e:
            other = e.conflicting_path
            if other and other != path and not other.startswith(path + "/"):
                raise ToolError(f"Cannot write {shown}: {tool_path(other)} is a file, "
                                "not a directory") from None
            continue
        except errors.MemfsError as e:
            raise failure(e, shown, f"Creating {shown}") from None
        return shown
    raise ToolError(f"File {ROOT + directory + names[0]} already exists")
