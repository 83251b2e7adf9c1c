"""``/mcp`` on a real ``memfs serve`` (issue 42), with the official client
(``mcp.client.streamable_http.streamable_http_client`` and ``mcp.ClientSession``), on SQLite and
PostgreSQL: every tool × every kind of credential (:data:`EXPECTED`), a session bound to its
credential, a key revoked mid-stream, a subscription that fires on a write made through a
mount, and hostile clients (no 5xx, the server serving others meanwhile)."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import mcp.types as types
import pytest
import trio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from pydantic import AnyUrl

from memfs.mcp.tools import NAMES, WRITE_TOOLS
from memfs.models import DEFAULT_WORKSPACE, Actor
from memfs.store import Limits, Store
from tests.support import async_wait_until
from tests.support.mcp import calls, check_success, ok, seed
from tests.support.mount import Mount, require_fuse
from tests.support.remote import remote_env
from tests.support.server import Server, start_server, stop_server

KEY = "sk-memfs-mcp-http-0123456789"
OTHER_WORKSPACE = "team-b"
#: The protocol version the raw requests say they speak.
PROTOCOL = "2025-06-18"
ACCEPT = "application/json, text/event-stream"
USER = Actor.user("user_mcp_test")

#: The official client leaves the SSE readers of its streams to the garbage collector when a
#: session closes (httpx-sse's ``aiter_sse`` and httpx's byte streams, iterated without
#: ``aclosing``), which trio's finalizer says with a ResourceWarning: the client's, not ours.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Async generator '(httpx|httpcore|httpx_sse)\\.[^']*' was garbage collected"
    ":ResourceWarning")


@dataclass
class World:
    """A server and its database: workspace A's stores (``rw``: a credential's read_write
    store, ``ro``: a store a session has read_only) with a memory each, workspace B's store,
    and a secret of each kind of credential (:attr:`creds`)."""

    server: Server
    db: Store
    rw: str = ""
    ro: str = ""
    b_store: str = ""
    session: str = ""
    creds: dict[str, str] = field(default_factory=dict)
    key_ids: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.server.url + "/mcp"

    def key(self, name: str, role: str = "read_write", stores: list[str] | None = None,
            workspace: str = DEFAULT_WORKSPACE) -> str:
        made = self.db.keys.create(name, workspace=workspace, role=role, store_ids=stores)
        self.creds[name], self.key_ids[name] = made.key, made.id
        return made.key


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("mcp")
    dropped = None
    if request.param == "postgresql":
        cluster = request.getfixturevalue("pg_cluster")
        name = cluster.new_database(cluster.template)
        db, dropped = cluster.url(name), (cluster, name)
    else:
        db = str(tmp / "memfs.db")
    server = start_server(tmp, "--api-key", KEY, db=db, env={"MEMFS_EMBEDDINGS": "none"})
    store = Store(db, limits=Limits())
    try:
        w = World(server, store)
        w.rw = store.stores.create("notes", "the team's notes").id
        w.ro = store.stores.create("handbook", "read it").id
        for sid in (w.rw, w.ro):
            store.memories.create(sid, "/readme.md", "line one\nline two\n", actor=USER)
        w.b_store = store.stores.create("b notes", workspace=OTHER_WORKSPACE).id
        session = store.sessions.create([
            {"type": "memory_store", "memory_store_id": w.rw},
            {"type": "memory_store", "memory_store_id": w.ro, "access": "read_only"},
        ])
        store.sessions.set_status(session.id, "running")
        w.session = session.id
        w.creds["session_token"] = store.sessions.create_token(session.id).token
        w.key("read_write")
        w.key("read_only", role="read_only")
        w.key("store_scoped", stores=[w.rw])
        w.key("other_workspace", role="admin", workspace=OTHER_WORKSPACE)
        yield w
    finally:
        store.close()
        code = stop_server(server)
        log = server.stderr.read_text()
        if dropped is not None:
            dropped[0].drop_database(dropped[1])
        assert code == 0, log[-4000:]
        assert "Traceback" not in log, log[-4000:]
        assert "error:" not in log, log[-4000:]


@asynccontextmanager
async def connect(w: World, secret: str, handler: Any = None) -> AsyncIterator[ClientSession]:
    """An initialized MCP session of the official client, with ``secret`` as its bearer
    (``streamable_http_client``: ``streamablehttp_client``'s name since SDK 1.2x, which warns
    that it is deprecated)."""
    http = create_mcp_http_client(headers={"authorization": f"Bearer {secret}"})
    async with http, streamable_http_client(w.url, http_client=http) as (read, write, _), \
            ClientSession(read, write, message_handler=handler) as session:
        await session.initialize()
        yield session


class Raw:
    """JSON-RPC by hand (what the official client will not send): an initialized session
    of ``secret``, its id in :attr:`session_id`."""

    def __init__(self, http: httpx.AsyncClient, url: str, secret: str) -> None:
        self.http, self.url, self.secret = http, url, secret
        self.session_id: str | None = None
        self.n = 0

    def headers(self, **more: str) -> dict[str, str]:
        h = {"authorization": f"Bearer {self.secret}", "accept": ACCEPT,
             "content-type": "application/json", "mcp-protocol-version": PROTOCOL}
        if self.session_id:
            h["mcp-session-id"] = self.session_id
        return {**h, **more}

    async def open(self) -> Raw:
        r = await self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}})
        assert r.status_code == 200, r.text
        self.session_id = r.headers["mcp-session-id"]
        r = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert r.status_code == 202, r.text
        return self

    async def post(self, message: Any, **headers: str) -> httpx.Response:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        return await self.http.post(self.url, content=body, headers=self.headers(**headers))

    async def call(self, method: str, params: dict[str, Any]) -> tuple[int, Any]:
        """``(status, the JSON-RPC answer)`` of one request."""
        self.n += 1
        r = await self.post({"jsonrpc": "2.0", "id": self.n, "method": method,
                             "params": params})
        return r.status_code, answer_of(r)


def answer_of(r: httpx.Response) -> Any:
    """The JSON-RPC message of a response: its JSON body, or its SSE stream's last data."""
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
        return json.loads(data[-1]) if data else None
    return r.json() if r.content else None


