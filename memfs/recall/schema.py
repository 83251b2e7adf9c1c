"""The tables of recall, on both backends (the migrations ``m011_recall`` of SQLite and
``m007_recall`` of PostgreSQL, in :mod:`memfs.store.schema`).

Words: an index of every live memory's path and content, the same on both backends. The
database itself notes, in the same transaction as every change of ``memories`` (triggers), the
memory whose words the index must take in (``memory_words_queue``): no write path can forget
it, and the write pays one row, not the tokenizing of its text (a third of the SQLite work of
each write, issue 23). :mod:`memfs.recall.wordsqueue` takes the queue in before every search
by words, so a memory is findable by its words the moment its write commits and a deleted
one is gone from it at once, and in the background (mounts and ``memfs serve`` once they are
quiet). Only live memories are indexed (``memories`` holds each one's current content), so the
text of an older or a redacted version is never found.

The index holds, per memory, its length (its words, path and content) and its terms
(:func:`memfs.recall.words.index`: words folded and stemmed in English and French), each with
its count in the path and in the content: what BM25 (:func:`memfs.recall.words.bm25`) needs,
and no more. :mod:`memfs.recall.wordsindex` says how: ``memory_words`` (a row per memory) with
an FTS5 index of its terms on SQLite (``memory_words_fts``), a row per term per memory on
PostgreSQL (``memory_words_terms``).

History: ``m011_recall`` made an FTS5 table on SQLite (English ``porter`` stemming, FTS5's
``bm25()`` over every store's memories) and a ``tsvector`` kept by a trigger on PostgreSQL
(``ts_rank``); ``m013_words_queue`` queued SQLite's; ``m018_words_bm25`` (PostgreSQL:
``m013_words_bm25``) made both the tables above.

Meaning: ``memory_vectors`` holds a memory's embeddings, one per passage (``vector``: the
passages' vectors end to end; ``passages``: their spans and keys, ``m017_vector_passages`` /
``m012_vector_passages``), written by the indexer
(:mod:`memfs.recall.index`) off the write path. Each row records the model and the sha256
and path of the text it embedded; a vector counts only while both still match the memory.
``recall_leases`` lets one process at a time index a store.
"""

from __future__ import annotations

import unicodedata

__all__ = ["PG", "PG_BM25", "SQLITE", "SQLITE_BM25", "SQLITE_WORDS_QUEUE", "VECTOR_PASSAGES",
           "SQLITE_VECTOR_PASSAGES",
           "fold", "FOLD_FROM", "FOLD_TO"]


def _fold_table() -> tuple[str, str]:
    """Latin letters with diacritics (U+00C0-U+024F) and the base letter each decomposes to."""
    src, dst = [], []
    for cp in range(0xC0, 0x250):
        ch = chr(cp)
        base = unicodedata.normalize("NFKD", ch)[:1]
        if ch.isalpha() and base != ch and base.isascii() and base.isalpha():
            src.append(ch)
            dst.append(base)
    return "".join(src), "".join(dst)


FOLD_FROM, FOLD_TO = _fold_table()
#: Punctuation that PostgreSQL's parser would keep inside a token (a path, a file name, a
#: host, an e-mail address) or take for an XML tag or entity (which it drops, words and all):
#: made spaces, so that words are split as FTS5 and a question split them (``/team/rota.md``
#: is team, rota, md; ``<b>bold</b>`` is b, bold, b).
_SPLIT = "/._-@:+#~=<>&\\"
_FOLD = str.maketrans(FOLD_FROM, FOLD_TO)


def fold(text: str) -> str:
    """``text`` with its accented Latin letters replaced by their base letter, as
    ``memfs_fold`` does in PostgreSQL (case is folded by the text search itself)."""
    return text.translate(_FOLD)


SQLITE = """
CREATE TABLE memory_words_rows (
    row INTEGER PRIMARY KEY,
    memory_id TEXT NOT NULL UNIQUE,
    store_id TEXT NOT NULL
);
CREATE INDEX memory_words_rows_store ON memory_words_rows(store_id);
CREATE VIRTUAL TABLE memory_words USING fts5(
    path, content, tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memory_words_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memory_words_rows (memory_id, store_id) VALUES (NEW.id, NEW.store_id);
    INSERT INTO memory_words (rowid, path, content) VALUES (
        (SELECT row FROM memory_words_rows WHERE memory_id = NEW.id), NEW.path, NEW.content);
END;
CREATE TRIGGER memory_words_update AFTER UPDATE OF path, content ON memories BEGIN
    UPDATE memory_words SET path = NEW.path, content = NEW.content
        WHERE rowid = (SELECT row FROM memory_words_rows WHERE memory_id = OLD.id);
END;
CREATE TRIGGER memory_words_delete AFTER DELETE ON memories BEGIN
    DELETE FROM memory_words
        WHERE rowid = (SELECT row FROM memory_words_rows WHERE memory_id = OLD.id);
    DELETE FROM memory_words_rows WHERE memory_id = OLD.id;
END;
INSERT INTO memory_words_rows (memory_id, store_id) SELECT id, store_id FROM memories;
INSERT INTO memory_words (rowid, path, content)
    SELECT r.row, m.path, m.content FROM memories m JOIN memory_words_rows r ON r.memory_id = m.id;

CREATE TABLE memory_vectors (
    memory_id TEXT PRIMARY KEY,
    store_id TEXT NOT NULL,
    model TEXT NOT NULL,
    path TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    vector BLOB NOT NULL,             -- float32, little-endian, L2-normalized
    indexed_at TEXT NOT NULL
);
CREATE INDEX memory_vectors_store ON memory_vectors(store_id);
CREATE TRIGGER memory_vectors_delete AFTER DELETE ON memories BEGIN
    DELETE FROM memory_vectors WHERE memory_id = OLD.id;
END;

CREATE TABLE recall_leases (
    store_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at REAL NOT NULL          -- Unix seconds
);
"""

