"""What a client can send must never poison the store or earn a 500 (issue 8, finding 13):
lone surrogates in any stored string, forged page cursors, HEAD on GET routes, bodies that never
arrive."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
import trio
import trio.testing
from starlette.testclient import TestClient

from memfs import api, errors
from memfs.api import create_app
from memfs.store.paging import encode_cursor
from tests.support import async_wait_until

KEY = "test-key-1"
LONE = "\ud800"



@pytest.fixture
def store(backend):
    """Every test of this file runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()

@pytest.fixture
def client(store):
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": KEY},
                    raise_server_exceptions=False) as c:
        yield c


def post_raw(client, url, text):
    """POST ``text`` (JSON whose escapes may encode lone surrogates) as the body."""
    return client.post(url, content=text.encode(), headers={"content-type": "application/json"})


def assert_400(r):
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error"


# -- lone surrogates: the store refuses them wherever a client can store a string -------------


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.stores.create(LONE),
        lambda s: s.stores.create("x", LONE),
        lambda s: s.stores.create("x", metadata={"k": LONE}),
        lambda s: s.stores.create("x", metadata={LONE: "v"}),
        lambda s: s.stores.update(s.stores.create("x").id, metadata={"k": LONE}),
        lambda s: s.stores.update(s.stores.create("x").id, name=LONE),
        lambda s: s.stores.update(s.stores.create("x").id, description="a" + LONE),
        lambda s: s.sessions.create([], title=LONE),
        lambda s: s.sessions.create([], metadata={"k": LONE}),
        lambda s: s.sessions.create([], environment_id=LONE),
        lambda s: s.sessions.create([], agent={"type": "agent", "id": LONE}),
        lambda s: s.sessions.create([], root="/mnt/" + LONE),
        lambda s: s.sessions.create([{"type": "memory_store", "memory_store_id": LONE}]),
        lambda s: s.sessions.create([{"type": "memory_store",
                                     "memory_store_id": s.stores.create("x").id,
                                     "instructions": LONE}]),
        lambda s: s.sessions.update(s.sessions.create([]).id, title=LONE),
        lambda s: s.sessions.update(s.sessions.create([]).id, metadata={"k": LONE}),
        lambda s: s.events.send(s.sessions.create([]).id, [
            {"type": "user.message", "content": [{"type": "text", "text": LONE}]}]),
        lambda s: s.events.send(s.sessions.create([]).id, [
            {"type": "user.message", "content": [], LONE: 1}]),
        lambda s: s.events.add(s.sessions.create([]).id, [{"type": "x" + LONE}]),
        lambda s: s.events.add_tool_events(s.sessions.create([]).id, [
            {"type": "agent.tool_use", "id": "sevt_1", "processed_at": "2026-01-01T00:00:00Z",
             "input": {"path": LONE}}]),
        lambda s: s.agents.create(name=LONE, model="m"),
        lambda s: s.agents.create(name="a", model="m" + LONE),
        lambda s: s.agents.create(name="a", model="m", system=LONE),
        lambda s: s.agents.create(name="a", model="m", description=LONE),
        lambda s: s.agents.create(name="a", model="m", tools=[{"type": "t", "x": [LONE]}]),
        lambda s: s.agents.create(name="a", model="m", metadata={"k": LONE}),
        lambda s: s.agents.create_environment(name="e", config={"type": "cloud", "x": LONE}),
        lambda s: s.agents.create_environment(name="e", description=LONE),
        lambda s: s.agents.snapshot(LONE),
    ],
)
def test_store_refuses_lone_surrogates(store, call):
    with pytest.raises(errors.InvalidRequest):
        call(store)
    # nothing unreadable was committed: every listing still serializes
    for page in (store.stores.list(include_archived=True), store.sessions.list()):
        json.dumps(page.to_dict(), ensure_ascii=False).encode()
    for session in store.sessions.list().data:
        json.dumps(store.events.list(session.id, limit=1000).to_dict(),
                   ensure_ascii=False).encode()


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/v1/memory_stores", r'{"name":"x","metadata":{"k":"\ud800"}}'),
        ("/v1/memory_stores", r'{"name":"\udfff"}'),
        ("/v1/sessions", r'{"title":"\ud800"}'),
        ("/v1/sessions", r'{"metadata":{"k":"\ud800"}}'),
        ("/v1/agents", r'{"name":"a","model":"m","system":"\ud800"}'),
        ("/v1/environments", r'{"name":"e","config":{"type":"cloud","x":"\ud800"}}'),
    ],
)
def test_api_refuses_lone_surrogates_and_stays_readable(client, url, body):
    assert_400(post_raw(client, url, body))
    assert client.get("/v1/memory_stores").status_code == 200
    assert client.get("/v1/sessions").status_code == 200


