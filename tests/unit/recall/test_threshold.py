"""A search's threshold (issue 39): hits below it left out, the best relevance seen, the note
that says nothing passed; and one question asked of several stores, or of a session's. Each
runs on SQLite and on PostgreSQL. No test depends on a score's exact value: thresholds are
set from the scores a search gives."""

from __future__ import annotations

import pytest

from memfs import Actor, InvalidRequest, NotFound
from memfs.models import SNAPSHOT_KEY
from memfs.recall import embeddings
from memfs.rules import SEARCH_DEFAULT_THRESHOLD
from memfs.store import Store
from tests.support.backend import Backend

API = Actor.api("apikey_test")


@pytest.fixture
def store(backend: Backend) -> Store:
    s = backend.open()
    s.search.use_embeddings("none")
    return s


@pytest.fixture(scope="module")
def local() -> embeddings.LocalE5:
    return embeddings.local()


def test_a_threshold_above_the_best_leaves_nothing_and_the_note_says_so(
        backend: Backend, local: embeddings.LocalE5) -> None:
    store = backend.open()
    store.search.use_embeddings(local)
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/oncall.md", "Nights and weekends: Dana is paged first.",
                        actor=API)
    store.memories.create(sid, "/lunch.md", "Friday lunch is at noon, pizza.", actor=API)
    store.search.index(sid)
    question = "which engineer handles emergencies after hours"
    every = store.search.in_store(sid, question, threshold=0)
    assert every.hits and every.best == every.hits[0].score
    kept = store.search.in_store(sid, question, threshold=every.best)
    assert kept.hits and all(h.score >= every.best for h in kept.hits)
    assert not (kept.note or "").startswith("nothing scored")
    assert every.best is not None
    if every.best < 1:
        cut = store.search.in_store(sid, question, threshold=1)
        assert cut.hits == [] and cut.best == every.best
        assert cut.note == (f"nothing scored 1 or more (best {every.best:.2f}): nothing "
                            "stored seems to answer this")
    # The default, when none is given.
    default = store.search.in_store(sid, question)
    assert all(h.score >= SEARCH_DEFAULT_THRESHOLD for h in default.hits)
    assert default.hits or (default.note or "").startswith(
        f"nothing scored {SEARCH_DEFAULT_THRESHOLD:g} or more")


def test_no_candidate_is_no_best_and_no_cut(store: Store) -> None:
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/tea.md", "green tea", actor=API)
    r = store.search.in_store(sid, "zebra")
    assert r.hits == [] and r.best is None
    assert r.note == "meaning is off (--embeddings none): words alone answered"
    r = store.search.in_store(sid, "tea", threshold=0.9)  # words alone: all the question's words
    assert [h.path for h in r.hits] == ["/tea.md"] and r.best is not None and r.best > 0.9
    assert r.hits[0].memory_store_id == sid


def test_words_only_never_asks_meaning(backend: Backend, local: embeddings.LocalE5) -> None:
    store = backend.open()
    store.search.use_embeddings(local)
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/tea.md", "green tea", actor=API)
    store.search.index(sid)
    r = store.search.in_store(sid, "tea", channels=("words",), threshold=0)
    assert not r.meaning and [h.matched for h in r.hits] == [("words",)]
    assert store.search.in_store(sid, "tea", threshold=0).meaning


def _three(store: Store) -> tuple[str, str, str]:
    a, b, c = (store.stores.create(n).id for n in ("a", "b", "c"))
    for sid, n in ((a, 3), (b, 2), (c, 1)):
        for i in range(n):
            store.memories.create(sid, f"/tea{i}.md", f"tea number {i} " + "word " * i,
                                actor=API)
    return a, b, c


def test_several_stores_merged_by_relevance_each_hit_with_its_store(store: Store) -> None:
    a, b, c = _three(store)
    r = store.search.in_stores([a, b], "tea", threshold=0)
    assert sorted((h.memory_store_id, h.path) for h in r.hits) == sorted(
        [(a, "/tea0.md"), (a, "/tea1.md"), (a, "/tea2.md"), (b, "/tea0.md"), (b, "/tea1.md")])
    scores = [h.score for h in r.hits]
    assert scores == sorted(scores, reverse=True)
    assert r.memories == 5 and r.best == max(scores)
    for sid in (a, b):  # each store's hits, as its own search scores them
        own = {h.path: h.score for h in store.search.in_store(sid, "tea", threshold=0).hits}
        assert {h.path: h.score for h in r.hits if h.memory_store_id == sid} == own
    assert len(store.search.in_stores([a, b, c], "tea", limit=2, threshold=0).hits) == 2
    assert store.search.in_stores([a], "zebra").best is None
    for bad in ([], [a, a]):
        with pytest.raises(InvalidRequest):
            store.search.in_stores(bad, "tea")
    with pytest.raises(InvalidRequest):
        store.search.in_stores([a], "tea", threshold=2)
    with pytest.raises(NotFound):
        store.search.in_stores([a, "memstore_nope"], "tea")


def test_a_session_searches_its_stores_only_not_its_snapshots(store: Store) -> None:
    a, b, c = _three(store)
    sess = store.sessions.create([
        {"type": "memory_store", "memory_store_id": a, "access": "read_only"},
        {"type": "memory_store", "memory_store_id": b}])
    r = store.search.in_session(sess.id, "tea", threshold=0)
    assert {h.memory_store_id for h in r.hits} == {a, b}  # never c, not attached
    assert [x.memory_store_id for x in store.search.session_stores(sess.id)] == [a, b]
    travel = store.sessions.create([
        {"type": "memory_store", "memory_store_id": a},
        {"type": "memory_store", "memory_store_id": c}],
        metadata={SNAPSHOT_KEY + a: "2020-01-01T00:00:00Z"})
    assert {h.memory_store_id for h in store.search.in_session(travel.id, "tea",
                                                            threshold=0).hits} == {c}
    only_past = store.sessions.create([{"type": "memory_store", "memory_store_id": a}],
                                     metadata={SNAPSHOT_KEY + a: "2020-01-01T00:00:00Z"})
    with pytest.raises(InvalidRequest, match="no memory store to search"):
        store.search.in_session(only_past.id, "tea")
    with pytest.raises(NotFound):
        store.search.in_session("sesn_nope", "tea")


def test_a_session_whose_store_was_deleted_searches_the_others(store: Store) -> None:
    """A deleted store stays among a session's resources: its search made the whole session's
    search a 404 (review of issue 39)."""
    a, b, _ = _three(store)
    sess = store.sessions.create([{"type": "memory_store", "memory_store_id": a},
                                 {"type": "memory_store", "memory_store_id": b}])
    store.stores.delete(b)
    r = store.search.in_session(sess.id, "tea", threshold=0)
    assert r.hits and {h.memory_store_id for h in r.hits} == {a}
