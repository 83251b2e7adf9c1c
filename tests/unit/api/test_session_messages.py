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
