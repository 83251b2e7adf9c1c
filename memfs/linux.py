"""The Linux calls memfs needs beyond :mod:`os`: libc (loaded once), namespaces, mounts,
``/proc``.

libc is loaded when this module is imported and its functions are looked up then, never later:
the launcher calls :func:`die_with_parent` between fork and exec (a ``preexec_fn``), where
nothing may run a program (``ctypes.util.find_library`` runs ``ldconfig``) or do much at all.
``CDLL(None)`` is the running program's own symbol table, which holds libc: nothing to find.

Each wrapper raises :class:`OSError` with the errno of a failed call.
"""

from __future__ import annotations

import ctypes
import os
import re

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37

_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_unshare = _libc.unshare
_unshare.argtypes = [ctypes.c_int]
_mount = _libc.mount
_mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                   ctypes.c_char_p]
_umount2 = _libc.umount2
_umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_setns = _libc.setns
_setns.argtypes = [ctypes.c_int, ctypes.c_int]

_OCTAL = re.compile(r"\\([0-7]{3})")


def _check(result: int) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def set_child_subreaper(on: bool = True) -> None:
    """Orphaned descendants of this process are reparented to it instead of to init (or,
    with ``on=False``, no longer)."""
    _check(_prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0))


def is_child_subreaper() -> bool:
    """Whether orphaned descendants of this process are reparented to it."""
    flag = ctypes.c_int(0)
    _check(_prctl(PR_GET_CHILD_SUBREAPER, ctypes.addressof(flag), 0, 0, 0))
    return bool(flag.value)


def die_with_parent(parent: int, signum: int) -> None:
    """Get ``signum`` when the parent dies, for a child between fork and exec.

    ``parent`` is the parent's pid, taken before the fork. The kernel sends the signal when
    the parent dies after the ``prctl``. A parent that died before it sends nothing, and then
    ``getppid()`` no longer returns ``parent``. In that case the child exits at once, with the
    status of a death by ``signum``, and never execs. Safe in a ``preexec_fn``: no allocation
    beyond a few Python objects, no program run.
    """
    _prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(128 + signum)


def set_parent_death_signal(signum: int) -> None:
    """Get ``signum`` when the parent dies (no check that it is still alive: see
    :func:`die_with_parent`)."""
    _check(_prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0))


def unshare(flags: int) -> None:
    """Move this thread into new namespaces (``unshare(2)``, ``CLONE_NEW*`` flags). A new
    PID namespace is its children's, not its own: the first child forked after it is that
    namespace's init (pid 1)."""
    _check(_unshare(flags))


def setns(fd: int, nstype: int) -> None:
    """Join the namespace open at ``fd`` (a ``/proc/PID/ns/*`` file); for a PID namespace,
    the one this thread's next children are born in."""
    _check(_setns(fd, nstype))


def mount_proc(target: str = "/proc") -> None:
    """A new ``proc`` on ``target``: the processes of the PID namespace of the caller, and no
    others (``nosuid,nodev,noexec``)."""
    _check(_mount(b"proc", os.fsencode(target), b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  None))


def make_mounts_private() -> None:
    """Stop mount propagation to and from the parent namespace, recursively from ``/``."""
    _check(_mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None))


def mount_tmpfs(source: str, target: str, options: str) -> None:
    _check(_mount(source.encode(), target.encode(), b"tmpfs", 0, options.encode()))


def bind_mount(source: str, target: str) -> None:
    """Make the directory ``source`` appear at ``target`` too (``mount --bind``)."""
    _check(_mount(os.fsencode(source), os.fsencode(target), None, MS_BIND, None))


def detach(path: str) -> None:
    """Lazily unmount ``path`` (``umount2(MNT_DETACH)``), the top mount on it only."""
    _check(_umount2(os.fsencode(path), MNT_DETACH))


def mount_points() -> set[str]:
    """Every mount point of this process's mount namespace (empty if /proc cannot be read)."""
    points = set()
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 1:
                    # Spaces, tabs, newlines and backslashes are octal escapes there.
                    points.add(_OCTAL.sub(lambda m: chr(int(m.group(1), 8)), fields[1]))
    except OSError:
        pass
    return points


SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
_IFREQ = "16sH22x"  # struct ifreq: the name, then the flags at the start of the union


def loopback_up() -> None:
    """Bring up ``lo`` in this thread's network namespace (a new one has it down)."""
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        got = fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, struct.pack(_IFREQ, b"lo", 0))
        flags = struct.unpack(_IFREQ, got)[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | IFF_UP))
