"""memfs.client over httpx.MockTransport: wire encoding, error mapping, and (through a
transport that hands requests to the real ASGI app) the Store-shaped methods end to end."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import httpx
import pytest
from starlette.testclient import TestClient

from memfs import errors
from memfs.api import api_key_id, create_app
from memfs.client import OPERATIONS, AsyncClient, Client, error_from_response
from memfs.models import Actor, Memory, MemoryPrefix, MemoryStore, MemoryVersion, Session
from memfs.store import Store
from tests.support.asgi import through

KEY = "client-test-key"


# -- offline: what goes on the wire, what comes back --------------------------------------------


def recording(responses):
    """A MockTransport answering from ``responses`` (list of (status, json)) and recording."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status, body = responses.pop(0)
        return httpx.Response(status, json=body)

    return httpx.MockTransport(handler), seen


STORE = {"type": "memory_store", "id": "memstore_1", "name": "n", "description": "",
         "metadata": {}, "created_at": "2026-01-01T00:00:00Z",
         "updated_at": "2026-01-01T00:00:00Z", "archived_at": None}


def test_headers_and_query_encoding():
    transport, seen = recording([(200, {"data": [], "next_page": None, "prev_page": None})])
    with Client("http://srv/prefix", KEY, transport=transport) as c:
        page = c.sessions.list(statuses=["idle", "running"], created_at_gte="2026-01-01T00:00:00Z",
                               include_archived=True, memory_store_id="memstore_1", limit=5)
    assert page.data == [] and page.next_page is None
    (req,) = seen
    assert req.headers["x-api-key"] == KEY
    assert req.url.path == "/prefix/v1/sessions"
    params = req.url.params
    assert params.get_list("statuses[]") == ["idle", "running"]
    assert params["created_at[gte]"] == "2026-01-01T00:00:00Z"
    assert params["include_archived"] == "true" and params["limit"] == "5"
    assert "page" not in params and "created_at[lte]" not in params


def test_update_bodies_drop_unset_fields_and_ids_are_quoted():
    transport, seen = recording([(200, STORE)])
    c = Client("http://srv", KEY, transport=transport)
    s = c.stores.update("memstore/1", metadata={"gone": None, "k": "v"})
    assert isinstance(s, MemoryStore) and s.id == "memstore_1"
    assert seen[0].url.raw_path == b"/v1/memory_stores/memstore%2F1"
    assert json.loads(seen[0].content) == {"metadata": {"gone": None, "k": "v"}}


def test_precondition_and_expected_hash_on_the_wire():
    memory = {"type": "memory", "id": "mem_1", "memory_store_id": "memstore_1", "path": "/a",
              "content": "x", "content_sha256": "a" * 64, "content_size_bytes": 1,
              "memory_version_id": "memver_1", "created_at": "t", "updated_at": "t"}
    transport, seen = recording([(200, memory), (200, {"id": "mem_1", "type": "memory_deleted"})])
    c = Client("http://srv", KEY, transport=transport)
    m = c.memories.update("memstore_1", "mem_1", content=b"x", precondition_sha256="a" * 64,
                        actor=Actor.user("user_1"))
    assert isinstance(m, Memory) and m.content == "x"
    assert json.loads(seen[0].content) == {
        "content": "x", "precondition": {"type": "content_sha256", "content_sha256": "a" * 64}}
    assert seen[0].url.params["view"] == "full"
    assert c.memories.delete("memstore_1", "mem_1", expected_sha256="b" * 64) is None
    assert seen[1].method == "DELETE"
    assert seen[1].url.params["expected_content_sha256"] == "b" * 64


def test_non_utf8_bytes_are_refused_before_sending():
    transport, seen = recording([])
    c = Client("http://srv", KEY, transport=transport)
    with pytest.raises(errors.InvalidContent):
        c.memories.create("memstore_1", "/a", b"\xff")
    with pytest.raises(errors.PathEncoding):
        c.memories.create("memstore_1", b"/\xff", "x")
    assert seen == []


