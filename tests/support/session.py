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
#: The user the sandbox tests run agents as (the agent_user fixture makes it), and the
#: system's Python, which runs their agent-side checks (the tests' own interpreter may live
#: where the agent cannot enter).
AGENT = "memfs-agent"
AGENT_PY = "/usr/bin/python3"
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


def memfs_run(db: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``memfs --db DB run ARGS`` to its end, as a user would start it (no MEMFS_* or SUDO_*
    of the tests' environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMFS_", "SUDO_"))}
    return subprocess.run([*MEMFS, "--db", str(db), "run", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


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


def cmd_pid(tmp: Path) -> int:
    """The host's pid of the CMD that wrote ``$T/cmd.pid`` (PRELUDE). In the private
    namespace CMD has a PID namespace of its own, where ``$$`` is its pid there: the process
    is found by that pid (the last of its ``NSpid``) and its session id (``$T/sid``)."""
    wait_until(lambda: (tmp / "sid").exists() or None, SESSION_DEADLINE)
    inner = (tmp / "cmd.pid").read_text().strip()
    sid = (tmp / "sid").read_text().strip().encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        nspid = next((ln.split()[1:] for ln in status.splitlines()
                      if ln.startswith("NSpid:")), [])
        if nspid and nspid[-1] == inner and b"MEMFS_SESSION_ID=" + sid in env:
            return int(entry)
    raise AssertionError(f"no process of session {sid!r} has the pid {inner} in its namespace")


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


