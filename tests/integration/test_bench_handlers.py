"""scripts/bench_handlers.py on a real mount (issue 45): every phase has its wall time, and
each layer of the daemon's time lies within the one around it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import wait_until
from tests.support.mount import need_root

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_handlers.py"


def test_each_phase_is_split_into_handlers_store_and_sql(fuse: None, tmp_path: Path) -> None:
    need_root("scripts/bench_handlers mounts FUSE as root")
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--files", "20", "--repeat", "1", "--settle", "0.1",
         "--workdir", str(tmp_path), "--json", str(out)],
        capture_output=True, text=True, timeout=180, check=False,
        env={k: v for k, v in os.environ.items() if k not in ("MEMFS_URL", "MEMFS_DB")})
    assert done.returncode == 0, done.stderr[-3000:]
    # Its one temporary directory, mount and all, is gone.
    assert list(tmp_path.iterdir()) == [out]
    assert not _mounts_under(tmp_path)
    phases = json.loads(out.read_text())["phases"]
    main_handler = {"create": "create", "overwrite": "open", "rename": "rename",
                    "unlink": "unlink"}
    for phase, handler in main_handler.items():
        f = phases[phase]
        assert f["wall_us"] > 0, phase
        assert "| **" + phase + ": wall time, client** |" in done.stdout
        each = f["handlers"]["each"]
        assert each[handler]["calls"] == pytest.approx(1.0), (phase, each)
        # The handlers the client waited for lie within its wall time (release and forget
        # are sent without waiting: the phase's last one may end after the client's).
        waited = f["handlers"]["us"] - sum(
            each.get(k, {"us": 0.0})["us"] for k in ("release", "forget"))
        assert waited <= f["wall_us"] + f["timers_overhead_us"], (phase, f)
        assert 0 < f["store"]["us"] <= f["handlers"]["us"], (phase, f)
        assert f["memories"]["us"] <= f["store"]["us"], (phase, f)
        assert 0 < f["sql"]["us"] <= f["store"]["us"], (phase, f)
        assert f["sql"]["each"]["COMMIT"]["calls"] > 0, (phase, f["sql"]["each"])
        assert f["sql"]["each"]["BEGIN IMMEDIATE"]["calls"] > 0, (phase, f["sql"]["each"])
        assert set(f["timer_us"]) == {"handler", "store", "method", "sql"}


def _mounts_under(path: Path) -> list[str]:
    return [line for line in Path("/proc/self/mounts").read_text().splitlines()
            if line.split()[1].startswith(str(path))]


def test_stopped_midway_it_unmounts_and_stops_its_daemon(fuse: None, tmp_path: Path) -> None:
    """SIGTERM (as Ctrl-C) in the middle of a phase: the mount and the daemon are gone."""
    need_root("scripts/bench_handlers mounts FUSE as root")
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--files", "2000", "--repeat", "50", "--workdir",
         str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: _mounts_under(tmp_path), timeout=60, what="the mount")
        time.sleep(0.5)  # into the creates
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        left = _daemons_of(tmp_path)
        mounted = _mounts_under(tmp_path)
        for pid in left:  # what a failure left behind, stopped
            os.kill(pid, signal.SIGTERM)
        for line in mounted:
            subprocess.run(["fusermount3", "-uz", line.split()[1]], check=False)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert not left and not mounted
    assert list(tmp_path.iterdir()) == []


def _daemons_of(path: Path) -> list[int]:
    """The processes whose command line names a path under ``path``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(path).encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:  # ended meanwhile
            pass
    return found
