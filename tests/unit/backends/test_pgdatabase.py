"""The PostgreSQL seam's own pieces (memfs/backends/postgresql.py, memfs/backends/targets.py):
placeholder translation, text escaping, URLs and how an unreachable database is reported."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from memfs.backends import is_url, redact_url
from memfs.cli import cli


def test_placeholders_become_psycopgs_and_literals_stay():
    from memfs.backends.postgresql import translate_sql

    assert translate_sql("SELECT * FROM t WHERE a = ? AND b = ?") == \
        "SELECT * FROM t WHERE a = %s AND b = %s"
    assert translate_sql("x LIKE :p ESCAPE '\\' AND y = :q") == \
        "x LIKE %(p)s ESCAPE '\\' AND y = %(q)s"
    # '?', ':name' and '%' inside a string literal are text; '::' is a cast; '%' doubled
    assert translate_sql("SELECT '?:x%', a::text, 5 % 2 FROM t WHERE c = ?") == \
        "SELECT '?:x%%', a::text, 5 %% 2 FROM t WHERE c = %s"
    assert translate_sql("SELECT 'it''s ?', ?") == "SELECT 'it''s ?', %s"


def test_text_escaping_round_trips():
    from memfs.backends.postgresql import _escape, _unescape

    for s in ["", "plain", "\x00", "\uffff", "\uffff0", "a\x00\uffff1\x00\uffff", "\uffff\uffff"]:
        e = _escape(s)
        assert "\x00" not in e and _unescape(e) == s


def test_urls():
    assert is_url("postgresql://u@h/db") and is_url("postgres://h/db")
    assert not is_url("/tmp/memfs.db") and not is_url("postgresql.db")
    assert redact_url("postgresql://u:secret@h:5432/db?x=1") == "postgresql://u:***@h:5432/db?x=1"
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact_url("/tmp/a:b@c.db") == "/tmp/a:b@c.db"


@pytest.mark.parametrize("url", [
    "postgresql://u:secret@127.0.0.1:1/nope",
    "postgresql://u@%2Fnonexistent%2Fdir:5432/nope",
    "postgresql://u@h:notaport/db",
])
def test_an_unreachable_database_is_one_line_without_the_password(url):
    r = CliRunner().invoke(cli, ["--db", url, "stores", "list"])
    assert r.exit_code != 0
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memfs: cannot open the database"), r.output
    assert "secret" not in r.output and "Traceback" not in r.output


def _terminate_connections(cluster, dbname: str) -> int:
    import psycopg

    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        return len(conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
            "AND pid <> pg_backend_pid()", (dbname,)).fetchall())


def test_connections_lost_between_calls_are_replaced(pg_cluster):
    """A server restart or failover, or an idle timeout, ends pooled connections: the next
    calls take new ones instead of failing (nothing had been sent on the dead ones)."""
    from memfs.store import Limits, Store

    name = pg_cluster.new_database(pg_cluster.template)
    s = Store(pg_cluster.url(name), limits=Limits())
    try:
        sid = s.stores.create("n").id
        for i in range(3):
            assert _terminate_connections(pg_cluster, name) >= 1
            s.memories.create(sid, f"/{i}.md", "x", actor=None)  # a write
            assert _terminate_connections(pg_cluster, name) >= 1
            assert s.stores.get(sid).name == "n"  # one statement
            assert _terminate_connections(pg_cluster, name) >= 1
            assert len(s.memories.list(sid).data) == i + 1  # a read transaction
    finally:
        s.close()
        pg_cluster.drop_database(name)


def test_a_database_gone_is_a_storage_error_and_a_503(pg_cluster, error_logs):
    from starlette.testclient import TestClient

    from memfs.api import create_app
    from memfs.errors import StorageError
    from memfs.store import Limits, Store

    name = pg_cluster.new_database(pg_cluster.template)
    s = Store(pg_cluster.url(name), limits=Limits())
    try:
        sid = s.stores.create("n").id
        pg_cluster.drop_database(name)
        with pytest.raises(StorageError):
            s.stores.get(sid)
        with pytest.raises(StorageError):
            s.memories.create(sid, "/a.md", "x", actor=None)
        with TestClient(create_app(s, ["k"]), headers={"x-api-key": "k"}) as c:
            r = c.get(f"/v1/memory_stores/{sid}")
            assert r.status_code == 503, r.text
            assert r.json()["type"] == "error"
    finally:
        s.close()
    # The app's start looks for dreams left running: one ERROR, with its traceback (where the
    # dream sweeper says a database away in one warning line; reported).
    assert [r.getMessage() for r in error_logs] == ["could not look for dreams left running"]


def test_a_writer_held_up_past_its_patience_is_busy(pg_cluster, monkeypatch):
    """As on SQLite (WRITE_PATIENCE): a write that cannot get the write lock in time fails
    with Busy (HTTP 503, retried by clients) instead of waiting for ever."""
    import psycopg

    from memfs.backends import postgresql as pgdatabase
    from memfs.errors import Busy
    from memfs.store import Limits, Store

    monkeypatch.setattr(pgdatabase, "WRITE_PATIENCE", 0.3)
    name = pg_cluster.new_database(pg_cluster.template)
    s = Store(pg_cluster.url(name), limits=Limits())
    try:
        sid = s.stores.create("n").id
        with psycopg.connect(pg_cluster.url(name)) as other:  # another replica, mid-write
            other.execute("SELECT pg_advisory_xact_lock(%s)", (pgdatabase.WRITE_LOCK_KEY,))
            with pytest.raises(Busy):
                s.memories.create(sid, "/a.md", "x", actor=None)
            assert s.stores.get(sid).name == "n"  # reads go on
        s.memories.create(sid, "/a.md", "x", actor=None)  # and writes once it is done
    finally:
        s.close()
        pg_cluster.drop_database(name)


@pytest.mark.parametrize("ci, outcome", [("true", "failed"), ("", "skipped")])
def test_without_postgresql_the_backend_tests_fail_in_ci_and_skip_elsewhere(tmp_path, ci,
                                                                           outcome):
    """A pytest run in which PostgreSQL is not installed (find_bin finds nothing)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    (tmp_path / "no_pg.py").write_text(
        "import tests.support.pgcluster\ntests.support.pgcluster.find_bin = lambda: None\n")
    (tmp_path / "test_probe.py").write_text(
        "from tests.conftest import backend, pg_cluster  # noqa: F401\n\n"
        "def test_probe(backend):\n    assert backend.name\n")
    env = {**os.environ, "CI": ci, "PYTHONPATH": f"{tmp_path}:{root}"}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no_pg", "-p", "no:cacheprovider", "-q",
         "--rootdir", str(root), "-c", str(root / "pyproject.toml"),
         str(tmp_path / "test_probe.py"), "-k", "postgresql", "-rA"],
        cwd=root, env=env, capture_output=True, text=True, timeout=120,
    )
    out = r.stdout + r.stderr
    if outcome == "failed":  # an error in the fixture: the run fails
        assert r.returncode != 0 and "required in CI: PostgreSQL is not installed" in out, out
    else:
        assert r.returncode == 0 and "1 skipped" in out and "not installed" in out, out


