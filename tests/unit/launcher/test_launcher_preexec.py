"""The launcher's preexec functions (the parent-death signal), without mounts."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys

import pytest

from memfs.launcher import procs


@pytest.mark.parametrize(("preexec", "signum"), [
    (procs.daemon_preexec, signal.SIGTERM),
    (procs.command_preexec, signal.SIGHUP),
])
def test_a_child_whose_launcher_is_gone_never_runs(preexec, signum, tmp_path):
    """The launcher died between fork and prctl(PR_SET_PDEATHSIG): no death signal will come,
    so the child must notice (its parent is not the launcher any more) and not exec."""
    ran = tmp_path / "ran"
    gone = os.getpid() + 1_000_000  # not our pid: the child sees "my launcher is gone"
    # Hangups heard, whatever this run was started under (nohup: the next test's case).
    before = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        child = subprocess.Popen(["touch", str(ran)],
                                 preexec_fn=functools.partial(preexec, gone))
    finally:
        signal.signal(signal.SIGHUP, before)
    assert child.wait(timeout=10) == 128 + signum
    assert not ran.exists()


@pytest.mark.parametrize("preexec", [procs.daemon_preexec, procs.command_preexec])
def test_a_child_of_a_live_launcher_runs(preexec, tmp_path):
    ran = tmp_path / "ran"
    child = subprocess.Popen(["touch", str(ran)],
                             preexec_fn=functools.partial(preexec, os.getpid()))
    assert child.wait(timeout=10) == 0
    assert ran.exists()


@pytest.mark.parametrize("hup, expected", [("SIG_DFL", "HUP"), ("SIG_IGN", "TERM")],
                         ids=["hangups-heard", "under-nohup"])
def test_the_parent_death_signal_is_set(tmp_path, hup, expected):
    """The child gets the signal when its parent dies (here: an intermediate python that
    exits at once after starting it): SIGHUP, as when a terminal goes away, or SIGTERM where
    SIGHUP is ignored (``nohup memfs run``: an ignored signal is inherited, and would be the
    end of nothing)."""
    from tests.support import wait_until

    out = tmp_path / "out"
    script = (
        "import functools, os, signal, subprocess, sys\n"
        "from memfs.launcher import procs\n"
        f"signal.signal(signal.SIGHUP, signal.{hup})\n"
        f"p = subprocess.Popen(['sh', '-c', 'trap \"echo {expected} > {out}; exit\" "
        f"{expected}; "
        "echo ready; while :; do sleep 0.01; done'], stdout=subprocess.PIPE,\n"
        "    preexec_fn=functools.partial(procs.command_preexec, os.getpid()))\n"
        # Dies once the child's trap is set (a fixed sleep lost that race on a loaded machine:
        # the signal came first and killed the shell before it could say so).
        "assert p.stdout.readline() == b'ready\\n'\n"
    )
    subprocess.run([sys.executable, "-c", script], timeout=10, check=True)
    wait_until(out.exists)
    assert out.read_text() == f"{expected}\n"

