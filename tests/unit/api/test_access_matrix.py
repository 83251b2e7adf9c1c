"""The access matrix of issue 22: every route of the route table (:data:`memfs.api.routes.OPS`)
× every kind of credential, on SQLite and PostgreSQL, in-process (starlette TestClient).

Each route has a request here (:data:`CASES`) whose objects exist in workspace A (a route added
to ``OPS`` without one fails :func:`test_every_route_has_a_request`). The status each credential
must get comes from the rules of :func:`expected`, written from the issue, not read from the
implementation; every refused request must leave the database as it was (:func:`snapshot`:
every table's rows hashed, ``api_keys.last_used_at`` aside), and another workspace's lists and
creations must leave workspace A's rows as they were. ``scripts/test -s -k access_matrix``
prints the matrix's counts."""

from __future__ import annotations

import io
import itertools
import json
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from starlette.testclient import TestClient

from memfs.api import create_app
from memfs.api.limits import AuthFailures
from memfs.api.routes import OPS, Op
from memfs.models import Actor
from memfs.store import Store
from tests.support.dbstate import changed, snapshot

A, B = "team-a", "team-b"
USER = Actor.user("user_matrix")

# --------------------------------------------------------------------------------------------
# the world: workspace A's objects, B's, and a key of each kind


class World:
    """Workspace A (stores ``s1``, the routes' store, and ``s2``; a memory, a session, a
    dream, an agent, an environment, keys of each kind) and workspace B (a store, a session,
    a dream and its admin key). :meth:`fresh_*` make new objects of A for the requests that
    change or delete theirs."""

    def __init__(self, store: Store) -> None:
        self.s = s = store
        self.n = itertools.count()
        self.s1 = s.stores.create("notes", workspace=A).id
        self.s2 = s.stores.create("other", workspace=A).id
        base = s.memories.create(self.s1, "/base.md", "alpha beta", actor=USER)
        self.memory, self.version = base.id, base.memory_version_id
        sess = s.sessions.create([
            {"type": "memory_store", "memory_store_id": self.s1},
            {"type": "memory_store", "memory_store_id": self.s2, "access": "read_only"},
        ], workspace=A)
        self.session, self.resource = sess.id, sess.resources[0].id
        self.dream = s.dreams.create(self._inputs(self.s1, self.session), "claude-test",
                                    workspace=A).id
        self.agent = s.agents.create(name="agent", model="claude-x", workspace=A)["id"]
        self.environment = s.agents.create_environment(name="env", workspace=A)["id"]
        self.admin = self.key("admin").key
        self.reader = self.key("read_only")
        self.scoped_other = self.key("read_write", stores=[self.s2]).key
        revoked = self.key("admin")
        s.keys.revoke(revoked.id)
        self.revoked = revoked.key
        expired = self.key("admin", expires_in=3600)
        with s.write() as c:  # an hour ago: waiting for a real expiry costs a second a test
            c.execute("UPDATE api_keys SET expires_at = ? WHERE id = ?",
                      ("2020-01-01T00:00:00.000000Z", expired.id))
        self.expired = expired.key
        # Workspace B: something of each listable kind, so that its lists are not empty.
        self.b_store = s.stores.create("notes", workspace=B).id
        self.b_session = s.sessions.create(
            [{"type": "memory_store", "memory_store_id": self.b_store}], workspace=B).id
        self.b_dream = s.dreams.create(self._inputs(self.b_store, self.b_session), "m",
                                      workspace=B).id
        s.dreams.cancel(self.b_dream)
        self.b_key = s.keys.create("b-admin", workspace=B, role="admin")
        self.other = self.b_key.key

    def key(self, role: str, ws: str = A, stores: list[str] | None = None,
            expires_in: int | None = None) -> Any:
        return self.s.keys.create(f"key {next(self.n)}", workspace=ws, role=role,
                                 store_ids=stores, expires_in=expires_in)

    @staticmethod
    def _inputs(store_id: str, session_id: str) -> list[dict[str, Any]]:
        return [{"type": "memory_store", "memory_store_id": store_id},
                {"type": "sessions", "session_ids": [session_id]}]

    def i(self) -> int:
        return next(self.n)

    def fresh_store(self) -> str:
        return self.s.stores.create(f"store {self.i()}", workspace=A).id

    def fresh_memory(self, path: str | None = None) -> Any:
        return self.s.memories.create(self.s1, path or f"/m{self.i()}.md", "one", actor=USER)

    def two_versions(self) -> tuple[str, str]:
        """A memory written twice: (its id, its first version: not its head)."""
        m = self.fresh_memory()
        self.s.memories.update(self.s1, m.id, content="two", actor=USER)
        return m.id, m.memory_version_id

    def fresh_session(self) -> str:
        return self.s.sessions.create(
            [{"type": "memory_store", "memory_store_id": self.s1}], workspace=A).id

    def session_that_wrote(self) -> str:
        sid = self.fresh_session()
        self.s.memories.write_path(self.s1, f"/by-session-{self.i()}.md", "x",
                                   actor=Actor.session(sid))
        return sid

    def ids_of(self, workspace: str) -> set[str]:
        """Every id of a store, session, dream, agent, environment and key of ``workspace``."""
        found: set[str] = set()
        for table in ("stores", "sessions", "dreams", "agents", "environments", "api_keys"):
            found |= {r["id"] for r in self.s.all(
                f"SELECT id FROM {table} WHERE workspace_id = ?", (workspace,))}
        return found


