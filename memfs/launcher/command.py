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
from .credential import agent_credentials
from .pinned import version_reader
from .plan import LaunchError
from .procs import children, command_preexec, describe_status, init_preexec, reap_child
from .prompt import render_memory_prompt
from .state import LaunchState, Mount, fail

log = logging.getLogger("memfs.launcher")  # the launcher's one logger, whichever module logs

#: Seconds CMD gets after a forwarded SIGTERM/SIGHUP (or a dead mount) before SIGKILL.
KILL_GRACE = 5.0
#: Seconds processes left behind by CMD get after SIGTERM before SIGKILL.
LEFTOVER_GRACE = 2.0


def on_signal(st: LaunchState, signum: int, frame: object) -> None:
    st.stop_signal = signum
    if signum != signal.SIGINT and st.kill_at is None:
        st.kill_at = time.monotonic() + KILL_GRACE
    child = st.child
    if child is None:
        st.unforwarded = signum
        return
    if signum == signal.SIGINT and _terminal_sent_it():
        return  # CMD is in our foreground process group: it got this Ctrl-C already
    send(st, signum)


def _terminal_sent_it() -> bool:
    try:
        fd = sys.stdin.fileno()
        return os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


def send(st: LaunchState, signum: int) -> None:
    child = st.child
    if st.namespace and signum == signal.SIGINT:
        signum = pidinit.RELAY_SIGINT  # the init cannot tell our SIGINT from the terminal's
    if child is not None and child.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)


def run_command(st: LaunchState) -> int:
    assert st.session is not None and st.state_dir is not None
    prompt_file = st.state_dir / "system-prompt.md"
    prompt_file.write_text(render_memory_prompt(st.session, version_reader(st.store),
                                                history=st.store), encoding="utf-8")
    # No credential of the launcher's reaches CMD: not the database, not a server key.
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_ONLY_ENV}
    env["MEMFS_SESSION_ID"] = st.session.id
    env["MEMFS_SYSTEM_PROMPT_FILE"] = str(prompt_file)
    agent = st.agent
    as_agent: dict[str, Any] = {}
    if agent is not None:
        env = agent_env(env, agent)
        os.chown(prompt_file, agent.uid, agent.gid)
        prompt_file.chmod(0o400)
        st.state_dir.chmod(0o711)  # the prompt file by its name, nothing else
        as_agent = {"user": agent.uid, "group": agent.gid, "extra_groups": agent.groups}
    st.store.sessions.set_status(st.session.id, "running")
    try:
        env.update(agent_credentials(st))
    except MemfsError as e:
        fail(st, f"cannot give the session its credential: {e.message}")
    try:
        st.child = _spawn(st, env, as_agent)
    except FileNotFoundError:
        raise LaunchError(f"{st.launch.command[0]}: command not found", 127) from None
    except OSError as e:
        raise LaunchError(
            f"cannot run {st.launch.command[0]}: {e.strerror}",
            126 if e.errno in (errno.EACCES, errno.ENOEXEC, errno.EISDIR) else 1,
        ) from None
    if st.api is not None:
        st.api.serve()
    if st.unforwarded is not None:  # a signal came while CMD was being started
        send(st, st.unforwarded)
        st.unforwarded = None
    dead: Mount | None = None
    while True:
        try:
            status = st.child.wait(timeout=0.1)
            break
        except subprocess.TimeoutExpired:
            pass
        if dead is None:
            dead = next((m for m in st.mounts if m.proc.poll() is not None), None)
            if dead is not None:
                log.info("the mount daemon of %s died; stopping the command",
                         dead.resource.mount_path)
                st.reported.add(dead.proc.pid)
                send(st, signal.SIGTERM)
                st.kill_at = time.monotonic() + KILL_GRACE
        if st.kill_at is not None and time.monotonic() > st.kill_at:
            log.warning("the command did not stop within %.0f s; killing it", KILL_GRACE)
            send(st, signal.SIGKILL)
            st.kill_at = None
    if dead is not None:
        fail(
            st, f"the mount of {dead.resource.name!r} at {dead.resource.mount_path} died "
            f"({describe_status(dead.proc.returncode)}); the command was stopped"
        )
    return 128 - status if status < 0 else status


def _spawn(st: LaunchState, env: dict[str, str],
           as_agent: dict[str, Any]) -> subprocess.Popen[bytes]:
    """Start CMD. In the private namespace it is started under :mod:`.pidinit`, the first
    process of a new PID namespace (with a ``/proc`` of its own, and a network namespace
    of its own with ``--network none``): the agent sees none of the host's processes,
    nor another session's. The init switches to the agent's user itself."""
    if not st.namespace:
        return subprocess.Popen(
            list(st.launch.command), env=env,
            preexec_fn=functools.partial(command_preexec, os.getpid()), **as_agent)
    agent = st.agent
    config: dict[str, Any] = {
        "network": st.launch.network, "kill_grace": KILL_GRACE,
        "leftover_grace": LEFTOVER_GRACE,
        "uid": agent.uid if agent else None, "gid": agent.gid if agent else None,
        "groups": agent.groups if agent else [], "lc_ctype": env.get("LC_CTYPE"),
    }
    report, config["report_fd"] = os.pipe()
    argv = [sys.executable, "-I", "-S", pidinit.__file__, json.dumps(config),
            *st.launch.command]
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
            child = subprocess.Popen(argv, env=env, preexec_fn=init_preexec,
                                     pass_fds=(config["report_fd"],))
        finally:
            linux.setns(ours, linux.CLONE_NEWPID)
    finally:
        os.close(ours)
        os.close(config["report_fd"])
    _check_started(child, report)
    return child


def _check_started(init: subprocess.Popen[bytes], report: int) -> None:
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


def stop_command(st: LaunchState) -> None:
    """CMD itself, if set-up failed while it ran (it normally has exited already)."""
    child = st.child
    if child is None or child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def stop_leftovers(st: LaunchState) -> None:
    """Stop what CMD left running (orphans are reparented to us, the subreaper): SIGTERM,
    then SIGKILL after :data:`LEFTOVER_GRACE` seconds; reap them all."""
    ours = {m.proc.pid for m in st.mounts}
    if st.child is not None:
        ours.add(st.child.pid)
    deadline = time.monotonic() + LEFTOVER_GRACE
    give_up = deadline + 3 * LEFTOVER_GRACE
    signalled: set[int] = set()
    while True:
        left = [p for p in children(os.getpid()) if p not in ours and not reap_child(p)]
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
