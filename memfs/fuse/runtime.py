"""The runtime both mount daemons share: a built filesystem mounted, served until told to
stop, and always unmounted.

The daemons (:mod:`memfs.daemons.mount`: ``memfs mount``, one store;
:mod:`memfs.daemons.sessionfs`: the stores of a session under one mount) open the stores and
build what they serve: the filesystem (:class:`~memfs.fuse.ops.Operations`, or a
:class:`~memfs.fuse.session.SessionOperations` over several), and for each store's tree a
:class:`Mounted`: its :class:`~memfs.fuse.ops.Operations`, how the tree follows the store's
changes (``follow``: a :class:`~memfs.fuse.watch.ChangeWatcher` on the database's watch, or a
:class:`~memfs.fuse.watch.ChangeSubscriber` of a server's stream, with what it holds; none for a
snapshot) and, for a tree loaded once mounted, ``load``. Then :func:`run` does the rest, the
same for both:

1. a stop signal (SIGINT, SIGTERM, SIGHUP) that comes before trio's receiver takes over, or
   after it let go, is noted (:class:`StopSignals`, which a daemon holds from its start), never
   a ``KeyboardInterrupt`` raised wherever the main thread happens to be: one noted before the
   kernel mount means no mount, one noted after it means no serving, and the steps below end
   in the unmount either way;
2. the kernel mount (:func:`init_fuse`: libfuse's reason in the :class:`MountError` when it
   fails), then readiness (:func:`signal_ready`: the mount point on stdout, ``ready`` on a
   descriptor, and what the daemon says then);
3. the process's background service handed in (the daemon's indexer), then in trio
   (:func:`serve`): per tree the service that follows the store's changes (after loading the
   tree, when it is loaded once mounted), the :class:`~memfs.fuse.watch.EventFlusher`, the
   :class:`~memfs.fuse.watch.WordsCatchUp` and the :class:`~memfs.fuse.watch.Invalidator`,
   beside ``pyfuse3.main()`` (reading requests
   with :mod:`~memfs.fuse.reader`'s reader) and
   :func:`terminate_on_signal` (SIGINT, SIGTERM, SIGHUP, or one noted before; what is still
   running :data:`STOP_GRACE` seconds later is cancelled);
4. on every way out (a signal, an unmount from outside, an error): the services stopped, every
   unsaved buffer dropped (nothing half-written reaches the store), ``pyfuse3.close(unmount=
   True)``, the background service stopped. A ``kill -9`` leaves a dead mount that
   ``fusermount3 -uz`` removes; every acknowledged write is already committed.

A failing background service never brings the mount down (:mod:`memfs.background`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import pyfuse3
import trio

from .. import errors
from ..protocol import WordsAPI
from .ops import Operations
from .reader import Reader, fuse_fds, reader_after_init
from .spin import Spinner
from .watch import EventFlusher, Invalidator, WordsCatchUp

log = logging.getLogger(__name__)


class MountError(errors.MemfsError):
    """The kernel mount could not be made (not a directory, FUSE missing, no permission)."""


class Service(Protocol):
    """A background service: runs until stopped."""

    async def run(self) -> None: ...

    def stop(self) -> None: ...


class Stoppable(Protocol):
    def stop(self) -> None: ...


#: How a tree follows its store's changes: an async context manager around the service that
#: does it, which releases what the service holds (a database watch, a server connection).
Follow = Callable[[Operations], AbstractAsyncContextManager[Service]]


@dataclass
class Mounted:
    """One store's tree as the runtime serves it."""

    ops: Operations
    #: How the tree follows the store's changes (None: a snapshot, which never changes).
    follow: Follow | None = None
    #: Loads the tree once mounted (None: loaded before the mount). Requests for the tree
    #: wait for it meanwhile (:meth:`SessionOperations.load`).
    load: Callable[[], Awaitable[None]] | None = None


def fuse_options(*, allow_other: bool = False, debug: bool = False) -> set[str]:
    """The mount options of a memfs mount: pyfuse3's defaults (``default_permissions``: the
    kernel checks owner and modes), named memfs; ``allow_other`` lets users other than the
    daemon's in; ``debug`` is libfuse's request tracing."""
    options = set(pyfuse3.default_options)
    options |= {"fsname=memfs", "subtype=memfs"}
    assert "default_permissions" in options  # the kernel checks owner and modes
    if allow_other:
        options.add("allow_other")
    if debug:
        options.add("debug")
    return options


