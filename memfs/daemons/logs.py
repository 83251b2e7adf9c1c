"""Logging of the memfs commands: plain text for people, or one JSON object per line for log
collectors (``memfs --log-format json …``, or ``MEMFS_LOG_FORMAT=json``).

In text, a warning or an error is one line like the CLI's own errors, ``memfs: warning: …``
(:class:`TextFormatter`); the INFO and DEBUG lines ``-v`` adds carry the time and the logger.
What a command says to the person running it (:func:`say`: the address a server listens on, a
key it generated, a one-line error) is ``memfs: …`` in text, and a JSON line like every other
in the JSON format, so that a log collector reads every line of stderr.

A JSON line holds ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, the process
id, ``exc`` (a traceback, when there is one) and the fields a caller passes with
``extra={"fields": {...}}``. ``memfs serve`` logs one access line per request at INFO (``-v``)
through :class:`AccessLogger`: method, path, status, duration, response bytes, client and the
``request-id`` the client received, never a header or a query string (they may carry keys).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

FORMATS = ("text", "json")

TEXT_FORMAT = "%(asctime)s %(name)s %(levelname)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            for k, v in fields.items():
                out.setdefault(k, v)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        return json.dumps(out, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """People's format: a warning or an error is one line, ``memfs: warning: <message>`` (an
    exception, if any, in parentheses; its traceback only at DEBUG level, ``-vv``); INFO and
    DEBUG lines keep :data:`TEXT_FORMAT`."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        if record.levelno < logging.WARNING:
            return super().format(record)
        text = " ".join(f"memfs: {record.levelname.lower()}: {record.getMessage()}".split("\n"))
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            if logging.getLogger().isEnabledFor(logging.DEBUG):
                return f"{text}\n{self.formatException(record.exc_info)}"  # type: ignore[arg-type]
            text += f" ({type(exc).__name__}: {exc})"
        return text


#: The format :func:`configure` set last (what :func:`say` writes).
_format = "text"


def configure(level: int, fmt: str = "text") -> None:
    """Log to stderr at ``level`` in ``fmt`` (one of :data:`FORMATS`)."""
    global _format
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level)
    _format = fmt


def say(line: str, level: int = logging.INFO, **fields: Any) -> None:
    """Tell the person running the command ``line`` on stderr, whatever the log level:
    ``memfs: <line>`` in text, a JSON object (logger ``memfs``, ``fields`` with it) in the JSON
    format. A leading ``memfs: `` of ``line`` is not repeated."""
    message = line.removeprefix("memfs: ")
    if _format == "json":
        record = logging.LogRecord("memfs", level, "", 0, message, None, None)
        record.fields = fields
        out = JsonFormatter().format(record)
    else:
        out = f"memfs: {message}"
    sys.stderr.write(out + "\n")
    sys.stderr.flush()


def access_fields(scope: dict[str, Any], response: dict[str, Any] | None,
                  seconds: float) -> dict[str, Any]:
    """The fields of one access line: nothing a request's sender could use to hide a key in
    (no header but the server's own ``request-id``, no query string)."""
    client = scope.get("client")
    request_id = None
    status = None
    size = None
    if response is not None:
        status = response.get("status")
        for name, value in response.get("headers", ()):
            if name == b"request-id":
                request_id = value.decode("latin1")
            elif name == b"content-length":
                size = int(value) if value.isdigit() else None
    return {
        "method": scope.get("method", "GET") if scope.get("type") == "http" else "WEBSOCKET",
        "path": scope.get("path", ""),
        "status": status,
        "duration_ms": round(seconds * 1000, 2),
        "bytes": size,
        "client": f"{client[0]}:{client[1]}" if client and len(client) == 2 else None,
        "request_id": request_id,
    }
