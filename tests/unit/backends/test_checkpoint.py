"""memfs.backends.checkpoint: with ``checkpoint_behind``, a commit never copies the WAL into
the database file (a thread does, after the commits); the writer still does past the safety
net; nothing is copied into a file that is no longer the database; close stops the thread."""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator

import pytest

from memfs.backends.checkpoint import SAFETY, WAL_KEPT, WAL_SHRUNK
from memfs.backends.sqlite import SQLiteDatabase
from tests.support import wait_until

PAGES = 40
ROW = "x" * 3000  # about four 1 KiB pages a commit


def _open(path: str, behind: bool, pause: float = 60.0) -> SQLiteDatabase:
    db = SQLiteDatabase(path, synchronous="NORMAL", checkpoint_pages=PAGES,
                        checkpoint_behind=behind)
    if db._checkpointer is not None:
        db._checkpointer.pause = pause
    with db.write() as c:
        c.execute("CREATE TABLE t (x TEXT)")
    if behind:
        db.checkpoint_passive()  # the table in the file: only what comes next is in the WAL
    return db


def _commit(db: SQLiteDatabase, n: int) -> None:
    for _ in range(n):
        with db.write() as c:
            c.execute("INSERT INTO t VALUES (?)", (ROW,))


@pytest.fixture
def path(tmp_path) -> Iterator[str]:
    yield str(tmp_path / "memfs.db")


