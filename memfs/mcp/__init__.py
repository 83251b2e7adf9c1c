"""memfs as an MCP server: the same stores for every agent that speaks the Model Context
Protocol (Claude Desktop, Claude Code, Cursor, most agent frameworks), with memfs's versions,
attribution, limits and revert.

An agent gets tools (``memory_list_stores``, ``memory_list``, ``memory_read``,
``memory_write``, ``memory_edit``, ``memory_move``, ``memory_delete``, ``memory_search``,
``memory_history``, ``memory_restore``, ``memory_describe``, ``memory_add``), every list
bounded and paged; each memory as a resource ``memfs://<store id>/<path>`` it may subscribe
to; and instructions that say which stores it has and how to use them. A failed tool is a
result that says what went wrong, in the HTTP API's error types, and how to go on.

:class:`Reach` says where the calls go (a local database, a ``memfs serve``) and whom they
act as (a session, whose writes and tool calls ``memfs session revert`` and the Console see;
a key; the local user); :func:`create_server` makes the server of a reach, for any transport:
``memfs mcp`` (stdio) and ``/mcp`` on ``memfs serve`` (Streamable HTTP). The tools are thin:
every rule stays in the store (:mod:`memfs.toolkit` drives them, as it does the SDK's memory
tool, :mod:`memfs.tools`).
"""

from .reach import Reach
from .server import create_server

__all__ = ["Reach", "create_server"]
