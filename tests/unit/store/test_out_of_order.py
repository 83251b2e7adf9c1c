"""The followers of the change feed and of the events when commits come out of order (issue
44): on PostgreSQL, writes to different stores (sessions) no longer wait for one another, so
a transaction that took a smaller ``changes.seq`` (``events.seq``) may commit after one that
took a bigger one. Only the order within one store (session) holds: each of its writes holds
its lock until it commits. A follower that keeps one cursor over the whole table would skip
the late change for good; each must follow per store (per session).

Each test makes the late commit for real: a transaction of raw psycopg inserts its row (the
smaller seq) and stays open, a write through the store commits a bigger seq elsewhere, the
follower looks, and only then the first transaction commits: the follower must still see it.
On the test session's throwaway cluster (tests/conftest.py ``pg_cluster``: fails without
PostgreSQL when CI=true)."""

from __future__ import annotations

import hashlib
import json
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
import pytest
import trio

from memfs import api
from memfs.backends.postgresql import WRITE_LOCK_KEY
from memfs.recall.indexer import BackgroundIndexer, Indexer, pending_count
from memfs.recall.supervisor import IndexerProcess
from memfs.store import Store
from memfs.store.common import complete_event, utc_now
from tests.support import async_wait_until, wait_until
from tests.support.feedlocks import check_feed_locks, lock_key
from tests.support.storekit import API


@pytest.fixture
def pg_url(pg_cluster: Any) -> Iterator[str]:
    name = pg_cluster.new_database(pg_cluster.template)
    try:
        yield pg_cluster.url(name)
    finally:
        pg_cluster.drop_database(name)


@pytest.fixture
def store(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """The store's own writes keep the rule (tests/support/feedlocks.py); the held
    transactions, of raw psycopg, are the tests' out-of-order commits."""
    breaches = check_feed_locks(monkeypatch)
    s = Store(pg_url)
    yield s
    s.close()
    assert not breaches, breaches[0]


@contextmanager
def held(url: str, *statements: tuple[str, tuple[Any, ...]]) -> Iterator[int]:
    """A transaction that ran ``statements`` (the last an INSERT ... RETURNING seq: the seq it
    took, yielded) and commits only when the block ends (rolls back if the block fails)."""
    with psycopg.connect(url) as conn, conn.transaction():
        for sql, params in statements:
            cur = conn.execute(sql, params)
        row = cur.fetchone()
        assert row is not None
        yield int(row[0])


def late_event(url: str, session_id: str) -> Any:
    e = complete_event(session_id, {"type": "user.message", "content": [
        {"type": "text", "text": "late"}]})
    return held(url, ("INSERT INTO events (id, session_id, store_id, type, processed_at, body) "
                      "VALUES (%s, %s, NULL, %s, %s, %s) RETURNING seq",
                      (e.id, session_id, e.type, e.processed_at, json.dumps(e.body))))


def late_put(url: str, store_id: str, memory_id: str, path: str, content: str) -> Any:
    """A write of a memory's content (as a write does it: the row, then its change), held."""
    data = content.encode()
    return held(url, ("UPDATE memories SET content = %s, content_sha256 = %s, "
                      "content_size_bytes = %s WHERE id = %s",
                      (content, hashlib.sha256(data).hexdigest(), len(data), memory_id)),
                ("INSERT INTO changes (store_id, op, memory_id, path, at) "
                 "VALUES (%s, 'put', %s, %s, %s) RETURNING seq",
                 (store_id, memory_id, path, utc_now())))


class Hashed:
    """An embedding provider for these tests, which ask only whether a memory is embedded,
    not what it means: a text's vector is made of its sha256's first bytes."""

    model = "test:sha256"

    def passages(self, texts: list[str]) -> Any:
        v = np.array([list(hashlib.sha256(t.encode()).digest()[:8]) for t in texts],
                     dtype=np.float32) + 1.0
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def query(self, text: str, timeout: float) -> Any:
        return self.passages([text])[0]


# -- session events: the API's EventHub ----------------------------------------------------------


async def test_an_event_committed_late_reaches_its_session_s_stream(store: Store,
                                                                    pg_url: str) -> None:
    """EventHub polls which followed sessions have news: a session's event whose seq is
    below another session's already seen event is still found once it commits."""
    hub = api.EventHub(store, interval=0.02)
    early, other = store.sessions.create([]).id, store.sessions.create([]).id
    got: dict[str, list[str]] = {early: [], other: []}

    async def follow(sid: str) -> None:
        async for frame in hub.stream(sid, store.events.last_seq(sid)):
            got[sid].append(frame.split(b"\n")[0].decode())

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow, early)
            nursery.start_soon(follow, other)
            await async_wait_until(lambda: hub.polled, 5)
            with late_event(pg_url, early) as seq:
                sent = await trio.to_thread.run_sync(lambda: store.events.send(
                    other, [{"type": "user.message", "content": []}]))
                assert store.events.last_seq(other) > seq
                # The hub saw the bigger seq (the other stream got its event) first.
                await async_wait_until(lambda: "event: user.message" in got[other], 5)
                assert sent
            await async_wait_until(lambda: "event: user.message" in got[early], 10,
                                   what="the late event on its session's stream")
            nursery.cancel_scope.cancel()


