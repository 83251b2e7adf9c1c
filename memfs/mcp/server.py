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

import contextvars
import importlib.metadata
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import anyio
import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl

from .. import errors
from . import resources
from .instructions import instructions, without_stores
from .reach import Reach
from .resources import Subscriptions
from .tooling import ToolSpec, error_text, failure, run_tool, safe_text
from .tools import TOOLS

T = TypeVar("T")

#: The subscriptions of the MCP session whose run this task is in (set by MemfsServer.run,
#: which every handler of the session runs inside).
_SUBSCRIPTIONS: contextvars.ContextVar[Subscriptions] = contextvars.ContextVar(
    "memfs_mcp_subscriptions")
#: The JSON-RPC error code of a resource that does not exist (the MCP specification's).
RESOURCE_NOT_FOUND = -32002

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
        super().__init__(NAME, _version(),
                         instructions=reach.instructions if isinstance(reach, Reach) else None)
        self.reach_of: Callable[[], Reach] = (
            (lambda: reach) if isinstance(reach, Reach) else reach)

    def get_capabilities(self, notification_options: NotificationOptions,
                         experimental_capabilities: dict[str, dict[str, Any]]
                         ) -> types.ServerCapabilities:
        """The SDK's, with resource subscriptions (which it never announces)."""
        caps = super().get_capabilities(notification_options, experimental_capabilities)
        if caps.resources is not None:
            caps.resources.subscribe = True
        return caps

    async def run(self, read_stream: Any, write_stream: Any,
                  initialization_options: InitializationOptions, *args: Any,
                  **kwargs: Any) -> None:
        """The SDK's run of one MCP session, with its instructions worded (unless given)
        and its subscriptions, whose tasks end with it."""
        if initialization_options.instructions is None:
            initialization_options = initialization_options.model_copy(
                update={"instructions": await self.instructions_now()})
        async with anyio.create_task_group() as tasks:
            token = _SUBSCRIPTIONS.set(Subscriptions(tasks))
            try:
                await super().run(read_stream, write_stream, initialization_options,
                                  *args, **kwargs)
            finally:
                _SUBSCRIPTIONS.reset(token)
                tasks.cancel_scope.cancel()

    async def _get_cached_tool_definition(self, tool_name: str) -> types.Tool | None:
        """The SDK's look-up of a tool before each call (it lists the tools on a miss, only
        to validate what memfs validates itself): a reach that cannot list them (a revoked
        key, a store that cannot answer) leaves the call to say why, as a result."""
        try:
            return await super()._get_cached_tool_definition(tool_name)
        except Exception as e:
            log.info("could not list the tools before a call of %s: %s", tool_name[:100], e)
            return None

    async def instructions_now(self) -> str:
        """The instructions of the reach (:mod:`memfs.mcp.instructions`); a reach that
        cannot be asked outside a request (HTTP) or a store that cannot answer gets the
        words without its stores."""
        try:
            reach = self.reach_of()
            return await reach.run(instructions(reach))
        except (LookupError, errors.MemfsError) as e:
            log.info("MCP instructions without the stores: %s", e)
            return without_stores()

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
        try:
            r = server.reach_of()
            spec = next((s for s in TOOLS if s.name == name), None)
            if spec is None or (r.tools is not None and name not in r.tools):
                names = [s.name for s in TOOLS if r.tools is None or s.name in r.tools]
                return _error("invalid_request_error", f"unknown tool {safe_text(name[:100])!r}: "
                              f"the tools are {', '.join(names)}")
            is_error, text, data = await r.run(run_tool(r, spec, arguments))
        except Exception as e:  # no reach (a revoked key), or a bug: a result all the same
            err = failure(e)
            return _error(err["type"], err["message"])
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structuredContent=data, isError=is_error)

    @server.list_resources()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_resources(req: types.ListResourcesRequest) -> types.ListResourcesResult:
        r = server.reach_of()
        cursor = req.params.cursor if req.params is not None else None
        found, next_cursor = await _answer(r.run(resources.list_page(r, cursor)))
        return types.ListResourcesResult(
            resources=[types.Resource.model_validate(x) for x in found],
            nextCursor=next_cursor)

    @server.read_resource()  # type: ignore[no-untyped-call, untyped-decorator]
    async def read_resource(uri: AnyUrl) -> Iterable[ReadResourceContents]:
        r = server.reach_of()
        content, mime = await _answer(r.run(resources.read(r, uri)))
        return [ReadResourceContents(content, mime)]

    @server.subscribe_resource()  # type: ignore[no-untyped-call, untyped-decorator]
    async def subscribe(uri: AnyUrl) -> None:
        r = server.reach_of()
        session = server.request_context.session

        async def notify(changed: str) -> None:
            await session.send_resource_updated(AnyUrl(changed))

        async def add() -> None:
            store_id, path = await _seen(r, uri)
            _SUBSCRIPTIONS.get().add(store_id, resources.uri_of(store_id, path), notify,
                                     r.changes or resources.poll_feed(r))

        await _answer(add())

    @server.unsubscribe_resource()  # type: ignore[no-untyped-call, untyped-decorator]
    async def unsubscribe(uri: AnyUrl) -> None:
        # resolved as subscribe resolved it: a store's name is its id here too
        store_id, path = await _answer(_seen(server.reach_of(), uri))
        _SUBSCRIPTIONS.get().remove(store_id, resources.uri_of(store_id, path))

    return server


async def _seen(reach: Reach, uri: AnyUrl) -> tuple[str, str]:
    """A URI's store and path, its store in the reach (a memory need not exist yet to be
    subscribed to: its creation is an update)."""
    store_id, path = resources.parse(uri)
    store = await reach.run(reach.store_of(store_id))
    return store.id, path


async def _answer(step: Awaitable[T]) -> T:
    """A resource request's answer; a failure is a JSON-RPC error (resources have no error
    results) worded as a tool's: ``<error type>: <message>``."""
    try:
        return await step
    except errors.MemfsError as e:
        err = failure(e)
        code = (RESOURCE_NOT_FOUND if isinstance(e, errors.NotFound) else
                types.INVALID_PARAMS if isinstance(e, errors.InvalidRequest) else
                types.INTERNAL_ERROR)
        raise McpError(types.ErrorData(code=code, message=error_text(err),
                                       data={"type": "error", "error": err})) from None


__all__ = ["MemfsServer", "create_server"]