# --------------------------------------------------------------------------------------------
# one request per route (and a few variants)


@dataclass
class Req:
    """A request of a route: its path parameters (objects of A), query, body and headers.
    ``named``: A's objects it names in the query or body, ``(kind, id)`` (kind ``store`` or
    ``session``); ``store``: the store it is about (the path's, else the one it names)."""

    path: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] | None = None
    json: Any = None
    content: bytes | None = None
    named: tuple[tuple[str, str], ...] = ()
    store: str | None = None

    def __post_init__(self) -> None:
        if self.store is None:
            self.store = self.path.get("memory_store_id") or next(
                (i for k, i in self.named if k == "store"), None)


@dataclass(frozen=True)
class Case:
    """How to ask a route: ``build`` makes a request (new objects each time, for the routes
    that change them), ``ok`` is its status for an admin of A, ``kind`` says what it is:
    ``list`` (another workspace's key gets its own objects), ``create:<table>`` (another
    workspace's key makes the object in its own workspace), ``stream`` (SSE)."""

    build: Callable[[World], Req]
    ok: int = 200
    kind: str = ""
    label: str = ""


def _tool_pair(w: World) -> list[dict[str, Any]]:
    n, at = w.i(), "2026-01-01T00:00:00.000000Z"
    return [
        {"type": "agent.tool_use", "id": f"sevt_u{n}", "name": "bash", "processed_at": at,
         "input": {"operation": "write", "file_path": "/mnt/memory/n/a.md", "pid": 1}},
        {"type": "agent.tool_result", "id": f"sevt_r{n}", "tool_use_id": f"sevt_u{n}",
         "processed_at": at, "is_error": False, "content": [{"type": "text", "text": "ok"}]},
    ]


def _zip(w: World) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(f"imported-{w.i()}.md", "imported")
    return out.getvalue()


def _reverted(w: World) -> str:
    """The id of a revert of a session that wrote a memory (undoing it is a revert too)."""
    done = w.s.undo.revert(w.session_that_wrote(), actor=USER)
    return str(done["id"])


def _pending_dream(w: World) -> str:
    return w.s.dreams.create(w._inputs(w.s1, w.session), "claude-test", workspace=A).id


def _ended_dream(w: World) -> str:
    d = _pending_dream(w)
    w.s.dreams.cancel(d)
    return d


S = {"memory_store_id"}
_MS, _SES, _DRM, _KEYS = "/v1/memory_stores", "/v1/sessions", "/v1/dreams", "/v1/memfs/keys"
_ST = _MS + "/{memory_store_id}"
_MEM, _VER = _ST + "/memories", _ST + "/memory_versions"
_SS = _SES + "/{session_id}"


