"""A mount daemon's indexer, run in a child process (:mod:`memfs.recall.worker`) that exists only
while there is work: the daemon never loads a model, so its memory stays that of a filesystem
(a model and its indexing cost tens of megabytes, which the child gives back by ending).

:class:`IndexerProcess` is what the daemon holds (:func:`memfs.daemons.mount.start_indexer`):

- **Started when needed**: a thread of the daemon looks at the change feed (one cheap query a
  ``poll``); when it moved, and one of the stores has memories without a current vector, it
  starts the child (the command it was given: ``python -m memfs.daemons.indexworker …``),
  which indexes at nice 19 and ends once idle (:data:`memfs.recall.worker.IDLE_SECONDS`). A
  question asked while no child runs starts one too.
- **Questions**: the daemon's :meth:`memfs.store.search.Search.in_store` ranks by meaning through
  :meth:`rank` (the store's provider is this object): the question goes to the child, which
  embeds it and ranks the store's vectors, within the search's timeout (2 s). A child that is
  starting and does not answer in time costs that search its meaning only; one that started
  and does not (too busy: a question of hundreds of accented words takes the model about
  2 s) is not asked again for a while, as any provider that is slower than the timeout.
- **Never fatal** (:mod:`memfs.background`): a child that ends otherwise than by itself (a
  crash, a ``kill``) is said once and started again when there is work, after a backoff (2 s,
  doubling, at most 60 s); a failing look at the feed is said and tried again.
- **It dies with the daemon**: the child gets SIGTERM when the thread that started it ends
  (the parent-death signal, which follows the thread: every child is started by this object's
  own thread, which outlives them), reads the end of its questions when the daemon is gone
  however it went, and is ended and reaped by :meth:`stop` (at unmount: SIGTERM and its stdin
  closed, SIGKILL after ``stop_wait`` seconds).

The child runs as the daemon's user with the daemon's environment (``MEMFS_DB``,
``MEMFS_EMBEDDINGS``): it needs nothing else, and has no descriptor of the daemon's but its two
pipes and the daemon's stderr (its log).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import threading
import time
from typing import TYPE_CHECKING, Any

from ..background import Failures
from .embeddings import Unavailable
from .indexer import has_work
from .scope import Scope
from .search import Meaning

if TYPE_CHECKING:
    from ..store.base import Core
    from .embeddings import Vectors

log = logging.getLogger(__name__)

__all__ = ["IndexerProcess", "ProcessEnded"]


class ProcessEnded(Exception):
    """The indexer process ended otherwise than by itself (said by :class:`Failures`)."""


class _Gone(Exception):
    """The child closed its answers (it ended)."""


def _status(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class _Child:
    """One indexer process and the pipes to it; questions one at a time (:attr:`lock`)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.lock = threading.Lock()
        self.answered = 0
        #: Its answers ended: it is ending (or has), whether reaped yet or not.
        self.gone = False
        self._next = 0
        self._buf = b""
        self._in, self._out = proc.stdin.fileno(), proc.stdout.fileno()
        os.set_blocking(self._in, False)  # a question waits no longer than its search

    def ask(self, question: dict[str, Any], deadline: float) -> dict[str, Any]:
        """The child's answer to ``question``. :raises _Gone: :raises TimeoutError:"""
        with self.lock:
            self._next += 1
            ident = self._next
            self._send(json.dumps({"id": ident, **question}).encode() + b"\n", deadline)
            while True:
                try:
                    line = self._line(deadline)
                except _Gone:
                    self.gone = True
                    raise
                answer = json.loads(line)
                if answer.get("id") == ident:  # else: the late answer of a question given up
                    self.answered += 1
                    return dict(answer)

    def _send(self, line: bytes, deadline: float) -> None:
        left = memoryview(line)
        while left:
            try:
                left = left[os.write(self._in, left):]
            except BlockingIOError:  # its pipe is full: it reads nothing for now
                wait = deadline - time.monotonic()
                if wait <= 0:
                    if len(left) < len(line):
                        self.gone = True  # half a question: it must be ended
                    raise TimeoutError from None
                select.select([], [self._in], [], wait)
            except OSError:  # BrokenPipeError: it ended
                self.gone = True
                raise _Gone from None

    def _line(self, deadline: float) -> bytes:
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self._out], [], [], left)
            if ready:
                chunk = os.read(self._out, 65536)
                if not chunk:
                    raise _Gone
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def end(self, wait: float) -> int:
        """SIGTERM it and close its pipes (once a question under way has its answer or its
        end); SIGKILL after ``wait`` seconds; reaped: its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        with self.lock:  # never closed under a question's select()
            for f in (self.proc.stdin, self.proc.stdout):
                if f is not None:
                    with contextlib.suppress(OSError):
                        f.close()
        try:
            return self.proc.wait(wait)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class IndexerProcess:
    """Keeps ``stores`` indexed by meaning with ``command`` (the indexer process, run with
    ``env``), and ranks the questions of the daemon's searches through it.

    :param model: the model the child's provider embeds with (a vector counts only if it
        names it; the child refuses to run with another).
    """

    def __init__(self, store: Core, model: str, stores: list[str], command: list[str],
                 env: dict[str, str] | None = None, *, poll: float = 2.0,
                 first_look: float = 1.0, stop_wait: float = 3.0,
                 backoff: tuple[float, float] = (2.0, 60.0)) -> None:
        self.store, self.model, self.stores = store, model, list(stores)
        self.command, self.env = command, env
        self.poll, self.first_look, self.stop_wait = poll, first_look, stop_wait
        #: A failing look at the change feed: said once, tried again a ``poll`` later.
        self.failures = Failures("the indexer", log, first=poll, most=poll)
        #: Children that ended otherwise than by themselves, in a row.
        self.crashes = Failures("the indexer process", log, first=backoff[0], most=backoff[1])
        #: Children started.
        self.started = 0
        self._child: _Child | None = None
        self._cond = threading.Condition()
        self._asked = False
        self._not_before = 0.0
        #: Each store's newest change at the last look (None: no look yet).
        self._seen: dict[str, int] | None = None
        #: Looks at the change feed made, for tests.
        self.looks = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memfs-indexer", daemon=True)

    # -- the daemon's side ----------------------------------------------------------------------

    def start(self) -> IndexerProcess:
        self._thread.start()
        return self

    @property
    def pid(self) -> int | None:
        """The running child's pid (None: none runs)."""
        child = self._child
        return child.proc.pid if child is not None and child.proc.poll() is None else None

    def stop(self, timeout: float | None = None) -> None:
        """End the child (if any) and the thread; at unmount."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(self.stop_wait + 2.0 if timeout is None else timeout)

    # -- a provider for the daemon's searches (memfs.recall.embeddings.Ranker) -----------------

    def rank(self, store_id: str, question: str, scope: Scope,
             timeout: float, also: list[str] | tuple[str, ...] = (),
             wait: float = 0.0) -> Meaning:
        """The store's best memories by meaning for ``question``, from the child (started if
        none runs), within ``timeout`` seconds. :raises Unavailable: why not."""
        deadline = time.monotonic() + timeout
        for attempt in range(2):
            child = self._child_for_question(deadline)
            ask = {"store": store_id, "question": question, **scope.to_wire(),
                   "also": list(also), "wait": wait,
                   "timeout": max(0.1, deadline - time.monotonic() - 0.1)}
            try:
                answer = child.ask(ask, deadline)
            except _Gone:
                self._wake.set()  # reaped by the thread; one more try with a new one
                if attempt:
                    raise Unavailable("the indexer process ended") from None
                continue
            except TimeoutError:
                new = not child.answered  # still starting: the next search asks again
                raise Unavailable(f"the indexer process did not answer within {timeout:g} s",
                                  retry_after=0.0 if new else None) from None
            if "error" in answer:
                raise Unavailable(str(answer["error"]))
            return Meaning.from_wire(answer, self.model)
        raise Unavailable("the indexer process ended")  # pragma: no cover - the loop returns

    def passages(self, texts: list[str]) -> Vectors:
        raise Unavailable("this process embeds nothing: its indexer process does")

    def query(self, text: str, timeout: float) -> Vectors:
        raise Unavailable("this process embeds nothing: its indexer process ranks (rank)")

    def _child_for_question(self, deadline: float) -> _Child:
        with self._cond:
            while True:
                child = self._child
                if child is not None and not child.gone and child.proc.poll() is None:
                    return child
                if self._stop.is_set():
                    raise Unavailable("the mount is stopping")
                now = time.monotonic()
                if now < self._not_before:
                    raise Unavailable("the indexer process is being restarted",
                                      retry_after=self._not_before - now)
                if now >= deadline:
                    raise Unavailable("the indexer process did not start in time",
                                      retry_after=0.0)
                self._asked = True
                self._wake.set()
                self._cond.wait(deadline - now)

    # -- the thread -----------------------------------------------------------------------------

    def _run(self) -> None:
        self._wake.wait(self.first_look)
        self._wake.clear()
        try:
            while not self._stop.is_set():
                try:
                    wait = self._round()
                except Exception as e:  # the rule of background services (memfs.background)
                    wait = self.failures.failed(e)
                else:
                    self.failures.recovered()
                self._wake.wait(wait)
                self._wake.clear()
        finally:
            with self._cond:
                child, self._child = self._child, None
                self._cond.notify_all()
            if child is not None:
                child.end(self.stop_wait)

    def _round(self) -> float:
        """One look: reap a child that ended, start one if there is work; the seconds to the
        next look."""
        child = self._child
        if child is not None:
            code = child.proc.poll()
            if code is None and child.gone:  # ending (its answers ended), or unusable
                with contextlib.suppress(subprocess.TimeoutExpired):
                    code = child.proc.wait(1.0)
                if code is None:
                    code = child.end(self.stop_wait)
            if code is None:
                return self.poll
            self._ended(child, code)
        now = time.monotonic()
        if now < self._not_before:
            return self._not_before - now
        # Each store's newest change, not the newest of all: across stores, changes commit
        # out of order on PostgreSQL (Core.feed_marks), one store's in order.
        marks = self.store.feed_marks(self.stores)
        with self._cond:
            asked, self._asked = self._asked, False
        if (asked or (marks != self._seen and self._pending())) and not self._spawn():
            return max(0.0, self._not_before - time.monotonic())  # then a look again
        self._seen = marks
        self.looks += 1
        return self.poll

    def _pending(self) -> bool:
        return any(has_work(self.store, sid, self.model) for sid in self.stores)

    def _spawn(self) -> bool:
        """Start the child (from this object's thread only: the parent-death signal follows
        the thread that started it). False: it could not start, said and backed off."""
        try:
            proc = subprocess.Popen(self.command, bufsize=0, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, env=self.env, close_fds=True)
        except OSError as e:
            self._not_before = time.monotonic() + self.crashes.failed(ProcessEnded(
                f"the indexer process could not start: {e}"))
            return False
        self.started += 1
        log.info("the indexer process started (pid %d)", proc.pid)
        with self._cond:
            self._child = _Child(proc)
            self._cond.notify_all()
        return True

    def _ended(self, child: _Child, code: int) -> None:
        with self._cond:
            self._child = None
            self._cond.notify_all()
        child.end(0.0)
        if code == 0:
            log.info("the indexer process (pid %d) ended, idle", child.proc.pid)
            self.crashes.recovered()
            return
        # Another may be due: look at the stores again once the backoff is over.
        self._seen = None
        self._not_before = time.monotonic() + self.crashes.failed(ProcessEnded(
            f"the indexer process (pid {child.proc.pid}) {_status(code)}"))
