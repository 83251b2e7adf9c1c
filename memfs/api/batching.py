"""Group commit: the API's write requests that arrive together are committed as one
transaction (:class:`WriteBatcher`)."""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

from .. import errors
from ..store import Store

#: Most writes one group commit of :class:`WriteBatcher` holds.
BATCH_MAX_CALLS = 64


class _Waiting:
    """One write waiting in a :class:`WriteBatcher`."""

    __slots__ = ("fn", "woken", "lead", "outcome", "done")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.woken = anyio.Event()
        self.lead = False  # woken to commit the next batch, not with its outcome
        self.outcome: Any = None
        self.done = False


class WriteBatcher:
    """Group commit of the API's writes: write requests that arrive while a commit is under way
    wait, and the next commit takes them all (up to :data:`BATCH_MAX_CALLS`) as one
    transaction (:meth:`Store.batch`: one lock, one fsync, one worker thread for the lot,
    each write in a savepoint of its own so a refused one fails alone). Every request is
    answered after the commit that holds its write.

    No task of its own: the first request to find no commit under way commits a batch (its
    own write first) and, when it ends, wakes the oldest waiting request to commit the next.

    On PostgreSQL, one queue per scopes (:meth:`run`): the writes of one store are committed
    together, and the batches of different stores side by side, each holding only its
    store's lock. SQLite has one writer, which would take those batches in turn, a commit (an
    fsync) each: there every write goes in one queue, and each batch holds every write's lock
    (no scopes).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._queues: dict[tuple[str, ...], _Queue] = {}
        #: Do batches of different scopes commit side by side (PostgreSQL)?
        self._scoped = getattr(store, "dialect", None) != "sqlite"

    async def run(self, fn: Callable[[], Any], scopes: tuple[str, ...] = ()) -> Any:
        """Run the write ``fn`` in the next batch of the writes asking for ``scopes``
        (:meth:`memfs.store.Store.batch`; none: a batch serialised with every write); its
        result, or the exception it raised, once committed."""
        scopes = tuple(sorted(set(scopes))) if self._scoped else ()
        q = self._queues.get(scopes)
        if q is None:
            q = self._queues[scopes] = _Queue()
        try:
            return await self._run(q, scopes, fn)
        finally:
            if not q.busy and not q.waiting and self._queues.get(scopes) is q:
                del self._queues[scopes]  # (a store's queue goes when it is idle)

    async def _run(self, q: _Queue, scopes: tuple[str, ...], fn: Callable[[], Any]) -> Any:
        me = _Waiting(fn)
        q.waiting.append(me)
        if q.busy:
            try:
                await me.woken.wait()
            except BaseException:  # cancelled while waiting: its write never ran
                with contextlib.suppress(ValueError):  # unless a batch took it just now
                    q.waiting.remove(me)
                if me.lead:
                    q.next()
                raise
        if not me.done:  # this request commits the next batch (its own write first)
            q.busy = True
            batch: list[_Waiting] = []

            def take() -> list[Callable[[], Any]]:
                # In the worker thread, once the write lock is held (another process's commit
                # may have held it a while): every write queued by then, this one first.
                n = min(len(q.waiting), BATCH_MAX_CALLS)
                batch.extend(q.waiting.popleft() for _ in range(n))
                return [w.fn for w in batch]

            outcomes: list[Any] = []
            try:
                # Shielded: the batch holds other requests' writes, so this request being
                # cancelled (its client gone) must not stop it before or while it commits.
                with anyio.CancelScope(shield=True):
                    outcomes = await anyio.to_thread.run_sync(self.store.batch, take, scopes)
            except Exception as e:  # a bug: every request of the batch answers with it
                if not batch:
                    take()
                outcomes = [e] * len(batch)
                raise
            finally:
                if not batch:  # the batch failed before it took its writes
                    take()
                if len(outcomes) != len(batch):
                    outcomes = [errors.StorageError("the write was not committed")] * len(batch)
                for w, outcome in zip(batch, outcomes, strict=True):
                    w.outcome, w.done = outcome, True
                    if w is not me:
                        w.woken.set()
                q.next()
        if isinstance(me.outcome, BaseException):
            raise me.outcome
        return me.outcome


class _Queue:
    """The writes of one scopes tuple waiting in a :class:`WriteBatcher`, and whether a batch
    of them is being committed."""

    __slots__ = ("waiting", "busy")

    def __init__(self) -> None:
        self.waiting: deque[_Waiting] = deque()
        self.busy = False

    def next(self) -> None:
        """Wake the oldest waiting request to commit the next batch, if any."""
        if self.waiting:
            first = self.waiting[0]
            first.lead = True
            first.woken.set()
        else:
            self.busy = False