def envelope(type_, message="m", code=None, **extra):
    err = {"type": type_, "message": message, **extra}
    if code:
        err["details"] = {"error_code": code}
    return {"type": "error", "error": err, "request_id": "req_1"}


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        (404, envelope("not_found_error"), errors.NotFound),
        (409, envelope("memory_precondition_failed_error"), errors.PreconditionFailed),
        (409, envelope("conflict_error"), errors.Conflict),
        (400, envelope("invalid_request_error"), errors.InvalidRequest),
        (400, envelope("invalid_request_error", code="path_too_long"), errors.PathTooLong),
        (400, envelope("invalid_request_error", code="path_encoding"), errors.PathEncoding),
        (400, envelope("invalid_request_error", code="invalid_path"), errors.InvalidPath),
        (400, envelope("invalid_request_error", code="invalid_content"), errors.InvalidContent),
        (400, envelope("invalid_request_error", code="content_too_large"),
         errors.ContentTooLarge),
        (400, envelope("invalid_request_error", code="store_archived"), errors.StoreArchived),
        (400, envelope("invalid_request_error", code="limit_exceeded"), errors.LimitExceeded),
        (400, envelope("invalid_request_error", code="invalid_cursor"), errors.InvalidCursor),
        (400, envelope("invalid_request_error", code="something_new"), errors.InvalidRequest),
        (413, envelope("invalid_request_error", code="request_too_large"),
         errors.RequestTooLarge),
        (401, envelope("authentication_error"), errors.Unauthorized),
        (403, envelope("permission_error", code="read_only"), errors.ReadOnly),
        (503, envelope("overloaded_error"), errors.Busy),
        (500, envelope("api_error"), errors.MemfsError),
        (502, "not json at all", errors.MemfsError),
    ],
)
def test_error_mapping(status, body, cls):
    exc = error_from_response(status, body)
    assert type(exc) is cls
    if isinstance(body, dict):
        assert body["error"]["message"] in exc.message


def test_path_conflict_keeps_its_fields():
    transport, _ = recording([(409, envelope(
        "memory_path_conflict_error", "taken", conflicting_memory_id="mem_9",
        conflicting_path="/a"))])
    c = Client("http://srv", KEY, transport=transport)
    with pytest.raises(errors.PathConflict) as e:
        c.memories.create("memstore_1", "/a/b", "x")
    assert (e.value.conflicting_memory_id, e.value.conflicting_path) == ("mem_9", "/a")
    assert e.value.message == "taken"


def test_unreachable_server_is_one_clear_error():
    def refuse(request):
        raise httpx.ConnectError("connection refused", request=request)

    c = Client("http://127.0.0.1:9", KEY, transport=httpx.MockTransport(refuse))
    with pytest.raises(errors.MemfsError, match="cannot reach memfs server"):
        c.stores.list()


def test_non_json_success_is_an_error():
    c = Client("http://srv", KEY, transport=httpx.MockTransport(
        lambda r: httpx.Response(200, text="<html>proxy</html>")))
    with pytest.raises(errors.MemfsError, match="non-JSON"):
        c.stores.get("memstore_1")


def _named(obj, dotted):
    """``obj.part.name`` for ``"part.name"`` (an operation of :data:`OPERATIONS`)."""
    for name in dotted.split("."):
        obj = getattr(obj, name)
    return obj


def test_both_clients_expose_the_same_store_methods(tmp_path):
    sync, aio = Client("http://srv", KEY), AsyncClient("http://srv", KEY)
    for name in OPERATIONS:
        assert callable(_named(sync, name)) and callable(_named(aio, name))
    used_by_cli = {"stores.create", "stores.get", "stores.resolve", "stores.update",
                   "stores.archive", "stores.delete", "stores.list", "memories.count",
                   "memories.create", "memories.get", "memories.get_by_path",
                   "memories.resolve", "memories.update", "memories.delete", "memories.list",
                   "versions.list", "versions.get", "versions.redact", "sessions.create",
                   "sessions.get", "sessions.list", "events.list", "events.add", "events.around",
                   "memories.write_path", "memories.delete_path", "memories.rename_path",
                   "stores.namesakes", "versions.restore", "keys.create", "keys.list",
                   "keys.get", "keys.revoke"}
    assert used_by_cli <= set(OPERATIONS)
    # same parameter names as the Store, so CLI calls work unchanged
    import inspect

    store = Store(str(tmp_path / "db"))
    try:
        for name in used_by_cli:
            # ids / among / workspace: what a server's credential may see (memfs.api), never
            # sent; created_by_key: the server's, from the credential that asks.
            store_params = (set(inspect.signature(_named(store, name)).parameters)
                            - {"ids", "among", "workspace", "created_by_key"})
            client_params = set(inspect.signature(_named(sync, name)).parameters)
            assert store_params <= client_params, name
    finally:
        store.close()