def test_api_refuses_lone_surrogates_in_events_and_updates(client):
    sid = client.post("/v1/memory_stores", json={"name": "s"}).json()["id"]
    sess = client.post("/v1/sessions", json={}).json()["id"]
    assert_400(post_raw(client, f"/v1/memory_stores/{sid}", r'{"metadata":{"k":"\ud800"}}'))
    assert_400(post_raw(client, f"/v1/sessions/{sess}", r'{"title":"\ud800"}'))
    assert_400(post_raw(client, f"/v1/sessions/{sess}/events",
                        r'{"events":[{"type":"user.message","content":'
                        r'[{"type":"text","text":"\ud800"}]}]}'))
    assert client.get(f"/v1/memory_stores/{sid}").status_code == 200
    assert client.get(f"/v1/sessions/{sess}").status_code == 200
    assert client.get(f"/v1/sessions/{sess}/events").status_code == 200


# -- forged cursors ----------------------------------------------------------------------------


FORGED_KEYS = [
    ["a", ["b"]], [{"x": 1}, "b"], [1, 2], {"x": "y"}, 2**63, -(2**63) - 1, 10**30,
    ["2026" + LONE, "memstore_x"], [LONE, False], LONE, ["before", LONE], ["before", 2**63],
    [[1], True], 1.5, None, True,
]


def _listings(store):
    sid = store.stores.create("s").id
    sess = store.sessions.create([]).id
    return [
        ("stores", ["stores", False, []], lambda page: store.stores.list(page=page)),
        ("memories", [sid, "/", 0], lambda page: store.memories.list(sid, page=page)),
        ("versions", ["versions", [sid]], lambda page: store.versions.list(sid, page=page)),
        ("sessions", ["sessions", "desc", []], lambda page: store.sessions.list(page=page)),
        ("events", ["events", "asc", [sess]], lambda page: store.events.list(sess, page=page)),
        ("resources", [sess],
         lambda page: store.sessions.list_resources(sess, page=page, limit=1)),
    ]


def test_forged_cursors_are_invalid_cursor(store):
    for kind, filters, call in _listings(store):
        # the genuine kind and fingerprint pass, so only the key is forged
        for key in FORGED_KEYS:
            with pytest.raises(errors.InvalidCursor):
                call(encode_cursor(kind, filters, key))


