"""The database waker (memfs.backends.watch): woken by a commit from another connection within a
bound, and by nothing while the database is idle."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest
import trio
import trio.testing

from memfs.api import ChangeHub
from memfs.backends import watch as dbwatch
from memfs.backends.watch import DbWatch
from memfs.store import Store
from tests.support import async_wait_until


def _db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
    return conn


async def test_a_commit_from_another_connection_wakes_it(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    conn = _db(db)
    watch = DbWatch(str(db))
    try:
        watch.drain()
        seen = watch.changes
        delays = []
        for i in range(20):
            t0 = time.monotonic()
            threading.Thread(target=conn.execute, args=("INSERT INTO t VALUES (?)", (i,))
                             ).start()
            with trio.fail_after(1):
                seen = await watch.wait(seen)
            delays.append(time.monotonic() - t0)
            await trio.sleep(0.01)  # the rest of the commit's writes reach the watch (no signal)
            watch.drain()  # and go
        delays.sort()
        assert delays[len(delays) // 2] < 0.05, delays
    finally:
        watch.close()
        conn.close()


async def test_nothing_wakes_it_while_idle(tmp_path: Path) -> None:
    db = tmp_path / "idle.db"
    conn = _db(db)
    conn.execute("INSERT INTO t VALUES (1)")
    reader = sqlite3.connect(db)
    # A neighbour file changing does not wake it either (read, filtered out).
    (tmp_path / "other.log").write_text("x")
    watch = DbWatch(str(db))
    try:
        seen = watch.changes
        with trio.move_on_after(0.5) as scope:
            (tmp_path / "other.log").write_text("y")
            reader.execute("SELECT count(*) FROM t").fetchall()  # a read writes nothing
            seen = await watch.wait(seen)
        assert scope.cancelled_caught and watch.changes == seen == 0
    finally:
        watch.close()
        conn.close()
        reader.close()


@pytest.mark.parametrize("how", ["rm", "mv"])
async def test_the_database_deleted_or_replaced_wakes_it(tmp_path: Path, how: str) -> None:
    db = tmp_path / "gone.db"
    _db(db).close()
    other = tmp_path / "other.db"
    _db(other).close()
    watch = DbWatch(str(db))
    try:
        watch.drain()
        seen = watch.changes
        if how == "rm":
            os.unlink(db)
        else:
            os.rename(other, db)
        with trio.fail_after(1):
            assert await watch.wait(seen) == seen + 1
    finally:
        watch.close()


async def test_waiters_share_one_watch_per_database(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    conn = _db(db)
    a = dbwatch.acquire(str(db))
    b = dbwatch.acquire(str(tmp_path / "." / "shared.db"))
    assert a is not None and a is b
    woke: list[str] = []
    try:
        a.drain()
        seen = a.changes

        async def waiter(name: str) -> None:
            await a.wait(seen)
            woke.append(name)

        with trio.fail_after(2):
            async with trio.open_nursery() as nursery:
                for name in ("one", "two", "three"):
                    nursery.start_soon(waiter, name)
                await trio.testing.wait_all_tasks_blocked()  # all three parked on the watch
                assert woke == []
                await trio.to_thread.run_sync(conn.execute, "INSERT INTO t VALUES (1)")
        assert sorted(woke) == ["one", "three", "two"]
    finally:
        dbwatch.release(a)
        dbwatch.release(b)
        conn.close()
    assert a.fd == -1 and dbwatch.acquire(":memory:") is None


def _frames(chunk: bytes) -> list[tuple[str, dict]]:
    out = []
    for block in chunk.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


async def test_the_change_hub_wakes_on_the_database_not_on_a_timer(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    store, other = Store(db), Store(db)  # other: another connection, as another process
    sid = store.stores.create("hub").id
    hub = ChangeHub(store, ping=60, watch_db=True)
    last = store.feed.last(sid)
    stream = hub.stream(sid, last, last)
    try:
        assert _frames(await stream.__anext__())[0][0] == "ping"
        watch = hub.watch
        assert watch is not None and watch.users == 1
        delays = []
        for i in range(20):
            t0 = time.monotonic()
            await trio.to_thread.run_sync(
                lambda i=i: other.memories.write_path(sid, f"/m{i}.md", "x", actor=None))
            with trio.fail_after(2):
                (name, data), = _frames(await stream.__anext__())
            assert name == "memfs.change" and data["path"] == f"/m{i}.md"
            delays.append(time.monotonic() - t0)
        delays.sort()
        assert delays[len(delays) // 2] < 0.05, delays
        # Idle: no poll at all (the safety poll is 2 s away).
        next_frame = trio.Event()

        async def follow() -> None:
            await stream.__anext__()
            next_frame.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            # The last commit's late wakeups (its WAL and -shm writes) die down: nothing
            # tells that there will be no more.
            await trio.sleep(0.3)
            polls = hub.polls
            await trio.sleep(0.6)  # the point: no poll and no frame within 0.6 s
            assert hub.polls == polls and not next_frame.is_set()
            nursery.cancel_scope.cancel()
        await stream.aclose()
        assert hub.watch is None and watch.fd == -1  # no stream open: no watch held
    finally:
        await stream.aclose()
        store.close()
        other.close()


async def test_the_change_hubs_subscribers_wait_for_a_poll_in_flight(tmp_path: Path) -> None:
    """While one subscriber's poll was in flight (the poll due, its deadline past), every
    other subscriber of the feed took up the watch with that deadline, was cut off at once
    and woke all the others: the event loop spun until the poll ended (idle streams on
    PostgreSQL took a full core, and every other task of the server waited). They wait for
    the poll's end."""
    db = tmp_path / "hub.db"
    store, other = Store(db), Store(db)
    sid = store.stores.create("hub").id
    hub = ChangeHub(store, ping=60, watch_db=True)
    last = store.feed.last(sid)
    watches = 0
    watch_for = hub._watch_for

    async def counted(feed: object) -> None:
        nonlocal watches
        watches += 1
        await watch_for(feed)  # type: ignore[arg-type]

    hub._watch_for = counted  # type: ignore[method-assign]
    got: list[list[str]] = [[] for _ in range(20)]

    async def follow(i: int) -> None:
        async with contextlib.aclosing(hub.stream(sid, last, last)) as stream:
            async for frame in stream:
                got[i] += [name for name, _ in _frames(frame)]

    try:
        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(follow, i)
            await async_wait_until(lambda: all(got), 5, what="every subscriber's ping")
            await trio.sleep(0.3)  # settled: one subscriber on the watch, the others asleep
            real = store.feed.last

            def slow(store_id: str) -> int:
                time.sleep(0.3)  # a database slow to answer
                return real(store_id)

            store.feed.last = slow  # type: ignore[method-assign]
            watches = 0
            await trio.to_thread.run_sync(lambda: other.memories.write_path(sid, "/m.md", "x",
                                                                   actor=None))
            await async_wait_until(lambda: all("memfs.change" in names for names in got), 10,
                                   what="the change, to every subscriber")
            assert watches < 20, watches  # a few per poll; thousands when they spun
            nursery.cancel_scope.cancel()
    finally:
        store.close()
        other.close()
