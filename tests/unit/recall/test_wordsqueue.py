"""The words index taken in later (issue 23; PostgreSQL too since issue 39): a write only
queues its memory (``memory_words_queue``), and :mod:`memfs.recall.wordsqueue` indexes the
queue, a batch at a time, before each search by words and in the background. What a search
finds is covered, on both backends, by ``test_recall.py`` and ``test_words.py``; here, what
the queue does and costs."""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

import pytest

from memfs import Actor
from memfs.errors import Busy
from memfs.recall import schema, words, wordsindex, wordsqueue
from memfs.store import Limits, Store
from tests.support import wait_until
from tests.support.backend import Backend

API = Actor.api("apikey_test")


@pytest.fixture
def store(backend: Backend) -> Store:
    s = backend.open()
    s.search.use_embeddings("none")
    return s


Indexed = dict[str, tuple[int, dict[str, tuple[int, int]]]]


def indexed(store: Store, store_id: str) -> Indexed:
    """The words index of a store, as memory id -> (length, {term: (in path, in content)})."""
    return wordsindex.held(store.database, store_id)


def live(store: Store, store_id: str) -> Indexed:
    """What the index should hold of the store's memories."""
    return {r[0]: words.index(r[1], r[2]) for r in store.database.all(
        "SELECT id, path, content FROM memories WHERE store_id = ?", (store_id,))}


def hits_id(store: Store, store_id: str, path: str) -> str:
    return store.memories.get_by_path(store_id, path).id


def test_a_write_queues_its_memory_and_tokenizes_nothing(store: Store) -> None:
    sid = store.stores.create("Notes").id
    store.memories.write_path(sid, "/a.md", "the quokka lives on Rottnest", actor=API)
    store.memories.write_path(sid, "/a.md", "the quokka smiles", actor=API)  # one row a memory
    assert wordsqueue.queued(store.database, sid) == 1
    assert indexed(store, sid) == {}
    assert [h.path for h in store.search.in_store(sid, "quokka").hits] == ["/a.md"]
    assert wordsqueue.queued(store.database, sid) == 0
    assert indexed(store, sid) == live(store, sid)
    assert "smile" in indexed(store, sid)[hits_id(store, sid, "/a.md")][1]


