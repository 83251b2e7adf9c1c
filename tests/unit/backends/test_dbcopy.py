"""``memfs db copy`` / ``memfs db migrate`` (memfs.cli.dbadmin, over memfs.backends.copy): whole
databases between backends.

The PostgreSQL cases run on the test session's throwaway cluster (tests/conftest.py): they
skip without PostgreSQL, and FAIL when CI=true.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from click.testing import CliRunner

from memfs.backends import copy as dbcopy
from memfs.cli import cli, dbadmin
from memfs.errors import StorageError
from memfs.models import Actor
from memfs.store import Limits, Store

USER = Actor("user_actor", "user_dbcopy")


def populate(s: Store, memories: int = 12, versions: int = 3) -> None:
    """A store with every table holding rows: versions (a rename, a delete, a redaction),
    pruned and live changes, a session with resources and events, tool events, agents."""
    a = s.stores.create("alpha", description="first", metadata={"k": "v"})
    b = s.stores.create("beta")
    for i in range(memories):
        m = s.memories.create(a.id, f"/dir{i % 3}/m{i}.md", f"v0 of {i} é\x00nul", actor=USER)
        for v in range(1, versions):
            s.memories.update(a.id, m.id, content=f"v{v} of {i} \uffff", actor=USER)
    m = s.memories.create(b.id, "/gone.md", "to delete", actor=USER)
    s.memories.update(b.id, m.id, path="/renamed.md", actor=USER)
    old = s.memories.create(b.id, "/keep.md", "secret", actor=USER)
    s.memories.update(b.id, old.id, content="public", actor=USER)
    s.versions.redact(b.id, old.memory_version_id, actor=USER)
    s.memories.delete(b.id, m.id, actor=USER)
    s.stores.archive(b.id)
    # A pinned memory, which the session below records in its prompt (session_pinned).
    s.memories.create(a.id, "/pinned/me.md", "---\nimportance: high\n---\nI am Ada.", actor=USER)
    s.agents.create(name="agent", model="claude")
    s.agents.create_environment(name="env")
    sess = s.sessions.create([{"type": "memory_store", "memory_store_id": a.id,
                              "access": "read_only", "instructions": "be nice"}],
                            title="t", metadata={"x": "y"})
    s.events.add(sess.id, [{"type": "user.message", "content": [{"type": "text", "text": "hi"}]}
                           for _ in range(5)])
    s.events.add(None, [{"type": "agent.tool_use", "name": "memory"}], store_id=a.id)
    s.sessions.create_token(sess.id)  # (hashed: the copy carries only the hash)
    dream = s.dreams.create([{"type": "memory_store", "memory_store_id": a.id},
                            {"type": "sessions", "session_ids": [sess.id]}], "claude",
                           instructions="merge")
    s.dreams.start(dream.id)
    s.dreams.add_usage(dream.id, {"input_tokens": 7, "output_tokens": 3})
    s.dreams.finish(dream.id, "failed", {"type": "model_error", "message": "no model here"})
    # A session's write undone: a row in reverts (memfs session revert).
    s.memories.write_path(a.id, "/by-session.md", "s", actor=Actor.session(sess.id))
    s.undo.revert(sess.id, actor=USER)
    # A Console sign-out: a row in console_signouts (refused by every server on the database).
    s.keys.revoke_signin("0" * 64, 4_000_000_000)
    # An API key of another workspace, scoped to a store (api_keys).
    s.keys.create("ci", workspace="team-b", role="read_only", expires_in="30d")
    # A Console sign-in with a stored key (console_signins).
    s.keys.record_signin("1" * 64, "apikey_x", 4_000_000_000)
    # A deleted store's workspace (deleted_stores).
    s.stores.delete(s.stores.create("gone").id)
    # A write sent with an Idempotency-Key: its recorded answer (idempotency_keys), here a
    # refusal (nothing else written).
    s.idempotency.write_once("default", "key-1", "0" * 64, None,
                 lambda: s.memories.delete_path(a.id, "/none.md", actor=USER), lambda m: m.id)


def dump(target: str) -> dict[str, Any]:
    """Every table's rows (key order, columns by name) and the counters, read plainly."""
    db = dbadmin.open_raw(target, create=False)
    try:
        with db.snapshot() as c:
            tables = dbcopy.catalog(db, c)
            out: dict[str, Any] = {}
            for t in tables.values():
                with dbcopy._rows(db, c, t) as fetch:
                    rows = []
                    while batch := fetch():
                        rows += batch
                out[t.name] = rows
            out["(counters)"] = dbcopy.read_counters(db, c, tables)
            return out
    finally:
        db.close()


