"""A real ``memfs serve`` in a subprocess, on a free loopback port: :func:`start_server`
waits for its address line, :func:`stop_server` stops it with SIGTERM and returns its exit
status."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic

from tests.support import wait_until

#: The API key the integration tests' servers are started with.
KEY = "sk-memfs-integration"


#: The clients :func:`sdk` made for the running test: tests/conftest.py closes them after it. A
#: client left to the garbage collector closes its sockets during some later test, which then
#: fails on their ResourceWarning.
made_clients: list[anthropic.Anthropic] = []


def sdk(url: str, key: str = KEY, **kw: Any) -> anthropic.Anthropic:
    """The official SDK on ``url`` (``max_retries=0`` unless given), closed after the test:
    for a test or a function-scoped fixture only (a wider fixture uses a ``with``)."""
    kw.setdefault("max_retries", 0)
    client = anthropic.Anthropic(base_url=url, api_key=key, **kw)
    made_clients.append(client)
    return client


class Server:
    def __init__(self, proc: subprocess.Popen[bytes], url: str, stderr: Path) -> None:
        self.proc, self.url, self.stderr = proc, url, stderr


def start_server(tmp: Path, *args: str, env: dict[str, str] | None = None,
                 preexec_fn: Callable[[], None] | None = None, db: str | None = None) -> Server:
    """Start ``memfs serve --port 0`` and wait (with a deadline) for its address line.
    ``db``: the ``--db`` (default: memfs.db in ``tmp``; "": none, MEMFS_DB names it)."""
    stderr = tmp / "serve.err"
    db_args = [] if db == "" else ["--db", db or str(tmp / "memfs.db")]
    with stderr.open("wb") as err:  # the server writes to its own copy; ours is closed
        proc = subprocess.Popen(
            [sys.executable, "-m", "memfs", *db_args, "serve", "--port", "0",
             *args],
            stdout=subprocess.DEVNULL, stderr=err,
            env={**os.environ, **(env or {})}, preexec_fn=preexec_fn,
        )

    def address() -> str | None:
        m = re.search(r"serving (http://\S+)", stderr.read_text())
        if m:
            return m.group(1)
        if proc.poll() is not None:
            raise AssertionError(f"memfs serve exited {proc.returncode}: {stderr.read_text()}")
        return None

    try:
        url = wait_until(address, 20, interval=0.05)
    except TimeoutError:
        proc.kill()
        raise AssertionError(f"memfs serve did not start: {stderr.read_text()}") from None
    return Server(proc, url, stderr)


def stop_server(server: Server) -> int:
    server.proc.send_signal(signal.SIGTERM)
    try:
        return server.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()
        raise AssertionError("memfs serve ignored SIGTERM") from None
