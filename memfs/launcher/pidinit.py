"""The init of an agent's PID namespace: what a privileged ``memfs run`` starts instead of CMD.

An agent is untrusted code. In the host's PID namespace it could read every process's
``/proc/PID/cmdline`` (a server started with its key there), and another agent of the same
user could read its ``/proc/PID/environ`` (the session token) or walk into its mounts through
``/proc/PID/root``. So the launcher starts this script as the first process of a new PID
namespace (:meth:`~memfs.launcher.command.Command._spawn`), and it:

1. moves into a mount namespace of its own (a child of the session's private one: the same
   mounts) and mounts a new ``/proc`` there, which shows the namespace's processes only; with
   ``network: none`` also into a new network namespace with nothing but ``lo``;
2. forks CMD as the agent's user (pid 2), with the environment it was given;
3. as pid 1 forwards the signals the launcher sends it (the kernel delivers nothing else to a
   namespace's init; a SIGINT comes as :data:`RELAY_SIGINT`), kills CMD after ``kill_grace``
   seconds once it was told to stop (also when the launcher dies: its parent-death signal is
   SIGHUP), reaps every orphan;
4. when CMD ends, stops what it left behind (SIGTERM, SIGKILL after ``leftover_grace``) and
   exits with CMD's status (128+N when it died of signal N). When it exits, the kernel kills
   whatever is left in the namespace: nothing of the agent outlives it.

Run as ``python -I -S pidinit.py CONFIG_JSON CMD...``: the standard library only (a start
in milliseconds, no import of memfs), with :mod:`memfs.linux` loaded by its path.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import json
import os
import signal
import sys
from types import FrameType, ModuleType
from typing import Any

#: The signals passed on to CMD.
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGWINCH)
#: What the launcher sends for a SIGINT that CMD is to get. A SIGINT of our terminal reaches
#: CMD by itself (our foreground process group is its), and we cannot tell the two apart: in a
#: PID namespace ``getpgrp()`` and ``tcgetpgrp()`` of an outside group are both 0. So SIGINT
#: itself is ignored here, and the launcher, which can tell, relays the ones to pass on.
RELAY_SIGINT = signal.SIGRTMIN + 1
#: Ignored by Python at its start, and so by what it execs, unless set back: CMD gets them
#: with their default action, as any program does (a pipe reader that went away ends
#: ``yes | head -1``).
RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)


def _load_linux() -> ModuleType:
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "linux.py")
    spec = importlib.util.spec_from_file_location("memfs_linux", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _say(message: str) -> None:
    os.write(2, f"memfs: {message}\n".encode(errors="replace"))


class Init:
    """Pid 1 of the agent's namespace (see the module docstring)."""

    def __init__(self, config: dict[str, Any], command: list[str]) -> None:
        self.command = command
        self.network = str(config.get("network", "host"))
        #: None: CMD keeps our user (root); else (uid, gid, supplementary groups).
        self.user: tuple[int, int, list[int]] | None = (
            None if config.get("uid") is None
            else (int(config["uid"]), int(config["gid"]), [int(g) for g in config["groups"]]))
        #: CMD's LC_CTYPE as the launcher gave it (None: none): Python sets one in our own
        #: environment when the locale is C (PEP 538), which is ours, not CMD's.
        self.lc_ctype: str | None = config.get("lc_ctype")
        #: Where a failure to start CMD is told to the launcher (``ERRNO STAGE``, then EOF):
        #: closed on a successful exec, so that EOF alone means CMD runs.
        self.report: int | None = config.get("report_fd")
        self.kill_grace = float(config.get("kill_grace", 5.0))
        self.leftover_grace = float(config.get("leftover_grace", 2.0))
        self.child = 0
        self.pending: list[int] = []  # signals that came before CMD was forked
        self.killing = False  # CMD was told to stop: SIGKILL when the alarm rings

    def setup(self) -> None:
        """The namespaces of everything below: a mount namespace with a ``/proc`` of ours,
        and a network namespace with only ``lo`` when asked."""
        linux = _load_linux()
        flags = linux.CLONE_NEWNS
        if self.network == "none":
            flags |= linux.CLONE_NEWNET
        linux.unshare(flags)
        linux.make_mounts_private()
        linux.mount_proc("/proc")
        if flags & linux.CLONE_NEWNET:
            linux.loopback_up()

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        if signum in (signal.SIGTERM, signal.SIGHUP) and not self.killing:
            self.killing = True
            signal.setitimer(signal.ITIMER_REAL, self.kill_grace)
        if signum == RELAY_SIGINT:
            signum = signal.SIGINT
        if not self.child:
            self.pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.child, signum)

    def on_alarm(self, signum: int, frame: FrameType | None) -> None:
        """The grace is over: CMD (or, after CMD, whatever it left) is killed."""
        target = self.child if self.child else -1
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)

    def exec_command(self) -> None:
        """In the forked child: the agent's user, default signals, then CMD (never returns)."""
        for s in (*FORWARDED, RELAY_SIGINT, signal.SIGINT, signal.SIGALRM, *RESTORED):
            signal.signal(s, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        try:
            if self.user is not None:
                uid, gid, groups = self.user
                os.setgroups(groups)
                os.setgid(gid)
                os.setuid(uid)
            env = dict(os.environ)
            env.pop("LC_CTYPE", None)
            if self.lc_ctype is not None:
                env["LC_CTYPE"] = self.lc_ctype
            os.execvpe(self.command[0], self.command, env)
        except OSError as e:
            self._tell(e, "exec")
            if e.errno == errno.ENOENT:
                os._exit(127)
            os._exit(126 if e.errno in (errno.EACCES, errno.ENOEXEC, errno.EISDIR) else 1)
        os._exit(1)  # not reached

    def _tell(self, e: OSError, stage: str) -> None:
        """Tell the launcher why CMD could not start (or say it here, without a launcher's
        pipe)."""
        if self.report is None:
            _say(f"{self.command[0]}: {e.strerror}" if stage == "exec"
                 else f"cannot make the agent's namespaces: {e.strerror}")
            return
        with contextlib.suppress(OSError):
            os.write(self.report, f"{e.errno or 0} {stage}".encode())

    def run(self) -> int:
        for s in (*FORWARDED, RELAY_SIGINT):
            signal.signal(s, self.on_signal)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGALRM, self.on_alarm)
        try:
            self.setup()
        except OSError as e:
            self._tell(e, "namespaces")
            return 1
        if self.report is not None:
            os.set_inheritable(self.report, False)  # CMD's exec closes it
        pid = os.fork()
        if pid == 0:
            self.exec_command()
        if self.report is not None:
            os.close(self.report)
        self.child = pid
        for pending in self.pending:
            self.on_signal(pending, None)
        status = self._wait_for(pid)
        self.child = 0
        self._stop_the_rest()
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
        return os.waitstatus_to_exitcode(status)

    def _wait_for(self, pid: int) -> int:
        """Reap children (orphans come to pid 1) until ``pid`` ends; its wait status."""
        while True:
            try:
                done, status = os.wait()
            except ChildProcessError:  # not ours any more: cannot happen, but never hang
                return 0
            if done == pid:
                return status

    def _stop_the_rest(self) -> None:
        """SIGTERM to what CMD left behind, SIGKILL after the grace; reap them all."""
        signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            os.kill(-1, signal.SIGTERM)
        except ProcessLookupError:
            return  # nothing left
        signal.setitimer(signal.ITIMER_REAL, self.leftover_grace)
        while True:
            try:
                os.wait()
            except ChildProcessError:
                break
        signal.setitimer(signal.ITIMER_REAL, 0)


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        _say("usage: pidinit.py CONFIG_JSON CMD...")
        return 2
    return Init(json.loads(argv[1]), argv[2:]).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
