"""The session launcher: attach stores to a session, mount each one, run the agent in them.

``memfs run --store REF[:read_only|:read_write] ... -- CMD`` (SPEC §3):

1. creates the session through the store (which validates the attachments and derives every
   ``mount_path``), then marks it ``running``;
2. makes the root (``/mnt/memory`` by default) session scratch. Privileged, the launcher moves
   into a private mount namespace and mounts a tmpfs on the root, so whatever the agent writes
   outside a mount path vanishes with the namespace and no other session (nor the host) sees
   it. Unprivileged, the root is a fresh directory that is deleted at the end;
3. starts one ``memfs mount`` daemon per store, concurrently, and waits until each is mounted;
4. renders the memory section of the system prompt to a file, and runs CMD with
   ``MEMFS_SESSION_ID`` and ``MEMFS_SYSTEM_PROMPT_FILE``, forwarding SIGINT/SIGTERM/SIGHUP;
5. always unmounts (SIGTERM to each daemon, then ``fusermount3 -uz`` for anything left),
   discards scratch, marks the session terminated and returns CMD's exit status (128+N when
   CMD died of signal N). If a mount daemon dies, CMD is stopped and the launcher fails with a
   clear error instead of leaving the agent on a dead mount.

Known limitations: stores are attached for the life of the session (as in the API); the
namespace mode needs root (CAP_SYS_ADMIN).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InvalidRequest, MemfsError
from .models import Session, SessionResource
from .prompt import render_memory_prompt
from .store import Store

log = logging.getLogger(__name__)

#: Seconds to wait for every mount to come up, and for a daemon to exit after SIGTERM.
MOUNT_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0

_CLONE_NEWNS = 0x00020000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18


class LaunchError(MemfsError):
    """The session could not be set up or lost a mount."""


@dataclass
class Attachment:
    """One ``--store REF[:access]`` with its optional instructions."""

    ref: str
    access: str = "read_write"
    instructions: str | None = None

    @classmethod
    def parse(cls, spec: str) -> Attachment:
        """``REF``, ``REF:read_only`` or ``REF:read_write`` (a REF may itself hold colons;
        only a known access suffix is split off)."""
        ref, sep, access = spec.rpartition(":")
        if sep and access in ("read_only", "read_write", "ro", "rw"):
            return cls(ref, {"ro": "read_only", "rw": "read_write"}.get(access, access))
        return cls(spec)


@dataclass
class _Mount:
    resource: SessionResource
    proc: subprocess.Popen[bytes]
    events_file: Path
    log_file: Path


@dataclass
class Launch:
    """What ``memfs run`` was asked to do."""

    attachments: list[Attachment]
    command: Sequence[str]
    root: str | None = None
    db_path: str | None = None
    isolation: str = "auto"  # auto | namespace | none
    extra_mount_args: list[str] = field(default_factory=list)


def _privileged() -> bool:
    return os.geteuid() == 0


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _enter_private_namespace(root: str) -> None:
    """Move this process into a private mount namespace with a tmpfs on ``root``.

    Mount propagation is made private first, so nothing mounted here (tmpfs, FUSE) shows up
    in the parent namespace, and everything disappears when the last process in it exits.
    """
    libc = _libc()
    if libc.unshare(_CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise LaunchError(f"cannot create a private mount namespace: {os.strerror(err)}")
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        err = ctypes.get_errno()
        raise LaunchError(f"cannot make mounts private: {os.strerror(err)}")
    os.makedirs(root, exist_ok=True)
    if libc.mount(b"memfs-scratch", root.encode(), b"tmpfs", 0, b"mode=0755") != 0:
        err = ctypes.get_errno()
        raise LaunchError(f"cannot mount session scratch on {root}: {os.strerror(err)}")


def _unmount(path: str) -> None:
    """Lazily detach a mount point (works on a dead FUSE mount too)."""
    if os.path.ismount(path) or _in_proc_mounts(path):
        subprocess.run(
            ["fusermount3", "-uz", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if _in_proc_mounts(path):
            subprocess.run(["umount", "-l", path], stderr=subprocess.DEVNULL)


def _daemon_preexec() -> None:
    """In a mount daemon's child before exec: its own process group, so our terminal's Ctrl-C
    reaches the launcher (which unmounts in order) rather than the daemons; and SIGTERM when the
    launcher dies, so that even a ``kill -9`` of the launcher unmounts everything."""
    os.setsid()
    _libc().prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _in_proc_mounts(path: str) -> bool:
    try:
        with open("/proc/self/mounts") as f:
            return any(line.split()[1] == path for line in f if len(line.split()) > 1)
    except OSError:
        return False


class Launcher:
    """Runs one session: set up, run CMD, always clean up (see the module docstring)."""

    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self.store = Store(launch.db_path)
        self.session: Session | None = None
        self.mounts: list[_Mount] = []
        self.state_dir = Path(tempfile.mkdtemp(prefix="memfs-session-"))
        self.namespace = False
        self.root = ""
        self._child: subprocess.Popen[bytes] | None = None
        self._stop_signal: int | None = None

    # -- set-up ------------------------------------------------------------------------------

    def _choose_root(self) -> None:
        iso = self.launch.isolation
        if iso not in ("auto", "namespace", "none"):
            raise InvalidRequest("isolation must be auto, namespace or none")
        self.namespace = iso == "namespace" or (iso == "auto" and _privileged())
        if self.namespace and not _privileged():
            raise LaunchError("--isolation namespace needs root")
        if self.launch.root:
            self.root = os.path.abspath(self.launch.root)
        elif self.namespace:
            self.root = "/mnt/memory"
        else:
            # Unprivileged: a root of our own, so two sessions never share scratch.
            self.root = str(self.state_dir / "memory")
        if not self.namespace:
            if os.path.exists(self.root) and os.listdir(self.root):
                raise LaunchError(
                    f"{self.root} is not empty: without a private namespace the session root "
                    "must be an empty or new directory (use --root)"
                )
            os.makedirs(self.root, exist_ok=True)

    def _create_session(self) -> Session:
        resources = []
        for a in self.launch.attachments:
            store = self.store.resolve_store(a.ref)
            res = {"type": "memory_store", "memory_store_id": store.id, "access": a.access}
            if a.instructions is not None:
                res["instructions"] = a.instructions
            resources.append(res)
        return self.store.create_session(
            resources,
            root=self.root,
            agent={"type": "agent", "id": "local", "name": os.path.basename(
                self.launch.command[0]) if self.launch.command else "agent"},
            environment_id="local",
            title=" ".join(self.launch.command)[:200] or None,
            status="idle",
        )

    def _start_mounts(self) -> None:
        assert self.session is not None
        exe = [sys.executable, "-m", "memfs"]
        if self.launch.db_path:
            exe += ["--db", self.launch.db_path]
        for res in self.session.resources:
            os.makedirs(res.mount_path, exist_ok=True)
            events = self.state_dir / f"{res.memory_store_id}.events.jsonl"
            logf = self.state_dir / f"{res.memory_store_id}.log"
            args = [
                *exe, "mount", res.memory_store_id, res.mount_path,
                "--session", self.session.id, "--events", str(events),
                *self.launch.extra_mount_args,
            ]
            if res.access == "read_only":
                args.append("--read-only")
            with open(logf, "wb") as lf:
                proc = subprocess.Popen(
                    args, stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                    preexec_fn=_daemon_preexec,
                )
            self.mounts.append(_Mount(res, proc, events, logf))
        deadline = time.monotonic() + MOUNT_TIMEOUT
        pending = list(self.mounts)
        while pending:
            for m in list(pending):
                if os.path.ismount(m.resource.mount_path):
                    pending.remove(m)
                elif m.proc.poll() is not None:
                    raise LaunchError(
                        f"mount of {m.resource.name!r} at {m.resource.mount_path} failed: "
                        f"{self._last_log_line(m)}"
                    )
            if pending and time.monotonic() > deadline:
                raise LaunchError(
                    f"{pending[0].resource.mount_path} was not mounted within {MOUNT_TIMEOUT:.0f} s"
                )
            if pending:
                time.sleep(0.02)

    @staticmethod
    def _last_log_line(m: _Mount) -> str:
        try:
            lines = [ln for ln in m.log_file.read_text(errors="replace").splitlines() if ln]
        except OSError:
            lines = []
        return lines[-1] if lines else f"daemon exited with status {m.proc.returncode}"

    # -- running -----------------------------------------------------------------------------

    def _forward(self, signum: int, frame: object) -> None:
        self._stop_signal = signum
        if self._child is not None and self._child.poll() is None:
            try:
                self._child.send_signal(signum)
            except ProcessLookupError:
                pass

    def _run_command(self) -> int:
        assert self.session is not None
        prompt_file = self.state_dir / "system-prompt.md"
        prompt_file.write_text(render_memory_prompt(self.session))
        env = dict(os.environ)
        env["MEMFS_SESSION_ID"] = self.session.id
        env["MEMFS_SYSTEM_PROMPT_FILE"] = str(prompt_file)
        if self.launch.db_path:
            env["MEMFS_DB"] = os.path.abspath(self.launch.db_path)
        self.store.set_session_status(self.session.id, "running")
        try:
            self._child = subprocess.Popen(list(self.launch.command), env=env)
        except OSError as e:
            raise LaunchError(f"cannot run {self.launch.command[0]!r}: {e.strerror}") from None
        while True:
            try:
                status = self._child.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            dead = [m for m in self.mounts if m.proc.poll() is not None]
            if dead:
                self._child.terminate()
                try:
                    self._child.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    self._child.kill()
                    self._child.wait()
                m = dead[0]
                raise LaunchError(
                    f"the mount of {m.resource.name!r} at {m.resource.mount_path} died "
                    f"(status {m.proc.returncode}); the command was stopped"
                )
        return 128 - status if status < 0 else status

    # -- clean-up ----------------------------------------------------------------------------

    def _stop_mounts(self) -> None:
        for m in self.mounts:
            if m.proc.poll() is None:
                m.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for m in self.mounts:
            try:
                m.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("mount daemon %d did not stop; killing it", m.proc.pid)
                m.proc.kill()
                m.proc.wait()
            _unmount(m.resource.mount_path)

    def _discard_scratch(self) -> None:
        if self.namespace:
            # The tmpfs goes away with the namespace; detach it now all the same.
            _unmount(self.root)
        elif self.root and os.path.isdir(self.root):
            if any(_in_proc_mounts(m.resource.mount_path) for m in self.mounts):
                log.error("not deleting %s: a mount is still attached below it", self.root)
            else:
                shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def run(self) -> int:
        """Run the whole session; returns the exit status for ``memfs run``.

        :raises MemfsError: the session could not be created or set up, or a mount died.
        """
        handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        previous = {s: signal.signal(s, self._forward) for s in handled}
        try:
            self._choose_root()
            if self.namespace:
                _enter_private_namespace(self.root)
            self.session = self._create_session()
            self._start_mounts()
            if self._stop_signal is not None:
                return 128 + self._stop_signal
            return self._run_command()
        finally:
            try:
                self._stop_mounts()
                self._discard_scratch()
            finally:
                if self.session is not None:
                    self.store.set_session_status(self.session.id, "terminated")
                self.store.close()
                for s, h in previous.items():
                    signal.signal(s, h)


def run(launch: Launch) -> int:
    """Run a session (see :class:`Launcher`)."""
    return Launcher(launch).run()