def test_each_client_method_takes_exactly_its_operations_parameters():
    """Client and AsyncClient spell out each operation's signature (so that mypy sees them):
    the same parameters, kinds and defaults as the generator of memfs.client.ops it drives,
    and the result it returns."""
    import inspect

    from memfs.client.ops import OPS

    sync, aio = Client("http://srv", KEY), AsyncClient("http://srv", KEY)
    for name in OPERATIONS:
        op = inspect.signature(_named(OPS, name))
        for client in (sync, aio):
            method = inspect.signature(_named(client, name))
            assert method.parameters == op.parameters, (type(client).__name__, name)
            assert f"Op[{method.return_annotation}]" == op.return_annotation, (
                type(client).__name__, name)
    assert inspect.iscoroutinefunction(aio.stores.get)


# -- through the real app -------------------------------------------------------------------------



@pytest.fixture
def store(backend):
    """Every test of this file runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()

@pytest.fixture
def app_transport(store):
    with TestClient(create_app(store, [KEY])) as tc:
        yield through(tc)


@pytest.fixture
def remote(app_transport):
    with Client("http://memfs", KEY, transport=app_transport) as c:
        yield c


def test_stores_through_the_client(remote, store):
    s = remote.stores.create("notes", "d", {"a": "b"})
    assert store.stores.get(s.id) == s
    assert remote.stores.get(s.id) == s
    assert remote.stores.resolve("notes") == s
    assert remote.stores.resolve(s.id) == s
    with pytest.raises(errors.NotFound):
        remote.stores.resolve("nothing")
    twin = remote.stores.create("notes")
    with pytest.raises(errors.InvalidRequest, match="use an id"):
        remote.stores.resolve("notes")
    remote.stores.archive(twin.id)
    assert remote.stores.resolve("notes").id == s.id  # live wins over archived
    u = remote.stores.update(s.id, metadata={"a": None, "c": "d"})
    assert u.metadata == {"c": "d"} and u.description == "d"
    assert [x.id for x in remote.stores.list().data] == [s.id]
    assert {x.id for x in remote.stores.list(include_archived=True).data} == {s.id, twin.id}
    with pytest.raises(errors.StoreArchived):
        remote.stores.update(twin.id, name="x")
    remote.stores.delete(twin.id)
    with pytest.raises(errors.NotFound):
        remote.stores.get(twin.id)


def test_memories_through_the_client(remote):
    sid = remote.stores.create("notes").id
    m = remote.memories.create(sid, "/dir/a.md", "hello", actor=None)
    assert m.content == "hello" and m.content_sha256 == hashlib.sha256(b"hello").hexdigest()
    assert remote.memories.get(sid, m.id) == m
    assert remote.memories.get(sid, m.id, view="basic").content is None
    assert remote.memories.get_by_path(sid, "/dir/a.md") == m
    assert remote.memories.resolve(sid, "/dir/a.md", view="basic").id == m.id
    assert remote.memories.resolve(sid, m.id).content == "hello"
    with pytest.raises(errors.NotFound):
        remote.memories.get_by_path(sid, "/dir/missing.md")
    with pytest.raises(errors.PathConflict) as e:
        remote.memories.create(sid, "/dir/a.md/x", "")
    assert e.value.conflicting_memory_id == m.id
    with pytest.raises(errors.PreconditionFailed):
        remote.memories.update(sid, m.id, content="x", precondition_sha256="0" * 64)
    # write_path: update, no-op (no new version), then create
    w = remote.memories.write_path(sid, "/dir/a.md", "hello2")
    assert w.id == m.id and w.content == "hello2"
    again = remote.memories.write_path(sid, "/dir/a.md", "hello2")
    assert again.memory_version_id == w.memory_version_id
    b = remote.memories.write_path(sid, "/dir/b.md", b"bee")
    assert b.content == "bee"
    # rename over an existing memory replaces its content (as POSIX rename does) and the path
    # keeps its memory; the renamed one is deleted. Without replace 409.
    with pytest.raises(errors.PathConflict):
        remote.memories.rename_path(sid, "/dir/b.md", "/dir/a.md", replace=False)
    moved = remote.memories.rename_path(sid, "/dir/b.md", "/dir/a.md")
    assert (moved.id, moved.path, moved.content) == (m.id, "/dir/a.md", "bee")
    with pytest.raises(errors.NotFound):
        remote.memories.get(sid, b.id)
    gone = remote.memories.delete_path(sid, "/dir/a.md")
    assert gone.id == m.id
    assert remote.memories.count(sid) == 0
    for i in range(3):
        remote.memories.create(sid, f"/deep/x{i}/f.md", str(i))
    page = remote.memories.list(sid, path_prefix="/deep/", depth=1, limit=2)
    assert page.data == [MemoryPrefix("/deep/x0/"), MemoryPrefix("/deep/x1/")]
    rest = remote.memories.list(sid, path_prefix="/deep/", depth=1, limit=2, page=page.next_page)
    assert rest.data == [MemoryPrefix("/deep/x2/")] and rest.next_page is None
    assert remote.memories.count(sid) == 3
    with pytest.raises(errors.InvalidPath):
        remote.memories.list(sid, path_prefix="/deep")
    with pytest.raises(errors.InvalidCursor):
        remote.memories.list(sid, page="bogus")
    with pytest.raises(errors.PathTooLong):
        remote.memories.create(sid, "/" + "a" * 1100, "")
    with pytest.raises(errors.ContentTooLarge):
        remote.memories.create(sid, "/big", "x" * 102_401)


def test_update_memory_replace_removes_the_memory_at_the_target(remote, store):
    """POSIX rename over a file through the SDK endpoints: the memory seen at the target is
    deleted (conditionally on its hash, its content kept in history), then the move is
    retried; without ``replace`` the conflict stands."""
    sid = remote.stores.create("notes").id
    theirs = remote.memories.create(sid, "/t.md", "theirs")
    mine = remote.memories.create(sid, "/m.md", "mine")
    with pytest.raises(errors.PathConflict):
        remote.memories.update(sid, mine.id, path="/t.md")
    moved = remote.memories.update(sid, mine.id, path="/t.md", replace=True)
    assert (moved.id, moved.path, moved.content) == (mine.id, "/t.md", "mine")
    with pytest.raises(errors.NotFound):
        remote.memories.get(sid, theirs.id)
    (gone,) = store.versions.list(sid, memory_id=theirs.id, operation="deleted").data
    assert store.versions.get(sid, store.versions.list(
        sid, memory_id=theirs.id, operation="created").data[0].id).content == "theirs"
    assert gone.created_by == Actor.api(api_key_id(KEY))
    # an overlap with a directory is not a rename over a file: never replaced
    remote.memories.create(sid, "/d/x.md", "x")
    with pytest.raises(errors.PathConflict):
        remote.memories.update(sid, mine.id, path="/d", replace=True)
    assert remote.memories.get_by_path(sid, "/d/x.md").content == "x"


def test_versions_through_the_client(remote):
    sid = remote.stores.create("notes").id
    m = remote.memories.create(sid, "/a", "one")
    remote.memories.update(sid, m.id, content="two")
    versions = remote.versions.list(sid, memory_id=m.id).data
    assert all(isinstance(v, MemoryVersion) for v in versions)
    assert [v.operation for v in versions] == ["modified", "created"]
    assert versions[0].created_by == Actor.api(api_key_id(KEY))
    assert remote.versions.list(sid, api_key_id=api_key_id(KEY), operation="created").data[
        0].id == versions[1].id
    assert remote.versions.get(sid, versions[1].id).content == "one"
    red = remote.versions.redact(sid, versions[1].id, actor=None)
    assert red.redacted_by == Actor.api(api_key_id(KEY)) and red.content is None
    with pytest.raises(errors.InvalidRequest, match="update or delete"):
        remote.versions.redact(sid, versions[0].id)


def test_restore_through_the_client_keeps_a_deleted_memorys_id(remote, store):
    """The server's Store restores (memfs extension): the same id, the history one memory's,
    a taken path the same PathConflict."""
    sid = remote.stores.create("notes").id
    m = remote.memories.create(sid, "/a", "one")
    remote.memories.update(sid, m.id, content="two")
    remote.memories.delete(sid, m.id)
    squatter = remote.memories.create(sid, "/a", "other")
    with pytest.raises(errors.PathConflict) as e:
        remote.versions.restore(sid, m.memory_version_id)
    assert e.value.conflicting_memory_id == squatter.id
    back = remote.versions.restore(sid, m.memory_version_id, path="/b")
    assert (back.id, back.path, back.content) == (m.id, "/b", "one")
    assert back.seq == store.feed.last(sid)
    assert [v.operation for v in remote.versions.list(sid, memory_id=m.id).data] == [
        "created", "deleted", "modified", "created"]
    deletion = remote.versions.list(sid, memory_id=m.id).data[1].id
    with pytest.raises(errors.InvalidRequest, match="deletion"):
        remote.versions.restore(sid, deletion)
    with pytest.raises(errors.NotFound):
        remote.versions.restore(sid, "memver_nope")


def test_sessions_and_events_through_the_client(remote):
    s = remote.stores.create("User Prefs").id
    sess = remote.sessions.create([{"type": "memory_store", "memory_store_id": s,
                                   "access": "read_only"}], title="t")
    assert isinstance(sess, Session) and sess.status == "idle"
    (res,) = sess.resources
    assert res.session_id == sess.id and res.mount_path == "/mnt/memory/user-prefs"
    assert remote.sessions.get(sess.id) == sess
    assert remote.sessions.get_resource(sess.id, res.id) == res
    assert remote.sessions.list_resources(sess.id).data == [res]
    assert [x.id for x in remote.sessions.list(memory_store_id=s).data] == [sess.id]
    assert remote.sessions.list(statuses=["running"]).data == []
    # memfs extension: a launcher's own mount root (memfs run --url --root DIR)
    there = remote.sessions.create(
        [{"type": "memory_store", "memory_store_id": s}], root="/elsewhere/"
    )
    assert [r.mount_path for r in there.resources] == ["/elsewhere/user-prefs"]
    with pytest.raises(errors.InvalidRequest, match="absolute"):
        remote.sessions.create([], root="relative")
    with pytest.raises(errors.InvalidRequest, match="idle"):
        remote.sessions.create([], status="running")
    assert remote.sessions.set_status(there.id, "terminated").status == "terminated"
    sent = remote.events.add(sess.id, [{"type": "user.message", "content": []}])
    assert [e.type for e in sent] == ["user.message"] and sent[0].session_id == sess.id
    with pytest.raises(errors.InvalidRequest):
        remote.events.add(sess.id, [{"type": "agent.tool_use"}])
    listed = remote.events.list(sess.id, types=["user.message"])
    assert [e.id for e in listed.data] == [sent[0].id]
    assert remote.sessions.update(sess.id, metadata={"k": "v"}).metadata == {"k": "v"}
    assert remote.sessions.archive(sess.id).archived_at is not None
    remote.sessions.delete(sess.id)
    with pytest.raises(errors.NotFound):
        remote.sessions.get(sess.id)


def test_create_key_on_the_wire():
    key = {"type": "memfs_api_key", "id": "apikey_1", "name": "ci", "workspace_id": "team-a",
           "role": "read_only", "memory_store_ids": ["memstore_1"],
           "created_at": "2026-01-01T00:00:00Z", "expires_at": "2026-01-31T00:00:00Z",
           "last_used_at": None, "revoked_at": None, "created_by": None,
           "key": "memfs_key_secret"}
    transport, seen = recording([(200, key), (200, {"data": [{**key, "key": None}]})])
    c = Client("http://srv", KEY, transport=transport)
    made = c.keys.create("ci", workspace="team-a", role="read_only", store_ids=("memstore_1",),
                        expires_in="30d", created_by=Actor.user("user_1"))
    assert (made.id, made.key, made.memory_store_ids) == ("apikey_1", "memfs_key_secret",
                                                          ["memstore_1"])
    assert json.loads(seen[0].content) == {
        "name": "ci", "workspace_id": "team-a", "role": "read_only",
        "memory_store_ids": ["memstore_1"], "expires_in": "30d"}
    [listed] = c.keys.list(workspace="team-a")
    assert listed.key is None and seen[1].url.params["workspace_id"] == "team-a"


def test_keys_through_the_client(remote, store, app_transport):
    """A server key makes keys of any workspace; a stored admin key manages its own
    workspace's only; the get/revoke of another workspace's key is the Store's 404."""
    sid = remote.stores.create("notes").id
    made = remote.keys.create("ci", role="read_only", store_ids=[sid], expires_in="30d")
    assert made.key.startswith("memfs_key_") and made.workspace_id == "default"
    assert store.keys.get(made.id) == dataclasses.replace(made, key=None)
    assert store.keys.grant(made.key).access == {sid: "read_only"}
    assert [k.id for k in remote.keys.list()] == [made.id]
    assert remote.keys.list()[0].key is None
    assert remote.keys.get(made.id) == store.keys.get(made.id)
    with pytest.raises(errors.NotFound):
        remote.keys.get(made.id, workspace="team-a")
    with pytest.raises(errors.NotFound):
        remote.keys.revoke(made.id, workspace="team-a")
    assert store.keys.get(made.id).revoked_at is None
    with pytest.raises(errors.NotFound, match="apikey_nope"):
        remote.keys.revoke("apikey_nope")
    with pytest.raises(errors.InvalidRequest, match="role"):
        remote.keys.create("x", role="owner")
    with pytest.raises(errors.InvalidRequest, match="duration"):
        remote.keys.create("x", expires_in="soon")

    admin = remote.keys.create("team-a admin", workspace="team-a", role="admin")
    assert [k.id for k in remote.keys.list(workspace="team-a")] == [admin.id]
    with Client("http://memfs", admin.key, transport=app_transport) as team_a:
        assert [k.id for k in team_a.keys.list()] == [admin.id]
        with pytest.raises(errors.Forbidden):
            team_a.keys.create("x", workspace="default")
        with pytest.raises(errors.NotFound):  # another workspace's store
            team_a.keys.create("x", store_ids=[sid])
        with pytest.raises(errors.NotFound):  # another workspace's key
            team_a.keys.revoke(made.id)
        writer = team_a.keys.create("writer")
        assert writer.workspace_id == "team-a" and writer.role == "read_write"
    with (Client("http://memfs", writer.key, transport=app_transport) as plain,
          pytest.raises(errors.Forbidden)):
        plain.keys.list()
    revoked = remote.keys.revoke(made.id)
    assert revoked.revoked_at is not None and remote.keys.revoke(made.id) == revoked
    with pytest.raises(errors.Unauthorized):
        store.keys.grant(made.key)


