"""The client-side memory tool (``memory_20250818``) backed by a memfs store.

Most Claude applications get memory through the Messages API's client-side memory tool: the
model calls ``view``, ``create``, ``str_replace``, ``insert``, ``delete`` and ``rename`` on a
``/memories`` tree and the application carries the calls out. The ``anthropic`` SDK ships the
base classes (:class:`~anthropic.lib.tools.BetaAbstractMemoryTool` and its async twin) and a
local-filesystem implementation that keeps no history. :class:`MemoryTool` and
:class:`AsyncMemoryTool` carry the calls out on a memory store instead::

    tool = MemoryTool(Store(), "notes", session_id=None)        # a local database
    tool = MemoryTool(Client(url, key), "notes")                # a `memfs serve`
    client.beta.messages.tool_runner(model=..., max_tokens=..., messages=...,
                                     tools=[tool]).until_done()

- ``/memories/a/b.md`` is the memory ``/a/b.md``; a directory is any path prefix that holds
  memories (``/memories`` always exists). The model sees what the SDK's own tool shows: the
  same listings (sizes, two levels deep, hidden names left out), numbered lines, snippets and
  error strings.
- Every change is a version, attributed to the session (``session_id``, or the session a
  :class:`memfs.client.Client` acts as) or else to ``actor`` (default: the local user on a
  database; a server attributes to its API key). Every command, refused ones included, is an
  ``agent.tool_use`` / ``agent.tool_result`` pair (SPEC §4), of the session or else of the
  store: deletions and renames record it in the write's own transaction, the other commands
  right after.
- The store's rules decide (limits, path rules, an archived store, a read-only session): the
  model gets their reason as the tool error, never a traceback. ``..`` and paths outside
  ``/memories`` are refused. ``str_replace`` and ``insert`` write with the content hash they
  read as a precondition: a concurrent change is never overwritten (``str_replace`` reads
  again and retries, since its text says what to change; ``insert`` names a line of the
  content the model saw, so it fails with an error asking to view the file again).

The command logic is written once, as generators that yield the store calls they need (like
:mod:`memfs.client`); :class:`MemoryTool` makes them on a :class:`memfs.protocol.StoreAPI`
(:class:`memfs.store.Store` or :class:`memfs.client.Client`), :class:`AsyncMemoryTool` awaits
them on a :class:`memfs.client.AsyncClient` or runs them in a worker thread on a sync store.
"""

from anthropic.lib.tools import ToolError

from ._base import ROOT, format_file_size, memory_path, tool_path
from ._tool import AsyncMemoryTool, MemoryTool

__all__ = ["ROOT", "AsyncMemoryTool", "MemoryTool", "ToolError", "format_file_size",
           "memory_path", "tool_path"]
