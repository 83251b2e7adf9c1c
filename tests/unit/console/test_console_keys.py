"""The Console for many teams (issue 22) in-process (starlette TestClient), on SQLite and on
PostgreSQL: signing in with a key kept in the database (never a session token), the cookie
refused at the next page once its key is revoked or expired (on every replica), what a key
sees (its workspace, a scoped key's stores) and may do (a read_only key writes nothing), the
admins' Keys page, and the key names in the history."""

from __future__ import annotations

import hmac
import html
import re
import urllib.parse

import pytest
import trio
from starlette.testclient import TestClient

from memfs.api import create_app
from memfs.console import web
from memfs.models import Actor
from memfs.store import sha256_hex
from tests.support import wait_until

SERVER_KEY = "console-keys-server-key"
API = Actor.api("apikey_seed")


@pytest.fixture
def store(backend):
    """Every test of this file runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


@pytest.fixture
def app(store):
    return create_app(store, [SERVER_KEY])


def browser(app) -> TestClient:
    return TestClient(app, base_url="http://console.test", follow_redirects=False)


def sign_in(c: TestClient, key: str) -> str:
    """Sign in; returns the sign-in's CSRF token."""
    r = c.post("/signin", data={"api_key": key, "next": "/stores"})
    assert r.status_code == 303 and r.headers["location"] == "/stores", r.text
    page = c.get("/stores")
    assert page.status_code == 200, page.text
    return page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]


def alert(page: str) -> str:
    """The error message of a page."""
    found = re.search(r'role="alert">(.*?)</', page, re.S)
    return html.unescape(found.group(1)) if found else ""


# -- signing in -----------------------------------------------------------------------------


def test_a_stored_key_signs_in_and_its_cookie_holds_no_secret(app, store):
    key = store.keys.create("alice", workspace="team-a")
    with browser(app) as c:
        csrf = sign_in(c, key.key)
        cookie = c.cookies.get(web.COOKIE)
        assert cookie.startswith(key.id + ".")
        assert key.key not in cookie and sha256_hex(key.key.encode()) not in cookie
        assert "alice" in c.get("/stores").text  # who is signed in
        # What the user makes lands in the key's workspace, attributed to them.
        r = c.post("/stores", data={"name": "Team A notes", "csrf": csrf})
        assert r.status_code == 303, r.text
        (made,) = store.stores.list(workspace="team-a").data
        assert store.stores.list(workspace="default").data == []
        r = c.post(f"/stores/{made.id}/new", data={"path": "/a.md", "content": "x",
                                                   "csrf": csrf})
        assert r.status_code == 303, r.text
        (v,) = store.versions.list(made.id).data
        assert v.created_by == web.console_actor(key.id)
        # A cookie signed under anything but the key's own digest signs in nobody, and says
        # nothing about the key.
        kid, expires, nonce, sig = cookie.split(".")
        payload = f"{kid}.{expires}.{nonce}"

        def signed(secret: bytes) -> str:
            return f"{payload}.{hmac.new(secret, payload.encode(), 'sha256').hexdigest()}"

        for forged in (signed(b"0" * 64), signed(key.key.encode()), f"{payload}.{'0' * 64}",
                       f"{kid}.{int(expires) + 1}.{nonce}.{sig}"):
            c.cookies.set(web.COOKIE, forged, domain="console.test")
            r = c.get("/stores")
            assert r.status_code == 303 and web.FLASH_COOKIE not in r.headers.get(
                "set-cookie", "")


def test_reading_the_database_is_not_enough_to_make_a_cookie(app, store):
    """The digest a stored key's cookies are signed under is in the database; a cookie signed
    under it with a nonce of one's own (no sign-in made it) signs in nobody."""
    key = store.keys.create("alice", workspace="team-a")
    with store.read() as conn:
        digest = conn.execute("SELECT secret_sha256 FROM api_keys WHERE id = ?",
                              (key.id,)).fetchone()[0]
    with browser(app) as c:
        sign_in(c, key.key)  # a genuine sign-in exists: the forged one is not it
        kid, expires, _, _ = c.cookies.get(web.COOKIE).split(".")
        payload = f"{kid}.{expires}.{'ab' * 16}"
        forged = f"{payload}.{hmac.new(digest.encode(), payload.encode(), 'sha256').hexdigest()}"
        c.cookies.set(web.COOKIE, forged, domain="console.test")
        r = c.get("/stores")
        assert r.status_code == 303 and r.headers["location"].startswith("/signin")


