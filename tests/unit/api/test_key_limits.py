"""Limits per key (issue 22: one client cannot starve the others), in-process on SQLite and
PostgreSQL: a key over its request rate gets 429 ``rate_limit_error`` with ``retry-after``
while another key is still served, and a key with too many unfinished uploads gets 429 while
another key uploads. (The SDK's RateLimitError from a real server:
tests/integration/test_workspaces.py.)"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from starlette.testclient import TestClient

from memfs.api import create_app
from memfs.api.limits import KeyRates
from memfs.api.uploads import Uploads
from memfs.store import Store
from tests.support import async_wait_until
from tests.support.dbstate import snapshot

SERVER_KEY = "sk-limits"


@pytest.fixture
def store(backend: Any) -> Store:
    return backend.open()


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _key(store: Store, name: str) -> str:
    made = store.keys.create(name, workspace="team-a", role="read_write")
    assert made.key is not None
    return made.key


def test_a_key_over_its_rate_is_refused_while_another_is_served(store: Store) -> None:
    """1 request a second in bursts of 3: a key's 4th request at once is a 429 with
    retry-after (and changes nothing), another key and the server's own are served, and a
    second later the first key is served again."""
    clock = Clock()
    rates = KeyRates(rate=1.0, burst=3.0, clock=clock)
    busy, calm = _key(store, "busy"), _key(store, "calm")
    app = create_app(store, [SERVER_KEY], console=False, dreams=False, rates=rates)
    with TestClient(app) as tc:
        def make(key: str, name: str) -> Any:
            return tc.post("/v1/memory_stores", json={"name": name}, headers={"x-api-key": key})

        assert [make(busy, f"b{n}").status_code for n in range(3)] == [200, 200, 200]
        before = snapshot(store)
        r = make(busy, "refused")
        assert snapshot(store) == before
        assert r.status_code == 429, r.text
        assert r.json()["error"]["type"] == "rate_limit_error"
        assert r.json()["error"]["details"]["error_code"] == "rate_limited"
        assert r.headers["retry-after"] == "1"
        assert make(calm, "calm").status_code == 200
        assert all(make(SERVER_KEY, f"s{n}").status_code == 200 for n in range(5))
        assert make(busy, "still refused").status_code == 429
        clock.now += 1.0
        assert make(busy, "again").status_code == 200
        assert make(busy, "and refused").status_code == 429
    names = {s.name for s in store.stores.list(workspace="team-a", limit=100).data}
    assert names == {"b0", "b1", "b2", "calm", "again"}


async def test_a_key_with_too_many_unfinished_uploads_is_refused_while_another_uploads(
        store: Store) -> None:
    """Two bodies of a key that never finish hold its two slots: its third request is a 429
    at once, its body unread, while another key's upload goes through; once they are gone
    the key is served again."""
    uploads = Uploads(total=100, per_client=100, per_key=2)
    app = create_app(store, [], console=False, dreams=False, uploads=uploads)
    slow, other = _key(store, "slow"), _key(store, "other")

    def scope(key: str) -> dict[str, Any]:
        return {"type": "http", "method": "POST", "path": "/v1/memory_stores",
                "raw_path": b"/v1/memory_stores", "query_string": b"",
                "headers": [(b"x-api-key", key.encode()), (b"host", b"t"),
                            (b"content-type", b"application/json")],
                "http_version": "1.1", "scheme": "http", "server": ("t", 80),
                "client": ("10.0.0.1", 1), "root_path": ""}

    async def stalled(key: str) -> None:
        async def receive() -> dict[str, Any]:
            await trio.sleep_forever()
            raise AssertionError

        async def send(message: dict[str, Any]) -> None:
            pass

        await app(scope(key), receive, send)

    async def upload(key: str, name: str) -> tuple[int, bytes]:
        sent: list[dict[str, Any]] = []
        body = [{"type": "http.request", "body": f'{{"name": "{name}"}}'.encode(),
                 "more_body": False}]

        async def receive() -> dict[str, Any]:
            if body:
                return body.pop(0)
            await trio.sleep_forever()
            raise AssertionError

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        with trio.fail_after(10):
            await app(scope(key), receive, send)
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])

    async with trio.open_nursery() as nursery:
        for _ in range(2):
            before = uploads.active
            nursery.start_soon(stalled, slow)
            await async_wait_until(lambda: uploads.active != before, 5)  # noqa: B023
        status, body = await upload(slow, "third")
        assert status == 429, body
        assert b"too_many_unfinished_requests" in body
        status, body = await upload(other, "served")
        assert status == 200, body
        nursery.cancel_scope.cancel()
    assert uploads.statistics() == {"active": 0, "clients": 0, "keys": 0}
    assert (await upload(slow, "later"))[0] == 200
    names = {s.name for s in store.stores.list(workspace="team-a").data}
    assert names == {"served", "later"}
