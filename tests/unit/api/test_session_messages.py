"""The conversation's messages through the API and the client (issue 43): an
``agent.message`` from the session's own token or a key acting as the session, refused from
anyone else; limits in a 400 that names them, and nothing of a refused request recorded. On
SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from memfs import errors
from memfs.api import create_app
from memfs.client import Client
from memfs.store import MAX_MESSAGE_CHARS, MAX_SEND_EVENTS, Store
from tests.support.asgi import through

KEY = "messages-test-key"


def text(kind: str, t: str) -> dict[str, Any]:
    return {"type": kind, "content": [{"type": "text", "text": t}]}


@pytest.fixture
def store(backend: Any) -> Store:
    return backend.open()


@pytest.fixture
def tc(store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(store, [KEY])) as tc:
        yield tc


@pytest.fixture
def transport(tc: TestClient) -> httpx.MockTransport:
    return through(tc)


def messages(store: Store, sid: str) -> list[Any]:
    return store.events.list(sid, types=["user.message", "agent.message"]).data


def running(store: Store) -> str:
    sid = store.sessions.create([]).id
    store.sessions.set_status(sid, "running")
    return sid


def test_the_session_itself_sends_its_agent_messages(store: Store, transport: Any) -> None:
    sid = running(store)
    token = store.sessions.create_token(sid).token
    with Client("http://memfs", token, transport=transport) as own:
        sent = own.events.add(sid, [text("user.message", "tea?"), text("agent.message", "tea.")])
    assert [e.type for e in sent] == ["user.message", "agent.message"]
    with Client("http://memfs", KEY, session_id=sid, transport=transport) as acting:
        acting.events.add(sid, [text("agent.message", "as the session")])
    launcher = store.keys.create("launcher", role="read_write")
    with TestClient(create_app(store, [KEY])) as tc2:
        r = tc2.post("/v1/sessions", headers={"x-api-key": launcher.key}, json={})
        own_sid = r.json()["id"]
        with Client("http://memfs", launcher.key, session_id=own_sid,
                    transport=through(tc2)) as creator:
            creator.events.add(own_sid, [text("agent.message", "by my launcher")])
    with Client("http://memfs", KEY, transport=transport) as c:
        listed = c.events.list(sid, types=["agent.message"]).data
    assert [e.body["content"][0]["text"] for e in listed] == ["tea.", "as the session"]


def test_an_agent_message_from_anyone_else_is_refused(store: Store, transport: Any,
                                                        tc: TestClient) -> None:
    sid, other = running(store), running(store)
    other_token = store.sessions.create_token(other).token
    both = [text("user.message", "a"), text("agent.message", "b")]
    # A key that does not act as the session, or acts as another one: 403, naming the way.
    for session_id in (None, other):
        with (Client("http://memfs", KEY, session_id=session_id, transport=transport) as c,
              pytest.raises(errors.Forbidden, match="x-memfs-session-id")):
            c.events.add(sid, both)
    # Another session's token: that session is all it sees (the 404 of every other session).
    with (Client("http://memfs", other_token, transport=transport) as c,
          pytest.raises(errors.NotFound)):
        c.events.add(sid, both)
    # ... and it may not act as this one either.
    r = tc.post(f"/v1/sessions/{sid}/events", json={"events": both},
                headers={"x-api-key": other_token, "x-memfs-session-id": sid})
    assert r.status_code in (403, 404), r.text
    assert r.json()["type"] == "error"
    # A stored key that did not create the session may not act as it.
    stranger = store.keys.create("stranger", role="read_write")
    r = tc.post(f"/v1/sessions/{sid}/events", json={"events": both},
                headers={"x-api-key": stranger.key, "x-memfs-session-id": sid})
    assert r.status_code == 403, r.text
    assert messages(store, sid) == [] and messages(store, other) == []


@pytest.mark.parametrize("events, named", [
    ([text("agent.message", "x" * (MAX_MESSAGE_CHARS + 1))], str(MAX_MESSAGE_CHARS)),
    ([text("user.message", "x")] * (MAX_SEND_EVENTS + 1), str(MAX_SEND_EVENTS)),
    ([text("user.message", "ok"), {"type": "agent.message", "content": [{"type": "image"}]}],
     "events[1].content[0]"),
    # review 43 #1: what is not text was not counted (each of these stored ~3 MB)
    ([{"type": "agent.message", "content": [{"type": "redacted", "data": "x" * 3_000_000}]}],
     "events[0].content[0]: 'data' is not a key of a redacted block"),
    ([{"type": "user.message", "content": [{"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": "z" * 3_000_000}}]}],
     "MAX_EVENT_CHARS"),
    ([{**text("agent.message", "ok"), "junk": "q" * 3_000_000}],
     "'junk' is not a key of an agent.message"),
])
def test_a_request_over_a_limit_is_a_400_naming_it(store: Store, tc: TestClient,
                                                     events: list[Any], named: str) -> None:
    sid = running(store)
    r = tc.post(f"/v1/sessions/{sid}/events", json={"events": events},
                headers={"x-api-key": KEY, "x-memfs-session-id": sid})
    assert r.status_code == 400, r.text[:500]
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert named in r.json()["error"]["message"]
    assert messages(store, sid) == []


@pytest.mark.parametrize("body", [
    {"events": [{"type": "agent.message", "content": {"type": "text", "text": "x"}}]},
    {"events": [{"type": "agent.message", "content": [[]]}]},
    {"events": [{"type": "agent.message", "content": [{"type": "text", "text": None}]}]},
    {"events": [{"type": "agent.message", "content": [{"type": {"a": 1}}]}]},
    {"events": [{"type": "agent.message", "content": [{"type": "text", "text": "x"}] * 10_000}]},
    {"events": [{"type": "user.message", "content": [{"type": "text", "text": ["x"]}]}]},
    {"events": [{"type": "agent.message", "content": [{"type": "t" * 100_000}]}]},
])
def test_hostile_messages_are_400s(store: Store, tc: TestClient, body: Any) -> None:
    sid = running(store)
    r = tc.post(f"/v1/sessions/{sid}/events", json=body,
                headers={"x-api-key": KEY, "x-memfs-session-id": sid})
    assert r.status_code == 400, r.text[:500]
    assert len(r.json()["error"]["message"]) < 1000
    assert messages(store, sid) == []


def conversation(store: Store, sid: str, n: int = 6) -> list[str]:
    ids = []
    for i in range(n):
        kind = "user.message" if i % 2 == 0 else "agent.message"
        ids += [e.id for e in store.events.send(sid, [text(kind, f"m{i}")], as_session=sid)]
        store.events.add(sid, [{"type": "agent.tool_use", "name": "cat", "input": {}}])
    return ids


def test_events_by_type_time_and_around_through_the_client(store: Store,
                                                           transport: Any) -> None:
    sid = running(store)
    ids = conversation(store, sid)
    token = store.sessions.create_token(sid).token
    with Client("http://memfs", token, transport=transport) as c:
        msgs = c.events.list(sid, types=["user.message", "agent.message"], limit=100).data
        assert [e.id for e in msgs] == ids
        assert [e.type for e in c.events.list(sid, types=["agent.message"]).data] == [
            "agent.message"] * 3
        middle = msgs[2].processed_at
        later = c.events.list(sid, types=["user.message", "agent.message"],
                              created_at_gt=middle).data
        assert [e.id for e in later] == ids[3:]
        earlier = c.events.list(sid, types=["user.message", "agent.message"],
                                created_at_lt=middle).data
        assert [e.id for e in earlier] == ids[:2]
        around = c.events.around(sid, ids[3], context=1,
                                 types=["user.message", "agent.message"])
        assert [e.id for e in around] == ids[2:5]
        assert all(e.session_id == sid for e in around)
        every = [e.id for e in store.events.list(sid, limit=100).data]
        at = every.index(ids[3])
        assert [e.id for e in c.events.around(sid, ids[3])] == every[at - 5:at + 6]
        with pytest.raises(errors.NotFound):
            c.events.around(sid, "sevt_nope")


@pytest.mark.parametrize("query, named", [
    ("memfs_around=ID&memfs_context=101", "from 0 to 100"),
    ("memfs_around=ID&memfs_context=-1", "from 0 to 100"),
    ("memfs_around=ID&memfs_context=x", "memfs_context"),
    ("memfs_around=ID&memfs_context=99999999999999999999999", "memfs_context"),
    ("memfs_around=ID&page=abc", "page"),
    ("memfs_around=ID&order=desc", "order"),
    ("memfs_around=ID&limit=3", "limit"),
    ("memfs_around=ID&created_at[gt]=2026-01-01T00:00:00Z", "created_at[gt]"),
    ("memfs_around=", "memfs_around"),
    ("memfs_around=%ED%A0%80", "UTF-8"),
])
def test_bad_around_queries_are_400s(store: Store, tc: TestClient, query: str,
                                     named: str) -> None:
    sid = running(store)
    ids = conversation(store, sid, 2)
    r = tc.get(f"/v1/sessions/{sid}/events?{query.replace('ID', ids[0])}",
               headers={"x-api-key": KEY})
    assert r.status_code == 400, r.text[:500]
    assert named in r.json()["error"]["message"]


def test_around_a_long_unknown_id_is_a_short_404(store: Store, tc: TestClient) -> None:
    sid = running(store)
    r = tc.get(f"/v1/sessions/{sid}/events", params={"memfs_around": "sevt_" + "x" * 20_000},
               headers={"x-api-key": KEY})
    assert r.status_code == 404 and len(r.json()["error"]["message"]) < 300, r.text[:300]


def test_around_another_sessions_event_is_a_404(store: Store, tc: TestClient) -> None:
    a, b = running(store), running(store)
    theirs = conversation(store, b, 1)[0]
    r = tc.get(f"/v1/sessions/{a}/events", params={"memfs_around": theirs},
               headers={"x-api-key": KEY})
    assert r.status_code == 404, r.text[:500]
    token = store.sessions.create_token(a).token
    r = tc.get(f"/v1/sessions/{b}/events", params={"memfs_around": theirs},
               headers={"x-api-key": token})
    assert r.status_code == 404, r.text[:500]


# -- sessions by metadata (memfs extension: metadata[KEY]=VALUE) -------------------------------


def test_sessions_by_metadata_through_the_client(store: Store, transport: Any) -> None:
    a = store.sessions.create([], metadata={"thread": "t1", "user": "ann"}).id
    b = store.sessions.create([], metadata={"thread": "t1", "user": ""}).id
    store.sessions.create([], metadata={"thread": "t2"})
    odd = store.sessions.create([], metadata={"a]b[": "x&y=z", "é": "日本"}).id
    with Client("http://memfs", KEY, transport=transport) as c:
        def ids(**kw: Any) -> list[str]:
            return [s.id for s in c.sessions.list(order="asc", **kw).data]

        assert ids(metadata={"thread": "t1"}) == [a, b]
        assert ids(metadata={"thread": "t1", "user": "ann"}) == [a]
        assert ids(metadata={"user": ""}) == [b]
        assert ids(metadata={"a]b[": "x&y=z"}) == [odd]
        assert ids(metadata={"é": "日本"}) == [odd]
        assert ids(metadata={"thread": "t9"}) == []
        assert len(ids()) == 4
        first = c.sessions.list(metadata={"thread": "t1"}, limit=1, order="asc")
        assert [s.id for s in first.data] == [a] and first.next_page
        rest = c.sessions.list(metadata={"thread": "t1"}, limit=1, order="asc",
                               page=first.next_page)
        assert [s.id for s in rest.data] == [b]
        # a cursor is its filter's: another metadata filter may not reuse it
        with pytest.raises(errors.InvalidRequest):
            c.sessions.list(metadata={"thread": "t2"}, limit=1, order="asc",
                            page=first.next_page)
    # the same filter from the SDK's own encoding (extra_query nests as metadata[k]=v)
    token_scope = store.sessions.create_token(a).token
    with Client("http://memfs", token_scope, transport=transport) as own:
        store.sessions.set_status(a, "running")
        assert [s.id for s in own.sessions.list(metadata={"thread": "t1"}).data] == [a]


@pytest.mark.parametrize("query, named", [
    ("metadata[k]=1&metadata[k]=2", "twice"),
    ("metadata[]=v", "keys must be 1 to 64"),
    ("metadata[" + "k" * 65 + "]=v", "keys must be 1 to 64"),
    ("metadata[k]=" + "v" * 513, "512"),
    ("&".join(f"metadata[k{i}]=v" for i in range(17)), "16 pairs"),
    ("metadata[k]=%ED%A0%80", "UTF-8"),
    ("metadata[%FF]=v", "UTF-8"),
    ("metadata[k]=%FF", "UTF-8"),
    # NUL: PostgreSQL's jsonb has none (a 503 there, a 200 on SQLite)
    ("metadata[k]=%00", "NUL"),
    ("metadata[k%00]=v", "NUL"),
    ("metadata[thread]=x%00", "NUL"),
    # the object without brackets was silently left out (every session listed)
    ("metadata=x", "metadata[KEY]"),
])
def test_bad_metadata_filters_are_400s(store: Store, tc: TestClient, query: str,
                                       named: str) -> None:
    r = tc.get(f"/v1/sessions?{query}", headers={"x-api-key": KEY})
    assert r.status_code == 400, r.text[:500]
    assert named in r.json()["error"]["message"]


def test_the_anthropic_sdk_sends_and_lists_the_conversation(store: Store,
                                                            tc: TestClient) -> None:
    """The SDK's own calls: events.send of both messages with the session's token, the
    listing by type, and sessions.list with the metadata filter as extra_query."""
    import anthropic
    import httpx2  # the SDK's own HTTP client

    def handler(request: Any) -> Any:
        r = tc.request(request.method, str(request.url), headers=dict(request.headers),
                       content=request.content)
        return httpx2.Response(r.status_code, headers=r.headers, content=r.content)

    sid = store.sessions.create([], metadata={"thread": "t1"}).id
    store.sessions.create([], metadata={"thread": "t2"})
    store.sessions.set_status(sid, "running")
    token = store.sessions.create_token(sid).token
    with httpx2.Client(transport=httpx2.MockTransport(handler)) as http:
        own = anthropic.Anthropic(api_key=token, base_url="http://memfs", http_client=http,
                                  max_retries=0)
        own.beta.sessions.events.send(sid, events=[
            {"type": "user.message", "content": [{"type": "text", "text": "tea?"}]},
            {"type": "agent.message",  # type: ignore[list-item]  # not a client event type
             "content": [{"type": "text", "text": "black."}]},
        ])
        got = own.beta.sessions.events.list(sid, types=["agent.message"])
        assert [(e.type, e.content[0].text) for e in got.data] == [  # type: ignore[union-attr]
            ("agent.message", "black.")]
        admin = anthropic.Anthropic(api_key=KEY, base_url="http://memfs", http_client=http,
                                    max_retries=0)
        listed = admin.beta.sessions.list(extra_query={"metadata": {"thread": "t1"}})
        assert [s.id for s in listed.data] == [sid]
