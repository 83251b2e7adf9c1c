"""``/mcp`` of the API app in process (starlette TestClient): what a real server's tests
(tests/integration/test_mcp_http.py) cannot pin down cheaply: a tool call costs its key one
request of its rate however many calls it makes into the API, and the SDK internals
:mod:`memfs.mcp.http` leans on are still there."""

from __future__ import annotations

import inspect
import json
import logging
import os
from typing import Any

import mcp
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.testclient import TestClient

from memfs.api import create_app
from memfs.api.limits import KeyRates
from memfs.mcp import http
from memfs.mcp.http import _Manager, endpoint
from memfs.models import Actor
from memfs.store import Store
from tests.support import wait_until

PROTOCOL = "2025-06-18"
#: Where the SDK's modules are (what it logs, through its loggers or the root logger).
SDK_DIR = os.path.dirname(mcp.__file__)


class Clock:
    """A clock the test moves (none of these requests refills a bucket)."""

    now = 1000.0

    def __call__(self) -> float:
        return self.now


def _post(tc: TestClient, key: str, message: dict[str, Any], session: str | None = None
          ) -> Any:
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json",
               "accept": "application/json, text/event-stream",
               "mcp-protocol-version": PROTOCOL}
    if session:
        headers["mcp-session-id"] = session
    return tc.post("/mcp", content=json.dumps(message), headers=headers)


def _answer(r: Any) -> Any:
    """The JSON-RPC answer: the body (JSON), or an SSE stream's last data."""
    if r.headers["content-type"].startswith("application/json"):
        return r.json()
    data = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    return json.loads(data[-1])


def _initialized(tc: TestClient, key: str) -> str:
    """An initialized session of ``key`` (two requests)."""
    r = _post(tc, key, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}})
    assert r.status_code == 200, r.text
    session: str = r.headers["mcp-session-id"]
    r = _post(tc, key, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    assert r.status_code == 202, r.text
    return session


def _search(tc: TestClient, key: str, session: str) -> Any:
    """memory_search without a store: a search in each store the key sees."""
    r = _post(tc, key, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "memory_search", "arguments": {"query": "x"}}}, session)
    return _answer(r)["result"]


def test_a_tool_call_costs_its_key_each_request_it_makes(store: Store) -> None:
    """A tool call's requests into the API count against its key's rate past the first
    (which the ``/mcp`` request paid): a key of 7 requests (no refill) opens a session (2),
    lists the tools (1, one request of the API), and searches its 3 stores (1, and 3 of the
    4 requests it makes of the API); its next request is the 429 of its rate. Counted once
    per ``/mcp`` request, one request could make hundreds of the API."""
    for n in range(3):
        s = store.stores.create(f"store {n}")
        store.memories.create(s.id, "/a.md", "x", actor=Actor.user("user_t"))
    key = store.keys.create("seven requests").key
    assert key is not None
    rates = KeyRates(rate=1.0, burst=7.0, clock=Clock())
    with TestClient(create_app(store, [], console=False, dreams=False, rates=rates,
                               mcp=endpoint)) as tc:
        session = _initialized(tc, key)
        r = _post(tc, key, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session)
        assert r.status_code == 200, r.text
        result = _search(tc, key, session)
        assert not result["isError"], result
        r = _post(tc, key, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, session)
        assert r.status_code == 429, r.text


def test_a_tool_call_makes_a_bounded_number_of_requests(store: Store, monkeypatch: Any
                                                        ) -> None:
    """Past :data:`INNER_CALLS_PER_REQUEST` requests into the API (3 here), a tool call's
    next is refused: its result is the rate_limit_error, whatever the key's rate (the
    server key has none)."""
    monkeypatch.setattr(http, "INNER_CALLS_PER_REQUEST", 3)
    for n in range(5):
        store.stores.create(f"store {n}")
    key = "sk-memfs-server-key-0123456789"
    with TestClient(create_app(store, [key], console=False, dreams=False,
                               mcp=endpoint)) as tc:
        result = _search(tc, key, _initialized(tc, key))
        assert result["isError"], result
        assert result["structuredContent"]["error"]["type"] == "rate_limit_error", result


