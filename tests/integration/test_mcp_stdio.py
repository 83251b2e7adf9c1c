"""``memfs mcp`` over stdio, through the real command, driven by the official MCP client
(``mcp.client.stdio.stdio_client`` + ``ClientSession``): the session it makes (attributed,
with its tool events, terminated when the client goes or on SIGTERM), a read_only
attachment, a spec file, the local user without attachments, a session token against a real
``memfs serve`` and inside a real ``memfs run`` (a local session's API), a session on a
server with a key, stdout the protocol's alone, and bad options (one line, never a
traceback)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, JSONRPCMessage

from memfs.cli import cli
from memfs.client import Client
from memfs.models import Actor
from memfs.rules import local_user_actor
from memfs.store import Store
from tests.support import async_wait_until
from tests.support.cli import assert_error
from tests.support.mount import require_fuse
from tests.support.server import KEY, start_server, stop_server
from tests.support.session import memfs_run


@pytest.fixture
def db(tmp_path: Path) -> Path:
    with Store(tmp_path / "memfs.db") as s:
        s.stores.create("notes")
        s.stores.create("docs")
    return tmp_path / "memfs.db"


def _env(**extra: str) -> dict[str, str]:
    """What the client passes the server (it passes nothing else of ours): never a
    MEMFS_* of the test's own environment."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
    return {**keep, "MEMFS_EMBEDDINGS": "none", **extra}