@pytest.fixture
def src(tmp_path) -> str:
    path = str(tmp_path / "src.db")
    with Store(path, limits=Limits()) as s:
        populate(s)
        # Changes pruned: the counter is ahead of the largest seq left, and must be copied.
        s.conn.execute("DELETE FROM changes WHERE seq > (SELECT max(seq) - 3 FROM changes)")
    return path


@pytest.fixture
def pgdb(pg_cluster):
    """New PostgreSQL databases, dropped after the test: ``pgdb()`` one without any schema,
    ``pgdb(migrated=True)`` one at this memfs's schema."""
    made: list[str] = []

    def new(migrated: bool = False) -> str:
        name = pg_cluster.new_database(pg_cluster.template if migrated else None)
        made.append(name)
        return pg_cluster.url(name)

    yield new
    for name in made:
        pg_cluster.drop_database(name)


def test_sqlite_to_sqlite_is_exact(src, tmp_path):
    dst = str(tmp_path / "new" / "dst.db")
    report = dbadmin.copy(src, dst)
    assert report.ok
    names = {t.name for t in report.tables}
    assert {"stores", "memories", "versions", "changes", "sessions", "session_resources",
            "events", "agents", "environments", "(counters)"} <= names
    assert all(t.src_rows > 0 for t in report.tables), report.lines()
    before, after = dump(src), dump(dst)
    assert before == after
    # The pruned feed's counter went over: the next change does not reuse a number.
    top = sqlite3.connect(dst).execute("SELECT max(seq) FROM changes").fetchone()[0]
    assert after["(counters)"]["changes"] == top + 3
    seqs = sqlite3.connect(src).execute("SELECT * FROM sqlite_sequence ORDER BY name").fetchall()
    assert sqlite3.connect(dst).execute(
        "SELECT * FROM sqlite_sequence ORDER BY name").fetchall() == seqs


def test_round_trip_through_postgresql(src, tmp_path, pgdb):
    pg = pgdb()  # a database with no schema: the copy makes it
    r1 = dbadmin.copy(src, pg)
    assert r1.ok
    assert dump(pg) == dump(src)
    # Writes on the PostgreSQL side after the copy: new seq numbers past the copied ones.
    with Store(pg, limits=Limits()) as s:
        a = s.stores.resolve("alpha")
        last = s.feed.last(a.id)
        m = s.memories.create(a.id, "/after.md", "written on postgresql", actor=USER)
        s.memories.update(a.id, m.id, content="second version", actor=USER)
        assert s.feed.last(a.id) > last
        assert len(s.versions.list(a.id, memory_id=m.id).data) == 2
    back = str(tmp_path / "back.db")
    r2 = dbadmin.copy(pg, back)
    assert r2.ok
    assert dump(back) == dump(pg)
    with Store(back, limits=Limits()) as s:
        a = s.stores.resolve("alpha")
        assert s.memories.get_by_path(a.id, "/after.md").content == "second version"
        assert s.memories.count(a.id) == 14  # 12, /pinned/me.md and /after.md
        assert s.stores.get(a.id).name == "alpha"
        seq = s.feed.last(a.id)
        s.memories.create(a.id, "/later.md", "x", actor=USER)
        assert s.feed.last(a.id) == seq + 1


def test_pg_dst_counters_and_memory_count(src, pgdb):
    pg = pgdb(migrated=True)  # an empty database at the schema is fine too
    dbadmin.copy(src, pg)
    d = dump(pg)
    s = dump(src)
    assert d["(counters)"] == s["(counters)"] and d["(counters)"]["changes"] > 0
    assert d["stores"] == s["stores"]  # memory_count not doubled by the trigger


def test_non_empty_destination_is_refused(src, tmp_path):
    dst = str(tmp_path / "dst.db")
    with Store(dst, limits=Limits()) as s:
        s.stores.create("existing")
    with pytest.raises(dbcopy.NotEmpty, match="not empty"):
        dbadmin.copy(src, dst)
    with Store(dst, limits=Limits()) as s:
        assert [x.name for x in s.stores.list().data] == ["existing"]
    with pytest.raises(dbcopy.InvalidRequest, match="same database"):
        dbadmin.copy(src, src)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_failure_midway_leaves_destination_empty(src, tmp_path, monkeypatch, kind, request):
    dst = str(tmp_path / "dst.db") if kind == "sqlite" else request.getfixturevalue("pgdb")()
    real = dbcopy._insert
    calls = []

    def failing(c: Any, sql: str, rows: Any) -> None:
        calls.append(sql)
        if "versions" in sql:
            raise StorageError("injected failure")
        real(c, sql, rows)

    monkeypatch.setattr(dbcopy, "_insert", failing)
    monkeypatch.setattr(dbcopy, "BATCH_ROWS", 5)
    with pytest.raises(StorageError, match="injected"):
        dbadmin.copy(src, dst, batch_rows=5)
    assert len(calls) > 3  # rows went in before the failure
    assert all(not rows for name, rows in dump(dst).items() if name != "(counters)")
    monkeypatch.setattr(dbcopy, "_insert", real)
    assert dbadmin.copy(src, dst).ok  # still empty: a second copy goes in
    assert dump(dst) == dump(src)