def _s1(w: World, **kw: Any) -> Req:
    return Req({"memory_store_id": w.s1}, **kw)


def _mem(w: World, memory_id: str, **kw: Any) -> Req:
    return Req({"memory_store_id": w.s1, "memory_id": memory_id}, **kw)


def _ver(w: World, version_id: str, **kw: Any) -> Req:
    return Req({"memory_store_id": w.s1, "memory_version_id": version_id}, **kw)


def _ses(session_id: str, **kw: Any) -> Req:
    return Req({"session_id": session_id}, **kw)


def _rsc(w: World) -> Req:
    return Req({"session_id": w.session, "resource_id": w.resource})


CASES: dict[tuple[str, str], list[Case]] = {
    ("POST", _MS): [Case(lambda w: Req(json={"name": f"new {w.i()}"}), kind="create:stores")],
    ("GET", _MS): [Case(lambda w: Req(), kind="list")],
    ("GET", _ST): [Case(lambda w: _s1(w))],
    ("POST", _ST): [Case(lambda w: _s1(w, json={"description": f"d{w.i()}"}))],
    ("DELETE", _ST): [Case(lambda w: Req({"memory_store_id": w.fresh_store()}))],
    ("POST", _ST + "/archive"): [Case(lambda w: Req({"memory_store_id": w.fresh_store()}))],
    ("POST", _MEM): [Case(lambda w: _s1(w, json={"path": f"/new{w.i()}.md", "content": "x"}))],
    ("GET", _MEM): [Case(lambda w: _s1(w))],
    ("GET", _MEM + "/{memory_id}"): [Case(lambda w: _mem(w, w.memory))],
    ("POST", _MEM + "/{memory_id}"): [
        Case(lambda w: _mem(w, w.fresh_memory().id, json={"content": "changed"}))],
    ("DELETE", _MEM + "/{memory_id}"): [Case(lambda w: _mem(w, w.fresh_memory().id))],
    ("GET", _VER): [Case(lambda w: _s1(w))],
    ("GET", _VER + "/{memory_version_id}"): [Case(lambda w: _ver(w, w.version))],
    ("POST", _VER + "/{memory_version_id}/redact"): [
        Case(lambda w: _ver(w, w.two_versions()[1]))],
    ("POST", "/v1/agents"): [Case(lambda w: Req(json={"name": "a", "model": "claude-x"}),
                                  kind="create:agents")],
    ("GET", "/v1/agents/{agent_id}"): [Case(lambda w: Req({"agent_id": w.agent}))],
    ("POST", "/v1/environments"): [Case(lambda w: Req(json={"name": "e"}),
                                        kind="create:environments")],
    ("GET", "/v1/environments/{environment_id}"): [
        Case(lambda w: Req({"environment_id": w.environment}))],
    ("POST", _SES): [
        Case(lambda w: Req(json={"resources": [{"type": "memory_store",
                                                "memory_store_id": w.s1}]},
                           named=(("store", w.s1),)), label="a store of A attached"),
        Case(lambda w: Req(json={"title": "t"}), kind="create:sessions", label="no store"),
    ],
    ("GET", _SES): [Case(lambda w: Req(), kind="list")],
    ("GET", _SS): [Case(lambda w: _ses(w.session))],
    ("POST", _SS): [Case(lambda w: _ses(w.session, json={"title": f"t{w.i()}"}))],
    ("DELETE", _SS): [Case(lambda w: _ses(w.fresh_session()))],
    ("POST", _SS + "/archive"): [Case(lambda w: _ses(w.fresh_session()))],
    ("GET", _SS + "/resources"): [Case(lambda w: _ses(w.session))],
    ("POST", _SS + "/resources"): [
        Case(lambda w: _ses(w.session, json={"type": "file", "file_id": "f"}), ok=400)],
    ("GET", _SS + "/resources/{resource_id}"): [Case(_rsc)],
    ("POST", _SS + "/resources/{resource_id}"): [
        Case(lambda w: Req(_rsc(w).path, json={"authorization_token": "x"}), ok=400)],
    ("DELETE", _SS + "/resources/{resource_id}"): [Case(_rsc, ok=400)],
    ("GET", _SS + "/events"): [Case(lambda w: _ses(w.session))],
    ("POST", _SS + "/events"): [Case(lambda w: _ses(w.session, json={"events": [
        {"type": "user.message", "content": [{"type": "text", "text": "hi"}]}]}))],
    ("GET", _SS + "/events/stream"): [Case(lambda w: _ses(w.session), kind="stream")],
    ("POST", _DRM): [Case(lambda w: Req(
        json={"inputs": w._inputs(w.s1, w.session), "model": "claude-test"},
        named=(("store", w.s1), ("session", w.session))))],
    ("GET", _DRM): [Case(lambda w: Req(), kind="list")],
    ("GET", _DRM + "/{dream_id}"): [Case(lambda w: Req({"dream_id": w.dream}))],
    ("POST", _DRM + "/{dream_id}/archive"): [Case(lambda w: Req({"dream_id": _ended_dream(w)}))],
    ("POST", _DRM + "/{dream_id}/cancel"): [
        Case(lambda w: Req({"dream_id": _pending_dream(w)}))],
    ("POST", _SS + "/memfs/status"): [
        Case(lambda w: _ses(w.fresh_session(), json={"status": "running"}))],
    ("POST", _SS + "/memfs/revert"): [
        Case(lambda w: _ses(w.session_that_wrote(), json={}), label="a session"),
        Case(lambda w: _ses(_reverted(w), json={}), label="a revert (memrevert_ id)"),
    ],
    # A stored key mints tokens of the sessions it created only; this one is the server's.
    ("POST", _SS + "/memfs/tokens"): [Case(lambda w: _ses(w.session, json={}), ok=403)],
    ("POST", _VER + "/{memory_version_id}/memfs/restore"): [
        Case(lambda w: _ver(w, w.two_versions()[1], json={}))],
    ("GET", "/v1/memfs/limits"): [Case(lambda w: Req())],
    ("GET", "/v1/memfs/resolve_store"): [
        Case(lambda w: Req(params={"ref": w.s1}, named=(("store", w.s1),)))],
    ("GET", _ST + "/memfs/namesakes"): [Case(lambda w: _s1(w))],
    ("GET", _ST + "/memfs/search"): [Case(lambda w: _s1(w, params={"query": "alpha"}))],
    ("GET", _ST + "/memfs/search_status"): [Case(lambda w: _s1(w))],
    ("GET", _SS + "/memfs/search"): [Case(lambda w: _ses(w.session,
                                                         params={"query": "alpha"}))],
    ("GET", _ST + "/memfs/describe"): [Case(lambda w: _s1(w))],
    ("POST", _ST + "/memfs/expire"): [Case(lambda w: _s1(w, json={}))],
    ("POST", _ST + "/memfs/clear_type"): [
        Case(lambda w: _s1(w, json={"memory_type": "context"}))],
    ("GET", _ST + "/memfs/tree"): [Case(lambda w: _s1(w))],
    ("GET", _ST + "/memfs/snapshot"): [Case(lambda w: _s1(w, params={"at": w.version}))],
    ("GET", _ST + "/memfs/stats"): [Case(lambda w: _s1(w))],
    ("POST", _ST + "/memfs/check_can_create"): [Case(lambda w: _s1(w, json={}))],
    ("POST", _ST + "/memfs/write"): [
        Case(lambda w: _s1(w, json={"path": f"/w{w.i()}.md", "content": "x"}))],
    ("POST", _ST + "/memfs/delete"): [
        Case(lambda w: _s1(w, json={"path": w.fresh_memory().path}))],
    ("POST", _ST + "/memfs/rename"): [Case(lambda w: _s1(w, json={
        "old_path": w.fresh_memory().path, "new_path": f"/renamed{w.i()}.md"}))],
    ("POST", _ST + "/memfs/rename_prefix"): [Case(lambda w: _s1(w, json={
        "old_prefix": w.fresh_memory(f"/d{(n := w.i())}/a.md").path.rsplit("/", 1)[0] + "/",
        "new_prefix": f"/moved{n}/"}))],
    ("POST", _ST + "/memfs/delete_prefix"): [Case(lambda w: _s1(w, json={
        "prefix": w.fresh_memory(f"/gone{w.i()}/a.md").path.rsplit("/", 1)[0] + "/"}))],
    ("POST", _ST + "/memfs/events"): [Case(lambda w: _s1(w, json={"events": _tool_pair(w)}))],
    ("GET", _ST + "/memfs/export"): [Case(lambda w: _s1(w))],
    ("POST", "/v1/memfs/import"): [
        Case(lambda w: Req(params={"name": f"imported {w.i()}"}, content=_zip(w)),
             kind="create:stores", label="a new store"),
        Case(lambda w: Req(params={"into": w.s1}, content=_zip(w), named=(("store", w.s1),)),
             label="into a store of A"),
    ],
    ("GET", _ST + "/changes"): [Case(lambda w: _s1(w))],
    ("GET", _ST + "/changes/stream"): [Case(lambda w: _s1(w), kind="stream")],
    ("POST", _KEYS): [Case(lambda w: Req(json={"name": f"made {w.i()}", "role": "read_only"}),
                           kind="create:api_keys")],
    ("GET", _KEYS): [Case(lambda w: Req(), kind="list")],
    ("GET", _KEYS + "/{key_id}"): [Case(lambda w: Req({"key_id": w.reader.id}))],
    ("POST", _KEYS + "/{key_id}/revoke"): [
        Case(lambda w: Req({"key_id": w.key("read_only").id}))],
}


