"""The dreams a process runs (``memfs serve``, or ``memfs dream`` on a local database): a
thread each, and a sweep that fails the dreams whose runner died; the API app's lifespan."""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from ..errors import MemfsError
from ..store import Store
from .runner import DreamRun, identity

log = logging.getLogger("memfs.dreams")  # the dreams' one logger, whichever module logs

#: After how long without a mark of life (``heartbeat_at``) a runner counts as dead.
STALE_SECONDS = 60.0
#: How often a process running dreams looks for dreams whose runner died.
SWEEP_SECONDS = 15.0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Dreamer:
    """The dreams a process runs: a thread each, started by :meth:`start`, stopped by
    :meth:`cancel` (this process) or a cancel in the database (any process)."""

    def __init__(self, store: Store, *, client_factory: Callable[[], Any] | None = None) -> None:
        self.store = store
        self.client_factory = client_factory
        self.runs: dict[str, DreamRun] = {}
        self.threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._sweeper: threading.Thread | None = None
        self._closed = threading.Event()

    def start(self, dream_id: str) -> None:
        run = DreamRun(self.store, dream_id, client_factory=self.client_factory)
        thread = threading.Thread(target=self._run, args=(run,), name=f"dream-{dream_id}",
                                  daemon=True)
        with self._lock:
            self.runs[dream_id] = run
            self.threads[dream_id] = thread
        self.watch()
        thread.start()

    def watch(self) -> None:
        """Look for dreams whose runner died every :data:`SWEEP_SECONDS` from now on."""
        with self._lock:
            if self._sweeper is None:
                self._sweeper = threading.Thread(target=self._sweep, name="dream-sweeper",
                                                 daemon=True)
                self._sweeper.start()

    def startup(self) -> None:
        """A process starting to serve: fail the dreams whose runner died, and watch the
        others if any runs elsewhere."""
        self.recover()
        if self.store.dreams.live():
            self.watch()

    def _run(self, run: DreamRun) -> None:
        try:
            run.run()
        except Exception:  # the database failed even to record the failure
            log.exception("dream %s could not be recorded", run.dream_id)
        finally:
            with self._lock:
                self.runs.pop(run.dream_id, None)
                self.threads.pop(run.dream_id, None)

    def cancel(self, dream_id: str) -> None:
        """Stop the dream's run in this process, if it runs here (the store records the
        cancel: :meth:`Store.dreams.cancel`)."""
        with self._lock:
            run = self.runs.get(dream_id)
        if run is not None:
            run.stop.set()

    def wait(self, dream_id: str, timeout: float | None = None) -> None:
        with self._lock:
            thread = self.threads.get(dream_id)
        if thread is not None:
            thread.join(timeout)

    def recover(self) -> list[str]:
        """Fail the dreams whose runner is gone: a dead process on this host, or a runner
        silent for :data:`STALE_SECONDS`. Returns their ids."""
        me = identity()
        failed = []
        stale = {d for d, _ in self.store.dreams.stale(older_than=STALE_SECONDS)}
        for dream_id, runner in self.store.dreams.live():
            with self._lock:
                if dream_id in self.runs:
                    continue
            reason = None
            if (runner and runner.get("host") == me["host"]
                    and isinstance(runner.get("pid"), int) and not _pid_alive(runner["pid"])):
                reason = (f"the memfs process running this dream (pid {runner['pid']}) stopped "
                          "before it finished")
            elif dream_id in stale:
                reason = (f"the process running this dream has not been heard from for "
                          f"{STALE_SECONDS:.0f} s")
            if reason is not None:
                # No usage recorded: the model never answered, the output is a bare copy.
                unused = not any(self.store.dreams.get(dream_id).usage.values())
                self.store.dreams.finish(dream_id, "failed",
                                        {"type": "internal_error", "message": reason},
                                        discard_output=unused)
                log.warning("dream %s failed: %s", dream_id, reason)
                failed.append(dream_id)
        return failed

    def _sweep(self) -> None:
        # Until close(), or until the store is closed without it (nothing left to sweep).
        failing = False
        while not self._closed.wait(SWEEP_SECONDS) and not self.store.closed:
            try:
                self.recover()
            except Exception as e:
                if self.store.closed:  # closed while the sweep read it: nothing to sweep
                    return
                if isinstance(e, MemfsError):
                    # The database refuses (replaced under us, unreachable): one line per
                    # streak, not a traceback every SWEEP_SECONDS.
                    if not failing:
                        log.warning("the sweep for dreams whose runner died failed: %s",
                                    e.message)
                else:
                    log.exception("the sweep for dreams whose runner died failed")
                failing = True
            else:
                failing = False

    def close(self, timeout: float = 5.0) -> None:
        """Stop every dream this process runs: each fails (the process is stopping)."""
        self._closed.set()
        with self._lock:
            runs = list(self.runs.values())
            threads = list(self.threads.values())
        for run in runs:
            run.stop_error = {"type": "internal_error",
                              "message": "the memfs server stopped while the dream ran"}
            run.stop.set()
        for thread in threads:
            thread.join(timeout)


_DREAMERS: weakref.WeakKeyDictionary[Store, Dreamer] = weakref.WeakKeyDictionary()
_DREAMERS_LOCK = threading.Lock()


def dreamer_for(store: Store) -> Dreamer:
    """The :class:`Dreamer` of ``store`` in this process (one per Store object)."""
    with _DREAMERS_LOCK:
        d = _DREAMERS.get(store)
        if d is None:
            d = _DREAMERS[store] = Dreamer(store)
        return d


def close_dreamer(store: Store) -> None:
    """Stop the dreams ``store``'s process runs, if it runs any (a server stopping)."""
    with _DREAMERS_LOCK:
        d = _DREAMERS.pop(store, None)
    if d is not None:
        d.close()


@asynccontextmanager
async def lifespan(store: Store, app: Any) -> AsyncIterator[None]:
    """The API app's lifespan (memfs.api.create_app): a server starting fails the dreams left
    running by a dead one, a server stopping fails the dreams it runs: none stays
    ``running``."""
    import anyio.to_thread

    from .. import errors

    try:
        await anyio.to_thread.run_sync(dreamer_for(store).startup)
    except errors.MemfsError:
        log.exception("could not look for dreams left running")
    try:
        yield
    finally:
        await anyio.to_thread.run_sync(close_dreamer, store)
