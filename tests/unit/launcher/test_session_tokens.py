"""Session tokens (issue 19 §1): the one credential a session's commands get. In-process
(starlette TestClient), on SQLite and PostgreSQL: a token opens only its session's attached
stores with their access, only while the session runs, and every change it makes is the
session's; another store is a 404 like an unknown one, a write to a read_only one a 403."""

from __future__ import annotations

import hashlib
import re
import time

import pytest
from starlette.testclient import TestClient

from memfs import api
from memfs.api import create_app
from memfs.errors import Conflict, InvalidRequest, NotFound, Unauthorized
from memfs.models import Actor

KEY = "test-server-key"
USER = Actor.user("user_x")


@pytest.fixture
def store(backend):
    return backend.open()


@pytest.fixture
def world(store):
    """Stores A (attached read_write), B (attached read_only), C (not attached), a running
    session S with its token, and another session S2 on C."""
    a = store.stores.create("Agent Notes")
    b = store.stores.create("Team Docs")
    c = store.stores.create("Secrets")
    for s in (a, b, c):
        store.memories.create(s.id, "/m.md", f"in {s.name}", actor=USER)
    s = store.sessions.create([
        {"type": "memory_store", "memory_store_id": a.id},
        {"type": "memory_store", "memory_store_id": b.id, "access": "read_only"},
    ], status="running")
    s2 = store.sessions.create([{"type": "memory_store", "memory_store_id": c.id}],
                              status="running")
    token = store.sessions.create_token(s.id)
    return {"a": a.id, "b": b.id, "c": c.id, "s": s.id, "s2": s2.id, "token": token}


@pytest.fixture
def app(store):
    return create_app(store, [KEY])


@pytest.fixture
def agent(app, world):
    with TestClient(app, headers={"x-api-key": world["token"].token}) as c:
        yield c


@pytest.fixture
def admin(app):
    with TestClient(app, headers={"x-api-key": KEY}) as c:
        yield c


def error(r, status, type_):
    assert r.status_code == status, r.text
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == type_, body
    return body["error"]


# -- the store's side ------------------------------------------------------------------------


def test_a_token_is_stored_hashed_and_lives_with_its_session(store, world):
    tok = world["token"]
    assert tok.token.startswith("memfs_session_") and tok.id.startswith("sesstok_")
    rows = store.all("SELECT * FROM session_tokens")
    assert len(rows) == 1
    assert tok.token not in repr([dict(r) for r in rows])  # never the secret itself
    assert rows[0]["token_sha256"] == hashlib.sha256(tok.token.encode()).hexdigest()
    grant = store.sessions.grant(tok.token)
    assert grant.session_id == world["s"]
    assert grant.access == {world["a"]: "read_write", world["b"]: "read_only"}
    store.sessions.set_status(world["s"], "idle")
    with pytest.raises(Unauthorized, match="only while the session runs"):
        store.sessions.grant(tok.token)
    store.sessions.set_status(world["s"], "running")
    store.sessions.set_status(world["s"], "terminated")
    with pytest.raises(Unauthorized, match="the session ended"):
        store.sessions.grant(tok.token)
    with store.write() as c:  # revoked for good, not by the status alone
        c.execute("UPDATE sessions SET status = 'running' WHERE id = ?", (world["s"],))
    with pytest.raises(Unauthorized, match="the session ended"):
        store.sessions.grant(tok.token)
    with pytest.raises(InvalidRequest, match="terminated"):
        store.sessions.set_status(world["s"], "terminated")
        store.sessions.create_token(world["s"])
    with pytest.raises(Unauthorized, match="invalid session token"):
        store.sessions.grant("memfs_session_nope")
    with pytest.raises(NotFound):
        store.sessions.create_token("sesn_01nothere")