def test_every_route_has_a_request() -> None:
    """A route added to the route table must be added to the matrix, and the matrix names no
    route the server does not have."""
    routes = {(op.method, op.path) for op in OPS}
    assert routes - set(CASES) == set(), "routes with no request in the access matrix"
    assert set(CASES) - routes == set(), "requests of routes the server does not have"


# --------------------------------------------------------------------------------------------
# the rules: what each credential must get


#: The credentials, in the order the matrix asks with them. ``scoped: its store``: a read_write
#: key of A scoped to the request's store (n/a when it names none); ``scoped: another store``:
#: one scoped to another store of A; ``workspace header``: A's admin key sending
#: ``anthropic-workspace-id: team-b``.
CREDENTIALS = ("no key", "wrong key", "expired", "revoked", "other workspace",
               "workspace header", "read-only", "scoped: another store", "scoped: its store",
               "admin")


@dataclass(frozen=True)
class Outcome:
    """What a request must get: its status (and error type), and what must not change:
    ``unchanged`` the whole database, ``made_in_b`` A's rows (and the object it made is B's),
    ``hidden`` ids that must not appear in the answer (``seen``: some that must)."""

    status: int
    unchanged: bool = False
    made_in_b: str = ""
    hidden: frozenset[str] = frozenset()
    seen: frozenset[str] = frozenset()


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                403: "permission_error", 404: "not_found_error"}


