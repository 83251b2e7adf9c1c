"""POSIX checks shared by every mount test (after pyfuse3's test/test_examples.py ``tst_*``).

Each takes a directory on the filesystem under test and checks plain ``os`` behaviour; they
hold for tmpfs too, so a failure here is memfs' fault, not the check's.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest


def tst_write_read(d: Path) -> None:
    p = d / "wr.md"
    p.write_text("hello\n")
    assert p.read_text() == "hello\n"
    st = p.stat()
    assert stat.S_ISREG(st.st_mode) and st.st_size == 6


def tst_append(d: Path) -> None:
    p = d / "ap.md"
    p.write_text("a\n")
    with open(p, "a") as f:
        f.write("b\n")
    assert p.read_text() == "a\nb\n"


def tst_seek_partial(d: Path) -> None:
    p = d / "seek.md"
    p.write_text("0123456789")
    with open(p, "r+b") as f:
        f.seek(3)
        f.write(b"abc")
        f.seek(0)
        assert f.read() == b"012abc6789"
        f.truncate(5)
    assert p.read_bytes() == b"012ab"


def tst_readdir(d: Path) -> None:
    sub = d / "rd"
    sub.mkdir()
    for name in ("b.md", "a.md", "c.md"):
        (sub / name).write_text(name)
    (sub / "dir").mkdir()
    assert sorted(os.listdir(sub)) == ["a.md", "b.md", "c.md", "dir"]
    kinds = {e.name: e.is_dir() for e in os.scandir(sub)}
    assert kinds == {"a.md": False, "b.md": False, "c.md": False, "dir": True}


def tst_mkdir_rmdir(d: Path) -> None:
    sub = d / "mk"
    sub.mkdir()
    with pytest.raises(FileExistsError):
        sub.mkdir()
    (sub / "f.md").write_text("x")
    with pytest.raises(OSError) as e:
        sub.rmdir()
    assert e.value.errno == errno.ENOTEMPTY
    (sub / "f.md").unlink()
    sub.rmdir()
    assert not sub.exists()


def tst_unlink(d: Path) -> None:
    p = d / "un.md"
    p.write_text("x")
    p.unlink()
    assert not p.exists()
    with pytest.raises(FileNotFoundError):
        p.unlink()


def tst_rename(d: Path) -> None:
    a, b = d / "ren-a.md", d / "ren-b.md"
    a.write_text("A")
    b.write_text("B")
    ino = a.stat().st_ino
    os.rename(a, b)
    assert not a.exists() and b.read_text() == "A"
    assert b.stat().st_ino == ino


def tst_truncate(d: Path) -> None:
    p = d / "tr.md"
    p.write_text("hello world")
    os.truncate(p, 5)
    assert p.read_text() == "hello"
    with open(p, "w"):
        pass
    assert p.read_text() == ""


def tst_stat_times_accepted(d: Path) -> None:
    p = d / "times.md"
    p.write_text("t")
    os.chmod(p, 0o600)
    os.utime(p, (1_000_000_000, 1_000_000_000))
    os.chown(p, os.getuid(), os.getgid())
    assert p.read_text() == "t"


ALL = [
    tst_write_read, tst_append, tst_seek_partial, tst_readdir, tst_mkdir_rmdir, tst_unlink,
    tst_rename, tst_truncate, tst_stat_times_accepted,
]
