"""The session launcher: attach stores to a session, mount each one, run the agent in them.

``memfs run --store REF[:read_only|:read_write] ... -- CMD`` (SPEC §3):

1. creates the session through the store (which validates the attachments and derives every
   ``mount_path``); nothing is mounted or created on disk before that succeeds;
2. makes the root (``/mnt/memory`` by default when privileged) session scratch. Privileged, the
   launcher moves into a private mount namespace and mounts a tmpfs on the root, so whatever
   the agent writes outside a mount path vanishes with the namespace and no other session (nor
   the host) ever sees it. Unprivileged, the root is a new (or empty) directory that is deleted
   at the end;
3. mounts the stores. In the private namespace ONE daemon (:mod:`memfs.daemons.sessionfs`) serves
   them all: its filesystem (one directory per store) is mounted at a hidden place, each
   directory is bind-mounted onto its mount path, and the hidden mount is detached. Without a
   namespace, one ``memfs mount`` daemon per store, started concurrently. Either way the
   launcher waits until every store is mounted;
4. renders the memory section of the system prompt to a file, marks the session ``running``
   and runs CMD with ``MEMFS_SESSION_ID`` and ``MEMFS_SYSTEM_PROMPT_FILE``, forwarding
   SIGINT/SIGTERM/SIGHUP (a CMD that ignores SIGTERM/SIGHUP is killed after
   :data:`~memfs.launcher.command.KILL_GRACE` seconds);
5. always cleans up: processes CMD left behind are stopped (the launcher is their subreaper),
   every mount is removed (SIGTERM to each daemon, then a lazy unmount of anything left),
   scratch is discarded, the session is marked ``terminated``, and ``memfs run`` exits with
   CMD's status (128+N when CMD died of signal N). If a mount daemon dies, CMD is stopped, a
   ``session.error`` event is recorded and the launcher fails with a clear error instead of
   leaving the agent on a dead mount.

Known limitations: stores are attached for the life of the session (as in the API); the
namespace mode needs root (CAP_SYS_ADMIN); a ``kill -9`` of the launcher itself cannot mark
the session terminated (the daemons and CMD still get a parent-death signal).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal

from .. import linux
from ..errors import MemfsError
from ..store import Store
from .command import Command
from .plan import Launch
from .reap import reap_sessions
from .sandbox import _at_or_below, _state_dir, _unmount

log = logging.getLogger("memfs.launcher")  # the launcher's one logger, whichever module logs


class Launcher(Command):
    """Runs one session: set up, run CMD, always clean up (see the module docstring)."""

    def _discard_scratch(self) -> None:
        """Unmount the scratch tmpfs, or delete what the session wrote in its root directory
        (the directory too if we made it). A root that never became scratch is not touched."""
        if not (self._scratch_made or self._root_created):
            return  # set-up stopped before the root was ours: leave it exactly as it was
        if self.namespace:
            # The tmpfs goes away with the namespace when we exit; detach it now all the same.
            # The directory under it stays: another session may have its own tmpfs on it.
            _unmount(self.root)
        elif os.path.isdir(self.root):
            points = linux.mount_points()
            below = [p for p in points if _at_or_below(p, self.root)]
            if below:
                log.error("not deleting %s: %s is still mounted", self.root, below[0])
            elif self._root_created:
                shutil.rmtree(self.root, ignore_errors=True)
            else:
                for entry in os.listdir(self.root):
                    path = os.path.join(self.root, entry)
                    if os.path.isdir(path) and not os.path.islink(path):
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        os.unlink(path)
                if self._root_stat is not None:  # lent to the agent: give it back
                    os.chown(self.root, self._root_stat.st_uid, self._root_stat.st_gid)
                    os.chmod(self.root, self._root_stat.st_mode & 0o7777)

    def _cleanup(self) -> None:
        """Every step runs even if an earlier one fails."""
        steps = (self._stop_command, self._stop_leftovers, self._stop_api, self._stop_mounts,
                 self._discard_scratch)
        for step in steps:
            try:
                step()
            except Exception:
                log.exception("clean-up step %s failed", step.__name__)
        if self.state_dir is not None:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        if self.session is not None:
            try:
                self.store.set_session_status(self.session.id, "terminated")
            except MemfsError as e:
                log.error("cannot mark session %s terminated: %s", self.session.id, e)

    def run(self) -> int:
        """Run the whole session; returns the exit status for ``memfs run``.

        :raises LaunchError: the session could not be set up, CMD could not be started, or a
            mount died (``status`` is the exit status to use).
        :raises MemfsError: the store refused the attachments (nothing was set up).
        """
        handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        previous = {s: signal.signal(s, self._on_signal) for s in handled}
        # Orphans of CMD come to us, so that none outlives the session (see _stop_leftovers);
        # only while it runs: a caller that runs sessions in-process (Python, tests) must not
        # stay the adopter of every later orphan, which it would never reap.
        was_subreaper = True
        try:
            was_subreaper = linux.is_child_subreaper()
            linux.set_child_subreaper()
        except OSError as e:
            log.warning("cannot become the subreaper of the command: %s", e.strerror)
        try:
            if isinstance(self.store, Store):  # a server reaps its own sessions
                reap_sessions(self.store)
            self._choose_root()
            self._refuse_a_readable_database()
            self._refuse_a_neighbour_of_the_same_user()
            self.session = self._create_session()
            log.info("session %s, root %s (%s)", self.session.id, self.root,
                     "private namespace" if self.namespace else "scratch directory")
            self._make_scratch()
            # After the scratch, so that a root over $TMPDIR (--root /tmp) cannot hide it.
            self.state_dir = _state_dir(self.session.id)
            self.state_dir.mkdir(mode=0o700)  # never an existing path (or a planted link)
            self._start_api()
            self._start_mounts()
            if self._stop_signal is not None:
                return 128 + self._stop_signal
            return self._run_command()
        finally:
            try:
                self._cleanup()
            finally:
                self.store.close()
                for s, h in previous.items():
                    signal.signal(s, h)
                if not was_subreaper:
                    with contextlib.suppress(OSError):
                        linux.set_child_subreaper(False)


def run(launch: Launch) -> int:
    """Run a session (see :class:`Launcher`); returns CMD's exit status.

    :raises LaunchError, MemfsError: see :meth:`Launcher.run`.
    """
    return Launcher(launch).run()
