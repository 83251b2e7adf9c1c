"""The composition root of one mount: ``memfs mount STORE MOUNTPOINT``; and what both mount
daemons (this one and :mod:`memfs.daemons.sessionfs`) need of the layers below the filesystem:
opening a store (:func:`open_local`, :func:`remote_store`, :func:`snapshot_of`), how a tree
follows its store (:func:`follower`), the indexer and the expiry sweep (:func:`start_upkeep`).

:func:`mount` opens the store, builds :class:`memfs.fuse.ops.Operations` over it and hands it to
the runtime both daemons share (:func:`memfs.fuse.runtime.run`), which mounts it with pyfuse3
and serves it on trio until SIGINT/SIGTERM/SIGHUP or an external ``fusermount3 -u``, with the
background services of :mod:`memfs.fuse.watch` beside ``pyfuse3.main()``: the
:class:`~memfs.fuse.watch.ChangeWatcher` (changes made elsewhere become visible within milliseconds,
woken by an inotify watch of the database, and a database file deleted or replaced under the
mount is noticed as fast), the
:class:`~memfs.fuse.watch.EventFlusher` (tool events into the database in batches) and the
:class:`~memfs.fuse.watch.Invalidator` (what the kernel must forget, sent at once). Every exit path
runs ``pyfuse3.close(unmount=True)``, so the mount never outlives the daemon; a ``kill -9``
leaves a dead mount that ``fusermount3 -uz MOUNTPOINT`` removes (every acknowledged write is
already committed: commits happen before close/fsync return).

Remote mounts (``memfs --url URL mount ...``): the same :class:`~memfs.fuse.ops.Operations` run over
a :class:`memfs.client.Client` of a ``memfs serve`` instead of a local :class:`Store` (both
implement :class:`memfs.protocol.StoreAPI`; the server's store decides every rule and its
errors come back as the same exceptions, hence the same errno), with the server's limits,
acting as the session given with ``--session`` (versions are ``session_actor``; the server
checks the attachment). Instead of polling, a :class:`~memfs.fuse.watch.ChangeSubscriber` follows
the store's change stream, which the server pushes, and reconnects from the last position it
applied. Calls to the server run in worker threads, like every store call: a slow or stopped
server never holds up other operations (cached reads answer at once); a call fails with EIO
after ``http_timeout`` seconds (10 by default), and the mount recovers by itself when the
server is back. A close that saves a file ends within ``http_timeout`` of its start too, and
truthfully: the client's writes carry an idempotency key and a deadline the server checks
before it commits (:meth:`memfs.client.Client.answer_by`, :mod:`memfs.store.idempotency`).
A server that cannot be reached at mount time is an error before anything is mounted.

Search (``MOUNT/.search/``, :mod:`memfs.fuse.search`): once mounted, a local mount of a live store
(read-only too: indexing writes only derived rows; not a snapshot) keeps it indexed by meaning
in an indexer process of its own (:func:`start_indexer`,
:class:`~memfs.recall.supervisor.IndexerProcess`: ``python -m memfs.daemons.indexworker``,
started when there is something to embed or a question to rank, ended once idle, at unmount,
and with the daemon), which also ranks the mount's searches by meaning: the daemon never loads
a model. It never brings the mount down: a bad ``MEMFS_EMBEDDINGS`` is logged and searches
answer by words alone, and an indexer process that dies is started again. A remote mount runs
none (its server indexes). The same local mount sweeps its store's expired memories
(:mod:`memfs.daemons.expiry`: at start, then every minute); a remote mount leaves that to
its server, a snapshot to nobody.

Readiness: once the kernel mount exists, the daemon prints the mount point on one line of
stdout (flushed), and when ``ready_fd`` is given writes ``ready\\n`` to that descriptor and
closes it (:func:`memfs.fuse.runtime.signal_ready`); then :data:`READY_LINE` on stderr, for
the person who started it. A launcher may also just poll ``os.path.ismount``. A stop signal
from the daemon's start on is a clean stop (exit status 0): before the mount, nothing is
mounted (:class:`memfs.fuse.runtime.StopSignals`).
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from .. import errors, linux
from ..backends import watch as dbwatch
from ..fuse import runtime
from ..fuse.core import actor_for
from ..fuse.ops import Operations
from ..fuse.runtime import Follow, Mounted, MountError
from ..fuse.toolevents import EventSink
from ..fuse.watch import ChangeSubscriber, ChangeWatcher
from ..models import MemoryStore
from ..protocol import StoreAPI
from ..rules import Limits
from ..store import Store, open_store
from ..store.transcript import transcript_markdown
from . import logs
from .expiry import start_sweep
from .snapshot import SnapshotStore

if TYPE_CHECKING:
    from ..client import Client
    from ..recall.supervisor import IndexerProcess

log = logging.getLogger("memfs.daemon")  # the name its lines carried before it moved

#: What ``memfs mount`` says on stderr once mounted (after the mount point on stdout).
READY_LINE = "mounted; Ctrl-C or fusermount3 -u to stop"


@dataclass
class MountOptions:
    """Everything ``memfs mount`` takes.

    :param store_ref: store id or name.
    :param mountpoint: an existing empty directory, not a mount point already.
    :param nonempty: mount over a directory that is not empty (what it holds is hidden
        while mounted); else such a directory is refused.
    :param read_only: refuse every change (EROFS). Refused by the daemon, not by the kernel
        ``ro`` option: the kernel would refuse before the daemon sees the call, and the
        attempt must reach the event log (SPEC §2). ``statvfs`` therefore shows no
        ``ST_RDONLY`` (FUSE passes no flags through statfs).
    :param session_id: attribute versions and events to this session (else the local user).
    :param events_path: JSON-lines file for tool events (appended).
    :param display_root: the mount path as the agent sees it, for event ``file_path``s
        (default: the absolute mount point).
    :param timeout: kernel entry/attribute cache timeout in seconds.
    :param poll_interval: seconds between two looks at the store's change feed.
    :param ready_fd: a descriptor to write ``ready\\n`` to once mounted, then close.
    :param debug_fuse: libfuse request tracing.
    :param url: mount a store of this ``memfs serve`` instead of the local database.
    :param api_key: the key for ``url``.
    :param http_timeout: seconds one call to the server may take (a remote mount).
    :param owner: the ``(uid, gid)`` every file shows (default: the daemon's own); with it
        the modes are 0600/0700, the owner's only.
    :param allow_other: let users other than the daemon's reach the mount (the kernel's
        ``allow_other``; root, or ``user_allow_other`` in /etc/fuse.conf). The kernel then
        checks every access against the owner and modes (``default_permissions``, always
        on), which are 0600/0700: only the owner (and root) get in.
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
    url: str | None = None
    api_key: str | None = None
    http_timeout: float = 10.0
    nonempty: bool = False
    owner: tuple[int, int] | None = None
    allow_other: bool = False
    #: Create a missing mount point (not its parents), and remove it again at unmount.
    make_mountpoint: bool = False
    #: Time travel (docs/mounts.md, "Time travel"): mount the store read-only as it was at this RFC
    #: 3339 time, right after this version id, or just before this session id's first write.
    at: str | None = None