@asynccontextmanager
async def connect(tmp_path: Path, *args: str, env: dict[str, str] | None = None
                  ) -> AsyncIterator[ClientSession]:
    """``python -m memfs ARGS`` as an MCP client's config starts it, initialized; its
    stderr in ``tmp_path/mcp.err``."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "memfs", *args],
                                   env=env or _env(), cwd=str(tmp_path))
    with (tmp_path / "mcp.err").open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session


def _text(result: CallToolResult) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def _one_session(s: Store) -> Any:
    sessions = s.sessions.list().data
    assert len(sessions) == 1, sessions
    return sessions[0]


def _tool_events(s: Store, session_id: str) -> list[Any]:
    return [e for e in s.events.list(session_id, limit=100).data
            if e.type in ("agent.tool_use", "agent.tool_result")]


async def test_a_session_made_attributed_with_tool_events_and_terminated(
        db: Path, tmp_path: Path) -> None:
    async with connect(tmp_path, "--db", str(db), "mcp", "--store", "notes",
                       "--store", "docs:read_only") as client:
        with Store(db) as s:
            session = _one_session(s)
            assert session.status == "running"
            attached = {r.name: r.access for r in session.resources}
            assert attached == {"notes": "read_write", "docs": "read_only"}
        wrote = await client.call_tool("memory_write", {"store": "notes", "path": "/a.md",
                                                         "content": "hello\n"})
        assert not wrote.isError, _text(wrote)
        refused = await client.call_tool("memory_write", {"store": "docs", "path": "/b.md",
                                                           "content": "no\n"})
        assert refused.isError
        assert _text(refused).startswith("permission_error: "), _text(refused)
        with Store(db) as s:
            notes = s.stores.resolve("notes").id
            versions = s.versions.list(notes).data
            assert [v.created_by for v in versions] == [Actor.session(session.id)]
            pairs = _tool_events(s, session.id)
            assert [e.type for e in pairs] == ["agent.tool_use", "agent.tool_result"] * 2
            assert pairs[0].body["name"] == "memory_write"
            assert s.memories.list(s.stores.resolve("docs").id).data == []
    with Store(db) as s:
        assert _one_session(s).status == "terminated"  # the client closed stdin
    err = (tmp_path / "mcp.err").read_text()
    assert "Traceback" not in err and f"session {session.id} terminated" in err
    reverted = CliRunner().invoke(cli, ["--db", str(db), "session", "revert", session.id])
    assert reverted.exit_code == 0, reverted.output  # undone as a mount's session is
    with Store(db) as s:
        assert s.memories.list(s.stores.resolve("notes").id).data == []


async def test_tools_filtered_and_no_write_tool_when_nothing_is_writable(
        db: Path, tmp_path: Path) -> None:
    async with connect(tmp_path, "--db", str(db), "mcp", "--store", "docs:read_only",
                       "--tools", "memory_read,memory_write,memory_list") as client:
        names = sorted(t.name for t in (await client.list_tools()).tools)
    assert names == ["memory_list", "memory_read"]


async def test_a_spec_file_makes_the_session(db: Path, tmp_path: Path) -> None:
    spec = tmp_path / "session.yaml"
    spec.write_text("title: Desktop chat\nmetadata: {client: claude-desktop}\nresources:\n"
                    "  - {type: memory_store, memory_store: docs, access: read_only,\n"
                    "     instructions: Look here first.}\n")
    async with connect(tmp_path, "--db", str(db), "mcp", "--spec", str(spec)) as client:
        listed = await client.call_tool("memory_list_stores", {})
        assert "docs" in _text(listed) and "notes" not in _text(listed)
    with Store(db) as s:
        session = _one_session(s)
        assert (session.title, session.metadata) == ("Desktop chat", {"client": "claude-desktop"})
        [res] = session.resources
        assert (res.name, res.access, res.instructions) == ("docs", "read_only",
                                                             "Look here first.")
        assert session.status == "terminated"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_ends_the_server_and_terminates_its_session(
        db: Path, tmp_path: Path, signum: signal.Signals) -> None:
    async with connect(tmp_path, "-v", "--db", str(db), "mcp", "--store", "notes"):
        with Store(db) as s:
            [(session_id, launcher)] = s.sessions.launched()  # memfs mcp is its launcher
        os.kill(launcher["pid"], signum)  # while the client is still connected

        def terminated() -> bool:
            with Store(db) as s:
                return s.sessions.get(session_id).status == "terminated"

        await async_wait_until(terminated, 30)
    err = (tmp_path / "mcp.err").read_text()
    assert f"MCP client gone ({signum.name})" in err and "Traceback" not in err


async def test_without_attachments_the_local_user_on_every_store(
        db: Path, tmp_path: Path) -> None:
    async with connect(tmp_path, "--db", str(db), "mcp") as client:
        listed = await client.call_tool("memory_list_stores", {})
        assert not listed.isError and "notes" in _text(listed) and "docs" in _text(listed)
        wrote = await client.call_tool("memory_write", {"store": "docs", "path": "/c.md",
                                                         "content": "mine\n"})
        assert not wrote.isError, _text(wrote)
    with Store(db) as s:
        assert s.sessions.list().data == []  # no session made
        [version] = s.versions.list(s.stores.resolve("docs").id).data
        assert version.created_by == local_user_actor()


async def test_inside_a_session_its_token_against_a_real_server(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--api-key", KEY, env={"MEMFS_EMBEDDINGS": "none"})
    try:
        with Client(server.url, KEY) as admin:
            notes = admin.stores.create("notes").id
            admin.stores.create("elsewhere")
            session = admin.sessions.create(
                [{"type": "memory_store", "memory_store_id": notes}])
            admin.sessions.set_status(session.id, "running")
            token = admin.sessions.create_token(session.id).token
        env = _env(MEMFS_URL=server.url, MEMFS_API_KEY=token, MEMFS_SESSION_ID=session.id)
        async with connect(tmp_path, "mcp", env=env) as client:
            listed = await client.call_tool("memory_list_stores", {})
            assert "notes" in _text(listed) and "elsewhere" not in _text(listed)
            wrote = await client.call_tool("memory_write", {"store": "notes", "path": "/t.md",
                                                             "content": "from the agent\n"})
            assert not wrote.isError, _text(wrote)
        with Client(server.url, KEY) as admin:
            assert [x.id for x in admin.sessions.list().data] == [session.id]  # no new one
            [version] = admin.versions.list(notes).data
            assert version.created_by == Actor.session(session.id)
            kinds = [e.type for e in admin.events.list(session.id, limit=100).data]
            assert kinds.count("agent.tool_use") == kinds.count("agent.tool_result") == 2
            assert admin.sessions.get(session.id).status == "running"  # not ours to end
    finally:
        stop_server(server)


async def test_a_session_on_a_server_with_a_key(tmp_path: Path) -> None:
    """--url and a key: the session is the server's, its writes attributed to it, and it is
    terminated when the client goes; without --store the key's own writes, no session."""
    server = start_server(tmp_path, "--api-key", KEY, env={"MEMFS_EMBEDDINGS": "none"})
    try:
        with Client(server.url, KEY) as admin:
            notes = admin.stores.create("notes").id
        env = _env(MEMFS_URL=server.url, MEMFS_API_KEY=KEY)
        async with connect(tmp_path, "mcp", "--store", "notes", env=env) as client:
            wrote = await client.call_tool("memory_write", {"store": "notes", "path": "/k.md",
                                                             "content": "via a key\n"})
            assert not wrote.isError, _text(wrote)
        with Client(server.url, KEY) as admin:
            [session] = admin.sessions.list().data
            assert session.status == "terminated"
            [version] = admin.versions.list(notes).data
            assert version.created_by == Actor.session(session.id)
            kinds = [e.type for e in admin.events.list(session.id, limit=100).data]
            assert kinds.count("agent.tool_use") == kinds.count("agent.tool_result") == 1
        async with connect(tmp_path, "mcp", env=env) as client:  # no --store: the key itself
            wrote = await client.call_tool("memory_write", {"store": "notes", "path": "/n.md",
                                                             "content": "no session\n"})
            assert not wrote.isError, _text(wrote)
        with Client(server.url, KEY) as admin:
            assert len(admin.sessions.list().data) == 1  # none made
            latest = admin.versions.list(notes).data[0]
            assert latest.path == "/n.md" and latest.created_by is not None
            assert latest.created_by.type == "api_actor"
    finally:
        stop_server(server)


