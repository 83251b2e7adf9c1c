"""memfs.backends.sqlite: the writer never waits under a lock, readers never wait on the
writer, sync is durable whatever other connections hold, a replaced file is noticed, SQLite's
failures become memfs errors."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from memfs import errors
from memfs.backends.sqlite import SQLiteDatabase
from memfs.store import Store


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "memfs.db")


def test_sync_fsyncs_the_wal_even_while_a_reader_holds_a_snapshot(db_path, monkeypatch):
    """Finding 7: a PASSIVE checkpoint synced nothing while another connection read."""
    store = Store(db_path, synchronous="NORMAL")
    sid = store.stores.create("s").id
    reader = sqlite3.connect(db_path)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM memories").fetchone()  # a snapshot is held
    store.memories.write_path(sid, "/a.md", "a", actor=None)
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    store.sync()
    assert os.path.realpath(db_path + "-wal") in synced
    assert os.path.realpath(db_path) in synced
    reader.rollback()
    reader.close()
    store.close()


def test_reads_never_wait_on_a_writer_that_waits(db_path):
    """Finding 1: a writer waiting for another process's lock held the one lock that
    readers needed too."""
    store = Store(db_path)
    sid = store.stores.create("s").id
    store.memories.write_path(sid, "/a.md", "a", actor=None)
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's writer
    done = threading.Event()

    def write() -> None:
        store.memories.write_path(sid, "/b.md", "b", actor=None)
        done.set()

    t = threading.Thread(target=write)
    t.start()
    try:
        time.sleep(0.2)  # the writer gets into SQLite's wait for the lock (nothing tells when)
        assert not done.is_set()  # waiting for the lock
        start = time.monotonic()
        for _ in range(20):
            assert store.memories.get_by_path(sid, "/a.md").content == "a"
            store.memories.tree(sid)
        assert time.monotonic() - start < 0.5
    finally:
        other.execute("ROLLBACK")
        other.close()
        t.join(10)
    assert done.is_set()
    store.close()


@pytest.mark.parametrize("how", ["rm", "mv", "overwrite"])
def test_a_replaced_file_refuses_writes(db_path, tmp_path, how, error_logs):
    store = Store(db_path)
    sid = store.stores.create("s").id
    other = str(tmp_path / "other.db")
    Store(other).close()
    if how == "rm":
        os.unlink(db_path)
    elif how == "mv":
        os.rename(other, db_path)
    else:
        with open(other, "rb") as src, open(db_path, "r+b") as dst:
            dst.write(src.read())
    with pytest.raises(errors.DatabaseGone, match="while in use"):
        store.memories.write_path(sid, "/a.md", "a", actor=None)
    with pytest.raises(errors.DatabaseGone):
        store.check_file()
    store.close()
    # Said once, at ERROR: the process goes on refusing writes, its operator must act.
    assert [r.levelname for r in error_logs] == ["ERROR"]
    assert "while in use" in error_logs[0].getMessage()


@pytest.mark.allow_error_logs  # the database says at ERROR that its file was replaced
def test_a_commit_into_a_file_replaced_meanwhile_is_reported_as_failed(db_path, tmp_path):
    store = Store(db_path)
    store.stores.create("s")
    other = str(tmp_path / "other.db")
    Store(other).close()
    with pytest.raises(errors.DatabaseGone), store.write() as c:
        c.execute("SELECT 1")
        os.rename(other, db_path)  # between the check before and the commit
    store.close()


def test_identity_survives_reopening_and_checkpoints(db_path):
    a = Store(db_path)
    sid = a.stores.create("s").id
    for i in range(50):
        a.memories.write_path(sid, f"/{i}.md", "x" * 1000, actor=None)
    a.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    b = Store(db_path)
    b.memories.write_path(sid, "/b.md", "b", actor=None)
    a.memories.write_path(sid, "/a.md", "a", actor=None)  # no false alarm
    a.close()
    b.close()


def test_sqlite_errors_become_memfs_errors(tmp_path):
    not_db = tmp_path / "not.db"
    not_db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(errors.StorageError):
        SQLiteDatabase(str(not_db))


def test_busy_after_patience(db_path, monkeypatch):
    import memfs.backends.sqlite as database

    monkeypatch.setattr(database, "WRITE_PATIENCE", 0.2)
    store = Store(db_path)
    sid = store.stores.create("s").id
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(errors.Busy):
            store.memories.write_path(sid, "/a.md", "a", actor=None)
    finally:
        other.execute("ROLLBACK")
        other.close()
    store.close()


def test_opening_waits_out_a_lock_taken_just_before_the_identity_read(db_path):
    """CI saw ``database is locked`` from the identity read when six processes opened one new
    file at once: a process turning the new file into WAL (or checkpointing it away as the last
    one to close it) holds a lock that keeps out even readers, for a moment. Hold such a lock
    exactly there: opening waits it out instead of failing."""
    released = threading.Event()

    class LockedOnce(SQLiteDatabase):
        def _take_identity(self) -> None:
            other = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
            other.execute("PRAGMA journal_mode = DELETE")
            other.execute("BEGIN EXCLUSIVE")

            def release() -> None:
                time.sleep(0.2)  # the point: the lock is held for a moment
                other.execute("COMMIT")
                other.execute("PRAGMA journal_mode = WAL")
                other.close()
                released.set()

            threading.Thread(target=release).start()
            super()._take_identity()

    db = LockedOnce(db_path)
    assert released.is_set()
    db.close()


@pytest.mark.parametrize("where", ["file", "memory"])
def test_a_snapshot_shows_one_moment_to_any_thread_while_writers_go_on(db_path, where):
    """An export's view (SQLiteDatabase.snapshot): a read transaction of its own that later
    writes never show in, usable from another thread, closed however the block ends."""
    db = SQLiteDatabase(db_path if where == "file" else ":memory:")
    with db.write() as c:
        c.execute("CREATE TABLE t (x)")
        c.execute("INSERT INTO t VALUES (1)")

    def count(conn: sqlite3.Connection) -> int:
        return int(conn.execute("SELECT count(*) FROM t").fetchone()[0])

    def write() -> None:
        with db.write() as c:
            c.execute("INSERT INTO t VALUES (2)")

    try:
        with db.snapshot() as snap:
            writer = threading.Thread(target=write)
            writer.start()
            writer.join(5)
            assert not writer.is_alive()  # the writer did not wait for the snapshot
            seen: list[int] = []
            reader = threading.Thread(target=lambda: seen.append(count(snap)))
            reader.start()
            reader.join(5)
            assert seen == [1] and count(snap) == 1
            assert db.one("SELECT count(*) FROM t")[0] == 2
            assert len(db._snapshots) == 1
        assert not db._snapshots
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            snap.execute("SELECT 1")
        # an error inside: a memfs error, and the snapshot is closed too
        with pytest.raises(errors.StorageError, match="no such table"), \
                db.snapshot() as snap:
            snap.execute("SELECT * FROM nope")
        assert not db._snapshots
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            snap.execute("SELECT 1")
        # closing the database closes a snapshot still open
        with db.snapshot() as snap:
            db.close()
            with pytest.raises(sqlite3.ProgrammingError, match="closed"):
                snap.execute("SELECT 1")
        with pytest.raises(errors.StorageError, match="closed"), db.snapshot():
            pass
    finally:
        db.close()


def test_a_snapshot_of_a_file_is_read_only_and_holds_back_checkpoints(db_path):
    db = SQLiteDatabase(db_path)
    with db.write() as c:
        c.execute("CREATE TABLE t (x)")
    try:
        with db.snapshot() as snap:
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                snap.execute("INSERT INTO t VALUES (1)")
            with db.write() as c:
                c.execute("INSERT INTO t VALUES (2)")
            assert db.writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 1
        assert db.writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    finally:
        db.close()


def test_a_writer_waiting_on_another_process_polls_often(db_path, monkeypatch):
    """Another process's commit holds SQLite's lock a few ms: the waiting writer sleeps at
    most a few ms between tries (it slept up to 100 ms, idle long after the lock was free)."""
    from memfs.backends import sqlite as database

    store = Store(db_path)
    sid = store.stores.create("s").id
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's writer
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 12:
            other.execute("COMMIT")

    monkeypatch.setattr(database.time, "sleep", sleep)
    store.memories.write_path(sid, "/a.md", "a", actor=None)
    assert len(sleeps) == 12
    assert max(sleeps) <= 0.006
    other.close()
    store.close()


def _paths_seen_by_another_process(db_path: str, store_id: str) -> list[str]:
    code = (f"from memfs.store import Store; s = Store({db_path!r}); "
            f"print(' '.join(sorted(m.path for m in s.memories.tree({store_id!r})))); s.close()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    return out.stdout.split()


def _shared_lock_holder(db_path: str) -> int:
    """The pid holding SQLite's shared lock on the database file, seen from another process
    (0: nobody)."""
    code = (
        "import fcntl, os, struct, sys\n"
        f"fd = os.open({db_path!r}, os.O_RDWR)\n"
        "lk = struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0x40000002, 510, 0)\n"
        "t, _, _, _, pid = struct.unpack('hhqqi', fcntl.fcntl(fd, fcntl.F_GETLK, lk))\n"
        "print(0 if t == fcntl.F_UNLCK else pid)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    return int(out.stdout)


def test_sync_and_a_second_open_keep_sqlite_s_locks(db_path):
    """Closing any descriptor of the database file drops every POSIX lock the process holds
    on it: sync() and a second Store's header check opened and closed the file themselves."""
    store = Store(db_path, synchronous="NORMAL")
    store.stores.create("s")
    assert _shared_lock_holder(db_path) == os.getpid()
    store.sync()
    assert _shared_lock_holder(db_path) == os.getpid()
    Store(db_path).close()
    assert _shared_lock_holder(db_path) == os.getpid()
    store.close()


