"""memfs.mcp over a :class:`memfs.client.Client` (calls in a worker thread) and an
:class:`memfs.client.AsyncClient` (calls awaited) on a ``memfs serve``'s API in process: every
tool with a key (the server attributes to it) and as a session (a client acting as it); the
calls go over HTTP, so every part of the store the tools use is one the clients have too."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from memfs.api import create_app
from memfs.client import AsyncClient, Client
from memfs.mcp import Reach
from memfs.mcp.tools import NAMES, WRITE_TOOLS
from memfs.models import Actor
from memfs.rules import api_key_id
from memfs.store import Store
from tests.support.asgi import through
from tests.support.mcp import call, calls, check_success, connected, ok, seed

KEY = "test-server-key"


@pytest.fixture
def http(store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(store, [KEY])) as tc:
        yield tc


@asynccontextmanager
async def client_of(kind: str, store: Store, http: TestClient, session: str | None
                    ) -> AsyncIterator[Any]:
    if kind == "sync":
        with Client("http://memfs", KEY, session_id=session, transport=through(http)) as c:
            yield c
    else:
        transport = httpx.ASGITransport(app=create_app(store, [KEY]))
        async with AsyncClient("http://memfs", KEY, session_id=session,
                               transport=transport) as ac:
            yield ac


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("who", ["key", "session"])
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_every_tool_over_a_client(store: Store, http: TestClient, name: str,
                                        who: str, kind: str) -> None:
    ms, first = seed(store)
    session = None
    if who == "session":
        session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}]).id
        store.sessions.set_status(session, "running")
    before = store.versions.list(ms, limit=100).data
    async with client_of(kind, store, http, session) as client, \
            connected(Reach(client)) as mcp:
        result = await call(mcp, name, **calls(ms, first)[name])
    check_success(store, ms, name, ok(result))
    new = store.versions.list(ms, limit=100).data[:-len(before)]
    assert bool(new) == (name in WRITE_TOOLS)
    by = Actor.session(session) if session else Actor.api(api_key_id(KEY))
    assert all(v.created_by == by for v in new), new
    if session is not None:
        evs = [e.body for e in store.events.list(session, limit=100).data
               if e.type.startswith("agent.")]
        assert [(e["type"], e.get("name")) for e in evs] == [
            ("agent.tool_use", name), ("agent.tool_result", None)]
