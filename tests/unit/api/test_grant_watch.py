"""One look at the database per process and interval for the credentials of every open live
stream (memfs.api.grants.GrantWatch), on SQLite and on PostgreSQL: each SSE stream opened with a
stored key or a session token looked its credential up every 0.5 s (100 agent sessions with 8
mounted stores each: 1,600 look-ups a second per server). Now N streams of M credentials
cost one query per kind per interval; a refused credential ends its streams and only them; an
outage ends nothing and the watch goes on once the database answers; the watch stops with
the last stream and starts again with the next."""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import trio

from memfs import api
from memfs.api import create_app, grants
from memfs.api.grants import GrantWatch
from memfs.store import Store
from tests.support import async_wait_until
from tests.support.asgi import LiveRequest, open_live

KEY = "grant-watch-server-key"
#: The look's interval in these tests (the app's is GRANT_RECHECK_SECONDS, 0.5 s).
EVERY = 0.1


@pytest.fixture
def store(backend):
    return backend.open()


@pytest.fixture
def world(store):
    """Two stores; two stored keys; two running sessions attaching both, with a token each."""
    sids = [store.stores.create(f"store {i}").id for i in range(2)]
    keys = [store.keys.create(f"key {i}") for i in range(2)]
    sessions = [store.sessions.create([{"type": "memory_store", "memory_store_id": sid}
                                      for sid in sids], status="running").id
                for _ in range(2)]
    tokens = [store.sessions.create_token(s) for s in sessions]
    return SimpleNamespace(stores=sids, keys=keys, sessions=sessions, tokens=tokens)


def counted(store: Store, *names: str) -> dict[str, list[Any]]:
    """Record each call of the Store methods ``names`` (the ids asked, with the ``recorded``
    sign-ins of :meth:`Store.keys.ended_signins`; or the secret) in the returned lists, one per
    name."""
    calls: dict[str, list[Any]] = {name: [] for name in names}
    for name in names:
        part, attr = name.split(".")
        fn = getattr(getattr(store, part), attr)

        def wrapper(first: Any, *args: Any, _fn: Callable[..., Any] = fn, _name: str = name,
                    **kwargs: Any) -> Any:
            calls[_name].append(first if isinstance(first, str) else
                                {*first, *kwargs.get("recorded", ())})
            return _fn(first, *args, **kwargs)

        setattr(getattr(store, part), attr, wrapper)
    return calls


def change_stream(app: Any, sid: str, key: str) -> LiveRequest:
    return LiveRequest(app, f"/v1/memory_stores/{sid}/changes/stream", {"x-api-key": key})


async def test_many_streams_of_few_credentials_cost_one_query_per_kind_per_look(
        store, world, monkeypatch):
    """24 change streams and 6 session event streams of 2 keys and 2 session tokens: every
    look asks once for the keys and once for the tokens (each time all of them), and no
    stream looks its own credential up. Per stream, as before, it would be 300 look-ups a
    second at this interval."""
    monkeypatch.setattr(api.streams, "GRANT_RECHECK_SECONDS", EVERY)
    app = create_app(store, [KEY], console=False, dreams=False)
    calls = counted(store, "keys.refused", "sessions.refused_tokens", "keys.grant",
                    "sessions.grant")
    creds = [k.key for k in world.keys] + [t.token for t in world.tokens]
    streams = [change_stream(app, sid, cred) for cred in creds for sid in world.stores
               for _ in range(3)]
    streams += [LiveRequest(app, f"/v1/sessions/{t.session_id}/events/stream",
                            {"x-api-key": t.token}) for t in world.tokens for _ in range(3)]
    async with trio.open_nursery() as nursery:
        await open_live(nursery, streams)
        await trio.sleep(2 * EVERY)  # every stream held, past the first look
        for got in calls.values():
            got.clear()
        began = trio.current_time()
        await trio.sleep(1.0)
        seen = {name: list(got) for name, got in calls.items()}
        took = trio.current_time() - began
        nursery.cancel_scope.cancel()
    assert not any(s.done.is_set() for s in streams)
    assert seen["keys.grant"] == [] and seen["sessions.grant"] == []
    looks = len(seen["keys.refused"])
    assert 2 <= looks <= took / EVERY + 1, seen  # at least 2: a loaded machine's margin
    assert abs(len(seen["sessions.refused_tokens"]) - looks) <= 1, seen
    assert all(ids == {k.id for k in world.keys} for ids in seen["keys.refused"])
    assert all(ids == {t.id for t in world.tokens} for ids in seen["sessions.refused_tokens"])


