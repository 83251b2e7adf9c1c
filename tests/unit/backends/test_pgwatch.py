"""The PostgreSQL change waker (memfs.backends.pgwatch, LISTEN/NOTIFY): woken by a commit of another
process's connection within a bound, for its own store only, never by a rollback, by nothing
while idle, and again after its connection is killed. On the test session's throwaway
cluster (tests/conftest.py ``pg_cluster``: fails without PostgreSQL when CI=true)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
import trio

from memfs.api import ChangeHub
from memfs.backends import pgwatch
from memfs.backends import watch as dbwatch
from memfs.store import Store


@pytest.fixture
def pg_url(pg_cluster) -> Iterator[str]:
    name = pg_cluster.new_database(pg_cluster.template)
    try:
        yield pg_cluster.url(name)
    finally:
        pg_cluster.drop_database(name)


async def _connected(watch: pgwatch.PgWatch, connects: int = 1) -> None:
    with trio.fail_after(10):
        while watch.connects < connects or watch.backend_pid is None:
            await watch.wait(watch.changes)  # a connection counts as a change


def _write(store: Store, sid: str, path: str) -> None:
    store.memories.write_path(sid, path, "x", actor=None)


async def test_a_commit_of_another_process_wakes_its_store_only(pg_url: str) -> None:
    writer = Store(pg_url)  # another pool: as another replica
    a, b = writer.stores.create("a").id, writer.stores.create("b").id
    watch = dbwatch.acquire(pg_url)
    assert isinstance(watch, pgwatch.PgWatch)
    try:
        await _connected(watch)
        va, vb = watch.narrow(a), watch.narrow(b)
        seen_a, seen_b = va.changes, vb.changes
        delays = []
        for i in range(20):
            t0 = time.monotonic()
            threading.Thread(target=_write, args=(writer, a, f"/m{i}.md")).start()
            with trio.fail_after(2):
                seen_a = await va.wait(seen_a)
            delays.append(time.monotonic() - t0)
        assert vb.changes == seen_b  # store b: never woken
        await _write_in_thread(writer, b, "/b.md")
        with trio.fail_after(2):
            await vb.wait(seen_b)
        delays.sort()
        print(f"\nNOTIFY wake-up after a commit: p50 {delays[10] * 1000:.1f} ms, "
              f"max {delays[-1] * 1000:.1f} ms")
        assert delays[10] < 0.1, delays
    finally:
        dbwatch.release(watch)
        writer.close()
    watch.thread.join(5)
    assert not watch.thread.is_alive()


async def _write_in_thread(store: Store, sid: str, path: str) -> None:
    await trio.to_thread.run_sync(_write, store, sid, path)


async def test_a_rollback_and_an_idle_database_wake_nothing(pg_url: str) -> None:
    writer = Store(pg_url)
    sid = writer.stores.create("a").id
    watch = pgwatch.PgWatch(pg_url)
    try:
        await _connected(watch)
        seen = watch.changes
        with psycopg.connect(pg_url) as conn:  # not autocommit: one transaction, rolled back
            conn.execute("INSERT INTO changes (store_id, op, at) VALUES (%s, 'x', 'now')",
                         (sid,))
            conn.rollback()
        with trio.move_on_after(0.5):
            await watch.wait(seen)
        assert watch.changes == seen and watch.reads == 0
    finally:
        watch.close()
        writer.close()


async def test_a_killed_connection_reconnects_and_wakes_its_waiters(pg_cluster,
                                                                    pg_url: str) -> None:
    writer = Store(pg_url)
    sid = writer.stores.create("a").id
    watch = pgwatch.PgWatch(pg_url)
    try:
        await _connected(watch)
        view = watch.narrow(sid)
        seen = view.changes
        pid = watch.backend_pid
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # The waiter is woken at the reconnection (it polls the feed then: nothing lost).
        with trio.fail_after(3):
            seen = await view.wait(seen)
        await _connected(watch, 2)
        assert watch.backend_pid != pid
        # And listening again: a write after it wakes it too.
        await _write_in_thread(writer, sid, "/after.md")
        with trio.fail_after(2):
            await view.wait(seen)
    finally:
        watch.close()
        writer.close()


def _frames(chunk: bytes) -> list[tuple[str, dict]]:
    out = []
    for block in chunk.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


async def test_the_change_hub_is_woken_by_notifications(pg_url: str) -> None:
    store, other = Store(pg_url), Store(pg_url)  # other: as another replica
    sid = store.stores.create("hub").id
    hub = ChangeHub(store, ping=60, watch_db=True)
    last = store.feed.last(sid)
    stream = hub.stream(sid, last, last)
    try:
        assert _frames(await stream.__anext__())[0][0] == "ping"
        watch = hub.watch
        assert isinstance(watch, pgwatch.PgWatch)
        await _connected(watch)
        # The connection woke the feed once (it polls then); let it settle.
        delays = []
        for i in range(20):
            t0 = time.monotonic()
            await _write_in_thread(other, sid, f"/m{i}.md")
            with trio.fail_after(2):
                (name, data), = _frames(await stream.__anext__())
            assert name == "memfs.change" and data["path"] == f"/m{i}.md"
            delays.append(time.monotonic() - t0)
        delays.sort()
        assert delays[10] < 0.1, delays
        # Idle: no poll (the safety poll is 2 s away), and a write to another store does
        # not wake this one's feed.
        next_frame = trio.Event()

        async def follow() -> None:
            await stream.__anext__()
            next_frame.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            await trio.sleep(0.3)  # the last write's notifications settle (nothing says when)
            polls = hub.polls
            elsewhere = other.stores.create("elsewhere").id
            await _write_in_thread(other, elsewhere, "/x.md")
            await trio.sleep(0.6)  # the point: no poll and no frame within 0.6 s
            assert hub.polls == polls and not next_frame.is_set()
            nursery.cancel_scope.cancel()
        await stream.aclose()
        assert hub.watch is None and watch.users == 0  # no stream open: no watch held
        watch.thread.join(5)
        assert not watch.thread.is_alive()
    finally:
        await stream.aclose()
        store.close()
        other.close()


async def test_an_unreachable_database_is_retried_quietly_and_closing_ends_it(
        tmp_path, caplog) -> None:
    watch = pgwatch.PgWatch(f"postgresql:///memfs?host={tmp_path}&port=1")  # no server
    try:
        with trio.move_on_after(0.5):
            await watch.wait(watch.changes)
        assert watch.connects == 0 and watch.thread.is_alive()
        # One warning for the failure streak, not one per retry.
        assert len([r for r in caplog.records if "reconnecting" in r.message]) == 1
    finally:
        watch.close()
    watch.thread.join(5)
    assert not watch.thread.is_alive()
