"""The session's root as scratch: the private mount namespace with a tmpfs on the root, lazy
unmounts, and where a session's state directory is."""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
from pathlib import Path

from .. import linux
from .agent import Agent, privileged
from .plan import LaunchError

log = logging.getLogger("memfs.launcher")  # the launcher's one logger, whichever module logs


def enter_private_namespace(root: str, agent: Agent | None = None) -> None:
    """Move this process into a private mount namespace with a tmpfs on ``root`` (the
    agent's only, mode 0700, when CMD runs as another user).

    Mount propagation is made private first, so nothing mounted here (tmpfs, FUSE) shows up
    in the parent namespace, and everything disappears when the last process in it exits.
    """
    try:
        linux.unshare(linux.CLONE_NEWNS)
    except OSError as e:
        raise LaunchError(f"cannot create a private mount namespace: {e.strerror}") from None
    try:
        linux.make_mounts_private()
    except OSError as e:
        raise LaunchError(f"cannot make mounts private: {e.strerror}") from None
    try:
        os.makedirs(root, exist_ok=True)
    except OSError as e:
        raise LaunchError(f"cannot create the session root {root}: {e.strerror}") from None
    try:
        linux.mount_tmpfs("memfs-scratch", root, "mode=0755" if agent is None else
                          f"mode=0700,uid={agent.uid},gid={agent.gid}")
    except OSError as e:
        raise LaunchError(f"cannot mount session scratch on {root}: {e.strerror}") from None


def _in_proc_mounts(path: str) -> bool:
    return path in linux.mount_points()


def unmount(path: str) -> None:
    """Lazily detach ``path`` and everything mounted on it (a dead FUSE mount too)."""
    for _ in range(8):  # stacked mounts come off one at a time
        if not _in_proc_mounts(path):
            return
        if privileged():
            try:
                linux.detach(path)
            except OSError as e:
                log.warning("cannot unmount %s: %s", path, e.strerror)
                return
        else:
            done = subprocess.run(
                ["fusermount3", "-uz", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            if done.returncode != 0:
                log.warning("cannot unmount %s: %s", path, done.stderr.decode(errors="replace"))
                return


def at_or_below(path: str, top: str) -> bool:
    """Is ``path`` the directory ``top`` or inside it (by path, not by prefix string)?"""
    return path == top or path.startswith(top.rstrip("/") + "/")


def state_dir_path(session_id: str) -> Path:
    """Where a session's launcher keeps its prompt file and the mounts' logs."""
    return Path(tempfile.gettempdir()) / f"memfs-session-{session_id}"