def test_a_mismatch_rolls_back(src, tmp_path, monkeypatch):
    dst = str(tmp_path / "dst.db")
    real = dbcopy._for_dst
    monkeypatch.setattr(dbcopy, "_for_dst", lambda v, d: v + "!" if v == "be nice" else real(v, d))
    with pytest.raises(dbcopy.CopyMismatch) as e:
        dbadmin.copy(src, dst)
    bad = [t.name for t in e.value.report.tables if not t.ok]
    assert bad == ["session_resources"]
    assert not dump(dst)["stores"] and not dump(dst)["session_resources"]


def _at_m005(path: str) -> None:
    from memfs.recall import schema as recall_schema
    from memfs.store import schema

    Store(path, limits=Limits()).close()  # then take the last migration back out
    conn = sqlite3.connect(path)
    fts5 = recall_schema.SQLITE[recall_schema.SQLITE.index("CREATE TABLE memory_words_rows"):
                                recall_schema.SQLITE.index("CREATE TRIGGER memory_words_insert")]
    conn.executescript("""
        DROP INDEX versions_operation;
        CREATE INDEX versions_operation ON versions(store_id, operation, created_at, id);
        DELETE FROM _sqlite_migrations WHERE name = 'm023_versions_operation_partial';
        ALTER TABLE session_resources DROP COLUMN pinned_more;
        DELETE FROM _sqlite_migrations WHERE name = 'm022_session_pinned_more';
        DROP INDEX memories_pinned; DROP TABLE session_pinned;
        ALTER TABLE session_resources DROP COLUMN pinned_budget;
        DELETE FROM _sqlite_migrations WHERE name = 'm021_session_pinned';
        ALTER TABLE session_resources DROP COLUMN scope;
        DELETE FROM _sqlite_migrations WHERE name = 'm020_session_resource_scope';
        DROP INDEX memories_expiry; DROP INDEX memories_meta_pending;
        ALTER TABLE memories DROP COLUMN mtype; ALTER TABLE memories DROP COLUMN importance;
        ALTER TABLE memories DROP COLUMN expires_at; ALTER TABLE memories DROP COLUMN pinned;
        ALTER TABLE memories DROP COLUMN meta; ALTER TABLE memories DROP COLUMN meta_rev;
        ALTER TABLE stores DROP COLUMN expiry;
        DELETE FROM _sqlite_migrations WHERE name = 'm019_typed_memories';
        DROP TABLE memory_words_vocab; DROP TABLE memory_words_fts; DROP TABLE memory_words;
        DELETE FROM _sqlite_migrations WHERE name = 'm018_words_bm25';
        DELETE FROM _sqlite_migrations WHERE name = 'm017_vector_passages';
    """ + fts5 + """
        DROP TABLE idempotency_keys;
        DELETE FROM _sqlite_migrations WHERE name = 'm016_idempotency_keys';
        ALTER TABLE sessions DROP COLUMN created_by_key;
        DELETE FROM _sqlite_migrations WHERE name = 'm015_session_creator_keys';
        ALTER TABLE session_tokens DROP COLUMN key_id;
        DELETE FROM _sqlite_migrations WHERE name = 'm014_session_token_keys';
        DROP TRIGGER memory_words_queue_insert; DROP TRIGGER memory_words_queue_update;
        DROP TRIGGER memory_words_queue_delete; DROP TABLE memory_words_queue;
        DELETE FROM _sqlite_migrations WHERE name = 'm013_words_queue';
        DROP TABLE api_keys; DROP TABLE deleted_stores; DROP TABLE console_signins;
        DROP INDEX stores_workspace;
        DROP INDEX sessions_workspace; DROP INDEX dreams_workspace;
        ALTER TABLE stores DROP COLUMN workspace_id; ALTER TABLE sessions DROP COLUMN workspace_id;
        ALTER TABLE agents DROP COLUMN workspace_id;
        ALTER TABLE environments DROP COLUMN workspace_id;
        DELETE FROM _sqlite_migrations WHERE name = 'm012_workspaces_keys';
        DROP INDEX versions_actor; DROP INDEX versions_operation; DROP INDEX stores_name;
        DROP INDEX sessions_launched; DROP INDEX events_session_deleted;
        DROP INDEX versions_memory_time; CREATE INDEX versions_memory ON versions(memory_id, id);
        ALTER TABLE stores DROP COLUMN changes_pruned_seq;
        DELETE FROM _sqlite_migrations WHERE name = 'm006_indexes';
        DROP TABLE dreams; DELETE FROM _sqlite_migrations WHERE name = 'm007_dreams';
        DROP TABLE reverts; DELETE FROM _sqlite_migrations WHERE name = 'm008_reverts';
        DROP TABLE console_signouts;
        DELETE FROM _sqlite_migrations WHERE name = 'm009_console_signouts';
        DROP TABLE session_tokens;
        DELETE FROM _sqlite_migrations WHERE name = 'm010_session_tokens';
        DROP TRIGGER memory_vectors_delete;
        DROP TABLE memory_words; DROP TABLE memory_words_rows; DROP TABLE memory_vectors;
        DROP TABLE recall_leases; DELETE FROM _sqlite_migrations WHERE name = 'm011_recall';
    """)
    conn.close()
    assert schema.migration_names("sqlite")[-1] == "m023_versions_operation_partial"


