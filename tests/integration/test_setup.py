"""scripts/_setup.sh on a fresh clone, as a newcomer meets it (issue 10): the Debian packages
Python needs to build pyfuse3 and make a venv are installed when missing, a half-made .venv
(no pip: what `python3 -m venv` leaves when ensurepip is missing) is rebuilt, and
scripts/bench sets itself up like scripts/test.

The machine keeps its packages: apt-get is a stub that records what it is asked for, and a
``python3`` wrapper answers the setup's checks for ``Python.h`` and ``ensurepip`` with "missing".
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

from tests.support import need
from tests.support.repo import REPO, copy_of_the_repo


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def test_a_fresh_clone_with_a_half_made_venv_sets_itself_up(tmp_path):
    need(os.geteuid() == 0, "needs root: the setup runs apt-get without sudo only as root")
    real_python = shutil.which("python3")
    assert real_python
    clone = copy_of_the_repo(tmp_path / "clone")
    fake = tmp_path / "bin"
    fake.mkdir()
    apt_log = tmp_path / "apt.log"
    _executable(fake / "apt-get", f'#!/bin/sh\necho "$@" >> {apt_log}\n')
    _executable(fake / "python3", f"""#!/bin/sh
case "$*" in
    *Python.h*|*ensurepip*) exit 1 ;;
esac
exec {real_python} "$@"
""")
    # What `python3 -m venv` leaves without python3-venv: a python, no pip.
    subprocess.run([real_python, "-m", "venv", "--without-pip", str(clone / ".venv")],
                   check=True)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    for var in ("VIRTUAL_ENV", "PYTHONPATH", "MEMFS_DB"):
        env.pop(var, None)

    # scripts/bench, from elsewhere, sets itself up (the half-made .venv is rebuilt).
    bench = subprocess.run([str(clone / "scripts" / "bench"), "--help"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=600)
    assert bench.returncode == 0, bench.stderr[-3000:]
    assert "usage" in bench.stdout.lower()
    asked = apt_log.read_text().split() if apt_log.exists() else []
    assert "python3-dev" in asked and "python3-venv" in asked, asked

    memfs = subprocess.run([str(clone / ".venv/bin/python"), "-I", "-c",
                            "import memfs; print(memfs.__file__)"],
                           capture_output=True, text=True, env=env)
    assert memfs.returncode == 0, memfs.stderr
    assert memfs.stdout.strip() == str(clone / "memfs" / "__init__.py")

    # Once set up, scripts/test runs at once.
    tests = subprocess.run([str(clone / "scripts" / "test"), "tests/unit/test_smoke.py", "-q",
                            "-p", "no:cacheprovider"],
                           env=env, capture_output=True, text=True, timeout=600)
    assert tests.returncode == 0, tests.stdout[-2000:] + tests.stderr[-2000:]
    assert "installing memfs" not in tests.stderr



# -- the Debian packages (scripts/_packages.sh) on a machine that has none of them ------------

#: What every script needs: FUSE, and what pip needs to build pyfuse3 and make a venv.
DEMO_PACKAGES = {"fuse3", "libfuse3-dev", "pkg-config", "gcc", "python3-dev", "python3-venv"}
#: What only the tests need: pjdfstest's build, the container test, PostgreSQL, the browser.
TEST_PACKAGES = {"autoconf", "automake", "make", "bubblewrap", "chromium"}
#: The tools scripts/_packages.sh may run besides the ones it looks for.
TOOLS = ["bash", "sh", "id", "ls", "cat", "tee", "sleep", "rm", "mktemp", "grep", "env"]

APT_GET = r"""#!/bin/sh
# Records each call; the first $LOCKED calls of `update` find the lists locked by another apt.
echo "$*" >> "$LOG"
case " $* " in *" update "*)
    n=$(grep -cw update "$LOG")
    if [ "$n" -le "${LOCKED:-0}" ]; then
        echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242" >&2
        exit 100
    fi ;;
esac
if [ -n "${FAIL:-}" ]; then echo "E: Unable to locate package $FAIL" >&2; exit 100; fi
"""


def _bare_machine(tmp_path: Path) -> tuple[Path, Path]:
    """A PATH on which nothing _packages.sh looks for is installed (no fusermount3, gcc,
    pkg-config, ...; python3 without its headers and ensurepip), with apt-get and sudo
    stubs that record what they are asked."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (bin_ / tool).symlink_to(found)
    real_python = shutil.which("python3")
    assert real_python
    _executable(bin_ / "python3", f"""#!/bin/sh
case "$*" in
    *Python.h*|*ensurepip*) exit 1 ;;
esac
exec {real_python} "$@"
""")
    _executable(bin_ / "apt-get", APT_GET)
    _executable(bin_ / "sudo", '#!/bin/sh\nexec "$@"\n')
    return bin_, tmp_path / "apt.log"


def _packages(tmp_path: Path, *, for_tests: bool, locked: int = 0, fail: str = ""):
    bin_, log = _bare_machine(tmp_path)
    env = {"PATH": str(bin_), "LOG": str(log), "LOCKED": str(locked), "HOME": str(tmp_path),
           "FAIL": fail}
    if for_tests:
        env["setup_for_tests"] = "1"
    done = subprocess.run(["bash", "-c", "set -euo pipefail; . scripts/_packages.sh"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    calls = log.read_text().splitlines() if log.exists() else []
    return done, calls


def _installed(calls: list[str]) -> set[str]:
    install = [c for c in calls if " install " in f" {c} "]
    assert len(install) == 1, calls
    return {w for w in install[0].split() if not w.startswith("-") and "::" not in w} - {
        "install"}


def test_the_demo_installs_only_what_it_needs(tmp_path):
    done, calls = _packages(tmp_path, for_tests=False)
    assert done.returncode == 0, done.stderr
    asked = _installed(calls)
    assert asked >= DEMO_PACKAGES, asked
    assert not asked & (TEST_PACKAGES | {"postgresql"}), asked


def test_the_tests_install_what_they_need_too(tmp_path):
    done, calls = _packages(tmp_path, for_tests=True)
    assert done.returncode == 0, done.stderr
    asked = _installed(calls)
    assert asked >= DEMO_PACKAGES | TEST_PACKAGES, asked
    has_postgresql = bool(list(Path("/usr/lib/postgresql").glob("*/bin/initdb")))
    assert ("postgresql" in asked) != has_postgresql, asked


def test_apt_waits_for_another_apt_that_holds_the_lock(tmp_path):
    """A fresh Ubuntu runs unattended-upgrades at boot: apt-get meets its locks. dpkg's lock
    apt-get waits for itself (DPkg::Lock::Timeout); the package lists' lock it does not, so
    the update is tried again, saying so once."""
    done, calls = _packages(tmp_path, for_tests=False, locked=2)
    assert done.returncode == 0, done.stderr
    updates = [c for c in calls if " update" in f" {c}"]
    assert len(updates) == 3, calls
    assert all("DPkg::Lock::Timeout=" in c for c in calls), calls
    waiting = [line for line in done.stderr.splitlines() if "waiting" in line]
    assert len(waiting) == 1, done.stderr


def test_apt_fails_at_once_for_anything_but_a_lock(tmp_path):
    done, calls = _packages(tmp_path, for_tests=False, fail="fuse3")
    assert done.returncode == 100, done.stderr
    assert len(calls) == 1 and "waiting" not in done.stderr, (calls, done.stderr)
    assert "Unable to locate package fuse3" in done.stderr