def test_forged_cursor_envelopes_over_http(client, store):
    sid = client.post("/v1/memory_stores", json={"name": "s"}).json()["id"]
    sess = client.post("/v1/sessions", json={}).json()["id"]
    def b64(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    cursors = [
        encode_cursor("stores", ["stores", False, []], [["x"], {"y": 1}]),
        encode_cursor("stores", ["stores", False, []], ["a" + LONE, "b"]),
        encode_cursor("events", ["events", "asc", [sess]], 2**63),
        encode_cursor("events", ["events", "asc", [sess]], 2**64 + 5),
        encode_cursor("sessions", ["sessions", "desc", []], LONE),
        encode_cursor("versions", ["versions", [sid]], [LONE, LONE]),
        encode_cursor("memories", [sid, "/", 0], [LONE, True]),
        b64(b'{"k":"stores","f":"\\ud800","v":1}'),
        b64(b'{"k":"\\udfff"}'),
        b64(b"[" * 3000),
        b64(b'"\xff\xfe"'),
        b64(b"[1, 2]"),
        b64(b"7"),
    ]
    urls = ["/v1/memory_stores", f"/v1/memory_stores/{sid}/memories",
            f"/v1/memory_stores/{sid}/memory_versions", "/v1/sessions",
            f"/v1/sessions/{sess}/events", f"/v1/sessions/{sess}/resources?limit=1"]
    for url in urls:
        for cursor in cursors:
            r = client.get(url, params={"page": cursor})
            assert r.status_code == 400, (url, cursor, r.text)
            assert r.json()["error"]["details"]["error_code"] == "invalid_cursor"


# -- HEAD ---------------------------------------------------------------------------------------


def test_head_answers_like_get_without_a_body(client):
    sid = client.post("/v1/memory_stores", json={"name": "s"}).json()["id"]
    for url in ("/v1/memory_stores", f"/v1/memory_stores/{sid}", "/v1/sessions",
                "/openapi.json", "/v1/memfs/limits"):
        get, head = client.get(url), client.head(url)
        assert head.status_code == get.status_code == 200, head.text
        assert head.headers["content-type"] == get.headers["content-type"]
        assert head.content == b""
    r = client.head("/v1/memory_stores/memstore_nope")
    assert r.status_code == 404 and r.headers["content-type"] == "application/json"
    r = client.head("/v1/memory_stores/x/archive")  # a POST-only route
    assert r.status_code == 405


async def test_head_on_a_stream_does_not_stream(store):
    sess = store.sessions.create([]).id
    transport = httpx.ASGITransport(app=create_app(store, [KEY]))
    async with httpx.AsyncClient(transport=transport, base_url="http://t",
                                 headers={"x-api-key": KEY}) as c:
        with trio.fail_after(5):
            r = await c.head(f"/v1/sessions/{sess}/events/stream")
            assert r.status_code == 200 and r.content == b""
            assert r.headers["content-type"].startswith("text/event-stream")
            r = await c.head("/v1/sessions/sesn_nope/events/stream")
            assert r.status_code == 404


# -- request bodies ------------------------------------------------------------------------------


async def _call(app, method, path, chunks, *, stall=False):
    """Drive the ASGI app by hand: the body arrives as ``chunks``; ``stall`` then never ends
    it. Returns (status, headers, body)."""
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(),
             "query_string": b"", "headers": [(b"x-api-key", KEY.encode()),
                                              (b"content-type", b"application/json")],
             "http_version": "1.1", "scheme": "http", "server": ("t", 80),
             "client": ("c", 1), "root_path": ""}
    queue = [{"type": "http.request", "body": c, "more_body": True} for c in chunks]
    if not stall:
        queue.append({"type": "http.request", "body": b"", "more_body": False})
    sent = []

    async def receive():
        if queue:
            return queue.pop(0)
        await trio.sleep_forever()

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), body


async def test_a_stalled_body_is_a_408(store, monkeypatch):
    monkeypatch.setattr(api.body, "BODY_IDLE_SECONDS", 0.2)
    app = create_app(store, [KEY])
    with trio.fail_after(5):
        status, headers, body = await _call(app, "POST", "/v1/memory_stores", [b'{"na'],
                                            stall=True)
    assert status == 408
    err = json.loads(body)
    assert err["type"] == "error" and err["error"]["type"] == "timeout_error"
    assert err["error"]["details"]["error_code"] == "request_timeout"
    assert headers[b"connection"] == b"close"


async def test_a_dripping_body_is_a_408(store, monkeypatch):
    """A byte now and then resets no clock: the whole body has a deadline too."""
    monkeypatch.setattr(api.body, "BODY_IDLE_SECONDS", 0.2)
    monkeypatch.setattr(api.body, "BODY_TOTAL_SECONDS", 0.5)
    app = create_app(store, [KEY])

    chunks = iter([b"{"] + [b" "] * 1000)
    scope_sent = []

    async def receive():
        await trio.sleep(0.05)  # the point: a client that sends a byte every 50 ms
        return {"type": "http.request", "body": next(chunks), "more_body": True}

    async def send(message):
        scope_sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/memory_stores",
             "raw_path": b"/v1/memory_stores", "query_string": b"",
             "headers": [(b"x-api-key", KEY.encode())], "http_version": "1.1",
             "scheme": "http", "server": ("t", 80), "client": ("c", 1), "root_path": ""}
    with trio.fail_after(5):
        await app(scope, receive, send)
    assert scope_sent[0]["status"] == 408


async def test_a_whole_body_still_works(store):
    app = create_app(store, [KEY])
    status, _, body = await _call(app, "POST", "/v1/memory_stores", [b'{"na', b'me":"x"}'])
    assert status == 200 and json.loads(body)["name"] == "x"