# -- the change feed: the indexer of `memfs serve` and a mount daemon's indexer process -----------


def test_a_memory_changed_late_is_embedded_by_the_background_indexer(store: Store,
                                                                     pg_url: str) -> None:
    """The indexer catches up the stores whose feed moved: a store's change whose seq is
    below another store's already seen change is still noticed once it commits."""
    a, b = store.stores.create("a").id, store.stores.create("b").id
    m = store.memories.write_path(a, "/a.md", "first words", actor=API)
    ix = BackgroundIndexer(store, Hashed(), lambda: [a, b], poll=0.02).start()
    try:
        wait_until(lambda: pending_count(store, a, Hashed.model) == 0, 10)
        with late_put(pg_url, a, m.id, "/a.md", "words changed late") as seq:
            store.memories.write_path(b, "/b.md", "in b", actor=API)
            assert store.feed.last(b) > seq
            wait_until(lambda: pending_count(store, b, Hashed.model) == 0, 10)
            rounds = ix.rounds
            wait_until(lambda: ix.rounds >= rounds + 2, 10)  # a whole round after b's change
        assert pending_count(store, a, Hashed.model) == 1
        wait_until(lambda: pending_count(store, a, Hashed.model) == 0, 10,
                   what="the late change of a embedded")
    finally:
        ix.stop()


def test_a_memory_changed_late_starts_the_indexer_process(store: Store, pg_url: str) -> None:
    """A mount daemon's supervisor starts its indexer process when a store's feed moved and
    there is work: also for a change committed after another store's bigger seq."""
    a, b = store.stores.create("a").id, store.stores.create("b").id
    m = store.memories.write_path(a, "/a.md", "first words", actor=API)
    store.memories.write_path(b, "/b.md", "in b", actor=API)
    for sid in (a, b):
        Indexer(store, Hashed()).catch_up(sid)
    idle = [sys.executable, "-c", "import sys; sys.stdin.read()"]  # a child that waits
    ix = IndexerProcess(store, Hashed.model, [a, b], idle, poll=0.02, first_look=0.0).start()
    try:
        wait_until(lambda: ix.looks >= 1, 10)
        with late_put(pg_url, a, m.id, "/a.md", "words changed late") as seq:
            store.memories.delete_path(b, "/b.md", actor=API)  # no work: no child
            assert store.feed.last(b) > seq
            looks = ix.looks
            wait_until(lambda: ix.looks >= looks + 2, 10)
        assert ix.started == 0
        wait_until(lambda: ix.started == 1, 10, what="the indexer process started for a")
    finally:
        ix.stop()


# -- one store's feed, one session's events: in order under concurrent writers ------------------


def scoped_writer(url: str, scope: str, n: int, insert: Callable[[int], tuple[str, tuple[Any,
                  ...]]], out: list[int]) -> None:
    """``n`` transactions, each as a write of ``scope`` takes its locks (the global lock
    shared, the scope's exclusive, at the start), inserting one row (``insert(i)``: an
    INSERT ... RETURNING seq); some pause between taking their seq and committing, while the
    other scopes' writers commit."""
    rnd = random.Random(scope)
    with psycopg.connect(url) as conn:
        for i in range(n):
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock_shared(%s), pg_advisory_xact_lock(%s)",
                             (WRITE_LOCK_KEY, lock_key(scope)))
                row = conn.execute(*insert(i)).fetchone()
                assert row is not None
                if rnd.random() < 0.3:
                    time.sleep(rnd.random() * 0.003)
            out.append(int(row[0]))


