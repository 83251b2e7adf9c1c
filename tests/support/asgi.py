"""The API app in-process behind an httpx transport: a :class:`memfs.client.Client` (or any
httpx client) talks to a starlette ``TestClient`` as it would to ``memfs serve``."""

from __future__ import annotations

import httpx
from starlette.testclient import TestClient


def through(tc: TestClient) -> httpx.MockTransport:
    """A MockTransport that hands every request to the app behind ``tc`` (in-process)."""

    def handler(request: httpx.Request) -> httpx.Response:
        r = tc.request(request.method, str(request.url), headers=dict(request.headers),
                       content=request.content)
        return httpx.Response(r.status_code, headers=r.headers, content=r.content)

    return httpx.MockTransport(handler)
