"""The agent's process: CMD started with its prompt file, environment and credential (as the
agent's user), the signals forwarded to it, a dead mount stopping it, and what it left behind
stopped at the end."""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import logging
import os
import signal
import subprocess
import sys
import time
from typing import Any

from .. import linux
from ..errors import MemfsError
from . import pidinit
from .agent import LAUNCHER_ONLY_ENV, agent_env
from .base import _Mount
from .mounts import Mounts
from .plan import LaunchError
from .procs import _children, _command_preexec, _describe_status, _init_preexec, _reap
from .prompt import render_memory_prompt

log = logging.getLogger("memfs.launcher")  # the launcher's one logger, whichever module logs

#: Seconds CMD gets after a forwarded SIGTERM/SIGHUP (or a dead mount) before SIGKILL.
KILL_GRACE = 5.0
#: Seconds processes left behind by CMD get after SIGTERM before SIGKILL.
LEFTOVER_GRACE = 2.0


class Command(Mounts):
    """Running CMD, and stopping it and its leftovers."""

    def _on_signal(self, signum: int, frame: object) -> None:
        self._stop_signal = signum
        if signum != signal.SIGINT and self._kill_at is None:
            self._kill_at = time.monotonic() + KILL_GRACE
        child = self._child
        if child is None:
            self._unforwarded = signum
            return
        if signum == signal.SIGINT and self._terminal_sent_it():
            return  # CMD is in our foreground process group: it got this Ctrl-C already
        self._send(signum)

    def _terminal_sent_it(self) -> bool:
        try:
            fd = sys.stdin.fileno()
            return os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp()
        except (OSError, ValueError, AttributeError):
            return False

    def _send(self, signum: int) -> None:
        child = self._child
        if self.namespace and signum == signal.SIGINT:
            signum = pidinit.RELAY_SIGINT  # the init cannot tell our SIGINT from the terminal's
        if child is not None and child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signum)

    def _run_command(self) -> int:
        assert self.session is not None and self.state_dir is not None
        prompt_file = self.state_dir / "system-prompt.md"
        prompt_file.write_text(render_memory_prompt(self.session), encoding="utf-8")
        # No credential of the launcher's reaches CMD: not the database, not a server key.
        env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_ONLY_ENV}
        env["MEMFS_SESSION_ID"] = self.session.id
        env["MEMFS_SYSTEM_PROMPT_FILE"] = str(prompt_file)
        agent = self.agent
        as_agent: dict[str, Any] = {}
        if agent is not None:
            env = agent_env(env, agent)
            os.chown(prompt_file, agent.uid, agent.gid)
            prompt_file.chmod(0o400)
            self.state_dir.chmod(0o711)  # the prompt file by its name, nothing else
            as_agent = {"user": agent.uid, "group": agent.gid, "extra_groups": agent.groups}
        self.store.sessions.set_status(self.session.id, "running")
        try:
            env.update(self._agent_credentials())
        except MemfsError as e:
            self._fail(f"cannot give the session its credential: {e.message}")
        try:
            self._child = self._spawn(env, as_agent)
        except FileNotFoundError:
            raise LaunchError(f"{self.launch.command[0]}: command not found", 127) from None
        except OSError as e:
            raise LaunchError(
                f"cannot run {self.launch.command[0]}: {e.strerror}",
                126 if e.errno in (errno.EACCES, errno.ENOEXEC, errno.EISDIR) else 1,
            ) from None
        if self.api is not None:
            self.api.serve()
        if self._unforwarded is not None:  # a signal came while CMD was being started
            self._send(self._unforwarded)
            self._unforwarded = None
        dead: _Mount | None = None
        while True:
            try:
                status = self._child.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            if dead is None:
                dead = next((m for m in self.mounts if m.proc.poll() is not None), None)
                if dead is not None:
                    log.info("the mount daemon of %s died; stopping the command",
                             dead.resource.mount_path)
                    self._reported.add(dead.proc.pid)
                    self._send(signal.SIGTERM)
                    self._kill_at = time.monotonic() + KILL_GRACE
            if self._kill_at is not None and time.monotonic() > self._kill_at:
                log.warning("the command did not stop within %.0f s; killing it", KILL_GRACE)
                self._send(signal.SIGKILL)
                self._kill_at = None
        if dead is not None:
            self._fail(
                f"the mount of {dead.resource.name!r} at {dead.resource.mount_path} died "
                f"({_describe_status(dead.proc.returncode)}); the command was stopped"
            )
        return 128 - status if status < 0 else status

    def _spawn(self, env: dict[str, str], as_agent: dict[str, Any]) -> subprocess.Popen[bytes]:
        """Start CMD. In the private namespace it is started under :mod:`.pidinit`, the first
        process of a new PID namespace (with a ``/proc`` of its own, and a network namespace
        of its own with ``--network none``): the agent sees none of the host's processes,
        nor another session's. The init switches to the agent's user itself."""
        if not self.namespace:
            return subprocess.Popen(
                list(self.launch.command), env=env,
                preexec_fn=functools.partial(_command_preexec, os.getpid()), **as_agent)
        agent = self.agent
        config: dict[str, Any] = {
            "network": self.launch.network, "kill_grace": KILL_GRACE,
            "leftover_grace": LEFTOVER_GRACE,
            "uid": agent.uid if agent else None, "gid": agent.gid if agent else None,
            "groups": agent.groups if agent else [], "lc_ctype": env.get("LC_CTYPE"),
        }
        report, config["report_fd"] = os.pipe()
        argv = [sys.executable, "-I", "-S", pidinit.__file__, json.dumps(config),
                *self.launch.command]
        # Our next child is born in a new PID namespace, as its init; later ones in ours
        # again. Namespaces are a thread's: no other thread of the launcher is concerned.
        ours = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        try:
            try:
                linux.unshare(linux.CLONE_NEWPID)
            except OSError as e:
                raise LaunchError(f"cannot make a PID namespace for the command: {e.strerror}"
                                  ) from None
            try:
                child = subprocess.Popen(argv, env=env, preexec_fn=_init_preexec,
                                         pass_fds=(config["report_fd"],))
            finally:
                linux.setns(ours, linux.CLONE_NEWPID)
        finally:
            os.close(ours)
            os.close(config["report_fd"])
        self._check_started(child, report)
        return child

    def _check_started(self, init: subprocess.Popen[bytes], report: int) -> None:
        """Wait until the init has started CMD; raise what a failed start would have raised
        without it (EOF: it runs)."""
        with os.fdopen(report, "rb") as f:
            told = f.read().decode(errors="replace").split()
        if len(told) != 2:
            return
        init.wait()
        err, stage = int(told[0]), told[1]
        if stage != "exec":
            raise LaunchError(f"cannot make the command's namespaces: {os.strerror(err)} "
                              "(where they cannot be had, --isolation none runs it without)")
        if err == errno.ENOENT:
            raise FileNotFoundError(err, os.strerror(err))
        raise OSError(err, os.strerror(err))

    def _stop_command(self) -> None:
        """CMD itself, if set-up failed while it ran (it normally has exited already)."""
        child = self._child
        if child is None or child.poll() is not None:
            return
        child.terminate()
        try:
            child.wait(timeout=KILL_GRACE)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    def _stop_leftovers(self) -> None:
        """Stop what CMD left running (orphans are reparented to us, the subreaper): SIGTERM,
        then SIGKILL after :data:`LEFTOVER_GRACE` seconds; reap them all."""
        ours = {m.proc.pid for m in self.mounts}
        if self._child is not None:
            ours.add(self._child.pid)
        deadline = time.monotonic() + LEFTOVER_GRACE
        give_up = deadline + 3 * LEFTOVER_GRACE
        signalled: set[int] = set()
        while True:
            left = [p for p in _children(os.getpid()) if p not in ours and not _reap(p)]
            if not left:
                return
            if time.monotonic() > give_up:
                log.error("pids %s, left behind by the command, do not die", left)
                return
            late = time.monotonic() > deadline
            for pid in left:
                if pid not in signalled or late:
                    log.info("stopping pid %d, left behind by the command", pid)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL if late else signal.SIGTERM)
                    signalled.add(pid)
            if late:
                deadline = time.monotonic() + LEFTOVER_GRACE
            time.sleep(0.02)
