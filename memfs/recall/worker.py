"""The indexer process of a mount daemon: it indexes the daemon's stores by meaning and ranks
its questions by meaning, so that the daemon itself never loads a model (its memory stays that
of a filesystem). :mod:`memfs.daemons.indexworker` runs it (``python -m
memfs.daemons.indexworker``), and :mod:`memfs.recall.supervisor` starts it, talks to it and ends it.

- **Indexing**: a :class:`~memfs.recall.indexer.BackgroundIndexer` over the daemon's stores, as
  the daemon ran in a thread before (the change feed followed, leases in ``recall_leases``,
  nice 19).
- **Questions**, one JSON object a line on ``questions``: ``{"id": N, "store": ID, "question":
  TEXT, "path_prefix": PATH or null, "memory_type": TYPE or null, "live_at": TIME or null,
  "also": [MEMORY_ID, ...], "wait": SECONDS, "timeout": SECONDS}`` (the memories searched:
  :class:`~memfs.recall.scope.Scope`); each answered on ``answers`` in turn, ``{"id": N,
  "ranked": [[MEMORY_ID, COSINE, START, END], ...], "background": MEAN}`` (what meaning
  says: :func:`memfs.recall.search.rank`) or ``{"id": N, "error": WHY}``.
- **It ends** when it has been idle for ``idle`` seconds (no memory embedded, no question),
  when ``questions`` ends (the daemon closed it, or died), or when told to stop; a round under
  way is given a moment to finish, so that its lease is let go.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any

from .embeddings import LocalE5, Provider, Unavailable
from .indexer import BackgroundIndexer
from .scope import Scope
from .search import QUERY_TIMEOUT, WAIT_SECONDS, rank

if TYPE_CHECKING:
    from ..store.base import Core

log = logging.getLogger(__name__)

__all__ = ["IDLE_SECONDS", "serve", "answer"]

#: Seconds without work after which the process ends (the daemon starts another when there is
#: something to embed or a question to rank).
IDLE_SECONDS = 45.0
#: Seconds a round under way is given to end (and let its lease go) when the process ends.
STOP_SECONDS = 2.0


def answer(store: Core, provider: Provider, stores: Iterable[str], line: bytes) -> bytes:
    """The answer line to one question line (never raises: a bad question, a provider that
    fails or a bug is an ``error`` answer)."""
    ident: Any = None
    try:
        q = json.loads(line)
        ident = q["id"]
        if q["store"] not in stores:
            raise ValueError(f"not a store of this mount: {q['store']!r}")
        # Only the local model is waited for: a service's batch may take a minute.
        wait = min(float(q.get("wait") or 0.0), WAIT_SECONDS) \
            if isinstance(provider, LocalE5) else 0.0
        timeout = min(float(q.get("timeout") or QUERY_TIMEOUT), QUERY_TIMEOUT + wait)
        also = [str(m) for m in q.get("also") or ()]
        meant = rank(store, provider, q["store"], str(q["question"]), Scope.from_wire(q),
                     timeout, also, wait)
        out: dict[str, Any] = {"id": ident, **meant.to_wire()}
    except Unavailable as e:
        out = {"id": ident, "error": str(e)}
    except Exception as e:  # a bug, the database away: this question fails, not the process
        log.exception("a question failed")
        out = {"id": ident, "error": f"the indexer process failed ({type(e).__name__}: {e})"}
    return json.dumps(out).encode() + b"\n"


def serve(store: Core, provider: Provider, stores: list[str], questions: IO[bytes],
          answers: IO[bytes], *, idle: float = IDLE_SECONDS, poll: float = 2.0,
          stop: threading.Event | None = None) -> str:
    """Index ``stores`` and answer the questions read from ``questions`` until the process has
    been idle for ``idle`` seconds, ``questions`` ends or ``stop`` is set. Returns why it
    ended: ``idle``, ``questions ended`` or ``stopped``."""
    stop = stop or threading.Event()
    ended = threading.Event()
    answered, asking = time.monotonic(), 0  # the last answer; questions under way

    def answer_all() -> None:
        nonlocal answered, asking
        try:
            for line in questions:
                asking += 1
                try:
                    answers.write(answer(store, provider, stores, line))
                    answers.flush()
                finally:
                    answered, asking = time.monotonic(), asking - 1
        except (OSError, ValueError):  # the daemon is gone
            pass
        finally:
            ended.set()
            stop.set()

    reader = threading.Thread(target=answer_all, name="memfs-questions", daemon=True)
    indexer = BackgroundIndexer(store, provider, stores=lambda: stores, poll=poll).start()
    reader.start()
    try:
        while not stop.is_set():
            quiet = time.monotonic() - max(indexer.last_work, answered)
            if not indexer.busy and not asking and quiet >= idle:
                return "idle"
            stop.wait(min(1.0, max(0.05, idle - quiet)))
        return "questions ended" if ended.is_set() else "stopped"
    finally:
        indexer.stop(STOP_SECONDS)
