"""Every mutating system call, tried on a read-only store's mount: ``python ro_syscalls.py DIR``.

DIR must hold the file ``a.md`` and the directory ``d`` (with a file in it). Prints one JSON
object: for each call, ``[errno, operation, path]`` where ``errno`` is 0 if the call
succeeded, and ``operation``/``path`` (relative to DIR) name the tool event the mount must log
for the refusal (null when the call never reaches the mount: the kernel refuses a write
through a descriptor that was opened read-only, with EBADF/EINVAL, before FUSE sees it; a
writable descriptor is what the open calls above it are refused).

Run as whatever user the test wants (``memfs run --user``, ``setpriv``, inside bubblewrap):
only the standard library, nothing written outside DIR but a scratch file in $TMPDIR.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
from collections.abc import Callable
from typing import Any


def main(root: str) -> dict[str, list[Any]]:
    a = os.path.join(root, "a.md")
    d = os.path.join(root, "d")
    st = os.stat(a)
    results: dict[str, list[Any]] = {}

    def attempt(name: str, fn: Callable[[], object], op: str | None, path: str | None) -> None:
        try:
            fn()
            results[name] = [0, op, path]
        except OSError as e:
            results[name] = [e.errno, op, path]

    def opener(path: str, flags: int) -> Callable[[], None]:
        return lambda: os.close(os.open(path, flags, 0o600))

    def sock() -> None:
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(os.path.join(root, "sock"))

    # Opens that would give a writable descriptor, or create or truncate a file.
    attempt("open O_WRONLY", opener(a, os.O_WRONLY), "write", "a.md")
    attempt("open O_RDWR", opener(a, os.O_RDWR), "write", "a.md")
    attempt("open O_WRONLY|O_APPEND", opener(a, os.O_WRONLY | os.O_APPEND), "write", "a.md")
    attempt("open O_WRONLY|O_TRUNC", opener(a, os.O_WRONLY | os.O_TRUNC), "write", "a.md")
    attempt("open O_RDONLY|O_TRUNC", opener(a, os.O_RDONLY | os.O_TRUNC), "write", "a.md")
    attempt("open O_CREAT|O_WRONLY", opener(os.path.join(root, "new.md"),
                                            os.O_CREAT | os.O_WRONLY), "create", "new.md")
    attempt("open O_CREAT|O_RDONLY", opener(os.path.join(root, "new2.md"),
                                            os.O_CREAT | os.O_RDONLY), "create", "new2.md")
    attempt("open O_CREAT|O_EXCL in a subdirectory", opener(
        os.path.join(d, "new.md"), os.O_CREAT | os.O_EXCL | os.O_RDWR), "create", "d/new.md")
    # By path.
    attempt("truncate", lambda: os.truncate(a, 0), "truncate", "a.md")
    attempt("rename", lambda: os.rename(a, os.path.join(root, "b.md")), "rename", "a.md")
    attempt("rename a directory", lambda: os.rename(d, os.path.join(root, "e")), "rename", "d")
    attempt("unlink", lambda: os.unlink(a), "delete", "a.md")
    attempt("mkdir", lambda: os.mkdir(os.path.join(root, "m")), "mkdir", "m")
    attempt("rmdir", lambda: os.rmdir(d), "rmdir", "d")
    attempt("setxattr", lambda: os.setxattr(a, "user.x", b"1"), "setxattr", "a.md")
    attempt("removexattr", lambda: os.removexattr(a, "user.memfs.memory_id"),
            "removexattr", "a.md")
    attempt("utimensat", lambda: os.utime(a, ns=(1, 1)), "utimes", "a.md")
    attempt("utimensat now (touch)", lambda: os.utime(a), "utimes", "a.md")
    attempt("chmod", lambda: os.chmod(a, 0o400), "chmod", "a.md")
    attempt("chmod a directory", lambda: os.chmod(d, 0o500), "chmod", "d")
    attempt("chown", lambda: os.chown(a, st.st_uid, st.st_gid), "chown", "a.md")
    attempt("link", lambda: os.link(a, os.path.join(root, "l.md")), "link", "l.md")
    attempt("symlink", lambda: os.symlink("a.md", os.path.join(root, "s")), "symlink", "s")
    attempt("mkfifo", lambda: os.mkfifo(os.path.join(root, "f")), "mknod", "f")
    attempt("mknod socket", lambda: os.mknod(os.path.join(root, "n"), 0o600 | 0o140000),
            "mknod", "n")
    attempt("bind a unix socket", sock, "mknod", "sock")
    # Through a descriptor opened read-only (the only kind the mount hands out here).
    fd = os.open(a, os.O_RDONLY)
    with tempfile.TemporaryFile() as src:
        src.write(b"zzz")
        src.flush()
        attempt("write", lambda: os.write(fd, b"x"), None, None)
        attempt("pwrite", lambda: os.pwrite(fd, b"x", 0), None, None)
        attempt("ftruncate", lambda: os.ftruncate(fd, 0), None, None)
        attempt("fallocate", lambda: os.posix_fallocate(fd, 0, 10), None, None)
        attempt("copy_file_range into it",
                lambda: os.copy_file_range(src.fileno(), fd, 3, 0, 0), None, None)
    os.close(fd)
    return results


if __name__ == "__main__":
    json.dump(main(sys.argv[1]), sys.stdout)
    print()