def test_a_commit_after_sync_is_not_lost_when_another_process_closes(db_path):
    """With its lock dropped, the other process's last close checkpointed and deleted the
    WAL this process still wrote to: the next commit went into an unlinked file, invisible to
    everyone else and lost if this process died."""
    store = Store(db_path, synchronous="NORMAL")
    sid = store.stores.create("s").id
    store.memories.write_path(sid, "/one.md", "1", actor=None)
    store.sync()
    assert _paths_seen_by_another_process(db_path, sid) == ["/one.md"]  # opens, then closes
    store.memories.write_path(sid, "/two.md", "2", actor=None)
    assert _paths_seen_by_another_process(db_path, sid) == ["/one.md", "/two.md"]
    store.close()


# -- a database replaced under a running process (issue 19) -----------------------------------

#: Run by another process: what SQLite shows there of the database at argv[1].
_LOOK = """
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
try:
    check = [r[0] for r in c.execute("PRAGMA integrity_check")]
    rows = sorted(f"{name}:{path}" for name, path in c.execute(
        "SELECT s.name, m.path FROM memories m JOIN stores s ON s.id = m.store_id"))
    print(json.dumps({"check": check, "memories": rows}))
except sqlite3.Error as e:
    print(json.dumps({"error": str(e)}))
finally:
    c.close()
"""