def test_a_token_expires(store, world):
    tok = store.sessions.create_token(world["s"], ttl_seconds=1)
    with store.write() as c:
        c.execute("UPDATE session_tokens SET expires_at = ? WHERE id = ?",
                  ("2020-01-01T00:00:00.000000Z", tok.id))
    with pytest.raises(Unauthorized, match="expired"):
        store.sessions.grant(tok.token)
    for bad in (0, -1, "60", True, 10**9):
        with pytest.raises(InvalidRequest, match="session token's life"):
            store.sessions.create_token(world["s"], ttl_seconds=bad)


def test_deleting_a_session_deletes_its_tokens(store, world):
    store.sessions.set_status(world["s"], "terminated")
    store.sessions.delete(world["s"])
    assert store.all("SELECT * FROM session_tokens") == []


# -- the API's side ----------------------------------------------------------------------------


def test_minting_a_token_through_the_api(admin, agent, world, store):
    r = admin.post(f"/v1/sessions/{world['s']}/memfs/tokens", json={"ttl_seconds": 600})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["type"] == "session_token" and body["session_id"] == world["s"]
    assert body["token"].startswith("memfs_session_")
    assert store.sessions.grant(body["token"]).session_id == world["s"]
    # A session token cannot make tokens: not for its own session (403), and another
    # session does not exist for it (404).
    error(agent.post(f"/v1/sessions/{world['s']}/memfs/tokens", json={}), 403,
          "permission_error")
    error(agent.post(f"/v1/sessions/{world['s2']}/memfs/tokens", json={}), 404,
          "not_found_error")
    error(admin.post("/v1/sessions/sesn_01nothere/memfs/tokens", json={}), 404,
          "not_found_error")
    error(admin.post(f"/v1/sessions/{world['s']}/memfs/tokens", json={"ttl_seconds": "x"}),
          400, "invalid_request_error")


def test_the_attached_stores_with_their_access(agent, world, store):
    a, b = world["a"], world["b"]
    # Reading both.
    for sid in (a, b):
        assert agent.get(f"/v1/memory_stores/{sid}").status_code == 200
        page = agent.get(f"/v1/memory_stores/{sid}/memories").json()
        assert [m["path"] for m in page["data"]] == ["/m.md"]
        assert agent.get(f"/v1/memory_stores/{sid}/memory_versions").status_code == 200
        assert agent.get(f"/v1/memory_stores/{sid}/memfs/tree").status_code == 200
    # Writing A, as the session.
    r = agent.post(f"/v1/memory_stores/{a}/memories", json={"path": "/n.md", "content": "n"})
    assert r.status_code == 200, r.text
    v = store.versions.list(a, memory_id=r.json()["id"]).data[0]
    assert v.created_by == Actor.session(world["s"])
    r = agent.post(f"/v1/memory_stores/{a}/memfs/write", json={"path": "/w.md", "content": "w"})
    assert r.status_code == 200, r.text
    assert store.memories.get_by_path(a, "/w.md").content == "w"
    # Writing B: 403, nothing written.
    before = store.memories.tree(b)
    mid = before[0].id
    for method, path, body in (
        ("POST", f"/v1/memory_stores/{b}/memories", {"path": "/x.md", "content": "x"}),
        ("POST", f"/v1/memory_stores/{b}/memories/{mid}", {"content": "changed"}),
        ("DELETE", f"/v1/memory_stores/{b}/memories/{mid}", None),
        ("POST", f"/v1/memory_stores/{b}/memfs/write", {"path": "/m.md", "content": "x"}),
        ("POST", f"/v1/memory_stores/{b}/memfs/delete", {"path": "/m.md"}),
        ("POST", f"/v1/memory_stores/{b}/memfs/rename",
         {"old_path": "/m.md", "new_path": "/y.md"}),
    ):
        r = agent.request(method, path, json=body)
        error(r, 403, "permission_error")
    assert store.memories.tree(b) == before
    assert store.memories.get_by_path(b, "/m.md").content == "in Team Docs"