def test_the_sdk_internals_the_endpoint_uses_are_there() -> None:
    """:class:`memfs.mcp.http._Manager` reads the SDK manager's tables of sessions and
    overrides its admission (the SDK is pinned): an upgrade that renames them fails here."""
    manager = _Manager(Server("t"))
    assert manager._server_instances == {} and manager._session_owners == {}
    admit = inspect.signature(StreamableHTTPSessionManager._admit_session)
    assert list(admit.parameters) == ["self", "requestor"]
    discard = inspect.signature(StreamableHTTPSessionManager._discard_session)
    assert list(discard.parameters) == ["self", "session_id", "transport"]
    assert isinstance(StreamableHTTPServerTransport.is_terminated, property)
    transport = StreamableHTTPServerTransport(None, idle_timeout=1.0)
    assert transport._requests_in_flight == 0 and transport.idle_scope is None
    source = inspect.getsource(StreamableHTTPSessionManager._handle_stateful_request)
    assert "self._admit_session(requestor)" in source
    assert "requestor != self._session_owners.get(request_mcp_session_id)" in source


def _open(tc: TestClient, key: str) -> Any:
    return _post(tc, key, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}})


def test_the_server_holds_a_bounded_number_of_sessions(store: Store, monkeypatch: Any
                                                       ) -> None:
    """Past :data:`MAX_SESSIONS` in all (two here), opening another ends the oldest idle
    session (of the holder with most) to make room: its id is then the 404 of an ended
    session; the others are served; a session ended frees its place."""
    monkeypatch.setattr(http, "MAX_SESSIONS", 2)
    keys = [store.keys.create(f"k{n}").key or "" for n in range(3)]
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with TestClient(create_app(store, [], console=False, dreams=False, mcp=endpoint)) as tc:
        opened = [_open(tc, k) for k in keys[:2]]
        assert [r.status_code for r in opened] == [200, 200]
        third = _open(tc, keys[2])
        assert third.status_code == 200, third.text
        first, second = (r.headers["mcp-session-id"] for r in opened)
        assert _post(tc, keys[0], ping, first).status_code == 404
        assert _post(tc, keys[1], ping, second).status_code == 200
        assert _end(tc, keys[1], second).status_code == 200
        assert _open(tc, keys[0]).status_code == 200


def test_an_idle_session_ends(store: Store, monkeypatch: Any) -> None:
    """A session without a request for :data:`SESSION_IDLE_SECONDS` ends: its id is then
    the 404 of an unknown session (the client opens another)."""
    monkeypatch.setattr(http, "SESSION_IDLE_SECONDS", 0.1)
    key = store.keys.create("idle").key or ""
    made: list[http.McpEndpoint] = []

    def kept(grants: Any, hub: Any) -> http.McpEndpoint:
        made.append(endpoint(grants, hub))
        return made[-1]

    with TestClient(create_app(store, [], console=False, dreams=False, mcp=kept)) as tc:
        session = _open(tc, key).headers["mcp-session-id"]
        wait_until(lambda: made[0].manager.ended(session), 10, interval=0.05,
                   what="the idle session ended")
        r = _post(tc, key, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, session)
        assert r.status_code == 404, r.text


def test_subscriptions_follow_the_apps_change_feeds(store: Store) -> None:
    """A subscription over HTTP follows its store through the app's ChangeHub (the feeds the
    Console and remote mounts follow: one poller per store however many subscribers), not a
    poller of its own."""
    ms = store.stores.create("watched").id
    store.memories.create(ms, "/a.md", "x", actor=Actor.user("user_t"))
    key = store.keys.create("subscriber").key or ""
    made: list[http.McpEndpoint] = []

    def kept(grants: Any, hub: Any) -> http.McpEndpoint:
        made.append(endpoint(grants, hub))
        return made[-1]

    with TestClient(create_app(store, [], console=False, dreams=False, mcp=kept)) as tc:
        session = _open(tc, key).headers["mcp-session-id"]
        _post(tc, key, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        r = _post(tc, key, {"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe",
                            "params": {"uri": f"memfs://{ms}/a.md"}}, session)
        assert "error" not in _answer(r), r.text
        hub = made[0].hub
        assert hub is not None
        wait_until(lambda: hub.statistics()["subscribers"] == 1, 10,
                   what="the subscription follows the hub")
        assert hub.statistics()["feeds"] == 1


def _end(tc: TestClient, key: str, session: str) -> Any:
    return tc.delete("/mcp", headers={"authorization": f"Bearer {key}",
                                      "mcp-session-id": session,
                                      "mcp-protocol-version": PROTOCOL})


def test_a_keys_session_tokens_share_its_sessions(store: Store, monkeypatch: Any) -> None:
    """A key that mints session tokens (each a credential of its own) opens no more MCP
    sessions through them than it may itself: they count against the key that created
    their session. Counted per token, four tokens filled the server (six here) and another
    workspace's key, and the server key, got the 503 of a full server."""
    monkeypatch.setattr(http, "MAX_SESSIONS", 6)
    monkeypatch.setattr(http, "MAX_SESSIONS_PER_CREDENTIAL", 2)
    made = store.keys.create("minter")
    ms = store.stores.create("minted").id
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}],
                                    created_by_key=made.id)
    store.sessions.set_status(session.id, "running")
    tokens = [store.sessions.create_token(session.id, key_id=made.id).token or ""
              for _ in range(4)]
    victim = store.keys.create("victim", workspace="team-b").key or ""
    with TestClient(create_app(store, ["sk-memfs-server-key-0123456789"], console=False,
                               dreams=False, mcp=endpoint)) as tc:
        statuses = [_open(tc, t).status_code for t in tokens for _ in range(2)]
        assert statuses.count(200) == 2, statuses
        assert set(statuses[2:]) == {429}, statuses
        assert _open(tc, made.key or "").status_code == 429
        assert _open(tc, victim).status_code == 200
        assert _open(tc, "sk-memfs-server-key-0123456789").status_code == 200


