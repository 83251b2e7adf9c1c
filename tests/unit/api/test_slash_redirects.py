"""Trailing-slash redirects (issue 38 S5): Starlette's redirected ``/v1/memory_stores/`` to an
absolute URL built from the request's ``Host`` header, so a forged Host sent the client (and
its key, on a retry) elsewhere. The API takes its paths exactly (a trailing slash is its 404);
the Console, where people type paths, redirects with a relative Location, the query kept."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from memfs.api import create_app
from memfs.store import Store

KEY = "sk-slash-redirects-0123"


@pytest.fixture
def store(tmp_path: Any) -> Store:
    return Store(str(tmp_path / "memfs.db"))


def test_no_redirect_names_the_host_of_the_request(store):
    app = create_app(store, [KEY])
    with TestClient(app, base_url="http://evil.example", follow_redirects=False) as c:
        r = c.get("/v1/memory_stores/", headers={"x-api-key": KEY})
        assert r.status_code == 404, (r.status_code, r.headers)
        assert r.json()["error"]["type"] == "not_found_error"
        assert "location" not in r.headers
        r = c.get("/stores/?archived=1")
        assert r.status_code in (307, 308), r.text
        assert r.headers["location"] == "/stores?archived=1"
        r = c.get("/signin/")
        assert r.headers["location"] == "/signin"
        assert "evil.example" not in r.headers.get("location", "")
