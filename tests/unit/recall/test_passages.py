"""Meaning over the whole memory (issue 39): passages, their vectors kept when their text is,
the snippet from the passage that matched, a relevance that says when nothing answers, and a
search right after a write that waits for meaning."""

from __future__ import annotations

from typing import Any

import pytest

from memfs import Actor
from memfs.recall import embeddings
from memfs.recall import search as recall_search
from memfs.recall.passages import PASSAGE_CHARS, decode, split
from tests.support.backend import Backend

API = Actor.api("apikey_test")

FILLER = "\n".join(
    f"- Meeting {i}: the committee went through the minutes of the previous session, the "
    f"budget lines for printing and the room bookings for next term." for i in range(24))
KEY = "The spare key of the house is under the blue flowerpot by the back door."


class Counting:
    """The local model, counting the passages it is given."""

    def __init__(self) -> None:
        self.inner = embeddings.local()
        self.model = self.inner.model
        self.texts: list[str] = []

    def passages(self, texts: list[str]) -> Any:
        self.texts += texts
        return self.inner.passages(texts)

    def query(self, text: str, timeout: float) -> Any:
        return self.inner.query(text, timeout)


def test_a_memory_is_cut_into_overlapping_passages_that_cover_it() -> None:
    content = FILLER + "\n" + KEY + "\n"
    ps = split("/notes/committee.md", content)
    assert len(ps) > 3 and all(p.end - p.start <= PASSAGE_CHARS for p in ps)
    assert ps[0].start == 0 and ps[-1].end == len(content.rstrip("\n"))
    for a, b in zip(ps, ps[1:], strict=False):
        assert b.start < a.end  # one line of each passage begins the next
    assert all(p.text.startswith("/notes/committee.md\n") for p in ps)
    assert KEY in ps[-1].text
    # A line longer than a passage is cut at a sentence's or a word's end.
    long = " ".join(["word"] * 400)
    assert all(len(p.text) <= PASSAGE_CHARS + 4 for p in split("/a", long))
    assert split("/empty.md", "")[0].text == "/empty.md\n"


def test_meaning_finds_what_a_long_memory_says_at_its_end(backend: Backend) -> None:
    """Before passages, meaning embedded the first 400 characters: the key, at the end of a
    3 kB memory, was not there to be found."""
    store = backend.open()
    store.search.use_embeddings(embeddings.local())
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/notes/committee.md", FILLER + "\n" + KEY + "\n", actor=API)
    store.memories.create(sid, "/notes/garden.md", "Water the tomatoes every second evening.",
                        actor=API)
    store.memories.create(sid, "/notes/car.md", "The car goes to the garage for its service "
                        "in March.", actor=API)
    assert store.search.index(sid).pending == 0
    r = store.search.in_store(sid, "where can I find a way to get inside if I am locked out",
                     channels=("meaning",), threshold=0)
    assert r.hits[0].path == "/notes/committee.md", r
    # The snippet comes from the passage that matched (the last one), not the memory's start.
    last = split("/notes/committee.md", FILLER + "\n" + KEY + "\n")[-1]
    assert r.hits[0].snippet in last.text and "Meeting 0:" not in r.hits[0].snippet
    r = store.search.in_store(sid, "where is the spare key", threshold=0)
    assert r.hits[0].path == "/notes/committee.md" and "flowerpot" in r.hits[0].snippet


def test_a_changed_memory_embeds_only_its_changed_passages(backend: Backend) -> None:
    store = backend.open()
    counting = Counting()
    store.search.use_embeddings(counting)  # type: ignore[arg-type]
    sid = store.stores.create("Notes").id
    m = store.memories.create(sid, "/notes/committee.md", FILLER + "\n" + KEY + "\n", actor=API)
    assert store.search.index(sid).embedded == 1
    first = len(counting.texts)
    assert first == len(split(m.path, FILLER + "\n" + KEY + "\n")) > 3
    store.memories.update(sid, m.id, content=FILLER + "\n" + KEY + "\nAnd the shed's too.\n",
                        actor=API)
    assert store.search.index(sid).embedded == 1
    assert len(counting.texts) - first == 1  # the last passage alone
    row = store.database.one("SELECT passages FROM memory_vectors WHERE memory_id = ?", (m.id,))
    assert row is not None and len(decode(row[0])) == first


def test_an_unrelated_question_is_answered_empty_with_the_best_score(backend: Backend) -> None:
    store = backend.open()
    store.search.use_embeddings(embeddings.local())
    sid = store.stores.create("Notes").id
    for path, text in (("/people/dana.md", "Dana is paged first at night and on weekends."),
                       ("/prefs/tea.md", "I drink green tea without sugar in the morning."),
                       ("/howto/deploy.md", "Deploys go out on Tuesdays after the standup.")):
        store.memories.create(sid, path, text, actor=API)
    store.search.index(sid)
    for question in ("zzzz qqqq", "What is the boiling point of mercury?"):
        r = store.search.in_store(sid, question)
        assert r.hits == [] and r.best is not None and r.best < 0.7, r
        assert (r.note or "").startswith("nothing scored 0.7 or more")
    r = store.search.in_store(sid, "who is paged at night")
    assert r.hits and r.hits[0].path == "/people/dana.md" and r.hits[0].score >= 0.7


