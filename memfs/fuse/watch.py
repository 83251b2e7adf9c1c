"""The background services of a mount: keeping it current and telling the kernel.

* :class:`ChangeWatcher` (a local mount) applies the store's change feed as soon as the
  database changes (woken by a :class:`~memfs.backends.watch.DbWatch`, or on PostgreSQL by a
  :class:`~memfs.backends.pgwatch.PgWatch`'s notifications, with a slow safety poll; it
  polls every ``interval`` where the database cannot be watched); it also checks that the
  database file is still the one the mount opened, so a database deleted or replaced under the
  mount is noticed at once.
* :class:`ChangeSubscriber` (a remote mount) follows the server's pushed change stream.
* :class:`EventFlusher` writes queued tool events to the database in batches.
* :class:`WordsCatchUp` indexes the words the mount's writes queued, once it is quiet.
* :class:`Invalidator` sends the kernel the entries and inodes to forget, as soon as a handler
  or a service queues them.

Each runs its rounds under :func:`memfs.background.supervised`, the one rule for the failures
of background services: **a background service never brings a mount down**; a failed round is
logged once per streak (a store error as one WARNING line, anything else at ERROR with its
traceback), and tried again after a backoff. :mod:`memfs.fuse.runtime` starts and stops them.
"""

from __future__ import annotations

import logging
import math
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pyfuse3
import trio
from pyfuse3 import FileNameT, InodeT

from .. import errors
from ..background import Failures, lowest_priority, supervised
from ..models import Change
from ..protocol import CommitsAPI, WordsAPI
from .kernel import invalidate_inodes
from .ops import Operations
from .toolevents import EventSink

if TYPE_CHECKING:
    from ..backends.watch import Watch

log = logging.getLogger(__name__)

#: The longest a failing service waits before it tries again (the safety poll's interval).
MOST_BACKOFF = 2.0


