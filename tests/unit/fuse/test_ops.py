"""Operations: the health probes (/healthz, /readyz) and structured logs (memfs.daemons.logs)."""

from __future__ import annotations

import json
import logging
import sys
import time

from starlette.testclient import TestClient

from memfs.api import create_app
from memfs.api.health import Health
from memfs.daemons import logs
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
    monkeypatch.setattr(store, "ping", lambda: time.sleep(3))  # the point: a database that hangs
    c = TestClient(Health(store, timeout=0.2))
    t = time.monotonic()
    r = c.get("/readyz")
    assert time.monotonic() - t < 2
    assert r.status_code == 503 and r.json()["database"] == "no answer within 0.2 s"


def _record(msg: str, **kw) -> logging.LogRecord:
    return logging.LogRecord("memfs.x", logging.WARNING, __file__, 1, msg, (), None, **kw)


def test_json_lines_carry_time_level_logger_message_fields_and_traceback() -> None:
    f = logs.JsonFormatter()
    r = _record("hello %s")
    r.args = ("you",)
    r.fields = {"store": "memstore_1", "message": "not overwritten"}
    out = json.loads(f.format(r))
    assert out["message"] == "hello you" and out["level"] == "WARNING"
    assert out["logger"] == "memfs.x" and out["store"] == "memstore_1"
    assert out["time"].endswith("Z") and "\n" not in f.format(r)
    try:
        raise ValueError("boom")
    except ValueError:
        r = logging.LogRecord("memfs.x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    out = json.loads(f.format(r))
    assert "ValueError: boom" in out["exc"]


def test_access_fields_never_carry_headers_or_the_query() -> None:
    scope = {
        "type": "http", "method": "GET", "path": "/v1/memory_stores",
        "query_string": b"api_key=secret-in-query",
        "headers": [(b"x-api-key", b"secret-in-header")], "client": ("127.0.0.1", 5000),
    }
    response = {"status": 200, "headers": [(b"request-id", b"req_1"),
                                           (b"content-length", b"12")]}
    f = logs.access_fields(scope, response, 0.0123)
    assert f == {"method": "GET", "path": "/v1/memory_stores", "status": 200,
                 "duration_ms": 12.3, "bytes": 12, "client": "127.0.0.1:5000",
                 "request_id": "req_1"}
    assert "secret" not in json.dumps(f)
    assert logs.access_fields(scope, None, 0.5)["status"] is None
