"""``memfs run`` in a subprocess (:class:`Run`; the ``launch`` fixture of
tests/integration/conftest.py starts them), and what the session tests look at afterwards:
the mounts and processes left."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import need, wait_until

_SCRIPT = Path(sys.executable).with_name("memfs")
MEMFS = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "memfs"]
ISOLATIONS = ["namespace", "none"]
SESSION_DEADLINE = 30.0

# Bash helpers every CMD gets: wait_for FILE (poll with a deadline), ready (tell the test).
PRELUDE = r"""
set -u
wait_for() { for _ in $(seq 1000); do [ -e "$1" ] && return 0; sleep 0.01; done; return 1; }
echo "$MEMFS_SESSION_ID" > "$T/sid"
echo $$ > "$T/cmd.pid"
"""


def needs_root(isolation: str) -> None:
    """The namespace mode needs root (skipped without it, failed when CI=true)."""
    if isolation == "namespace":
        need(os.geteuid() == 0, "the namespace mode needs root")


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below ``path`` in this process's mount namespace."""
    prefix = str(path)
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    return [p for p in points if p == prefix or p.startswith(prefix + "/")]


def processes_with(text: str) -> list[int]:
    """Pids whose command line contains ``text`` (e.g. the mount daemons of a session)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry))
    return found


def daemons_of(sid: str) -> list[int]:
    return [p for p in processes_with(f"--session {sid}")
            if " mount " in Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()]


class Run:
    """One ``memfs run`` subprocess."""

    def __init__(self, db: Path, tmp: Path, args: list[str], script: str,
                 env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.tmp = tmp
        # Meaning only where a test asks for it (as tests/support/mount.py's Mount).
        full_env = {"MEMFS_EMBEDDINGS": "none", **os.environ, "MEMFS_DB": str(db),
                    "T": str(tmp), **(env or {})}
        self.proc = subprocess.Popen(
            [*MEMFS, "run", *args, "--", "bash", "-c", PRELUDE + script],
            env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=cwd,
        )
        self.out = self.err = ""

    def wait(self, timeout: float = SESSION_DEADLINE) -> int:
        self.out, self.err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode

    def wait_file(self, name: str) -> Path:
        """Wait until CMD creates ``$T/name`` (failing early if the launcher exits)."""
        path = self.tmp / name

        def there() -> bool:
            if path.exists():
                return True
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                raise AssertionError(f"memfs run exited {self.proc.returncode}: {err}{out}")
            return False

        wait_until(there, SESSION_DEADLINE)
        return path

    @property
    def sid(self) -> str:
        return (self.tmp / "sid").read_text().strip()