async def test_a_revoked_key_ends_its_streams_and_only_them(store, world, monkeypatch, caplog):
    """A key revoked: its three streams (two change streams, a session's event stream) end
    cleanly within the look's interval, the other key's and the token's stay open and are
    still watched (the token's ends once its session stops running), and the log says why
    each ended."""
    caplog.set_level(logging.INFO, logger="memfs.api")
    monkeypatch.setattr(api.streams, "GRANT_RECHECK_SECONDS", EVERY)
    app = create_app(store, [KEY], console=False, dreams=False)
    a, b = world.keys
    token = world.tokens[0]
    theirs = [change_stream(app, sid, a.key) for sid in world.stores]
    theirs.append(LiveRequest(app, f"/v1/sessions/{world.sessions[1]}/events/stream",
                              {"x-api-key": a.key}))
    other, agent = change_stream(app, world.stores[0], b.key), change_stream(
        app, world.stores[0], token.token)
    async with trio.open_nursery() as nursery:
        await open_live(nursery, [*theirs, other, agent])
        revoked = trio.current_time()
        await trio.to_thread.run_sync(store.keys.revoke, a.id)
        with trio.fail_after(10):
            for s in theirs:
                await s.done.wait()
        assert max(s.ended for s in theirs) - revoked < EVERY + 0.5  # a slow machine's margin
        await trio.sleep(3 * EVERY)
        assert not other.done.is_set() and not agent.done.is_set()
        await trio.to_thread.run_sync(store.sessions.set_status, token.session_id, "idle")
        with trio.fail_after(10):
            await agent.done.wait()
        await trio.sleep(3 * EVERY)
        assert not other.done.is_set()
        nursery.cancel_scope.cancel()
    for s in theirs:
        assert s.text.startswith("event: ping") and s.bodies[-1] == b""
    ended = [r.getMessage() for r in caplog.records if r.getMessage().startswith(
        "a stream ends:")]
    assert ended.count(f"a stream ends: API key {a.id} was revoked at "
                       f"{store.keys.get(a.id).revoked_at}") == 3, ended
    assert ended[3:] == [f"a stream ends: the session token of {token.session_id} is valid "
                         "only while the session runs (it is idle)"], ended


async def test_the_watch_stops_with_the_last_stream_and_starts_with_the_next(store, world):
    """The stream whose task looks ends: another takes the looking over (a key revoked after
    still ends the others). The last stream gone, nothing looks any more; a new one starts
    the watch again."""
    watch = GrantWatch(store, EVERY)
    calls = counted(store, "keys.refused")
    a, b = world.keys
    why: dict[str, str] = {}
    scopes: dict[str, trio.CancelScope] = {}

    async def hold(name: str, key_id: str) -> None:
        with trio.CancelScope() as scopes[name]:
            why[name] = await watch.until_refused((grants.KEY, key_id))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold, "first", a.id)
        await async_wait_until(lambda: calls["keys.refused"], what="the first look")
        for name, key in (("a2", a.id), ("a3", a.id), ("b", b.id)):
            nursery.start_soon(hold, name, key)
        await async_wait_until(lambda: watch.statistics()["streams"] == 4)
        scopes["first"].cancel()  # the one that looked: the others go on being watched
        await async_wait_until(lambda: watch.statistics()["streams"] == 3)
        await trio.to_thread.run_sync(store.keys.revoke, a.id)
        await async_wait_until(lambda: {"a2", "a3"} <= set(why), 5, what="a's streams ended")
        assert "revoked" in why["a2"] and "b" not in why and "first" not in why
        scopes["b"].cancel()
    assert watch.statistics() == {"credentials": 0, "streams": 0, "polls": watch.polls}
    assert watch.next_poll is None
    looks = len(calls["keys.refused"])
    await trio.sleep(5 * EVERY)
    assert len(calls["keys.refused"]) == looks  # stopped
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold, "again", b.id)
        await async_wait_until(lambda: len(calls["keys.refused"]) > looks, what="a new look")
        await trio.to_thread.run_sync(store.keys.revoke, b.id)
        await async_wait_until(lambda: "again" in why, 5, what="b's stream ended")
    assert calls["keys.refused"][-1] == {b.id}


