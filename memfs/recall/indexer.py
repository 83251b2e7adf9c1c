"""The indexer: embeds what changed in a store, off the write path.

A write never waits for an embedding: the words index is the database's own (see
:mod:`memfs.recall.schema`), and vectors are added here, later, by whoever runs an indexer (a
mount daemon's indexer process for its stores, ``memfs serve`` for all, ``memfs search`` for
the one it asks).

- **Pending** memories are those without vectors of the provider's model for their current
  path and content (sha256), newest first: a changed memory is re-embedded, and until then
  its old vectors rank nothing (the search joins on path and sha256). A memory has one vector
  per passage (:mod:`memfs.recall.passages`), all in one row; when it changes, the passages
  whose text is the same keep their vectors, and only the others are embedded. The one
  vector a memory had before passages (``passages`` empty) still ranks it until it is
  embedded again.
- **First passages first**: a whole memory of 2 kB costs several times what its first
  passage does, so a catch-up embeds the first passage of every pending memory (a memory is
  then indexed: found by meaning, by that passage), and only then the other passages of each
  (``passages_left``), newest first, batch by batch.
- **One process at a time per store**: a lease in ``recall_leases`` (:data:`LEASE_SECONDS`,
  renewed at every batch) is taken before any work, so two processes do no double work; a
  process killed with its lease loses it when it expires.
- **No half-written vector**: each batch is one transaction, and a vector is written only if
  its memory still holds the text it was computed from (``INSERT ... SELECT ... WHERE sha``).
- The provider failing stops the catch-up with its reason (:attr:`Progress.reason`); the next
  catch-up tries again.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..backends.scopes import store_scope
from ..background import Failures, lowest_priority
from ..rules import format_time
from . import passages as P
from .embeddings import Provider, Unavailable

if TYPE_CHECKING:
    from ..store.base import Core

log = logging.getLogger(__name__)

__all__ = ["Indexer", "Progress", "BackgroundIndexer", "LEASE_SECONDS", "last_failure",
           "pending_count", "pending_bytes", "has_pending", "has_work", "wait_for"]

#: Seconds a lease lasts without renewal.
LEASE_SECONDS = 30.0
#: Memories embedded per transaction.
BATCH = 8


@dataclass
class Progress:
    """What a catch-up did: memories embedded (their first passage at least), those still
    pending, memories whose other passages it embedded (``deepened``), and why it stopped
    early (None: the store is indexed, every passage of every memory)."""

    embedded: int = 0
    pending: int = 0
    reason: str | None = None
    deepened: int = 0


def _now() -> str:
    return format_time(datetime.now(UTC))


_PENDING = (
    "FROM memories m LEFT JOIN memory_vectors v ON v.memory_id = m.id "
    "WHERE m.store_id = ? AND (v.memory_id IS NULL OR v.model != ? OR v.path != m.path "
    "OR v.content_sha256 != m.content_sha256 OR v.passages = '')")


#: The last failure of the provider for a store and model in this process (by any of its
#: indexers), until one of its catch-ups embeds again: why a store is not indexed, for
#: :meth:`memfs.store.Store.search.status` (``memfs serve`` answers it from the process whose
#: indexer tried).
_failures: dict[tuple[str, str], str] = {}


def last_failure(store_id: str, model: str) -> str | None:
    """Why this process could not index the store with ``model`` last time (None: it did)."""
    return _failures.get((store_id, model))


def pending_bytes(store: Core, store_id: str, model: str) -> tuple[int, int]:
    """Memories of the store without a current vector of ``model``, and their contents' size."""
    row = store.database.one(f"SELECT count(*), sum(m.content_size_bytes) {_PENDING}",
                             (store_id, model))
    return (int(row[0] or 0), int(row[1] or 0)) if row else (0, 0)


def pending_count(store: Core, store_id: str, model: str) -> int:
    """Memories of the store without a current vector of ``model``."""
    return pending_bytes(store, store_id, model)[0]


def has_pending(store: Core, store_id: str, model: str) -> bool:
    """Whether a memory of the store has no current vector of ``model`` (stops at the first)."""
    return store.database.one(f"SELECT 1 {_PENDING} LIMIT 1", (store_id, model)) is not None


#: Memories whose current vectors have passages still to embed (their first one is).
_DEEPER = (
    "FROM memories m JOIN memory_vectors v ON v.memory_id = m.id WHERE m.store_id = ? AND "
    "v.model = ? AND v.path = m.path AND v.content_sha256 = m.content_sha256 AND "
    "v.passages_left > 0")


def has_work(store: Core, store_id: str, model: str) -> bool:
    """Whether the store has a memory to embed, or passages of one (stops at the first)."""
    return has_pending(store, store_id, model) or store.database.one(
        f"SELECT 1 {_DEEPER} LIMIT 1", (store_id, model)) is not None


