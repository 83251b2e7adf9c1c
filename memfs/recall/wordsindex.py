"""How the words index is stored, on each backend: the same counts, kept where each database
keeps them cheaply.

:func:`memfs.recall.words.index` gives each memory's length and, per term, its counts in the
path and the content; BM25 (:func:`memfs.recall.words.bm25`) needs, for the terms of a
question, every memory of the store holding one, with those counts and its length. A 2 kB
memory has about 250 terms: a row for each (``memory_words_terms`` at first) made indexing
2,000 such memories take 15-20 s on SQLite, most of it in the b-tree of those rows. So:

- ``memory_words``: a row per indexed memory, numbered (``doc``: a memory indexed again gets a
  new number), with its store, its length and, on SQLite, its terms as tokens
  (:func:`tokens`);
- SQLite: an FTS5 index of those tokens (``memory_words_fts``, external content
  ``memory_words``, ``detail=none``: document lists only). A token is
  ``<store key>·<term>·<count in the path>·<count in the content>``, so FTS5's own compact,
  merged lists hold the counts; a question's term is a range of tokens, read through
  ``memory_words_vocab`` (``fts5vocab``, ``instance``). The store key (a hash of the store's
  id) keeps each store's tokens apart (a search reads its own store's lists; a collision only
  reads more, the rows are filtered by ``store_id``). Indexing 2,000 memories of 2 kB: 0.4 s.
- PostgreSQL: ``memory_words_terms``, a row per term per memory, as integers but for the
  term, written by ``COPY`` (binary): its heap and b-tree take them about as fast as FTS5.

Either way :func:`postings` returns the same rows, so both backends rank alike, to the bit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, cast

from .scope import EVERY, Scope

if TYPE_CHECKING:
    from ..backends import Connection, Database
    from ..backends.postgresql import PgConnection

__all__ = ["SEP", "tokens", "put", "drop", "forget_store", "stats", "postings", "held", "size",
           "Doc"]

#: Between the parts of a token: a character no term holds (terms are letters and digits),
#: and not ASCII, so FTS5's ``ascii`` tokenizer keeps it inside a token.
SEP = "\u00b7"
_AFTER_SEP = chr(ord(SEP) + 1)

#: A memory to index: its id, its store's, its length, its terms' counts (path, content).
Doc = tuple[str, str, int, dict[str, tuple[int, int]]]


def _key(store_id: str) -> str:
    return hashlib.blake2b(store_id.encode(), digest_size=6).hexdigest()


def tokens(store_id: str, counts: dict[str, tuple[int, int]]) -> str:
    """A memory's terms as SQLite's index holds them (space-separated tokens)."""
    key = _key(store_id)
    return " ".join(f"{key}{SEP}{t}{SEP}{p}{SEP}{n}" for t, (p, n) in counts.items())


def put(c: Connection, dialect: str, docs: Sequence[Doc]) -> None:
    """In the write transaction ``c``: index ``docs`` (none of them indexed: :func:`drop`)."""
    if not docs:
        return
    if dialect == "sqlite":
        c.executemany("INSERT INTO memory_words (memory_id, store_id, length, terms) "
                      "VALUES (?, ?, ?, ?)",
                      [(mid, sid, n, tokens(sid, counts)) for mid, sid, n, counts in docs])
        c.execute("INSERT INTO memory_words_fts (rowid, terms) SELECT doc, terms FROM "
                  f"memory_words WHERE memory_id IN ({', '.join('?' * len(docs))})",
                  [d[0] for d in docs])
        return
    import psycopg
    from psycopg.rows import tuple_row

    c.executemany("INSERT INTO memory_words (memory_id, store_id, length) VALUES (?, ?, ?)",
                  [(mid, sid, n) for mid, sid, n, _ in docs])
    numbers = {r[0]: int(r[1]) for r in c.execute(
        "SELECT memory_id, doc FROM memory_words WHERE memory_id = ANY(?)",
        ([d[0] for d in docs],))}
    pg = cast("PgConnection", c)
    try:
        with pg.raw.cursor(row_factory=tuple_row).copy(
                "COPY memory_words_terms (store_id, term, doc, in_path, in_content) "
                "FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["text", "text", "int8", "int8", "int8"])
            for mid, sid, _, counts in docs:
                doc = numbers[mid]
                for term, (p, n) in counts.items():
                    copy.write_row((sid, term, doc, p, n))
    except psycopg.Error as e:
        raise pg.translate(e) from e


def drop(c: Connection, dialect: str, memory_ids: Sequence[str]) -> None:
    """In the write transaction ``c``: the words of ``memory_ids`` out of the index."""
    if not memory_ids:
        return
    marks = ", ".join("?" * len(memory_ids))
    if dialect == "sqlite":
        # FTS5 deletes from an external-content index what it is told the row held.
        c.execute("INSERT INTO memory_words_fts (memory_words_fts, rowid, terms) SELECT "
                  f"'delete', doc, terms FROM memory_words WHERE memory_id IN ({marks})",
                  list(memory_ids))
    else:
        c.execute("DELETE FROM memory_words_terms WHERE doc IN (SELECT doc FROM memory_words "
                  f"WHERE memory_id IN ({marks}))", list(memory_ids))
    c.execute(f"DELETE FROM memory_words WHERE memory_id IN ({marks})", list(memory_ids))


def forget_store(c: Connection, dialect: str, store_id: str) -> None:
    """In the transaction ``c`` that deletes a store: its words."""
    if dialect == "sqlite":
        c.execute("INSERT INTO memory_words_fts (memory_words_fts, rowid, terms) SELECT "
                  "'delete', doc, terms FROM memory_words WHERE store_id = ?", (store_id,))
    else:
        c.execute("DELETE FROM memory_words_terms WHERE store_id = ?", (store_id,))
    c.execute("DELETE FROM memory_words WHERE store_id = ?", (store_id,))


def stats(database: Database, store_id: str, scope: Scope = EVERY) -> tuple[int, int]:
    """How many memories of the store (those of ``scope``) are indexed, and their lengths'
    sum."""
    extra, params = scope.sql("m")
    join = " JOIN memories m ON m.id = w.memory_id" if scope else ""
    row = database.one(f"SELECT count(*), coalesce(sum(w.length), 0) FROM memory_words w{join} "
                       f"WHERE w.store_id = ?{extra}", (store_id, *params))
    return (int(row[0]), int(row[1])) if row is not None else (0, 0)


def postings(database: Database, store_id: str, terms: Iterable[str],
             scope: Scope = EVERY) -> list[tuple[str, str, int, int, int, str]]:
    """Each memory of the store (of ``scope``) holding one of ``terms``, once per term it
    holds: ``(memory id, term, count in the path, in the content, the memory's length, its
    path)``."""
    wanted = sorted(set(terms))
    if not wanted:
        return []
    extra, params = scope.sql("m")
    if database.dialect != "sqlite":
        return [(r[0], r[1], int(r[2]), int(r[3]), int(r[4]), r[5]) for r in database.all(
            "SELECT w.memory_id, t.term, t.in_path, t.in_content, w.length, m.path "
            "FROM memory_words_terms t JOIN memory_words w ON w.doc = t.doc "
            "JOIN memories m ON m.id = w.memory_id "
            f"WHERE t.store_id = ? AND t.term IN ({', '.join('?' * len(wanted))}){extra}",
            (store_id, *wanted, *params))]
    key = _key(store_id)
    found: list[tuple[str, str, int, int, int, str]] = []
    with database.read() as c:
        for term in wanted:
            start = f"{key}{SEP}{term}{SEP}"
            # CROSS JOIN: the token range first (fts5vocab cannot be searched by doc).
            for r in c.execute(
                    "SELECT w.memory_id, v.term, w.length, m.path FROM memory_words_vocab v "
                    "CROSS JOIN memory_words w ON w.doc = v.doc "
                    "JOIN memories m ON m.id = w.memory_id "
                    f"WHERE v.term >= ? AND v.term < ? AND w.store_id = ?{extra}",
                    (start, start[:-1] + _AFTER_SEP, store_id, *params)):
                in_path, in_content = r[1][len(start):].split(SEP)
                found.append((r[0], term, int(in_path), int(in_content), int(r[2]), r[3]))
    return found


def held(database: Database, store_id: str) -> dict[str, tuple[int, dict[str, tuple[int, int]]]]:
    """What the index holds of the store, read back from where searches read it: memory id
    -> (length, {term: (count in the path, in the content)}). For checks and tests: it reads
    the whole store."""
    found: dict[str, tuple[int, dict[str, tuple[int, int]]]] = {
        r[0]: (int(r[1]), {}) for r in database.all(
            "SELECT memory_id, length FROM memory_words WHERE store_id = ?", (store_id,))}
    if database.dialect == "sqlite":
        start = f"{_key(store_id)}{SEP}"
        for r in database.all(
                "SELECT w.memory_id, v.term FROM memory_words_vocab v CROSS JOIN memory_words w "
                "ON w.doc = v.doc WHERE v.term >= ? AND v.term < ? AND w.store_id = ?",
                (start, start[:-1] + _AFTER_SEP, store_id)):
            term, p, n = r[1][len(start):].rsplit(SEP, 2)
            found[r[0]][1][term] = (int(p), int(n))
        return found
    for r in database.all(
            "SELECT w.memory_id, t.term, t.in_path, t.in_content FROM memory_words_terms t "
            "JOIN memory_words w ON w.doc = t.doc WHERE t.store_id = ?", (store_id,)):
        found[r[0]][1][r[1]] = (int(r[2]), int(r[3]))
    return found


def size(database: Database) -> int:
    """How many (term, memory) pairs the whole index holds, of every store."""
    table = "memory_words_vocab" if database.dialect == "sqlite" else "memory_words_terms"
    row = database.one(f"SELECT count(*) FROM {table}")
    return int(row[0]) if row is not None else 0