async def test_each_look_asks_each_kind_once_for_all_the_streams(store, world):
    """60 streams held by stored keys, session tokens and Console sign-ins of both kinds:
    every look is one query for the keys, one for the tokens and one for the sign-ins, each
    asking all of them."""
    watch = GrantWatch(store, EVERY / 2)
    calls = counted(store, "keys.refused", "sessions.refused_tokens", "keys.ended_signins")
    server_signins, stored_signins = ["a" * 64, "b" * 64], ["c" * 64, "d" * 64]
    for s in stored_signins:
        store.keys.record_signin(s, world.keys[0].id, 2**40)
    held: list[tuple[grants.Credential, ...]] = []
    held += [((grants.KEY, k.id),) for k in world.keys]
    held += [((grants.SESSION_TOKEN, t.id),) for t in world.tokens]
    held += [((grants.SIGNIN, s),) for s in server_signins]
    held += [((grants.STORED_SIGNIN, s), (grants.KEY, world.keys[0].id)) for s in stored_signins]
    ended: list[str] = []

    async def hold(creds: tuple[grants.Credential, ...]) -> None:
        ended.append(await watch.until_refused(*creds))

    async with trio.open_nursery() as nursery:
        for i in range(60):
            nursery.start_soon(hold, held[i % len(held)])
        await trio.sleep(0.6)
        nursery.cancel_scope.cancel()
    assert ended == []
    assert 2 <= watch.polls <= 0.6 / (EVERY / 2) + 2
    assert [len(calls[n]) for n in calls] == [watch.polls] * 3, calls
    assert all(ids == {k.id for k in world.keys} for ids in calls["keys.refused"])
    assert all(ids == {t.id for t in world.tokens} for ids in calls["sessions.refused_tokens"])
    assert all(ids == set(server_signins + stored_signins) for ids in calls["keys.ended_signins"])


async def test_a_sign_out_ends_the_streams_held_by_that_sign_in_only(store, world):
    """Console sign-ins: a server key's ends when signed out; a stored key's too, and when
    its key is revoked."""
    watch = GrantWatch(store, EVERY)
    key = world.keys[0]
    mine, theirs, stored = "1" * 64, "2" * 64, "3" * 64
    store.keys.record_signin(stored, key.id, 2**40)
    why: dict[str, str] = {}

    async def hold(name: str, *creds: grants.Credential) -> None:
        why[name] = await watch.until_refused(*creds)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold, "mine", (grants.SIGNIN, mine))
        nursery.start_soon(hold, "theirs", (grants.SIGNIN, theirs))
        nursery.start_soon(hold, "stored", (grants.STORED_SIGNIN, stored), (grants.KEY, key.id))
        await async_wait_until(lambda: watch.polls >= 1)
        await trio.to_thread.run_sync(store.keys.revoke_signin, mine, 2**40)
        await async_wait_until(lambda: "mine" in why, 5)
        assert why == {"mine": "you signed out"}
        await trio.to_thread.run_sync(store.keys.revoke, key.id)
        await async_wait_until(lambda: "stored" in why, 5)
        assert "was revoked" in why["stored"] and "theirs" not in why
        nursery.cancel_scope.cancel()


async def test_an_outage_ends_no_stream_and_the_watch_goes_on_after_it(pg_cluster, caplog):
    """The database refuses connections for a while (a restart, a failover): every look
    fails, no stream ends, the server says so once; once the database answers again, a key
    revoked ends its streams."""
    import psycopg

    caplog.set_level(logging.INFO, logger="memfs.api.grants")
    name = pg_cluster.new_database(pg_cluster.template)
    url = pg_cluster.url(name)
    store, writer = Store(url), Store(url)
    try:
        a, b = store.keys.create("a"), store.keys.create("b")
        watch = GrantWatch(store, EVERY)
        why: dict[str, str] = {}

        async def hold(key_id: str) -> None:
            why[key_id] = await watch.until_refused((grants.KEY, key_id))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold, a.id)
            nursery.start_soon(hold, b.id)
            await async_wait_until(lambda: watch.polls >= 1)
            with psycopg.connect(pg_cluster.url(), autocommit=True) as admin:
                admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE datname = %s", (name,))
                await async_wait_until(lambda: watch.failures.count >= 2, 30,
                                       what="two failed looks")
                admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            assert why == {}
            await trio.to_thread.run_sync(writer.keys.revoke, a.id)
            await async_wait_until(lambda: a.id in why, 30, what="a's stream ended")
            assert "was revoked" in why[a.id] and b.id not in why
            assert watch.failures.count == 0
            nursery.cancel_scope.cancel()
    finally:
        store.close()
        writer.close()
        pg_cluster.drop_database(name)
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "memfs.api.grants"]
    assert [level for level, _ in said] == ["WARNING", "INFO"], said
    assert "cannot be reached" in said[0][1] and "goes on after" in said[1][1]