def test_any_mix_of_changes_taken_in_by_batches_ends_as_the_memories_are(store: Store) -> None:
    sid = store.stores.create("Notes").id
    for i in range(150):
        store.memories.write_path(sid, f"/n/{i}.md", f"note {i} about kiwis", actor=API)
    assert wordsqueue.catch_up(store.database, sid, limit=40) == 40  # some indexed early
    for i in range(0, 150, 3):
        store.memories.write_path(sid, f"/n/{i}.md", f"note {i} about wombats", actor=API)
    for i in range(1, 150, 3):
        store.memories.rename_path(sid, f"/n/{i}.md", f"/m/{i}.md", actor=API)
    for i in range(2, 150, 9):
        store.memories.delete_path(sid, f"/n/{i}.md", actor=API)
    store.memories.write_path(sid, "/m/1.md", "replaced by a write", actor=API)
    waiting = wordsqueue.queued(store.database, sid)
    assert waiting > 80
    taken = []
    while n := wordsqueue.catch_up(store.database, sid, limit=40):
        taken.append(n)
    assert taken == [40] * (waiting // 40) + ([waiting % 40] if waiting % 40 else [])
    assert indexed(store, sid) == live(store, sid)
    assert store.database.one("SELECT count(*) FROM memory_words")[0] == len(live(store, sid))
    # the terms of no memory but the live ones
    assert wordsindex.size(store.database) == sum(len(t) for _, t in live(store, sid).values())
    hits = store.search.in_store(sid, "wombats", limit=100, threshold=0).hits
    assert sorted(h.path for h in hits) == sorted(f"/n/{i}.md" for i in range(0, 150, 3))


def test_one_store_s_catch_up_leaves_the_others_queue(store: Store) -> None:
    a, b = store.stores.create("A").id, store.stores.create("B").id
    store.memories.write_path(a, "/x.md", "alpha", actor=API)
    store.memories.write_path(b, "/y.md", "beta", actor=API)
    assert store.search.catch_up_words(a) == 1 and store.search.catch_up_words(a) == 0
    assert wordsqueue.queued(store.database, b) == 1
    assert store.search.catch_up_words() == 1  # any store's
    assert wordsqueue.queued(store.database, b) == 0 and indexed(store, b)


def test_a_catch_up_of_any_store_takes_one_store_s_batch(store: Store) -> None:
    """Issue 44: a batch is one store's, under that store's lock (on PostgreSQL a write of
    another store may commit meanwhile): with none named, one store with a queue is taken,
    and calls again take the others'."""
    a, b = store.stores.create("A").id, store.stores.create("B").id
    for i in range(3):
        store.memories.write_path(a, f"/{i}.md", "alpha", actor=API)
        store.memories.write_path(b, f"/{i}.md", "beta", actor=API)
    assert wordsqueue.catch_up(store.database) == 3
    assert sorted([wordsqueue.queued(store.database, a),
                   wordsqueue.queued(store.database, b)]) == [0, 3]
    assert wordsqueue.catch_up(store.database) == 3
    assert wordsqueue.catch_up(store.database) == 0
    assert indexed(store, a) and indexed(store, b)


def test_an_empty_queue_takes_no_write_lock(tmp_path: Path) -> None:
    store = Store(tmp_path / "m.db", limits=Limits())
    sid = store.stores.create("Notes").id
    before = store.database.writer.total_changes
    store.database.writer.execute("BEGIN IMMEDIATE")  # held elsewhere: a catch-up must not wait
    try:
        assert store.search.catch_up_words(sid) == 0
    finally:
        store.database.writer.execute("ROLLBACK")
    try:
        assert store.database.writer.total_changes == before
    finally:
        store.close()


def test_the_migrations_from_m012_queue_every_memory_to_be_indexed_again(tmp_path: Path,
                                                                        ) -> None:
    path = tmp_path / "old.db"
    with Store(path, limits=Limits()) as s:
        sid = s.stores.create("Notes").id
    conn = sqlite3.connect(path)  # back to m012, whose triggers index the words at once
    fts5 = schema.SQLITE[schema.SQLITE.index("CREATE TABLE memory_words_rows"):
                         schema.SQLITE.index("CREATE TRIGGER memory_words_insert")]
    old_triggers = schema.SQLITE[
        schema.SQLITE.index("CREATE TRIGGER memory_words_insert"):
        schema.SQLITE.index("INSERT INTO memory_words_rows (memory_id, store_id) SELECT")]
    conn.executescript(
        "DROP TABLE memory_words_vocab; DROP TABLE memory_words_fts; DROP TABLE memory_words; "
        "DELETE FROM _sqlite_migrations WHERE name = 'm018_words_bm25';" + fts5 +
        "DROP TRIGGER memory_words_queue_insert; DROP TRIGGER memory_words_queue_update; "
        "DROP TRIGGER memory_words_queue_delete; DROP TABLE memory_words_queue; "
        "DELETE FROM _sqlite_migrations WHERE name = 'm013_words_queue';" + old_triggers)
    conn.execute(
        "INSERT INTO memories (id, store_id, path, content, content_sha256, content_size_bytes, "
        "version_id, created_at, updated_at) VALUES ('mem_old', ?, '/old.md', 'the old quokka', "
        "'x', 14, 'memver_old', '2026-01-01', '2026-01-01')", (sid,))
    conn.commit()
    conn.close()
    s = Store(path, limits=Limits())  # migrates
    s.search.use_embeddings("none")
    try:
        assert wordsqueue.queued(s.database, sid) == 1  # m018_words_bm25: to index again
        assert [h.path for h in s.search.in_store(sid, "quokkas").hits] == ["/old.md"]
        assert indexed(s, sid) == live(s, sid)
        s.memories.write_path(s_id := sid, "/new.md", "a new quokka", actor=API)
        assert wordsqueue.queued(s.database, s_id) == 1
        assert sorted(h.path for h in s.search.in_store(sid, "quokka").hits) == ["/new.md",
                                                                                 "/old.md"]
    finally:
        s.close()


def test_the_server_s_thread_takes_the_queue_in_and_outlives_a_failure(
    store: Store, caplog: pytest.LogCaptureFixture,
) -> None:
    sid = store.stores.create("Notes").id
    for i in range(100):
        store.memories.write_path(sid, f"/{i}.md", f"the quokka {i}", actor=API)
    calls = []

    def catch_up() -> int:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise Busy("the database stayed locked")  # logged once, tried again
        done = store.search.catch_up_words()
        # The queue is empty before the round that emptied it ends and says it goes on:
        # the test waits for that line (it once looked only at the queue, and the line
        # came after the INFO capture had ended: a CI failure).
        time.sleep(0.05)
        return done

    thread = wordsqueue.BackgroundCatchUp(catch_up, interval=0.02).start()
    try:
        with caplog.at_level(logging.INFO, "memfs.recall.wordsqueue"):
            wait_until(lambda: wordsqueue.queued(store.database, sid) == 0, timeout=10)
            wait_until(lambda: any("goes on" in r.getMessage() for r in caplog.records),
                       timeout=10)
    finally:
        thread.stop()
    assert len(indexed(store, sid)) == 100
    assert any("catch-up waits: the database stayed locked" in r.getMessage()
               for r in caplog.records)
    assert any("goes on" in r.getMessage() for r in caplog.records)


def test_a_deleted_store_leaves_no_words_behind(store: Store) -> None:
    """No one searches a deleted store again, and a mount takes in its own store's queue
    only: its words go with its memories, in the deletion's transaction."""
    a, b = store.stores.create("A").id, store.stores.create("B").id
    for i in range(70):
        store.memories.write_path(a, f"/{i}.md", f"the quokka {i}", actor=API)
    store.memories.write_path(b, "/keep.md", "a quokka too", actor=API)
    store.search.in_store(a, "quokka")  # a's words indexed
    store.memories.write_path(a, "/late.md", "a late quokka", actor=API)  # and one still queued
    store.stores.delete(a)
    assert store.database.one(
        "SELECT count(*) FROM memory_words_queue WHERE store_id = ?", (a,))[0] == 0
    assert store.database.one(
        "SELECT count(*) FROM memory_words WHERE store_id = ?", (a,))[0] == 0
    assert wordsindex.held(store.database, a) == {}
    assert [h.path for h in store.search.in_store(b, "quokka").hits] == ["/keep.md"]
    assert wordsindex.size(store.database) == len(live(store, b)[hits_id(store, b, "/keep.md")][1])
    assert store.database.one("SELECT count(*) FROM memory_words")[0] == 1


def test_a_batch_is_bounded_by_its_rows_of_terms(store: Store) -> None:
    """The write lock holds for the rows a batch writes: a batch stops at ``rows`` rows of
    terms (one memory at least), however few memories that is."""
    sid = store.stores.create("Notes").id
    for i in range(3):
        store.memories.write_path(sid, f"/{i}.md", " ".join(f"w{i}x{j}" for j in range(300)),
                                  actor=API)
    assert wordsqueue.catch_up(store.database, sid, rows=1) == 1
    assert wordsqueue.catch_up(store.database, sid, rows=400) == 2
    assert indexed(store, sid) == live(store, sid)


def test_a_memory_changed_while_its_words_are_stemmed_is_indexed_as_it_is_then(
    store: Store, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stemming happens before the write lock: a write that commits in between is what the
    index takes in, never the text it replaced."""
    sid = store.stores.create("Notes").id
    store.memories.write_path(sid, "/a.md", "the alpha quokka", actor=API)
    stem = wordsqueue._index
    calls = []

    def index_then_write(path: str, content: str) -> wordsqueue.Terms:
        calls.append(content)
        if len(calls) == 1:  # a write lands after the text was read, before the lock
            store.memories.write_path(sid, "/a.md", "the omega wombat", actor=API)
        return stem(path, content)

    monkeypatch.setattr(wordsqueue, "_index", index_then_write)
    assert wordsqueue.catch_up(store.database, sid) == 1
    assert calls == ["the alpha quokka", "the omega wombat"]
    assert wordsqueue.queued(store.database, sid) == 0
    assert indexed(store, sid) == live(store, sid)
    assert [h.path for h in store.search.in_store(sid, "wombat").hits] == ["/a.md"]
    assert store.search.in_store(sid, "alpha").hits == []


KILLED_MID_BATCH = """
import os, signal, sys
from memfs.recall import wordsindex, wordsqueue
from memfs.store import Limits, Store

put = wordsindex.put


def put_then_die(c, dialect, docs):
    put(c, dialect, docs)  # the batch's words written, its transaction not yet committed
    os.kill(os.getpid(), signal.SIGKILL)


wordsindex.put = put_then_die
store = Store(sys.argv[1], limits=Limits())
wordsqueue.catch_up(store.database, sys.argv[2])
"""


def test_a_catch_up_killed_mid_batch_leaves_its_batch_queued_and_no_words(
    backend: Backend, store: Store,
) -> None:
    """kill -9 between writing a batch's words and committing: none of them is found, the
    batch is still queued, and the next catch-up indexes it whole."""
    import subprocess
    import sys

    sid = store.stores.create("Notes").id
    store.memories.write_path(sid, "/old.md", "an old quokka", actor=API)
    store.search.catch_up_words(sid)
    for i in range(20):
        store.memories.write_path(sid, f"/{i}.md", f"the wombat {i}", actor=API)
    before = indexed(store, sid)
    child = subprocess.run([sys.executable, "-c", KILLED_MID_BATCH, backend.url, sid],
                           capture_output=True, timeout=60)
    assert child.returncode == -9, child.stderr.decode()
    assert indexed(store, sid) == before
    assert wordsqueue.queued(store.database, sid) == 20
    assert len(store.search.in_store(sid, "wombat", limit=100, threshold=0).hits) == 20
    assert indexed(store, sid) == live(store, sid)