def test_a_full_workspace_makes_room_from_its_busiest_holder(store: Store, monkeypatch: Any
                                                             ) -> None:
    """A workspace holds at most :data:`MAX_SESSIONS_PER_WORKSPACE` sessions: past it, the
    oldest idle session of the key holding most of them ends to make room (its id is then
    the 404 of an ended session), and another workspace is not held up."""
    monkeypatch.setattr(http, "MAX_SESSIONS", 6)
    monkeypatch.setattr(http, "MAX_SESSIONS_PER_CREDENTIAL", 3)
    monkeypatch.setattr(http, "MAX_SESSIONS_PER_WORKSPACE", 4)
    busy, light, newcomer = (store.keys.create(n).key or "" for n in ("busy", "light", "new"))
    other = store.keys.create("other", workspace="team-b").key or ""
    with TestClient(create_app(store, [], console=False, dreams=False, mcp=endpoint)) as tc:
        oldest = _open(tc, busy).headers["mcp-session-id"]
        kept = [_open(tc, busy).headers["mcp-session-id"] for _ in range(2)]
        light_session = _open(tc, light).headers["mcp-session-id"]
        r = _open(tc, newcomer)
        assert r.status_code == 200, r.text
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        assert _post(tc, busy, ping, oldest).status_code == 404
        for key, sid in [(busy, kept[0]), (busy, kept[1]), (light, light_session)]:
            assert _post(tc, key, ping, sid).status_code == 200
        assert _open(tc, other).status_code == 200
        assert _end(tc, light, light_session).status_code == 200


def test_a_resources_page_looks_at_a_bounded_number_of_stores(store: Store,
                                                              monkeypatch: Any) -> None:
    """resources/list over more stores than one request may look into (45 stores, 30
    requests into the API a request here): each page lists the memories of a few stores,
    and the pages together list each memory once. A page that listed every store, and then
    looked into each until it had a page's worth, was refused."""
    monkeypatch.setattr(http, "INNER_CALLS_PER_REQUEST", 30)
    ids = [store.stores.create(f"store {n}").id for n in range(45)]
    for ms in ids[::2]:
        store.memories.create(ms, "/a.md", "x", actor=Actor.user("user_t"))
    key = "sk-memfs-server-key-0123456789"
    with TestClient(create_app(store, [key], console=False, dreams=False,
                               mcp=endpoint)) as tc:
        session = _initialized(tc, key)
        uris: list[str] = []
        cursor = None
        for n in range(20):
            r = _post(tc, key, {"jsonrpc": "2.0", "id": n, "method": "resources/list",
                                "params": {"cursor": cursor} if cursor else {}}, session)
            answer = _answer(r)
            assert "result" in answer, answer
            uris += [x["uri"] for x in answer["result"]["resources"]]
            cursor = answer["result"].get("nextCursor")
            if cursor is None:
                break
    assert sorted(uris) == sorted(f"memfs://{ms}/a.md" for ms in ids[::2])


