"""Real mounts for the integration tests: ``memfs mount`` in a subprocess, always unmounted.

FUSE missing (no /dev/fuse, no fusermount3): the tests skip locally and fail when CI=true.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memfs.store import Limits, Store

MOUNT_DEADLINE = 15.0


def fuse_missing() -> str | None:
    """Why FUSE cannot be used here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed"
    return None


def require_fuse() -> None:
    why = fuse_missing()
    if why is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"FUSE is required in CI: {why}")
    pytest.skip(f"FUSE unavailable: {why}")


def retry(fn: Callable[[], Any], deadline: float = 5.0, interval: float = 0.01) -> Any:
    """Call ``fn`` until it returns a truthy value (returned) or the deadline passes."""
    end = time.monotonic() + deadline
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > end:
            raise TimeoutError(f"{getattr(fn, '__name__', fn)} still false after {deadline} s")
        time.sleep(interval)


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
        end = time.monotonic() + MOUNT_DEADLINE
        while not os.path.ismount(self.root):
            if self.proc.poll() is not None:
                raise RuntimeError(f"memfs mount exited {self.proc.returncode}: {self.log()}")
            if time.monotonic() > end:
                raise TimeoutError(f"{self.root} not mounted after {MOUNT_DEADLINE} s")
            time.sleep(0.01)
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

        return retry(find, deadline)

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


@pytest.fixture
def fuse() -> None:
    require_fuse()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memfs.db"


@pytest.fixture
def open_store(db: Path) -> Iterator[Callable[..., Store]]:
    """Open (and later close) Store objects on the test database."""
    opened: list[Store] = []

    def open_(limits: Limits | None = None) -> Store:
        s = Store(db, limits=limits or Limits())
        opened.append(s)
        return s

    yield open_
    for s in opened:
        s.close()


@pytest.fixture
def mounter(fuse: None, db: Path, tmp_path: Path) -> Iterator[Callable[..., Mount]]:
    """``mounter(store_ref, *args, name=..., env=..., wait=True)`` starts a mount; every mount
    is stopped and unmounted at teardown."""
    mounts: list[Mount] = []

    def start(store_ref: str, *args: str, name: str = "mnt", env: dict[str, str] | None = None,
              wait: bool = True) -> Mount:
        m = Mount(db, store_ref, tmp_path / name, list(args), env)
        mounts.append(m)
        return m.wait_mounted() if wait else m

    yield start
    for m in mounts:
        m.stop()


@pytest.fixture
def setup(open_store: Callable[..., Store], mounter: Callable[..., Mount]
          ) -> tuple[Store, str, Mount]:
    """A store in the test database, mounted: ``(store, store_id, mount)``."""
    store = open_store()
    s = store.create_store("fuse test")
    m = mounter(s.id)
    return store, s.id, m