#: The agent of a ``memfs run`` session that starts ``memfs mcp`` as a client's config would,
#: with the session's variables, and prints what its tools answered.
AGENT = """
import os, sys
import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

async def main():
    env = {k: os.environ[k] for k in ("MEMFS_URL", "MEMFS_API_KEY", "MEMFS_SESSION_ID")}
    server = StdioServerParameters(command=sys.executable, args=["-m", "memfs", "mcp"],
                                   env=env)
    async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        for name, args in [("memory_list_stores", {}),
                           ("memory_write", {"store": "notes", "path": "/agent.md",
                                             "content": "hi\\n"})]:
            result = await client.call_tool(name, args)
            print(name, result.isError, result.content[0].text.splitlines()[0])

anyio.run(main)
"""


def test_inside_memfs_run_on_a_local_database(db: Path) -> None:
    """The session token of a local session (its API on a unix socket): the session's
    stores, attributed to it, its events; the launcher ends the session, not memfs mcp."""
    require_fuse()
    done = memfs_run(db, "--isolation", "none", "--store", "notes", "--",
                     sys.executable, "-c", AGENT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("memory_list_stores False notes") and "docs" not in lines[0]
    assert lines[1].startswith("memory_write False created /agent.md"), lines
    with Store(db) as s:
        session = _one_session(s)  # the launcher's: memfs mcp made none
        [version] = s.versions.list(s.stores.resolve("notes").id).data
        assert version.created_by == Actor.session(session.id)
        assert len(_tool_events(s, session.id)) == 4


def test_stdout_is_the_protocol_alone_and_stdin_closed_ends_the_session(db: Path) -> None:
    """Every line on stdout is a JSON-RPC message, the logs on stderr; the end of stdin
    ends the server and terminates its session."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}
    lines = [init, {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    with subprocess.Popen(
            [sys.executable, "-m", "memfs", "-v", "--db", str(db), "mcp", "--store", "notes"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=_env()) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        try:
            proc.stdin.write("".join(json.dumps(m) + "\n" for m in lines).encode())
            proc.stdin.flush()
            answers = [proc.stdout.readline(), proc.stdout.readline()]  # initialize, tools/list
            proc.stdin.close()  # the client goes
            proc.wait(timeout=60)  # what it writes after this fits in the pipes
            rest, err_bytes = proc.stdout.read(), proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0 and rest == b"", rest
    ids = [JSONRPCMessage.model_validate_json(a).root.id for a in answers]  # type: ignore
    assert ids == [1, 2]
    err = err_bytes.decode()
    assert "serving MCP" in err and "MCP client gone (stdin closed)" in err, err
    assert "Traceback" not in err
    with Store(db) as s:
        assert _one_session(s).status == "terminated"


@pytest.mark.parametrize(("args", "code", "fragment"), [
    (["--bogus"], 2, "--bogus"),
    (["--tools", "memory_read,nope"], 2, "no tool named nope"),
    (["--store", "notes", "--spec", "s.yaml"], 2, "not both"),
    (["--instructions", "notes=hi"], 2, "give --store too"),
    (["--instructions", "nothing", "--store", "notes"], 2, "REF=TEXT"),
    (["--store", "missing"], 3, "missing"),
    (["--store", "notes@2020-01-01T00:00:00Z"], 2, "as they are now"),
])
def test_bad_options_are_one_line(db: Path, args: list[str], code: int, fragment: str) -> None:
    result = CliRunner().invoke(cli, ["--db", str(db), "mcp", *args])
    assert_error(result, code, fragment)
    with Store(db) as s:
        assert s.sessions.list().data == []


def test_a_session_token_needs_its_session_id(db: Path) -> None:
    result = CliRunner().invoke(cli, ["--url", "http://127.0.0.1:9", "mcp"],
                                env={"MEMFS_API_KEY": "memfs_session_x", "MEMFS_SESSION_ID": ""})
    assert_error(result, 2, "MEMFS_SESSION_ID")
    result = CliRunner().invoke(cli, ["--url", "http://127.0.0.1:9", "mcp", "--store", "x"],
                                env={"MEMFS_API_KEY": "memfs_session_x"})
    assert_error(result, 2, "drop --store")


def test_what_cannot_be_reached_is_one_line_at_start(tmp_path: Path) -> None:
    """A missing database, or a server that does not answer: said before serving a client
    whose every call would fail."""
    missing = CliRunner().invoke(cli, ["--db", str(tmp_path / "none.db"), "mcp"])
    assert_error(missing, 8, "no database")
    gone = CliRunner().invoke(cli, ["--url", "http://127.0.0.1:9", "--api-key", "k", "mcp"])
    assert_error(gone, 1, "cannot reach")