class _Stoppable:
    """A service that runs until :meth:`stop`, and pauses without outliving it."""

    def __init__(self) -> None:
        self._stopped = trio.Event()

    def stop(self) -> None:
        self._stopped.set()

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or until :meth:`stop`."""
        with trio.move_on_after(seconds):
            await self._stopped.wait()


class _Periodic(_Stoppable):
    """A background service that calls :meth:`tick` every ``interval`` seconds until
    :meth:`stop` (which ends :meth:`run` at once, without a last tick). A failing tick is
    logged and tried again (:func:`~memfs.background.supervised`, from ``interval`` seconds
    on)."""

    def __init__(self, interval: float, name: str) -> None:
        super().__init__()
        self.interval = interval
        self.failures = Failures(name, log, first=interval, most=MOST_BACKOFF)

    async def run(self) -> None:
        await supervised(self.failures, self._round, self._pause)

    async def _round(self) -> bool:
        await self._sleep()
        if self._stopped.is_set():
            return False
        await self.tick()
        return True

    async def _sleep(self) -> None:
        await self._pause(self.interval)

    async def tick(self) -> None:
        raise NotImplementedError


class ChangeWatcher(_Periodic):
    """Applies the store's change feed to a local mount whenever ``watch`` sees the database
    change, and every :attr:`safety_interval` seconds for what inotify cannot see. Without a
    watch, every ``interval`` seconds. A wake-up by this process's own commit (the store's
    :meth:`~memfs.protocol.CommitsAPI.commits_elsewhere` did not move) reads nothing: the
    tree holds its own changes already; the safety poll moves the tree's feed position past
    them (one query of the store's last change), so that it stays close behind.

    Events that pile up while a poll runs are read at once afterwards and make one more
    poll, not one each: a burst of commits costs a poll or two, never a tight loop. A wake-up
    waits :attr:`settle` before it looks, so that a program writing many files (a commit
    every millisecond) makes one look every few commits, not one each. While the looks find
    only this process's own commits, one after another, that wait doubles up to
    :attr:`most_settle`; it is :attr:`settle` again after a look that finds another
    process's commit, and for a wake-up that ends a quiet moment (the last look a wake-up
    made ended :attr:`most_settle` ago or more): another process's commit is seen within
    :attr:`settle` of a quiet mount, and within :attr:`most_settle` of one busy writing.
    """

    #: Seconds between two polls of a watched database: only for what inotify misses (a
    #: database on a network filesystem written by another machine, a lost event).
    safety_interval = 2.0
    #: After a wake-up whose poll found nothing new, look again after these delays: the WAL
    #: write that woke us comes before the commit is visible to readers (SQLite syncs the
    #: WAL, then publishes the commit in shared memory, which inotify does not see).
    rechecks = (0.003, 0.015, 0.06)
    #: After a wake-up, wait this long before looking: a burst of commits (this mount's own,
    #: one per close while a program writes many files) makes one look, not one each.
    settle = 0.004
    #: The longest a wake-up waits, while the looks find only this process's own commits (each
    #: look runs on the trio thread, between the mount's requests: at 4 ms a program writing
    #: files made one every 5 creates, at 32 ms one every 25).
    most_settle = 0.032

    def __init__(self, ops: Operations, interval: float = 0.15,
                 watch: Watch | None = None) -> None:
        super().__init__(interval, f"the change watcher of {ops.store_id}")
        self.ops = ops
        # PostgreSQL's watch wakes for this store only (inotify's for the database).
        self.watch = watch.narrow(ops.store_id) if watch is not None else None
        self._seen = self.watch.changes if self.watch is not None else 0
        self._waiting: trio.CancelScope | None = None
        self._woke = False
        #: How long the next wake-up waits before it looks, past :attr:`settle` (0: that),
        #: up to :attr:`most_settle`.
        self._settle_now = 0.0
        #: When the last look that a wake-up made ended (trio time).
        self._last_woken_look = -math.inf
        #: This round is the safety poll's (no wake-up, no recheck pending): it reads the feed.
        self._safety = True
        self._pending: list[float] = []
        #: The store's count of other processes' commits when the feed was last read (None:
        #: unknown, read the feed).
        self._elsewhere: int | None = None
        store = ops.store
        self._commits_elsewhere = (store.commits_elsewhere if isinstance(store, CommitsAPI)
                                   else None)
        #: Feed reads skipped because only this process had committed (for tests, budgets).
        self.skipped = 0

    def stop(self) -> None:
        super().stop()
        if self._waiting is not None:
            self._waiting.cancel()

    async def _sleep(self) -> None:
        if self.watch is None:
            return await super()._sleep()
        recheck = bool(self._pending)
        timeout = self._pending.pop(0) if self._pending else self.safety_interval
        seen = self._seen
        with trio.move_on_after(timeout) as self._waiting:
            if not self._stopped.is_set():
                self._seen = await self.watch.wait(seen)
        self._waiting = None
        self._woke = self._seen != seen
        if self._woke and trio.current_time() - self._last_woken_look >= self.most_settle:
            self._settle_now = 0.0  # the first wake-up after a quiet moment: look soon
        if self._woke and self.settle:
            await self._pause(max(self.settle, min(self._settle_now, self.most_settle)))
            self._seen = self.watch.changes
        self._safety = not self._woke and not recheck

    async def tick(self) -> None:
        # The database file first: deleted or replaced, it refuses writes from now on (and
        # says so in the log once). At once when it can (a stat and a read of 4 bytes),
        # in a thread when disowning the database would wait.
        await self.ops.mount.call(self.ops.store.check_file)
        # No other process committed since the feed was last read (SQLite's data_version of
        # the writer did not move): what woke us was this process's own commit, which the tree
        # holds already, so the feed is not read (the rechecks below still look, for another
        # process's commit that was not yet visible). The safety poll moves the tree's feed
        # position past those changes without reading them (Feed.pass_own_changes).
        probe = self._commits_elsewhere
        elsewhere = probe() if probe is not None else None
        own = elsewhere is not None and elsewhere == self._elsewhere
        if not own:
            self._settle_now = 0.0  # another process commits (or it cannot be told): look soon
        elif self._woke:
            # Woken by our own commits only: wait longer before the next look, while they go on.
            self._settle_now = min(self.most_settle, 2 * max(self.settle, self._settle_now))
        if own and not self._safety:
            self.skipped += 1
            found = 0
        elif own and probe is not None and await self.ops.feed.pass_own_changes(
                lambda: probe() == elsewhere):
            self.skipped += 1  # the safety poll: the position moved past our own changes
            found = 0
        else:
            found = await self.poll()
            # Only once the feed was read: after a failed poll the next round reads it again.
            self._elsewhere = elsewhere
        if found:
            self._pending = []
        elif self._woke:
            self._pending = list(self.rechecks)
        if self._woke:
            self._last_woken_look = trio.current_time()

    async def poll(self) -> int:
        return await self.ops.feed.poll_changes()


class EventFlusher(_Periodic):
    """Writes queued tool events to the database in batches: ``interval`` seconds after the
    first event of a batch is queued (the last ones are written by :meth:`EventSink.close`,
    at unmount). With nothing queued it sleeps until something is: an idle mount spends no
    CPU on it."""

    def __init__(self, sink: EventSink, interval: float = 0.25) -> None:
        super().__init__(interval, f"the event flusher of {sink.store_id}")
        self.sink = sink
        self._queued = trio.Event()
        self._token: trio.lowlevel.TrioToken | None = None

    def stop(self) -> None:
        super().stop()
        self._queued.set()

    def _wake(self) -> None:
        # Called by the sink from whichever thread queues an event.
        if self._token is not None:
            self._token.run_sync_soon(self._queued.set)

    async def run(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self.sink.on_queued = self._wake
        try:
            await super().run()
        finally:
            self.sink.on_queued = None

    async def _sleep(self) -> None:
        if not self.sink.pending:
            self._queued = trio.Event()
            if self._stopped.is_set():
                return
            if not self.sink.pending:  # still empty: wait for the first event of a batch
                await self._queued.wait()
        await super()._sleep()

    async def tick(self) -> None:
        if not self.sink.pending:
            return  # idle: not even a thread handoff
        # In a thread: encoding and inserting a batch must not hold up the requests the
        # kernel is waiting for (new events are only appended to the queue meanwhile).
        await trio.to_thread.run_sync(self.sink.flush)


class WordsCatchUp(_Periodic):
    """Indexes the words that the store's writes queued (``words``: the store's search part,
    :meth:`memfs.store.search.Search.catch_up_words`: a write only queues its memory,
    :mod:`memfs.recall.wordsqueue`), once
    the mount has seen no change for ``interval`` seconds: a batch (one short transaction) at
    a time, and no further while changes come, in a thread of its own at the lowest CPU
    priority (the batches run while the mount serves reads: those come first). A search then
    finds little left to index. A mount that sees no change spends nothing on it: it sleeps
    until one (:attr:`memfs.fuse.search.Search.on_change`)."""

    def __init__(self, ops: Operations, words: WordsAPI, interval: float = 0.5) -> None:
        super().__init__(interval, f"the words index catch-up of {ops.store_id}")
        assert ops.search is not None
        self.search = ops.search
        self.store_id = ops.store_id
        self.words = words
        self._changed = trio.Event()
        #: The count of changes seen (:attr:`Search.gen`) when the queue was last emptied.
        self._done = self.search.gen
        #: Batches indexed (for tests).
        self.batches = 0
        self._thread = ThreadPoolExecutor(1, "memfs-words", initializer=lowest_priority)

    def stop(self) -> None:
        super().stop()
        self._changed.set()

    def _wake(self) -> None:
        self._changed.set()

    async def run(self) -> None:
        self.search.on_change = self._wake
        try:
            await super().run()
        finally:
            self.search.on_change = None
            self._thread.shutdown()  # none under way: each batch is awaited

    async def _sleep(self) -> None:
        while not self._stopped.is_set():
            if self.search.gen == self._done:  # nothing new: wait for a change
                self._changed = trio.Event()
                await self._changed.wait()
                continue
            seen = self.search.gen
            await self._pause(self.interval)
            if self.search.gen == seen:
                return  # quiet for a moment

    async def tick(self) -> None:
        seen = self.search.gen
        while not self._stopped.is_set():
            batch = self._thread.submit(self.words.catch_up_words, self.store_id)
            if not await trio.to_thread.run_sync(batch.result):
                self._done = seen
                return
            self.batches += 1
            if self.search.gen != seen:
                return  # changes again: the rest once they pause


class Invalidator(_Stoppable):
    """Tells the kernel to forget what the tree queued, as soon as it is queued."""

    def __init__(self, ops: Operations) -> None:
        super().__init__()
        self.ops = ops
        self._wake = trio.Event()
        self.failures = Failures(f"the kernel cache invalidator of {ops.store_id}", log,
                                 most=MOST_BACKOFF)

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        super().stop()
        self._wake.set()

    async def run(self) -> None:
        await supervised(self.failures, self._round, self._pause)

    async def _round(self) -> bool:
        if self._stopped.is_set():
            return False
        await self._wake.wait()
        self._wake = trio.Event()
        await flush_invalidations(self.ops)
        return True


async def flush_invalidations(ops: Operations) -> None:
    """Tell the kernel to forget the entries and inodes ``ops`` queued (and empty the queues).

    ``invalidate_entry_async`` runs in pyfuse3's notify thread, and ``invalidate_inode`` in a
    worker thread, because both may wait for requests this (single) trio thread has to answer.
    """
    tree = ops.tree
    entries, tree.stale_entries = tree.stale_entries, []
    inodes, tree.stale_inodes = list(dict.fromkeys(tree.stale_inodes)), []
    for parent, name, deleted in entries:
        pyfuse3.invalidate_entry_async(
            InodeT(parent), FileNameT(name.encode("utf-8")), deleted=InodeT(deleted),
            ignore_enoent=True,
        )
    if inodes:
        # Abandoned if cancelled (the mount stops): the kernel may hold it until a request is
        # answered that nobody reads any more.
        await trio.to_thread.run_sync(invalidate_inodes, inodes, abandon_on_cancel=True)


class ChangeSubscriber(_Stoppable):
    """Keeps a remote mount current from the server's change stream (pushed, not polled).

    It follows ``/changes/stream`` from the tree's feed position, applies each change with
    the memory state the server sends along, and has the kernel forget what changed. When the
    stream drops it reconnects from the last position applied, after a short backoff that
    doubles up to :attr:`max_backoff` while reconnecting fails (once a connection delivers a
    frame, the backoff is the shortest again and the next drop is logged as a warning again).
    When the server no longer knows that position (``memfs.reset``) it reloads the whole tree.
    A store that is gone (deleted) empties the mount, which becomes read-only, as a local
    mount does.
    """

    min_backoff = 0.05

    def __init__(self, ops: Operations, client: Any, max_backoff: float = MOST_BACKOFF) -> None:
        """:param client: an :class:`memfs.client.AsyncClient` of the server."""
        super().__init__()
        self.ops = ops
        self.client = client
        self.max_backoff = max_backoff
        self.failures = Failures(f"the change feed of {ops.store_id}", log,
                                 first=self.min_backoff, most=max_backoff)

    async def run(self) -> None:
        await supervised(self.failures, self._round, self._pause)

    async def _round(self) -> bool:
        """Follow the stream until it ends (then reconnect after the shortest wait) or the
        store is gone; False once stopped."""
        if self._stopped.is_set():
            return False
        try:
            await self._follow()
        except errors.NotFound as e:
            log.warning("change feed: %s; the store is gone", e.message)
            await self._store_gone()
            return False
        await self._pause(self.min_backoff)
        return not self._stopped.is_set()

    async def _follow(self) -> None:
        ops = self.ops
        async for event in self.client.stream_changes(ops.store_id, after=ops.seq):
            # The link works (a ping counts): a later drop is news, retried after the least wait.
            self.failures.recovered()
            if event.kind == "change" and event.change is not None:
                if event.change.seq <= ops.seq:
                    continue
                await ops.feed.apply_feed(event.change, event.memory)
            elif event.kind == "reset":
                log.info("change feed: the server lost position %d; reloading the tree",
                         ops.seq)
                tree = await self.client.memories.tree(ops.store_id)
                store = await self.client.stores.get(ops.store_id)
                await ops.feed.reload(tree, event.seq, store.archived_at is not None)

    async def _store_gone(self) -> None:
        try:
            await self.ops.feed.apply_feed(
                Change(self.ops.seq, self.ops.store_id, "store", None, None, None), None)
        except errors.MemfsError as e:
            log.warning("change feed: %s", e.message)