def _lease_scope(store_id: str) -> str:
    """The scope of a write of the store's lease (its holders take it one at a time)."""
    return f"recall-lease:{store_id}"


class Indexer:
    """Catches stores up with a provider (one instance per process and provider)."""

    def __init__(self, store: Core, provider: Provider, *, holder: str | None = None) -> None:
        self.store, self.provider = store, provider
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"

    # -- the lease ----------------------------------------------------------------------------

    def _take_lease(self, store_id: str) -> bool:
        now = time.time()
        with self.store.database.write(_lease_scope(store_id)) as c:
            row = c.execute("SELECT holder, expires_at FROM recall_leases WHERE store_id = ?",
                            (store_id,)).fetchone()
            if row is not None and row[0] != self.holder and float(row[1]) > now:
                return False
            c.execute(
                "INSERT INTO recall_leases (store_id, holder, expires_at) VALUES (?, ?, ?) "
                "ON CONFLICT (store_id) DO UPDATE SET holder = excluded.holder, "
                "expires_at = excluded.expires_at", (store_id, self.holder, now + LEASE_SECONDS))
        return True

    def _drop_lease(self, store_id: str) -> None:
        with self.store.database.write(_lease_scope(store_id)) as c:
            c.execute("DELETE FROM recall_leases WHERE store_id = ? AND holder = ?",
                      (store_id, self.holder))

    def lease_holder(self, store_id: str) -> str | None:
        """Who indexes the store now (None: nobody)."""
        row = self.store.database.one(
            "SELECT holder FROM recall_leases WHERE store_id = ? AND expires_at > ?",
            (store_id, time.time()))
        return str(row[0]) if row else None

    # -- catching up --------------------------------------------------------------------------

    def catch_up(self, store_id: str, *, deadline: float | None = None,
                 stop: threading.Event | None = None, batch: int = BATCH,
                 deepen: bool = True) -> Progress:
        """Embed the store's pending memories, until none is left, ``deadline`` (a
        ``time.monotonic()``) passes, ``stop`` is set or the provider fails: first the first
        passage of every pending memory (a memory is found by meaning once that is done), then
        (with ``deepen``) the other passages of each."""
        model = self.provider.model
        progress = Progress(pending=pending_count(self.store, store_id, model))
        if progress.pending == 0 and not (deepen and has_work(self.store, store_id, model)):
            return progress
        if not self._take_lease(store_id):
            progress.reason = "another process is indexing this store"
            return progress
        try:
            while True:
                if stop is not None and stop.is_set():
                    progress.reason = "stopped"
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    progress.reason = "still catching up"
                    break
                first = True
                rows = self.store.database.all(
                    "SELECT m.id, m.path, m.content, m.content_sha256 "
                    f"{_PENDING} ORDER BY m.updated_at DESC, m.id LIMIT ?",
                    (store_id, model, batch))
                if not rows and deepen:
                    first = False
                    rows = self.store.database.all(
                        "SELECT m.id, m.path, m.content, m.content_sha256 "
                        f"{_DEEPER} ORDER BY m.updated_at DESC, m.id LIMIT ?",
                        (store_id, model, batch))
                if not rows:
                    break
                try:
                    embedded = self._embed(model, rows, first)
                except Unavailable as e:
                    progress.reason = f"the embeddings provider is unavailable: {e}"
                    _failures[(store_id, model)] = f"{progress.reason} (at {_now()})"
                    break
                _failures.pop((store_id, model), None)
                saved = self._save(store_id, model, rows, embedded)
                if first:
                    progress.embedded += saved
                else:
                    progress.deepened += saved
                if not self._take_lease(store_id):  # renewed; lost only if it expired
                    progress.reason = "another process took over the indexing"
                    break
                progress.pending = pending_count(self.store, store_id, model)
        finally:
            self._drop_lease(store_id)
        return progress

    def _embed(self, model: str, rows: list[Any],
               first: bool) -> list[tuple[list[P.Passage], Any, int]]:
        """Each row's passages that have a vector, their vectors ((n, dim) float32) and how
        many passages are left without: those of a passage whose text the memory's vectors
        already embedded with ``model`` are kept, and the others are asked of the provider
        (one call for the batch), all of them, or (``first``) only the memory's first passage.
        :raises Unavailable:"""
        import numpy as np

        marks = ", ".join("?" * len(rows))
        known: dict[str, Any] = {}
        for old in self.store.database.all(
                f"SELECT vector, passages FROM memory_vectors WHERE model = ? AND memory_id IN "
                f"({marks}) AND passages != ''", (model, *[r["id"] for r in rows])):
            spans = P.decode(old[1])
            blob = bytes(old[0])
            if spans and len(blob) % len(spans) == 0:
                vectors = np.frombuffer(blob, dtype="<f4").reshape(len(spans), -1)
                known.update((key, v) for (_, _, key), v in zip(spans, vectors, strict=True))
        split = [P.split(r["path"], r["content"]) for r in rows]
        asked = [ps[:1] if first else ps for ps in split]
        todo = list(dict.fromkeys(p.text for ps in asked for p in ps if p.key not in known))
        if todo:
            fresh = self.provider.passages(todo)
            by_text = dict(zip(todo, fresh, strict=True))
            for ps in asked:
                for p in ps:
                    if p.key not in known:
                        known[p.key] = by_text[p.text]
        out = []
        for ps in split:
            have = [p for p in ps if p.key in known]
            out.append((have, np.stack([known[p.key] for p in have]).astype("<f4"),
                        len(ps) - len(have)))
        return out

    def _save(self, store_id: str, model: str, rows: list[Any],
              embedded: list[tuple[list[P.Passage], Any, int]]) -> int:
        """The vectors of ``rows`` (memories of ``store_id``), for those unchanged since."""
        at = _now()
        saved = 0
        with self.store.database.write(store_scope(store_id)) as c:
            for r, (ps, vectors, left) in zip(rows, embedded, strict=True):
                saved += c.execute(
                    "INSERT INTO memory_vectors (memory_id, store_id, model, path, "
                    "content_sha256, vector, indexed_at, passages, passages_left) SELECT id, "
                    "store_id, ?, path, content_sha256, ?, ?, ?, ? FROM memories WHERE id = ? "
                    "AND path = ? AND content_sha256 = ? ON CONFLICT (memory_id) DO UPDATE SET "
                    "model = excluded.model, path = excluded.path, "
                    "content_sha256 = excluded.content_sha256, vector = excluded.vector, "
                    "indexed_at = excluded.indexed_at, passages = excluded.passages, "
                    "passages_left = excluded.passages_left",
                    (model, vectors.tobytes(), at, P.encode(ps), left, r["id"], r["path"],
                     r["content_sha256"])).rowcount
        return saved