def test_what_a_client_sends_is_logged_short_and_below_error(store: Store, caplog: Any
                                                             ) -> None:
    """The SDK logs what a client sent in full, at ERROR (a JSON-RPC response to no request
    of the server) or WARNING (a request that is no request): a client could write 4 MiB a
    request into the server's log, as errors. Now such a line is cut short and logged at
    INFO: the client's doing, not the server's."""
    caplog.set_level(logging.DEBUG)
    key = store.keys.create("noisy").key or ""
    big = "A" * 200_000
    with TestClient(create_app(store, [], console=False, dreams=False, mcp=endpoint)) as tc:
        session = _initialized(tc, key)
        r = _post(tc, key, {"jsonrpc": "2.0", "id": 77, "result": {"x": big}}, session)
        assert r.status_code < 500, r.text
        r = _post(tc, key, {"jsonrpc": "2.0", "id": 78, "method": "nope",
                            "params": {"x": big}}, session)
        assert r.status_code < 500, r.text
        r = _post(tc, key, {"jsonrpc": "2.0", "id": 79, "method": "ping"}, session)
        assert r.status_code == 200, r.text
    sdk = [rec for rec in caplog.records if rec.pathname.startswith(SDK_DIR)]
    said = {rec.getMessage()[:30] for rec in sdk}
    assert "Received exception from stream" in said, said
    assert "Failed to validate request: 31 " in said or \
        any(m.startswith("Failed to validate request") for m in said), said
    for rec in sdk:
        assert len(rec.getMessage()) <= 400, (rec.levelname, rec.getMessage()[:200])
        if "AAAAAAAAAA" in rec.getMessage():
            assert rec.levelno <= logging.INFO, (rec.levelname, rec.getMessage()[:200])


def test_the_inner_clients_hold_no_secret(store: Store) -> None:
    """The clients the tools act through, kept for a credential's next calls, are known by
    the credential's id and carry no secret (the gate lets their requests in by the grant
    they carry): a secret kept there outlived its revocation."""
    key = store.keys.create("kept").key or ""
    made: list[http.McpEndpoint] = []

    def kept(grants: Any, hub: Any) -> http.McpEndpoint:
        made.append(endpoint(grants, hub))
        return made[-1]

    with TestClient(create_app(store, [], console=False, dreams=False, mcp=kept)) as tc:
        session = _initialized(tc, key)
        r = _post(tc, key, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "memory_list_stores", "arguments": {}}}, session)
        assert not _answer(r)["result"]["isError"], r.text
        clients = made[0]._clients
        assert clients
        for name, client in clients.items():
            assert key not in repr(name), name
            assert key not in repr(dict(client._http.headers)), client._http.headers


def test_a_keys_stores_cost_a_call_what_one_store_does(store: Store, monkeypatch: Any
                                                       ) -> None:
    """A key scoped to many stores (60) reads a memory of one, and lists a few of its
    stores, in a handful of requests into the API (10 here): the API itself keeps the key
    to its stores. Each of its stores looked up in turn, every call of the key cost 60."""
    monkeypatch.setattr(http, "INNER_CALLS_PER_REQUEST", 10)
    ids = [store.stores.create(f"scoped {n}").id for n in range(60)]
    store.stores.create("outside")
    store.memories.create(ids[7], "/a.md", "seven\n", actor=Actor.user("user_t"))
    key = store.keys.create("wide", store_ids=ids).key or ""
    with TestClient(create_app(store, [], console=False, dreams=False, mcp=endpoint)) as tc:
        session = _initialized(tc, key)
        for n, (name, arguments) in enumerate([
                ("memory_read", {"store": ids[7], "path": "/a.md"}),
                ("memory_read", {"store": "scoped 7", "path": "/a.md"}),
                ("memory_list_stores", {"limit": 5})]):
            r = _post(tc, key, {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
                "name": name, "arguments": arguments}}, session)
            result = _answer(r)["result"]
            assert not result["isError"], result
        assert len(result["structuredContent"]["stores"]) == 5
        assert set(s["id"] for s in result["structuredContent"]["stores"]) <= set(ids)
        r = _post(tc, key, {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
            "name": "memory_read", "arguments": {"store": "outside", "path": "/a.md"}}},
            session)
        error = _answer(r)["result"]["structuredContent"]["error"]
        assert error["type"] == "not_found_error", error


def test_the_sdks_admission_holds_the_caps_too(monkeypatch: Any) -> None:
    """Opening requests that come in at once all pass :meth:`_Manager.make_room` before any
    is admitted: the admission itself refuses a session past the holder's cap or its
    workspace's (not the server key's: the operator's)."""
    monkeypatch.setattr(http, "MAX_SESSIONS_PER_WORKSPACE", 2)
    manager = _Manager(Server("t"))
    manager.holders.update({"s1": ("apikey_a", "w"), "s2": ("apikey_b", "w")})
    token = http._ADMITTING.set(("apikey_c", "w", False))
    try:
        assert manager._admit_session(None) is None
    finally:
        http._ADMITTING.reset(token)
    token = http._ADMITTING.set(("apikey_server", "w", True))
    try:
        transport = manager._admit_session(None)
    finally:
        http._ADMITTING.reset(token)
    assert transport is not None and transport.mcp_session_id in manager.holders
