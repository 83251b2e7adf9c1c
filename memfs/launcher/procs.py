"""The launcher's processes: what runs in a child between fork and exec (the parent-death
signal), the children it reaps, and a process's identity (which outlives its pid's reuse, so
that a dead launcher's sessions can be told apart from a live one's)."""

from __future__ import annotations

import os
import signal
import socket
from typing import Any

from .. import linux


def daemon_preexec(launcher: int) -> None:
    """In a mount daemon's child before exec: its own session, so our terminal's Ctrl-C
    reaches the launcher (which unmounts in order) rather than the daemons; and SIGTERM when
    the launcher (pid ``launcher``, taken before the fork) dies, so that even a ``kill -9``
    of the launcher unmounts everything. Use ``functools.partial(daemon_preexec, pid)``."""
    os.setsid()
    linux.die_with_parent(launcher, signal.SIGTERM)


def command_preexec(launcher: int) -> None:
    """In CMD's child before exec: SIGHUP (as when a terminal goes away) if the launcher
    (pid ``launcher``, taken before the fork) dies, since the session CMD belongs to is then
    over. Runs after :class:`subprocess.Popen` switched to the agent's user/groups (a change
    of user clears the parent-death signal, so it must come after). SIGTERM where SIGHUP is
    ignored (``nohup memfs run``): CMD inherits that, and would never hear of the end."""
    hup_ignored = signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    linux.die_with_parent(launcher, signal.SIGTERM if hup_ignored else signal.SIGHUP)


def init_preexec() -> None:
    """In the child that becomes the init of CMD's PID namespace (:mod:`.pidinit`), before
    exec: SIGHUP when the launcher dies, which the init passes on to CMD (and kills it after
    the grace). Its parent is outside its namespace, so ``getppid()`` says 0 and cannot tell
    whether the launcher died before this: it cannot have, since the launcher waits for the
    exec to succeed (a ``kill -9`` in between aside)."""
    linux.set_parent_death_signal(signal.SIGHUP)


def _stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (the state first, then the
    parent's pid...), or None if there is no such process. ``pid (comm) state ppid ...``:
    the name may hold spaces and parentheses."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()
    except OSError:
        return None


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (scans /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        rest = _stat_fields(entry)
        if rest is not None and len(rest) > 1 and int(rest[1]) == pid:
            found.append(int(entry))
    return found


def _ancestors() -> set[int]:
    """This process and the chain of its parents."""
    found, pid = set(), os.getpid()
    while pid > 1 and pid not in found:
        found.add(pid)
        rest = _stat_fields(pid)
        if rest is None or len(rest) < 2:
            break
        pid = int(rest[1])
    return found


def session_agents(uid: int) -> list[tuple[int, str, bool]]:
    """The processes of user ``uid`` that belong to a memfs session (its ``MEMFS_SESSION_ID``
    is in their environment), this process's ancestors aside: ``(pid, session id, in our PID
    namespace)``. Those whose environment cannot be read are not found."""
    found = []
    ours = _pid_namespace("self")
    mine = _ancestors()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        for var in env.split(b"\0"):
            if var.startswith(b"MEMFS_SESSION_ID="):
                sid = var.partition(b"=")[2].decode(errors="replace")
                found.append((int(entry), sid, _pid_namespace(entry) == ours))
                break
    return found


def _pid_namespace(pid: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def reap_child(pid: int) -> bool:
    """Collect ``pid`` if it has exited; True when it is gone."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


def describe_status(status: int | None) -> str:
    if status is None:
        return "still running"
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exited with status {status}"


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None if there is none."""
    rest = _stat_fields(pid)
    return None if rest is None else int(rest[19])  # field 22 of the file


def process_identity(pid: int) -> dict[str, Any]:
    """What tells this process apart from any other, even after its pid is reused."""
    return {"host": socket.gethostname(), "boot_id": _boot_id(), "pid": pid,
            "start": _start_ticks(pid)}


def gone(owner: dict[str, Any]) -> bool:
    """Is the process ``owner`` (a :func:`process_identity`) known to have ended? A process
    of another host is never known to have ended."""
    if owner.get("host") != socket.gethostname():
        return False
    if owner.get("boot_id") != _boot_id():
        return True  # this host rebooted since
    pid = owner.get("pid")
    return not isinstance(pid, int) or _start_ticks(pid) != owner.get("start")