@pytest.mark.parametrize("behind", [False, True])
def test_a_commit_leaves_the_checkpoint_to_the_thread(path, behind):
    db = _open(path, behind)
    try:
        size = os.path.getsize(path)
        _commit(db, 2 * PAGES // 4)  # about twice the pages between checkpoints
        if not behind:  # SQLite's own: a commit copied the WAL into the file
            assert os.path.getsize(path) > size
            return
        assert os.path.getsize(path) == size, "a commit checkpointed"
        busy, frames, copied = db.checkpoint_passive() or (1, 0, 0)
        assert not busy and frames == copied >= PAGES
        assert os.path.getsize(path) > size
    finally:
        db.close()


def test_the_thread_checkpoints_a_moment_after_the_commits(path):
    db = _open(path, True, pause=0.05)
    checkpointer = db._checkpointer
    assert checkpointer is not None
    try:
        size = os.path.getsize(path)
        _commit(db, PAGES // 4)
        wait_until(lambda: checkpointer.checkpoints >= 1, 10, what="a checkpoint")
        assert os.path.getsize(path) > size
        # Then it sleeps until the next commit.
        done = checkpointer.checkpoints
        time.sleep(0.3)
        assert checkpointer.checkpoints == done
        _commit(db, 1)
        wait_until(lambda: checkpointer.checkpoints > done, 10, what="another checkpoint")
    finally:
        db.close()
    assert checkpointer._thread is not None and not checkpointer._thread.is_alive()


def test_no_thread_until_the_first_commit_and_none_after_close(path):
    SQLiteDatabase(path).close()  # made (its identity written): what a mount opens
    db = SQLiteDatabase(path, synchronous="NORMAL", checkpoint_pages=PAGES,
                        checkpoint_behind=True, create=False)
    checkpointer = db._checkpointer
    assert checkpointer is not None and checkpointer._thread is None
    names = {t.name for t in threading.enumerate()}
    assert "memfs-checkpoint" not in names
    with db.write() as c:
        c.execute("CREATE TABLE t (x TEXT)")
    assert checkpointer._thread is not None and checkpointer._thread.is_alive()
    db.close()
    assert not checkpointer._thread.is_alive()
    assert db.checkpoint_passive() is None


def test_the_writer_still_checkpoints_past_the_safety_net(path):
    db = _open(path, True)  # the thread waits a minute: it never runs here
    try:
        size = os.path.getsize(path)
        _commit(db, (SAFETY + 1) * PAGES // 3)
        assert os.path.getsize(path) > size
    finally:
        db.close()


@pytest.mark.parametrize("how", ["overwritten", "replaced"])
def test_nothing_is_copied_into_a_file_that_is_no_longer_the_database(path, tmp_path, how,
                                                                      error_logs):
    other = str(tmp_path / "other.db")
    o = sqlite3.connect(other)
    o.execute("CREATE TABLE theirs (y)")
    o.execute("INSERT INTO theirs VALUES ('kept')")
    o.commit()
    o.close()
    db = _open(path, True)
    try:
        _commit(db, PAGES // 4)  # pages in our WAL, none in the file yet
        if how == "overwritten":  # cp other.db memfs.db: the same inode, their bytes
            shutil.copyfile(other, path)
        else:
            os.replace(shutil.copyfile(other, str(tmp_path / "new.db")), path)
        with open(path, "rb") as f:
            before = f.read()
        assert db.checkpoint_passive() is None
        with open(path, "rb") as f:
            assert f.read() == before
    finally:
        db.close()  # disowns it (said once, at ERROR), leaving it as it is
    assert [r.levelname for r in error_logs] == ["ERROR"]
    check = sqlite3.connect(path)
    assert check.execute("SELECT y FROM theirs").fetchall() == [("kept",)]
    check.close()


def test_a_failed_checkpoint_is_tried_again(path, monkeypatch, error_logs):
    db = _open(path, True, pause=0.02)
    checkpointer = db._checkpointer
    assert checkpointer is not None
    checkpointer.failures.first = 0.05
    real = db.checkpoint_passive
    calls: list[int] = []

    def failing_once() -> tuple[int, int, int] | None:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("disk on fire")
        return real()

    monkeypatch.setattr(db, "checkpoint_passive", failing_once)
    try:
        _commit(db, 1)
        wait_until(lambda: checkpointer.checkpoints >= 1, 10, what="a checkpoint")
        assert len(calls) >= 2
        assert [r.getMessage() for r in error_logs] == [
            "the WAL checkpointer failed; trying again in 0.05 s"]
    finally:
        db.close()


def test_a_stop_while_the_thread_wakes_ends_it(path):
    """A daemon hung at exit in ``Checkpointer.stop()`` (issue 38, N7: 2 of 80 SIGTERMs): the
    thread's pause ended, ``stop()`` set ``_stopped`` and ``_due``, then the thread cleared
    ``_due`` and went back to waiting for it, for ever, while ``stop()`` joined it. Here the
    thread is held just before its clear until ``stop()`` has set ``_due``: it must still
    end."""
    db = _open(path, True, pause=0.01)
    checkpointer = db._checkpointer
    assert checkpointer is not None
    clearing = threading.Event()  # the thread is about to clear _due
    stop_set_due = threading.Event()  # stop() has set _due (the thread may clear it now)

    class Due(threading.Event):
        def clear(self) -> None:
            clearing.set()
            stop_set_due.wait(10)
            super().clear()

        def set(self) -> None:
            super().set()
            if checkpointer._stopped.is_set():
                stop_set_due.set()

    checkpointer._due = Due()
    stopper = threading.Thread(target=checkpointer.stop)
    try:
        _commit(db, 1)  # starts the thread, which wakes a pause later, to clear _due
        assert clearing.wait(10), "the thread never woke"
        stopper.start()
        stopper.join(10)
        assert not stopper.is_alive(), "stop() waits for a thread that never wakes"
    finally:
        checkpointer._due.set()  # lets a thread stuck on it go (a failure above)
        if stopper.is_alive():
            stopper.join(10)
        db.close()


@pytest.mark.parametrize("grown", [2 * WAL_KEPT, 3 * WAL_SHRUNK], ids=["past-kept", "below-kept"])
def test_the_wal_a_long_reader_grew_shrinks_once_the_reader_is_gone(path, grown):
    """Under a long reader a mount's WAL grew to 63 MB, and stayed so after the checkpoint
    until the daemon exited (issue 38, N4): the reader held every checkpoint back, the
    last one ran while it was still there, and nothing checkpointed or shrank the WAL once it
    was gone. Now a checkpoint held back is tried again until it copied everything, and the
    WAL is then truncated, with no commit needed: however large it grew, also below
    WAL_KEPT, the WAL a writer keeps between checkpoints (the review of issue 45 found a
    WAL grown to less than that kept)."""
    db = _open(path, True, pause=0.02)
    checkpointer = db._checkpointer
    assert checkpointer is not None
    wal = path + "-wal"
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM t").fetchone()  # its snapshot, held
        big = "y" * 200_000
        while os.path.getsize(wal) <= grown:
            with db.write() as c:
                c.execute("INSERT INTO t VALUES (?)", (big,))
        wait_until(lambda: checkpointer.checkpoints >= 1, 10, what="a checkpoint held back")
        reader.execute("COMMIT")  # the reader is gone; no commit comes after it
        wait_until(lambda: os.path.getsize(wal) <= WAL_SHRUNK, 10,
                   what=f"the WAL back to at most {WAL_SHRUNK} bytes")
        check = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:  # what the WAL held is in the database file (or still in the WAL): all there
            assert check.execute("SELECT count(*) FROM t WHERE x = ?", (big,)).fetchone()[0] > 0
        finally:
            check.close()
    finally:
        reader.close()
        db.close()
