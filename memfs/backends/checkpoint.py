"""Checkpointing an SQLite database's WAL in a thread of its own, not in a commit.

In WAL mode SQLite copies the WAL's pages into the database file (a *checkpoint*) in the commit
that takes the WAL past ``wal_autocheckpoint`` pages. A mount commits at every close, so one
close in about 500 paid for copying every page the others wrote and syncing the file: 25–30 µs
a write at the store, on average (docs/performance.md, the seventh round: 1.8–5.6 % of each
operation through a mount).

:class:`Checkpointer` does it instead, in a thread at the lowest CPU priority with a
connection of its own (:meth:`SQLiteDatabase.checkpoint_passive
<memfs.backends.sqlite.SQLiteDatabase.checkpoint_passive>`): ``pause`` seconds after a commit,
a PASSIVE checkpoint copies what was committed by then while the writer goes on committing,
and never waits for a lock. The writer keeps an automatic checkpoint of its own, at
:data:`SAFETY` times the size, for when the thread cannot keep up (every core busy). A
checkpoint is also where a ``synchronous=NORMAL`` database reaches the disk: commits now get
there within about ``pause`` seconds, where they waited for the 16,000th page before.

The thread starts at the first commit (a process that forks before it writes forks no
thread), sleeps while nothing is committed, and is stopped by the database's ``close``.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from ..background import Failures, lowest_priority

if TYPE_CHECKING:
    from .sqlite import SQLiteDatabase

log = logging.getLogger(__name__)

#: The writer's own automatic checkpoint, with a checkpointer: this many times the pages.
SAFETY = 4

#: Bytes of WAL a writer keeps when it starts the WAL over (SQLite's ``journal_size_limit``).
#: A busy mount writes 15-30 MB of WAL between two checkpoints: with 4 MiB kept, every
#: checkpoint was followed by a TRUNCATE one (10-25 ms holding the writer's lock, 12 in 1,000
#: renames) and the WAL grew again from nothing (issue 45: a commit 99-107 -> 93-95 µs).
WAL_KEPT = 64 * 1024 * 1024

#: What a WAL that grew while a checkpoint was held back (a long reader) is truncated to once
#: a checkpoint copies all of it, however large it grew: it must not keep its size (issue 38).
WAL_SHRUNK = 4 * 1024 * 1024


class Checkpointer:
    """Checkpoints ``database`` ``pause`` seconds after a commit (see the module)."""

    def __init__(self, database: SQLiteDatabase, pause: float = 0.5) -> None:
        self.database = database
        self.pause = pause
        self.failures = Failures("the WAL checkpointer", log, first=pause, most=30.0)
        #: Checkpoints made (for tests).
        self.checkpoints = 0
        self._due = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def committed(self) -> None:
        """Called after each commit of the database's writer: cheap when already due."""
        if not self._due.is_set():
            if self._thread is None:
                self._start()
            self._due.set()

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None and not self._stopped.is_set():
                self._thread = threading.Thread(target=self._run, name="memfs-checkpoint",
                                                daemon=True)
                self._thread.start()

    def stop(self) -> None:
        """Stop, after the checkpoint under way."""
        with self._start_lock:
            self._stopped.set()
            self._due.set()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        lowest_priority()
        while True:
            self._due.wait()
            # The commits of the next moment join this checkpoint.
            if self._stopped.wait(self.pause):
                return
            self._due.clear()
            # A stop() since the wait above set _due before this clear took it back, and the
            # wait for _due would never end (stop() joining this thread for ever); it set
            # _stopped first, so this sees it.
            if self._stopped.is_set():
                return
            try:
                done = self.database.checkpoint_passive()
                if done is not None:
                    self.checkpoints += 1
                    busy, frames, copied = done
                    if busy or copied < frames:
                        # Held back (a reader in the WAL, or a writer while truncating it):
                        # tried again a pause later, commit or not, until it is all copied
                        # and the WAL small again; else a long reader's WAL stays until the
                        # next commit (issue 38).
                        self._due.set()
            except Exception as e:
                self._due.set()  # tried again after the pause the failures rule says
                if self._stopped.wait(max(self.pause, self.failures.failed(e))):
                    return
            else:
                self.failures.recovered()
