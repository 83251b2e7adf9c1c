"""The ranking behind :meth:`memfs.store.search.Search.in_store`: words and meaning fused into a
relevance that means the same in every store and for every question (issue 39).

- **Words**: the store's memories sharing a word (a stem) with the question, by BM25 with
  the path weighted above the content (:mod:`memfs.recall.words`: the same on both
  backends), best :data:`CANDIDATES`; and for each of them its
  **coverage**: the share of the question's words it holds, each word weighing its rarity in
  the store (its idf), 0 to 1. Coverage, unlike a bm25 score, means the same in every store.
- **Meaning**: the question's embedding against every passage of every memory of the store
  (:mod:`memfs.recall.passages`; brute force: 2,000 memories of a few passages are a few
  milliseconds); a memory's cosine is its best passage's, and its snippet comes from that
  passage. Best :data:`CANDIDATES`, and the cosine of every candidate the words found. A
  vector counts only if it was computed from the memory's current path and content with the
  provider's model.
- **Similarity**, 0 to 1: ``cosine + COVERAGE x coverage + BM25 x bm25 / best bm25`` through
  a logistic calibrated on the dev conversations of LoCoMo (26, 30 and 41; scripts/
  bench_recall.py --locomo) so that the threshold keeps 98% of the answers found there and
  drops most questions nothing stored answers. A memory meaning has not seen yet (written
  since the indexer's last pass), or every memory when meaning is off, down or not built:
  coverage alone, through a logistic calibrated the same way.
- **Relevance**, what a hit's ``score`` is: ``0.70 x similarity + 0.15 x importance + 0.15 x
  recency`` (the MemoryTool's ranking): importance is the memory's own (issue 41: its front
  matter's, else its type's; ``memories.importance``), :data:`IMPORTANCE` for a memory that
  says none (so an untyped store ranks as it did before); recency halves every
  :data:`RECENCY_DAYS` days since the memory changed. A memory that another live memory of
  the store names in its ``supersedes:`` is **stale**: its relevance is multiplied by
  :data:`STALE` and its hit says so. Hits below
  the threshold (default :data:`memfs.rules.SEARCH_DEFAULT_THRESHOLD`, 0.7) are dropped: an
  empty answer means nothing stored answers, and :attr:`Result.best` says how close the best
  came.
- What is searched is a :class:`~memfs.recall.scope.Scope`: a path prefix, a type, and in a
  store whose expiry is on, only the memories that have not expired (the store says which
  stores: their rules are its own). Every channel and the candidates' rows read it, so an
  expired memory is never a hit, by words or by meaning.
- ``fusion="rrf"`` (reciprocal-rank fusion, what memfs did before) and ``"weighted"`` (the
  weighted sum of normalized scores) rank the same candidates, to be measured against it
  (scripts/bench_recall.py); their scores are ranks, not evidence.
- A provider that fails or is slower than :data:`QUERY_TIMEOUT` costs that search at most
  that long, and the next ones none for :data:`RETRY_AFTER` seconds (or as long as its
  :class:`~memfs.recall.embeddings.Unavailable` says): words answer alone, and the result says
  why.
- A mount daemon ranks by meaning in its indexer process (a provider that is a
  :class:`~memfs.recall.embeddings.Ranker`): that process runs :func:`rank`.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..models import RecallHit, RecallResult
from ..rules import SEARCH_DEFAULT_THRESHOLD, parse_time
from . import passages as P
from . import words as W
from . import wordsindex
from .embeddings import LocalE5, Provider, Ranker, Unavailable
from .scope import EVERY, Scope

if TYPE_CHECKING:
    from ..store.base import Core

log = logging.getLogger(__name__)

__all__ = ["Hit", "Result", "Meaning", "Evidence", "run", "rank", "evidence", "similarity",
           "relevance", "score", "CANDIDATES", "QUERY_TIMEOUT", "FUSIONS", "STALE", "Scope"]

CANDIDATES = 50
#: The rankings :func:`run` knows: ``calibrated`` (the default) and two to measure it against.
FUSIONS = ("calibrated", "rrf", "weighted")
#: The weights of coverage and of the bm25 score (as a share of the question's best), added
#: to a memory's cosine, and of the share of the question's words that no memory holds, taken
#: from it: chosen by scripts/calibrate_recall (a sweep over the evidence of every candidate,
#: on the dev conversations of LoCoMo and the labelled set of issue 20). There, turn level
#: hit@5 went from 0.65 (cosine alone) to 0.70, session level to 0.94; the unknown words'
#: weight is what tells a question nothing stored answers (its words are nowhere) from one
#: asked in other words.
COVERAGE = 0.15
BM25 = 0.01
UNKNOWN = 0.05
#: The logistic that makes ``cosine + COVERAGE x coverage + BM25 x bm25 share - UNKNOWN x
#: unknown share`` a similarity (multilingual-e5-small): its middle and its width. A
#: similarity of 0.679 (relevance 0.7 for a memory changed just now) is at 0.815: on the dev
#: conversations no question (turns) and 0.8% (sessions) lost its answer from the first 5
#: there, while 93% and 96% of 40 questions nothing there answers were left with nothing; 33
#: of the 36 questions of the labelled set of issue 20 kept theirs (35 ranked).
CENTER, WIDTH = 0.7926, 0.03
#: The same for coverage alone (words answering without meaning, or a memory meaning has not
#: seen yet): 0.679 at coverage 0.25 (on the dev conversations, 2% of the answers at turn
#: level and 6% at session level fell below, and 81-82% of the unrelated questions were left
#: with nothing; words cannot see a question in other words, meaning can).
WORDS_CENTER, WORDS_WIDTH = 0.175, 0.10
WORDS_BM25 = 0.02
#: The mean cosine of a question and a memory under multilingual-e5-small: another model's
#: cosines are moved by the difference between this and the store's mean for the question,
#: an approximation until each model is calibrated.
E5_BACKGROUND = 0.77
#: RRF's rank constant and weights (``fusion="rrf"``), as before issue 39.
RRF_K = 10
WEIGHTS = {"words": 0.3, "meaning": 1.0}
#: The relevance of a hit (the MemoryTool's): its parts' weights, the importance of a memory
#: that says none, and recency's half-life.
SIMILARITY_WEIGHT, IMPORTANCE_WEIGHT, RECENCY_WEIGHT = 0.70, 0.15, 0.15
IMPORTANCE = 0.5
RECENCY_DAYS = 90.0
#: What a stale memory's relevance is multiplied by (one that another live memory of its store
#: names in ``supersedes:``). Below 1, so it ranks under any memory with the same evidence
#: (its replacement first); not as low as 0.5, which would put every stale memory under the
#: default threshold (0.7) for good: being superseded would then delete a memory from search
#: silently, what issue 41 asks memfs never to do. At 0.8 a stale memory passes the default
#: threshold only when it answers very closely (a relevance of 0.875 or more before), and its
#: hit says ``stale`` so that the reader looks for what replaced it.
STALE = 0.8
QUERY_TIMEOUT = 2.0
RETRY_AFTER = 30.0
#: A search waits for meaning when at most this many memories of the store, of at most
#: :data:`WAIT_BYTES` in all, are not embedded (written since the indexer's last pass), for
#: at most :data:`WAIT_SECONDS`, if the model runs here or in a mount's indexer process (not
#: a service, whose batch may take a minute): a memory of a few lines is embedded in 30-70 ms,
#: 2 kB in about 400 ms, here (docs/recall.md); more means an indexer catching up a whole
#: store, which no search should wait for.
WAIT_PENDING = 16
WAIT_BYTES = 6000
WAIT_SECONDS = 1.5


#: A memory found, and a search's result: :mod:`memfs.models`' (the client rebuilds them
#: from the wire without importing this module).
Hit = RecallHit
Result = RecallResult


@dataclass
class Meaning:
    """What meaning says of a question in a store: per memory, its best passage's cosine and
    span (``(cosine, start, end)``), for the best :data:`CANDIDATES` and the memories asked
    about; and the mean cosine over the store (``background``)."""

    scores: dict[str, tuple[float, int, int]] = field(default_factory=dict)
    background: float = 0.0
    model: str = ""

    def ranked(self) -> list[tuple[str, float]]:
        return sorted(((m, s[0]) for m, s in self.scores.items()), key=lambda t: -t[1])

    def to_wire(self) -> dict[str, Any]:
        return {"ranked": [[m, *s] for m, s in self.scores.items()],
                "background": self.background}

    @classmethod
    def from_wire(cls, d: dict[str, Any], model: str) -> Meaning:
        return cls({str(r[0]): (float(r[1]), int(r[2]), int(r[3])) for r in d["ranked"]},
                   float(d.get("background") or 0.0), model)


_down: dict[str, tuple[float, str]] = {}
_down_lock = threading.Lock()


def rank(store: Core, provider: Provider, store_id: str, question: str,
         scope: Scope, timeout: float = QUERY_TIMEOUT,
         also: list[str] | tuple[str, ...] = (), wait: float = 0.0) -> Meaning:
    """What meaning says of ``question`` in the store (its vector, from ``provider`` within
    ``timeout`` seconds, against the current vectors of the memories of ``scope``): the best
    :data:`CANDIDATES`, and those of ``also``; here or in a mount daemon's indexer process.
    With ``wait``, the store's pending memories are embedded first, for at most that many seconds
    (:func:`memfs.recall.indexer.wait_for`).

    :raises Unavailable: the provider did not give the question's vector.
    """
    deadline = time.monotonic() + timeout
    if wait > 0:
        from .indexer import wait_for

        try:
            wait_for(store, provider, store_id, min(wait, timeout))
        except Exception as e:  # noqa: BLE001 - a wait that fails is no wait; meaning answers
            log.warning("waiting for meaning failed (%s: %s); ranking without",
                        type(e).__name__, e)
    vector = provider.query(question, max(0.1, deadline - time.monotonic()))
    return _by_meaning(store, store_id, vector, provider.model, scope, set(also))


def _meaning(store: Core, provider: Provider, store_id: str, question: str,
             scope: Scope, also: list[str],
             wait: float) -> tuple[Meaning | None, str | None]:
    """What meaning says (:func:`rank`, or the provider's own: a
    :class:`~memfs.recall.embeddings.Ranker`), or None and why."""
    with _down_lock:
        until, why = _down.get(provider.model, (0.0, ""))
    if time.monotonic() < until:
        return None, why
    try:
        if isinstance(provider, Ranker):
            return provider.rank(store_id, question, scope, QUERY_TIMEOUT + wait, also,
                                 wait), None
        return rank(store, provider, store_id, question, scope, QUERY_TIMEOUT + wait,
                    also, wait), None
    except Unavailable as e:
        why = f"the embeddings provider is unavailable ({e})"
        pause = RETRY_AFTER if e.retry_after is None else e.retry_after
        if pause > 0:
            with _down_lock:
                _down[provider.model] = (time.monotonic() + pause, why)
        return None, why


def _by_words(store: Core, store_id: str, ws: list[str], scope: Scope,
              ) -> list[tuple[str, float]]:
    """The best :data:`CANDIDATES` by BM25 (:func:`memfs.recall.words.bm25`, computed here
    from the index's counts, so alike on both backends) among the store's memories of
    ``scope``, best first; ties by path."""
    if not ws:
        return []
    question = W.question_terms(ws)
    terms = sorted({t for alternatives in question for t in alternatives})
    memories, total_length = wordsindex.stats(store.database, store_id, scope)
    postings = wordsindex.postings(store.database, store_id, terms, scope)
    if not memories or not postings:
        return []
    paths = {r[0]: r[5] for r in postings}
    scores = W.bm25(question, (r[:5] for r in postings), memories, total_length)
    best = sorted(scores.items(), key=lambda kv: (-kv[1], paths[kv[0]]))
    return best[:CANDIDATES]


class _Vectors:
    """A store's vectors of one model as last read: per memory its path, sha256, passages'
    spans and rows of :attr:`matrix`; reused while the store's vectors are the same (their
    count and last ``indexed_at``), so that a search does not read megabytes of vectors."""

    def __init__(self, token: tuple[Any, ...], rows: list[Any], dim: int) -> None:
        import numpy as np

        self.token = token
        #: Per memory, in the matrix's order: its id, path, sha256 and passages' spans.
        self.memories: list[tuple[str, str, str, list[tuple[int, int]]]] = []
        starts: list[int] = []
        blobs: list[bytes] = []
        n = 0
        for mid, path, sha, blob, passages in rows:
            blob = bytes(blob)
            spans = [(s, e) for s, e, _ in P.decode(passages)] or [(-1, -1)]
            if len(blob) != 4 * dim * len(spans):
                continue
            self.memories.append((mid, path, sha, spans))
            starts.append(n)
            blobs.append(blob)
            n += len(spans)
        #: The first row of each memory's passages.
        self.starts = np.asarray(starts, dtype=np.intp)
        self.matrix = (np.frombuffer(b"".join(blobs), dtype="<f4").reshape(n, dim)
                       if n else np.zeros((0, dim), dtype=np.float32))


_cache: dict[tuple[int, str, str], _Vectors] = {}
_cache_lock = threading.Lock()
#: Stores whose vectors a process keeps (a session mounts 8 at most).
CACHED_STORES = 8


def _vectors(store: Core, store_id: str, model: str, dim: int) -> _Vectors:
    db = store.database
    row = db.one("SELECT count(*), max(indexed_at) FROM memory_vectors WHERE "
                 "store_id = ? AND model = ?", (store_id, model))
    token: tuple[Any, ...] = (row[0], row[1]) if row is not None else ()
    key = (id(db), store_id, model)
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and hit.token == token:
        return hit
    rows = db.all("SELECT memory_id, path, content_sha256, vector, passages FROM "
                  "memory_vectors WHERE store_id = ? AND model = ?", (store_id, model))
    got = _Vectors(token, [(r[0], r[1], r[2], r[3], r[4]) for r in rows], dim)
    with _cache_lock:
        _cache.pop(key, None)
        while len(_cache) >= CACHED_STORES:
            _cache.pop(next(iter(_cache)))
        _cache[key] = got
    return got


def _by_meaning(store: Core, store_id: str, vector: Any, model: str,
                scope: Scope, also: set[str]) -> Meaning:
    import numpy as np

    vs = _vectors(store, store_id, model, int(vector.shape[0]))
    extra, params = scope.sql("m")
    current = {r[0]: (r[1], r[2]) for r in store.database.all(
        f"SELECT m.id, m.path, m.content_sha256 FROM memories m WHERE m.store_id = ?{extra}",
        (store_id, *params))}
    # The memories whose vectors are of their current path and content (and of the scope).
    valid = [k for k, (mid, path, sha, _) in enumerate(vs.memories)
             if current.get(mid) == (path, sha)]
    out = Meaning(model=model)
    if not valid:
        return out
    sims = vs.matrix @ vector.astype(np.float32)
    # Each memory's best passage: the max over its rows, which follow one another.
    best = np.maximum.reduceat(sims, vs.starts)[valid]
    out.background = float(best.mean())
    keep = set(np.argsort(-best, kind="stable")[:CANDIDATES].tolist())
    for i, k in enumerate(valid):
        mid, _, _, spans = vs.memories[k]
        if i in keep or mid in also:
            lo = int(vs.starts[k])
            span = spans[int(np.argmax(sims[lo:lo + len(spans)]))]
            out.scores[mid] = (float(best[i]), span[0], span[1])
    return out


def _coverage(store: Core, store_id: str, ws: list[str], ids: list[str],
              total: int) -> tuple[dict[str, float], float]:
    """Each of ``ids``' coverage of the question's words ``ws``: the idf of those of ``ws`` it
    holds over that of all (0 to 1; the idf is the store's: ``ln(1 + (N - n + 0.5) /
    (n + 0.5))``); and the share of that idf of the words no memory of the store holds."""
    if not ws or not ids:
        return {}, 0.0
    matches = W.term_matches(store.database, store_id, ws)
    weight = {w: math.log(1.0 + (total - len(m) + 0.5) / (len(m) + 0.5))
              for w, m in matches.items()}
    whole = sum(weight.values()) or 1.0
    unknown = sum(weight[w] for w, m in matches.items() if not m) / whole
    return ({mid: sum(weight[w] for w, m in matches.items() if mid in m) / whole
             for mid in ids}, unknown)


def _unseen(store: Core, store_id: str, ids: list[str], model: str) -> set[str]:
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


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, x))))


def similarity(cosine: float | None, coverage: float, bm25_share: float,
               unknown: float) -> float:
    """A memory's similarity to a question, 0 to 1, from its best passage's cosine (None: not
    embedded, or meaning did not answer), its coverage of the question's words, its bm25
    score as a share of the question's best, and the share of the question's words that no
    memory of the store holds."""
    if cosine is None:  # bm25 breaks the ties of coverage (many memories hold all the words)
        return _logistic((coverage + WORDS_BM25 * bm25_share - WORDS_CENTER) / WORDS_WIDTH)
    return _logistic((evidence_sum(cosine, coverage, bm25_share, unknown) - CENTER) / WIDTH)


def evidence_sum(cosine: float, coverage: float, bm25_share: float, unknown: float,
                 weights: tuple[float, float, float] | None = None) -> float:
    """What the logistic of :func:`similarity` takes: ``cosine + COVERAGE x coverage + BM25 x
    bm25 share - UNKNOWN x unknown share``, or with other ``(COVERAGE, BM25, UNKNOWN)``
    (scripts/calibrate_recall sweeps them)."""
    a, b, c = weights if weights is not None else (COVERAGE, BM25, UNKNOWN)
    return cosine + a * coverage + b * bm25_share - c * unknown


def _recency(updated_at: str, now: datetime) -> float:
    """1 for a memory changed just now, halving every :data:`RECENCY_DAYS` days."""
    age = max(0.0, (now - parse_time(updated_at)).total_seconds() / 86400.0)
    return math.pow(0.5, age / RECENCY_DAYS)


def relevance(sim: float, importance: float, recency: float) -> float:
    """The MemoryTool's ranking: ``0.70 x similarity + 0.15 x importance + 0.15 x recency``."""
    return (SIMILARITY_WEIGHT * sim + IMPORTANCE_WEIGHT * importance
            + RECENCY_WEIGHT * recency)