def wait_for(store: Core, provider: Provider, store_id: str, seconds: float) -> int:
    """Embed the store's pending memories now, or wait while the process that holds its lease
    does, for at most ``seconds``: what a search does when a few memories were written since
    the indexer's last pass (:data:`memfs.recall.search.WAIT_PENDING`), so that a question
    asked in other words right after a write finds it. Returns how many are still pending
    (a provider that fails ends the wait at once)."""
    deadline = time.monotonic() + seconds
    indexer = Indexer(store, provider)
    while True:
        progress = indexer.catch_up(store_id, deadline=deadline, batch=1, deepen=False)
        if not progress.pending or time.monotonic() >= deadline:
            return progress.pending
        if progress.reason != "another process is indexing this store" and \
                progress.reason != "another process took over the indexing":
            return progress.pending
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))


class BackgroundIndexer:
    """A thread that keeps stores indexed: it follows the change feed (one cheap query a
    ``poll`` seconds) and catches up every store that changed, at the lowest CPU priority.

    :param stores: the ids of the stores to keep indexed (called at every round; a mount's
        stores, or every store of the database for ``memfs serve``).
    """

    def __init__(self, store: Core, provider: Provider,
                 stores: Callable[[], Iterable[str]], *, poll: float = 2.0) -> None:
        self.indexer = Indexer(store, provider)
        self.stores, self.poll = stores, poll
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memfs-indexer", daemon=True)
        #: The last catch-up of each store.
        self.progress: dict[str, Progress] = {}
        #: A round is under way; ``time.monotonic()`` when the last round that embedded
        #: something ended (at first, the start): how long it has been idle.
        self.busy = False
        self.last_work = time.monotonic()
        #: A round that fails (the database away, a bug) is said once and tried again a
        #: ``poll`` later: it never brings down the process that runs the indexer.
        self.failures = Failures("the indexer", log, first=poll, most=poll)

    def start(self) -> BackgroundIndexer:
        self._thread.start()
        return self

    def wake(self) -> None:
        """Look at the stores now rather than at the next poll."""
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        lowest_priority()
        seen = -1
        while not self._stop.is_set():
            wait = self.poll
            try:
                row = self.indexer.store.database.one("SELECT max(seq) FROM changes")
                last = int(row[0] or 0) if row else 0
                if last != seen:
                    self.busy = True
                    complete, embedded = True, 0
                    for sid in list(self.stores()):
                        if self._stop.is_set():
                            break
                        p = self.indexer.catch_up(sid, stop=self._stop)
                        self.progress[sid] = p
                        complete = complete and p.reason is None
                        embedded += p.embedded + p.deepened
                    if complete:
                        seen = last
                    if embedded:
                        self.last_work = time.monotonic()
            except Exception as e:  # the rule of background services (memfs.background)
                wait = self.failures.failed(e)
            else:
                self.failures.recovered()
            finally:
                self.busy = False
            self._wake.wait(wait)
            self._wake.clear()
