"""Background services, and the one rule for their failures.

A mount daemon runs services beside the kernel's requests (:mod:`memfs.fuse.watch`: the
change watcher or subscriber, the event flusher, the invalidator, started by
:mod:`memfs.fuse.runtime`), a local mount runs an indexer process
(:mod:`memfs.recall.supervisor`: a thread that starts it, restarted after a crash) and a server
an indexer thread (:mod:`memfs.recall.indexer`). The rule, the same for each of them:

* **A background task never brings a mount (or a server) down.** A round that fails is
  logged and tried again; only the service's ``stop()`` ends it. A mount that stops seeing
  changes for a while is better than a mount that is gone, and nothing is lost by waiting:
  every write is committed in one transaction before the request that made it returns (a
  daemon killed mid-write leaves the database consistent), and what a service has not done
  yet (queued tool events, kernel invalidations, vectors) it does once it can.
* **Each failure is said once.** The first failure of a streak (failures in a row) is logged:
  a :class:`~memfs.errors.MemfsError` (the database locked, away or replaced, a server that
  cannot be reached: expected, nothing to debug) as one WARNING line, anything else (a bug)
  at ERROR with its traceback. The streak's later failures go to DEBUG (a bug after expected
  failures is still logged at ERROR, once); when a round succeeds again, one INFO line says
  so.
* **Threads of their own run at the lowest CPU priority** (:func:`lowest_priority`): the
  indexer's, and the words index's catch-up (:mod:`memfs.recall.wordsqueue`).
* **Back off, then retry.** The next round waits ``first`` seconds after the first failure of
  a streak, twice as long after each further one, at most ``most`` seconds; after a success
  the next failure waits ``first`` again.

:class:`Failures` keeps a service's streak and logs by the rule; :func:`supervised` runs an
async service's rounds by it (on trio or anyio: it only awaits what it is given); a thread's
loop (the indexer, the indexer process's supervisor) calls :class:`Failures` itself, and
:class:`Every` is such a thread for a round run every so often (the expiry sweep). The API's
live streams are not background tasks: their polls run inside clients' requests
(:mod:`memfs.api.streams`), wait out a database that cannot be reached with one warning and
one line when it answers again, and a bug ends that one stream, never the server.

Imports only :mod:`memfs.errors`; neither trio nor anyio.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable

from . import errors


def lowest_priority() -> None:
    """Give the calling thread the lowest CPU priority (nice 19; on Linux the nice value is a
    thread's own): the requests of mounts and clients come first. Without privilege it cannot
    be undone, so only a thread of the service's own calls it."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def _text(exc: BaseException) -> str:
    if isinstance(exc, errors.MemfsError):
        return exc.message
    return f"{type(exc).__name__}: {exc}"


class Failures:
    """The failures in a row of one background service, logged and paced by the rule above.

    :param name: the service as log lines name it (``the indexer``).
    :param log: the logger of the service's module.
    :param first: seconds to wait after the first failure of a streak.
    :param most: the longest wait.
    """

    def __init__(self, name: str, log: logging.Logger, *, first: float = 0.05,
                 most: float = 2.0) -> None:
        self.name = name
        self.log = log
        self.first = first
        self.most = max(first, most)
        #: Failures in a row (0: the last round succeeded).
        self.count = 0
        self._since = 0.0
        #: What this streak logged at its own level: "expected", "bug".
        self._said: set[str] = set()

    def wait(self) -> float:
        """Seconds before the next try, after :attr:`count` failures in a row."""
        if not self.count:
            return 0.0
        return min(self.most, self.first * 2.0 ** min(self.count - 1, 30))

    def failed(self, exc: BaseException) -> float:
        """A round raised ``exc``: log it by the rule; returns the seconds to wait before the
        next round."""
        if not self.count:
            self._since = time.monotonic()
        self.count += 1
        wait = self.wait()
        kind = "expected" if isinstance(exc, errors.MemfsError) else "bug"
        if kind in self._said:
            self.log.debug("%s failed again (%d in a row): %s", self.name, self.count,
                           _text(exc), exc_info=exc if kind == "bug" else None)
        elif kind == "expected":
            self.log.warning("%s waits: %s; trying again in %g s", self.name, _text(exc), wait)
        else:
            self.log.error("%s failed; trying again in %g s", self.name, wait, exc_info=exc)
        self._said.add(kind)
        return wait

    def recovered(self) -> None:
        """A round succeeded: the streak (if any) is over, and said so."""
        if not self.count:
            return
        if self._said:
            self.log.info("%s goes on after %.1f s (%d failed tries)", self.name,
                          time.monotonic() - self._since, self.count)
        self.count = 0
        self._said = set()


async def supervised(failures: Failures, step: Callable[[], Awaitable[bool]],
                     pause: Callable[[float], Awaitable[None]]) -> None:
    """Run a background service by the rule: ``step`` (one round, which returns False once
    the service is stopped) again and again; a round that raises is logged by ``failures``
    and followed by ``pause`` of the backoff's seconds (which ends early once the service is
    stopped), then the next round. Returns once a round returns False; raises nothing but a
    cancellation (``BaseException``)."""
    while True:
        try:
            go_on = await step()
        except Exception as e:  # the rule: said once, tried again
            await pause(failures.failed(e))
            continue
        failures.recovered()
        if not go_on:
            return


class Every:
    """A thread of its own, at the lowest CPU priority, that runs ``step`` (one round) at
    once and then every ``interval`` seconds, by the rule: a round that raises is said once
    and tried again after the backoff (at most ``interval``, at least ``first``), never the
    end of the thread; only :meth:`stop` ends it.

    :param name: the service as log lines name it (``the expiry sweep``).
    """

    def __init__(self, name: str, step: Callable[[], object], interval: float,
                 log: logging.Logger, *, thread: str) -> None:
        self.step = step
        self.interval = interval
        self.failures = Failures(name, log, first=min(1.0, interval), most=interval)
        #: Rounds that succeeded (for tests).
        self.rounds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=thread, daemon=True)

    def start(self) -> Every:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop, after the round under way (if any)."""
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        lowest_priority()
        wait = 0.0
        while not self._stop.wait(wait):
            try:
                self.step()
            except Exception as e:  # the rule: said once, tried again
                wait = self.failures.failed(e)
            else:
                self.failures.recovered()
                self.rounds += 1
                wait = self.interval
