"""Ending the sessions whose local launcher died without ending them (``memfs session reap``,
and every local ``memfs run`` before it starts)."""

from __future__ import annotations

import logging
import os
import shutil
from typing import TYPE_CHECKING, Any

from .. import linux
from ..errors import MemfsError
from .procs import gone
from .sandbox import at_or_below, state_dir_path

if TYPE_CHECKING:
    from ..store import Store

log = logging.getLogger("memfs.launcher")  # the launcher's one logger, whichever module logs


def _remove_left_behind(session_id: str, owner: dict[str, Any]) -> None:
    """Delete the state directory and the private scratch root of a dead launcher, unless
    something is still mounted below them."""
    points = linux.mount_points()
    for path in (str(state_dir_path(session_id)), owner.get("scratch")):
        if not isinstance(path, str) or not os.path.isdir(path) or os.path.islink(path):
            continue
        if any(at_or_below(p, path) for p in points):
            log.warning("not deleting %s: something is still mounted below it", path)
            continue
        shutil.rmtree(path, ignore_errors=True)


def reap_sessions(store: Store) -> list[str]:
    """End the sessions whose local launcher died without ending them (``kill -9``, a crash,
    a reboot): each gets a ``session.error`` event and the ``terminated`` status, and what the
    launcher would have deleted (its state directory, a private scratch root it made) is
    deleted. Its mounts went with the launcher already (each daemon gets SIGTERM when its
    launcher dies).

    :returns: the ids of the sessions ended.
    """
    ended = []
    for sid, owner in store.sessions.launched():
        if not gone(owner):
            continue
        message = f"the launcher of this session (pid {owner.get('pid')}) ended without it"
        try:
            store.events.add(sid, [{
                "type": "session.error",
                "error": {"type": "unknown_error", "message": message,
                          "retry_status": "terminal"},
            }])
            store.sessions.set_status(sid, "terminated")
        except MemfsError as e:  # deleted meanwhile, say: nothing to end
            log.info("could not end session %s: %s", sid, e)
            continue
        log.warning("ended session %s: %s", sid, message)
        _remove_left_behind(sid, owner)
        ended.append(sid)
    return ended
