"""The composition root of one mount: ``memfs mount STORE MOUNTPOINT``.

:func:`mount` opens the store, builds :class:`memfs.fs.Operations` over it, mounts it with
pyfuse3 and serves it on trio until SIGINT/SIGTERM/SIGHUP or an external ``fusermount3 -u``,
with two background services beside ``pyfuse3.main()``: the :class:`~memfs.fs.ChangeWatcher`
(changes made elsewhere become visible within ~0.2 s) and the
:class:`~memfs.fs.EventFlusher` (tool events into the database in batches). Every exit path
runs ``pyfuse3.close(unmount=True)``, so the mount never outlives the daemon; a ``kill -9``
leaves a dead mount that ``fusermount3 -uz MOUNTPOINT`` removes (every acknowledged write is
already committed: commits happen before close/fsync return).

Readiness: once the kernel mount exists, the daemon prints the mount point on one line of
stdout (flushed), and when ``ready_fd`` is given writes ``ready\\n`` to that descriptor and
closes it. A launcher may also just poll ``os.path.ismount``.
"""

from __future__ import annotations

import logging
import os
import signal
from contextlib import ExitStack
from dataclasses import dataclass

import pyfuse3
import trio

from . import errors
from .fs import ChangeWatcher, EventFlusher, EventSink, Operations, actor_for
from .store import Store

log = logging.getLogger(__name__)


class MountError(errors.MemfsError):
    """The kernel mount could not be made (not a directory, FUSE missing, no permission)."""


@dataclass
class MountOptions:
    """Everything ``memfs mount`` takes.

    :param store_ref: store id or name.
    :param mountpoint: an existing empty directory.
    :param read_only: refuse every change (EROFS); also the kernel ``ro`` option.
    :param session_id: attribute versions and events to this session (else the local user).
    :param events_path: JSON-lines file for tool events (appended).
    :param display_root: the mount path as the agent sees it, for event ``file_path``s
        (default: the absolute mount point).
    :param timeout: kernel entry/attribute cache timeout in seconds.
    :param poll_interval: seconds between two looks at the store's change feed.
    :param ready_fd: a descriptor to write ``ready\\n`` to once mounted, then close.
    :param debug_fuse: libfuse request tracing.
    """

    store_ref: str
    mountpoint: str
    db_path: str | None = None
    read_only: bool = False
    session_id: str | None = None
    events_path: str | None = None
    display_root: str | None = None
    timeout: float = 300.0
    poll_interval: float = 0.1
    ready_fd: int | None = None
    debug_fuse: bool = False


def mount(opts: MountOptions) -> None:
    """Mount the store and serve it until told to stop; always unmounts.

    :raises NotFound: unknown store or session (before anything is mounted).
    :raises MountError: the kernel mount failed.
    """
    mountpoint = os.path.abspath(opts.mountpoint)
    with ExitStack() as stack:
        # NORMAL: each close() commits a version that survives a killed daemon at once;
        # fsync() additionally syncs it to disk (Operations.fsync -> Store.sync), which is
        # exactly what POSIX promises for close() and fsync(). FULL would cost a disk sync
        # per close (2.4x slower creates, measured with scripts/bench).
        store = Store(opts.db_path, synchronous="NORMAL", checkpoint_pages=4000)
        stack.callback(store.close)
        ms = store.resolve_store(opts.store_ref)
        if opts.session_id is not None:
            store.get_session(opts.session_id)
        actor = actor_for(opts.session_id)
        sink = EventSink(store, ms.id, opts.session_id, opts.events_path)
        stack.callback(sink.close)
        ops = Operations(
            store,
            ms.id,
            actor=actor,
            read_only=opts.read_only,
            events=sink,
            display_root=opts.display_root or mountpoint,
            timeout=opts.timeout,
        )
        ops.load()
        options = set(pyfuse3.default_options)
        options |= {"fsname=memfs", "subtype=memfs"}
        if opts.read_only or ops.archived:
            options.add("ro")
        if opts.debug_fuse:
            options.add("debug")
        # Until trio's signal receiver is installed, SIGTERM raises KeyboardInterrupt like
        # SIGINT, so that the finally below still unmounts.
        old_term = signal.signal(signal.SIGTERM, signal.default_int_handler)
        stack.callback(signal.signal, signal.SIGTERM, old_term)
        try:
            pyfuse3.init(ops, mountpoint, options)
        except RuntimeError as e:
            raise MountError(f"cannot mount {mountpoint}: {e}") from None
        try:
            log.info("mounted %s (%s) on %s", ms.name, ms.id, mountpoint)
            _signal_ready(mountpoint, opts.ready_fd)
            try:
                trio.run(_serve, ops, sink, opts.poll_interval)
            except KeyboardInterrupt:
                log.info("interrupted, unmounting")
        finally:
            ops.discard_all()
            pyfuse3.close(unmount=True)
            log.info("unmounted %s", mountpoint)


def _signal_ready(mountpoint: str, ready_fd: int | None) -> None:
    try:
        print(mountpoint, flush=True)
    except OSError as e:  # nobody reads stdout (closed pipe): serving matters more
        log.debug("cannot print the mount point: %s", e)
    if ready_fd is not None:
        try:
            os.write(ready_fd, b"ready\n")
        finally:
            os.close(ready_fd)


async def _serve(ops: Operations, sink: EventSink, poll_interval: float) -> None:
    watcher = ChangeWatcher(ops, poll_interval)
    flusher = EventFlusher(sink)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_terminate_on_signal)
        nursery.start_soon(watcher.run)
        nursery.start_soon(flusher.run)
        try:
            await pyfuse3.main()
        finally:
            # main() also returns when the mount goes away (fusermount3 -u).
            watcher.stop()
            flusher.stop()
            nursery.cancel_scope.cancel()


async def _terminate_on_signal() -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        async for signum in signals:
            log.info("got %s, unmounting", signal.Signals(signum).name)
            pyfuse3.terminate()
            return