def follow_until(done: threading.Event, read: Callable[[int], list[int]]) -> list[int]:
    """Every seq a follower reads, from position 0, reading again at once until ``done`` is
    set and a last read finds nothing more."""
    seen: list[int] = []
    pos = 0
    while True:
        finished = done.is_set()
        batch = read(pos)
        seen += batch
        pos = batch[-1] if batch else pos
        if finished and not batch:
            return seen


def run_writers(writers: list[threading.Thread], done: threading.Event) -> None:
    for t in writers:
        t.start()
    for t in writers:
        t.join(60)
    done.set()


def change_insert(store_id: str) -> Callable[[int], tuple[str, tuple[Any, ...]]]:
    return lambda i: ("INSERT INTO changes (store_id, op, path, at) VALUES (%s, 'put', %s, %s) "
                      "RETURNING seq", (store_id, f"/m{i}.md", utc_now()))


def event_insert(session_id: str) -> Callable[[int], tuple[str, tuple[Any, ...]]]:
    def insert(i: int) -> tuple[str, tuple[Any, ...]]:
        e = complete_event(session_id, {"type": "user.message", "content": []})
        return ("INSERT INTO events (id, session_id, store_id, type, processed_at, body) VALUES "
                "(%s, %s, NULL, %s, %s, %s) RETURNING seq",
                (e.id, session_id, e.type, e.processed_at, json.dumps(e.body)))
    return insert


@pytest.mark.parametrize("kind", ["changes", "events"])
def test_one_store_s_feed_and_one_session_s_events_are_followed_whole_and_in_order(
        store: Store, pg_url: str, kind: str) -> None:
    """Four connections write to one store (session) under its lock, two to others under
    theirs, all at once; a follower reading ``feed.since`` (``events.after``) all along sees
    every change (event) of its store once, in order: within a store, seqs commit in order,
    because a write holds its store's lock from before it takes a seq until after its commit
    is visible."""
    if kind == "changes":
        ids = [store.stores.create(f"s{i}").id for i in range(3)]
        scopes = [f"store:{i}" for i in ids]
        inserts = [change_insert(i) for i in ids]

        def read(pos: int) -> list[int]:
            return [c.seq for c in store.feed.since(ids[0], pos, 50)]
    else:
        ids = [store.sessions.create([]).id for _ in range(3)]
        scopes = [f"session:{i}" for i in ids]
        inserts = [event_insert(i) for i in ids]
        start = store.events.last_seq(ids[0])

        def read(pos: int) -> list[int]:
            return [seq for seq, _ in store.events.after(ids[0], max(pos, start), 50)]
    written: list[list[int]] = [[] for _ in range(6)]
    which = [0, 0, 0, 0, 1, 2]  # four writers of the followed one, one each of the others
    writers = [threading.Thread(target=scoped_writer, args=(pg_url, scopes[w], 60, inserts[w],
                                                            written[n]))
               for n, w in enumerate(which)]
    done = threading.Event()
    threading.Thread(target=run_writers, args=(writers, done)).start()
    seen = follow_until(done, read)
    mine = sorted(seq for n, w in enumerate(which) if w == 0 for seq in written[n])
    assert len(mine) == 240
    assert seen == mine


def test_writes_through_several_stores_to_one_store_are_followed_whole_and_in_order(
        store: Store, pg_url: str) -> None:
    """The same through the store's own writes (its locks, whichever MEMFS_PG_LOCKS says):
    four writers (each its own pool of connections, as four replicas) create, update and
    delete in one store while two write to another; the feed's follower sees every change of
    its store once, in order, and they are the seqs the writes returned."""
    a, b = store.stores.create("a").id, store.stores.create("b").id
    written: list[list[int]] = [[] for _ in range(6)]

    def write(n: int, sid: str) -> None:
        s = Store(pg_url)
        try:
            for i in range(25):
                path = f"/w{n}/m{i % 5}.md"
                if i % 7 == 6:
                    written[n].append(s.memories.delete_path(sid, path, actor=API).seq)
                else:
                    written[n].append(
                        s.memories.write_path(sid, path, f"{n} {i}", actor=API).seq)
        finally:
            s.close()

    writers = [threading.Thread(target=write, args=(n, a if n < 4 else b)) for n in range(6)]
    done = threading.Event()
    threading.Thread(target=run_writers, args=(writers, done)).start()
    seen = follow_until(done, lambda pos: [c.seq for c in store.feed.since(a, pos, 20)])
    mine = sorted(seq for n in range(4) for seq in written[n])
    assert len(mine) == 100 and seen == mine
