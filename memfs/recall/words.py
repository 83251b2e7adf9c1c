"""The words of memories and of questions, and their ranking: Okapi BM25, the same on
both backends.

A text is split into words (letters and digits; accents folded, case ignored). Each word is
indexed under its stems (:func:`stems`): English (Snowball's ``english``, Porter 2) and French
(Snowball's ``french``, from the word as written and as folded), so ``mangeaient`` finds
``manger`` and ``paintings`` finds ``painted``; a text need not say which language it is in.

A question's words (:func:`words`) drop those that say nothing of a memory (``the``, ``what``,
``le``, ``quoi``...), unless nothing else is left. They are only ever words: what a client
sends is split into letters and digits, bound as SQL parameters and never read as query
syntax (quotes, ``NEAR``, ``*``, ``path:``, ``OR``, ``-``... are words or nothing).

:func:`bm25` scores a memory for a question: for each question word, the best of its stems,
``idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average length))``, summed; ``tf``
counts the path's words :data:`PATH_WEIGHT` times (BM25F: a word in the path outranks the
same word once in the content); ``idf`` is Lucene's, ``log(1 + (N - df + 0.5) / (df + 0.5))``,
over the memories searched (never another store's). The numbers are computed here, in Python,
from the counts either backend stores (:mod:`memfs.recall.wordsqueue`): SQLite and
PostgreSQL rank alike, to the last bit.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

import Stemmer

from .schema import fold

if TYPE_CHECKING:
    from ..backends import Database

__all__ = ["words", "stems", "question_terms", "index", "bm25", "term_matches", "snippet",
           "MAX_WORDS",
           "MAX_TERM", "K1", "B", "PATH_WEIGHT"]

#: Words of a question at most (the rest are ignored).
MAX_WORDS = 32
#: Characters of an indexed word at most (a longer one is cut: a hash or a base64 blob is
#: still found by itself, and an index key stays far below PostgreSQL's b-tree limit).
MAX_TERM = 64
#: BM25's term-frequency saturation and length normalization (the usual values).
K1 = 1.2
B = 0.75
#: How many times a word of the path counts (once in the content: 1).
PATH_WEIGHT = 4.0
#: Characters of a snippet at most.
SNIPPET_CHARS = 160

_WORD = re.compile(r"[^\W_]+")
_SPACE = re.compile(r"\s+")

# Function words of English and French: they match nearly every memory.
_STOP = frozenset((
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "before", "being", "but", "by", "can", "could", "did", "do", "does", "doing",
    "done", "for", "from", "had", "has", "have", "having", "he", "her", "here", "hers", "him",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my", "no", "nor",
    "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "out", "over",
    "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under",
    "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while",
    "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "ever", "get",
    "gets", "got", "make", "made", "use", "used", "using", "us", "something", "anything",
    "thing", "things", "au", "aux", "avec", "ce", "ces", "cette", "dans", "de", "des", "du",
    "elle", "en", "est", "et", "eux", "il", "ils", "je", "la", "le", "les", "leur", "lui",
    "ma", "mais", "me", "mes", "moi", "mon", "ne", "nos", "notre", "nous", "on", "ou", "par",
    "pas", "pour", "qu", "que", "qui", "quoi", "sa", "se", "ses", "son", "sur", "ta", "te",
    "tes", "toi", "ton", "tu", "un", "une", "vos", "votre", "vous", "y", "est", "sont", "été",
    "être", "avoir", "comment", "quel", "quelle", "quels", "quelles", "quand", "où",
))


def words(question: str) -> list[str]:
    """The words of ``question`` to search for, lower-case (accents kept: the French stemmer
    reads them; :func:`stems` folds what it returns), in order, once each."""
    found = list(dict.fromkeys(_tokens(question)))
    kept = [w for w in found if fold(w) not in _STOP_FOLDED and len(w) > 1]
    return (kept or found)[:MAX_WORDS]


_STOP_FOLDED = frozenset(fold(w) for w in _STOP)


_ENGLISH = Stemmer.Stemmer("english", 0)
_FRENCH = Stemmer.Stemmer("french", 0)
#: A Snowball stemmer keeps its word in the object: one thread at a time (the background
#: catch-up and a search's question may stem at once).
_STEMMING = threading.Lock()


#: Words whose stems are remembered (about 300 bytes each: 5 MB at most, of the session
#: daemon's 60). PyStemmer (Snowball's C stemmers) takes about 1.5 µs a word and language, and
#: this cache (the stemmers' own is off) a fifth of that: the words of a store's memories are
#: mostly among their most common few thousand.
STEMS_CACHED = 16384


@functools.lru_cache(maxsize=STEMS_CACHED)
def stems(word: str) -> tuple[str, ...]:
    """The terms ``word`` (lower-case, as written) is indexed and searched under, once each:
    its English stem (of the folded word), its French stem as written, folded (``mangée``:
    ``mang``), and its French stem of the folded word (``mangee``, as a question typed
    without accents says it). Cut to :data:`MAX_TERM` characters."""
    folded = fold(word)
    with _STEMMING:
        french = _FRENCH.stemWord(word)
        found = (_ENGLISH.stemWord(folded), fold(french),
                 french if folded == word else _FRENCH.stemWord(folded))
    return tuple(dict.fromkeys(t[:MAX_TERM] for t in found if t))


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def index(path: str, content: str) -> tuple[int, dict[str, tuple[int, int]]]:
    """What the words index holds of a memory: its length (words of the path and the content)
    and, per term, how many words of the path and of the content have it among their
    :func:`stems`."""
    counts: dict[str, list[int]] = {}
    length = 0
    for field, text in enumerate((path, content)):
        tokens = _tokens(text)
        length += len(tokens)
        # Each distinct word stemmed once (a 2 kB memory has 300 words, half of them repeats).
        for token, n in Counter(tokens).items():
            for term in stems(token):
                counts.setdefault(term, [0, 0])[field] += n
    return length, {t: (c[0], c[1]) for t, c in counts.items()}


def question_terms(ws: list[str]) -> list[tuple[str, ...]]:
    """The terms of each of the question's words ``ws`` (:func:`words`), once each: two words
    with the same stems (``painting``, ``paintings``) count as one."""
    return list(dict.fromkeys(stems(w) for w in ws))


def bm25(question: list[tuple[str, ...]], postings: Iterable[tuple[str, str, int, int, int]],
         memories: int, total_length: int) -> dict[str, float]:
    """Each memory's BM25 score for ``question`` (:func:`question_terms`), from
    ``postings`` (memory id, term, its count in the path, in the content, the memory's
    length) of the ``memories`` searched, whose lengths sum to ``total_length``. A memory
    sharing no term with the question is absent."""
    rows = list(postings)
    if not rows or memories <= 0:
        return {}
    df: dict[str, int] = {}
    for _, term, _, _, _ in rows:
        df[term] = df.get(term, 0) + 1
    idf = {t: math.log(1.0 + (memories - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    average = max(total_length / memories, 1.0)
    per_term: dict[tuple[str, str], float] = {}
    for mid, term, in_path, in_content, length in rows:
        tf = PATH_WEIGHT * in_path + in_content
        norm = K1 * (1.0 - B + B * length / average)
        per_term[(mid, term)] = idf[term] * tf * (K1 + 1.0) / (tf + norm)
    scores: dict[str, float] = {}
    for mid in dict.fromkeys(mid for mid, *_ in rows):
        total = 0.0
        for terms in question:  # in the question's order: the same sum on both backends
            total += max((per_term.get((mid, t), 0.0) for t in terms), default=0.0)
        scores[mid] = total
    return scores


def term_matches(database: Database, store_id: str, terms: Iterable[str],
                 ) -> dict[str, set[str]]:
    """For each of the question's words ``terms`` (:func:`words`, keys as given), the ids of
    the store's memories holding it (a word is held if any of its :func:`stems` is), as the
    index has them (take the queue in first: :func:`memfs.recall.wordsqueue.catch_up`). A
    word no memory holds maps to an empty set."""
    from . import wordsindex

    asked = {w: stems(w) for w in terms}
    holding: dict[str, set[str]] = {}
    for mid, term, *_ in wordsindex.postings(database, store_id,
                                            {t for ts in asked.values() for t in ts}):
        holding.setdefault(term, set()).add(mid)
    return {w: set().union(*(holding.get(t, set()) for t in ts)) for w, ts in asked.items()}


def _stem(w: str) -> str:
    # Close enough to a stemmer to place a snippet: the first five letters.
    return w[:5]


def snippet(content: str, ws: list[str], limit: int = SNIPPET_CHARS) -> str:
    """The line of ``content`` holding most of ``ws`` (by their first letters), on one line
    (tabs and newlines made spaces), cut to ``limit`` characters around the first word found.
    Without any of the words: the content's first line."""
    starts = {_stem(fold(w)) for w in ws}
    best, best_score = "", -1
    for line in content.splitlines() or [content]:
        line = _SPACE.sub(" ", line).strip()
        if not line:
            continue
        lw = [_stem(w) for w in _WORD.findall(fold(line).lower())]
        score = len(starts.intersection(lw))
        if score > best_score:
            best, best_score = line, score
    if len(best) <= limit:
        return best
    start = 0
    if best_score > 0:
        folded = fold(best).lower()
        at = [m.start() for m in _WORD.finditer(folded) if _stem(m.group()) in starts]
        if at:
            start = max(0, min(at[0] - limit // 4, len(best) - limit))
    cut = best[start:start + limit - 1]
    return ("…" if start else "") + cut.strip() + "…"