@dataclass
class Evidence:
    """What a candidate memory has for a question: its best passage's cosine (None: meaning
    has not seen it, or did not answer) and that passage's span, its coverage of the
    question's words, its bm25 score as a share of the question's best, and the share of the
    question's words that no memory of the store holds (the same for every candidate); and
    what the memory says of itself: its importance (None: it says none), its type, and
    whether it is stale (superseded by another live memory)."""

    memory_id: str
    path: str
    content: str
    updated_at: str
    cosine: float | None
    span: tuple[int, int] | None
    coverage: float
    bm25_share: float
    unknown: float
    importance: float | None = None
    memory_type: str | None = None
    stale: bool = False

    def similarity(self) -> float:
        return similarity(self.cosine, self.coverage, self.bm25_share, self.unknown)


@dataclass
class _Gathered:
    result: Result
    lists: dict[str, list[tuple[str, float]]]
    evidence: list[Evidence]
    ws: list[str]


def _superseded(store: Core, store_id: str, scope: Scope) -> set[str]:
    """The paths that the store's live memories (those not expired, by ``scope``'s
    ``live_at``) name in their ``supersedes:`` (``memories.meta``)."""
    extra, params = Scope(live_at=scope.live_at).sql("m")
    named: set[str] = set()
    for r in store.database.all(
            f"SELECT m.meta FROM memories m WHERE m.store_id = ? AND m.meta LIKE ?{extra}",
            (store_id, '%"supersedes"%', *params)):
        paths = json.loads(r[0]).get("supersedes")
        if isinstance(paths, list):
            named.update(p for p in paths if isinstance(p, str))
    return named


