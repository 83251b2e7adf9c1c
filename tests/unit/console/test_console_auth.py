"""The Console's sign-in, cookie, CSRF and error pages in-process (starlette TestClient):
nothing a browser or an attacker can send gets past sign-in, the CSRF check, or into a 500."""

from __future__ import annotations

import time
import urllib.parse

import pytest
import trio
from starlette.testclient import TestClient

from memfs.api import create_app
from memfs.console import web

KEY = "console-key-1"
OTHER = "console-key-2"



@pytest.fixture
def store(backend):
    """Every test of this file runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()

@pytest.fixture
def app(store):
    return create_app(store, [KEY, OTHER])


@pytest.fixture
def browser(app):
    with TestClient(app, base_url="http://console.test", follow_redirects=False) as c:
        yield c


def signed_in(browser: TestClient, key: str = KEY) -> str:
    """Sign in; returns the CSRF token of the session."""
    r = browser.post("/signin", data={"api_key": key, "next": "/stores"})
    assert r.status_code == 303 and r.headers["location"] == "/stores"
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    page = browser.get("/stores").text
    return page.split('name="csrf" value="', 1)[1].split('"', 1)[0]


def test_pages_need_sign_in_and_remember_where_you_were_going(browser):
    r = browser.get("/stores?archived=1")
    assert r.status_code == 303
    assert r.headers["location"] == "/signin?next=%2Fstores%3Farchived%3D1"
    assert browser.post("/stores", data={"name": "x"}).status_code == 401


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/\\evil",
                                    "stores", ""])
def test_after_sign_in_only_paths_of_this_site(browser, target):
    r = browser.post("/signin", data={"api_key": KEY, "next": target})
    assert r.status_code == 303 and r.headers["location"] == "/"


def test_a_wrong_key_or_a_forged_cookie_signs_in_nobody(browser, store):
    r = browser.post("/signin", data={"api_key": "nope"})
    assert r.status_code == 401 and "not an API key" in r.text
    kid = web.api_key_id(KEY)
    forged = [
        f"{kid}.{int(time.time()) + 999}.abc.{'0' * 64}",  # bad signature
        f"{kid}.1.abc.{'0' * 64}",  # expired
        "garbage", "a.b.c.d", "",
    ]
    for value in forged:
        browser.cookies.set(web.COOKIE, value, domain="console.test")
        assert browser.get("/stores").status_code == 303, value
    # A cookie signed for a key the server no longer has is worthless.
    other_app_console = web.Console(store, [OTHER, KEY], error_status=lambda e: 500,
                                    changes=None, read_body=None,  # type: ignore[arg-type]
                                    grants=None)  # type: ignore[arg-type]
    expired = other_app_console.sign(kid, int(time.time()) - 1, "n")
    browser.cookies.set(web.COOKIE, expired, domain="console.test")
    assert browser.get("/stores").status_code == 303


def test_removing_a_key_signs_out_its_sessions(store):
    with TestClient(create_app(store, [KEY]), base_url="http://console.test",
                    follow_redirects=False) as a:
        signed_in(a)
        cookie = a.cookies.get(web.COOKIE)
    with TestClient(create_app(store, [OTHER]), base_url="http://console.test",
                    follow_redirects=False) as b:
        b.cookies.set(web.COOKIE, cookie, domain="console.test")
        assert b.get("/stores").status_code == 303


def test_every_post_needs_the_csrf_token_and_the_same_origin(browser, store):
    csrf = signed_in(browser)
    assert browser.post("/stores", data={"name": "no token"}).status_code == 403
    assert browser.post("/stores", data={"name": "bad", "csrf": "0" * 32}).status_code == 403
    r = browser.post("/stores", data={"name": "cross", "csrf": csrf},
                     headers={"origin": "http://evil.example"})
    assert r.status_code == 403
    assert [s.name for s in store.stores.list().data] == []
    r = browser.post("/stores", data={"name": "Mine", "csrf": csrf},
                     headers={"origin": "http://console.test"})
    assert r.status_code == 303
    created = store.stores.list().data
    assert [s.name for s in created] == ["Mine"]
    # The version a Console user writes is attributed to a user_actor derived from the key.
    assert web.console_actor(web.api_key_id(KEY)).to_dict() == {
        "type": "user_actor", "user_id": "user_" + web.api_key_id(KEY)[7:]}


def test_sign_in_from_another_site_is_refused(browser):
    r = browser.post("/signin", data={"api_key": KEY}, headers={"origin": "http://evil.example"})
    assert r.status_code == 403 and web.COOKIE not in r.headers.get("set-cookie", "")


@pytest.mark.parametrize("path", ["/nope", "/stores/memstore_nope/settings",
                                  "/stores/%00/settings", "/static/../api.py",
                                  "/stores/" + "x" * 5000 + "/settings"])
def test_unknown_things_are_404_pages_not_500(browser, path):
    signed_in(browser)
    r = browser.get(path)
    assert r.status_code == 404, (path, r.status_code)
    assert "text/html" in r.headers["content-type"]


def test_hostile_form_input_is_an_error_page_not_a_500(browser, store):
    csrf = signed_in(browser)
    for data in ({"name": "x" * 10_000, "csrf": csrf},
                 {"name": "ok", "metadata": "no colon here", "csrf": csrf}):
        r = browser.post("/stores", data=data)
        assert r.status_code == 400, (data, r.status_code)
        assert 'role="alert"' in r.text
    for raw in (b"\xff\xfe", b"%ED%A0%80", b"%FF", b"a%00b"):  # bad UTF-8, a surrogate, NUL
        r = browser.post("/stores", content=b"csrf=" + csrf.encode() + b"&name=" + raw,
                         headers={"content-type": "application/x-www-form-urlencoded"})
        assert r.status_code in (303, 400), (raw, r.status_code)
    huge = "x" * (web.MAX_FORM_BYTES + 10)
    r = browser.post("/stores", data={"name": huge, "csrf": csrf})
    assert r.status_code in (400, 403, 413)


def test_the_api_keeps_its_json_errors(browser):
    r = browser.get("/v1/memory_stores")
    assert r.status_code == 401 and r.json()["type"] == "error"
    assert browser.get("/openapi.json").status_code == 200


def test_a_chunked_form_without_length_is_bounded_too(browser, store):
    csrf = signed_in(browser)

    def chunks():
        yield b"csrf=" + csrf.encode() + b"&name="
        for _ in range(40):
            yield b"x" * 100_000

    r = browser.post("/stores", content=chunks(),
                     headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code in (400, 413) and "text/html" in r.headers["content-type"]
    assert store.stores.list().data == []


def test_restoring_a_deleted_memory_never_overwrites_another_at_its_path(browser, store):
    """The deleted memory's path now belongs to another memory: the restore is refused with
    the store's reason, and the other memory keeps its content."""
    csrf = signed_in(browser)
    sid = store.stores.create("s").id
    gone = store.memories.create(sid, "/p.md", "old", actor=None)
    store.memories.delete(sid, gone.id, actor=None)
    other = store.memories.create(sid, "/p.md", "someone else's", actor=None)
    created = store.versions.list(sid, memory_id=gone.id).data[-1]
    assert created.operation == "created"
    r = browser.post(f"/stores/{sid}/versions/{created.id}/restore", data={"csrf": csrf})
    assert r.status_code == 409 and 'role="alert"' in r.text
    assert store.memories.get(sid, other.id).content == "someone else's"
    store.memories.delete(sid, other.id, actor=None)
    r = browser.post(f"/stores/{sid}/versions/{created.id}/restore", data={"csrf": csrf})
    assert r.status_code == 303
    (back,) = store.memories.tree(sid)
    assert store.memories.get(sid, back.id).content == "old"


