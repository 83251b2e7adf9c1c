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

Each step is a function of the launch's state (:class:`~memfs.launcher.state.LaunchState`), in
the module of its concern: :mod:`~.setup`, :mod:`~.credential`, :mod:`~.mounts`,
:mod:`~.command`; :meth:`Launcher.run` calls them in order, and a caller changes a step only
through :class:`Hooks` (a dream run by a command, :mod:`memfs.dreams.command`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass

from .. import linux
from ..errors import MemfsError
from ..models import Session
from ..store import Store
from . import command, credential, mounts, setup
from .plan import Launch
from .reap import reap_sessions
from .sandbox import at_or_below, state_dir_path, unmount
from .state import LaunchState, open_state

log = logging.getLogger("memfs.launcher")  # the launcher's one logger, whichever module logs


@dataclass(frozen=True)
class Hooks:
    """What a caller adds to a launch, each a function of its state (a dream's session,
    :mod:`memfs.dreams.command`): ``create_session`` instead of :func:`.setup.create_session`,
    ``mounted`` once every store is mounted (before CMD), ``cleaning_up`` before the
    clean-up."""

    create_session: Callable[[LaunchState], Session] | None = None
    mounted: Callable[[LaunchState], None] | None = None
    cleaning_up: Callable[[LaunchState], None] | None = None


class Launcher:
    """Runs one session: set up, run CMD, always clean up (see the module docstring)."""

    def __init__(self, launch: Launch, hooks: Hooks | None = None) -> None:
        self.state = open_state(launch)
        self.hooks = hooks or Hooks()

    def run(self) -> int:
        """Run the whole session; returns the exit status for ``memfs run``.

        :raises LaunchError: the session could not be set up, CMD could not be started, or a
            mount died (``status`` is the exit status to use).
        :raises MemfsError: the store refused the attachments (nothing was set up).
        """
        st, hooks = self.state, self.hooks
        handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        previous = {s: signal.signal(s, functools.partial(command.on_signal, st))
                    for s in handled}
        # Orphans of CMD come to us, so that none outlives the session (see stop_leftovers);
        # only while it runs: a caller that runs sessions in-process (Python, tests) must not
        # stay the adopter of every later orphan, which it would never reap.
        was_subreaper = True
        try:
            was_subreaper = linux.is_child_subreaper()
            linux.set_child_subreaper()
        except OSError as e:
            log.warning("cannot become the subreaper of the command: %s", e.strerror)
        try:
            if isinstance(st.store, Store):  # a server reaps its own sessions
                reap_sessions(st.store)
            setup.choose_root(st)
            setup.refuse_a_readable_database(st)
            setup.refuse_a_neighbour_of_the_same_user(st)
            st.session = (hooks.create_session or setup.create_session)(st)
            log.info("session %s, root %s (%s)", st.session.id, st.root,
                     "private namespace" if st.namespace else "scratch directory")
            setup.make_scratch(st)
            # After the scratch, so that a root over $TMPDIR (--root /tmp) cannot hide it.
            st.state_dir = state_dir_path(st.session.id)
            st.state_dir.mkdir(mode=0o700)  # never an existing path (or a planted link)
            credential.start_api(st)
            mounts.start_mounts(st)
            if hooks.mounted is not None:
                hooks.mounted(st)
            if st.stop_signal is not None:
                return 128 + st.stop_signal
            return command.run_command(st)
        finally:
            try:
                if hooks.cleaning_up is not None:
                    hooks.cleaning_up(st)
                _cleanup(st)
            finally:
                st.store.close()
                for s, h in previous.items():
                    signal.signal(s, h)
                if not was_subreaper:
                    with contextlib.suppress(OSError):
                        linux.set_child_subreaper(False)


def _discard_scratch(st: LaunchState) -> None:
    """Unmount the scratch tmpfs, or delete what the session wrote in its root directory
    (the directory too if we made it). A root that never became scratch is not touched."""
    if not (st.scratch_made or st.root_created):
        return  # set-up stopped before the root was ours: leave it exactly as it was
    if st.namespace:
        # The tmpfs goes away with the namespace when we exit; detach it now all the same.
        # The directory under it stays: another session may have its own tmpfs on it.
        unmount(st.root)
    elif os.path.isdir(st.root):
        points = linux.mount_points()
        below = [p for p in points if at_or_below(p, st.root)]
        if below:
            log.error("not deleting %s: %s is still mounted", st.root, below[0])
        elif st.root_created:
            shutil.rmtree(st.root, ignore_errors=True)
        else:
            for entry in os.listdir(st.root):
                path = os.path.join(st.root, entry)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
            if st.root_stat is not None:  # lent to the agent: give it back
                os.chown(st.root, st.root_stat.st_uid, st.root_stat.st_gid)
                os.chmod(st.root, st.root_stat.st_mode & 0o7777)


def _cleanup(st: LaunchState) -> None:
    """Every step runs even if an earlier one fails."""
    steps = (command.stop_command, command.stop_leftovers, credential.stop_api,
             mounts.stop_mounts, _discard_scratch)
    for step in steps:
        try:
            step(st)
        except Exception:
            log.exception("clean-up step %s failed", step.__name__)
    if st.state_dir is not None:
        shutil.rmtree(st.state_dir, ignore_errors=True)
    if st.session is not None:
        try:
            st.store.sessions.set_status(st.session.id, "terminated")
        except MemfsError as e:
            log.error("cannot mark session %s terminated: %s", st.session.id, e)


def run(launch: Launch) -> int:
    """Run a session (see :class:`Launcher`); returns CMD's exit status.

    :raises LaunchError, MemfsError: see :meth:`Launcher.run`.
    """
    return Launcher(launch).run()
