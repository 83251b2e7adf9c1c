"""An empty query value is refused (issue 38 S6): ``?limit=`` was read as no limit and
``?path_prefix=`` as no prefix, so a client's empty variable silently widened what it asked
for. A declared parameter given with no value is a 400 naming it."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from memfs.api import create_app
from memfs.store import Store

KEY = "sk-empty-query-0123456"


@pytest.fixture
def client(tmp_path: Any):
    store = Store(str(tmp_path / "memfs.db"))
    sid = store.stores.create("Notes").id
    with TestClient(create_app(store, [KEY]), headers={"x-api-key": KEY}) as c:
        yield c, sid


@pytest.mark.parametrize("query, name", [
    ("limit=", "limit"),
    ("path_prefix=", "path_prefix"),
    ("view=", "view"),
    ("limit=5&page=", "page"),
])
def test_an_empty_query_value_is_a_400_naming_it(client, query, name):
    c, sid = client
    r = c.get(f"/v1/memory_stores/{sid}/memories?{query}")
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert name in r.json()["error"]["message"] and "empty" in r.json()["error"]["message"]
    # Left out, it is absent.
    assert c.get(f"/v1/memory_stores/{sid}/memories").status_code == 200


def test_an_empty_array_item_is_a_400(client):
    c, _ = client
    r = c.get("/v1/sessions?statuses[]=")
    assert r.status_code == 400, r.text
    assert "statuses" in r.json()["error"]["message"]
