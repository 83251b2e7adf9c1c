"""Another workspace's ids where a request names them beside its own objects (issue 22: "its
existence never leaks: same body"): a key of workspace B asking about its own store or session
with an id of workspace A's in the path, the query, the body or the acting-session header gets
what it gets for an unknown id of the same shape: the same status, the same body but for the
id and the request id, and nothing changes. On SQLite and PostgreSQL, in-process. (A's objects
in the path itself: the access matrix, test_access_matrix.py; the timing: the integration
tests of workspaces.)"""

from __future__ import annotations

import io
import json
import random
import re
import string
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from starlette.testclient import TestClient

from memfs.api import SESSION_HEADER, create_app
from memfs.models import Actor
from memfs.store import Store
from tests.support.dbstate import changed, snapshot

A, B = "team-a", "team-b"
USER = Actor.user("user_ids")


@dataclass
class Ids:
    """Workspace A's objects (the ids B must not learn of) and B's own."""

    store: str
    name: str
    memory: str
    version: str
    session: str
    resource: str
    agent: str
    b_store: str
    b_session: str
    b_key: str = field(repr=False)


@pytest.fixture
def world(backend: Any) -> Iterator[tuple[Store, Ids]]:
    s = backend.open()
    store = s.stores.create("a secret name", workspace=A)
    m = s.memories.create(store.id, "/a.md", "a", actor=USER)
    sess = s.sessions.create([{"type": "memory_store", "memory_store_id": store.id}],
                            workspace=A)
    s.memories.write_path(store.id, "/by-session.md", "x", actor=Actor.session(sess.id))
    agent = s.agents.create(name="agent", model="claude-x", workspace=A)["id"]
    b_store = s.stores.create("b's notes", workspace=B).id
    s.memories.create(b_store, "/b.md", "b", actor=USER)
    b_session = s.sessions.create([{"type": "memory_store", "memory_store_id": b_store}],
                                 workspace=B).id
    key = s.keys.create("b-admin", workspace=B, role="admin").key
    assert key is not None
    yield s, Ids(store.id, store.name, m.id, m.memory_version_id, sess.id,
                 sess.resources[0].id, agent, b_store, b_session, key)


@dataclass(frozen=True)
class Ask:
    """A request of B naming one id of A, ``named`` (``{id}`` in its path, query, body or
    headers: that id, then an unknown one)."""

    named: str
    method: str
    path: str
    params: dict[str, str] | None = None
    json: Any = None
    zip_into: bool = False
    headers: dict[str, str] | None = None


def _fill(value: Any, oid: str) -> Any:
    if isinstance(value, str):
        return value.replace("{id}", oid)
    if isinstance(value, dict):
        return {k: _fill(v, oid) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, oid) for v in value]
    return value


def _zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("x.md", "x")
    return out.getvalue()


def _in_b(i: Ids, tail: str) -> str:
    return f"/v1/memory_stores/{i.b_store}{tail}"


#: Each case: what of A a request of B names, and that request.
CASES: dict[str, Callable[[Ids], Ask]] = {
    "a memory, in B's store": lambda i: Ask(i.memory, "GET", _in_b(i, "/memories/{id}")),
    "a memory updated in B's store": lambda i: Ask(
        i.memory, "POST", _in_b(i, "/memories/{id}"), json={"content": "z"}),
    "a memory deleted in B's store": lambda i: Ask(i.memory, "DELETE",
                                                   _in_b(i, "/memories/{id}")),
    "a version, in B's store": lambda i: Ask(i.version, "GET",
                                             _in_b(i, "/memory_versions/{id}")),
    "a version redacted in B's store": lambda i: Ask(
        i.version, "POST", _in_b(i, "/memory_versions/{id}/redact")),
    "a version restored in B's store": lambda i: Ask(
        i.version, "POST", _in_b(i, "/memory_versions/{id}/memfs/restore"), json={}),
    "a version as a snapshot's boundary": lambda i: Ask(
        i.version, "GET", _in_b(i, "/memfs/snapshot"), params={"at": "{id}"}),
    "a session as a snapshot's boundary": lambda i: Ask(
        i.session, "GET", _in_b(i, "/memfs/snapshot"), params={"at": "{id}"}),
    "a resource of B's session": lambda i: Ask(
        i.resource, "GET", f"/v1/sessions/{i.b_session}/resources/{{id}}"),
    "a store as a resource of B's session": lambda i: Ask(
        i.store, "GET", f"/v1/sessions/{i.b_session}/resources/{{id}}"),
    "a store attached to a new session": lambda i: Ask(i.store, "POST", "/v1/sessions", json={
        "resources": [{"type": "memory_store", "memory_store_id": "{id}"}]}),
    "an agent of a new session": lambda i: Ask(i.agent, "POST", "/v1/sessions",
                                               json={"agent": "{id}"}),
    "a session dreamt of with B's store": lambda i: Ask(i.session, "POST", "/v1/dreams", json={
        "model": "m", "inputs": [{"type": "memory_store", "memory_store_id": i.b_store},
                                 {"type": "sessions", "session_ids": ["{id}"]}]}),
    "a store dreamt of with B's session": lambda i: Ask(i.store, "POST", "/v1/dreams", json={
        "model": "m", "inputs": [{"type": "memory_store", "memory_store_id": "{id}"},
                                 {"type": "sessions", "session_ids": [i.b_session]}]}),
    "a store resolved by id": lambda i: Ask(i.store, "GET", "/v1/memfs/resolve_store",
                                            params={"ref": "{id}"}),
    "a store resolved by name": lambda i: Ask(i.name, "GET", "/v1/memfs/resolve_store",
                                              params={"ref": "{id}"}),
    "a store imported into": lambda i: Ask(i.store, "POST", "/v1/memfs/import",
                                           params={"into": "{id}"}, zip_into=True),
    "a store a new key is scoped to": lambda i: Ask(i.store, "POST", "/v1/memfs/keys", json={
        "name": "k", "memory_store_ids": ["{id}"]}),
    "a session a mount of B's store writes as": lambda i: Ask(
        i.session, "POST", _in_b(i, "/memfs/write"), json={"path": "/w.md", "content": "w"},
        headers={SESSION_HEADER: "{id}"}),
    "a session a mount of B's store asks as": lambda i: Ask(
        i.session, "POST", _in_b(i, "/memfs/check_can_create"), json={},
        headers={SESSION_HEADER: "{id}"}),
    "a store whose sessions are listed": lambda i: Ask(
        i.store, "GET", "/v1/sessions", params={"memory_store_id": "{id}"}),
    "a session whose versions of B's store are listed": lambda i: Ask(
        i.session, "GET", _in_b(i, "/memory_versions"), params={"session_id": "{id}"}),
    "a memory whose versions of B's store are listed": lambda i: Ask(
        i.memory, "GET", _in_b(i, "/memory_versions"), params={"memory_id": "{id}"}),
}


