"""``store.feed`` (feed.py, and the Core's bookkeeping of it in base.py): the change feed is
bounded, and a follower that fell behind the pruned part is told so (issue 8)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memfs.store import Store
from tests.support.backend import Backend
from tests.support.dbstate import count_rows
from tests.support.storekit import API


@pytest.fixture
def store(backend: Backend) -> Store:
    """Every test of this module runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


class TestFeedBounds:
    def test_prune_keeps_the_newest_changes_and_the_last_day(self, store: Store) -> None:
        from memfs.errors import FeedGap

        store.feed_keep = 3
        a, b = store.stores.create("a").id, store.stores.create("b").id
        for i in range(6):
            store.memories.write_path(a, "/x.md", f"a{i}", actor=API)
            store.memories.write_path(b, "/y.md", f"b{i}", actor=API)
        seqs = [c.seq for c in store.feed.since(a, 0)]
        assert len(seqs) == 6
        store.versions.prune(now=datetime.now(UTC) + timedelta(hours=23))  # all within a day
        assert [c.seq for c in store.feed.since(a, 0)] == seqs
        store.versions.prune(now=datetime.now(UTC) + timedelta(hours=25))
        assert count_rows(store, "changes", "store_id = ?", (a,)) == 3
        assert count_rows(store, "changes", "store_id = ?", (b,)) == 3
        # a follower that read up to seqs[2] (the newest pruned) misses nothing
        assert [c.seq for c in store.feed.since(a, seqs[2])] == seqs[3:]
        # one behind that would miss changes silently: it is told to reload
        for behind in (0, seqs[0], seqs[1]):
            with pytest.raises(FeedGap):
                store.feed.since(a, behind)
        assert store.feed.last(a) == seqs[-1]

    def test_the_feed_is_pruned_every_nth_change(self, store: Store, sid: str) -> None:
        from memfs.errors import FeedGap

        store.feed_keep, store.feed_keep_age, store.feed_prune_every = 5, timedelta(0), 10
        start = store.feed.last(sid)
        for i in range(40):
            store.memories.write_path(sid, "/x.md", str(i), actor=API)
        assert 5 <= count_rows(store, "changes", "store_id = ?", (sid,)) < 5 + 10
        with pytest.raises(FeedGap):
            store.feed.since(sid, start)
        fresh = store.feed.last(sid)
        store.memories.write_path(sid, "/x.md", "after", actor=API)
        assert [c.path for c in store.feed.since(sid, fresh)] == ["/x.md"]


class TestNewestSeqs:
    """What the followers of many stores (sessions) look at: each one's newest seq."""

    def test_each_store_s_and_each_session_s_newest_seq(self, store: Store) -> None:
        a, b, empty = (store.stores.create(n).id for n in ("a", "b", "empty"))
        store.memories.write_path(a, "/x.md", "1", actor=API)
        last_a = store.memories.write_path(a, "/x.md", "2", actor=API).seq
        last_b = store.memories.write_path(b, "/y.md", "1", actor=API).seq
        many = [f"memstore_{i}" for i in range(2500)]  # more than a statement asks at once
        marks = store.feed_marks([b, a, empty, a, *many])
        assert (marks[a], marks[b], marks[empty]) == (last_a, last_b, 0)
        assert len(marks) == 3 + len(many) and not any(marks[i] for i in many)
        s = store.sessions.create([]).id
        store.events.send(s, [{"type": "user.message", "content": []}])
        assert store.events.marks([s, "sesn_none"]) == {s: store.events.last_seq(s),
                                                         "sesn_none": 0}
