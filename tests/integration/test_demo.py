"""scripts/demo as a newcomer runs it, its output sent to a file or a pipe (issue 19): the
session is shown with ls and cat, a write makes a version, and no terminal escape sequence is
printed where there is no terminal to read it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support import in_ci, need

pytestmark = pytest.mark.fuse

REPO = Path(__file__).resolve().parents[2]


def test_the_demo_prints_no_escape_sequences_when_its_output_is_not_a_terminal(fuse, tmp_path):
    # CI runs it either way (its setup uses sudo when not root).
    need(os.geteuid() == 0 or in_ci(), "the demo's setup installs packages as root (or with sudo)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMFS_", "VIRTUAL_ENV"))}
    env.update(MEMFS_DB=str(tmp_path / "memfs.db"), HOME=str(tmp_path))
    done = subprocess.run([str(REPO / "scripts" / "demo")], env=env, capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=300)
    out = done.stdout.decode()
    assert done.returncode == 0, out[-3000:] + done.stderr.decode()[-3000:]
    assert "\x1b" not in out and b"\x1b" not in done.stderr, out
    assert "\n$ cat /mnt/memory/demo-notes/preferences/formatting.md\n" in out, out
    assert "Dates are ISO-8601." in out and "The session is over (status 0)" in out, out
