"""Every MCP tool of memfs, in the order tools/list gives them (snake case, ``memory_``
prefix): the stores and their files (:mod:`memfs.mcp.files`), recall
(:mod:`memfs.mcp.recall`)."""

from __future__ import annotations

from .files import TOOLS as FILE_TOOLS
from .recall import TOOLS as RECALL_TOOLS
from .tooling import ToolSpec

TOOLS: tuple[ToolSpec, ...] = (*FILE_TOOLS, *RECALL_TOOLS)
#: The names of the tools that write (hidden when nothing visible may be written).
WRITE_TOOLS = frozenset(s.name for s in TOOLS if not s.read_only)
#: Every tool's name (what ``--tools`` may name).
NAMES = tuple(s.name for s in TOOLS)