def _gather(store: Core, store_id: str, question: str, provider: Provider | None,
            scope: Scope, channels: tuple[str, ...], *,
            coverage: bool = True) -> _Gathered:
    """The candidates of a question (the best :data:`CANDIDATES` by words and by meaning),
    each with its evidence, and the result's account of how they were found."""
    from .indexer import pending_bytes, pending_count

    ws = W.words(question)
    lists: dict[str, list[tuple[str, float]]] = {}
    if "words" in channels:
        lists["words"] = _by_words(store, store_id, ws, scope)
    row = store.database.one("SELECT memory_count FROM stores WHERE id = ?", (store_id,))
    total = int(row[0]) if row is not None else 0
    result = Result([], False, memories=total)
    meant: Meaning | None = None
    if "meaning" in channels:
        if provider is None:
            result.note = "meaning is off (--embeddings none): words alone answered"
        else:
            result.model = provider.model
            pending, size = pending_bytes(store, store_id, provider.model)
            wait = WAIT_SECONDS if (0 < pending <= WAIT_PENDING and size <= WAIT_BYTES and
                                    isinstance(provider, LocalE5 | Ranker)) else 0.0
            result.indexed = total - pending
            if result.indexed == 0 and total and not wait and store.database.one(
                    "SELECT 1 FROM memory_vectors WHERE store_id = ? AND model = ? LIMIT 1",
                    (store_id, provider.model)) is None:  # (vectors of before passages rank)
                result.note = "no memory is indexed by meaning yet: words alone answered"
            else:
                meant, why = _meaning(store, provider, store_id, question, scope,
                                      [mid for mid, _ in lists.get("words", [])], wait)
                if wait:
                    pending = pending_count(store, store_id, provider.model)
                result.indexed = total - pending
                if meant is None:
                    result.note = f"{why}: words alone answered"
                else:
                    lists["meaning"] = meant.ranked()[:CANDIDATES]
                    result.meaning = True
                    if pending:
                        result.note = (f"meaning covers {result.indexed} of {total} memories "
                                       "(the index is catching up)")
    result.candidates = {k: len(v) for k, v in lists.items()}
    ids = list(dict.fromkeys(mid for ranked in lists.values() for mid, _ in ranked))
    if not ids:
        return _Gathered(result, lists, [], ws)
    unseen: set[str] = set()
    if meant is not None and result.indexed < total and provider is not None:
        unseen = _unseen(store, store_id, ids, provider.model)
    extra, params = scope.sql("m")
    rows = store.database.all(
        "SELECT m.id, m.path, m.content, m.updated_at, m.importance, m.mtype FROM memories m "
        f"WHERE m.store_id = ? AND m.id IN ({', '.join('?' * len(ids))}){extra}",
        (store_id, *ids, *params))
    stale = _superseded(store, store_id, scope) if rows else set()
    cover, unknown = (_coverage(store, store_id, ws, [r["id"] for r in rows], total)
                      if coverage else ({}, 0.0))
    bm = dict(lists.get("words", []))
    top_bm = max(bm.values(), default=0.0) or 1.0
    shift = 0.0
    if meant is not None and provider is not None and provider.model != LocalE5.model:
        shift = E5_BACKGROUND - meant.background
    evidence = []
    for r in rows:
        mid = r["id"]
        cos, span = None, None
        if meant is not None and mid not in unseen and mid in meant.scores:
            cos = meant.scores[mid][0] + shift
            span = meant.scores[mid][1:]
        evidence.append(Evidence(mid, r["path"], r["content"], r["updated_at"], cos, span,
                                 cover.get(mid, 0.0), max(0.0, bm.get(mid, 0.0)) / top_bm,
                                 unknown, r["importance"], r["mtype"], r["path"] in stale))
    return _Gathered(result, lists, evidence, ws)