def test_no_body_field_of_any_route_takes_a_lone_surrogate_to_a_500(client):
    """Every POST route, every accepted field, a lone surrogate in a few shapes: a 4xx, and
    the listings still answer."""
    sid = client.post("/v1/memory_stores", json={"name": "s"}).json()["id"]
    mem = client.post(f"/v1/memory_stores/{sid}/memories",
                      json={"path": "/a.md", "content": "x"}).json()
    ver = mem["memory_version_id"]
    sess = client.post("/v1/sessions", json={"resources": [
        {"type": "memory_store", "memory_store_id": sid}]}).json()
    ids = {"memory_store_id": sid, "memory_id": mem["id"], "memory_version_id": ver,
           "session_id": sess["id"], "resource_id": sess["resources"][0]["id"],
           "agent_id": "agent_x", "environment_id": "env_x"}
    shapes = [LONE, {"k": LONE}, {LONE: "v"}, [LONE],
              [{"type": "user.message", "content": [{"type": "text", "text": LONE}]}],
              [{"type": "agent.tool_use", "id": "sevt_" + LONE,
                "processed_at": "2026-01-01T00:00:00Z"}],
              [{"type": "memory_store", "memory_store_id": LONE}]]
    for op in api.OPS:
        if op.method != "POST":
            continue
        url = op.path
        for name, value in ids.items():
            url = url.replace("{" + name + "}", value)
        for field in op.body:
            for shape in shapes:
                body = json.dumps({field.name: shape})  # ASCII, \ud800 escapes
                for headers in ({}, {api.SESSION_HEADER: sess["id"]}):
                    r = client.post(url, content=body.encode(),
                                    headers={"content-type": "application/json", **headers})
                    assert r.status_code < 500, (url, body, r.text)
    for url in ("/v1/memory_stores", "/v1/sessions", f"/v1/sessions/{sess['id']}/events",
                f"/v1/memory_stores/{sid}/memories", f"/v1/memory_stores/{sid}/memory_versions",
                f"/v1/memory_stores/{sid}/changes?after=0"):
        assert client.get(url).status_code == 200, url


@pytest.mark.parametrize("raw", ["%ED%A0%80", "%ED%BF%BF", "%FF", "a%C3", "%C0%AF"])
def test_no_query_parameter_of_any_route_takes_bad_utf8(client, store, raw):
    """A lone surrogate's bytes (CESU-8), a byte that is never UTF-8, a cut or overlong
    sequence, in any declared string parameter of a GET route: a 400 naming it (the
    parameter was read with U+FFFD in place of its bytes), never a 500."""
    sid = store.stores.create("s").id
    ids = {"memory_store_id": sid, "memory_id": "mem_x", "memory_version_id": "memver_x",
           "session_id": "sesn_x", "resource_id": "x", "agent_id": "agent_x",
           "environment_id": "env_x", "dream_id": "dream_x"}
    checked = 0
    for op in api.OPS:
        if op.method != "GET":
            continue
        url = op.path
        for name, value in ids.items():
            url = url.replace("{" + name + "}", value)
        for p in op.query:
            if p.types != ("string",):
                continue
            others = "".join(f"&{q.name}=x" for q in op.query if q.required and q is not p)
            r = client.get(f"{url}?{p.name}={raw}{others}")
            assert r.status_code == 400, (url, p.name, r.text)
            assert f"{p.name} is not valid UTF-8" in r.json()["error"]["message"], r.text
            checked += 1
    assert checked >= 15
    # Search: the question and the prefix too, on a store that exists.
    for q in (f"query={raw}", f"query=x&path_prefix=/{raw}"):
        assert_400(client.get(f"/v1/memory_stores/{sid}/memfs/search?{q}"))
    # And valid UTF-8 is read as sent.
    r = client.get(f"/v1/memory_stores/{sid}/memfs/search?query=caf%C3%A9&path_prefix=/%C3%A9")
    assert r.status_code == 200, r.text


def test_search_questions_with_nul_are_refused_on_the_store(store):
    sid = store.stores.create("s").id
    store.memories.create(sid, "/a.md", "pager duty", actor=None)
    store.search.use_embeddings("none")
    for kw in ({"query": "pa\x00ger"}, {"query": "pager", "path_prefix": "/a\x00"},
               {"query": LONE}, {"query": "pager", "path_prefix": "/" + LONE}):
        with pytest.raises(errors.InvalidRequest):
            store.search.in_store(sid, **kw)
    assert [h.path for h in store.search.in_store(sid, "pager").hits] == ["/a.md"]


# -- idle event streams --------------------------------------------------------------------------