def writes(op: Op) -> bool:
    """The issue's rule: a write is any method but GET, except a route a session token may
    call to read (recording a mount's tool events)."""
    return op.method != "GET" and op.token != "read"


def expected(cred: str, op: Op, case: Case, req: Req, w: World,
             scope: list[str] | None) -> Outcome:
    """The rules of issue 22 for one request."""
    refused = {"unchanged": True}
    if cred in ("no key", "wrong key", "expired", "revoked"):
        return Outcome(401, **refused)
    if cred == "workspace header":  # a key acts in its own workspace only
        return Outcome(403, **refused)
    if cred == "other workspace":  # A's objects do not exist for it
        if req.path or req.named:
            return Outcome(404, **refused)
        if case.kind == "list":
            return Outcome(case.ok, unchanged=True, hidden=frozenset(w.ids_of(A)),
                           seen=frozenset(w.ids_of(B) - {w.other}))
        if case.kind.startswith("create:"):
            return Outcome(case.ok, made_in_b=case.kind.split(":")[1])
        return Outcome(case.ok, unchanged=op.method == "GET")
    if cred == "read-only":
        if op.admin or writes(op):
            return Outcome(403, **refused)
        return Outcome(case.ok)
    if cred.startswith("scoped"):
        assert scope is not None
        # It sees its stores and no session (it lists none): another is as if unknown...
        if "session_id" in req.path or req.path.get("memory_store_id", scope[0]) not in scope:
            return Outcome(404, **refused)
        # ...then it may call only what a session token may, but a session's own routes.
        if op.token in ("", "session"):
            return Outcome(403, **refused)
        if any(kind == "session" or oid not in scope for kind, oid in req.named):
            return Outcome(404, **refused)
        if case.kind == "list":
            return Outcome(case.ok, unchanged=True, hidden=frozenset(w.ids_of(A) - set(scope)))
        return Outcome(case.ok)
    assert cred == "admin"
    return Outcome(case.ok)


