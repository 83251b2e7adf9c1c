"""The MCP server of memfs (:func:`create_server`): an :class:`mcp.server.lowlevel.Server` whose
tools, resources and instructions are those of a :class:`~memfs.mcp.reach.Reach`, over any
transport (stdio: :mod:`memfs.mcp.stdio`; Streamable HTTP on ``memfs serve``).

- tools/list: the tools the reach offers (``--tools``), without the write tools when no
  store it sees may be written; annotations honest (:meth:`ToolSpec.annotations`).
- tools/call: a failure is a result, never a protocol error or a traceback:
  ``isError`` true, one line ``<error type>: <message>`` (the HTTP API's error types) and
  the same object as structured content (:mod:`memfs.mcp.tooling`).
- resources: each memory ``memfs://<store id>/<path>`` (:mod:`memfs.mcp.resources`).
- instructions at initialize: the session's memory section, worded for tools
  (:mod:`memfs.mcp.instructions`).
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Callable
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import Server

from .. import errors
from .reach import Reach
from .tooling import ToolSpec, error_text, run_tool
from .tools import TOOLS, WRITE_TOOLS

log = logging.getLogger(__name__)

#: The server's name at initialize.
NAME = "memfs"


def _version() -> str:
    try:
        return importlib.metadata.version("memfs")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return "0"


class MemfsServer(Server[Any, Any]):
    """The SDK's low-level server with memfs's handlers (see the module)."""

    def __init__(self, reach: Reach | Callable[[], Reach]) -> None:
        super().__init__(NAME, _version())
        self.reach_of: Callable[[], Reach] = (
            (lambda: reach) if isinstance(reach, Reach) else reach)

    async def offered(self, reach: Reach) -> list[ToolSpec]:
        """The tools ``reach`` offers: its ``--tools`` filter, and no write tool when no
        store it sees may be written."""
        specs = [s for s in TOOLS if reach.tools is None or s.name in reach.tools]
        if any(not s.read_only for s in specs):
            try:
                writable = await reach.run(reach.writable())
            except errors.MemfsError as e:  # offered all the same: a call says what fails
                log.warning("could not tell whether a store may be written: %s", e.message)
                writable = True
            if not writable:
                specs = [s for s in specs if s.read_only]
        return specs


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(name=spec.name, title=spec.title, description=spec.description,
                      inputSchema=spec.schema,
                      annotations=types.ToolAnnotations(**spec.annotations()))


def _error(type_: str, message: str) -> types.CallToolResult:
    err = {"type": type_, "message": message}
    return types.CallToolResult(content=[types.TextContent(type="text", text=error_text(err))],
                                structuredContent={"type": "error", "error": err},
                                isError=True)


def create_server(reach: Reach | Callable[[], Reach]) -> MemfsServer:
    """The MCP server of ``reach`` (a callable is asked at each request: the reach of the
    request's credential, over HTTP)."""
    server = MemfsServer(reach)

    @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        return [_tool(s) for s in await server.offered(server.reach_of())]

    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        r = server.reach_of()
        spec = next((s for s in TOOLS if s.name == name), None)
        if spec is None or (r.tools is not None and name not in r.tools):
            names = [s.name for s in TOOLS if r.tools is None or s.name in r.tools]
            return _error("invalid_request_error",
                          f"unknown tool {name[:100]!r}: the tools are {', '.join(names)}")
        is_error, text, data = await r.run(run_tool(r, spec, arguments))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structuredContent=data, isError=is_error)

    return server


__all__ = ["WRITE_TOOLS", "MemfsServer", "create_server"]