def test_another_store_is_a_404_like_an_unknown_one(agent, admin, world, store):
    c = world["c"]
    unknown = "memstore_01" + "z" * 22
    mid = store.memories.tree(c)[0].id
    probes = [
        ("GET", "/v1/memory_stores/{s}", None),
        ("GET", "/v1/memory_stores/{s}/memories", None),
        ("GET", "/v1/memory_stores/{s}/memories/" + mid, None),
        ("POST", "/v1/memory_stores/{s}/memories", {"path": "/x.md", "content": "x"}),
        ("POST", "/v1/memory_stores/{s}/memories/" + mid, {"content": "x"}),
        ("DELETE", "/v1/memory_stores/{s}/memories/" + mid, None),
        ("GET", "/v1/memory_stores/{s}/memory_versions", None),
        ("GET", "/v1/memory_stores/{s}/memfs/tree", None),
        ("GET", "/v1/memory_stores/{s}/memfs/export", None),
        ("GET", "/v1/memory_stores/{s}/changes", None),
        ("POST", "/v1/memory_stores/{s}/memfs/write", {"path": "/x.md", "content": "x"}),
    ]
    for method, path, body in probes:
        mine = agent.request(method, path.format(s=c), json=body)
        other = agent.request(method, path.format(s=unknown), json=body)
        e1, e2 = error(mine, 404, "not_found_error"), error(other, 404, "not_found_error")
        # The same answer as for a store that does not exist, but for the id itself.
        assert e1["message"].replace(c, "ID") == e2["message"].replace(unknown, "ID"), path
    assert [m.path for m in store.memories.tree(c)] == ["/m.md"]
    assert store.memories.get_by_path(c, "/m.md").content == "in Secrets"
    # Lists show only the session's stores; a name lookup finds only them.
    ids = [s["id"] for s in agent.get("/v1/memory_stores").json()["data"]]
    assert sorted(ids) == sorted([world["a"], world["b"]])
    assert admin.get("/v1/memfs/resolve_store", params={"ref": "Secrets"}).status_code == 200
    error(agent.get("/v1/memfs/resolve_store", params={"ref": "Secrets"}), 404,
          "not_found_error")
    assert agent.get("/v1/memfs/resolve_store",
                     params={"ref": "Agent Notes"}).json()["id"] == world["a"]


def test_its_own_session_only(agent, world):
    s, s2 = world["s"], world["s2"]
    assert agent.get(f"/v1/sessions/{s}").json()["id"] == s
    assert agent.get(f"/v1/sessions/{s}/events").status_code == 200
    assert agent.get(f"/v1/sessions/{s}/resources").status_code == 200
    error(agent.get(f"/v1/sessions/{s2}"), 404, "not_found_error")
    error(agent.get(f"/v1/sessions/{s2}/events"), 404, "not_found_error")
    assert [x["id"] for x in agent.get("/v1/sessions").json()["data"]] == [s]
    # What only the owner of the server may do.
    for method, path, body in (
        ("POST", "/v1/memory_stores", {"name": "mine now"}),
        ("POST", f"/v1/memory_stores/{world['a']}", {"name": "renamed"}),
        ("POST", f"/v1/memory_stores/{world['a']}/archive", None),
        ("DELETE", f"/v1/memory_stores/{world['a']}", None),
        ("POST", "/v1/sessions", {"resources": []}),
        ("DELETE", f"/v1/sessions/{s}", None),
        ("POST", f"/v1/sessions/{s}/memfs/status", {"status": "terminated"}),
        ("POST", f"/v1/sessions/{s}/memfs/revert", {}),
        ("POST", "/v1/dreams", {"inputs": [], "model": "m"}),
    ):
        error(agent.request(method, path, json=body), 403, "permission_error")
    # The session header cannot point the token at another session.
    r = agent.post(f"/v1/memory_stores/{world['a']}/memories",
                   json={"path": "/h.md", "content": "h"},
                   headers={api.SESSION_HEADER: s2})
    error(r, 403, "permission_error")


def test_a_token_is_refused_once_its_session_ends(agent, world, store):
    assert agent.get(f"/v1/memory_stores/{world['a']}").status_code == 200
    store.sessions.set_status(world["s"], "terminated")
    e = error(agent.get(f"/v1/memory_stores/{world['a']}"), 401, "authentication_error")
    assert "ended" in e["message"]
    assert re.search(r"sesn_", e["message"])