def credential(cred: str, w: World, req: Req) -> tuple[dict[str, str], list[str] | None] | None:
    """The headers of ``cred`` for ``req`` and a scoped key's stores; None: not applicable."""
    key = {"no key": None, "wrong key": "memfs_key_" + "x" * 43, "expired": w.expired,
           "revoked": w.revoked, "other workspace": w.other, "workspace header": w.admin,
           "read-only": w.reader.key, "scoped: another store": w.scoped_other,
           "admin": w.admin}
    if cred == "scoped: its store":
        if req.store is None:
            return None
        return {"x-api-key": w.key("read_write", stores=[req.store]).key}, [req.store]
    headers = {} if key[cred] is None else {"x-api-key": str(key[cred])}
    if cred == "workspace header":
        headers["anthropic-workspace-id"] = B
    return headers, [w.s2] if cred == "scoped: another store" else None


# --------------------------------------------------------------------------------------------
# sending


@dataclass
class Answer:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def _open_stream(tc: TestClient, path: str, headers: dict[str, str]) -> Answer:
    """GET an SSE route in-process until its first frame, then hang up (the TestClient would
    wait for a live stream's end)."""

    async def drive() -> Answer:
        first = anyio.Event()
        started, status, body = False, 0, bytearray()

        async def receive() -> dict[str, Any]:
            nonlocal started
            if not started:
                started = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await first.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                body.extend(message.get("body", b""))
                if body or not message.get("more_body"):
                    first.set()

        scope = {"type": "http", "http_version": "1.1", "method": "GET", "path": path,
                 "raw_path": path.encode(), "query_string": b"", "root_path": "",
                 "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
                 "scheme": "http", "server": ("testserver", 80), "client": ("c", 1)}
        with anyio.fail_after(10):
            await tc.app(scope, receive, send)
        return Answer(status, bytes(body))

    answer: Answer = tc.portal.call(drive)  # type: ignore[union-attr]
    return answer


def send(tc: TestClient, op: Op, case: Case, req: Req, headers: dict[str, str]) -> Answer:
    path = op.path.format(**req.path)
    if case.kind == "stream":
        return _open_stream(tc, path, headers)
    r = tc.request(op.method, path, params=req.params, json=req.json, content=req.content,
                   headers=headers)
    return Answer(r.status_code, r.content)


# --------------------------------------------------------------------------------------------
# the matrix