def test_a_search_right_after_a_write_waits_for_meaning(backend: Backend) -> None:
    """Right after a write, a question in other words found nothing while the indexer had
    not embedded it: now a search embeds the few memories pending first (within
    WAIT_SECONDS)."""
    store = backend.open()
    store.search.use_embeddings(embeddings.local())
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/prefs/tea.md", "I drink green tea without sugar.", actor=API)
    store.search.index(sid)
    store.memories.create(sid, "/pets/cat.md", "The cat sleeps on the sofa all afternoon.",
                        actor=API)
    r = store.search.in_store(sid, "where does my kitten nap", threshold=0)
    assert r.meaning and r.indexed == 2 and r.note is None, r
    assert r.hits[0].path == "/pets/cat.md" and "meaning" in r.hits[0].matched


def test_many_pending_memories_are_not_waited_for(backend: Backend,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    store = backend.open()
    store.search.use_embeddings(embeddings.local())
    monkeypatch.setattr(recall_search, "WAIT_PENDING", 1)
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/prefs/tea.md", "I drink green tea without sugar.", actor=API)
    store.search.index(sid)
    for i in range(2):
        store.memories.create(sid, f"/pets/cat{i}.md", "The cat sleeps on the sofa.", actor=API)
    r = store.search.in_store(sid, "where does my kitten nap", threshold=0)
    assert r.indexed == 1 and "meaning covers 1 of 3" in (r.note or ""), r


def test_every_memory_is_found_by_its_first_passage_before_any_is_read_whole(
        backend: Backend) -> None:
    """Embedding whole memories takes several times longer than their first passages: the
    indexer embeds the first passage of every pending memory before the others' passages, so
    that a store is searchable by meaning as soon as it was with one vector a memory."""
    from memfs.recall.indexer import Indexer, has_work

    store = backend.open()
    counting = Counting()
    store.search.use_embeddings(counting)  # type: ignore[arg-type]
    sid = store.stores.create("Notes").id
    long = FILLER + "\n" + KEY + "\n"
    for i in range(3):
        store.memories.create(sid, f"/notes/m{i}.md", long, actor=API)
    p = Indexer(store, counting).catch_up(sid, deepen=False)  # type: ignore[arg-type]
    assert (p.embedded, p.pending, p.deepened) == (3, 0, 0)
    assert len(counting.texts) == 3 and all(t.startswith("/notes/m") for t in counting.texts)
    assert store.search.status(sid)["indexed"] == 3 and has_work(store, sid, counting.model)
    rows = store.database.all("SELECT passages_left FROM memory_vectors WHERE store_id = ?",
                              (sid,))
    assert [r[0] for r in rows] == [len(split("/notes/m0.md", long)) - 1] * 3
    p = store.search.index(sid)
    assert (p.embedded, p.pending, p.deepened) == (0, 0, 3)
    assert len(counting.texts) == 3 * len(split("/notes/m0.md", long))
    assert not has_work(store, sid, counting.model)
    r = store.search.in_store(sid, "where is the spare key", threshold=0)
    assert "flowerpot" in r.hits[0].snippet


def test_vectors_from_before_passages_rank_until_embedded_again(
        backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the upgrade every vector is of the old kind (one, of the memory's beginning): they
    are all pending, to be embedded again, and rank meanwhile (review of issue 39: the search
    said that nothing was indexed and asked words alone)."""
    monkeypatch.setattr(recall_search, "WAIT_PENDING", 0)  # no search embeds what is pending
    store = backend.open()
    store.search.use_embeddings(embeddings.local())
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/pets/cat.md", "The cat sleeps on the sofa all afternoon.",
                        actor=API)
    store.memories.create(sid, "/prefs/tea.md", "I drink green tea without sugar.", actor=API)
    store.search.index(sid)
    with store.database.write() as c:  # as m017 leaves the vectors of before
        c.execute("UPDATE memory_vectors SET passages = '' WHERE store_id = ?", (sid,))
    assert store.search.status(sid)["indexed"] == 0
    r = store.search.in_store(sid, "where does my kitten nap", threshold=0)
    assert r.meaning and r.hits[0].path == "/pets/cat.md" and "meaning" in r.hits[0].matched


def test_a_mount_s_indexer_process_waits_for_the_local_model_only(backend: Backend) -> None:
    """A search of a mount asks its indexer process to wait for meaning: with a service as
    provider, that wait embedded a batch with the service's minute-long timeout, blocking the
    process's questions far past the search's 3.5 s (review of issue 39)."""
    import json

    import numpy as np

    from memfs.recall import worker

    asked: list[str] = []

    class Service:
        model = "openai:slow@http://127.0.0.1:9"

        def passages(self, texts: list[str]) -> Any:
            asked.extend(texts)  # (a service's batch: up to a minute)
            return np.ones((len(texts), 384), dtype=np.float32) / np.sqrt(384)

        def query(self, text: str, timeout: float) -> Any:
            v = np.ones(384, dtype=np.float32)
            return v / np.linalg.norm(v)

    store = backend.open()
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/pets/cat.md", "The cat sleeps on the sofa.", actor=API)
    line = json.dumps({"id": 1, "store": sid, "question": "kitten", "path_prefix": None,
                       "also": [], "wait": 1.5, "timeout": 3.4}).encode()
    got = json.loads(worker.answer(store, Service(), [sid], line))  # type: ignore[arg-type]
    assert "error" not in got and got["ranked"] == [] and asked == [], got