def evidence(store: Core, store_id: str, question: str, *,
             provider: Provider | None, scope: Scope = EVERY) -> list[Evidence]:
    """The candidates of ``question`` in the store and their evidence, as the default ranking
    weighs them: what scripts/bench_recall.py --calibrate sweeps the constants over."""
    return _gather(store, store_id, question, provider, scope, ("words", "meaning")).evidence


def score(e: Evidence, now: datetime) -> float:
    """A candidate's relevance (:func:`relevance`): its own importance (:data:`IMPORTANCE`
    when it says none), its recency at ``now``, times :data:`STALE` when it is stale."""
    importance = IMPORTANCE if e.importance is None else e.importance
    r = relevance(e.similarity(), importance, _recency(e.updated_at, now))
    return r * STALE if e.stale else r


def run(store: Core, store_id: str, question: str, *, provider: Provider | None,
        limit: int, scope: Scope = EVERY, threshold: float | None = None,
        fusion: str = "calibrated", channels: tuple[str, ...] = ("words", "meaning"),
        now: datetime | None = None) -> Result:
    """Rank the store's memories of ``scope`` for ``question`` (already checked by the
    store), their recency at ``now`` (default: now)."""
    if threshold is None:
        threshold = SEARCH_DEFAULT_THRESHOLD
    # Meaning alone is the cosine alone (no coverage): what it is measured as.
    g = _gather(store, store_id, question, provider, scope, channels,
                coverage=fusion == "calibrated" and "words" in channels)
    result = g.result
    now = now or datetime.now(UTC)
    if fusion == "calibrated":
        scored = [(score(e, now), e) for e in g.evidence]
    else:
        fused = _fuse(g.lists, fusion, {e.memory_id for e in g.evidence if e.cosine is None
                                        and "meaning" in g.lists})
        scored = [(fused[e.memory_id], e) for e in g.evidence]
    scored.sort(key=lambda t: (-t[0], t[1].path))
    found = {k: {mid for mid, _ in v} for k, v in g.lists.items()}
    result.best = round(scored[0][0], 4) if scored else None
    for value, e in scored:
        value = round(value, 4)  # as shown: threshold=<a score shown> keeps that hit
        if value < threshold or len(result.hits) >= limit:
            break
        matched = tuple(k for k in ("words", "meaning") if e.memory_id in found.get(k, ()))
        text = e.content
        if e.span is not None:
            start, end = e.span
            if 0 <= start <= end <= len(text) and (start, end) != (0, len(text)):
                text = text[start:end]
        result.hits.append(Hit(e.memory_id, e.path, max(value, 0.0001), W.snippet(text, g.ws),
                               matched, e.updated_at, memory_type=e.memory_type,
                               stale=e.stale))
    return result
