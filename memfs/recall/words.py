"""A question as a text-search query, and the snippet shown for a hit.

A question is split into words (letters and digits; accents folded, case ignored). Words that
say nothing of a memory (``the``, ``what``, ``le``, ``quoi``...) are dropped, unless nothing
else is left. The words are OR'ed: a memory with more of them, rarer ones, ranks higher
(bm25 on SQLite; ``ts_rank`` on PostgreSQL, whose ``english`` configuration drops stop words
and stems). Each word is quoted for FTS5 and contains only letters and digits, so nothing a
client sends is ever read as query syntax.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .schema import fold

if TYPE_CHECKING:
    from ..backends import Database

__all__ = ["words", "fts5_query", "tsquery", "snippet", "term_matches", "MAX_WORDS"]

#: Words of a question at most (the rest are ignored).
MAX_WORDS = 32
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
    """The words of ``question`` to search for, lower-case and folded, in order, once each."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(fold(question).lower()):
        seen.setdefault(w, None)
    found = list(seen)
    kept = [w for w in found if w not in _STOP_FOLDED and len(w) > 1]
    return (kept or found)[:MAX_WORDS]


_STOP_FOLDED = frozenset(fold(w) for w in _STOP)


def fts5_query(ws: list[str]) -> str:
    """An FTS5 MATCH expression for any of ``ws`` (each quoted: never query syntax)."""
    return " OR ".join(f'"{w}"' for w in ws)


def tsquery(ws: list[str]) -> str:
    """A ``to_tsquery`` expression for any of ``ws`` (letters and digits only: no operator)."""
    return " | ".join(ws)


def term_matches(database: Database, store_id: str, ws: list[str]) -> dict[str, set[str]]:
    """For each of ``ws`` that the words index knows as a word, the store's memories holding
    it (in their path or content, stemmed as the index stems): what a memory's coverage of a
    question is computed from (:mod:`memfs.recall.search`)."""
    out: dict[str, set[str]] = {}
    for w in ws:
        if database.dialect == "postgresql":
            nodes = database.one("SELECT numnode(to_tsquery('english', ?))", (w,))
            if nodes is None or not nodes[0]:
                continue  # a stop word of the 'english' configuration: no word to it
            rows = database.all(
                "SELECT memory_id FROM memory_words WHERE store_id = ? AND "
                "words @@ to_tsquery('english', ?)", (store_id, w))
        else:
            rows = database.all(
                "SELECT r.memory_id FROM memory_words JOIN memory_words_rows r ON "
                "r.row = memory_words.rowid WHERE memory_words MATCH ? AND r.store_id = ?",
                (fts5_query([w]), store_id))
        out[w] = {r[0] for r in rows}
    return out


def _stem(w: str) -> str:
    # Close enough to a stemmer to place a snippet: the first five letters.
    return w[:5]


def snippet(content: str, ws: list[str], limit: int = SNIPPET_CHARS) -> str:
    """The line of ``content`` holding most of ``ws`` (by their first letters), on one line
    (tabs and newlines made spaces), cut to ``limit`` characters around the first word found.
    Without any of the words: the content's first line."""
    stems = {_stem(w) for w in ws}
    best, best_score = "", -1
    for line in content.splitlines() or [content]:
        line = _SPACE.sub(" ", line).strip()
        if not line:
            continue
        lw = [_stem(w) for w in _WORD.findall(fold(line).lower())]
        score = len(stems.intersection(lw))
        if score > best_score:
            best, best_score = line, score
    if len(best) <= limit:
        return best
    start = 0
    if best_score > 0:
        folded = fold(best).lower()
        at = [m.start() for m in _WORD.finditer(folded) if _stem(m.group()) in stems]
        if at:
            start = max(0, min(at[0] - limit // 4, len(best) - limit))
    cut = best[start:start + limit - 1]
    return ("…" if start else "") + cut.strip() + "…"