def _seen_by_another_process(path: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", _LOOK, path], capture_output=True, text=True,
                         check=True, timeout=60)
    return dict(json.loads(out.stdout))


def _filled(path: str, name: str, n: int, **kw: Any) -> Store:
    store = Store(path, **kw)
    sid = store.stores.create(name).id
    for i in range(n):
        store.memories.write_path(sid, f"/{name}{i}.md", f"{name} {i} " * 50, actor=None)
    return store


def _fill_in_another_process(path: str, name: str, n: int) -> None:
    code = ("import sys; from memfs.store import Store; "  # _filled, in that process
            "path, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3]); store = Store(path); "
            "sid = store.stores.create(name).id; "
            "[store.memories.write_path(sid, f'/{name}{i}.md', f'{name} {i} ' * 50, actor=None) "
            "for i in range(n)]; store.close()")
    subprocess.run([sys.executable, "-c", code, path, name, str(n)], check=True, timeout=60)


def _replace(how: str, other: str, db_path: str) -> None:
    if how == "mv":  # renamed over: a new inode at the path
        os.replace(other, db_path)
    elif how == "cp":  # copied over in place: the same inode, other bytes
        # By another process: closing a descriptor of the file here would drop SQLite's locks.
        subprocess.run(["cp", other, db_path], check=True, timeout=60)
    else:
        os.unlink(db_path)


