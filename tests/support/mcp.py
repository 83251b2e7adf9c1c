"""The official MCP client on a memfs MCP server: a connected client on a reach (in process,
through the SDK's in-memory transport), and the checks of a result (a success; a failure's
shape: one line, its error type, the same object as structured content)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp.types as types
from mcp import ClientSession
from mcp.shared.memory import create_connected_server_and_client_session

from memfs.mcp import Reach, create_server


@asynccontextmanager
async def connected(reach: Reach, **options: Any) -> AsyncIterator[ClientSession]:
    async with create_connected_server_and_client_session(create_server(reach),
                                                          **options) as client:
        yield client


async def call(client: ClientSession, name: str, **args: Any) -> types.CallToolResult:
    return await client.call_tool(name, args)


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def ok(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.isError, text_of(result)
    assert result.structuredContent is not None
    return result.structuredContent


def failed(result: types.CallToolResult, type_: str) -> str:
    """The message of a failed call, after checking its shape: one line, the error type, the
    same object as structured content."""
    assert result.isError
    assert len(result.content) == 1
    text = text_of(result)
    assert "\n" not in text
    assert result.structuredContent is not None
    err = result.structuredContent["error"]
    assert result.structuredContent["type"] == "error"
    assert err["type"] == type_, text
    assert text == f"{type_}: {err['message']}"
    return str(err["message"])