def check_mountpoint(mountpoint: str, nonempty: bool = False) -> None:
    """Refuse a mount point the kernel mount would fail on, or one where the mount would hide
    something: a missing path, not a directory, a dead mount, something mounted there already
    (a second mount would stack on it), a directory that is not empty (unless ``nonempty``).

    :raises MountError: one line saying which and why.
    """
    def refuse(why: str) -> MountError:
        return MountError(f"cannot mount on {mountpoint}: {why}")

    try:
        st = os.stat(mountpoint)
    except (FileNotFoundError, NotADirectoryError):
        raise refuse(_missing(mountpoint)) from None
    except OSError as e:
        if e.errno == errno.ENOTCONN:
            raise refuse(f"a dead mount is there (`fusermount3 -uz {mountpoint}` removes "
                         "it)") from None
        raise refuse(e.strerror or str(e)) from None
    if not stat.S_ISDIR(st.st_mode):
        raise refuse("it is not a directory")
    if os.path.ismount(mountpoint) or os.path.realpath(mountpoint) in linux.mount_points():
        raise refuse("something is mounted there already")
    if nonempty:
        return
    try:
        entries = os.listdir(mountpoint)
    except OSError as e:
        raise refuse(e.strerror or str(e)) from None
    if entries:
        raise refuse("it is not empty (the mount would hide what it holds; --nonempty "
                     "mounts over it anyway)")