def test_schema_mismatch_says_migrate_first(src, tmp_path):
    old = str(tmp_path / "old.db")
    _at_m005(old)
    with pytest.raises(dbcopy.SchemaMismatch, match="memfs db migrate"):
        dbadmin.copy(old, str(tmp_path / "x.db"))
    with pytest.raises(dbcopy.SchemaMismatch, match="memfs db migrate"):
        dbadmin.copy(src, old)


def test_migrate_command(tmp_path):
    old = str(tmp_path / "old.db")
    _at_m005(old)
    run = CliRunner().invoke
    r = run(cli, ["--db", old, "db", "migrate", "--check"])
    assert r.exit_code == 1 and "5/23" in r.output and "m006_indexes" in r.output, r.output
    r = run(cli, ["--db", old, "db", "migrate"])
    assert r.exit_code == 0
    assert ("5/23 (m005_session_launcher) -> 23/23 (m023_versions_operation_partial)"
            in r.output), r.output
    r = run(cli, ["--db", old, "db", "migrate", "--check"])
    assert r.exit_code == 0 and "up to date" in r.output


def test_migrate_postgresql(pgdb):
    url = pgdb()
    r = CliRunner().invoke(cli, ["--db", url, "db", "migrate", "--check"])
    assert r.exit_code == 1 and "0/" in r.output, r.output
    r = CliRunner().invoke(cli, ["--db", url, "--json", "db", "migrate"])
    assert r.exit_code == 0, r.output
    assert '"pending": []' in r.output
    r = CliRunner().invoke(cli, ["--db", url, "db", "migrate", "--check"])
    assert r.exit_code == 0 and "up to date" in r.output


def test_cli_copy_prints_the_report(src, tmp_path):
    r = CliRunner().invoke(cli, ["db", "copy", src, str(tmp_path / "d.db")])
    assert r.exit_code == 0, r.output
    assert "versions" in r.output and "rows/s" in r.output and "MISMATCH" not in r.output


@pytest.mark.parametrize("args, message", [
    (["mysql://x/y", "{dst}"], "not a postgresql:// URL"),
    (["{tmp}/missing.db", "{dst}"], "no database at"),
    (["{src}", "postgresql://memfs@127.0.0.1:1/nowhere"], "cannot open the database"),
    (["{src}", "{src}"], "same database"),
    (["{src}", "{full}"], "not empty"),
    (["{old}", "{dst}"], "memfs db migrate"),
])
def test_cli_errors_are_one_line(src, tmp_path, args, message):
    full = str(tmp_path / "full.db")
    with Store(full, limits=Limits()) as s:
        s.stores.create("x")
    old = str(tmp_path / "old.db")
    _at_m005(old)
    fill = {"src": src, "dst": str(tmp_path / "dst.db"), "tmp": str(tmp_path), "full": full,
            "old": old}
    r = CliRunner().invoke(cli, ["db", "copy", *[a.format(**fill) for a in args]])
    assert r.exit_code != 0
    assert "Traceback" not in r.output and isinstance(r.exception, SystemExit), r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memfs: ") and message in lines[0], r.output


def test_values_hash_alike_across_types():
    n = dbcopy._norm
    assert n("é") == n("é".encode()) == n(memoryview("é".encode()))  # UTF-8 bytes are text
    assert n(b"\xff") != n("\xff")
    assert n(None) != n("") and n(None) != n("N")
    assert n(1) == n(True) == n(1.0) and n(1) != n("1")
    rows = [("a", None), ("a\x00", 1)]
    h1, h2 = (dbcopy.hashlib.sha256() for _ in range(2))
    for r in rows:
        dbcopy.hash_row(h1, r)
    dbcopy.hash_row(h2, ("a", None, "a\x00", 1))  # row boundaries count
    assert h1.hexdigest() != h2.hexdigest()
