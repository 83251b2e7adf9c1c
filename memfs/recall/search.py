"""The ranking behind :meth:`memfs.store.Store.search`: words and meaning fused.

- **Words**: the store's memories sharing a word (a stem) with the question, by BM25 with
  the path weighted above the content (:mod:`memfs.recall.words`: the same on both
  backends), best :data:`CANDIDATES`.
- **Meaning**: the question's embedding against every current vector of the store (brute
  force: 2,000 x 384 is a few milliseconds), best :data:`CANDIDATES`. A vector counts only if
  it was computed from the memory's current path and content with the provider's model.
- **Fusion**: reciprocal-rank fusion (``1 / (RRF_K + rank)`` from each list; the weighted sum
  of normalized scores is there to be measured against it, ``fusion="weighted"``), times a
  small recency factor (at most +:data:`RECENCY` for a memory changed just now, half of it
  after :data:`RECENCY_DAYS` days). Scores are scaled to (0, 1]: 1 is first in every list
  used. A memory that meaning has not seen yet (written since the indexer's last pass) is
  judged by its words alone, as if meaning ranked it where its words do.
- A provider that fails or is slower than :data:`QUERY_TIMEOUT` costs that search at most
  that long, and the next ones none for :data:`RETRY_AFTER` seconds (or as long as its
  :class:`~memfs.recall.embeddings.Unavailable` says): words answer alone, and the result says
  why.
- A mount daemon ranks by meaning in its indexer process (a provider that is a
  :class:`~memfs.recall.embeddings.Ranker`): that process runs :func:`rank`.
"""

from __future__ import annotations

import math
import threading
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..models import RecallHit, RecallResult
from ..rules import parse_time
from . import words as W
from . import wordsindex
from .embeddings import Provider, Ranker, Unavailable

if TYPE_CHECKING:
    from ..store.base import StoreBase

__all__ = ["Hit", "Result", "run", "rank", "CANDIDATES", "QUERY_TIMEOUT"]

CANDIDATES = 50
#: The fusion's rank constant. The usual 60 flattens the top of each list: on the labelled
#: set (scripts/bench_recall.py) a memory meaning ranked second fell to sixth behind memories
#: sharing a common word with the question; 10 keeps each list's first places first.
RRF_K = 10
#: Each list's weight in the fusion.
WEIGHTS = {"words": 0.3, "meaning": 1.0}
RECENCY = 0.05
RECENCY_DAYS = 30.0
QUERY_TIMEOUT = 2.0
RETRY_AFTER = 30.0


#: A memory found, and a search's result: :mod:`memfs.models`' (the client rebuilds them
#: from the wire without importing this module).
Hit = RecallHit
Result = RecallResult


_down: dict[str, tuple[float, str]] = {}
_down_lock = threading.Lock()


def rank(store: StoreBase, provider: Provider, store_id: str, question: str,
         path_prefix: str | None, timeout: float = QUERY_TIMEOUT) -> list[tuple[str, float]]:
    """The store's best :data:`CANDIDATES` by meaning for ``question`` (its vector, from
    ``provider`` within ``timeout`` seconds, against the store's current vectors), best first:
    what a search ranks by meaning, here or in a mount daemon's indexer process.

    :raises Unavailable: the provider did not give the question's vector.
    """
    vector = provider.query(question, timeout)
    return _by_meaning(store, store_id, vector, provider.model, path_prefix)


def _meaning(store: StoreBase, provider: Provider, store_id: str, question: str,
             path_prefix: str | None) -> tuple[list[tuple[str, float]] | None, str | None]:
    """The ranking by meaning (:func:`rank`, or the provider's own: a
    :class:`~memfs.recall.embeddings.Ranker`), or None and why."""
    with _down_lock:
        until, why = _down.get(provider.model, (0.0, ""))
    if time.monotonic() < until:
        return None, why
    try:
        if isinstance(provider, Ranker):
            return provider.rank(store_id, question, path_prefix, QUERY_TIMEOUT), None
        return rank(store, provider, store_id, question, path_prefix), None
    except Unavailable as e:
        why = f"the embeddings provider is unavailable ({e})"
        pause = RETRY_AFTER if e.retry_after is None else e.retry_after
        if pause > 0:
            with _down_lock:
                _down[provider.model] = (time.monotonic() + pause, why)
        return None, why


