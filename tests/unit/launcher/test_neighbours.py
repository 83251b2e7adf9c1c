"""A session whose agent would share the host's PID namespace with another session's agent of
the same user (issue 38, S7): refused without root, where no namespace can be had; a warning
as root. The other agent is a real process of that user with a session id in its environment."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from memfs.launcher import setup
from memfs.launcher.agent import Agent
from memfs.launcher.plan import LaunchError
from tests.support import need, wait_until

UID = 65533


@pytest.fixture
def neighbour() -> Iterator[int]:
    """Another session's agent: uid ``UID``, ``MEMFS_SESSION_ID`` in its environment."""
    need(os.geteuid() == 0, "running a process as another user needs root")
    proc = subprocess.Popen(
        ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups",
         "env", "MEMFS_SESSION_ID=sesn_neighbour", "sleep", "60"])
    wait_until(lambda: holds_the_id(str(proc.pid)) or None, 10)
    yield proc.pid
    proc.kill()
    proc.wait()


def holds_the_id(pid: str) -> bool:
    try:
        return (os.stat(f"/proc/{pid}").st_uid == UID
                and b"sesn_neighbour" in Path(f"/proc/{pid}/environ").read_bytes())
    except OSError:  # gone meanwhile, or a zombie
        return False


def check(uid: int, namespace: bool) -> None:
    launcher = SimpleNamespace(agent=Agent(uid, uid, [uid], str(uid), "/"), namespace=namespace)
    setup.refuse_a_neighbour_of_the_same_user(launcher)  # type: ignore[arg-type]


def test_without_root_a_second_agent_of_the_same_user_is_refused(neighbour, monkeypatch):
    monkeypatch.setattr(setup, "privileged", lambda: False)
    with pytest.raises(LaunchError, match=f"session sesn_neighbour, pid {neighbour}"):
        check(UID, namespace=False)
    check(UID + 1, namespace=False)  # another user: nothing to refuse


def test_as_root_it_is_a_warning(neighbour, capsys):
    check(UID, namespace=False)
    assert "warning: another session's agent runs as uid 65533" in capsys.readouterr().err
    check(UID, namespace=True)  # the neighbour is in our PID namespace: it could read ours
    assert "that agent can read this one's" in capsys.readouterr().err


def test_an_agent_in_a_pid_namespace_of_its_own_is_no_danger(capsys):
    """The neighbour in a PID namespace of its own (as a privileged launcher's agent is)
    cannot read a namespaced agent's /proc: nothing to say."""
    need(os.geteuid() == 0, "running a process as another user needs root")
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--kill-child", "setpriv", f"--reuid={UID}",
         f"--regid={UID}", "--clear-groups", "env", "MEMFS_SESSION_ID=sesn_neighbour",
         "sleep", "60"])
    try:
        inner = wait_until(lambda: next(
            (int(p) for p in os.listdir("/proc") if p.isdigit() and holds_the_id(p)), None), 10)
        check(UID, namespace=True)
        assert capsys.readouterr().err == ""
    finally:
        with contextlib.suppress(NameError, ProcessLookupError):
            os.kill(inner, signal.SIGKILL)  # its parent-death signal went with setpriv
        proc.kill()
        proc.wait()