def _missing(mountpoint: str) -> str:
    """Why ``mountpoint`` cannot be found: its parent is missing (a mount makes the mount point,
    not its parents) or is a file, or else it itself does not exist."""
    parent = os.path.dirname(os.path.abspath(mountpoint))
    try:
        st = os.stat(parent)
    except FileNotFoundError:
        return f"its parent directory {parent} does not exist (mkdir -p {parent})"
    except OSError as e:
        return f"its parent {parent}: {e.strerror or e}"
    if not stat.S_ISDIR(st.st_mode):
        return f"its parent {parent} is not a directory"
    return "it does not exist (create an empty directory there)"


def mount(opts: MountOptions) -> None:
    """Mount the store and serve it until told to stop; always unmounts.

    :raises NotFound: unknown store or session (before anything is mounted).
    :raises MountError: the mount point is refused (:func:`check_mountpoint`), or the kernel
        mount failed (with libfuse's reason).
    :raises DatabaseUnavailable: (local) no database at ``db_path``; one is never created.
    :raises MemfsError: (remote) the server cannot be reached or refuses the key.
    """
    mountpoint = os.path.abspath(opts.mountpoint)
    with ExitStack() as stack:
        # From here on a stop signal is a clean stop, whenever it comes (runtime.run).
        stops = stack.enter_context(runtime.StopSignals())
        if opts.make_mountpoint:
            try:
                os.mkdir(mountpoint)
            except OSError:
                pass  # there already, or no parent: check_mountpoint says which
            else:
                stack.callback(_remove_made_mountpoint, mountpoint)
        check_mountpoint(mountpoint, opts.nonempty)
        store: StoreAPI
        if opts.url:
            store = remote_store(opts.url, opts.api_key, opts.session_id, opts.http_timeout)
        else:
            store = open_local(opts.db_path)
        stack.callback(store.close)
        ms = store.stores.resolve(opts.store_ref)
        refuse_writes = opts.read_only
        if opts.session_id is not None:
            session = store.sessions.get(opts.session_id)
            if opts.url and any(r.memory_store_id == ms.id and r.access == "read_only"
                                for r in session.resources):
                # The server refuses these writes anyway; refusing them at open() gives the
                # agent its EROFS (and the event log its failed tool call) at once.
                refuse_writes = True
        actor = actor_for(opts.session_id)
        sink = EventSink(store, ms.id, opts.session_id, opts.events_path)
        stack.callback(sink.close)
        served: StoreAPI = store
        if opts.at is not None:
            served, refuse_writes = snapshot_of(store, ms, opts.at), True
        ops = Operations(
            served,
            ms.id,
            actor=actor,
            read_only=refuse_writes,
            events=sink,
            display_root=opts.display_root or mountpoint,
            timeout=opts.timeout,
            mountpoint=os.path.realpath(mountpoint),
            owner=opts.owner,
            private=opts.owner is not None or opts.allow_other,
            transcript=transcript_markdown,
        )
        ops.load()
        follow = follower(opts.url, opts.api_key, opts.session_id, opts.http_timeout,
                          opts.poll_interval, at=opts.at)
        runtime.run(
            ops, [Mounted(ops, follow)], mountpoint=mountpoint,
            options=runtime.fuse_options(allow_other=opts.allow_other, debug=opts.debug_fuse),
            what=f"{ms.name} ({ms.id})", ready_fd=opts.ready_fd,
            background=lambda: start_upkeep(store, [] if opts.at is not None else [ms.id]),
            say_ready=lambda: logs.say(READY_LINE), stops=stops)


