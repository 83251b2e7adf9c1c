"""The mount daemon of a whole session: one process serves every store of the session in one
FUSE filesystem (:class:`~memfs.fuse.session.SessionOperations`, which says how).

It builds the filesystem and hands it to the runtime both mount daemons share
(:func:`memfs.fuse.runtime.run`: mount, readiness, the background services, serving, the
unmount on every way out); the stores' trees are loaded once mounted, in the background (a
request to a store not loaded yet waits for it), and each follows its store from then on. Once
mounted, a local daemon keeps all the session's live stores (not its snapshots) indexed by
meaning with one indexer process, which ``.search/`` ranks through
(:func:`memfs.daemons.mount.start_indexer`: started when there is work, ended once idle and at
unmount).

Run as ``python -m memfs.daemons.sessionfs mount MOUNTPOINT --session ID --store ID ACCESS
MOUNT_PATH ...`` with ``MEMFS_DB`` (or ``MEMFS_URL`` and ``MEMFS_API_KEY``) in the environment;
it is the launcher's, not a user command. Its readiness and stop signals are those of
:func:`memfs.daemons.mount.mount`.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass

from .. import errors
from ..fuse import runtime
from ..fuse.core import actor_for
from ..fuse.ops import Operations
from ..fuse.runtime import Mounted
from ..fuse.session import SESSION_CACHE_BYTES, Member, SessionOperations
from ..fuse.toolevents import EventSink
from ..protocol import StoreAPI
from ..store.transcript import transcript_markdown
from . import logs
from .mount import follower, open_local, remote_store, snapshot_of, start_upkeep

log = logging.getLogger(__name__)


@dataclass
class StoreMount:
    """One ``--store ID ACCESS MOUNT_PATH`` of the daemon's command line."""

    store_id: str
    read_only: bool
    mount_path: str  # as the agent sees it: event paths, descriptor checks
    #: Time travel: the store as it was at this AT, read-only (``--at ID AT``).
    at: str | None = None

    @property
    def slug(self) -> str:
        return os.path.basename(self.mount_path.rstrip("/"))


@dataclass
class SessionMount:
    mountpoint: str
    session_id: str
    stores: list[StoreMount]
    events_dir: str | None = None
    db_path: str | None = None
    url: str | None = None
    api_key: str | None = None
    owner: tuple[int, int] | None = None
    allow_other: bool = False
    timeout: float = 300.0
    poll_interval: float = 0.1
    http_timeout: float = 10.0


def serve(spec: SessionMount) -> None:
    """Mount the session's filesystem on ``spec.mountpoint`` and serve it until told to stop
    (SIGINT/SIGTERM/SIGHUP, or an unmount); always unmounts.

    :raises MemfsError: a store or the session is unknown, the server cannot be reached, or
        the kernel mount failed (:class:`memfs.daemons.mount.MountError`, with libfuse's reason).
    """
    mountpoint = os.path.abspath(spec.mountpoint)
    with ExitStack() as stack:
        # From here on a stop signal is a clean stop, whenever it comes (runtime.run).
        stops = stack.enter_context(runtime.StopSignals())
        shared: StoreAPI | None = None
        members: list[Member] = []
        for sm in spec.stores:
            store: StoreAPI
            if spec.url:
                store = remote_store(spec.url, spec.api_key, spec.session_id, spec.http_timeout)
                stack.callback(store.close)
            else:
                if shared is None:
                    shared = open_local(spec.db_path)  # one handle for every store
                    stack.callback(shared.close)
                store = shared
            ms = store.stores.get(sm.store_id)
            events = (os.path.join(spec.events_dir, f"{ms.id}.events.jsonl")
                      if spec.events_dir else None)
            sink = EventSink(store, ms.id, spec.session_id, events)
            stack.callback(sink.close)
            served = store if sm.at is None else snapshot_of(store, ms, sm.at)
            ops = Operations(
                served, ms.id, actor=actor_for(spec.session_id),
                read_only=sm.read_only or sm.at is not None,
                events=sink, display_root=sm.mount_path, timeout=spec.timeout,
                mountpoint=sm.mount_path, owner=spec.owner,
                private=spec.owner is not None or spec.allow_other,
                transcript=transcript_markdown,
            )
            members.append(Member(sm.slug, ops, sink))
        sops = SessionOperations(members, owner=spec.owner,
                                 private=spec.owner is not None or spec.allow_other,
                                 timeout=spec.timeout)
        for m in members:
            # One small budget for the whole session's content cache: the kernel's page
            # cache holds what was read (keep_cache); this is for what it dropped, and for
            # the first write of a file opened for writing.
            m.ops.tree.cache_limit = SESSION_CACHE_BYTES // len(members)
        # The trees are loaded after the mount, in the background: the agent starts
        # meanwhile, and a request to a store not loaded yet waits for it.
        mounted = [
            Mounted(m.ops, follower(spec.url, spec.api_key, spec.session_id,
                                    spec.http_timeout, spec.poll_interval, at=sm.at),
                    load=functools.partial(sops.load, i))
            for i, (m, sm) in enumerate(zip(members, spec.stores, strict=True))]
        live = [m.ops.store_id for m, sm in zip(members, spec.stores, strict=True)
                if sm.at is None]
        local = shared
        runtime.run(
            sops, mounted, mountpoint=mountpoint,
            options=runtime.fuse_options(allow_other=spec.allow_other),
            what=f"session {spec.session_id} ({len(members)} stores)",
            # One indexer and one expiry sweep for the session's live stores (a snapshot is
            # never indexed nor swept).
            background=None if local is None else lambda: start_upkeep(local, live),
            stops=stops)


def _parse(argv: Sequence[str]) -> SessionMount:
    p = argparse.ArgumentParser(prog="python -m memfs.daemons.sessionfs")
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("mount")
    m.add_argument("mountpoint")
    m.add_argument("--session", required=True)
    m.add_argument("--store", nargs=3, action="append", required=True,
                   metavar=("ID", "ACCESS", "MOUNT_PATH"))
    m.add_argument("--at", nargs=2, action="append", default=[], metavar=("ID", "AT"),
                   help="mount store ID as it was at AT (read-only)")
    m.add_argument("--events-dir")
    m.add_argument("--owner", metavar="UID:GID")
    m.add_argument("--allow-other", action="store_true")
    m.add_argument("--timeout", type=float, default=300.0)
    m.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    owner = None
    if a.owner:
        uid, _, gid = a.owner.partition(":")
        owner = (int(uid), int(gid))
    fmt = os.environ.get("MEMFS_LOG_FORMAT", "text")
    logs.configure(logging.INFO if a.verbose else logging.WARNING,
                   fmt if fmt in logs.FORMATS else "text")
    return SessionMount(
        mountpoint=a.mountpoint, session_id=a.session,
        stores=[StoreMount(i, acc == "read_only", path, dict(a.at).get(i))
                for i, acc, path in a.store],
        events_dir=a.events_dir,
        db_path=os.environ.get("MEMFS_DB") or None,
        url=os.environ.get("MEMFS_URL") or None,
        api_key=os.environ.get("MEMFS_API_KEY") or None,
        owner=owner, allow_other=a.allow_other, timeout=a.timeout,
    )


def main(argv: Sequence[str] | None = None) -> int:
    spec = _parse(sys.argv[1:] if argv is None else argv)
    try:
        serve(spec)
    except errors.MemfsError as e:
        print(f"memfs: {e}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