@pytest.fixture
def store(backend: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    # A dream started by the matrix fails at once (no Messages API key), and no sweep for
    # stale dreams changes a row while the matrix compares them.
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setattr("memfs.dreams.dreamer.SWEEP_SECONDS", 1e6)
    yield backend.open()


def _cases() -> Iterator[tuple[Op, Case]]:
    for op in OPS:
        for case in CASES.get((op.method, op.path), ()):
            yield op, case


def _check(op: Op, case: Case, cred: str, want: Outcome, got: Answer,
           before: dict[str, Any], after: dict[str, Any], w: World) -> list[str]:
    """What is wrong with one answer (nothing: [])."""
    wrong = []
    if got.status != want.status:
        wrong.append(f"status {got.status}, not {want.status}: {got.body[:300]!r}")
    elif want.status >= 400:
        err = got.json()
        if err.get("type") != "error" or err["error"]["type"] != _ERROR_TYPES[want.status]:
            wrong.append(f"not a {_ERROR_TYPES[want.status]} envelope: {err}")
    if want.unchanged and before != after:
        wrong.append(f"changed the database: {changed(before, after)}")
    if want.made_in_b and before != after:
        wrong.append(f"changed workspace A: {changed(before, after)}")
    if want.made_in_b and got.status == 200:
        body = got.json()
        made = body["store"]["id"] if "store" in body else body["id"]
        row = w.s.one(f"SELECT workspace_id FROM {want.made_in_b} WHERE id = ?", (made,))
        if row is None or row["workspace_id"] != B:
            wrong.append(f"made {made} in {row and row['workspace_id']}, not in {B}")
    text = got.body.decode(errors="replace")
    if leaked := sorted(i for i in want.hidden if i in text):
        wrong.append(f"shows objects it must not see: {leaked}")
    if want.seen and got.status == 200 and not any(i in text for i in want.seen):
        wrong.append("shows none of its own workspace's objects")
    if case.kind == "stream" and got.status == 200 and not got.body.startswith(b"event: "):
        wrong.append(f"a stream that does not start with an SSE frame: {got.body[:100]!r}")
    return wrong


def test_the_access_matrix(store: Store) -> None:
    """Every route × every credential (:data:`CREDENTIALS`): the exact status the rules of
    :func:`expected` give, and nothing changed where it must not."""
    from memfs.dreams.dreamer import dreamer_for

    w = World(store)
    failures: list[str] = []
    cells: dict[str, Counter[int]] = {c: Counter() for c in CREDENTIALS}
    rows = 0
    # Every route tries a wrong key: no budget of failed authentications (issue 38 S4) here.
    unthrottled = AuthFailures(burst=float("inf"))
    with TestClient(create_app(store, [], console=False, dreams=False,
                               failures=unthrottled)) as tc:
        for op, case in _cases():
            rows += 1
            name = f"{op.method} {op.path}" + (f" [{case.label}]" if case.label else "")
            for cred in CREDENTIALS:
                req = case.build(w)
                given = credential(cred, w, req)
                if given is None:
                    cells[cred][0] += 1  # not applicable
                    continue
                headers, scope = given
                want = expected(cred, op, case, req, w, scope)
                before = snapshot(store, A if want.made_in_b else None)
                got = send(tc, op, case, req, headers)
                if op.path == "/v1/dreams" and op.method == "POST" and got.status == 200:
                    dreamer_for(store).wait(got.json()["id"], 10)  # it ends at once
                after = snapshot(store, A if want.made_in_b else None)
                cells[cred][got.status] += 1
                failures += [f"{name} with {cred}: {e}"
                             for e in _check(op, case, cred, want, got, before, after, w)]
    _print_matrix(store.database.dialect, rows, cells)
    assert not failures, f"{len(failures)} wrong answers:\n" + "\n".join(failures)


def _print_matrix(dialect: str, rows: int, cells: dict[str, Counter[int]]) -> None:
    """The matrix's counts (``scripts/test -s`` shows them): requests by credential and
    status."""
    statuses = sorted({s for c in cells.values() for s in c if s})
    asked = sum(n for c in cells.values() for s, n in c.items() if s)
    print(f"\naccess matrix on {dialect}: {len(OPS)} routes ({rows} requests with variants)"
          f" x {len(CREDENTIALS)} credentials: {asked} requests")
    print(f"  {'credential':<22}" + "".join(f"{s:>6}" for s in statuses) + f"{'n/a':>6}")
    for cred, counts in cells.items():
        print(f"  {cred:<22}" + "".join(f"{counts[s]:>6}" for s in statuses)
              + f"{counts[0]:>6}")