def test_a_live_refresh_does_not_use_up_the_message_of_the_last_post(browser, store):
    """The page being left refreshed its live fragment (after its own save's change) while the
    browser followed the redirect: the fragment took the "saved" message and the page came
    without it (seen in the browser tests once live updates came within milliseconds)."""
    signed_in(browser)
    sid = store.stores.create("s").id
    mid = store.memories.create(sid, "/plan.md", "x", actor=None).id
    browser.cookies.set(web.FLASH_COOKIE, "saved%20%2Fplan.md", domain="console.test")
    page = f"/stores/{sid}/memories/{mid}"
    r = browser.get(page, headers={"x-memfs-fragment": "1"})
    assert r.status_code == 200 and "saved /plan.md" not in r.text
    assert web.FLASH_COOKIE not in r.headers.get("set-cookie", "")
    r = browser.get(page)
    assert "saved /plan.md" in r.text
    assert browser.get(page).text.count("saved /plan.md") == 0  # shown once


@pytest.mark.parametrize("data", [{"api_key": ""}, {"api_key": "   "}, {}, {"next": "/"}])
def test_sign_in_with_an_empty_key_is_refused_not_a_500(browser, data):
    """What an empty form sends (``api_key=``), or no field at all: the key id of "" is no
    server key's, and the lookup of its secret raised KeyError (issue 19)."""
    r = browser.post("/signin", data=data)
    assert r.status_code == 401 and "text/html" in r.headers["content-type"]
    assert web.COOKIE not in r.headers.get("set-cookie", "")


