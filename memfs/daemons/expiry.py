"""The expiry sweep of a process that keeps a database's indexes (SPEC §8): ``memfs serve`` for
every store of its database, a local mount daemon for the live stores it serves. A remote mount
runs none (its server sweeps), nor does a snapshot (nothing of it changes).

:func:`start_sweep` runs :meth:`memfs.store.typed.Typed.sweep` at once and then every
:data:`INTERVAL` seconds (``MEMFS_EXPIRY_INTERVAL``; 0 turns it off), in a thread of its own
at the lowest CPU priority (:class:`memfs.background.Every`): each expired memory of a store
whose expiry is ``on`` becomes a ``deleted`` version by the expiry actor, in bounded
transactions, and one of a store that only reports (``report``) is said in the log once, not
deleted. A failed round (the database locked or away) never brings the process down
(:mod:`memfs.background`): it is said once and tried again.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from ..background import Every
from ..store import Store

log = logging.getLogger(__name__)

#: Seconds between two sweeps, by default.
INTERVAL = 60.0
#: The environment variable that sets it (seconds; 0: no sweep).
INTERVAL_ENV = "MEMFS_EXPIRY_INTERVAL"


def interval() -> float:
    """The seconds between two sweeps: ``MEMFS_EXPIRY_INTERVAL``, else :data:`INTERVAL`; a
    value that is no number of seconds is said and the default taken (a process that keeps
    indexes is not refused for it)."""
    text = os.environ.get(INTERVAL_ENV, "").strip()
    if not text:
        return INTERVAL
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # NaN too
        log.warning("%s=%r is no number of seconds: the expiry sweep runs every %g s",
                    INTERVAL_ENV, text, INTERVAL)
        return INTERVAL
    return value


class Sweeper:
    """One round of the sweep over ``store_ids`` (None: every store of the database), and
    what the last rounds only reported, so that the log says it once, not every minute."""

    def __init__(self, store: Store, store_ids: Sequence[str] | None) -> None:
        self.store = store
        self.store_ids = None if store_ids is None else list(store_ids)
        self._reported: set[str] = set()

    def __call__(self) -> None:
        reported: list[dict[str, Any]] = []
        targets: list[str | None] = [None] if self.store_ids is None else [*self.store_ids]
        for sid in targets:
            r = self.store.typed.sweep(sid)
            if r["deleted"]:
                log.info("the expiry sweep deleted %d expired memories (undo: memfs session "
                         "revert %s)", len(r["deleted"]), " ".join(r["reverts"]))
            reported += r["reported"]
        seen = {m["memory_id"] for m in reported}
        new = [m for m in reported if m["memory_id"] not in self._reported]
        self._reported = seen
        for sid in sorted({m["memory_store_id"] for m in new}):
            n = sum(m["memory_store_id"] == sid for m in new)
            log.info("%d memories of %s have expired but are only reported: the store's "
                     "expiry is report (memfs stores update %s --metadata memfs_expiry=on "
                     "turns it on)", n, sid, sid)


def start_sweep(store: object, store_ids: Sequence[str] | None,
                every: float | None = None) -> Every | None:
    """Start the sweep of ``store_ids`` (None: every store) of ``store``, every ``every``
    seconds (default: :func:`interval`). None: not a local store (a server's client, a
    snapshot), no store to sweep, or the sweep turned off. Never raises."""
    if not isinstance(store, Store) or (store_ids is not None and not store_ids):
        return None
    seconds = interval() if every is None else every
    if seconds <= 0:
        log.info("no expiry sweep (%s=0)", INTERVAL_ENV)
        return None
    return Every("the expiry sweep", Sweeper(store, store_ids), seconds, log,
                 thread="memfs-expiry").start()
