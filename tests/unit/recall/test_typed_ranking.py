"""Recall and typed memories (issue 41 items 3 and 6): a memory's own importance in its
relevance, an expired memory gone from search at once in a store whose expiry is on (kept in
one that only reports), a superseded memory ranked as stale, a search by type. Each runs on
SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memfs import Actor, InvalidRequest
from memfs.recall import embeddings
from memfs.recall import search as recall_search
from memfs.store import Store
from tests.support.backend import Backend

API = Actor.api("apikey_test")
PAGER = "Priya carries the pager"


@pytest.fixture
def store(backend: Backend) -> Store:
    s = backend.open()
    s.search.use_embeddings("none")
    return s


@pytest.fixture(scope="module")
def local() -> embeddings.LocalE5:
    return embeddings.local()


def _scores(store: Store, sid: str, q: str, **kw: object) -> dict[str, float]:
    return {h.path: h.score for h in store.search.in_store(  # type: ignore[arg-type]
        sid, q, threshold=0, **kw).hits}


def test_a_memory_s_importance_orders_two_equally_similar_memories(store: Store) -> None:
    sid = store.stores.create("Notes").id
    # The same words (low and high are one word each): equally similar (/b.md by a hair, when
    # importance is the same for both).
    store.memories.create(sid, "/a.md", f"---\nimportance: high\n---\n{PAGER}", actor=API)
    store.memories.create(sid, "/b.md", f"---\nimportance: low\n---\n{PAGER}", actor=API)
    hits = store.search.in_store(sid, "who carries the pager", threshold=0).hits
    assert [h.path for h in hits] == ["/a.md", "/b.md"]
    # 0.15 x (0.8 - 0.2): importance's whole weight, nothing else.
    assert hits[0].score - hits[1].score == pytest.approx(0.15 * 0.6, abs=5e-4)


def test_untyped_memories_score_exactly_as_before(store: Store) -> None:
    """What an untyped memory scored before issue 41, written out: ``0.70 x similarity +
    0.15 x 0.5 + 0.15 x recency`` (importance None is the old default, 0.5)."""
    sid = store.stores.create("Notes").id
    for i, text in enumerate(["Priya carries the pager on weeknights",
                              "the pager goes to Marc after 20 minutes",
                              "Friday lunch is pizza", "Priya likes pizza"]):
        store.memories.create(sid, f"/notes/{i}.md", text, actor=API)
    while store.search.catch_up_words(sid):  # what a search does first
        pass
    now = datetime.now(UTC)
    for q in ("who carries the pager", "pizza on Friday", "Priya"):
        got = recall_search.run(store, sid, q, provider=None, limit=10, threshold=0, now=now)
        want = {}
        for e in recall_search.evidence(store, sid, q, provider=None):
            age = (now - datetime.fromisoformat(e.updated_at)).total_seconds() / 86400
            want[e.path] = round(0.70 * e.similarity() + 0.15 * 0.5
                                 + 0.15 * 0.5 ** (age / 90.0), 4)
        assert got.hits and {h.path: h.score for h in got.hits} == want
        assert not any(h.stale for h in got.hits)
        assert {h.memory_type for h in got.hits} == {None}


def test_an_expired_memory_is_never_found_in_a_store_whose_expiry_is_on(store: Store) -> None:
    on = store.stores.create("New").id  # a new store: expiry on
    report = store.stores.create("Old", metadata={"memfs_expiry": "report"}).id
    for sid in (on, report):
        store.memories.create(sid, "/gone.md", f"---\nexpires: 2020-01-01\n---\n{PAGER}",
                              actor=API)
        store.memories.create(sid, "/later.md", f"---\nexpires: 2999-01-01\n---\n{PAGER}",
                              actor=API)
    assert set(_scores(store, on, "pager")) == {"/later.md"}
    assert set(_scores(store, report, "pager")) == {"/gone.md", "/later.md"}
    both = store.search.in_stores([on, report], "pager", threshold=0).hits
    assert sorted((h.memory_store_id == on, h.path) for h in both) == [
        (False, "/gone.md"), (False, "/later.md"), (True, "/later.md")]
    # Turned off by a person: found again at once; on again: gone.
    store.stores.update(on, metadata={"memfs_expiry": "report"})
    assert set(_scores(store, on, "pager")) == {"/gone.md", "/later.md"}


def test_an_expired_memory_is_not_found_by_meaning_either(backend: Backend,
                                                          local: embeddings.LocalE5) -> None:
    store = backend.open()
    store.search.use_embeddings(local)
    on = store.stores.create("New").id
    report = store.stores.create("Old", metadata={"memfs_expiry": "report"}).id
    question = "which engineer handles emergencies after hours"
    for sid in (on, report):
        store.memories.create(sid, "/gone.md", "---\nexpires: 2020-01-01\n---\n"
                              "Nights and weekends: Dana is paged first.", actor=API)
        store.memories.create(sid, "/lunch.md", "Friday lunch is at noon, pizza.", actor=API)
        store.search.index(sid)
    for channels in (("meaning",), ("words", "meaning")):
        r = store.search.in_store(on, question, threshold=0, channels=channels)
        assert r.meaning and [h.path for h in r.hits] == ["/lunch.md"], channels
        r = store.search.in_store(report, question, threshold=0, channels=channels)
        assert r.meaning and [h.path for h in r.hits][0] == "/gone.md", channels


def test_a_superseded_memory_ranks_as_stale(store: Store) -> None:
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/old.md", PAGER, actor=API)
    new = store.memories.create(
        sid, "/new.md", "---\nsupersedes: /other.md\n---\nDana carries the pager now",
        actor=API)
    before = store.search.in_store(sid, "Priya pager", threshold=0).hits
    assert [h.path for h in before][0] == "/old.md" and not any(h.stale for h in before)
    # The same words (other and old are one word each): only /old.md's staleness changes.
    store.memories.update(sid, new.id, content=new.content.replace("/other.md", "/old.md"),
                          actor=API)
    after = {h.path: h for h in store.search.in_store(sid, "Priya pager", threshold=0).hits}
    assert after["/old.md"].stale and not after["/new.md"].stale
    assert after["/old.md"].score == pytest.approx(
        before[0].score * recall_search.STALE, abs=2e-4)
    # A superseding memory that has expired (expiry on) supersedes nothing any more.
    store.memories.update(sid, new.id, content="---\nsupersedes: /old.md\nexpires: "
                          "2020-01-01\n---\nDana carries the pager now", actor=API)
    [hit] = store.search.in_store(sid, "Priya pager", threshold=0).hits
    assert hit.path == "/old.md" and not hit.stale and hit.score == before[0].score


def test_a_search_by_type(store: Store) -> None:
    sid = store.stores.create("Notes").id  # the default types, by directory
    store.memories.create(sid, "/preferences/tea.md", "I drink green tea", actor=API)
    store.memories.create(sid, "/knowledge/tea.md", "green tea grows in Japan", actor=API)
    store.memories.create(sid, "/notes/tea.md", "buy green tea", actor=API)
    every = store.search.in_store(sid, "green tea", threshold=0).hits
    assert {h.path: h.memory_type for h in every} == {
        "/preferences/tea.md": "preference", "/knowledge/tea.md": "knowledge",
        "/notes/tea.md": None}
    hits = store.search.in_store(sid, "green tea", threshold=0, memory_type="preference").hits
    assert [(h.path, h.memory_type) for h in hits] == [("/preferences/tea.md", "preference")]
    assert store.search.in_store(sid, "green tea", memory_type="decision").hits == []
    sess = store.sessions.create([{"type": "memory_store", "memory_store_id": sid}])
    hits = store.search.in_session(sess.id, "green tea", threshold=0,
                                   memory_type="knowledge").hits
    assert [h.path for h in hits] == ["/knowledge/tea.md"]
    for bad in ("", "x" * 65, 3):
        with pytest.raises(InvalidRequest, match="type must be"):
            store.search.in_store(sid, "tea", memory_type=bad)  # type: ignore[arg-type]


def test_a_search_by_type_ranks_by_meaning_among_that_type(backend: Backend,
                                                          local: embeddings.LocalE5) -> None:
    store = backend.open()
    store.search.use_embeddings(local)
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/knowledge/oncall.md", "Nights and weekends: Dana is paged "
                          "first.", actor=API)
    store.memories.create(sid, "/preferences/lunch.md", "Friday lunch is at noon, pizza.",
                          actor=API)
    store.search.index(sid)
    r = store.search.in_store(sid, "which engineer handles emergencies after hours",
                              threshold=0, channels=("meaning",), memory_type="preference")
    assert r.meaning and [h.path for h in r.hits] == ["/preferences/lunch.md"]
