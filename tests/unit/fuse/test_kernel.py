""":func:`memfs.fuse.kernel.fds_on` against a real process's ``/proc`` (this one's, a
temporary directory standing for the mount point)."""

from __future__ import annotations

import os
import subprocess

from memfs.fuse.kernel import fds_on


def test_counts_the_descriptors_of_one_inode_under_the_mount_point(tmp_path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    (mnt / "a.md").write_text("a")
    (mnt / "b.md").write_text("b")
    (tmp_path / "outside.md").write_text("o")
    ino = os.stat(mnt / "a.md").st_ino
    pid = os.getpid()
    assert fds_on(pid, str(mnt), ino) == 0
    fd = os.open(mnt / "a.md", os.O_WRONLY)
    other = os.open(mnt / "b.md", os.O_RDONLY)
    outside = os.open(tmp_path / "outside.md", os.O_RDONLY)
    try:
        assert fds_on(pid, str(mnt), ino) == 1
        assert fds_on(pid, str(mnt) + "/", ino) == 1
        copy = os.dup(fd)  # a copy of the open file: counted too
        assert fds_on(pid, str(mnt), ino) == 2
        os.close(fd)
        fd = copy
        assert fds_on(pid, str(mnt), ino) == 1
        # Another inode under the mount point, and the same file seen from elsewhere: not it.
        assert fds_on(pid, str(mnt), os.stat(tmp_path / "outside.md").st_ino) == 0
        assert fds_on(pid, str(tmp_path / "mn"), ino) == 0
    finally:
        for d in (fd, other, outside):
            os.close(d)
    assert fds_on(pid, str(mnt), ino) == 0


def test_a_process_that_is_gone_holds_nothing(tmp_path) -> None:
    child = subprocess.Popen(["true"])
    child.wait()
    assert fds_on(child.pid, str(tmp_path), 1) == 0