def test_wrong_key_is_unauthorized(app_transport):
    with pytest.raises(errors.Unauthorized):
        Client("http://memfs", "wrong", transport=app_transport).stores.list()
    with pytest.raises(errors.Unauthorized):
        Client("http://memfs", None, transport=app_transport).stores.list()


async def test_async_client_over_asgi(store):
    """The async twin, on trio, with the app in-process (httpx.ASGITransport)."""
    transport = httpx.ASGITransport(app=create_app(store, [KEY]))
    async with AsyncClient("http://memfs", KEY, transport=transport) as c:
        s = await c.stores.create("notes")
        assert (await c.stores.resolve("notes")) == s
        m = await c.memories.write_path(s.id, "/a/b.md", "hi")
        assert (await c.memories.get_by_path(s.id, "/a/b.md")).content == "hi"
        with pytest.raises(errors.PathConflict):
            await c.memories.create(s.id, "/a", "")
        await c.memories.rename_path(s.id, "/a/b.md", "/c.md")
        assert (await c.memories.get(s.id, m.id)).path == "/c.md"
        page = await c.memories.list(s.id)
        assert [x.path for x in page.data] == ["/c.md"]
    assert store.memories.get(s.id, m.id).path == "/c.md"


def test_a_request_refused_for_its_keys_rate_is_sent_again_after_retry_after(tmp_path,
                                                                            monkeypatch):
    """The server refuses a key over its rate before doing anything (429 rate_limited with
    retry-after): the client waits and sends it again, a write too; after its retries it
    raises RateLimited."""
    from types import SimpleNamespace

    from memfs.api.limits import KeyRates
    from memfs.store import Store

    from ...support.asgi import through

    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # the bucket refills while the client waits
        slept.append(seconds)
        now[0] += seconds

    monkeypatch.setattr("memfs.client.sync.time", SimpleNamespace(sleep=sleep))
    store = Store(str(tmp_path / "db"))
    key = store.keys.create("slow", role="admin").key
    rates = KeyRates(rate=1.0, burst=1.0, clock=lambda: now[0])
    app = create_app(store, [], console=False, dreams=False, rates=rates)
    with TestClient(app) as tc:
        c = Client("http://srv", key, transport=through(tc))
        s = c.stores.create("a")  # the burst's one token
        c.memories.create(s.id, "/a.md", "a", actor=None)  # refused once, then sent again
        assert slept == [1.0]
        now[0] += 1
        assert [m.path for m in c.memories.list(s.id).data] == ["/a.md"]
        now[0] = -1e9  # a clock that never refills: every retry is refused
        slept.clear()
        with pytest.raises(errors.RateLimited):
            c.stores.get(s.id)
        assert len(slept) == 5
    store.close()
