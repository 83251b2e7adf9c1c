"""Taking in SQLite's queue of memories whose words are to be indexed.

A write of ``memories`` does not tokenize its text: its transaction queues the memory's id in
``memory_words_queue`` (a trigger, :data:`memfs.recall.schema.SQLITE_WORDS_QUEUE`), and
:func:`catch_up` indexes what is queued, later, in a transaction of its own:

- **before every search by words** (:meth:`memfs.store.Store.search`), for the store searched:
  a memory is found by its words as soon as its write has returned, and a deleted one is not;
- **in the background**, so that searches find little to do: a mount once it has been quiet
  for a moment (:class:`memfs.fuse.watch.WordsCatchUp`), ``memfs serve`` every second.

Each queued memory is indexed as it is when the queue is taken in (its words dropped if it is
gone): the queue holds ids, never text, so taking it in twice, or late, is always right. A
batch is one transaction (at most ``limit`` memories: the write lock is held for a few
milliseconds, not for a whole store).

PostgreSQL has no queue: its trigger indexes the words in the write's transaction.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..background import Failures, lowest_priority

if TYPE_CHECKING:
    from ..backends import Connection, Database

__all__ = ["catch_up", "queued", "forget_store", "BATCH", "BackgroundCatchUp"]

log = logging.getLogger(__name__)

#: Memories indexed per transaction: about 5 ms of the write lock (40-80 µs each).
BATCH = 64


def catch_up(database: Database, store_id: str | None = None, *, limit: int = BATCH) -> int:
    """Index the words of up to ``limit`` queued memories (of ``store_id``, else of any store)
    in one write transaction, and take them off the queue. Returns how many were taken (0:
    none was queued; always 0 on PostgreSQL).

    :raises Busy, StorageError: as any write.
    """
    if database.dialect != "sqlite":
        return 0
    where, params = ("WHERE store_id = ? ", (store_id,)) if store_id is not None else ("", ())
    # A look without the write lock first: nothing queued (an idle store) takes no lock.
    if database.one(f"SELECT 1 FROM memory_words_queue {where}LIMIT 1", params) is None:
        return 0
    with database.write() as c:
        taken = [(r[0], r[1]) for r in c.execute(
            f"SELECT store_id, memory_id FROM memory_words_queue {where}LIMIT ?",
            (*params, limit))]
        if not taken:
            return 0
        ids = [memory_id for _, memory_id in taken]
        marks = ", ".join("?" * len(ids))
        # Out with the words each one had, in with those it has (if it still exists).
        c.execute(f"DELETE FROM memory_words WHERE rowid IN (SELECT row FROM memory_words_rows "
                  f"WHERE memory_id IN ({marks}))", ids)
        c.execute(f"DELETE FROM memory_words_rows WHERE memory_id IN ({marks})", ids)
        c.execute("INSERT INTO memory_words_rows (memory_id, store_id) SELECT id, store_id "
                  f"FROM memories WHERE id IN ({marks})", ids)
        c.execute("INSERT INTO memory_words (rowid, path, content) SELECT r.row, m.path, "
                  "m.content FROM memory_words_rows r JOIN memories m ON m.id = r.memory_id "
                  f"WHERE r.memory_id IN ({marks})", ids)
        c.executemany("DELETE FROM memory_words_queue WHERE store_id = ? AND memory_id = ?",
                      taken)
    return len(ids)


def forget_store(c: Connection, store_id: str) -> None:
    """In the transaction ``c`` that deletes a store (SQLite): its words, and its queue, go
    with its memories (no one searches a deleted store, and a mount takes in only its own
    store's queue)."""
    c.execute("DELETE FROM memory_words WHERE rowid IN "
              "(SELECT row FROM memory_words_rows WHERE store_id = ?)", (store_id,))
    c.execute("DELETE FROM memory_words_rows WHERE store_id = ?", (store_id,))
    c.execute("DELETE FROM memory_words_queue WHERE store_id = ?", (store_id,))


def queued(database: Database, store_id: str) -> int:
    """How many memories of the store wait for their words to be indexed."""
    if database.dialect != "sqlite":
        return 0
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