def test_a_session_token_cannot_sign_in_to_the_console(app, world):
    with TestClient(app, follow_redirects=False) as c:
        r = c.post("/signin", data={"api_key": world["token"].token})
        assert r.status_code == 401, r.text


# -- a local session's API (memfs.launcher.sessionapi) ------------------------------------------


def test_the_session_api_on_a_unix_socket(store, world, tmp_path):
    """What ``memfs run`` serves its agent on a local database: the API on a unix socket,
    mode 0600, open to the session's token only (no server key opens it), gone at stop."""
    from memfs import errors
    from memfs.client import Client
    from memfs.launcher.sessionapi import SessionAPI

    path = tmp_path / "api.sock"
    api = SessionAPI(store, path, session_id=world["s"])
    api.listen()
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    api.serve()
    try:
        time.sleep(0.2)  # the point: no server starts by itself meanwhile
        assert not api._ready.is_set()  # nobody connected yet: no server started
        with Client(api.url, world["token"].token) as c:
            assert {s.id for s in c.stores.list().data} == {world["a"], world["b"]}
            assert c.stores.resolve("Agent Notes").id == world["a"]
            m = c.memories.create(world["a"], "/via-socket.md", "hello", actor=None)
            assert store.memories.get(world["a"], m.id).content == "hello"
            with pytest.raises(errors.ReadOnly):
                c.memories.create(world["b"], "/x.md", "x", actor=None)
            with pytest.raises(errors.NotFound):
                c.stores.get(world["c"])
            with pytest.raises(errors.Forbidden):
                c.stores.create("mine")
        with Client(api.url, KEY) as c, pytest.raises(errors.Unauthorized):
            c.stores.list()
    finally:
        api.stop()
    assert not path.exists()


def test_the_session_api_opens_to_its_own_session_s_token_only(store, world, tmp_path):
    """The API a launcher serves its session took any session token of the database: the
    token of another session (another `memfs run` on the same database) opened it as that
    session, through a socket that was never that session's. It opens to its session's
    tokens only."""
    from memfs import errors
    from memfs.client import Client
    from memfs.launcher.sessionapi import SessionAPI

    path = tmp_path / "api.sock"
    api = SessionAPI(store, path, session_id=world["s"])
    api.listen()
    api.serve()
    try:
        other = store.sessions.create_token(world["s2"])
        with Client(api.url, other.token) as c, pytest.raises(errors.Unauthorized) as e:
            c.stores.list()
        assert world["s"] in str(e.value)
        with Client(api.url, world["token"].token) as c:
            assert {s.id for s in c.stores.list().data} == {world["a"], world["b"]}
    finally:
        api.stop()


def test_the_memory_tool_with_a_session_token(store, world, tmp_path):
    """The memory tool inside a session: ``MemoryTool(Client(MEMFS_URL, MEMFS_API_KEY), …)``
    writes as the session, records its events in the session, and sees nothing else."""
    from memfs.client import Client
    from memfs.launcher.sessionapi import SessionAPI
    from memfs.tools import MemoryTool, ToolError

    api = SessionAPI(store, tmp_path / "api.sock", session_id=world["s"])
    api.listen()
    api.serve()
    try:
        with Client(api.url, world["token"].token) as c:
            MemoryTool(c, "Agent Notes").call(
                {"command": "create", "path": "/memories/t.md", "file_text": "tool"})
            with pytest.raises(ToolError, match="read"):
                MemoryTool(c, "Team Docs").call(
                    {"command": "create", "path": "/memories/t.md", "file_text": "x"})
            with pytest.raises(ToolError, match="not available"):
                MemoryTool(c, "Secrets").call({"command": "view", "path": "/memories"})
    finally:
        api.stop()
    m = store.memories.get_by_path(world["a"], "/t.md")
    assert store.versions.list(world["a"], memory_id=m.id).data[0].created_by == (
        Actor.session(world["s"]))
    types = [e.type for e in store.events.list(world["s"], limit=100).data]
    assert types.count("agent.tool_use") == 2  # the create, and the refused one
    assert [m.path for m in store.memories.tree(world["b"])] == ["/m.md"]