# -- authentication and sessions -------------------------------------------------------------


async def test_no_key_or_a_wrong_one_is_the_apis_401(world: World) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        for secret in ("", "memfs_key_not-a-key"):
            raw = Raw(http, world.url, secret)
            r = await raw.post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                "params": {}}, authorization=f"Bearer {secret}" if secret
                               else "")
            assert r.status_code == 401, r.text
            assert r.json()["error"]["type"] == "authentication_error"
            assert r.headers["request-id"].startswith("req_")


async def test_a_session_answers_only_the_credential_that_opened_it(world: World) -> None:
    """Another credential (another key; the same server key in another workspace) using a
    session's id gets the 404 of an unknown session; its own gets its answer."""
    async with httpx.AsyncClient(timeout=30) as http:
        mine = await Raw(http, world.url, world.creds["read_write"]).open()
        status, answer = await mine.call("tools/list", {})
        assert status == 200 and answer["result"]["tools"], answer
        for secret in (world.creds["read_only"], KEY):
            thief = Raw(http, world.url, secret)
            thief.session_id = mine.session_id
            r = await thief.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert r.status_code == 404, r.text
        # A stored key acts in its own workspace only: naming another is the API's 403.
        r = await mine.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                            **{"anthropic-workspace-id": OTHER_WORKSPACE})
        assert r.status_code == 403 and r.json()["error"]["type"] == "permission_error"
        server_session = await Raw(http, world.url, KEY).open()
        other = Raw(http, world.url, KEY)
        other.session_id = server_session.session_id
        r = await other.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                             **{"anthropic-workspace-id": OTHER_WORKSPACE})
        assert r.status_code == 404, r.text