#: ``m013_words_queue``: the words of a changed memory are queued, not indexed, by its
#: transaction (the words index's triggers of ``m011_recall`` replaced). One row per memory
#: (its id, whatever the change: :func:`memfs.recall.wordsqueue.catch_up` reads the memory as
#: it is then).
SQLITE_WORDS_QUEUE = """
DROP TRIGGER memory_words_insert;
DROP TRIGGER memory_words_update;
DROP TRIGGER memory_words_delete;
CREATE TABLE memory_words_queue (
    store_id TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    PRIMARY KEY (store_id, memory_id)
) WITHOUT ROWID;
CREATE TRIGGER memory_words_queue_insert AFTER INSERT ON memories BEGIN
    INSERT OR IGNORE INTO memory_words_queue (store_id, memory_id) VALUES (NEW.store_id, NEW.id);
END;
CREATE TRIGGER memory_words_queue_update AFTER UPDATE OF path, content ON memories BEGIN
    INSERT OR IGNORE INTO memory_words_queue (store_id, memory_id) VALUES (NEW.store_id, NEW.id);
END;
CREATE TRIGGER memory_words_queue_delete AFTER DELETE ON memories BEGIN
    INSERT OR IGNORE INTO memory_words_queue (store_id, memory_id) VALUES (OLD.store_id, OLD.id);
END;
"""


#: ``m017_vector_passages`` (PostgreSQL: ``m012``): the passages a row's vectors embed, as
#: :func:`memfs.recall.passages.encode` writes them ('' for a row from before: one vector of the
#: memory's beginning, which ranks until the indexer embeds the memory again), and how many of
#: the memory's passages are still to embed (the indexer embeds every memory's first passage
#: before the others': :mod:`memfs.recall.indexer`).
VECTOR_PASSAGES = """
ALTER TABLE memory_vectors ADD COLUMN passages TEXT NOT NULL DEFAULT '';
ALTER TABLE memory_vectors ADD COLUMN passages_left INTEGER NOT NULL DEFAULT 0;
"""

#: SQLite's ``m017_vector_passages``: the same columns, and the table made again with its
#: vectors last. A row of 5 passages' vectors is 7.7 kB, on overflow pages: reading a column
#: after it (``indexed_at``, ``passages``) read them all, and the checks every search makes (is
#: a memory pending? have the store's vectors changed?) took 20 ms at 2,000 memories.
SQLITE_VECTOR_PASSAGES = """
DROP TRIGGER memory_vectors_delete;
CREATE TABLE memory_vectors_new (
    memory_id TEXT PRIMARY KEY,
    store_id TEXT NOT NULL,
    model TEXT NOT NULL,
    path TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    indexed_at TEXT NOT NULL,
    passages_left INTEGER NOT NULL DEFAULT 0,
    passages TEXT NOT NULL DEFAULT '',
    vector BLOB NOT NULL              -- float32, little-endian, L2-normalized, end to end
);
INSERT INTO memory_vectors_new (memory_id, store_id, model, path, content_sha256, indexed_at,
                                vector)
    SELECT memory_id, store_id, model, path, content_sha256, indexed_at, vector
    FROM memory_vectors;
DROP TABLE memory_vectors;
ALTER TABLE memory_vectors_new RENAME TO memory_vectors;
CREATE INDEX memory_vectors_store ON memory_vectors(store_id, model);
CREATE TRIGGER memory_vectors_delete AFTER DELETE ON memories BEGIN
    DELETE FROM memory_vectors WHERE memory_id = OLD.id;
END;
"""