def test_a_role_that_cannot_create_the_schema_is_one_line_without_the_password(pg_cluster):
    name = pg_cluster.new_database()  # empty: the schema is made on first use
    pg_cluster.admin("CREATE ROLE weak LOGIN PASSWORD 'hunter2'")
    try:
        pg_cluster.admin(f'REVOKE CREATE ON SCHEMA public FROM PUBLIC; '
                         f'REVOKE ALL ON DATABASE "{name}" FROM PUBLIC; '
                         f'GRANT CONNECT ON DATABASE "{name}" TO weak')
        url = pg_cluster.url(name).replace("postgres@", "weak:hunter2@")
        r = CliRunner().invoke(cli, ["--db", url, "stores", "create", "x"])
        assert r.exit_code == 8, r.output
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and "permission denied" in lines[0], r.output
        assert "hunter2" not in r.output and "weak:***@" in r.output
    finally:
        pg_cluster.drop_database(name)
        pg_cluster.admin("DROP ROLE weak")


def test_patience_bounds_the_wait_for_the_write_lock(pg_cluster):
    """Store.patience on PostgreSQL: the advisory write lock held by another replica is
    waited for only that long (a lock_timeout for that transaction), then Busy."""
    import time

    import psycopg

    from memfs.backends import postgresql as pgdatabase
    from memfs.errors import Busy
    from memfs.store import Limits, Store

    name = pg_cluster.new_database(pg_cluster.template)
    s = Store(pg_cluster.url(name), limits=Limits())
    try:
        sid = s.stores.create("n").id
        with psycopg.connect(pg_cluster.url(name)) as other:
            other.execute("SELECT pg_advisory_xact_lock(%s)", (pgdatabase.WRITE_LOCK_KEY,))
            t = time.monotonic()
            with s.patience(0.3), pytest.raises(Busy):
                s.memories.create(sid, "/a.md", "x", actor=None)
            assert 0.25 <= time.monotonic() - t < 2.0
        s.memories.create(sid, "/a.md", "x", actor=None)
        with s.patience(0.3):  # the lock_timeout was for that transaction only
            s.memories.create(sid, "/b.md", "x", actor=None)
        assert sorted(m.path for m in s.memories.tree(sid)) == ["/a.md", "/b.md"]
    finally:
        s.close()
        pg_cluster.drop_database(name)


def test_patience_bounds_the_wait_for_a_free_connection(pg_cluster):
    """Store.patience bounded the lock wait but not the wait for a pooled connection: with
    every connection taken (long reads, a burst of writers), a call under patience(0.3) (a
    mount's unlink, the kernel holding the directory) waited POOL_PATIENCE, 30 s. It waits
    at most its patience, then Busy."""
    import threading
    import time

    from memfs.backends import postgresql as pgdatabase
    from memfs.errors import Busy

    name = pg_cluster.new_database(pg_cluster.template)
    db = pgdatabase.PgDatabase(pg_cluster.url(name), max_size=2)
    release = threading.Event()
    taken = threading.Semaphore(0)

    def hold() -> None:
        with db.read() as conn:
            conn.execute("SELECT 1")
            taken.release()
            release.wait(30)

    holders = [threading.Thread(target=hold) for _ in range(2)]
    try:
        for h in holders:
            h.start()
        for _ in holders:
            assert taken.acquire(timeout=10)
        t = time.monotonic()
        with db.patience(0.3), pytest.raises(Busy), db.write() as conn:
            conn.execute("SELECT 1")
        assert time.monotonic() - t < 1.5
    finally:
        release.set()
        for h in holders:
            h.join()
        db.close()
        pg_cluster.drop_database(name)


