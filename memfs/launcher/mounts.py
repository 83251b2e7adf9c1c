"""The session's mounts: one ``memfs mount`` daemon per store, or in the private namespace one
session daemon (:mod:`memfs.daemons.sessionfs`) bind-mounted onto every mount path; waiting
until each is mounted, and stopping them (the kernel's queued releases first) at the end."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
import time

from .. import linux
from .procs import daemon_preexec, describe_status
from .sandbox import unmount
from .state import LaunchState, Mount, fail, last_log_line, memfs_env

log = logging.getLogger("memfs.launcher")  # the launcher's one logger, whichever module logs

#: Seconds to wait for every mount to come up.
MOUNT_TIMEOUT = 30.0
#: Seconds a mount daemon gets to unmount after SIGTERM before it is killed.
STOP_TIMEOUT = 10.0
#: Seconds to wait for a mount to answer the request that flushes its queue (see _barrier).
BARRIER_TIMEOUT = 2.0


def start_mounts(st: LaunchState) -> None:
    if st.namespace:
        _start_session_daemon(st)
        return
    assert st.session is not None and st.state_dir is not None
    exe = [sys.executable, "-P", "-m", "memfs"]  # -P: never a memfs/ of the cwd
    env = memfs_env(st, dict(os.environ))
    for res in st.session.resources:
        os.makedirs(res.mount_path, exist_ok=True)
        events = st.state_dir / f"{res.memory_store_id}.events.jsonl"
        logf = st.state_dir / f"{res.memory_store_id}.log"
        args = [
            *exe, "mount", res.memory_store_id, res.mount_path,
            "--session", st.session.id, "--events", str(events),
        ]
        if res.access == "read_only" and not st.launch.url:
            # A remote mount learns the access from the server and refuses writes itself.
            args.append("--read-only")
        if res.memory_store_id in st.snapshots:
            args += ["--at", st.snapshots[res.memory_store_id]]
        if st.agent is not None:
            # Everything shows as the agent's, 0600/0700; the kernel lets the agent in
            # (allow_other) and checks those modes (default_permissions): nobody else
            # but root gets in.
            args += ["--owner", f"{st.agent.uid}:{st.agent.gid}", "--allow-other"]
        # The agent (when it is another user) may enter the state directory to read its
        # prompt file, never the event logs or the daemons' logs.
        os.close(os.open(events, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        with open(os.open(logf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as lf:
            proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                env=env, preexec_fn=functools.partial(daemon_preexec, os.getpid()),
            )
        st.mounts.append(Mount(res, proc, events, logf))
        log.info("mounting %s (%s) on %s, pid %d", res.name, res.memory_store_id,
                 res.mount_path, proc.pid)
    deadline = time.monotonic() + MOUNT_TIMEOUT
    pending = list(st.mounts)
    while pending:
        if st.stop_signal is not None:
            return
        for m in list(pending):
            if os.path.ismount(m.resource.mount_path):
                pending.remove(m)
            elif m.proc.poll() is not None:
                st.reported.add(m.proc.pid)
                # The daemon's own line repeats the mount point: keep only its reason.
                reason = last_log_line(m).removeprefix(
                    f"cannot mount on {m.resource.mount_path}: ")
                fail(
                    st, f"cannot mount {m.resource.name!r} at {m.resource.mount_path}: {reason}"
                )
        if pending and time.monotonic() > deadline:
            fail(
                st, f"{pending[0].resource.mount_path} was not mounted within "
                f"{MOUNT_TIMEOUT:.0f} s"
            )
        if pending:
            time.sleep(0.01)


def _start_session_daemon(st: LaunchState) -> None:
    """In the private namespace: ONE daemon (:mod:`memfs.daemons.sessionfs`) serves every store,
    as the directories of one FUSE filesystem mounted on a hidden directory of the state
    directory; each ``<hidden>/<slug>`` is bind-mounted onto its mount path, then the
    hidden mount is detached, so the agent sees each store at its path and nothing else.
    (Without a namespace, binds would be the host's to clean up after a ``kill -9``: there
    each store keeps its own daemon.)"""
    assert st.session is not None and st.state_dir is not None
    hidden = st.state_dir / "fuse"
    hidden.mkdir(mode=0o700)
    args = [sys.executable, "-P", "-m", "memfs.daemons.sessionfs", "mount", str(hidden),
            "--session", st.session.id, "--events-dir", str(st.state_dir)]
    events = {}
    for res in st.session.resources:
        os.makedirs(res.mount_path, exist_ok=True)
        events[res.memory_store_id] = ev = (
            st.state_dir / f"{res.memory_store_id}.events.jsonl")
        os.close(os.open(ev, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        # Read-only is the daemon's to enforce, remote too (the server would refuse
        # anyway): the refused call must reach the event log.
        args += ["--store", res.memory_store_id, res.access, res.mount_path]
        if res.memory_store_id in st.snapshots:
            args += ["--at", res.memory_store_id, st.snapshots[res.memory_store_id]]
    if st.agent is not None:
        args += ["--owner", f"{st.agent.uid}:{st.agent.gid}", "--allow-other"]
    logf = st.state_dir / "session.log"
    with open(os.open(logf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as lf:
        proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
            env=memfs_env(st, dict(os.environ)),
            preexec_fn=functools.partial(daemon_preexec, os.getpid()),
        )
    for res in st.session.resources:
        st.mounts.append(Mount(res, proc, events[res.memory_store_id], logf))
    first = st.mounts[0]
    log.info("mounting %d stores, pid %d", len(st.mounts), proc.pid)
    deadline = time.monotonic() + MOUNT_TIMEOUT
    while not os.path.ismount(hidden):
        if st.stop_signal is not None:
            return
        if proc.poll() is not None:
            st.reported.add(proc.pid)
            reason = last_log_line(first).removeprefix(f"cannot mount on {hidden}: ")
            fail(st, f"cannot mount {first.resource.name!r} at "
                 f"{first.resource.mount_path}: {reason}")
        if time.monotonic() > deadline:
            fail(st, f"{first.resource.mount_path} was not mounted within "
                 f"{MOUNT_TIMEOUT:.0f} s")
        time.sleep(0.005)
    try:
        for m in st.mounts:
            path = m.resource.mount_path
            try:
                linux.bind_mount(str(hidden / os.path.basename(path)), path)
            except OSError as e:
                fail(st, f"cannot mount {m.resource.name!r} at {path}: {e.strerror}")
    finally:
        try:
            linux.detach(str(hidden))
        except OSError as e:
            log.warning("cannot detach %s: %s", hidden, e.strerror)


def _barrier(m: Mount) -> None:
    """Make the daemon answer one request (statfs, never cached by the kernel) before it
    is stopped: the releases the kernel queued when CMD's files were closed come before
    it, so their tool events are recorded instead of dropped with the queue. Runs in a
    thread: a stuck daemon must not hang the clean-up."""
    def statfs() -> None:
        with contextlib.suppress(OSError):
            os.statvfs(m.resource.mount_path)

    t = threading.Thread(target=statfs, daemon=True)
    t.start()
    t.join(BARRIER_TIMEOUT)


def stop_mounts(st: LaunchState) -> None:
    for m in st.mounts:
        if m.proc.poll() is None:
            _barrier(m)
    signalled: set[int] = set()  # one daemon may serve several mounts (sessionfs)
    for m in st.mounts:
        if m.proc.poll() is None and m.proc.pid not in signalled:
            m.proc.send_signal(signal.SIGTERM)
            signalled.add(m.proc.pid)
    deadline = time.monotonic() + STOP_TIMEOUT
    for m in st.mounts:
        try:
            m.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("mount daemon %d did not stop; killing it", m.proc.pid)
            m.proc.kill()
            m.proc.wait()
        if m.proc.returncode not in (0, -signal.SIGTERM) and m.proc.pid not in st.reported:
            st.reported.add(m.proc.pid)
            log.warning("the mount daemon of %s %s: %s", m.resource.mount_path,
                        describe_status(m.proc.returncode), last_log_line(m))
        unmount(m.resource.mount_path)