def _prefix_sql(path_prefix: str | None, column: str) -> tuple[str, tuple[Any, ...]]:
    if not path_prefix:
        return "", ()
    return f" AND substr({column}, 1, ?) = ?", (len(path_prefix), path_prefix)


def _by_words(store: StoreBase, store_id: str, ws: list[str], path_prefix: str | None,
              ) -> list[tuple[str, float]]:
    """The best :data:`CANDIDATES` by BM25 (:func:`memfs.recall.words.bm25`, computed here
    from the index's counts, so alike on both backends) among the store's memories (under
    ``path_prefix``), best first; ties by path."""
    if not ws:
        return []
    question = W.question_terms(ws)
    terms = sorted({t for alternatives in question for t in alternatives})
    memories, total_length = wordsindex.stats(store.database, store_id, path_prefix)
    postings = wordsindex.postings(store.database, store_id, terms, path_prefix)
    if not memories or not postings:
        return []
    paths = {r[0]: r[5] for r in postings}
    scores = W.bm25(question, (r[:5] for r in postings), memories, total_length)
    best = sorted(scores.items(), key=lambda kv: (-kv[1], paths[kv[0]]))
    return best[:CANDIDATES]


def _by_meaning(store: StoreBase, store_id: str, vector: Any, model: str,
                path_prefix: str | None) -> list[tuple[str, float]]:
    import numpy as np

    extra, params = _prefix_sql(path_prefix, "m.path")
    rows = store.database.all(
        "SELECT v.memory_id, v.vector FROM memory_vectors v JOIN memories m ON "
        "m.id = v.memory_id AND m.path = v.path AND m.content_sha256 = v.content_sha256 "
        f"WHERE v.store_id = ? AND v.model = ?{extra}", (store_id, model, *params))
    dim = vector.shape[0]
    ids = [r[0] for r in rows if len(r[1]) == 4 * dim]
    if not ids:
        return []
    matrix = np.frombuffer(b"".join(bytes(r[1]) for r in rows if len(r[1]) == 4 * dim),
                           dtype="<f4").reshape(len(ids), dim)
    scores = matrix @ vector.astype(np.float32)
    top = np.argsort(-scores, kind="stable")[:CANDIDATES]
    return [(ids[i], float(scores[i])) for i in top]


def _unseen(store: StoreBase, store_id: str, ids: list[str], model: str) -> set[str]:
    """Those of ``ids`` that have no current vector of ``model``: meaning has not seen them."""
    if not ids:
        return set()
    rows = store.database.all(
        "SELECT m.id FROM memories m LEFT JOIN memory_vectors v ON v.memory_id = m.id "
        "AND v.model = ? AND v.path = m.path AND v.content_sha256 = m.content_sha256 "
        f"WHERE m.store_id = ? AND v.memory_id IS NULL AND m.id IN ({', '.join('?' * len(ids))})",
        (model, store_id, *ids))
    return {r[0] for r in rows}


