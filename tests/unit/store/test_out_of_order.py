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

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
import trio

from memfs import api
from memfs.store import Store
from memfs.store.common import complete_event
from tests.support import async_wait_until


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
def held(url: str, sql: str, params: tuple[Any, ...]) -> Iterator[int]:
    """A transaction that ran ``sql`` (an INSERT ... RETURNING seq: the seq it took, yielded)
    and commits only when the block ends (rolls back if the block fails)."""
    with psycopg.connect(url) as conn, conn.transaction():
        seq = conn.execute(sql, params).fetchone()
        assert seq is not None
        yield int(seq[0])


def late_event(url: str, session_id: str) -> Any:
    e = complete_event(session_id, {"type": "user.message", "content": [
        {"type": "text", "text": "late"}]})
    return held(url, "INSERT INTO events (id, session_id, store_id, type, processed_at, body) "
                "VALUES (%s, %s, NULL, %s, %s, %s) RETURNING seq",
                (e.id, session_id, e.type, e.processed_at, json.dumps(e.body)))


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