def test_a_savepoint_held_for_later_is_sent_before_the_next_statement(pg_cluster):
    """PgConnection.later: a SAVEPOINT or RELEASE goes with the next statement (a round trip
    saved, scripts/bench_pg_trips.py counts them), in order, before it: a ROLLBACK TO finds
    its savepoint, a write after a RELEASE is outside it, a statement that fails still fails
    with its own error; one left when the transaction ends is dropped; nothing else may wait."""
    from memfs.backends.postgresql import PgDatabase
    from memfs.errors import StorageError

    name = pg_cluster.new_database()
    db = PgDatabase(pg_cluster.url(name))
    try:
        with db.write() as c:
            c.execute("CREATE TABLE t (v TEXT PRIMARY KEY)")
        with db.write() as c:
            c.later("SAVEPOINT a")
            c.execute("INSERT INTO t VALUES (?)", ("undone",))
            c.execute("ROLLBACK TO a")
            c.later("RELEASE a")
            c.later("SAVEPOINT b")
            c.executemany("INSERT INTO t VALUES (?)", [("kept",), ("too",)])
            c.later("RELEASE b")  # dropped at COMMIT
        assert sorted(r[0] for r in db.all("SELECT v FROM t")) == ["kept", "too"]
        with pytest.raises(StorageError, match="duplicate key"), db.write() as c:
            c.later("SAVEPOINT a")
            c.execute("INSERT INTO t VALUES (?)", ("kept",))
        with pytest.raises(ValueError, match="only a SAVEPOINT or a RELEASE"), \
                db.write() as c:
            c.later("DELETE FROM t")
        assert db.one("SELECT count(*) FROM t")[0] == 2
    finally:
        db.close()
        pg_cluster.drop_database(name)


def test_a_write_sent_ahead_is_sent_at_commit_if_nothing_carried_it(pg_cluster):
    """PgConnection.ahead: a write held for the next statement's round trip when the block
    ends with no next statement is sent with the COMMIT's turn, never dropped while the
    transaction reports success; failing there, the transaction fails."""
    from memfs.backends.postgresql import PgDatabase
    from memfs.errors import StorageError

    name = pg_cluster.new_database()
    db = PgDatabase(pg_cluster.url(name))
    try:
        with db.write() as c:
            c.execute("CREATE TABLE t (v TEXT PRIMARY KEY)")
        with db.write() as c:
            c.ahead("INSERT INTO t VALUES (?) RETURNING v", ("sent",))
        assert [r[0] for r in db.all("SELECT v FROM t")] == ["sent"]
        with pytest.raises(StorageError), db.write() as c:
            c.execute("INSERT INTO t VALUES (?)", ("other",))
            c.ahead("INSERT INTO t VALUES (?) RETURNING v", ("sent",))  # a duplicate
        assert [r[0] for r in db.all("SELECT v FROM t")] == ["sent"]
    finally:
        db.close()
        pg_cluster.drop_database(name)


def test_a_write_whose_transaction_failed_does_not_report_success(pg_cluster):
    """A database error caught inside a write and passed over leaves the transaction in
    error: PostgreSQL answers its COMMIT with a ROLLBACK, not an error. The write raises
    StorageError instead of returning as if it had saved anything."""
    from memfs.backends.postgresql import PgDatabase
    from memfs.errors import StorageError

    name = pg_cluster.new_database()
    db = PgDatabase(pg_cluster.url(name))
    try:
        with db.write() as c:
            c.execute("CREATE TABLE t (x INT)")
        with pytest.raises(StorageError, match="rolled back"), db.write() as c:
            c.execute("INSERT INTO t VALUES (1)")
            with pytest.raises(StorageError):
                c.execute("SELECT 1/0")
        assert db.one("SELECT count(*) FROM t")[0] == 0
        with db.write() as c:  # the connection went back to the pool clean
            c.execute("INSERT INTO t VALUES (2)")
        assert db.one("SELECT count(*) FROM t")[0] == 1
    finally:
        db.close()
        pg_cluster.drop_database(name)


def test_a_deadlock_or_a_serialization_failure_is_busy_not_unreachable():
    """Both mean "run it again": Busy (try again), not "the database cannot be reached"."""
    import psycopg.errors

    from memfs.backends.postgresql import translate
    from memfs.errors import Busy

    for e in [psycopg.errors.DeadlockDetected("deadlock detected"),
              psycopg.errors.SerializationFailure("could not serialize access")]:
        got = translate(e)
        assert isinstance(got, Busy) and str(got) == "the database is busy; try again", got
