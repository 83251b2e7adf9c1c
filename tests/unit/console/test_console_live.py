"""The Console's open live pages share the app's one watch of credentials with the API's
streams (memfs.api.grants.GrantWatch), on SQLite and on PostgreSQL: each page looked its sign-in
and key up every 0.5 s (three queries a page); now all the pages and streams of a process cost
one query per kind per interval, and a sign-out or a revocation still ends the pages it
concerns, and only them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio
from starlette.testclient import TestClient

from memfs import api
from memfs.api import create_app
from memfs.console import web
from tests.support.asgi import LiveRequest, open_live

SERVER_KEY = "console-live-server-key"
#: The look's interval in these tests (the app's is GRANT_RECHECK_SECONDS, 0.5 s).
EVERY = 0.1


def sign_in(app: Any, key: str) -> tuple[str, str]:
    """A sign-in with ``key``: its cookie's value and its CSRF token."""
    with TestClient(app, base_url="http://console.test", follow_redirects=False) as c:
        r = c.post("/signin", data={"api_key": key, "next": "/stores"})
        assert r.status_code == 303, r.text
        page = c.get("/stores").text
        return (c.cookies.get(web.COOKIE) or "",
                page.split('name="csrf" value="', 1)[1].split('"', 1)[0])


def sign_out(app: Any, cookie: str, csrf: str) -> None:
    with TestClient(app, base_url="http://console.test", follow_redirects=False) as c:
        c.cookies.set(web.COOKIE, cookie, domain="console.test")
        assert c.post("/signout", data={"csrf": csrf}).status_code == 303


def counted(store: Any, *names: str) -> dict[str, list[Any]]:
    """Record each call of the Store methods ``names`` (its arguments) in the returned lists."""
    calls: dict[str, list[Any]] = {name: [] for name in names}
    for name in names:
        part, attr = name.split(".")
        fn = getattr(getattr(store, part), attr)

        def wrapper(*args: Any, _fn: Callable[..., Any] = fn, _name: str = name,
                    **kwargs: Any) -> Any:
            calls[_name].append((args, kwargs))
            return _fn(*args, **kwargs)

        setattr(getattr(store, part), attr, wrapper)
    return calls


async def test_live_pages_and_streams_share_one_look_and_end_with_their_sign_in(
        backend, monkeypatch):
    monkeypatch.setattr(api.streams, "GRANT_RECHECK_SECONDS", EVERY)
    store = backend.open()
    app = create_app(store, [SERVER_KEY])
    key = store.keys.create("dana")
    sid = store.stores.create("notes").id
    (first, csrf), (second, _) = [await trio.to_thread.run_sync(sign_in, app, k)
                                  for k in (key.key, key.key)]
    (by_server, _) = await trio.to_thread.run_sync(sign_in, app, SERVER_KEY)

    def live(cookie: str) -> LiveRequest:
        return LiveRequest(app, f"/stores/{sid}/live", {"cookie": f"{web.COOKIE}={cookie}"})

    mine, also_mine, theirs, server = live(first), live(first), live(second), live(by_server)
    stream = LiveRequest(app, f"/v1/memory_stores/{sid}/changes/stream",
                         {"x-api-key": key.key or ""})
    pages = [mine, also_mine, theirs, server, stream]
    calls = counted(store, "keys.refused", "keys.ended_signins", "keys.check",
                    "keys.signin_revoked",
                    "keys.signin_recorded")
    async with trio.open_nursery() as nursery:
        await open_live(nursery, pages)
        await trio.sleep(2 * EVERY)
        for got in calls.values():
            got.clear()
        began = trio.current_time()
        await trio.sleep(1.0)
        seen = {name: list(got) for name, got in calls.items()}
        took = trio.current_time() - began
        assert not any(p.done.is_set() for p in pages)
        # No page looks its own sign-in up; one look for the key, one for the sign-ins.
        assert [seen[n] for n in ("keys.check", "keys.signin_revoked", "keys.signin_recorded")] == [
            [], [], []]
        assert 2 <= len(seen["keys.refused"]) <= took / EVERY + 1, seen
        assert abs(len(seen["keys.ended_signins"]) - len(seen["keys.refused"])) <= 1, seen
        assert all(set(args[0]) == {key.id} for args, _ in seen["keys.refused"])
        assert all(len(args[0]) == 1 and len(kw["recorded"]) == 2
                   for args, kw in seen["keys.ended_signins"])

        await trio.to_thread.run_sync(sign_out, app, first, csrf)
        with trio.fail_after(10):
            await mine.done.wait()
            await also_mine.done.wait()
        for p in (mine, also_mine):
            assert p.bodies[-1].startswith(b"event: memfs.signed_out") and (
                b"you signed out" in p.bodies[-1])
        await trio.sleep(3 * EVERY)
        assert not any(p.done.is_set() for p in (theirs, server, stream))

        await trio.to_thread.run_sync(store.keys.revoke, key.id)
        with trio.fail_after(10):
            await theirs.done.wait()
            await stream.done.wait()
        assert b"memfs.signed_out" in theirs.bodies[-1] and b"was revoked" in theirs.bodies[-1]
        await trio.sleep(3 * EVERY)
        assert not server.done.is_set()
        nursery.cancel_scope.cancel()