@pytest.mark.allow_error_logs  # the database says at ERROR that its file was replaced
@pytest.mark.parametrize("noticed_by", ["check_file", "close"])
@pytest.mark.parametrize("how", ["mv", "cp"])
def test_a_replaced_database_file_stays_intact_and_gets_none_of_our_wal(
        db_path, tmp_path, how, noticed_by):
    """Issue 19: SQLite finds a WAL by its name only. After `mv`, our x.db-wal and x.db-shm
    stayed beside the new file (another process opening it used them, and after we closed,
    the next open applied our WAL to it); after `cp` (the same inode), our close checkpointed
    our WAL into the copy. Both ended in `row 1 missing from index sqlite_autoindex_...`."""
    other = str(tmp_path / "other.db")
    _filled(other, "theirs", 20).close()
    theirs = _seen_by_another_process(other)
    assert theirs["check"] == ["ok"] and len(theirs["memories"]) == 20
    # Ours: committed writes still in the WAL only (no checkpoint yet), as in a mount.
    ours = _filled(db_path, "ours", 30, synchronous="NORMAL", checkpoint_pages=100_000)
    sid = ours.stores.resolve("ours").id
    our_wal = os.stat(db_path + "-wal")
    assert our_wal.st_size > 0
    _replace(how, other, db_path)
    if noticed_by == "check_file":
        with pytest.raises(errors.DatabaseGone):
            ours.check_file()
        # Noticed: while this process still runs, another one sees the replacement whole.
        assert _seen_by_another_process(db_path) == theirs
        # And this one uses the file no more, to write or to read.
        with pytest.raises(errors.DatabaseGone):
            ours.memories.write_path(sid, "/late.md", "late", actor=None)
        with pytest.raises(errors.DatabaseGone):
            ours.memories.tree(sid)
        with pytest.raises(errors.DatabaseGone):
            ours.sync()
    ours.close()  # noticed here at the latest
    wal = db_path + "-wal"
    assert not os.path.exists(wal) or os.stat(wal).st_ino != our_wal.st_ino
    assert _seen_by_another_process(db_path) == theirs
    assert _seen_by_another_process(db_path) == theirs  # and stays so


@pytest.mark.allow_error_logs  # the database says at ERROR that its file was replaced
def test_a_deleted_database_file_leaves_no_wal_for_a_new_one_at_its_path(db_path):
    """A database made later at the same path must not pick up the deleted one's WAL."""
    ours = _filled(db_path, "ours", 30, synchronous="NORMAL", checkpoint_pages=100_000)
    os.unlink(db_path)
    with pytest.raises(errors.DatabaseGone):
        ours.check_file()
    _fill_in_another_process(db_path, "new", 3)  # meanwhile, a new database at the path
    expected = {"check": ["ok"], "memories": [f"new:/new{i}.md" for i in range(3)]}
    assert _seen_by_another_process(db_path) == expected
    ours.close()
    assert _seen_by_another_process(db_path) == expected
    os.unlink(db_path)  # and once more, made after we closed
    _fill_in_another_process(db_path, "new", 3)
    assert _seen_by_another_process(db_path) == expected


@pytest.mark.allow_error_logs  # the database says at ERROR that its file was replaced
def test_a_write_into_the_copy_by_another_process_survives_our_close(db_path, tmp_path):
    """`cp` over the file (the same inode), with nothing of ours left to checkpoint: had we
    kept our connections open, the other process's close could not checkpoint (our shared
    lock) and left its WAL; our last close, finding nothing to copy, then deleted
    `x.db-wal` by name: the other process's commit."""
    other = str(tmp_path / "other.db")
    _filled(other, "theirs", 5).close()
    ours = _filled(db_path, "ours", 10)
    ours.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # nothing left in our WAL
    _replace("cp", other, db_path)
    with pytest.raises(errors.DatabaseGone):
        ours.check_file()
    code = ("import sys; from memfs.store import Store; s = Store(sys.argv[1]); "
            "s.memories.write_path(s.stores.resolve('theirs').id, '/late.md', 'late', actor=None); "
            "s.close()")
    subprocess.run([sys.executable, "-c", code, db_path], check=True, timeout=60)
    ours.close()
    seen = _seen_by_another_process(db_path)
    assert seen["check"] == ["ok"]
    assert "theirs:/late.md" in seen["memories"] and len(seen["memories"]) == 6

