"""Failed authentication is throttled per client address (issue 38 S4), on the API and on the
Console's sign-in: past :data:`memfs.api.limits.FAILURES_BURST` failed attempts an address gets
429 (the API's error envelope, ``retry-after``) until its budget refills, even with a good key
(else guessing would go on, only slower to be told), while another address is served. In
process, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from memfs.api import create_app
from memfs.api.limits import FAILURES_BURST, FAILURES_RATE, AuthFailures
from memfs.store import Store

KEY = "sk-failures-0123456789"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(backend: Any) -> Store:
    return backend.open()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def app(store: Store, clock: Clock) -> Any:
    return create_app(store, [KEY], failures=AuthFailures(clock=clock))


def _client(app: Any, address: str) -> TestClient:
    return TestClient(app, client=(address, 40000), base_url="http://memfs.test",
                      follow_redirects=False)


def test_failed_keys_are_throttled_per_address_on_the_api(app, store, clock):
    stored = store.keys.create("good").key
    with _client(app, "10.0.0.1") as guesser, _client(app, "10.0.0.2") as other:
        for i in range(int(FAILURES_BURST)):
            r = guesser.get("/v1/memory_stores", headers={"x-api-key": f"guess-{i}"})
            assert r.status_code == 401, (i, r.text)
        r = guesser.get("/v1/memory_stores", headers={"x-api-key": "one more"})
        assert r.status_code == 429, r.text
        assert r.json()["type"] == "error"
        assert r.json()["error"]["type"] == "rate_limit_error"
        assert "failed" in r.json()["error"]["message"]
        assert int(r.headers["retry-after"]) >= 1
        assert r.headers["request-id"].startswith("req_")
        # Even a good server key, from that address: guessing would go on otherwise.
        r = guesser.get("/v1/memory_stores", headers={"x-api-key": KEY})
        assert r.status_code == 429, r.text
        # What memfs generated is no guess: a stored key (or a session token) is served
        # from it all the same, and another address's clients behind one NAT are not locked
        # out with it; a wrong one is a 401, and costs nothing.
        assert guesser.get("/v1/memory_stores", headers={"x-api-key": stored}).status_code == 200
        for i in range(int(FAILURES_BURST) + 5):
            r = other.get("/v1/memory_stores", headers={"x-api-key": f"memfs_key_junk{i}"})
            assert r.status_code == 401, r.text
        # Another address is served, and may fail on its own budget.
        assert other.get("/v1/memory_stores", headers={"x-api-key": KEY}).status_code == 200
        assert other.get("/v1/memory_stores", headers={"x-api-key": "x"}).status_code == 401
        # Once the budget refills, the address is served again.
        clock.now += 2 / FAILURES_RATE
        assert guesser.get("/v1/memory_stores", headers={"x-api-key": KEY}).status_code == 200
        # A request with no key at all is no guess: never counted.
        for _ in range(int(FAILURES_BURST) + 5):
            assert other.get("/v1/memory_stores").status_code == 401


def test_failed_console_sign_ins_are_throttled_per_address(app, clock):
    with _client(app, "10.0.0.3") as guesser, _client(app, "10.0.0.4") as other:
        for i in range(int(FAILURES_BURST)):
            r = guesser.post("/signin", data={"api_key": f"guess-{i}"})
            assert r.status_code == 401, (i, r.status_code)
        r = guesser.post("/signin", data={"api_key": KEY})
        assert r.status_code == 429, r.text
        assert int(r.headers["retry-after"]) >= 1
        assert "failed" in r.text
        # The API counts the same failures: the address is throttled there too.
        assert guesser.get("/v1/memory_stores", headers={"x-api-key": KEY}).status_code == 429
        r = other.post("/signin", data={"api_key": KEY})
        assert r.status_code == 303, r.text
        clock.now += 2 / FAILURES_RATE
        assert guesser.post("/signin", data={"api_key": KEY}).status_code == 303


def test_a_revoked_key_s_retries_are_no_guesses(app, store):
    """A mount whose key was revoked retries with it: that is no guess, and must not throttle
    the other clients of its machine (the same address)."""
    revoked = store.keys.create("revoked")
    store.keys.revoke(revoked.id)
    with _client(app, "10.0.0.5") as c:
        for _ in range(int(FAILURES_BURST) + 5):
            r = c.get("/v1/memory_stores", headers={"x-api-key": revoked.key})
            assert r.status_code == 401, r.text
        assert c.get("/v1/memory_stores", headers={"x-api-key": KEY}).status_code == 200


def test_a_unix_socket_and_ipv6_neighbours(app, store):
    """The session API's callers share a unix socket (no address): one of them must not lock
    out the others. IPv6 counts by /64: a client has all of its own and may not rotate
    through it."""
    with _client(app, "") as socket_caller:
        for i in range(int(FAILURES_BURST) + 5):
            r = socket_caller.get("/v1/memory_stores", headers={"x-api-key": f"guess-{i}"})
            assert r.status_code == 401, r.text
        assert socket_caller.get("/v1/memory_stores",
                                 headers={"x-api-key": KEY}).status_code == 200
    for i in range(int(FAILURES_BURST)):
        with _client(app, f"2001:db8::{i + 1:x}") as rotating:
            r = rotating.get("/v1/memory_stores", headers={"x-api-key": f"guess-{i}"})
            assert r.status_code == 401, r.text
    with _client(app, "2001:db8::ffff") as same_64, _client(app, "2001:db8:1::1") as next_64:
        assert same_64.get("/v1/memory_stores", headers={"x-api-key": KEY}).status_code == 429
        assert next_64.get("/v1/memory_stores", headers={"x-api-key": KEY}).status_code == 200