def unknown_like(oid: str) -> str:
    """An id of the same shape that names nothing: the prefix kept, the rest random."""
    prefix, sep, rest = oid.rpartition("_") if "_" in oid else ("", "", oid)
    alphabet = string.ascii_letters + string.digits if sep else string.ascii_lowercase
    return prefix + sep + "".join(random.choice(alphabet) for _ in rest)


def _shown(status: int, body: bytes, oid: str) -> tuple[int, Any]:
    """The answer with the named id and the request id taken out."""
    data = json.loads(body.decode().replace(oid, "<id>"))
    if isinstance(data, dict):
        data.pop("request_id", None)
        if status == 200:  # an object made by each request: its own id and times
            for name in ("id", "created_at", "updated_at"):
                data.pop(name, None)
    return status, data


def _ask(tc: TestClient, ask: Ask, oid: str, key: str) -> tuple[int, bytes]:
    headers = {"x-api-key": key, **_fill(ask.headers or {}, oid)}
    r = tc.request(ask.method, _fill(ask.path, oid), params=_fill(ask.params, oid),
                   json=_fill(ask.json, oid), content=_zip() if ask.zip_into else None,
                   headers=headers)
    return r.status_code, r.content


@pytest.mark.parametrize("case", sorted(CASES))
def test_another_workspace_s_id_is_an_unknown_one(world: tuple[Store, Ids], case: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    store, ids = world
    ask = CASES[case](ids)
    theirs = ask.named
    unknown = unknown_like(theirs)
    assert unknown != theirs and len(unknown) == len(theirs)
    with TestClient(create_app(store, [], console=False, dreams=False)) as tc:
        before = snapshot(store)
        got = _ask(tc, ask, theirs, ids.b_key)
        after = snapshot(store)
        assert before == after or got[0] == 200, f"changed: {changed(before, after)}"
        baseline = _ask(tc, ask, unknown, ids.b_key)
    assert got[0] == baseline[0], (got, baseline)
    assert _shown(*got, theirs) == _shown(*baseline, unknown)
    if got[0] == 200:  # a listing or a filter: none of A's objects in it
        assert not re.search("|".join(map(re.escape, (ids.store, ids.session, ids.memory,
                                                      ids.version))), got[1].decode())


def test_restoring_over_another_workspace_s_store_names_nothing_of_it(
        world: tuple[Store, Ids]) -> None:
    """An exact restore (ids kept) of an archive whose store id another workspace holds is
    refused, as ids are the server's (409): that cannot be hidden from who holds the
    archive, but the store's name now (renamed since the export) is not told."""
    from memfs import transfer

    store, ids = world
    archive = b"".join(transfer.export_archive(store, ids.store, history=False))
    store.stores.update(ids.store, name="renamed since")
    with TestClient(create_app(store, [], console=False, dreams=False)) as tc:
        before = snapshot(store)
        r = tc.post("/v1/memfs/import", content=archive, headers={"x-api-key": ids.b_key})
        assert snapshot(store) == before
    assert r.status_code == 409, r.text
    assert "renamed since" not in r.text