def _fuse(lists: dict[str, list[tuple[str, float]]], fusion: str,
          unseen: frozenset[str] | set[str] = frozenset()) -> dict[str, float]:
    """Each memory's fused score, scaled so that first in every list is 1. A memory of
    ``unseen`` (not embedded yet) is judged by its words alone: its meaning counts as if it
    ranked where its words do, so a memory written a moment ago is not pushed down by the
    memories meaning has seen."""
    fused: dict[str, float] = {}
    if fusion == "weighted":
        for name, ranked in lists.items():
            if not ranked:
                continue
            hi, lo = ranked[0][1], ranked[-1][1]
            for mid, s in ranked:
                norm = (s - lo) / (hi - lo) if hi > lo else 1.0
                twice = name == "words" and mid in unseen and "meaning" in lists
                fused[mid] = fused.get(mid, 0.0) + norm * (2 if twice else 1)
        top = float(len(lists))
    else:
        for name, ranked in lists.items():
            for rank, (mid, _) in enumerate(ranked, 1):
                weight = WEIGHTS[name]
                if name == "words" and mid in unseen and "meaning" in lists:
                    weight += WEIGHTS["meaning"]
                fused[mid] = fused.get(mid, 0.0) + weight / (RRF_K + rank)
        top = sum(WEIGHTS[name] for name in lists) / (RRF_K + 1.0)
    return {mid: s / top for mid, s in fused.items()}


def _recency(updated_at: str, now: datetime) -> float:
    age = max(0.0, (now - parse_time(updated_at)).total_seconds() / 86400.0)
    return 1.0 + RECENCY * math.pow(0.5, age / RECENCY_DAYS)


def run(store: StoreBase, store_id: str, question: str, *, provider: Provider | None,
        limit: int, path_prefix: str | None = None, min_score: float = 0.0,
        fusion: str = "rrf", channels: tuple[str, ...] = ("words", "meaning")) -> Result:
    """Rank the store's memories for ``question`` (already checked by the store)."""
    from .indexer import pending_count

    ws = W.words(question)
    lists: dict[str, list[tuple[str, float]]] = {}
    if "words" in channels:
        lists["words"] = _by_words(store, store_id, ws, path_prefix)
    row = store.database.one("SELECT memory_count FROM stores WHERE id = ?", (store_id,))
    total = int(row[0]) if row is not None else 0
    result = Result([], False, memories=total)
    if "meaning" in channels:
        if provider is None:
            result.note = "meaning is off (--embeddings none): words alone answered"
        else:
            result.model = provider.model
            pending = pending_count(store, store_id, provider.model)
            result.indexed = total - pending
            if result.indexed == 0 and total:
                result.note = "no memory is indexed by meaning yet: words alone answered"
            else:
                meant, why = _meaning(store, provider, store_id, question, path_prefix)
                if meant is None:
                    result.note = f"{why}: words alone answered"
                else:
                    lists["meaning"] = meant
                    result.meaning = True
                    if pending:
                        result.note = (f"meaning covers {result.indexed} of {total} memories "
                                       "(the index is catching up)")
    result.candidates = {k: len(v) for k, v in lists.items()}
    if not any(lists.values()):
        return result
    unseen: set[str] = set()
    if "meaning" in lists and result.indexed < total and provider is not None:
        unseen = _unseen(store, store_id, [mid for mid, _ in lists.get("words", [])],
                         provider.model)
    fused = _fuse(lists, fusion, unseen)
    found = {k: {mid for mid, _ in v} for k, v in lists.items()}
    ids = list(fused)
    rows = {r["id"]: r for r in store.database.all(
        "SELECT id, path, content, updated_at FROM memories WHERE store_id = ? AND id IN ("
        + ", ".join("?" * len(ids)) + ")", (store_id, *ids))}
    now = datetime.now(UTC)
    ranked = sorted(
        ((min(1.0, fused[mid] * _recency(r["updated_at"], now) / (1.0 + RECENCY)), r)
         for mid, r in rows.items()), key=lambda t: (-t[0], t[1]["path"]))
    for score, r in ranked:
        score = round(score, 4)  # as shown: min_score=<a score shown> keeps that hit
        if score < min_score or len(result.hits) >= limit:
            break
        matched = tuple(k for k in ("words", "meaning") if r["id"] in found.get(k, ()))
        result.hits.append(Hit(r["id"], r["path"], score,
                               W.snippet(r["content"], ws), matched, r["updated_at"]))
    return result