def _pg(text_type: str) -> str:
    quoted_from = FOLD_FROM.replace("'", "''")
    return f"""
CREATE FUNCTION memfs_fold(t text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT translate(t, '{quoted_from}{_SPLIT}', '{FOLD_TO}{" " * len(_SPLIT)}') $$;
CREATE TABLE memory_words (
    memory_id {text_type} PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
    store_id {text_type} NOT NULL,
    words tsvector NOT NULL
);
CREATE INDEX memory_words_words ON memory_words USING gin (words);
CREATE INDEX memory_words_store ON memory_words(store_id);
CREATE FUNCTION memfs_words() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_words VALUES (NEW.id, NEW.store_id,
        setweight(to_tsvector('english'::regconfig, memfs_fold(NEW.path)), 'A')
        || to_tsvector('english'::regconfig, memfs_fold(NEW.content)))
    ON CONFLICT (memory_id) DO UPDATE SET store_id = EXCLUDED.store_id, words = EXCLUDED.words;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_words_put AFTER INSERT OR UPDATE OF path, content ON memories
    FOR EACH ROW EXECUTE FUNCTION memfs_words();
INSERT INTO memory_words SELECT id, store_id,
    setweight(to_tsvector('english'::regconfig, memfs_fold(path)), 'A')
    || to_tsvector('english'::regconfig, memfs_fold(content)) FROM memories;

CREATE TABLE memory_vectors (
    memory_id {text_type} PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
    store_id {text_type} NOT NULL,
    model {text_type} NOT NULL,
    path {text_type} NOT NULL,
    content_sha256 {text_type} NOT NULL,
    vector BYTEA NOT NULL,
    indexed_at {text_type} NOT NULL
);
CREATE INDEX memory_vectors_store ON memory_vectors(store_id);

CREATE TABLE recall_leases (
    store_id {text_type} PRIMARY KEY,
    holder {text_type} NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
"""


PG = _pg('TEXT COLLATE "C"')


_BM25_SQLITE = """
CREATE TABLE memory_words (
    doc INTEGER PRIMARY KEY,
    memory_id TEXT NOT NULL UNIQUE,
    store_id TEXT NOT NULL,
    length INTEGER NOT NULL,
    terms TEXT NOT NULL
);
CREATE INDEX memory_words_store ON memory_words(store_id, length);
CREATE VIRTUAL TABLE memory_words_fts USING fts5(
    terms, content = 'memory_words', content_rowid = 'doc', detail = 'none',
    columnsize = 0, tokenize = 'ascii'
);
CREATE VIRTUAL TABLE memory_words_vocab USING fts5vocab(memory_words_fts, instance);
"""

_BM25_PG = """
CREATE TABLE memory_words (
    doc BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    memory_id TEXT COLLATE "C" NOT NULL UNIQUE,
    store_id TEXT COLLATE "C" NOT NULL,
    length BIGINT NOT NULL
);
CREATE INDEX memory_words_store ON memory_words(store_id, length);
CREATE TABLE memory_words_terms (
    store_id TEXT COLLATE "C" NOT NULL,
    term TEXT COLLATE "C" NOT NULL,
    doc BIGINT NOT NULL,
    in_path BIGINT NOT NULL,
    in_content BIGINT NOT NULL,
    PRIMARY KEY (store_id, term, doc)
);
CREATE INDEX memory_words_terms_doc ON memory_words_terms(doc);
"""


#: ``m018_words_bm25``: the words ranked by BM25 the same on both backends
#: (:func:`memfs.recall.words.bm25`), stemmed in English and French: FTS5's table (its
#: ``porter`` stemmer is English only, its ``bm25()`` counts every store's memories) gives
#: way to ``memory_words`` (each indexed memory's length and terms) and ``memory_words_fts``
#: (their index, :mod:`memfs.recall.wordsindex`), filled from the queue by
#: :func:`memfs.recall.wordsqueue.catch_up`. Every memory is queued: the first search of a
#: store, or the background catch-up, indexes it again.
SQLITE_BM25 = """
DROP TABLE memory_words;
DROP TABLE memory_words_rows;
""" + _BM25_SQLITE + """
INSERT OR IGNORE INTO memory_words_queue (store_id, memory_id) SELECT store_id, id FROM memories;
"""

#: ``m013_words_bm25`` of PostgreSQL: as SQLite's ``m018_words_bm25``, and the words queued
#: by a trigger as SQLite's ``m013_words_queue`` queues them, instead of a ``tsvector`` made
#: in the write's transaction (``ts_rank`` is not BM25, and the ``english`` configuration
#: stems no French). The queue's row is all a write pays.
PG_BM25 = """
DROP TRIGGER memory_words_put ON memories;
DROP FUNCTION memfs_words();
DROP TABLE memory_words;
DROP FUNCTION memfs_fold(text);
""" + _BM25_PG + """
CREATE TABLE memory_words_queue (
    store_id TEXT COLLATE "C" NOT NULL,
    memory_id TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (store_id, memory_id)
);
CREATE FUNCTION memfs_words_queue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO memory_words_queue VALUES (OLD.store_id, OLD.id) ON CONFLICT DO NOTHING;
    ELSE
        INSERT INTO memory_words_queue VALUES (NEW.store_id, NEW.id) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_words_queue_put AFTER INSERT OR UPDATE OF path, content OR DELETE
    ON memories FOR EACH ROW EXECUTE FUNCTION memfs_words_queue();
INSERT INTO memory_words_queue SELECT store_id, id FROM memories;
"""