def init_fuse(fs: pyfuse3.Operations, mountpoint: str, options: set[str]) -> None:
    """``pyfuse3.init``, keeping what libfuse (and fusermount3) print on stderr meanwhile:
    when the mount fails that is the reason (``fuse: device not found...``), which goes into
    the :class:`MountError` instead of libfuse's bare ``fuse_session_mount failed``; when it
    succeeds it is passed on to stderr.

    :raises MountError: the kernel mount failed.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            pyfuse3.init(fs, mountpoint, options)
            failure = None
        except RuntimeError as e:
            failure = e
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        said = captured.read()
    if failure is None:
        if said:
            os.write(2, said)
        return
    lines = [ln.strip() for ln in said.decode(errors="replace").splitlines() if ln.strip()]
    raise MountError(f"cannot mount on {mountpoint}: {'; '.join(lines) or failure}")


def signal_ready(mountpoint: str, ready_fd: int | None) -> None:
    """Say the mount exists: the mount point on one line of stdout (flushed), and ``ready``
    on ``ready_fd`` (then closed) when given."""
    try:
        print(mountpoint, flush=True)
    except OSError as e:  # nobody reads stdout (closed pipe): serving matters more
        log.debug("cannot print the mount point: %s", e)
    if ready_fd is not None:
        try:
            os.write(ready_fd, b"ready\n")
        finally:
            os.close(ready_fd)


#: Seconds a stop signal leaves the requests in progress to be answered; then whatever still
#: runs is cancelled and the unmount follows.
STOP_GRACE = 5.0


async def terminate_on_signal(serving: trio.CancelScope,
                              terminate: Callable[[], None] = pyfuse3.terminate,
                              stops: StopSignals | None = None,
                              stop_waiting: Callable[[], None] | None = None) -> None:
    """End ``pyfuse3.main()`` at the first SIGINT, SIGTERM or SIGHUP (the unmount follows),
    or at once when ``stops`` noted one before the receiver was there.

    ``pyfuse3.main()`` returns once the requests in progress are answered. One that never
    ends must not keep the daemon and its mounts up: :data:`STOP_GRACE` seconds later,
    ``stop_waiting`` makes the store calls that wait for a lock give up (in worker threads,
    which a cancellation does not reach: a close waiting for another process's write lock
    held the unmount up to a minute, issue 38), and ``serving`` (the scope of ``main()``) is
    cancelled. The signal receiver stays installed until then; after it, a signal is noted
    by ``stops`` again.
    """
    with trio.open_signal_receiver(*StopSignals.SIGNALS) as signals:
        # Looked at once the receiver is there: a signal came before (noted), or comes now
        # (received); none falls between the two.
        signum = None if stops is None else stops.came
        if signum is None:
            async for received in signals:
                signum = received
                break
        assert signum is not None  # the receiver's iteration ends only with the process
        log.info("got %s, unmounting", signal.Signals(signum).name)
        terminate()
        await trio.sleep(STOP_GRACE)  # cancelled with the nursery once main() returned
        log.warning("requests still unanswered %s s after the stop signal: cancelling them",
                    f"{STOP_GRACE:g}")
        if stop_waiting is not None:
            stop_waiting()
        serving.cancel()


class StopSignals:
    """A mount daemon's stop signals (SIGINT, SIGTERM, SIGHUP) while no trio receiver takes
    them: the first is noted in :attr:`came`, and the daemon goes on to its clean stop.

    A daemon holds it from its start (opening the store, loading the tree) to its end (the
    unmount, the background service stopped); :func:`run` makes one when it is given none.
    Python's own handling would raise ``KeyboardInterrupt`` (SIGINT, or SIGTERM made alike)
    wherever the main thread is: in trio's start that is a ``TrioInternalError``, and a
    60-line traceback and exit status 1 instead of an unmount (issue 38); SIGTERM and SIGHUP
    left alone would kill the daemon and leave a dead mount.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        #: The first stop signal noted (its number), or None.
        self.came: int | None = None
        self._held: dict[int, Any] = {}  # what signal.getsignal says, put back

    def __enter__(self) -> StopSignals:
        for s in self.SIGNALS:
            self._held[s] = signal.signal(s, self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._held.items():
            signal.signal(s, handler)
        self._held.clear()

    def _note(self, signum: int, frame: object) -> None:
        # Nothing more here (no logging): the main thread may be anywhere, in a log call too.
        if self.came is None:
            self.came = signum


def run(fs: pyfuse3.Operations, mounted: Sequence[Mounted], *, mountpoint: str,
        options: set[str], what: str, ready_fd: int | None = None,
        background: Callable[[], Stoppable | None] | None = None,
        say_ready: Callable[[], None] | None = None,
        stops: StopSignals | None = None) -> None:
    """Mount ``fs`` (whose trees are ``mounted``) on ``mountpoint`` and serve it until told
    to stop (SIGINT, SIGTERM, SIGHUP) or unmounted from outside; always unmounts.

    :param what: what is mounted, as the log says it (``notes (memstore_…)``).
    :param background: starts the process's background service once mounted (the daemon's
        indexer; None from it: none), stopped after the unmount.
    :param say_ready: says once mounted, after the readiness, what the person who started
        the daemon should know (``memfs mount``'s way to stop it).
    :param stops: the daemon's stop signals, held since its start (else held from here): one
        noted already means nothing is mounted.
    :raises MountError: the kernel mount failed (nothing was served).
    """
    with contextlib.ExitStack() as holding:
        if stops is None:
            stops = holding.enter_context(StopSignals())
        if stops.came is not None:
            log.info("got %s before the mount: nothing mounted on %s",
                     signal.Signals(stops.came).name, mountpoint)
            return
        before = fuse_fds()
        init_fuse(fs, mountpoint, options)
        fast = reader_after_init(before)
        started: Stoppable | None = None
        try:
            log.info("mounted %s on %s", what, mountpoint)
            signal_ready(mountpoint, ready_fd)
            if say_ready is not None:
                say_ready()
            if background is not None and stops.came is None:
                started = background()
            if stops.came is None:
                trio.run(functools.partial(serve, mounted, reader=fast, stops=stops))
            else:
                log.info("got %s, unmounting", signal.Signals(stops.came).name)
        finally:
            for m in mounted:
                m.ops.buffers.discard_all()
            pyfuse3.close(unmount=True)
            log.info("unmounted %s", mountpoint)
            if started is not None:
                try:
                    started.stop()
                except Exception:
                    log.exception("stopping the background service")


def words_index(store: object) -> WordsAPI | None:
    """The search part of a local store, whose writes queue their words for a mount to take in
    while it is quiet (:class:`~memfs.fuse.watch.WordsCatchUp`); None for a server's client or
    a snapshot, whose words are not this process's to index."""
    words = getattr(store, "search", None)
    return words if isinstance(words, WordsAPI) else None


def _stop_waiting(mounted: Sequence[Mounted]) -> None:
    for m in mounted:
        m.ops.mount.stop_waiting()


async def serve(mounted: Sequence[Mounted], *,
                main: Callable[[], Awaitable[None]] = pyfuse3.main,
                terminate: Callable[[], None] = pyfuse3.terminate,
                reader: Reader | None = None, stops: StopSignals | None = None) -> None:
    """Serve the kernel (``main``) with each tree's services beside it, until ``main``
    returns (a signal, or one ``stops`` noted before; or the mount gone; ``terminate`` ends
    it) or a stop signal's grace ran out (:func:`terminate_on_signal`); then stop them and
    release what they hold.
    With a ``reader`` (:mod:`~memfs.fuse.reader`), ``main`` and ``terminate`` are its own,
    and the process's :class:`~memfs.fuse.spin.Spinner` turns in it, not as a task."""
    async with contextlib.AsyncExitStack() as holding:
        followers: list[Service | None] = []
        services: list[Service] = []
        for m in mounted:
            followers.append(None if m.follow is None
                             else await holding.enter_async_context(m.follow(m.ops)))
            if m.ops.events is not None:
                services.append(EventFlusher(m.ops.events))
            words = words_index(m.ops.store)
            if m.ops.search is not None and words is not None:
                services.append(WordsCatchUp(m.ops, words))
            invalidator = Invalidator(m.ops)
            m.ops.mount.on_stale = invalidator.wake
            services.append(invalidator)

        async def load_and_follow(nursery: trio.Nursery) -> None:
            # One tree after the other, in their order: the GIL would serialize them anyway.
            for m, follower in zip(mounted, followers, strict=True):
                if m.load is not None:
                    await m.load()
                if follower is not None:
                    # It follows the feed from the loaded position.
                    nursery.start_soon(follower.run)

        # One for the process: its trees share the trio thread.
        spinner = Spinner()
        for m in mounted:
            m.ops.mount.spinner = spinner
        if reader is None:
            services.append(spinner)
        else:  # it turns in the reader's wait for the next request
            reader.spinner = spinner
            main, terminate = reader.main, reader.terminate
        async with trio.open_nursery() as nursery:
            serving = trio.CancelScope()
            nursery.start_soon(terminate_on_signal, serving, terminate, stops,
                               functools.partial(_stop_waiting, mounted))
            for s in services:
                nursery.start_soon(s.run)
            nursery.start_soon(load_and_follow, nursery)
            try:
                with serving:
                    await main()
            finally:
                # main() also returns when the mount goes away (fusermount3 -u).
                for m in mounted:
                    m.ops.mount.on_stale = m.ops.mount.spinner = None
                for service in [*services, *followers]:
                    if service is not None:
                        service.stop()
                nursery.cancel_scope.cancel()