async def test_idle_event_streams_share_one_poller(store):
    """100 idle streams (one session each) cost one database poll per interval, not one per
    stream; an event written straight to the store (as the CLI or a mount does) still
    arrives, and a deleted session still ends its stream."""
    hub = api.EventHub(store, interval=0.05)
    sessions = [store.sessions.create([]).id for _ in range(100)]
    frames: dict[str, list[bytes]] = {sid: [] for sid in sessions}

    async def follow(sid):
        async for frame in hub.stream(sid, store.events.last_seq(sid)):
            frames[sid].append(frame)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for sid in sessions:
                nursery.start_soon(follow, sid)
            await trio.sleep(1.0)  # the point: how many polls in a second of 100 idle streams
            assert hub.polls <= 1.0 / 0.05 + 5, hub.polls
            store.events.send(sessions[7], [{"type": "user.message", "content": []}])
            for sid in sessions:
                store.sessions.delete(sid)
    assert [f.split(b"\n")[0] for f in frames[sessions[7]]] == [
        b"event: ping", b"event: user.message", b"event: session.deleted"]
    assert all(f[-1].startswith(b"event: session.deleted") for f in frames.values())
    assert hub.statistics() == {"sessions": 0, "subscribers": 0, "polls": hub.polls}


async def test_event_streams_keep_polling_when_the_poller_leaves(store):
    hub = api.EventHub(store, interval=0.05)
    first, second = store.sessions.create([]).id, store.sessions.create([]).id
    got: list[bytes] = []

    async def follow(sid, into):
        async for frame in hub.stream(sid, store.events.last_seq(sid)):
            into.append(frame)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            async with trio.open_nursery() as leaving:
                leaving.start_soon(follow, first, [])  # the first stream polls for all
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(follow, second, got)
                await trio.testing.wait_all_tasks_blocked()  # both streams follow
                leaving.cancel_scope.cancel()
            polls = hub.polls
            await async_wait_until(lambda: hub.polls > polls, 2)  # the second one took over
            store.events.send(second, [{"type": "user.message", "content": []}])
            store.sessions.delete(second)
    assert [f.split(b"\n")[0] for f in got] == [
        b"event: ping", b"event: user.message", b"event: session.deleted"]


def _tool_pair_with(text):
    from memfs.fuse.toolevents import tool_pair
    return tool_pair("sh", 1, "write", "/mnt/memory/s/a.md", text=text)


@pytest.mark.parametrize("op", ["write", "delete", "rename", "rename_prefix", "delete_prefix"])
def test_path_operations_refuse_lone_surrogates_in_their_events(store, op):
    """The events of a path operation are checked for UTF-8 as they are encoded, inside its
    transaction: a bad one refuses the operation and nothing of it is written."""
    sid = store.stores.create("s").id
    store.memories.write_path(sid, "/d/a.md", "one", actor=None)
    before = store.versions.list(sid).data
    calls = {
        "write": lambda ev: store.memories.write_path(sid, "/d/a.md", "two", actor=None, events=ev),
        "delete": lambda ev: store.memories.delete_path(sid, "/d/a.md", actor=None, events=ev),
        "rename": lambda ev: store.memories.rename_path(sid, "/d/a.md", "/d/b.md", actor=None,
                                               events=ev),
        "rename_prefix": lambda ev: store.memories.rename_prefix(sid, "/d/", "/e/", actor=None,
                                                        events=ev),
        "delete_prefix": lambda ev: store.memories.delete_prefix(sid, "/d/", actor=None,
                                                        events=ev),
    }
    with pytest.raises(errors.InvalidRequest, match="event"):
        calls[op](_tool_pair_with("bad " + LONE))
    assert [m.path for m in store.memories.tree(sid)] == ["/d/a.md"]
    assert store.memories.get_by_path(sid, "/d/a.md").content == "one"
    assert len(store.versions.list(sid).data) == len(before)
    # And a good pair (non-ASCII included) is stored as given.
    calls[op](_tool_pair_with("schrieb 3 Bytes – ok"))


@pytest.mark.parametrize("value", ["9" * 5000, "²", "١٢", "99999999999999999999999", "1_0",
                                   " 1", "+1", "0x10"])
def test_integers_of_the_query_and_last_event_id_are_ascii_and_64_bit(client, store, value):
    """A Unicode digit (``int('١٢')`` is 12), 5,000 digits (``int()`` raises past 4,300) or
    more than 64 bits (the database's integers) is 400 wherever a client sends an integer
    (issue 19)."""
    sid = store.stores.create("s").id
    for url in (f"/v1/memory_stores/{sid}/changes?after=", "/v1/memory_stores?limit=",
                f"/v1/memory_stores/{sid}/memories?depth=", "/v1/agents/agent_x?version=",
                f"/v1/memory_stores/{sid}/memfs/search?query=x&limit=",
                f"/v1/memory_stores/{sid}/memfs/search?query=x&min_score="):
        r = client.get(url + value)
        assert_400(r)
    # A header's bytes as a client may send them (read as latin-1 by the server).
    header = {"last-event-id": value.encode("latin-1" if max(value) <= "\xff" else "utf-8")}
    r = client.get(f"/v1/memory_stores/{sid}/changes", headers=header)
    assert_400(r)
    # HEAD: the status of the stream without following it (a valid position streams for ever)
    r = client.head(f"/v1/memory_stores/{sid}/changes/stream", headers=header)
    assert r.status_code == 400