def test_a_session_token_cannot_sign_in(app, store):
    sid = store.stores.create("s").id
    s = store.sessions.create([{"type": "memory_store", "memory_store_id": sid}],
                             status="running")
    token = store.sessions.create_token(s.id).token
    with browser(app) as c:
        r = c.post("/signin", data={"api_key": token})
        assert r.status_code == 401 and "session token" in alert(r.text)
        assert web.COOKIE not in r.headers.get("set-cookie", "")
        assert c.get("/stores").status_code == 303


@pytest.mark.parametrize("why", ["revoked", "expired"])
def test_a_refused_keys_sign_ins_end_at_their_next_page_on_every_replica(backend, why):
    """Revoked (or expired) after signing in: the next page of any server on the database
    signs the person out and says why; a form gets a 401 page; nothing is written."""
    store = backend.open()
    key = store.keys.create("bob", expires_in=2 if why == "expired" else None)
    sid = store.stores.create("s").id
    replicas = [create_app(backend.open(), [SERVER_KEY]) for _ in range(2)]
    with browser(replicas[0]) as a, browser(replicas[1]) as b:
        csrf = sign_in(a, key.key)
        cookie = a.cookies.get(web.COOKIE)
        b.cookies.set(web.COOKIE, cookie, domain="console.test")
        assert b.get("/stores").status_code == 200  # one cookie works on every replica
        if why == "revoked":
            store.keys.revoke(key.id)
        for c in (a, b):
            c.cookies.set(web.COOKIE, cookie, domain="console.test")
            r = wait_until(lambda c=c: (r := c.get(f"/stores/{sid}")).status_code == 303 and r,
                           what="the sign-in ends")
            assert r.headers["location"] == "/signin?" + urllib.parse.urlencode(
                {"next": f"/stores/{sid}"})
            assert f'{web.COOKIE}=""' in r.headers["set-cookie"]  # the cookie goes
            page = c.get(r.headers["location"])
            assert page.status_code == 200 and "you were signed out" in page.text
            assert f"API key {key.id} {'was revoked' if why == 'revoked' else 'expired'}" \
                in page.text
            c.cookies.set(web.COOKIE, cookie, domain="console.test")
            r = c.post(f"/stores/{sid}/new", data={"path": "/x.md", "content": "x",
                                                   "csrf": csrf})
            assert r.status_code == 401 and "you were signed out" in alert(r.text)
            # A live refresh is told, not redirected (the page would show the sign-in page
            # in place of its region).
            c.cookies.set(web.COOKIE, cookie, domain="console.test")
            r = c.get(f"/stores/{sid}", headers={"x-memfs-fragment": "1"})
            assert r.status_code == 401
    assert store.memories.tree(sid) == []


def test_a_revoked_keys_open_live_page_ends_within_a_second(backend):
    """A live page (the store's change feed) opened with a stored key: its stream ends
    with a ``memfs.signed_out`` frame once the key is revoked (the page then reloads)."""
    store = backend.open()
    app = create_app(store, [SERVER_KEY])
    key = store.keys.create("carol")
    sid = store.stores.create("s").id
    with browser(app) as c:
        sign_in(c, key.key)
        cookie = f"{web.COOKIE}={c.cookies.get(web.COOKIE)}".encode()
    path = f"/stores/{sid}/live"
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1),
             "server": ("console.test", 80),
             "headers": [(b"host", b"console.test"), (b"cookie", cookie)]}
    bodies: list[bytes] = []
    took: list[float] = []

    async def run() -> None:
        started, done = trio.Event(), trio.Event()
        asked = False

        async def receive():
            nonlocal asked
            if not asked:
                asked = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await trio.sleep_forever()

        async def send(message):
            if message["type"] == "http.response.start":
                assert message["status"] == 200
                started.set()
            elif message["type"] == "http.response.body":
                bodies.append(message.get("body", b""))
                if not message.get("more_body", False):
                    done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(app, scope, receive, send)
            with trio.fail_after(10):
                await started.wait()
                t0 = trio.current_time()
                await trio.to_thread.run_sync(store.keys.revoke, key.id)
                await done.wait()
                took.append(trio.current_time() - t0)
            nursery.cancel_scope.cancel()

    trio.run(run)
    assert b"event: memfs.signed_out" in bodies[-1] and b"was revoked" in bodies[-1]
    assert took[0] < 1.0 + 0.5, took  # GRANT_RECHECK_SECONDS, and a slow machine's margin


