"""A real mount: ``memfs mount`` in a subprocess (:class:`Mount`), always unmounted, and what
the FUSE tests share around it. :func:`require_fuse` is the gate: FUSE missing (no /dev/fuse,
no fusermount3) skips a test locally and fails it when CI=true."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import need, wait_until

MOUNT_DEADLINE = 15.0


def in_proc_mounts(path: Path) -> bool:
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == str(path) for line in f)


class Mount:
    """One ``memfs mount`` daemon and its mount point."""

    def __init__(self, db: Path, store_ref: str, root: Path, args: list[str],
                 env: dict[str, str] | None = None) -> None:
        self.db = db
        self.store_ref = store_ref
        self.root = root
        self.events_path = root.parent / f"{root.name}.events.jsonl"
        self.log_path = root.parent / f"{root.name}.log"
        root.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "memfs", "--db", str(db), "-v", "mount", store_ref,
               str(root), "--events", str(self.events_path), *args]
        # Meaning only where a test asks for it (env, or the runner's environment): every
        # mount's daemon would otherwise index what each test writes, in the background, with
        # the local model, competing for the CPU with the timings of the tests.
        full_env = {"MEMFS_EMBEDDINGS": "none", **os.environ}
        full_env.update(env or {})
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, env=full_env)

    def wait_mounted(self) -> Mount:
        def mounted() -> bool:
            if os.path.ismount(self.root):
                return True
            if self.proc.poll() is not None:
                raise RuntimeError(f"memfs mount exited {self.proc.returncode}: {self.log()}")
            return False

        wait_until(mounted, MOUNT_DEADLINE, what=f"{self.root} mounted")
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def events(self) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        # The daemon appends while this reads: a last line without its newline is still being
        # written (a write that spans pages shows in parts), and is read next time.
        data = self.events_path.read_bytes()
        whole = data[:data.rfind(b"\n") + 1].decode()
        return [json.loads(line) for line in whole.splitlines() if line]

    def pairs(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(tool_use, tool_result) pairs, joined by tool_use_id."""
        evs = self.events()
        results = {e["tool_use_id"]: e for e in evs if e["type"] == "agent.tool_result"}
        return [(e, results[e["id"]]) for e in evs
                if e["type"] == "agent.tool_use" and e["id"] in results]

    def wait_pair(self, operation: str, path: Path | str, deadline: float = 5.0,
                  **match: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """The first event pair for ``operation`` on ``path`` (events of a close are logged
        at release, which the kernel sends after close returns)."""
        def find() -> Any:
            for use, res in self.pairs():
                inp = use["input"]
                if inp["operation"] == operation and inp["file_path"] == str(path) and all(
                    use.get(k) == v or inp.get(k) == v for k, v in match.items()
                ):
                    return use, res
            return None

        return wait_until(find, deadline)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the daemon; whatever happens, leave no mount behind."""
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(sig)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            self._log.close()
            if in_proc_mounts(self.root):
                subprocess.run(["fusermount3", "-uz", str(self.root)], check=False,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def fuse_missing() -> str | None:
    """Why FUSE cannot be used here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed"
    return None


def require_fuse() -> None:
    why = fuse_missing()
    need(why is None, f"FUSE unavailable: {why}")


def need_root(why: str) -> None:
    """Root, for what only root may do (a private mount namespace, another user, a tmpfs)."""
    need(os.geteuid() == 0, f"needs root: {why}")


def sh(cmd: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True,
                          check=check, timeout=30)


def ops_of(store: Any, sid: str, path: str | None = None) -> list[str]:
    """The operations of a store's versions (of one path), oldest first."""
    vs = reversed(store.versions.list(sid, limit=100).data)
    return [v.operation for v in vs if path is None or v.path == path]


def errno_of(fn: Callable[[], Any]) -> int:
    with pytest.raises(OSError) as e:
        fn()
    return e.value.errno or 0


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) a process has spent so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
