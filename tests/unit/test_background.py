"""The one rule for the failures of background services (memfs.background): said once, backed
off, tried again, never the end of the mount; and the services of a mount under it."""

from __future__ import annotations

import logging
import os
import signal
import time

import pyfuse3
import pytest
import trio

from memfs import errors
from memfs.background import Failures, supervised

log = logging.getLogger("memfs.test.background")

#: Bugs in background rounds are logged at ERROR on purpose here; each test checks what was.
pytestmark = pytest.mark.allow_error_logs


def records(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, bool]]:
    return [(r.levelname, r.getMessage(), bool(r.exc_info)) for r in caplog.records
            if r.name == log.name]


def test_a_streak_is_said_once_a_bug_with_its_traceback_and_the_waits_double(caplog) -> None:
    f = Failures("the thing", log, first=0.5, most=3.0)
    caplog.set_level(logging.DEBUG, logger=log.name)
    assert f.failed(errors.StorageError("the database cannot be reached")) == 0.5
    assert f.failed(errors.StorageError("the database cannot be reached")) == 1.0
    try:
        raise RuntimeError("a bug")
    except RuntimeError as e:
        assert f.failed(e) == 2.0  # a bug after expected failures: still said, once
        assert f.failed(e) == 3.0  # at most `most`
    assert f.failed(errors.Busy("locked")) == 3.0
    f.recovered()
    assert f.count == 0 and f.wait() == 0.0
    got = records(caplog)
    assert [(level, tb) for level, _, tb in got] == [
        ("WARNING", False), ("DEBUG", False), ("ERROR", True), ("DEBUG", True),
        ("DEBUG", False), ("INFO", False)]
    assert got[0][1] == ("the thing waits: the database cannot be reached; "
                         "trying again in 0.5 s")
    assert got[2][1] == "the thing failed; trying again in 2 s"
    assert got[-1][1].startswith("the thing goes on after ") and "(5 failed tries)" in got[-1][1]
    caplog.clear()
    f.recovered()  # no streak: nothing to say
    assert f.failed(RuntimeError("again")) == 0.5  # a new streak: said again, from `first`
    assert records(caplog) == [("ERROR", "the thing failed; trying again in 0.5 s", True)]


async def test_supervised_tries_a_failing_round_again_after_the_backoff(
        autojump_clock, caplog) -> None:
    f = Failures("the service", log, first=0.1, most=0.4)
    rounds: list[float] = []
    paused: list[float] = []

    async def step() -> bool:
        rounds.append(trio.current_time())
        if len(rounds) <= 4:
            raise RuntimeError(f"round {len(rounds)}")
        return len(rounds) < 6

    async def pause(seconds: float) -> None:
        paused.append(seconds)
        await trio.sleep(seconds)

    caplog.set_level(logging.DEBUG, logger=log.name)
    await supervised(f, step, pause)
    assert paused == [0.1, 0.2, 0.4, 0.4] and len(rounds) == 6
    assert [level for level, _, _ in records(caplog)] == [
        "ERROR", "DEBUG", "DEBUG", "DEBUG", "INFO"]