def test_head_of_the_sign_in_page_answers_like_get(browser):
    get, head = browser.get("/signin"), browser.head("/signin")
    assert (head.status_code, head.content) == (get.status_code, b"")
    assert head.headers["content-type"] == get.headers["content-type"]


def response_status(app, path: str, headers: list[tuple[bytes, bytes]]) -> int:
    """The status a GET is answered with, without waiting for its body (a live feed never
    ends: the TestClient would wait for ever)."""
    path, _, query = path.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": query.encode(), "root_path": "", "client": ("127.0.0.1", 1),
             "server": ("console.test", 80), "headers": [(b"host", b"console.test"), *headers]}
    status: list[int] = []

    async def run() -> None:
        sent = False

        async def receive():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await trio.sleep_forever()

        async def send(message):
            if message["type"] == "http.response.start":
                status.append(message["status"])
                scope_.cancel()

        with trio.CancelScope() as scope_, trio.fail_after(10):
            await app(scope, receive, send)

    trio.run(run)
    return status[0]


@pytest.mark.parametrize("expires", ["9" * 5000, "²", "١٢٣٤٥٦٧٨٩٠", "1_000", " 1"])
def test_a_crafted_expiry_in_the_cookie_signs_in_nobody(app, expires):
    """A key id is public (every version's created_by), so anyone can forge the cookie's
    shape: an expiry of over 4,300 digits, or a Unicode digit, passed ``isdigit()`` and broke
    ``int()`` on every page (issue 19)."""
    value = f"{web.api_key_id(KEY)}.{expires}.abc.{'0' * 64}"
    # The header's bytes as a browser may send them (Starlette reads them as latin-1).
    cookie = f"{web.COOKIE}={value}".encode("latin-1" if max(value) <= "\xff" else "utf-8")
    for path in ("/stores", "/signin", "/nope"):
        assert response_status(app, path, [(b"cookie", cookie)]) in (200, 303, 404), path


@pytest.mark.parametrize("after", ["9" * 5000, "²", "١٢", "99999999999999999999999", "-1"])
def test_a_crafted_position_of_the_live_feed_is_400_not_500(app, browser, store, after):
    signed_in(browser)
    cookie = f"{web.COOKIE}={browser.cookies.get(web.COOKIE)}".encode()
    sid = store.stores.create("s").id
    for headers in ([], [(b"last-event-id", after.encode())]):
        url = f"/stores/{sid}/live" + ("" if headers else "?after=" + urllib.parse.quote(after))
        assert response_status(app, url, [(b"cookie", cookie), *headers]) == 400, headers


