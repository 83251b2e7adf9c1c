"""The background services of a mount: keeping it current and telling the kernel.

* :class:`ChangeWatcher` (a local mount) applies the store's change feed as soon as the
  database changes (woken by a :class:`~memfs.backends.watch.DbWatch`, or on PostgreSQL by a
  :class:`~memfs.backends.pgwatch.PgWatch`'s notifications, with a slow safety poll; it
  polls every ``interval`` where the database cannot be watched); it also checks that the
  database file is still the one the mount opened, so a database deleted or replaced under the
  mount is noticed at once.
* :class:`ChangeSubscriber` (a remote mount) follows the server's pushed change stream.
* :class:`EventFlusher` writes queued tool events to the database in batches.
* :class:`Invalidator` sends the kernel the entries and inodes to forget, as soon as a handler
  or a service queues them.

**A background service never brings a mount down**: each round's failure is logged (a store
error as one line, anything else with its traceback) and the service goes on; a mount that
stops seeing changes for a while is better than a mount that is gone.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pyfuse3
import trio
from pyfuse3 import FileNameT, InodeT

from .. import errors
from ..models import Change
from .kernel import invalidate_inodes
from .ops import Operations
from .toolevents import EventSink

if TYPE_CHECKING:
    from ..backends.watch import Watch

log = logging.getLogger(__name__)


class _Periodic:
    """A background service that calls :meth:`tick` every ``interval`` seconds until
    :meth:`stop` (which ends :meth:`run` at once, without a last tick). A failing tick is
    logged and the service goes on."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._stopped = trio.Event()
        self._failing = False

    def stop(self) -> None:
        self._stopped.set()

    async def run(self) -> None:
        while True:
            await self._sleep()
            if self._stopped.is_set():
                return
            try:
                await self.tick()
            except errors.MemfsError as e:
                # One line per failure streak: a database that stays locked or full must not
                # fill the log.
                (log.debug if self._failing else log.warning)(
                    "%s: %s", type(self).__name__, e.message)
                self._failing = True
            except Exception:
                log.exception("%s failed; going on", type(self).__name__)
                self._failing = True
            else:
                self._failing = False

    async def _sleep(self) -> None:
        with trio.move_on_after(self.interval):
            await self._stopped.wait()

    async def tick(self) -> None:
        raise NotImplementedError


class ChangeWatcher(_Periodic):
    """Applies the store's change feed to a local mount whenever ``watch`` sees the database
    change (a commit by any process, this one's included: its own changes are read back
    from the feed without reading the memories again), and every :attr:`safety_interval`
    seconds for what inotify cannot see. Without a watch, every ``interval`` seconds.

    Events that pile up while a poll runs are read at once afterwards and make one more
    poll, not one each: a burst of commits costs a poll or two, never a tight loop.
    """

    #: Seconds between two polls of a watched database: only for what inotify misses (a
    #: database on a network filesystem written by another machine, a lost event).
    safety_interval = 2.0
    #: After a wake-up whose poll found nothing new, look again after these delays: the WAL
    #: write that woke us comes before the commit is visible to readers (SQLite syncs the
    #: WAL, then publishes the commit in shared memory, which inotify does not see).
    rechecks = (0.003, 0.015, 0.06)

    def __init__(self, ops: Operations, interval: float = 0.15,
                 watch: Watch | None = None) -> None:
        super().__init__(interval)
        self.ops = ops
        # PostgreSQL's watch wakes for this store only (inotify's for the database).
        self.watch = watch.narrow(ops.store_id) if watch is not None else None
        self._seen = self.watch.changes if self.watch is not None else 0
        self._waiting: trio.CancelScope | None = None
        self._woke = False
        self._pending: list[float] = []

    def stop(self) -> None:
        super().stop()
        if self._waiting is not None:
            self._waiting.cancel()

    async def _sleep(self) -> None:
        if self.watch is None:
            return await super()._sleep()
        timeout = self._pending.pop(0) if self._pending else self.safety_interval
        seen = self._seen
        with trio.move_on_after(timeout) as self._waiting:
            if not self._stopped.is_set():
                self._seen = await self.watch.wait(seen)
        self._waiting = None
        self._woke = self._seen != seen

    async def tick(self) -> None:
        # The database file first: deleted or replaced, it refuses writes from now on (and
        # says so in the log once).
        await trio.to_thread.run_sync(self.ops.store.check_file)
        found = await self.poll()
        if found:
            self._pending = []
        elif self._woke:
            self._pending = list(self.rechecks)

    async def poll(self) -> int:
        return await self.ops.poll_changes()


class EventFlusher(_Periodic):
    """Writes queued tool events to the database in batches: ``interval`` seconds after the
    first event of a batch is queued (the last ones are written by :meth:`EventSink.close`,
    at unmount). With nothing queued it sleeps until something is: an idle mount spends no
    CPU on it."""

    def __init__(self, sink: EventSink, interval: float = 0.25) -> None:
        super().__init__(interval)
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


class Invalidator:
    """Tells the kernel to forget what the tree queued, as soon as it is queued."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops
        self._wake = trio.Event()
        self._stopped = False

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    async def run(self) -> None:
        while not self._stopped:
            await self._wake.wait()
            self._wake = trio.Event()
            try:
                await flush_invalidations(self.ops)
            except Exception:
                log.exception("invalidating the kernel cache failed; going on")


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
        await trio.to_thread.run_sync(invalidate_inodes, inodes)


class ChangeSubscriber:
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

    def __init__(self, ops: Operations, client: Any, max_backoff: float = 2.0) -> None:
        """:param client: an :class:`memfs.client.AsyncClient` of the server."""
        self.ops = ops
        self.client = client
        self.max_backoff = max_backoff
        self._stopped = trio.Event()
        #: Seconds before the next reconnection, and whether the last drop was logged as a
        #: warning (later drops in a row are logged at debug level).
        self.backoff = self.min_backoff
        self._warned = False

    def stop(self) -> None:
        self._stopped.set()

    async def run(self) -> None:
        while not self._stopped.is_set():
            try:
                await self._follow()
            except errors.NotFound as e:
                log.warning("change feed: %s; the store is gone", e.message)
                await self._store_gone()
                return
            except errors.MemfsError as e:
                # A dropped link, a server restart, a silent stream: reconnect from ops.seq.
                (log.debug if self._warned else log.warning)("change feed: %s", e.message)
                self._warned = True
            except Exception:
                log.exception("change feed failed; reconnecting")
            with trio.move_on_after(self.backoff):
                await self._stopped.wait()
            self.backoff = min(self.backoff * 2, self.max_backoff)

    async def _follow(self) -> None:
        ops = self.ops
        async for event in self.client.stream_changes(ops.store_id, after=ops.seq):
            # The link works (a ping counts): a later drop is news, retried after the least wait.
            self.backoff, self._warned = self.min_backoff, False
            if event.kind == "change" and event.change is not None:
                if event.change.seq <= ops.seq:
                    continue
                await ops.apply_feed(event.change, event.memory)
            elif event.kind == "reset":
                log.info("change feed: the server lost position %d; reloading the tree",
                         ops.seq)
                tree = await self.client.tree(ops.store_id)
                store = await self.client.get_store(ops.store_id)
                await ops.reload(tree, event.seq, store.archived_at is not None)

    async def _store_gone(self) -> None:
        try:
            await self.ops.apply_feed(
                Change(self.ops.seq, self.ops.store_id, "store", None, None, None), None)
        except errors.MemfsError as e:
            log.warning("change feed: %s", e.message)