# -- what a key sees ------------------------------------------------------------------------


def test_another_workspaces_store_and_session_are_404_like_unknown_ones(app, store):
    theirs = store.stores.create("theirs", workspace="team-b")
    mid = store.memories.create(theirs.id, "/secret.md", "team b's", actor=API).id
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": theirs.id}])
    ghost = "memstore_01" + "1" * 22  # no such store
    mine = store.keys.create("alice", workspace="team-a", role="admin")
    for key in (mine.key, SERVER_KEY):  # a server key is the default workspace's
        with browser(app) as c:
            csrf = sign_in(c, key)
            assert theirs.id not in c.get("/stores?archived=1").text
            assert session.id not in c.get("/sessions?archived=1").text
            for path in ("/stores/{}", "/stores/{}/settings", "/stores/{}/history",
                         "/stores/{}/search?q=team", "/stores/{}/export", "/stores/{}/new",
                         "/stores/{}/memories/" + mid, "/stores/{}/live", "/import?into={}",
                         "/sessions?store={}"):
                seen, unknown = c.get(path.format(theirs.id)), c.get(path.format(ghost))
                assert seen.status_code == unknown.status_code == 404, path
                assert seen.text.replace(theirs.id, "ID") == unknown.text.replace(ghost, "ID")
            for path in ("/sessions/{}", "/sessions/{}/revert"):
                seen = c.get(path.format(session.id))
                unknown = c.get(path.format("sesn_01" + "1" * 22))
                assert seen.status_code == unknown.status_code == 404, path
            for path, data in ((f"/stores/{theirs.id}/new", {"path": "/x.md", "content": "x"}),
                               (f"/stores/{theirs.id}/delete", {"confirm": "theirs"}),
                               (f"/stores/{theirs.id}/memories/{mid}", {"content": "mine"}),
                               (f"/sessions/{session.id}/revert", {})):
                assert c.post(path, data={**data, "csrf": csrf}).status_code == 404, path
    assert [m.path for m in store.memories.tree(theirs.id)] == ["/secret.md"]
    assert store.memories.get(theirs.id, mid).content == "team b's"


def test_a_store_scoped_key_sees_and_writes_only_its_stores(app, store):
    mine = store.stores.create("mine", workspace="team-a")
    other = store.stores.create("other", workspace="team-a")
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": mine.id}])
    key = store.keys.create("scoped", workspace="team-a", store_ids=[mine.id])
    with browser(app) as c:
        csrf = sign_in(c, key.key)
        listing = c.get("/stores").text
        assert mine.id in listing and other.id not in listing
        assert 'href="/sessions"' not in listing  # a scoped key sees no session
        assert c.get(f"/stores/{other.id}").status_code == 404
        assert c.get(f"/stores/{mine.id}").status_code == 200
        r = c.get("/sessions")
        assert r.status_code == 200 and session.id not in r.text
        assert c.get(f"/sessions/{session.id}").status_code == 404
        r = c.post(f"/stores/{mine.id}/new", data={"path": "/a.md", "content": "ok",
                                                   "csrf": csrf})
        assert r.status_code == 303, r.text
        r = c.post(f"/stores/{other.id}/new", data={"path": "/a.md", "content": "no",
                                                    "csrf": csrf})
        assert r.status_code == 404
        # The stores themselves are not a scoped key's to change (as in the API).
        for path, data in (("/stores", {"name": "new"}),
                           (f"/stores/{mine.id}/settings", {"name": "renamed"}),
                           (f"/stores/{mine.id}/archive", {})):
            r = c.post(path, data={**data, "csrf": csrf})
            assert r.status_code == 403 and "scoped" in alert(r.text), path
        assert c.get("/import").status_code == 403
    assert [m.path for m in store.memories.tree(mine.id)] == ["/a.md"]
    assert store.memories.tree(other.id) == []
    assert [s.name for s in store.stores.list(workspace="team-a").data] == ["other", "mine"]


