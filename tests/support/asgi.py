"""The API app in-process behind an httpx transport: a :class:`memfs.client.Client` (or any
httpx client) talks to a starlette ``TestClient`` as it would to ``memfs serve``; and a live
stream of the app held open in a trio task (:class:`LiveRequest`)."""

from __future__ import annotations

from typing import Any

import httpx
import trio
from starlette.testclient import TestClient


def through(tc: TestClient) -> httpx.MockTransport:
    """A MockTransport that hands every request to the app behind ``tc`` (in-process)."""

    def handler(request: httpx.Request) -> httpx.Response:
        r = tc.request(request.method, str(request.url), headers=dict(request.headers),
                       content=request.content)
        return httpx.Response(r.status_code, headers=r.headers, content=r.content)

    return httpx.MockTransport(handler)


class LiveRequest:
    """A GET of ``path`` (a live stream) sent straight to an ASGI ``app`` in a trio task, held
    open until it ends or the task is cancelled: an httpx transport in-process shows nothing of
    a stream before it has ended. ``status`` and ``started`` once the answer began, the body
    messages in ``bodies``, and ``ended`` (trio's clock) and ``done`` once its body ended."""

    def __init__(self, app: Any, path: str, headers: dict[str, str]) -> None:
        self.app, self.path = app, path
        self.headers = [(b"host", b"live.test"), *((k.encode(), v.encode())
                                                   for k, v in headers.items())]
        self.status: int | None = None
        self.bodies: list[bytes] = []
        self.ended: float | None = None
        self.started, self.done = trio.Event(), trio.Event()

    @property
    def text(self) -> str:
        return b"".join(self.bodies).decode()

    async def run(self) -> None:
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "GET", "scheme": "http", "path": self.path,
                 "raw_path": self.path.encode(), "query_string": b"", "root_path": "",
                 "client": ("127.0.0.1", 1), "server": ("live.test", 80),
                 "headers": self.headers}
        asked = False

        async def receive() -> dict[str, Any]:
            nonlocal asked
            if not asked:
                asked = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await trio.sleep_forever()
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.status = message["status"]
                self.started.set()
            elif message["type"] == "http.response.body":
                self.bodies.append(message.get("body", b""))
                if not message.get("more_body", False):
                    self.ended = trio.current_time()
                    self.done.set()

        await self.app(scope, receive, send)


async def open_live(nursery: trio.Nursery, requests: list[LiveRequest]) -> None:
    """Start each of ``requests`` in ``nursery`` and wait until every one has begun its
    answer with 200 (10 s at most)."""
    for r in requests:
        nursery.start_soon(r.run)
    with trio.fail_after(10):
        for r in requests:
            await r.started.wait()
            assert r.status == 200, r.text
