"""A stop signal at any moment of a ``memfs mount``'s life is a clean stop (issue 38): the mount
(if it was made) is unmounted, the mount point the daemon made is removed, the exit status is
0 and nothing but the daemon's own lines is on stderr (never a traceback)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import wait_until
from tests.support.mount import MOUNT_DEADLINE, in_proc_mounts

pytestmark = pytest.mark.fuse

READY_LINE = "mounted; Ctrl-C or fusermount3 -u to stop"


def _has_open(pid: int, path: Path) -> bool:
    """The process holds ``path`` open (it has started the mount command's work)."""
    fds = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fds)
    except FileNotFoundError:
        return True  # it exited: the signal below finds it gone, and the checks say why
    for fd in names:
        try:
            if os.readlink(f"{fds}/{fd}") == str(path):
                return True
        except OSError:
            continue
    return False


#: When the signal is sent: once the daemon opened the database (before the mount), as soon
#: as the kernel mount is there (before or while it says so), right when it said it on stdout,
#: and a few moments later (while trio and the background services start).
MOMENTS = ["database-open", "kernel-mount", "stdout-line", "0.005", "0.02", "0.1"]


@pytest.mark.parametrize("moment", MOMENTS)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_at_any_moment_after_start_is_a_clean_stop(
        fuse, open_store, db, tmp_path, sig, moment):
    sid = open_store().stores.create("s").id
    root = tmp_path / "m"  # missing: the daemon makes it, and removes it at unmount
    proc = subprocess.Popen(
        [sys.executable, "-m", "memfs", "--db", str(db), "mount", sid, str(root)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "MEMFS_EMBEDDINGS": "none"},
    )
    try:
        if moment == "database-open":
            wait_until(lambda: _has_open(proc.pid, db), MOUNT_DEADLINE, interval=0.001,
                       what="the daemon has the database open")
        elif moment == "kernel-mount":
            wait_until(lambda: in_proc_mounts(root) or proc.poll() is not None,
                       MOUNT_DEADLINE, interval=0.001, what=f"{root} mounted")
        else:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == str(root)
            if moment != "stdout-line":
                time.sleep(float(moment))
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if in_proc_mounts(root):
            subprocess.run(["fusermount3", "-uz", str(root)], check=False)
            pytest.fail(f"{root} was left mounted")
    assert "Traceback" not in err, err
    assert proc.returncode == 0, err
    assert not root.exists(), "the mount point the daemon made was left behind"
    if moment not in ("database-open", "kernel-mount"):
        assert f"memfs: {READY_LINE}" in err.splitlines(), err


def test_mount_says_once_mounted_how_to_stop(fuse, open_store, db, tmp_path):
    """One line on stderr once mounted, for whoever started it in a terminal (issue 38)."""
    sid = open_store().stores.create("s").id
    root = tmp_path / "m"
    proc = subprocess.Popen(
        [sys.executable, "-m", "memfs", "--db", str(db), "mount", sid, str(root)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "MEMFS_EMBEDDINGS": "none"},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == str(root)
        assert proc.stderr is not None
        # Said once mounted: there before any stop (a daemon that never says it fails here).
        ready, _, _ = select.select([proc.stderr], [], [], MOUNT_DEADLINE)
        assert ready and proc.stderr.readline() == f"memfs: {READY_LINE}\n"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
        if in_proc_mounts(root):
            subprocess.run(["fusermount3", "-uz", str(root)], check=False)
    assert proc.returncode == 0 and "Traceback" not in err, err
