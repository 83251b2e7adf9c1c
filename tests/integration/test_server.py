"""A real ``memfs serve`` subprocess on a free loopback port, driven by ``anthropic==2.14.0``
(API.md §9 steps 1-10 and 12, default retries on) and by raw HTTP."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import pytest

from memfs.api import api_key_id
from tests.support import wait_until
from tests.support.server import KEY, Server, start_server, stop_server

#: The SDK's first retry waits at least 0.375 s (0.5 s minus 25 % jitter): a call that fails
#: faster than this was not retried.
NO_RETRY_SECONDS = 0.35


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(request, tmp_path_factory) -> Iterator[Server]:
    """The server on SQLite, then on a database of its own in the test PostgreSQL cluster."""
    db = name = None
    if request.param == "postgresql":
        cluster = request.getfixturevalue("pg_cluster")
        name = cluster.new_database(cluster.template)
        db = cluster.url(name)
    s = start_server(tmp_path_factory.mktemp("serve"), "--api-key", KEY, db=db)
    yield s
    assert stop_server(s) == 0
    if name is not None:
        cluster.drop_database(name)


@pytest.fixture
def client(server) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=2) as c:
        yield c


def fast(fn, *args, **kwargs):
    """Call ``fn``; return (exception, seconds). It must raise."""
    t = time.monotonic()
    try:
        fn(*args, **kwargs)
    except anthropic.APIStatusError as e:
        return e, time.monotonic() - t
    raise AssertionError("expected an error")


# -- API.md §9 ----------------------------------------------------------------------------------


def test_step1_transport(server):
    url = server.url + "/v1/memory_stores"
    r1 = httpx.get(url, headers={"x-api-key": KEY})
    r2 = httpx.get(url, headers={"authorization": f"Bearer {KEY}"})
    r3 = httpx.get(url)
    assert r1.status_code == r2.status_code == 200
    assert r3.status_code == 401
    assert r3.json()["type"] == "error"
    assert r3.json()["error"]["type"] == "authentication_error"
    for r in (r1, r2, r3):
        assert r.headers["request-id"].startswith("req_")


def test_sdk_conformance_steps_2_to_10_and_12(client, server):
    beta = client.beta
    # 2. stores
    s = beta.memory_stores.create(name="User Preferences!", description="prefs",
                                  metadata={"user": "u1"})
    assert s.id.startswith("memstore_") and s.type == "memory_store" and s.archived_at is None
    assert beta.memory_stores.retrieve(s.id) == s
    u = beta.memory_stores.update(s.id, metadata={"user": None, "team": "t"}, description="")
    assert u.metadata == {"team": "t"} and u.description == ""
    with pytest.raises(anthropic.BadRequestError):
        beta.memory_stores.create(name="x" * 256)
    with pytest.raises(anthropic.BadRequestError):
        beta.memory_stores.create(name="m", metadata={f"k{i}": "v" for i in range(17)})
    others = [beta.memory_stores.create(name=f"other {i}").id for i in range(2)]
    pager = beta.memory_stores.list(limit=1)
    listed = [x.id for x in pager]
    assert {s.id, *others} <= set(listed) and len(listed) == len(set(listed))
    page = beta.memory_stores.list(limit=1)
    while page.has_next_page():
        page = page.get_next_page()
    assert page.next_page is None

    # 3. memories
    mems = beta.memory_stores.memories
    m = mems.create(s.id, path="/notes/a.md", content="hello")
    assert m.content is None and m.content_size_bytes == 5
    assert m.content_sha256 == hashlib.sha256(b"hello").hexdigest()
    deep = mems.create(s.id, path="/notes/deep/b.md", content="x", view="full")
    assert deep.content == "x"
    e, took = fast(mems.create, s.id, path="/notes/a.md", content="dup")
    assert isinstance(e, anthropic.ConflictError) and e.type == "memory_path_conflict_error"
    assert took < NO_RETRY_SECONDS, took
    assert e.body["error"]["conflicting_memory_id"] == m.id
    e, took = fast(mems.create, s.id, path="/notes/a.md/c", content="")
    assert isinstance(e, anthropic.ConflictError) and took < NO_RETRY_SECONDS
    for bad in ("notes", "/a//b", "/a/../b", "/a/", "/" + "/".join("s" * 21),
                "/" + "a" * 1024, "/cafe\u0301"):
        with pytest.raises(anthropic.BadRequestError):
            mems.create(s.id, path=bad, content="")
    with pytest.raises(anthropic.BadRequestError):
        mems.create(s.id, path="/big", content="x" * 102_401)
    assert mems.retrieve(m.id, memory_store_id=s.id).content == "hello"
    assert mems.retrieve(m.id, memory_store_id=s.id, view="basic").content is None

    # 4. update and preconditions
    pre = {"type": "content_sha256", "content_sha256": m.content_sha256}
    m2 = mems.update(m.id, memory_store_id=s.id, content="hello2", precondition=pre)
    assert m2.memory_version_id != m.memory_version_id
    e, took = fast(mems.update, m.id, memory_store_id=s.id, content="hello3", precondition=pre)
    assert isinstance(e, anthropic.ConflictError)
    assert e.type == "memory_precondition_failed_error" and took < NO_RETRY_SECONDS
    m3 = mems.update(m.id, memory_store_id=s.id, path="/notes/renamed.md")
    assert m3.id == m.id and m3.path == "/notes/renamed.md"
    m4 = mems.update(m.id, memory_store_id=s.id, content="hello2")
    assert m4.memory_version_id == m3.memory_version_id

    # 5. listing
    every = list(mems.list(s.id))
    assert {x.path for x in every} == {"/notes/renamed.md", "/notes/deep/b.md"}
    assert all(x.content is None for x in every)
    level = list(mems.list(s.id, path_prefix="/notes/", depth=1))
    assert [(x.type, x.path) for x in level] == [("memory_prefix", "/notes/deep/"),
                                                ("memory", "/notes/renamed.md")]
    with pytest.raises(anthropic.BadRequestError):
        mems.list(s.id, path_prefix="/notes")
    for i in range(21):
        mems.create(s.id, path=f"/bulk/{i:02d}.md", content=str(i))
    first = mems.list(s.id, view="full", limit=100)
    assert len(first.data) == 20 and all(x.content is not None for x in first.data)
    one_by_one = [x.path for x in mems.list(s.id, limit=1)]
    assert len(one_by_one) == 23 and len(set(one_by_one)) == 23

    # 6. versions
    vers = beta.memory_stores.memory_versions
    lineage = list(vers.list(s.id, memory_id=m.id))
    assert {"created", "modified"} <= {v.operation for v in lineage}
    assert all(v.created_by.type == "api_actor" for v in lineage)
    key_id = lineage[0].created_by.api_key_id
    assert key_id == api_key_id(KEY)
    modified = list(vers.list(s.id, memory_id=m.id, operation="modified", view="full"))
    assert modified and all(v.operation == "modified" and v.content for v in modified)
    created = [v for v in lineage if v.operation == "created"][0]
    assert vers.retrieve(created.id, memory_store_id=s.id).content == "hello"
    assert list(vers.list(s.id, api_key_id=key_id, limit=5))

    # 7. delete and redact
    e, took = fast(mems.delete, m.id, memory_store_id=s.id, expected_content_sha256="0" * 64)
    assert isinstance(e, anthropic.ConflictError) and took < NO_RETRY_SECONDS
    d = mems.delete(m.id, memory_store_id=s.id,
                    expected_content_sha256=hashlib.sha256(b"hello2").hexdigest())
    assert (d.id, d.type) == (m.id, "memory_deleted")
    with pytest.raises(anthropic.NotFoundError):
        mems.retrieve(m.id, memory_store_id=s.id)
    lineage = list(vers.list(s.id, memory_id=m.id))
    gone = [v for v in lineage if v.operation == "deleted"]
    assert len(gone) == 1 and gone[0].path == "/notes/renamed.md"
    assert gone[0].content is None and gone[0].content_sha256 is None
    assert gone[0].content_size_bytes is None
    red = vers.redact(created.id, memory_store_id=s.id)
    assert red.redacted_at is not None and red.redacted_by.type == "api_actor"
    assert (red.path, red.content, red.content_sha256, red.content_size_bytes) == (
        None, None, None, None)
    assert vers.retrieve(created.id, memory_store_id=s.id).redacted_at == red.redacted_at

    # 8. sessions
    agent = beta.agents.create(name="a", model="claude-opus-4-5",
                               tools=[{"type": "agent_toolset_20260401"}])
    env = beta.environments.create(name="e")
    sess = beta.sessions.create(agent=agent.id, environment_id=env.id, resources=[{
        "type": "memory_store", "memory_store_id": s.id, "access": "read_write",
        "instructions": "Store user prefs."}])
    assert sess.status == "idle" and sess.agent.id == agent.id
    res = sess.resources[0]
    assert res.mount_path == "/mnt/memory/user-preferences"
    assert (res.name, res.description) == ("User Preferences!", "")
    assert sess.id in [x.id for x in beta.sessions.list(memory_store_id=s.id)]
    (item,) = list(beta.sessions.resources.list(sess.id))
    assert item.type == "memory_store" and item.memory_store_id == s.id
    assert beta.sessions.resources.retrieve(item.id, session_id=sess.id).memory_store_id == s.id
    nine = [s.id] + [beta.memory_stores.create(name=f"n{i}").id for i in range(8)]
    with pytest.raises(anthropic.BadRequestError):
        beta.sessions.create(agent=agent.id, environment_id=env.id, resources=[
            {"type": "memory_store", "memory_store_id": i} for i in nine])
    with pytest.raises(anthropic.BadRequestError):
        beta.sessions.create(agent=agent.id, environment_id=env.id, resources=[
            {"type": "memory_store", "memory_store_id": s.id, "instructions": "x" * 4097}])

    # 9. events (the agent's writes through a mount: see the skipped test below)
    tea = [{"type": "text", "text": "Remember that I like tea."}]
    sent = beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": tea}])
    assert sent.data[0].type == "user.message"
    history = list(beta.sessions.events.list(sess.id, types=["user.message"]))
    assert [ev.id for ev in history] == [sent.data[0].id]

    # 10. archive
    a1 = beta.memory_stores.archive(s.id)
    a2 = beta.memory_stores.archive(s.id)
    assert a1 == a2 and a1.archived_at is not None
    with pytest.raises(anthropic.BadRequestError):
        beta.memory_stores.update(s.id, name="n")
    with pytest.raises(anthropic.BadRequestError):
        mems.create(s.id, path="/after", content="")
    with pytest.raises(anthropic.BadRequestError):
        beta.sessions.create(agent=agent.id, environment_id=env.id, resources=[
            {"type": "memory_store", "memory_store_id": s.id}])
    assert len(list(mems.list(s.id))) == 22
    assert s.id not in [x.id for x in beta.memory_stores.list()]
    assert s.id in [x.id for x in beta.memory_stores.list(include_archived=True)]

    # 12. delete
    gone_store = beta.memory_stores.delete(s.id)
    assert (gone_store.id, gone_store.type) == (s.id, "memory_store_deleted")
    for call in (lambda: beta.memory_stores.retrieve(s.id), lambda: mems.list(s.id),
                 lambda: vers.list(s.id)):
        with pytest.raises(anthropic.NotFoundError):
            call()


def test_step9_event_stream(client, server):
    """SDK stream: sees events sent after it connected, ends after session.deleted; the raw
    SSE capture names the event on every frame."""
    beta = client.beta
    sess = beta.sessions.create(agent="agent_opaque", environment_id="env_opaque")
    beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": []}])
    received: list = []
    with beta.sessions.events.stream(sess.id) as stream:
        sent = beta.sessions.events.send(sess.id, events=[
            {"type": "user.message", "content": [{"type": "text", "text": "live"}]}])
        done = threading.Timer(10, stream.close)  # a hung stream fails instead of blocking
        done.start()
        try:
            for event in stream:
                received.append(event)
                if event.type == "user.message":
                    beta.sessions.delete(sess.id)
        finally:
            done.cancel()
    assert [e.type for e in received] == ["user.message", "session.deleted"]
    assert received[0].id == sent.data[0].id  # history before connecting is not replayed

    sess = beta.sessions.create(agent="agent_opaque", environment_id="env_opaque")
    url = f"{server.url}/v1/sessions/{sess.id}/events/stream"
    raw = b""
    with httpx.stream("GET", url, headers={"x-api-key": KEY, "accept": "application/json"},
                      timeout=10) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["request-id"]
        beta.sessions.events.send(sess.id, events=[{"type": "user.interrupt"}])
        beta.sessions.delete(sess.id)
        for chunk in r.iter_bytes():
            raw += chunk
    frames = [f for f in raw.decode().split("\n\n") if f.strip()]
    assert all(f.startswith("event: ") for f in frames), frames
    names = [f.split("\n", 1)[0][len("event: "):] for f in frames]
    assert names[0] == "ping" and names[1:] == ["user.interrupt", "session.deleted"]
    for f in frames[1:]:
        data = json.loads(f.split("data: ", 1)[1])
        assert f"id: {data['id']}" in f


def _mounted_session(server, tmp_path: Path, beta, access: str):
    """A store attached to a new session with ``access``, mounted remotely acting as that
    session (``memfs --url ... mount --session``, shown to the agent at its mount_path).
    Returns (store, session, mount_path, the Mount)."""
    from tests.support.mount import Mount

    s = beta.memory_stores.create(name=f"Prefs {access}")
    beta.memory_stores.memories.create(s.id, path="/seed.md", content="seed")
    sess = beta.sessions.create(agent="agent_opaque", environment_id="env_opaque", resources=[
        {"type": "memory_store", "memory_store_id": s.id, "access": access}])
    mount_path = sess.resources[0].mount_path
    m = Mount(tmp_path / "unused.db", s.id, tmp_path / access,
              ["--session", sess.id, "--display-root", mount_path],
              env={"MEMFS_URL": server.url, "MEMFS_API_KEY": KEY})
    return s, sess, mount_path, m


def _agent_writes(m) -> int:
    """The agent's write through the mount; returns bash's exit status."""
    return subprocess.run(["bash", "-c", f"echo 'I like tea' > {m.root}/preferences.md"],
                          capture_output=True, timeout=30).returncode


def _tool_pairs(events, mount_path: str) -> list:
    uses = {e.id: e for e in events if e.type == "agent.tool_use"
            and str(e.input.get("file_path", "")).startswith(mount_path + "/")}
    return [(uses[e.tool_use_id], e) for e in events
            if e.type == "agent.tool_result" and e.tool_use_id in uses]


def test_step9_agent_writes_through_the_mount(client, server, tmp_path):
    """API.md §9 step 9 proper: an agent's write through a FUSE mount acting as the session
    shows up on the SDK's event stream and event list as an agent.tool_use (name bash,
    file_path under the mount path) followed by its agent.tool_result, and as a version
    created by the session_actor; with a read_only attachment the write is a failed tool call
    and no version appears."""
    from tests.support.mount import require_fuse

    require_fuse()
    beta = client.beta
    mounts = []
    try:
        s, sess, mount_path, m = _mounted_session(server, tmp_path, beta, "read_write")
        mounts.append(m)
        m.wait_mounted()
        received: list = []
        with beta.sessions.events.stream(sess.id) as stream:
            assert _agent_writes(m) == 0  # after connecting: the stream does not replay
            done = threading.Timer(10, stream.close)  # a hung stream fails, not blocks
            done.start()
            try:
                for event in stream:
                    received.append(event)
                    if _tool_pairs(received, mount_path):
                        break
            finally:
                done.cancel()
        ((use, result),) = _tool_pairs(received, mount_path)
        assert use.name in {"write", "edit", "bash"}
        assert use.input["file_path"] == f"{mount_path}/preferences.md"
        assert use.input["operation"] == "create" and result.is_error is False
        assert received.index(result) > received.index(use)
        listed = list(beta.sessions.events.list(
            sess.id, types=["agent.tool_use", "agent.tool_result"], limit=100))
        pairs = _tool_pairs(listed, mount_path)
        assert [(u.id, r.id) for u, r in pairs] == [(use.id, result.id)]
        assert listed.index(pairs[0][1]) == listed.index(pairs[0][0]) + 1  # in order
        (version,) = beta.memory_stores.memory_versions.list(s.id, session_id=sess.id)
        assert version.created_by.type == "session_actor"
        assert version.created_by.session_id == sess.id
        assert result.model_extra["memory_version_id"] == version.id

        # read_only: the write is refused (EROFS) as a failed tool call; no version
        s2, sess2, mount_path2, m2 = _mounted_session(server, tmp_path, beta, "read_only")
        mounts.append(m2)
        m2.wait_mounted()
        assert _agent_writes(m2) != 0
        assert list(beta.memory_stores.memory_versions.list(s2.id, session_id=sess2.id)) == []
        assert len(list(beta.memory_stores.memory_versions.list(s2.id))) == 1  # the seed

        def failed():
            evs = list(beta.sessions.events.list(
                sess2.id, types=["agent.tool_use", "agent.tool_result"], limit=100))
            return [(u, r) for u, r in _tool_pairs(evs, mount_path2) if r.is_error]

        ((use2, result2),) = wait_until(failed)
        assert use2.name == "bash"
        assert use2.input["file_path"] == f"{mount_path2}/preferences.md"
        assert "EROFS" in result2.content[0].text
    finally:
        for m in mounts:
            m.stop()


# -- raw HTTP -------------------------------------------------------------------------------------


def test_raw_auth_and_errors(server):
    h = {"x-api-key": KEY}
    base = server.url + "/v1/memory_stores"
    assert httpx.get(base, headers={"x-api-key": "wrong"}).status_code == 401
    assert httpx.get(base, headers={"authorization": "Bearer wrong"}).status_code == 401
    both = httpx.get(base, headers={"x-api-key": KEY, "authorization": "Bearer wrong"})
    assert both.status_code == 200
    cases = [
        httpx.post(base, headers={**h, "content-type": "application/json"}, content=b"{oops"),
        httpx.post(base, headers=h, json={"name": 42}),
        httpx.post(base, headers=h, json={"name": "ok", "surprise": True}),
        httpx.get(base, headers=h, params={"limit": "many"}),
        httpx.get(base, headers=h, params={"page": "not-a-cursor"}),
    ]
    for r in cases:
        assert r.status_code == 400, r.text
        assert r.json()["error"]["type"] == "invalid_request_error"
        assert r.headers["x-should-retry"] == "false" and r.headers["request-id"]
    for url in (base + "/memstore_missing", base + "/memstore_missing/memories",
                server.url + "/v1/sessions/sesn_missing"):
        r = httpx.get(url, headers=h)
        assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    s = httpx.post(base, headers=h, json={"name": "raw"}).json()
    r = httpx.post(f"{base}/{s['id']}/archive",
                   headers={**h, "content-type": "application/json", "content-length": "0"})
    assert r.status_code == 200 and r.json()["archived_at"]
    assert httpx.get(server.url + "/openapi.json").json()["paths"]


def test_cli_against_the_server(server, tmp_path):
    """Every CLI command talks to the server with --url (here: create, list, show)."""
    env = {**os.environ, "MEMFS_URL": server.url, "MEMFS_API_KEY": KEY,
           "MEMFS_DB": str(tmp_path / "unused.db")}

    def memfs(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "memfs", "--json", *args], env=env,
                              capture_output=True, text=True, timeout=60)

    made = memfs("stores", "create", "cli remote")
    assert made.returncode == 0, made.stderr
    sid = json.loads(made.stdout)["id"]
    shown = memfs("stores", "show", "cli remote")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["id"] == sid
    assert not (tmp_path / "unused.db").exists()  # nothing went to a local database
    bad = subprocess.run([sys.executable, "-m", "memfs", "stores", "show", sid],
                         env={**env, "MEMFS_API_KEY": "wrong"}, capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode != 0 and "API key" in bad.stderr
    assert bad.stderr.count("\n") == 1  # one line, no traceback


def test_serve_refuses_open_non_loopback(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "memfs", "--db", str(tmp_path / "db"), "serve", "--host",
         "0.0.0.0", "--port", "0"],
        capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if k != "MEMFS_API_KEYS"},
    )
    assert r.returncode != 0
    assert r.stderr.strip().count("\n") == 0 and "without API keys" in r.stderr


def test_serve_generates_a_key_on_loopback(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MEMFS_API_KEYS"}
    s = start_server(tmp_path, env=env)
    try:
        key = re.search(r"generated key (\S+)", s.stderr.read_text()).group(1)
        assert httpx.get(s.url + "/v1/memory_stores").status_code == 401
        assert httpx.get(s.url + "/v1/memory_stores", headers={"x-api-key": key}).status_code == 200
    finally:
        assert stop_server(s) == 0


def test_serve_keys_from_env(tmp_path):
    s = start_server(tmp_path, env={"MEMFS_API_KEYS": "alpha, beta"})
    try:
        for key in ("alpha", "beta"):
            r = httpx.get(s.url + "/v1/memory_stores", headers={"authorization": f"Bearer {key}"})
            assert r.status_code == 200
        assert "generated" not in s.stderr.read_text()
    finally:
        assert stop_server(s) == 0


def test_json_logs_have_one_access_line_per_request_and_no_key(tmp_path) -> None:
    """``memfs --log-format json -v serve``: every stderr log line is a JSON object; each
    request has an access line with the request-id its client got; the key is never logged."""
    stderr = tmp_path / "serve.err"
    with stderr.open("wb") as err:  # the server writes to its own copy; ours is closed
        proc = subprocess.Popen(
            [sys.executable, "-m", "memfs", "--db", str(tmp_path / "memfs.db"), "--log-format",
             "json", "-v", "serve", "--port", "0", "--api-key", KEY],
            stdout=subprocess.DEVNULL, stderr=err, env=dict(os.environ),
        )
    s = None
    try:

        def serving() -> Server | None:
            m = re.search(r"serving (http://\S+)", stderr.read_text())
            assert proc.poll() is None, stderr.read_text()
            return Server(proc, m.group(1), stderr) if m else None

        s = wait_until(serving, 20, interval=0.05)
        with httpx.Client(base_url=s.url, headers={"x-api-key": KEY}) as http:
            ok = http.get("/v1/memory_stores?limit=5")
            bad = http.get("/v1/memory_stores/nope", headers={"x-api-key": "wrong-key"})
            ready = http.get("/readyz")
        assert ok.status_code == 200 and bad.status_code == 401 and ready.status_code == 200
    finally:
        assert stop_server(Server(proc, "", stderr)) == 0
    text = stderr.read_text()
    assert KEY not in text and "wrong-key" not in text
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    access = {e["request_id"]: e for e in lines if e["logger"] == "memfs.access"}
    got = access[ok.headers["request-id"]]
    assert got["method"] == "GET" and got["path"] == "/v1/memory_stores"
    assert got["status"] == 200 and got["duration_ms"] >= 0
    assert access[bad.headers["request-id"]]["status"] == 401
    # Lines that are not JSON are the server's announcements to a person, not log records.
    assert all(line.startswith(("{", "memfs: ")) for line in text.splitlines()), text


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_serve_workers_share_the_port_and_the_database(tmp_path) -> None:
    """``--workers 2``: two processes answer on one port (fresh connections land on both),
    every concurrent write through them is there once, and SIGTERM stops them all."""
    s = start_server(tmp_path, "--api-key", KEY, "--workers", "2")
    try:
        workers = _children(s.proc.pid)
        assert len(workers) == 2
        headers = {"x-api-key": KEY}
        sid = httpx.post(f"{s.url}/v1/memory_stores", json={"name": "w"},
                         headers=headers).json()["id"]
        busy_before = {w: _cpu(w) for w in workers}
        failures: list[str] = []

        def writer(i: int) -> None:
            for j in range(10):
                # a new connection per request: the kernel spreads them over the workers
                r = httpx.post(f"{s.url}/v1/memory_stores/{sid}/memories",
                               json={"path": f"/w{i}/m{j}.md", "content": f"{i}-{j}"},
                               headers=headers)
                if r.status_code != 200:
                    failures.append(r.text)

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
        page = httpx.get(f"{s.url}/v1/memory_stores/{sid}/memories",
                         params={"limit": 100, "depth": 2}, headers=headers).json()
        assert sorted(m["path"] for m in page["data"] if m["type"] == "memory") == sorted(
            f"/w{i}/m{j}.md" for i in range(8) for j in range(10))
        assert all(_cpu(w) > busy_before[w] for w in workers)  # both served requests
    finally:
        assert stop_server(s) == 0
    for w in workers:
        assert not Path(f"/proc/{w}").exists() or "Z" in Path(f"/proc/{w}/stat").read_text()


def _cpu(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])