def test_a_read_only_key_reads_everything_and_changes_nothing(app, store):
    sid = store.stores.create("docs", workspace="team-a").id
    memory = store.memories.create(sid, "/a.md", "as it was", actor=API)
    (v,) = store.versions.list(sid).data
    key = store.keys.create("reader", workspace="team-a", role="read_only")
    with browser(app) as c:
        csrf = sign_in(c, key.key)
        listing = c.get("/stores").text
        assert sid in listing and "read-only" in listing
        assert 'action="/stores"' not in listing and 'href="/import"' not in listing
        assert f"/stores/{sid}/new" not in c.get(f"/stores/{sid}").text
        page = c.get(f"/stores/{sid}/memories/{memory.id}").text
        assert "as it was" in page and "data-edit" not in page
        assert "/restore" not in c.get(f"/stores/{sid}/versions/{v.id}").text
        for path in (f"/stores/{sid}/history", f"/stores/{sid}/search?q=was",
                     f"/stores/{sid}/export", f"/stores/{sid}/settings"):
            assert c.get(path).status_code == 200, path
        for path in (f"/stores/{sid}/new", "/import", f"/stores/{sid}/memories/{memory.id}"
                     "/delete"):
            r = c.get(path)
            assert r.status_code == 403 and "read_only" in alert(r.text), path
        for path, data in (("/stores", {"name": "new"}),
                           (f"/stores/{sid}/new", {"path": "/b.md", "content": "x"}),
                           (f"/stores/{sid}/memories/{memory.id}", {"content": "changed"}),
                           (f"/stores/{sid}/memories/{memory.id}/rename", {"path": "/c.md"}),
                           (f"/stores/{sid}/memories/{memory.id}/delete", {}),
                           (f"/stores/{sid}/versions/{v.id}/restore", {}),
                           (f"/stores/{sid}/versions/{v.id}/redact", {"confirm": "redact"}),
                           (f"/stores/{sid}/settings", {"name": "renamed"}),
                           (f"/stores/{sid}/delete", {"confirm": "docs"})):
            r = c.post(path, data={**data, "csrf": csrf})
            assert r.status_code == 403, (path, r.status_code)
            assert "read_only" in alert(r.text) and "reader" in alert(r.text), path
        assert c.post("/signout", data={"csrf": csrf}).status_code == 303  # that it may
    assert [(m.path, m.content) for m in [store.memories.get(sid, memory.id)]] == [
        ("/a.md", "as it was")]
    assert len(store.versions.list(sid).data) == 1
    assert [s.name for s in store.stores.list(workspace="team-a").data] == ["docs"]


# -- the Keys page ----------------------------------------------------------------------------


def secret_on(page: str) -> str:
    found = re.search(r'value="(memfs_key_[^"]+)"', page)
    assert found, "no secret on the page"
    return html.unescape(found.group(1))


def test_an_admin_makes_and_revokes_keys_on_the_keys_page(app, store):
    docs = store.stores.create("docs", workspace="team-a")
    admin = store.keys.create("lead", workspace="team-a", role="admin")
    elsewhere = store.keys.create("b-admin", workspace="team-b", role="admin")
    with browser(app) as c:
        csrf = sign_in(c, admin.key)
        assert 'href="/keys"' in c.get("/stores").text
        page = c.get("/keys")
        assert page.status_code == 200 and admin.id in page.text and "lead" in page.text
        assert elsewhere.id not in page.text and "memfs_key_" not in page.text
        r = c.post("/keys", data={"name": "ci-reader", "role": "read_only", "stores": "docs\n",
                                  "expires": "30d", "csrf": csrf})
        assert r.status_code == 201, alert(r.text)
        secret = secret_on(r.text)
        made = next(k for k in store.keys.list(workspace="team-a") if k.name == "ci-reader")
        assert (made.role, made.memory_store_ids, made.created_by) == (
            "read_only", [docs.id], web.console_actor(admin.id))
        assert made.expires_at is not None and made.id in r.text
        assert secret not in c.get("/keys").text  # shown once
        # The secret is a key of the API: it reads its store, and writes nothing.
        with TestClient(app, headers={"x-api-key": secret}) as api:
            assert api.get(f"/v1/memory_stores/{docs.id}").status_code == 200
            assert api.post("/v1/memory_stores", json={"name": "x"}).status_code == 403
            # Revoking: a form of this Console, with its token, only.
            for headers, data in (({"origin": "http://evil.example"}, {"csrf": csrf}),
                                  ({}, {})):
                r = c.post(f"/keys/{made.id}/revoke", data=data, headers=headers)
                assert r.status_code == 403
            assert api.get(f"/v1/memory_stores/{docs.id}").status_code == 200
            r = c.post(f"/keys/{made.id}/revoke", data={"csrf": csrf})
            assert r.status_code == 303 and r.headers["location"] == "/keys"
            assert api.get(f"/v1/memory_stores/{docs.id}").status_code == 401
        assert store.keys.get(made.id).revoked_at is not None
        assert "revoked" in c.get("/keys").text
        # What the store refuses is said on the form, and nothing is made.
        for data in ({"name": "x", "role": "superuser"}, {"name": "x", "stores": "nope"},
                     {"name": "x", "expires": "soon"}, {"name": ""},
                     {"name": "x", "stores": docs.id, "workspace": "team-b"}):
            r = c.post("/keys", data={**data, "csrf": csrf})
            assert r.status_code in (400, 403) and alert(r.text), data
        assert len(store.keys.list(workspace="team-a")) == 2
        # Another workspace's keys are not a stored admin key's.
        assert c.get("/keys?workspace=team-b").status_code == 403
        assert c.post(f"/keys/{elsewhere.id}/revoke", data={"csrf": csrf}).status_code == 404
    assert store.keys.get(elsewhere.id).revoked_at is None