async def test_a_failing_service_is_retried_and_never_stops_the_mount(
        store, tmp_path, caplog) -> None:
    """An event flusher whose writes fail (a bug, then the database) is logged once per kind,
    tried again with a backoff, writes the events once it can, and the task that serves the
    kernel beside it (pyfuse3.main in a daemon) is never cancelled."""
    from memfs.fuse.toolevents import EventSink
    from memfs.fuse.watch import EventFlusher

    sid = store.stores.create("notes").id
    sink = EventSink(store, sid, None, None)
    real_flush = sink.flush
    calls: list[int] = []
    failures = [RuntimeError("a bug in the flush"), errors.StorageError("the disk went away")]

    def flush(*a, **kw):
        calls.append(len(calls))
        if failures:
            raise failures.pop(0)
        return real_flush(*a, **kw)

    sink.flush = flush  # type: ignore[method-assign]
    flusher = EventFlusher(sink, interval=0.01)
    served = trio.Event()

    async def serve_kernel() -> None:
        while sink.pending:  # noqa: ASYNC110 (the flush runs in a worker thread)
            await trio.sleep(0.01)
        served.set()
        flusher.stop()

    caplog.set_level(logging.DEBUG, logger="memfs.fuse.watch")
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(flusher.run)
            await trio.testing.wait_all_tasks_blocked()
            sink.emit([{"type": "agent.custom", "text": "x"}])
            nursery.start_soon(serve_kernel)
    assert served.is_set() and len(calls) == 3
    sink.close()
    rows = store.conn.execute("SELECT COUNT(*) FROM events WHERE store_id = ?", (sid,))
    assert rows.fetchone()[0] == 1
    said = [(r.levelname, r.getMessage()) for r in caplog.records if "flusher" in r.getMessage()]
    name = f"the event flusher of {sid}"
    assert said[0] == ("ERROR", f"{name} failed; trying again in 0.01 s")
    assert said[1] == ("WARNING", f"{name} waits: the disk went away; trying again in 0.02 s")
    assert said[2][0] == "INFO" and said[2][1].startswith(f"{name} goes on after ")
    assert len(said) == 3


async def test_the_runtime_serves_on_while_a_service_fails_and_stops_it_at_the_end(
        store, tmp_path, caplog) -> None:
    """memfs.fuse.runtime.serve with a tree whose change watcher fails two rounds (a bug): the
    failure is said once with its traceback and the next one at DEBUG, the watcher polls again
    and goes on, and the serving loop (pyfuse3.main in a daemon) is never cancelled; once it
    returns, the services stop and what the follower held is released."""
    from contextlib import asynccontextmanager

    from memfs import Actor
    from memfs.fuse.ops import Operations
    from memfs.fuse.runtime import Mounted, serve
    from memfs.fuse.toolevents import EventSink
    from memfs.fuse.watch import ChangeWatcher

    sid = store.stores.create("notes").id
    sink = EventSink(store, sid, None, None)
    ops = Operations(store, sid, actor=Actor.user("user_test"), events=sink)
    ops.load()
    polls: list[int] = []
    released: list[bool] = []

    class Failing(ChangeWatcher):
        async def poll(self) -> int:
            polls.append(len(polls))
            if len(polls) <= 2:
                raise RuntimeError(f"a bug in poll {len(polls)}")
            return await super().poll()

    @asynccontextmanager
    async def follow(o: Operations):
        try:
            yield Failing(o, interval=0.01)
        finally:
            released.append(True)

    served: list[str] = []

    async def main() -> None:  # pyfuse3.main: serves until the mount goes away
        # Two failed polls, then one that reads the feed; no other process commits, so the
        # rounds after it read nothing (SQLite's data_version does not move).
        while len(polls) < 3:  # noqa: ASYNC110 (the watcher runs in the same nursery)
            await trio.sleep(0.01)
        assert ops.mount.on_stale is not None  # the invalidator is still there
        served.append("to the end")

    caplog.set_level(logging.DEBUG, logger="memfs.fuse.watch")
    with trio.fail_after(10):
        await serve([Mounted(ops, follow)], main=main)
    sink.close()
    assert served == ["to the end"] and released == [True] and ops.mount.on_stale is None
    said = [(r.levelname, bool(r.exc_info)) for r in caplog.records
            if r.getMessage().startswith(f"the change watcher of {sid}")]
    assert said == [("ERROR", True), ("DEBUG", True), ("INFO", False)]


