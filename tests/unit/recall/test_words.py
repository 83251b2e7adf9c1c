"""Words done well (issue 39): BM25 with the path weighted above the content, accents folded,
English and French stemmed, the same ranking on SQLite and PostgreSQL, and a question that is
only ever words. Each runs on both backends."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memfs import Actor
from memfs.recall import words as W
from memfs.recall import wordsqueue
from memfs.store import Limits, Store
from tests.support.backend import Backend

API = Actor.api("apikey_test")


@pytest.fixture
def store(backend: Backend) -> Store:
    s = backend.open()
    s.search.use_embeddings("none")
    return s


def _paths(store: Store, sid: str, q: str) -> list[str]:
    return [h.path for h in store.search.in_store(sid, q, channels=("words",), threshold=0).hits]


def test_french_is_found_by_another_form_of_its_words(store: Store) -> None:
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/souvenirs/ete.md",
                        "Les enfants mangeaient des cerises chez leur grand-mère.", actor=API)
    store.memories.create(sid, "/souvenirs/hiver.md", "Nous skiions à Chamonix.", actor=API)
    for q in ("manger", "Qui a mangé des cerises ?", "mangée", "la cerise", "ENFANT"):
        assert _paths(store, sid, q) == ["/souvenirs/ete.md"], q


def test_english_is_found_by_another_form_of_its_words(store: Store) -> None:
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/hobbies.md", "Melanie painted a sunset and went running.",
                        actor=API)
    store.memories.create(sid, "/food.md", "Caroline cooks pasta.", actor=API)
    for q in ("paintings", "does she paint?", "runs", "sunsets", "cooking"):
        assert _paths(store, sid, q) == (["/food.md"] if q == "cooking" else ["/hobbies.md"]), q


def test_accents_and_case_are_folded_both_ways(store: Store) -> None:
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/a.md", "Les élèves écoutaient le maître.", actor=API)
    store.memories.create(sid, "/b.md", "Reunion d'equipe, cafe offert.", actor=API)
    for q, want in (("eleve", "/a.md"), ("ÉCOUTER", "/a.md"), ("maitre", "/a.md"),
                    ("réunion", "/b.md"), ("Équipe", "/b.md"), ("café", "/b.md")):
        assert _paths(store, sid, q) == [want], q


def test_a_word_in_the_path_outranks_the_same_word_once_in_the_content(store: Store) -> None:
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/notes/one.md", "the quokka lives on an island near Perth",
                        actor=API)
    store.memories.create(sid, "/quokka.md", "a small animal that lives on an island by Perth",
                        actor=API)
    store.memories.create(sid, "/other.md", "nothing to see on this island here", actor=API)
    assert _paths(store, sid, "quokka") == ["/quokka.md", "/notes/one.md"]


def test_a_rare_word_outranks_a_common_one_and_more_words_rank_higher(store: Store) -> None:
    sid = store.stores.create("Notes").id
    for i in range(8):
        store.memories.create(sid, f"/day/{i}.md", f"a meeting on day {i}", actor=API)
    store.memories.create(sid, "/budget.md", "the budget meeting", actor=API)
    store.memories.create(sid, "/budget-review.md", "a budget review", actor=API)
    assert _paths(store, sid, "budget meeting")[:2] == ["/budget.md", "/budget-review.md"]


# -- the same on both backends --------------------------------------------------------------

CORPUS = [
    ("/session-01/D1-1.md", "8 May 2023 — Caroline: I went to a LGBTQ support group yesterday "
                            "and it was so powerful."),
    ("/session-01/D1-2.md", "8 May 2023 — Melanie: Wow, that sounds great! I've been painting "
                            "a lot lately, landscapes mostly."),
    ("/session-01/D1-3.md", "8 May 2023 — Caroline: The transgender stories were inspiring; "
                            "I'm thinking about counseling as a career."),
    ("/session-02/D2-1.md", "25 May 2023 — Melanie: We went camping with the kids at the beach, "
                            "roasted marshmallows."),
    ("/session-02/D2-2.md", "25 May 2023 — Caroline: I painted a sunrise last week; painting "
                            "calms me."),
    ("/session-02/D2-3.md", "25 May 2023 — Melanie: Running a charity race for mental health "
                            "next month."),
    ("/notes/fr/vacances.md", "Les enfants mangeaient des glaces à la plage; nous avons "
                              "campé deux nuits."),
    ("/notes/fr/peinture.md", "Caroline peint des paysages; ses peintures sont exposées."),
    ("/painting.md", "A list of the paintings Melanie and Caroline talked about."),
    ("/career/counselor.md", "Caroline wants to work in counseling and mental health."),
]
QUESTIONS = [
    "What did Caroline paint?", "When did Melanie go camping?", "career counseling",
    "mental health race", "peinture", "manger une glace", "support group", "kids beach",
    "paysage", "Who runs?", "LGBTQ", "marshmallow",
]


def _ranking(url: str) -> dict[str, list[tuple[str, float]]]:
    s = Store(url, limits=Limits())
    try:
        s.search.use_embeddings("none")
        sid = s.stores.create("Corpus").id
        for path, content in CORPUS:
            s.memories.create(sid, path, content, actor=API)
        return {q: [(h.path, h.score) for h in s.search.in_store(sid, q, limit=5,
                                                         channels=("words",), threshold=0).hits]
                for q in QUESTIONS}
    finally:
        s.close()


def test_sqlite_and_postgresql_rank_alike(tmp_path: Path, pg_cluster: Any) -> None:
    name = pg_cluster.new_database(pg_cluster.template)
    try:
        on_pg = _ranking(pg_cluster.url(name))
    finally:
        pg_cluster.drop_database(name)
    on_sqlite = _ranking(str(tmp_path / "m.db"))
    assert on_sqlite == on_pg
    assert [p for p, _ in on_sqlite["What did Caroline paint?"][:2]] == [
        "/painting.md", "/session-02/D2-2.md"]  # the path counts 4 times
    assert on_sqlite["peinture"][0][0] == "/notes/fr/peinture.md"
    assert on_sqlite["manger une glace"][0][0] == "/notes/fr/vacances.md"
    assert on_sqlite["career counseling"][0][0] == "/career/counselor.md"


def test_bm25_by_hand() -> None:
    """The formula, on numbers worked by hand: 2 memories, one word in the path of one."""
    q = W.question_terms(["quokka"])
    scores = W.bm25(q, [("a", "quokka", 1, 0, 3), ("b", "quokka", 0, 1, 5)], 4, 16)
    idf = math.log(2.0)  # log(1 + (4 - 2 + 0.5) / (2 + 0.5))
    tf_a, tf_b = 4.0, 1.0
    want_a = idf * tf_a * 2.2 / (tf_a + 1.2 * (0.25 + 0.75 * 3 / 4))
    want_b = idf * tf_b * 2.2 / (tf_b + 1.2 * (0.25 + 0.75 * 5 / 4))
    assert scores == pytest.approx({"a": want_a, "b": want_b})


# -- a question is only words ----------------------------------------------------------------


HOSTILE = [
    ('NEAR(lake boat)', ["/lake.md"]), ('"lake', ["/lake.md"]), ("lake\"'", ["/lake.md"]),
    ("-lake", ["/lake.md"]), ("^lake", ["/lake.md"]), ("boa*", []), ("*", []),
    ("path:secret", ["/plans/x.md"]), ("content:lake", ["/lake.md"]),
    ("(lake OR boat) AND NOT ferry", ["/lake.md"]), ("lake NOT ferry", ["/lake.md"]),
    ("OR", ["/words.md"]), ("AND NOT", ["/words.md"]), ("{path content}: lake", ["/lake.md"]),
    ("'; DROP TABLE memories; --", []), ("x | y & !z <-> w", ["/plans/x.md"]), ("%_\\", []),
    ("lake:* & secret:A", ["/lake.md", "/plans/x.md"]), ("é" * 300, []),
]


@pytest.mark.parametrize(("q", "want"), HOSTILE)
def test_a_question_is_only_ever_words(store: Store, q: str, want: list[str]) -> None:
    sid = store.stores.create("Notes").id
    store.memories.create(sid, "/lake.md", "a boat on the lake, near the ferry", actor=API)
    store.memories.create(sid, "/plans/x.md", "secret plans", actor=API)
    store.memories.create(sid, "/words.md", "this or that, and not the other", actor=API)
    assert sorted(_paths(store, sid, q)) == want
    assert store.memories.get_by_path(sid, "/lake.md") is not None


# -- the index -------------------------------------------------------------------------------


def test_a_very_long_word_is_indexed_cut_and_found(store: Store) -> None:
    sid = store.stores.create("Notes").id
    blob = "Q" * 900
    store.memories.create(sid, "/blob.md", f"key {blob} end", actor=API)
    assert _paths(store, sid, blob) == ["/blob.md"]
    assert _paths(store, sid, "Q" * 64) == ["/blob.md"]  # cut to MAX_TERM characters


def _before_bm25(url: str, pg: bool) -> None:
    """A database at the migration before m018_words_bm25 (pg: m013_words_bm25), holding
    one store and one French memory, indexed the old way."""
    from memfs.store.schema import MIGRATION_SET
    from memfs.store.schema import postgresql as pg_schema
    from memfs.store.schema import sqlite as sqlite_schema

    rows = [
        "INSERT INTO stores (id, name, description, metadata, created_at, updated_at) VALUES "
        "('memstore_old', 'Old', '', '{}', '2026-01-01', '2026-01-01')",
        "INSERT INTO memories (id, store_id, path, content, content_sha256, content_size_bytes, "
        "version_id, created_at, updated_at) VALUES ('mem_old', 'memstore_old', '/vieux.md', "
        "'Ils mangeaient des pommes', 'x', 25, 'memver_old', '2026-01-01', '2026-01-01')"]
    if pg:
        import psycopg

        names = [n for n, _ in pg_schema.MIGRATIONS]
        with psycopg.connect(url) as conn:
            conn.execute("CREATE TABLE _memfs_migrations (migration_set TEXT NOT NULL, name "
                         "TEXT NOT NULL, applied_at TEXT NOT NULL, PRIMARY KEY (migration_set, "
                         "name))")
            for name, sql in pg_schema.MIGRATIONS[:names.index("m013_words_bm25")]:
                conn.execute(sql)  # type: ignore[arg-type]
                conn.execute("INSERT INTO _memfs_migrations VALUES (%s, %s, now()::text)",
                              (MIGRATION_SET, name))
            for sql in rows:
                conn.execute(sql)  # type: ignore[arg-type]
        return
    import sqlite_utils
    from sqlite_utils.migrations import Migrations

    names = [fn.__name__ for fn in sqlite_schema.MIGRATIONS]
    before = Migrations(MIGRATION_SET)
    for fn in sqlite_schema.MIGRATIONS[:names.index("m018_words_bm25")]:
        before()(fn)
    before.apply(sqlite_utils.Database(url))
    conn = sqlite3.connect(url)
    with conn:
        for sql in rows:
            conn.execute(sql)
        conn.execute("DELETE FROM memory_words_queue")  # as if indexed by FTS5 already
        conn.execute("INSERT INTO memory_words_rows (memory_id, store_id) "
                     "VALUES ('mem_old', 'memstore_old')")
        conn.execute("INSERT INTO memory_words (rowid, path, content) SELECT row, '/vieux.md', "
                     "'Ils mangeaient des pommes' FROM memory_words_rows")
    conn.close()


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_the_migration_indexes_every_memory_again(
    dialect: str, tmp_path: Path, request: pytest.FixtureRequest,
) -> None:
    name = None
    if dialect == "postgresql":
        cluster = request.getfixturevalue("pg_cluster")
        name = cluster.new_database()
        url = cluster.url(name)
    else:
        url = str(tmp_path / "old.db")
    try:
        _before_bm25(url, dialect == "postgresql")
        s = Store(url, limits=Limits())  # migrates
        try:
            s.search.use_embeddings("none")
            assert wordsqueue.queued(s.database, "memstore_old") == 1
            assert _paths(s, "memstore_old", "manger") == ["/vieux.md"]
            assert wordsqueue.queued(s.database, "memstore_old") == 0
            s.memories.write_path("memstore_old", "/neuf.md", "elle mange une pomme", actor=API)
            assert _paths(s, "memstore_old", "pommes") == ["/neuf.md", "/vieux.md"]
        finally:
            s.close()
    finally:
        if name is not None:
            request.getfixturevalue("pg_cluster").drop_database(name)


def test_term_matches_gives_each_question_word_the_memories_holding_it(store: Store) -> None:
    """The fusion's coverage and df: keyed by the words as asked, a word held by a memory if
    any of its stems is, only the store's own live memories (after the queue's catch-up)."""
    sid, other = store.stores.create("Notes").id, store.stores.create("Other").id
    a = store.memories.create(sid, "/a.md", "Ils mangeaient des cerises", actor=API).id
    b = store.memories.create(sid, "/cerise/b.md", "painted walls", actor=API).id
    gone = store.memories.create(sid, "/gone.md", "cerises painting", actor=API).id
    store.memories.create(other, "/x.md", "cerises painted mangeaient", actor=API)
    store.memories.delete(sid, gone, actor=API)
    while store.search.catch_up_words():
        pass
    ws = W.words("Qui a mangé des CERISES paintings zzzz")
    assert ws == ["mangé", "cerises", "paintings", "zzzz"]
    assert W.term_matches(store.database, sid, ws) == {
        "mangé": {a}, "cerises": {a, b}, "paintings": {b}, "zzzz": set()}
    assert W.term_matches(store.database, sid, []) == {}