def test_every_console_answer_forbids_framing_sniffing_and_caching(browser, store):
    """A page on another port of the same host could frame the signed-in Console (SameSite
    ignores ports), and no answer said nosniff, a referrer policy or not to cache a page of
    memories (issue 19). The policy allows the Console's own script and stylesheet only, so
    it also keeps any markup that slipped into a page from running."""
    sid = store.stores.create("s").id
    pages = ["/signin", "/nope"]
    signed_in(browser)
    pages += ["/stores", f"/stores/{sid}", f"/stores/{sid}/settings", "/stores/x/settings",
              "/static/console.css", "/static/console.js"]
    for path in pages:
        r = browser.get(path)
        h = r.headers
        assert h["x-frame-options"] == "DENY", path
        assert h["x-content-type-options"] == "nosniff", path
        assert h["referrer-policy"] == "same-origin", path
        csp = dict(d.strip().split(" ", 1) for d in h["content-security-policy"].split(";"))
        assert csp["frame-ancestors"] == "'none'" and csp["default-src"] == "'self'", path
        assert "unsafe-inline" not in h["content-security-policy"], path
        assert h["cache-control"] == ("no-cache" if path.startswith("/static/") else "no-store")
    r = browser.post("/signout", data={"csrf": "wrong"})  # an error page after a POST too
    assert r.status_code == 403 and r.headers["x-frame-options"] == "DENY"
    assert "javascript:" not in r.text  # the policy forbids such links: "Go back" is in JS


def test_sign_out_revokes_the_cookie_on_every_replica(backend):
    """Signing out only deleted the cookie in the browser: a copy of it (taken by anyone who
    saw it) still signed in for the rest of its 12 hours (issue 19). Now the sign-out is
    recorded in the database, so every server on it refuses the cookie; another sign-in of
    the same key stays valid."""
    replicas = [create_app(backend.open(), [KEY]) for _ in range(2)]
    with TestClient(replicas[0], base_url="http://console.test",
                    follow_redirects=False) as a, \
            TestClient(replicas[1], base_url="http://console.test",
                       follow_redirects=False) as b:
        csrf = signed_in(a)
        cookie = a.cookies.get(web.COOKIE)
        signed_in(b)  # the same key, signed in apart: not signed out by the other
        other = b.cookies.get(web.COOKIE)
        b.cookies.set(web.COOKIE, cookie, domain="console.test")
        assert b.get("/stores").status_code == 200  # one cookie works on every replica
        r = a.post("/signout", data={"csrf": csrf})
        assert r.status_code == 303 and r.headers["location"] == "/signin"
        for client in (a, b):
            client.cookies.set(web.COOKIE, cookie, domain="console.test")
            r = client.get("/stores")
            assert r.status_code == 303 and r.headers["location"].startswith("/signin"), r
            assert client.post("/stores", data={"name": "x", "csrf": csrf}).status_code == 401
        b.cookies.set(web.COOKIE, other, domain="console.test")
        assert b.get("/stores").status_code == 200


def test_the_current_version_shows_why_it_cannot_be_redacted_instead_of_the_form(
        browser, store):
    csrf = signed_in(browser)
    sid = store.stores.create("s").id
    m = store.memories.create(sid, "/p.md", "one", actor=None)
    store.memories.write_path(sid, "/p.md", "two", actor=None)
    head = store.memories.get(sid, m.id).memory_version_id
    (old,) = [v for v in store.versions.list(sid, memory_id=m.id).data if v.id != head]
    page = browser.get(f"/stores/{sid}/versions/{head}").text
    assert "Redact this version" not in page and 'name="confirm"' not in page
    assert "The current content of a live memory cannot be redacted" in page
    r = browser.post(f"/stores/{sid}/versions/{head}/redact",
                     data={"csrf": csrf, "confirm": "redact"})  # the store refuses it too
    assert r.status_code == 400 and "is the current content of the memory" in r.text
    page = browser.get(f"/stores/{sid}/versions/{old.id}").text
    assert "Redact this version" in page and 'name="confirm"' in page
