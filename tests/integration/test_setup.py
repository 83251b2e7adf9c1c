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

import pytest

REPO = Path(__file__).resolve().parents[2]


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _copy_of_the_repo(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO,
                           check=True, capture_output=True, text=True).stdout.splitlines()
    for name in files:
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def test_a_fresh_clone_with_a_half_made_venv_sets_itself_up(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root: the setup runs apt-get without sudo only as root")
    real_python = shutil.which("python3")
    assert real_python
    clone = _copy_of_the_repo(tmp_path / "clone")
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