def test_a_server_key_manages_every_workspaces_keys(app, store):
    theirs = store.keys.create("b-admin", workspace="team-b", role="admin")
    with browser(app) as c:
        csrf = sign_in(c, SERVER_KEY)
        page = c.get("/keys?workspace=team-b")
        assert page.status_code == 200 and theirs.id in page.text
        r = c.post("/keys", data={"name": "b-writer", "workspace": "team-b", "csrf": csrf})
        assert r.status_code == 201, alert(r.text)
        assert store.keys.grant(secret_on(r.text)).workspace_id == "team-b"
        r = c.post(f"/keys/{theirs.id}/revoke", data={"csrf": csrf})
        assert r.status_code == 303 and r.headers["location"] == "/keys?workspace=team-b"
        assert c.get("/keys?workspace=Not A Workspace").status_code == 400
    assert store.keys.get(theirs.id).revoked_at is not None


@pytest.mark.parametrize("role,store_scoped", [("read_write", False), ("read_only", False),
                                               ("admin", True)])
def test_only_an_admin_of_the_whole_workspace_sees_the_keys(app, store, role, store_scoped):
    sid = store.stores.create("s", workspace="team-a").id
    key = store.keys.create("k", workspace="team-a", role=role,
                           store_ids=[sid] if store_scoped else None)
    with browser(app) as c:
        csrf = sign_in(c, key.key)
        assert 'href="/keys"' not in c.get("/stores").text
        r = c.get("/keys")
        assert r.status_code == 403 and "admin" in alert(r.text)
        assert c.post("/keys", data={"name": "x", "csrf": csrf}).status_code == 403
        assert c.post(f"/keys/{key.id}/revoke", data={"csrf": csrf}).status_code == 403
    assert len(store.keys.list(workspace="team-a")) == 1


# -- key names --------------------------------------------------------------------------------


def test_the_history_names_the_key_behind_each_version(app, store):
    sid = store.stores.create("s").id
    writer = store.keys.create("ci-writer")
    person = store.keys.create("alice")
    with TestClient(app, headers={"x-api-key": writer.key}) as api:
        r = api.post(f"/v1/memory_stores/{sid}/memories", json={"path": "/a.md",
                                                                "content": "by ci"})
        assert r.status_code == 200, r.text
    with browser(app) as c:
        csrf = sign_in(c, person.key)
        mid = store.memories.tree(sid)[0].id
        r = c.post(f"/stores/{sid}/memories/{mid}", data={
            "content": "by alice", "content_sha256": sha256_hex(b"by ci"), "csrf": csrf})
        assert r.status_code == 303, alert(r.text)
        new, old = store.versions.list(sid).data
        page = c.get(f"/stores/{sid}/history").text
        assert re.search(r"API key <strong[^>]*>ci-writer</strong> <code>" + writer.id, page)
        assert re.search(r"<code>user_\w+</code> <span[^>]*>\(key <strong[^>]*>alice</strong>",
                         page)
        assert "ci-writer" in c.get(f"/stores/{sid}/versions/{old.id}").text
        assert "alice" in c.get(f"/stores/{sid}/versions/{new.id}").text
        # A key of another workspace is never named (a version imported from elsewhere).
        theirs = store.keys.create("b-secret-name", workspace="team-b")
        store.memories.create(sid, "/b.md", "imported", actor=Actor.api(theirs.id))
        page = c.get(f"/stores/{sid}/history").text
        assert theirs.id in page and "b-secret-name" not in page
