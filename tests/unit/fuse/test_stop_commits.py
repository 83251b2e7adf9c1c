"""A close at a mount's stop (its handlers cancelled once a stop signal's grace ran out) is
reported as it ended: a close that did not answer (the kernel then says ECONNABORTED) was
never committed, and one whose commit was made is answered (issue 38, N3)."""

from __future__ import annotations

import os
import sqlite3
import threading

import pytest
import trio
from pyfuse3 import FUSEError

from memfs.errors import NotFound
from tests.support import async_wait_until
from tests.support.fsops import (  # noqa: F401 - _close_sinks: an autouse fixture
    CTX,
    ROOT,
    _close_sinks,
    make_ops,
)


@pytest.fixture
def fs(store, tmp_path):
    return make_ops(store, tmp_path)


async def _open_written(ops, name: bytes, data: bytes) -> int:
    info, _ = await ops.create(ROOT, name, 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    await ops.write(info.fh, 0, data)
    return info.fh


def _in_a_worker(monkeypatch, store, name: str) -> threading.Event:
    """Set once ``store.<name>`` is called in a worker thread: where a commit waits for the
    lock (the mount tries each call in the trio thread first, where it cannot wait)."""
    entered = threading.Event()
    real = getattr(store, name)

    def spy(*args, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            entered.set()
        return real(*args, **kwargs)

    monkeypatch.setattr(store, name, spy)
    return entered


async def _closed(ops, outcome: dict[str, object], name: str, fh: int) -> None:
    """Close ``fh`` (its flush), noting how the close was answered: "answered", an errno, or
    "unanswered" (cancelled: the kernel answers ECONNABORTED at the unmount)."""
    try:
        await ops.flush(fh)
        outcome[name] = "answered"
    except FUSEError as e:
        outcome[name] = e.errno
    except trio.Cancelled:
        outcome[name] = "unanswered"
        raise


def _stored(store, sid: str, path: str) -> bool:
    try:
        store.memories.get_by_path(sid, path)
    except NotFound:
        return False
    return True


async def test_a_close_cancelled_while_its_batch_commits_is_answered(fs, store, db_path,
                                                                     monkeypatch):
    """Two closes made together (one batch, written by the first close's task) wait for
    another process's write lock; the mount's handlers are cancelled, and the lock frees
    just then (the batch's thread, which no cancellation reaches, goes on). The batch
    commits both: the second close, cancelled while it waited for the first's batch, was
    left unanswered (ECONNABORTED) although committed (5 of 6 runs). It must wait for the
    batch and answer with its outcome; a close that is not answered was never committed."""
    ops, sid = fs
    first = await _open_written(ops, b"first.md", b"1")
    second = await _open_written(ops, b"second.md", b"2")
    waiting = _in_a_worker(monkeypatch, store, "batch")
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    outcome: dict[str, object] = {}
    try:
        with trio.CancelScope() as serving:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_closed, ops, outcome, "first", first)
                nursery.start_soon(_closed, ops, outcome, "second", second)
                # Both in one batch, written by the first close's task in a worker thread,
                # waiting for the lock.
                await async_wait_until(waiting.is_set)
                assert not ops.buffers._queued_commits
                serving.cancel()  # the grace ran out...
                other.execute("ROLLBACK")  # ...and the lock frees: the batch goes on
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()
    for name in ("first", "second"):
        stored = _stored(store, sid, f"/{name}.md")
        assert (outcome.get(name) == "answered") == stored, (name, outcome, stored)
    for fh in (first, second):
        await ops.release(fh)


async def test_a_close_cancelled_before_its_commit_is_never_committed(fs, store, db_path,
                                                                     monkeypatch):
    """A close cancelled while its commit still waits in the queue (a batch without it is
    under way) is taken out of it: the next close's batch does not commit it."""
    ops, sid = fs
    first = await _open_written(ops, b"first.md", b"1")
    waiting = _in_a_worker(monkeypatch, store.memories, "write_path")
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    outcome: dict[str, object] = {}
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_closed, ops, outcome, "first", first)
            await async_wait_until(waiting.is_set)  # its commit waits for the lock
            second = await _open_written(ops, b"second.md", b"2")
            with trio.CancelScope() as serving:
                async with trio.open_nursery() as cancelled:
                    cancelled.start_soon(_closed, ops, outcome, "second", second)
                    await async_wait_until(lambda: bool(ops.buffers._queued_commits))
                    serving.cancel()
            other.execute("ROLLBACK")
        # The next close takes what the queue holds.
        third = await _open_written(ops, b"third.md", b"3")
        await _closed(ops, outcome, "third", third)
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()
    assert outcome["first"] == outcome["third"] == "answered", outcome
    assert outcome["second"] == "unanswered"
    assert not _stored(store, sid, "/second.md"), "a close left unanswered was committed"


class _OneAtATime:
    """The store as a server's client shows it to the mount: no group commit (``batch``) and
    no calls tried in the trio thread first (``nowait``): each commit is a call of its own,
    in a worker thread."""

    def __init__(self, store) -> None:
        self._store = store

    def __getattr__(self, name: str):
        if name in ("batch", "nowait", "patience"):
            raise AttributeError(name)
        return getattr(self._store, name)


async def test_commits_made_one_at_a_time_keep_their_outcomes_when_cancelled_between(
        store, tmp_path, monkeypatch):
    """Without group commit, the close that takes the queue makes its commits one after the
    other: cancelled between two, the one made must be answered (it was put back in the queue,
    unanswered although committed), and the next never made. Each commit is held in its
    worker thread until the test lets it go on, so that the cancellation comes exactly
    there."""
    ops, sid = make_ops(store, tmp_path)
    # What the mount's store calls and its commits go to.
    ops.mount.store = ops.buffers.store = _OneAtATime(store)
    fhs = {name: await _open_written(ops, f"{name}.md".encode(), b"x")
           for name in ("first", "second", "third")}
    real = store.memories.write_path
    started: list[str] = []
    go_on = [threading.Event(), threading.Event()]

    def held(store_id, path, *args, **kwargs):
        n = len(started)
        started.append(path)
        if n < len(go_on):
            go_on[n].wait(10)
        return real(store_id, path, *args, **kwargs)

    monkeypatch.setattr(store.memories, "write_path", held)
    outcome: dict[str, object] = {}
    try:
        with trio.CancelScope() as serving:
            async with trio.open_nursery() as nursery:
                for name, fh in fhs.items():
                    nursery.start_soon(_closed, ops, outcome, name, fh)
                # One close's commit under way; the two others queued behind it.
                await async_wait_until(lambda: len(started) == 1
                                       and len(ops.buffers._queued_commits) == 2)
                go_on[0].set()
                # The next close's task took both queued commits; the first is under way.
                await async_wait_until(lambda: len(started) == 2)
                assert not ops.buffers._queued_commits
                serving.cancel()
                go_on[1].set()
    finally:
        for event in go_on:
            event.set()
    stored = {name: _stored(store, sid, f"/{name}.md") for name in fhs}
    assert stored == {name: f"/{name}.md" in started for name in fhs}, (stored, started)
    assert len(started) == 2  # the last commit was never begun
    for name in fhs:
        assert (outcome.get(name) == "answered") == stored[name], (name, outcome, stored)
