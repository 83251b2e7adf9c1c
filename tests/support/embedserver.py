"""A scripted embeddings service on loopback, for the tests of the HTTP providers: it speaks
Ollama's ``POST /api/embed`` and OpenAI's ``POST /v1/embeddings``, with vectors computed by the
local model (so that what it answers ranks for real), and can be told to hang (accept, read
the request, never answer) or to fail (HTTP 500). It records every request it gets."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Scripted:
    """The service's state: ``mode`` is ``answer``, ``hang`` or ``fail``."""

    def __init__(self) -> None:
        self.mode = "answer"
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.released = threading.Event()  # set at the end: hanging handlers return
        self.port = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def vectors(self, texts: list[str]) -> list[list[float]]:
        from memfs.recall.embeddings import local

        e5 = local()._engine()
        return [[float(x) for x in e5.query([t]).reshape(-1)] for t in texts]


def _handler(state: Scripted) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            state.requests.append((self.path, body))
            if state.mode == "hang":
                state.released.wait(60)
                return
            if state.mode == "fail":
                self._send(500, {"error": "the model is not loaded"})
                return
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            vectors = state.vectors(texts)
            if self.path == "/api/embed":
                self._send(200, {"model": body["model"], "embeddings": vectors})
            elif self.path == "/v1/embeddings":
                self._send(200, {"object": "list", "model": body["model"], "data": [
                    {"object": "embedding", "index": i, "embedding": v}
                    for i, v in enumerate(vectors)]})
            else:
                self._send(404, {"error": f"no {self.path}"})

        def _send(self, status: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def scripted_service() -> Iterator[Scripted]:
    """A :class:`Scripted` service on a free loopback port, for the ``with`` block."""
    state = Scripted()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.released.set()
        server.shutdown()
        server.server_close()