@pytest.mark.parametrize("stream", ["changes", "events"])
async def test_a_token_s_stream_ends_once_the_token_is_no_longer_valid(
        store, world, monkeypatch, stream):
    """A token was checked when a request came in, and a stream is one request: the change
    stream of an attached store, or its session's event stream, went on for as long as the
    agent held it open, after its session stopped running and its token was refused
    everywhere else. A token's stream looks at its grant again every GRANT_RECHECK_SECONDS
    and ends once the token is no longer valid."""
    import httpx
    import trio

    monkeypatch.setattr(api.streams, "GRANT_RECHECK_SECONDS", 0.2)
    url = (f"/v1/memory_stores/{world['a']}/changes/stream" if stream == "changes"
           else f"/v1/sessions/{world['s']}/events/stream")
    transport = httpx.ASGITransport(app=create_app(store, [KEY]))
    async with httpx.AsyncClient(transport=transport, base_url="http://t",
                                 headers={"x-api-key": world["token"].token}) as c:

        async def stop_the_session() -> None:
            # The stream is open by then: the in-process transport shows nothing of it
            # before it ends, so no signal to wait for.
            await trio.sleep(0.5)
            await trio.to_thread.run_sync(store.sessions.set_status, world["s"], "idle")

        with trio.fail_after(10):  # the transport returns once the stream has ended
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stop_the_session)
                r = await c.get(url)
    assert r.status_code == 200 and r.text.startswith("event: ping"), r.text


def test_a_snapshot_shows_a_token_nothing_of_other_stores_or_sessions(agent, admin, world,
                                                                     store):
    """Time travel to a boundary (`memfs/snapshot?at=`): a version id of another store
    answered "a version of another store", and another session's id its creation time;
    to a token they are unknown (404), as every other thing it was not given."""
    theirs = store.versions.list(world["c"]).data[0].id
    url = f"/v1/memory_stores/{world['a']}/memfs/snapshot"
    e = error(agent.get(url, params={"at": theirs}), 404, "not_found_error")
    assert "another store" not in e["message"]
    error(agent.get(url, params={"at": world["s2"]}), 404, "not_found_error")
    assert agent.get(url, params={"at": world["s"]}).status_code == 200  # its own session
    mine = store.versions.list(world["a"]).data[0].id
    assert agent.get(url, params={"at": mine}).status_code == 200
    # A server key is told what it is.
    error(admin.get(url, params={"at": theirs}), 400, "invalid_request_error")
    assert admin.get(url, params={"at": world["s2"]}).status_code == 200


# -- a token minted with a stored key (issue 38 S1) ---------------------------------------------


def test_a_stored_key_s_token_never_outlives_that_key(app, store, world):
    """A contractor key made to expire, revoked soon after, kept a session token it minted that
    read and wrote the session's stores for 30 days. A token minted with a stored key is tied
    to it: it expires no later than the key, and is refused once the key is revoked."""
    key = store.keys.create("contractor", role="read_write", expires_in=3600)
    world["s"] = store.sessions.create(
        [{"type": "memory_store", "memory_store_id": world["a"]}], status="running",
        created_by_key=key.id).id  # a stored key mints tokens of its own sessions only
    with TestClient(app, headers={"x-api-key": key.key}) as contractor:
        r = contractor.post(f"/v1/sessions/{world['s']}/memfs/tokens",
                            json={"ttl_seconds": 30 * 86400})
    assert r.status_code == 200, r.text
    tok = r.json()
    assert key.expires_at is not None and tok["expires_at"] <= key.expires_at
    with TestClient(app, headers={"x-api-key": tok["token"]}) as agent:
        assert agent.get(f"/v1/memory_stores/{world['a']}").status_code == 200
        store.keys.revoke(key.id)
        e = error(agent.get(f"/v1/memory_stores/{world['a']}"), 401, "authentication_error")
        assert key.id in e["message"] and "revoked" in e["message"]
        r = agent.post(f"/v1/memory_stores/{world['a']}/memories",
                       json={"path": "/late.md", "content": "x"})
        error(r, 401, "authentication_error")
    assert tok["id"] in store.sessions.refused_tokens([tok["id"], world["token"].id])
    assert world["token"].id not in store.sessions.refused_tokens([world["token"].id])
    # A revoked key mints nothing more.
    with TestClient(app, headers={"x-api-key": key.key}) as contractor:
        error(contractor.post(f"/v1/sessions/{world['s']}/memfs/tokens", json={}), 401,
              "authentication_error")


