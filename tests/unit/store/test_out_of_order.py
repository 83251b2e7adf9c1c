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
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
import pytest
import trio

from memfs import api
from memfs.recall.indexer import BackgroundIndexer, Indexer, pending_count
from memfs.recall.supervisor import IndexerProcess
from memfs.store import Store
from memfs.store.common import complete_event, utc_now
from tests.support import async_wait_until, wait_until
from tests.support.storekit import API


@pytest.fixture
def pg_url(pg_cluster: Any) -> Iterator[str]:
    name = pg_cluster.new_database(pg_cluster.template)
    try:
        yield pg_cluster.url(name)
    finally:
        pg_cluster.drop_database(name)


@pytest.fixture
def store(pg_url: str) -> Iterator[Store]:
    s = Store(pg_url)
    yield s
    s.close()


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