async def test_a_credential_has_a_bounded_number_of_live_sessions(world: World) -> None:
    from memfs.mcp.http import MAX_SESSIONS_PER_CREDENTIAL

    secret = world.key("many sessions")
    async with httpx.AsyncClient(timeout=30) as http:
        opened = [await Raw(http, world.url, secret).open()
                  for _ in range(MAX_SESSIONS_PER_CREDENTIAL)]
        r = await Raw(http, world.url, secret).post(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL, "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}})
        assert r.status_code == 429, r.text
        assert r.json()["error"]["type"] == "rate_limit_error"
        # Another credential is not held up; an ended session frees its place.
        async with connect(world, world.creds["read_write"]) as s:
            assert (await s.list_tools()).tools
        ended = await http.delete(world.url, headers=opened[0].headers())
        assert ended.status_code == 200, ended.text
        await Raw(http, world.url, secret).open()



async def test_a_sessions_instructions_are_its_credentials_stores(world: World) -> None:
    """The instructions sent at initialize name the stores of the credential that opened the
    session (its session's two attachments, with their access), not a generic text."""
    http = create_mcp_http_client(
        headers={"authorization": f"Bearer {world.creds['session_token']}"})
    async with http, streamable_http_client(world.url, http_client=http) as (read, write, _), \
            ClientSession(read, write) as session:
        init = await session.initialize()
    text = init.instructions or ""
    assert f"- Store: {world.rw}" in text and f"- Store: {world.ro}" in text, text
    assert "## handbook" in text and "## notes" in text, text

# -- revocation ------------------------------------------------------------------------------


@pytest.mark.parametrize("credential", ["key", "session_token"])
async def test_a_credential_revoked_mid_stream_ends_its_stream_and_its_next_call_is_401(
        world: World, credential: str) -> None:
    """A stored key's (or a session token's) MCP session with its GET stream open (raw), and
    a session of the official client: the key revoked (the token's session terminated), the
    stream ends cleanly, the official client's next call fails with 401, and the old
    session's id answers the gate's 401 too."""
    if credential == "key":
        secret = world.key("revoked mid-stream")

        def refuse() -> None:
            world.db.keys.revoke(world.key_ids["revoked mid-stream"])
    else:
        session = world.db.sessions.create([{"type": "memory_store",
                                             "memory_store_id": world.rw}]).id
        world.db.sessions.set_status(session, "running")
        secret = world.db.sessions.create_token(session).token or ""

        def refuse() -> None:
            world.db.sessions.set_status(session, "terminated")
    ended = trio.Event()
    async with httpx.AsyncClient(timeout=httpx.Timeout(30, read=60)) as http, \
            trio.open_nursery() as nursery:
        raw = await Raw(http, world.url, secret).open()
        opened = trio.Event()

        async def follow() -> None:
            async with http.stream("GET", world.url, headers=raw.headers()) as r:
                assert r.status_code == 200
                opened.set()
                async for _ in r.aiter_lines():
                    pass
            ended.set()

        nursery.start_soon(follow)
        with trio.fail_after(30):
            await opened.wait()
        with pytest.raises(BaseException) as failed:  # noqa: PT011 (the group is looked in)
            async with connect(world, secret) as s:
                assert (await s.call_tool("memory_list_stores", {})).isError is False
                refuse()
                with trio.fail_after(30):
                    await ended.wait()
                await s.call_tool("memory_list_stores", {})
        assert _status_in(failed.value) == 401, failed.value
        r = await raw.post({"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
        assert r.status_code == 401, r.text
        assert r.json()["error"]["type"] == "authentication_error", r.text


def _status_in(exc: BaseException) -> int | None:
    """The HTTP status of the ``httpx.HTTPStatusError`` in ``exc`` (or its groups)."""
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code
    for inner in getattr(exc, "exceptions", ()):
        found = _status_in(inner)
        if found is not None:
            return found
    return _status_in(exc.__cause__) if exc.__cause__ is not None else None


# -- every tool × every kind of credential ---------------------------------------------------

#: The credentials of the matrix (:class:`World`'s ``creds``).
CREDENTIALS = ("session_token", "read_write", "read_only", "store_scoped", "other_workspace")
OK, DENIED, NOT_FOUND = "ok", "permission_error", "not_found_error"
#: What a credential gets from a tool on each of workspace A's stores: ``rw`` (its session's
#: read_write attachment, the scoped key's store) and ``ro`` (its session's read_only
#: attachment, outside the scoped key): (reads, writes) on each. Written from the issue's
#: rules (SPEC §10, issue 22's grants), not read from the code.
EXPECTED: dict[str, dict[str, tuple[str, str]]] = {
    #                  reads on rw, writes on rw    reads on ro, writes on ro
    "session_token":   {"rw": (OK, OK),              "ro": (OK, DENIED)},
    "read_write":      {"rw": (OK, OK),              "ro": (OK, OK)},
    "read_only":       {"rw": (OK, DENIED),          "ro": (OK, DENIED)},
    "store_scoped":    {"rw": (OK, OK),              "ro": (NOT_FOUND, NOT_FOUND)},
    "other_workspace": {"rw": (NOT_FOUND, NOT_FOUND), "ro": (NOT_FOUND, NOT_FOUND)},
}


def _arguments(w: World, tool: str, store_id: str, tag: str) -> dict[str, Any]:
    """A call of ``tool`` on ``store_id`` that succeeds for a credential that may make it
    (what it acts on made first, through the database, under names of its own: ``tag``)."""
    def made(path: str, content: str = "alpha\n") -> Any:
        return w.db.memories.create(store_id, path, content, actor=USER)

    if tool == "memory_list_stores":
        return {}
    if tool in ("memory_list", "memory_describe", "memory_pinned"):
        return {"store": store_id}
    if tool in ("memory_read", "memory_history"):
        return {"store": store_id, "path": "/readme.md"}
    if tool == "memory_search":
        return {"store": store_id, "query": "line"}
    if tool == "memory_write":
        return {"store": store_id, "path": f"/w-{tag}.md", "content": "written\n"}
    if tool == "memory_edit":
        made(f"/e-{tag}.md")
        return {"store": store_id, "path": f"/e-{tag}.md", "mode": "str_replace",
                "old_str": "alpha", "new_str": "beta"}
    if tool == "memory_move":
        made(f"/m-{tag}.md")
        return {"store": store_id, "path": f"/m-{tag}.md", "new_path": f"/moved-{tag}.md"}
    if tool == "memory_delete":
        made(f"/d-{tag}.md")
        return {"store": store_id, "path": f"/d-{tag}.md"}
    if tool == "memory_restore":
        first = made(f"/r-{tag}.md")
        w.db.memories.update(store_id, first.id, content="second\n", actor=USER)
        return {"store": store_id, "version_id": first.memory_version_id}
    if tool == "memory_add":
        return {"store": store_id, "type": "knowledge", "text": f"a fact {tag}",
                "name": f"fact-{tag}"}
    raise AssertionError(f"no arguments for {tool}")


def _outcome(result: Any) -> str:
    if not result.isError:
        return OK
    assert result.structuredContent["type"] == "error", result
    return str(result.structuredContent["error"]["type"])


@pytest.mark.parametrize("credential", CREDENTIALS)
@pytest.mark.parametrize("tool", NAMES)
async def test_every_tool_with_every_credential(world: World, tool: str,
                                                credential: str) -> None:
    """Each tool, called over HTTP with each kind of credential, on a store the credential
    may write (if any), and on one it may only read or not see: :data:`EXPECTED`. A store it
    does not see is the not-found of an unknown one; memory_list_stores lists what it sees."""
    tag = f"{tool}-{credential}"
    async with connect(world, world.creds[credential]) as s:
        offered = {t.name for t in (await s.list_tools()).tools}
        for where, store_id in (("rw", world.rw), ("ro", world.ro)):
            expected = EXPECTED[credential][where][tool in WRITE_TOOLS]
            if tool == "memory_list_stores":
                got = await s.call_tool(tool, {})
                assert _outcome(got) == OK, got
                seen = {x["id"] for x in got.structuredContent["stores"]}
                assert (store_id in seen) == (EXPECTED[credential][where][0] == OK), seen
                continue
            args = _arguments(world, tool, store_id, f"{tag}-{where}")
            got = await s.call_tool(tool, args)
            assert _outcome(got) == expected, (where, args, got)
        # Write tools are offered when anything it sees may be written (another workspace's
        # admin has a store of its own there).
        assert (tool in offered) == (tool not in WRITE_TOOLS or credential != "read_only"), \
            offered


@pytest.mark.parametrize("who", ["key", "session"])
@pytest.mark.parametrize("name", NAMES)
async def test_every_tool_does_over_http_what_it_does_in_process(world: World, name: str,
                                                                  who: str) -> None:
    """The calls and checks of the in-process tests (tests/support/mcp.py) over HTTP, on a
    seeded store of their own (a store-scoped key sees it alone; a session has it alone
    attached): what each success returns and leaves in the store, its versions attributed to
    the key or the session, and a session's tool-event pair of the call."""
    ms, first = seed(world.db)
    if who == "key":
        secret = world.db.keys.create(f"seeded {name}", store_ids=[ms]).key
        session = None
    else:
        session = world.db.sessions.create([{"type": "memory_store",
                                             "memory_store_id": ms}]).id
        world.db.sessions.set_status(session, "running")
        secret = world.db.sessions.create_token(session).token
    assert secret is not None
    before = world.db.versions.list(ms, limit=100).data
    async with connect(world, secret) as s:
        result = await s.call_tool(name, calls(ms, first)[name])
    check_success(world.db, ms, name, ok(result))
    new = world.db.versions.list(ms, limit=100).data[:-len(before)]
    assert bool(new) == (name in WRITE_TOOLS)
    if session is None:
        assert all(v.created_by.type == "api_actor" for v in new), new
        return
    assert all(v.created_by == Actor.session(session) for v in new), new
    evs = [e.body for e in world.db.events.list(session, limit=100).data
           if e.type.startswith("agent.")]
    assert [(e["type"], e.get("name")) for e in evs] == [
        ("agent.tool_use", name), ("agent.tool_result", None)]


async def test_writes_over_http_are_their_credentials(world: World) -> None:
    """A session token's write is its session's (session_actor), a key's is the key's."""
    for credential, actor_type in (("session_token", "session_actor"),
                                   ("read_write", "api_actor")):
        async with connect(world, world.creds[credential]) as s:
            got = await s.call_tool("memory_write", {
                "store": world.rw, "path": f"/by-{credential}.md", "content": "mine\n"})
            assert not got.isError, got
        m = world.db.memories.get_by_path(world.rw, f"/by-{credential}.md")
        version = world.db.versions.get(world.rw, m.memory_version_id)
        assert version.created_by.type == actor_type, version


# -- subscriptions ---------------------------------------------------------------------------


async def test_a_subscription_fires_on_a_write_made_through_a_mount(
        world: World, tmp_path: Path) -> None:
    """A session token's client subscribed to a memory; the memory rewritten through a remote
    mount of the server (another credential, another process): the client gets
    resources/updated for it, and reads the new content."""
    require_fuse()
    world.db.memories.create(world.rw, "/watched.md", "before\n", actor=USER)
    uri = f"memfs://{world.rw}/watched.md"
    updated = trio.Event()
    seen: list[str] = []

    async def handler(message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
                message.root, types.ResourceUpdatedNotification):
            seen.append(str(message.root.params.uri))
            updated.set()

    mount = Mount(tmp_path / "unused.db", world.rw, tmp_path / "mnt", [],
                  remote_env(world.server.url, KEY))
    try:
        await trio.to_thread.run_sync(mount.wait_mounted)
        async with connect(world, world.creds["session_token"], handler) as s:
            await s.subscribe_resource(AnyUrl(uri))
            await trio.to_thread.run_sync((tmp_path / "mnt" / "watched.md").write_text,
                                          "after\n")
            with trio.fail_after(30):
                await updated.wait()
            assert seen[0] == uri, seen
            read = await s.read_resource(AnyUrl(uri))
            assert read.contents[0].text == "after\n", read  # type: ignore[union-attr]
    finally:
        await trio.to_thread.run_sync(mount.stop)


# -- hostile clients -------------------------------------------------------------------------


async def test_hostile_input_gets_a_clear_error_and_no_5xx(world: World) -> None:
    from memfs.api.body import MAX_BODY_BYTES

    async with httpx.AsyncClient(timeout=30) as http:
        raw = await Raw(http, world.url, world.creds["read_write"]).open()
        huge = await raw.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "memory_list_stores", "arguments": {"x": "y" * MAX_BODY_BYTES}}})
        assert huge.status_code == 413, huge.text
        assert huge.json()["error"]["type"] == "invalid_request_error"
        not_json = await raw.post(b"{nope")
        assert not_json.status_code == 400 and answer_of(not_json)["error"]["code"] == -32700
        not_rpc = await raw.post({"jsonrpc": "2.0", "id": 1, "method": 7})
        assert not_rpc.status_code == 400 and "error" in answer_of(not_rpc), not_rpc.text
        status, answer = await raw.call("tools/call", {"name": "memory_nope", "arguments": {}})
        assert status == 200 and answer["result"]["isError"], answer
        for name, arguments in (("memory_read", {"store": 5, "path": ["/"]}),
                                ("memory_write", {"store": world.rw, "path": "/huge.md",
                                                  "content": "y" * (1 << 20)})):
            status, answer = await raw.call("tools/call", {"name": name,
                                                           "arguments": arguments})
            assert status == 200 and answer["result"]["isError"], answer
            error = answer["result"]["structuredContent"]["error"]
            assert error["type"] == "invalid_request_error", error
        # What the SDK logged of a client's messages in full, at ERROR: a response to no
        # request, a request of no method; logged short, as the client's doing.
        log_before = len(world.server.stderr.read_text())
        big = "A" * (1 << 20)
        for message in ({"jsonrpc": "2.0", "id": 77, "result": {"x": big}},
                        {"jsonrpc": "2.0", "id": 78, "method": "nope", "params": {"x": big}},
                        {"jsonrpc": "2.0", "method": "notifications/nope",
                         "params": {"x": big}}):
            r = await raw.post(message)
            assert r.status_code < 500, r.text
        # The session still serves.
        status, answer = await raw.call("tools/list", {})
        assert status == 200 and answer["result"]["tools"]
        logged = world.server.stderr.read_text()[log_before:]
        assert "error:" not in logged, logged[-2000:]
        assert max(map(len, logged.splitlines() or [""])) < 2000, logged[-2000:]


