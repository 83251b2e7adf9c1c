"""The stdio transport of ``memfs mcp``: the SDK's own stdio server
(:func:`mcp.server.stdio.stdio_server`) under trio, with the three things a client that
spawns us (Claude Desktop, Claude Code) relies on.

- **Stdout is the protocol's alone.** The protocol gets a copy of file descriptor 1, and
  descriptor 1 (and ``sys.stdout``) then points at stderr: a stray ``print`` anywhere in
  memfs, or in a library, lands in the client's log instead of breaking its JSON-RPC stream.
- **It ends when the client goes.** The SDK's server returns when stdin closes. A client
  waits two seconds for that, then sends SIGTERM (``mcp.client.stdio``): SIGTERM, SIGINT and
  SIGHUP end the server too, at once, and the caller's clean-up runs (``memfs mcp``
  terminates its session).
- **Everything can be cancelled.** The SDK reads stdin through ``anyio.wrap_file``, whose
  reads in a worker thread cannot be cancelled: a signal would wait for the client's next
  line. Here each line is read (and each answer written) in a worker thread that a
  cancellation abandons, and the process then ends without waiting for it.

The SDK is anyio; under trio its task groups are trio nurseries, and the worker threads
trio's: :func:`run` is ``trio.run`` of :func:`serve`, as every other memfs server is.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from typing import IO, Any, cast

import anyio
import trio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

log = logging.getLogger("memfs.mcp")

#: The signals that end the server as stdin's end does.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _Lines:
    """stdin as the SDK's server reads it (``async for line``), a line at a time in a worker
    thread that a cancellation abandons."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await anyio.to_thread.run_sync(self._raw.readline, abandon_on_cancel=True)
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Out:
    """The protocol's stdout as the SDK's server writes it (``write``, ``flush``): a client
    that stops reading blocks a worker thread, never a signal."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw

    async def write(self, text: str) -> None:
        await anyio.to_thread.run_sync(self._raw.write, text.encode(), abandon_on_cancel=True)

    async def flush(self) -> None:
        await anyio.to_thread.run_sync(self._raw.flush, abandon_on_cancel=True)


def protocol_stdio() -> tuple[IO[bytes], IO[bytes]]:
    """stdin, and a private copy of stdout for the protocol alone; descriptor 1 and
    ``sys.stdout`` become stderr's (see the module docstring)."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return sys.stdin.buffer, out


async def serve(server: Server[Any, Any], stdin: IO[bytes], stdout: IO[bytes]) -> str:
    """Serve ``server`` over ``stdin``/``stdout`` until stdin closes or a stop signal comes.

    :returns: why it stopped: ``"stdin closed"`` or the signal's name.
    """
    stopped = "stdin closed"
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:

            async def on_signal() -> None:
                nonlocal stopped
                async for signum in signals:
                    stopped = signal.Signals(signum).name
                    nursery.cancel_scope.cancel()
                    return

            nursery.start_soon(on_signal)
            async with stdio_server(cast(Any, _Lines(stdin)), cast(Any, _Out(stdout))) as (
                    read, write):
                await server.run(read, write, server.create_initialization_options())
            nursery.cancel_scope.cancel()
    return stopped


def run(server: Server[Any, Any]) -> str:
    """Serve ``server`` on this process's stdin and stdout (:func:`protocol_stdio`,
    :func:`serve`) under trio; returns why it stopped."""
    stdin, stdout = protocol_stdio()
    stopped = trio.run(serve, server, stdin, stdout)
    log.info("MCP client gone (%s)", stopped)
    return stopped
