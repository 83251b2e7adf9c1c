"""Structured logs (memfs.logs): JSON lines and the access log's fields."""

from __future__ import annotations

import json
import logging
import sys

from memfs.daemons import logs


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