async def test_a_stop_signal_ends_serving_even_when_a_request_never_ends(
        store, tmp_path, caplog, monkeypatch) -> None:
    """After SIGTERM the runtime asks pyfuse3 to stop (pyfuse3.terminate), and pyfuse3.main
    returns once the requests in progress are answered. One that never ends (a handler
    waiting for something that will not come) must not keep the daemon, and its mounts, up:
    STOP_GRACE seconds later everything left is cancelled and the unmount follows."""

    from memfs.fuse import runtime

    monkeypatch.setattr(runtime, "STOP_GRACE", 0.2)
    asked: list[bool] = []

    before = signal.getsignal(signal.SIGTERM)

    async def main() -> None:  # a request in progress that never ends
        # Until trio's receiver is there (no event tells): the signal would kill pytest.
        while signal.getsignal(signal.SIGTERM) is before:  # noqa: ASYNC110
            await trio.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)
        await trio.sleep_forever()

    caplog.set_level(logging.INFO, logger="memfs.fuse.runtime")
    with trio.fail_after(5):
        await runtime.serve([], main=main, terminate=lambda: asked.append(True))
    assert asked == [True]
    said = [r.getMessage() for r in caplog.records if r.name == "memfs.fuse.runtime"]
    assert "got SIGTERM, unmounting" in said
    assert any(m.startswith("requests still unanswered 0.2 s after the stop") for m in said)


async def test_a_kernel_invalidation_that_never_returns_does_not_hold_up_a_stop(
        monkeypatch, autojump_clock) -> None:
    """invalidate_inode can wait in the kernel for a request that, once the mount stops, no
    task reads: a cancelled flush_invalidations abandons its thread instead of waiting. The
    invalidation returns only once released (by the test, or a timer so that a failure does
    not hang the suite): still unreleased after the cancel, so it was not waited for."""
    import threading
    from types import SimpleNamespace

    from memfs.fuse import watch

    release = threading.Event()
    monkeypatch.setattr(watch, "invalidate_inodes", lambda inodes: release.wait())
    ops = SimpleNamespace(tree=SimpleNamespace(stale_entries=[], stale_inodes=[5]))
    timer = threading.Timer(60.0, release.set)
    timer.start()
    try:
        with trio.move_on_after(0.2) as scope:  # the autojump clock: no wall time
            await watch.flush_invalidations(ops)  # type: ignore[arg-type]
        abandoned = not release.is_set()
    finally:
        release.set()
        timer.cancel()
    assert scope.cancelled_caught and abandoned


def test_a_stop_signal_while_the_background_service_starts_is_a_clean_stop(
        monkeypatch, caplog) -> None:
    """CI saw it: ``memfs mount --ready-fd`` stopped by SIGTERM right after saying it was
    ready exited 1 ("Aborted!"): the signal came while the daemon's indexer was starting,
    before trio's receiver was there, and its KeyboardInterrupt left ``run`` (the unmount
    ran, the indexer started was never stopped). It is a stop like any other: the service is
    stopped, the mount closed, and ``run`` returns."""
    from memfs.fuse import runtime

    monkeypatch.setattr(runtime, "init_fuse", lambda fs, mountpoint, options: None)
    monkeypatch.setattr(runtime, "reader_after_init", lambda before: None)
    closed: list[bool] = []
    monkeypatch.setattr(pyfuse3, "close", lambda unmount: closed.append(unmount))

    class Service:
        stopped = False

        def stop(self) -> None:
            self.stopped = True

    service = Service()

    def background() -> Service:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # the signal is handled here, as it was in the indexer's start
        return service

    caplog.set_level(logging.INFO, logger="memfs.fuse.runtime")
    before = signal.getsignal(signal.SIGTERM)
    try:
        runtime.run(pyfuse3.Operations(), [], mountpoint="/nowhere", options=set(),
                    what="a test", background=background)
    except KeyboardInterrupt:
        pytest.fail("the stop signal escaped run()")
    assert service.stopped and closed == [True]
    assert signal.getsignal(signal.SIGTERM) is before
    assert "got SIGTERM, unmounting" in [r.getMessage() for r in caplog.records]