def open_local(db_path: str | None) -> Store:
    """The local database a mount serves (never created: :class:`DatabaseUnavailable`).

    NORMAL: each close() commits a version that survives a killed daemon at once; fsync()
    additionally syncs it to disk (Operations.fsync -> Store.sync), which is exactly what POSIX
    promises for close() and fsync(). FULL would cost a disk sync per close (2.4x slower
    creates, measured with scripts/bench). One handle serves every store of a session (it is
    thread-safe, like the server's). The WAL is checkpointed in a thread of its own, not in
    the close that crosses 16,000 pages (:mod:`memfs.backends.checkpoint`).
    """
    return open_store(db_path, create=False, synchronous="NORMAL", checkpoint_pages=16000,
                      checkpoint_behind=True)


class Upkeep:
    """What a local mount daemon runs beside its mount for the live stores it serves, as
    ``memfs serve`` does for every store: the indexer (:func:`start_indexer`) and the expiry
    sweep (:func:`memfs.daemons.expiry.start_sweep`). One stopped at unmount."""

    def __init__(self, *services: runtime.Stoppable | None) -> None:
        self.services = [s for s in services if s is not None]

    def stop(self) -> None:
        for s in self.services:
            try:
                s.stop()
            except Exception:  # the other still stops
                log.exception("stopping %s", type(s).__name__)


def start_upkeep(store: StoreAPI, store_ids: list[str]) -> Upkeep:
    """Start the indexer and the expiry sweep of ``store_ids`` (none of a remote store, a
    snapshot, or no live store: its server, or nobody, keeps them). Never raises."""
    return Upkeep(start_indexer(store, store_ids), start_sweep(store, store_ids))


def start_indexer(store: StoreAPI, store_ids: list[str]) -> IndexerProcess | None:
    """Keep ``store_ids`` indexed by meaning while mounted, in an indexer process of this
    daemon's (:class:`~memfs.recall.supervisor.IndexerProcess`: started when there is something
    to embed or a question to rank, ended once idle), and rank the daemon's searches by meaning
    through it: the daemon never loads a model. None: nothing to index, a remote store,
    meaning off, or the indexer could not start. Never raises: a mount serves without it
    (searches answer by words alone, and say so)."""
    if not store_ids or not isinstance(store, Store):
        return None
    try:
        provider = store.search.embeddings
    except errors.MemfsError as e:  # a MEMFS_EMBEDDINGS that names no provider
        log.error("%s; searches answer by words alone", e.message)
        store.search.use_embeddings("none")
        return None
    if provider is None:
        return None
    try:
        from ..recall.embeddings import SETTING_ENV
        from ..recall.supervisor import IndexerProcess

        ids = list(store_ids)
        # The database and the provider through the environment: a command line is anyone's
        # to read in /proc (a PostgreSQL URL may hold a password).
        env = dict(os.environ, MEMFS_DB=store.path)
        setting = getattr(provider, "setting", None)
        if isinstance(setting, str):
            env[SETTING_ENV] = setting
        verbose = ["-v"] if logging.getLogger().isEnabledFor(logging.INFO) else []
        # -P: nothing imported from the current directory, which may be anyone's.
        command = [sys.executable, "-P", "-m", "memfs.daemons.indexworker", "--parent",
                   str(os.getpid()), "--model", provider.model, *verbose, "--", *ids]
        indexer = IndexerProcess(store, provider.model, ids, command, env).start()
        store.search.use_embeddings(indexer)
    except Exception:  # the mount matters more
        log.exception("the indexer did not start; searches answer by words alone")
        return None
    log.info("indexing %d store(s) by meaning with %s, in an indexer process while there is "
             "work", len(ids), provider.model)
    return indexer