def test_a_stored_key_s_token_is_refused_once_that_key_expired(store, world):
    key = store.keys.create("admin of the day", role="admin", expires_in=3600)
    world["s"] = store.sessions.create(
        [{"type": "memory_store", "memory_store_id": world["a"]}], status="running",
        created_by_key=key.id).id
    tok = store.sessions.create_token(world["s"], key_id=key.id)
    assert store.sessions.grant(tok.token).session_id == world["s"]
    with store.write() as c:
        c.execute("UPDATE api_keys SET expires_at = ? WHERE id = ?",
                  ("2020-01-01T00:00:00.000000Z", key.id))
    with pytest.raises(Unauthorized, match="expired"):
        store.sessions.grant(tok.token)
    assert tok.id in store.sessions.refused_tokens([tok.id])
    with pytest.raises(Unauthorized, match="expired"):
        store.sessions.create_token(world["s"], key_id=key.id)


def test_a_terminated_session_is_not_set_running_again(admin, store, world):
    """A terminated session could be set back to running (its tokens stayed revoked, but the
    session took writes as running again). Ended is final: a 409, nothing changed."""
    store.sessions.set_status(world["s"], "terminated")
    events = len(store.events.list(world["s"]).data)
    for status in ("running", "idle", "rescheduling"):
        e = error(admin.post(f"/v1/sessions/{world['s']}/memfs/status",
                             json={"status": status}), 409, "conflict_error")
        assert "terminated" in e["message"]
        with pytest.raises(Conflict, match="terminated"):
            store.sessions.set_status(world["s"], status)
    assert store.sessions.get(world["s"]).status == "terminated"
    assert len(store.events.list(world["s"]).data) == events
    # Terminating again changes nothing and is not an error.
    assert store.sessions.set_status(world["s"], "terminated").status == "terminated"


def test_a_stored_key_mints_tokens_of_its_own_sessions_only(app, store, world):
    """Else any key of the workspace could act as any session through a token of its own,
    round the rule of x-memfs-session-id (S3): another key's session, or the server's, is a
    403 (the workspace's keys may list its sessions: their existence is no secret to them)."""
    a, b = (store.keys.create(n, role="admin") for n in ("key a", "key b"))
    mine = store.sessions.create([{"type": "memory_store", "memory_store_id": world["a"]}],
                                status="running", created_by_key=a.id)
    with TestClient(app, headers={"x-api-key": b.key}) as other:
        refused = error(other.post(f"/v1/sessions/{mine.id}/memfs/tokens", json={}), 403,
                        "permission_error")
        server_s = error(other.post(f"/v1/sessions/{world['s']}/memfs/tokens", json={}), 403,
                         "permission_error")
    assert refused["message"].replace(mine.id, "X") == server_s["message"].replace(
        world["s"], "X")
    with TestClient(app, headers={"x-api-key": a.key}) as own:
        assert own.post(f"/v1/sessions/{mine.id}/memfs/tokens", json={}).status_code == 200
    with TestClient(app, headers={"x-api-key": KEY}) as server:
        assert server.post(f"/v1/sessions/{mine.id}/memfs/tokens", json={}).status_code == 200
