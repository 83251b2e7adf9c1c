"""Taking in the queue of memories whose words are to be indexed, on both backends.

A write of ``memories`` does not tokenize its text: its transaction queues the memory's id in
``memory_words_queue`` (triggers: :data:`memfs.recall.schema.SQLITE_WORDS_QUEUE`,
:data:`~memfs.recall.schema.PG_BM25`), and :func:`catch_up` indexes what is queued, later
(:func:`memfs.recall.words.index`: folded, stemmed, counted):

- **before every search by words** (:meth:`memfs.store.Store.search.in_store`), for the store
searched:
  a memory is found by its words as soon as its write has returned, and a deleted one is not;
- **in the background**, so that searches find little to do: a mount once it has been quiet
  for a moment (:class:`memfs.fuse.watch.WordsCatchUp`), ``memfs serve`` every second.

Each queued memory is indexed as it is when the queue is taken in (its words dropped if it is
gone): the queue holds ids, never text, so taking it in twice, or late, is always right. The
words are stemmed before the write lock is taken, and the lock then holds for writing rows
only (at most ``limit`` memories a batch: a few milliseconds, not a whole store); a memory
changed in between is stemmed again under the lock, as it is then, so the index never keeps
what a committed write replaced. A batch is one store's, and its transaction holds that
store's scope, as every write of the store does (SQLite's one writer, PostgreSQL's advisory
lock of the store: :mod:`memfs.backends.scopes`), so no write of that store commits between
that look and the dequeuing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..backends.scopes import store_scope
from ..background import Failures, lowest_priority
from . import wordsindex

if TYPE_CHECKING:
    from ..backends import Connection, Database

__all__ = ["catch_up", "queued", "forget_store", "BATCH", "ROWS", "BackgroundCatchUp"]

log = logging.getLogger(__name__)

#: Memories indexed per transaction at most,
BATCH = 256
#: and terms (a memory of 2 kB has about 250): about 1 µs each to write
#: (:mod:`memfs.recall.wordsindex`), a few tens of ms of the write lock at most.
ROWS = 16384


#: What the index holds of a memory (:func:`memfs.recall.words.index`): its length, and per
#: term its counts in the path and the content.
Terms = tuple[int, dict[str, tuple[int, int]]]


def catch_up(database: Database, store_id: str | None = None, *, limit: int = BATCH,
             rows: int = ROWS) -> int:
    """Index the words of up to ``limit`` queued memories of ``store_id`` (None: of one store
    that has some queued), fewer if their terms would make more than ``rows`` rows (one
    memory at least), in one write transaction of that store, and take them off the queue.
    Returns how many were taken (0: none was queued).

    :raises Busy, StorageError: as any write.
    """
    while True:
        # A look without the write lock first: nothing queued (an idle store) takes no lock.
        sid = store_id
        if sid is None:
            row = database.one("SELECT store_id FROM memory_words_queue LIMIT 1")
            if row is None:
                return 0
            sid = str(row[0])
        queued = [(r[0], r[1]) for r in database.all(
            "SELECT store_id, memory_id FROM memory_words_queue WHERE store_id = ? LIMIT ?",
            (sid, limit))]
        if not queued:
            if store_id is None:
                continue  # that store's were taken in meanwhile: another store's, if any
            return 0
        # Stemmed before the lock is taken (stemming is most of the work).
        texts = {r[0]: (r[1], r[2], r[3]) for r in database.all(
            "SELECT id, content_sha256, path, content FROM memories "
            f"WHERE id IN ({', '.join('?' * len(queued))})", [mid for _, mid in queued])}
        ready: dict[str, tuple[str, str, Terms] | None] = {}
        made = 0
        for _, mid in queued:
            if made >= rows:
                break
            text = texts.get(mid)
            if text is None:
                ready[mid] = None
                continue
            terms = _index(text[1], text[2])
            ready[mid] = (text[0], text[1], terms)
            made += len(terms[1])
        taken = _apply(database, sid, ready)
        if taken:
            return taken
        # Another catch-up took them in the meantime: look again.


def _apply(database: Database, store_id: str,
           ready: dict[str, tuple[str, str, Terms] | None]) -> int:
    """Under the store's write lock: index those of ``ready`` (memories of ``store_id``, each
    its sha256, path and terms as read, or None: it was gone) that are still queued, as they
    are now, and dequeue them. Returns how many."""
    with database.write(store_scope(store_id)) as c:
        marks = ", ".join("?" * len(ready))
        taken = [(r[0], r[1]) for r in c.execute(
            "SELECT store_id, memory_id FROM memory_words_queue WHERE store_id = ? "
            f"AND memory_id IN ({marks})", [store_id, *ready])]
        if not taken:
            return 0
        ids = [memory_id for _, memory_id in taken]
        marks = ", ".join("?" * len(ids))
        now = {r[0]: (r[1], r[2]) for r in c.execute(
            f"SELECT id, content_sha256, path FROM memories WHERE id IN ({marks})", ids)}
        wordsindex.drop(c, database.dialect, ids)
        docs: list[wordsindex.Doc] = []
        for sid, mid in taken:
            if mid not in now:
                continue  # gone: its words with it
            sha, path = now[mid]
            got = ready.get(mid)
            if got is None or got[:2] != (sha, path):  # changed since it was read: read it now
                row = c.execute("SELECT path, content FROM memories WHERE id = ?",
                                (mid,)).fetchone()
                got = (sha, path, _index(row[0], row[1]))
            length, counts = got[2]
            docs.append((mid, sid, length, counts))
        wordsindex.put(c, database.dialect, docs)
        c.executemany("DELETE FROM memory_words_queue WHERE store_id = ? AND memory_id = ?",
                      taken)
    return len(taken)


def _index(path: str, content: str) -> Terms:
    from .words import index

    return index(path, content)


def forget_store(c: Connection, dialect: str, store_id: str) -> None:
    """In the transaction ``c`` that deletes a store: its words, and its queue, go with its
    memories (no one searches a deleted store, and a mount takes in only its own store's
    queue)."""
    wordsindex.forget_store(c, dialect, store_id)
    c.execute("DELETE FROM memory_words_queue WHERE store_id = ?", (store_id,))


def queued(database: Database, store_id: str) -> int:
    """How many memories of the store wait for their words to be indexed."""
    row = database.one("SELECT count(*) FROM memory_words_queue WHERE store_id = ?",
                       (store_id,))
    return int(row[0]) if row is not None else 0


class BackgroundCatchUp:
    """A thread that takes in the queue (``catch_up``: a batch, returning how many) every
    ``interval`` seconds, batch after batch until it is empty, at the lowest CPU priority:
    ``memfs serve``'s, for every store. A failed round is logged by the rule of
    :mod:`memfs.background` and tried again at the next."""

    def __init__(self, catch_up: Callable[[], int], interval: float = 1.0) -> None:
        self.catch_up = catch_up
        self.interval = interval
        self.failures = Failures("the words index catch-up", log, first=interval, most=30.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memfs-words", daemon=True)

    def start(self) -> BackgroundCatchUp:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop, after the batch under way (a few milliseconds)."""
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        lowest_priority()
        wait = self.interval
        while not self._stop.wait(wait):
            try:
                while self.catch_up() and not self._stop.is_set():
                    pass
            except Exception as e:
                wait = max(self.interval, self.failures.failed(e))
            else:
                self.failures.recovered()
                wait = self.interval