def snapshot_of(store: StoreAPI, ms: MemoryStore, at: str) -> SnapshotStore:
    """The read-only view of ``ms`` as it was at ``at`` that a time-travel mount serves; says
    on stderr which boundary that is, and warns of memories whose history before it was
    pruned (retention), which the mount cannot show.

    :raises InvalidRequest, NotFound: ``at`` is not a time, version or session (of this store).
    """
    snap = store.versions.snapshot(ms.id, at)
    log.info("snapshot of %s at %s: %d memories", ms.id, snap.boundary_text(),
             len(snap.memories))
    logs.say(f"{ms.name} ({ms.id}) as it was at {snap.boundary_text()}, read-only: "
             f"{len(snap.memories)} memories")
    warning = snap.pruned_warning()
    if warning:
        log.warning("%s", warning)
    return SnapshotStore(store, snap)


def _remove_made_mountpoint(mountpoint: str) -> None:
    try:
        os.rmdir(mountpoint)
    except OSError as e:  # something was put there after the unmount: leave it
        log.info("keeping %s: %s", mountpoint, e.strerror or e)


def remote_store(url: str, api_key: str | None, session_id: str | None,
                 http_timeout: float) -> Client:
    """A client of ``url`` with the server's limits, acting as ``session_id``.

    :raises MemfsError: the server cannot be reached, or refuses the key.
    """
    from ..client import Client  # httpx: only remote mounts pay for importing it

    if not logging.getLogger().isEnabledFor(logging.DEBUG):
        # httpx logs every request at INFO: with -v that would drown the mount's own log.
        logging.getLogger("httpx").setLevel(logging.WARNING)
    client = Client(url, api_key, session_id=session_id, timeout=http_timeout,
                    deadline=http_timeout)
    try:
        served = client.get_limits()
        names = {f.name for f in dataclasses.fields(Limits)}
        client.limits = Limits(**{k: v for k, v in served.items() if k in names})
    except BaseException:
        client.close()
        raise
    return client


def follower(url: str | None, api_key: str | None, session_id: str | None,
             http_timeout: float, poll_interval: float, *, at: str | None) -> Follow | None:
    """How a mounted store's tree follows its changes (:class:`memfs.fuse.runtime.Mounted`): a
    snapshot (``at``) never changes (None); a store of a server (``url``) follows its change
    stream; a local store watches its database."""
    if at is not None:
        return None
    if url:
        return functools.partial(_follow_server, url=url, api_key=api_key,
                                 session_id=session_id, http_timeout=http_timeout)
    return functools.partial(_follow_database, interval=poll_interval)


@asynccontextmanager
async def _follow_server(ops: Operations, *, url: str, api_key: str | None,
                         session_id: str | None, http_timeout: float,
                         ) -> AsyncIterator[ChangeSubscriber]:
    from ..client import AsyncClient  # httpx: only remote mounts pay for importing it

    feed = AsyncClient(url, api_key, session_id=session_id, timeout=http_timeout)
    try:
        yield ChangeSubscriber(ops, feed)
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            await feed.aclose()


@asynccontextmanager
async def _follow_database(ops: Operations, *, interval: float
                           ) -> AsyncIterator[ChangeWatcher]:
    # One watch of a database for all its stores in the process (dbwatch shares it).
    assert isinstance(ops.store, Store)  # a local mount serves its database's Store
    watch = dbwatch.acquire(ops.store.path)
    try:
        yield ChangeWatcher(ops, interval, watch)
    finally:
        dbwatch.release(watch)