def test_patience_bounds_every_wait_for_the_write_lock(db_path):
    """Store.patience: another process's write lock, or this process's writer busy in another
    thread, is waited for only that long; then Busy, and nothing was written."""
    store = Store(db_path)
    sid = store.stores.create("s").id
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        t = time.monotonic()
        with store.patience(0.2), pytest.raises(errors.Busy):
            store.memories.write_path(sid, "/a.md", "a", actor=None)
        assert 0.2 <= time.monotonic() - t < 1.0
    finally:
        other.execute("ROLLBACK")
        other.close()
    held, release = threading.Event(), threading.Event()

    def hold_our_writer() -> None:
        with store.database.write():
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold_our_writer)
    holder.start()
    try:
        assert held.wait(10)
        t = time.monotonic()
        with store.patience(0.2), pytest.raises(errors.Busy):
            store.memories.write_path(sid, "/a.md", "a", actor=None)
        assert 0.2 <= time.monotonic() - t < 1.0
    finally:
        release.set()
        holder.join()
    assert store.memories.tree(sid) == []
    store.memories.write_path(sid, "/a.md", "a",
                              actor=None)  # without patience, and unlocked: saved
    store.close()


@pytest.mark.allow_error_logs  # the database says at ERROR that its file was replaced
@pytest.mark.parametrize("how", ["moved away", "replaced"])
def test_a_database_moved_away_keeps_every_commit(db_path, tmp_path, how):
    """`mv x.db elsewhere.db` under a running mount: the file we have open is still our
    database, at another name, but its WAL stays at `x.db-wal`. Disowning it emptied that WAL:
    every commit not yet checkpointed was lost from the moved file. Ours is checkpointed into
    our own file (never into one at the path) before the WAL is emptied."""
    ours = _filled(db_path, "ours", 30, synchronous="NORMAL", checkpoint_pages=100_000)
    assert os.stat(db_path + "-wal").st_size > 0  # the commits are in the WAL only
    moved = str(tmp_path / "elsewhere.db")
    os.rename(db_path, moved)
    if how == "replaced":
        other = str(tmp_path / "other.db")
        _filled(other, "theirs", 5).close()
        theirs = _seen_by_another_process(other)
        os.rename(other, db_path)
    with pytest.raises(errors.DatabaseGone):
        ours.check_file()
    ours.close()
    seen = _seen_by_another_process(moved)
    assert seen["check"] == ["ok"]
    assert seen["memories"] == sorted(f"ours:/ours{i}.md" for i in range(30))
    if how == "replaced":
        assert _seen_by_another_process(db_path) == theirs


def test_a_file_that_cannot_be_looked_at_is_not_a_deleted_one(db_path, monkeypatch):
    """A stat that fails for another reason than ENOENT (EIO, EACCES on a directory) says
    nothing about the database: it was taken for "was deleted" and the database disowned for
    good, its WAL emptied. It is a StorageError for this call, and the next one works."""
    import errno as errno_

    import memfs.backends.sqlite as dbmod

    store = _filled(db_path, "ours", 3, synchronous="NORMAL", checkpoint_pages=100_000)
    sid = store.stores.resolve("ours").id
    real_stat = os.stat

    def failing_stat(path, *a, **kw):
        if os.fspath(path) == db_path:
            raise OSError(errno_.EIO, "Input/output error", path)
        return real_stat(path, *a, **kw)

    monkeypatch.setattr(dbmod.os, "stat", failing_stat)
    with pytest.raises(errors.StorageError) as caught:
        store.check_file()
    assert not isinstance(caught.value, errors.DatabaseGone)
    monkeypatch.setattr(dbmod.os, "stat", real_stat)
    store.memories.write_path(sid, "/later.md", "later", actor=None)
    store.close()
    assert "ours:/later.md" in _seen_by_another_process(db_path)["memories"]


def test_a_read_under_way_in_another_thread_when_the_database_closes_finishes(db_path):
    """A background thread (a dream sweeper, an indexer) reading while another closes the
    database: close() never closes a connection another thread is using (SQLite would then
    run on a freed connection: a crash of the whole process, seen in CI); the reader's
    connection is closed by its own thread once its read is done."""
    db = SQLiteDatabase(db_path)
    inside, go_on = threading.Event(), threading.Event()
    outcome: list[Any] = []

    def held(conn: sqlite3.Connection) -> Any:
        inside.set()
        go_on.wait(5)
        return conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]

    def read() -> None:
        try:
            outcome.append(db.run(held))
        except Exception as e:
            outcome.append(e)

    t = threading.Thread(target=read)
    t.start()
    assert inside.wait(5)
    db.close()  # while the other thread is inside its read
    go_on.set()
    t.join(5)
    assert len(outcome) == 1 and isinstance(outcome[0], int), outcome
    with pytest.raises(errors.StorageError):  # and after its read, the database is closed
        db.run(held)