async def test_a_body_slower_than_the_minimum_rate_is_a_408(store, monkeypatch):
    """A byte every 50 ms never trips the idle limit, and the whole body's limit is a minute
    away: the minimum rate past the grace period cuts it (issue 19: 1 byte/s held a
    connection for the whole minute)."""
    monkeypatch.setattr(api.body, "BODY_GRACE_SECONDS", 0.3)
    monkeypatch.setattr(api.body, "MIN_BODY_RATE", 100)
    app = create_app(store, [KEY])
    chunks = iter([b"{"] + [b" "] * 1000)
    sent = []

    async def receive():
        await trio.sleep(0.05)  # the point: a client that sends a byte every 50 ms
        return {"type": "http.request", "body": next(chunks), "more_body": True}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/memory_stores",
             "raw_path": b"/v1/memory_stores", "query_string": b"",
             "headers": [(b"x-api-key", KEY.encode())], "http_version": "1.1",
             "scheme": "http", "server": ("t", 80), "client": ("c", 1), "root_path": ""}
    t = trio.current_time()
    with trio.fail_after(5):
        await app(scope, receive, send)
    assert sent[0]["status"] == 408 and trio.current_time() - t < 1.0
    assert b"bytes/s" in b"".join(m.get("body", b"") for m in sent[1:])


async def test_unfinished_bodies_are_bounded_per_client_per_key_and_in_all(store):
    """Bodies that never finish hold a slot each; past the limit of a client address, of a
    key, or of the server, a request is answered at once (429, 429, 503) without its body
    being read, and its connection closed; once the slow ones are gone there is room again
    (issue 19)."""
    from memfs.api.uploads import Uploads

    uploads = Uploads(total=5, per_client=2, per_key=3)
    app = create_app(store, [KEY, "other-key"], uploads=uploads)

    def scope(client: str, key: str = KEY, path: str = "/v1/memory_stores") -> dict:
        return {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(),
                "query_string": b"", "headers": [(b"x-api-key", key.encode()),
                                                 (b"host", b"t")],
                "http_version": "1.1", "scheme": "http", "server": ("t", 80),
                "client": (client, 1), "root_path": ""}

    async def stalled(s: dict) -> None:
        async def receive():
            await trio.sleep_forever()

        async def send(message):
            pass

        await app(s, receive, send)

    async def answer(s: dict) -> tuple[int, dict]:
        sent = []
        body = [{"type": "http.request", "body": b'{"name": "late"}', "more_body": False}]

        async def receive():
            return body.pop(0) if body else await trio.sleep_forever()

        async def send(message):
            sent.append(message)

        with trio.fail_after(2):
            await app(s, receive, send)
        return sent[0]["status"], dict(sent[0]["headers"])

    async def hold(nursery, s: dict) -> None:
        before = uploads.active
        nursery.start_soon(stalled, s)
        await async_wait_until(lambda: uploads.active != before, 2)

    async with trio.open_nursery() as nursery:
        await hold(nursery, scope("10.0.0.1"))
        await hold(nursery, scope("10.0.0.1"))
        status, headers = await answer(scope("10.0.0.1"))  # a third from that address
        assert status == 429 and headers[b"connection"] == b"close"
        await hold(nursery, scope("10.0.0.2"))  # the key's third
        assert (await answer(scope("10.0.0.3")))[0] == 429  # the key's fourth
        await hold(nursery, scope("10.0.0.4", "other-key"))
        await hold(nursery, scope("10.0.0.5", "other-key"))  # five in all
        status, headers = await answer(scope("10.0.0.6", "other-key"))
        assert status == 503 and headers[b"connection"] == b"close"
        # The Console's forms count too (a sign-in has no key yet: its address only).
        status, _ = await answer(scope("10.0.0.1", path="/signin"))
        assert status == 429
        assert uploads.statistics() == {"active": 5, "clients": 4, "keys": 2}
        nursery.cancel_scope.cancel()
    assert uploads.statistics() == {"active": 0, "clients": 0, "keys": 0}
    assert (await answer(scope("10.0.0.1")))[0] == 200