async def test_a_session_ended_while_its_requests_come_in_is_no_error(world: World) -> None:
    """Clients that end their session (DELETE) while a notification and a request of it are
    on their way, again and again: each gets its answer or the 404 of an ended session, and
    the server logs no error (the SDK answered such a notification twice, the second time a
    500 after its 202, which broke the connection and logged three errors)."""
    async with httpx.AsyncClient(timeout=30) as http:
        for _ in range(20):
            raw = await Raw(http, world.url, world.creds["read_write"]).open()
            statuses: list[int] = []

            async def send(message: dict[str, Any], raw: Raw = raw,
                           statuses: list[int] = statuses) -> None:
                statuses.append((await raw.post(message)).status_code)

            async def end(raw: Raw = raw, statuses: list[int] = statuses) -> None:
                statuses.append((await http.delete(world.url, headers=raw.headers()))
                                .status_code)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(send, {"jsonrpc": "2.0", "method":
                                          "notifications/initialized"})
                nursery.start_soon(send, {"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
                nursery.start_soon(end)
            assert set(statuses) <= {200, 202, 404}, statuses
    log = world.server.stderr.read_text()
    assert "error:" not in log, log[-4000:]


async def test_a_session_has_one_get_stream_and_it_ends_with_the_session(world: World
                                                                          ) -> None:
    """Two GETs of one session at once, in 10 sessions at once: one is the session's stream,
    the other the 409 of a JSON-RPC error; once the session is ended (DELETE) its stream
    ends. Both let in, the SDK kept one of them in no table: it never ended, even after its
    session did (7 of 20 such sessions)."""
    statuses: list[int] = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(30, read=None),
                                 limits=httpx.Limits(max_connections=100)) as http:

        async def get(raw: Raw, opened: trio.Event, ended: trio.Event) -> None:
            async with http.stream("GET", world.url,
                                   headers=raw.headers(accept="text/event-stream")) as r:
                statuses.append(r.status_code)
                if r.status_code == 409:
                    body = json.loads(await r.aread())
                    assert body["jsonrpc"] == "2.0" and "error" in body, body
                opened.set()
                async for _ in r.aiter_bytes():
                    pass
            ended.set()

        async def session() -> None:
            raw = await Raw(http, world.url, world.creds["read_only"]).open()
            ends = [trio.Event(), trio.Event()]
            async with trio.open_nursery() as nursery:
                events = [trio.Event(), trio.Event()]
                for opened, ended in zip(events, ends, strict=True):
                    nursery.start_soon(get, raw, opened, ended)
                with trio.fail_after(30):
                    for opened in events:
                        await opened.wait()
                r = await http.delete(world.url, headers=raw.headers())
                assert r.status_code == 200, r.text
                with trio.fail_after(30):  # both GETs end (else the nursery waits forever)
                    for ended in ends:
                        await ended.wait()

        async with trio.open_nursery() as nursery:
            for _ in range(10):
                nursery.start_soon(session)
    assert sorted(statuses) == [200] * 10 + [409] * 10, statuses


async def test_a_client_that_never_reads_stalls_no_one_else(world: World) -> None:
    """A client that sends 100 reads of a 90 kB memory on one connection (20 MB of answers)
    and never reads a byte of them, and holds its GET stream unread: the server's writes to
    it wait (its session's tool events show it stopped before the 100th read), while other
    clients' calls are served meanwhile, and after it has gone."""
    big = "".join(f"{n:04d} " + "x" * 94 + "\n" for n in range(900))
    world.db.memories.create(world.rw, "/big.md", big, actor=USER)
    lazy_session = world.db.sessions.create([{"type": "memory_store",
                                              "memory_store_id": world.rw}]).id
    world.db.sessions.set_status(lazy_session, "running")
    token = world.db.sessions.create_token(lazy_session).token
    assert token is not None
    async with httpx.AsyncClient(timeout=30) as http:
        lazy = await Raw(http, world.url, token).open()
    host, port = world.server.url.removeprefix("http://").rsplit(":", 1)
    read = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "memory_read", "arguments": {"store": world.rw, "path": "/big.md"}}}).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in lazy.headers().items())
    socks = []
    try:
        for method, body, times in (("GET", b"", 1), ("POST", read, 100)):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect((host, int(port)))
            request = (f"{method} /mcp HTTP/1.1\r\nhost: {host}\r\n{head}"
                       f"content-length: {len(body)}\r\n\r\n").encode() + body
            s.sendall(request * times)
            socks.append(s)

        def reads_of_lazy() -> int:
            return sum(e.type == "agent.tool_use"
                       for e in world.db.events.list(lazy_session, limit=1000).data)

        await async_wait_until(reads_of_lazy, 30, what="the lazy client's first read")
        for _ in range(3):
            async with connect(world, world.creds["read_write"]) as session:
                result = await session.call_tool("memory_read", {"store": world.rw,
                                                                 "path": "/big.md"})
                assert not result.isError, result
        assert reads_of_lazy() < 100
    finally:
        for s in socks:
            s.close()
    async with connect(world, world.creds["read_write"]) as session:
        assert not (await session.call_tool("memory_list_stores", {})).isError
