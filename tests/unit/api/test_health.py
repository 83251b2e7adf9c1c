"""The health probes of ``memfs serve`` (/healthz, /readyz: memfs.api.health)."""

from __future__ import annotations

import threading

from starlette.testclient import TestClient

from memfs.api import create_app
from memfs.api.health import Health
from memfs.store import Store

KEY = "ops-key"


def test_healthz_answers_without_a_key(store) -> None:
    with TestClient(create_app(store, [KEY])) as c:
        r = c.get("/healthz")
        assert r.status_code == 200 and r.json() == {"status": "ok"}
        assert r.headers["cache-control"] == "no-store"
        assert c.head("/healthz").status_code == 200
        r = c.post("/healthz")
        assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"
        # Everything else still needs the key (or goes to the Console's sign-in).
        assert c.get("/v1/memory_stores").status_code == 401


def test_readyz_is_200_while_the_database_answers_and_503_when_it_is_gone(
        tmp_path, error_logs) -> None:
    store = Store(tmp_path / "a.db")
    try:
        with TestClient(create_app(store, [KEY])) as c:
            r = c.get("/readyz")
            assert r.status_code == 200 and r.json() == {"status": "ready", "database": "ok"}
            (tmp_path / "a.db").unlink()
            r = c.get("/readyz")
            assert r.status_code == 503, r.text
            assert r.json()["status"] == "unavailable"
            assert "a.db" not in r.text  # no path of the database to a caller without a key
        # The database said so at ERROR, once.
        assert ["deleted while in use" in r.getMessage() for r in error_logs] == [True]
    finally:
        store.close()


def test_readyz_gives_up_on_a_database_that_hangs(store, monkeypatch) -> None:
    """The database answers only once the probe has answered: a probe that waited for it would
    get its "ok" (after a minute) and say 200, so the 503 shows it gave up, with no clock."""
    released = threading.Event()
    monkeypatch.setattr(store, "ping", lambda: released.wait(60))  # a database that hangs
    try:
        r = TestClient(Health(store, timeout=0.2)).get("/readyz")
    finally:
        released.set()
    assert r.status_code == 503 and r.json()["database"] == "no answer within 0.2 s"
