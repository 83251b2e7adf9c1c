""":func:`memfs.fuse.toolevents.comm`, the name a tool event gives the process that made a
request: always the name it has now, although its ``/proc/<pid>/comm`` stays open."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memfs.fuse import toolevents
from memfs.fuse.toolevents import comm
from tests.support import wait_until


def _wait_for_line(p: subprocess.Popen[bytes]) -> None:
    assert p.stdout is not None
    assert p.stdout.readline()


def test_the_name_after_an_exec_a_rename_and_the_end_of_the_process() -> None:
    # A shell that says it is ready, then waits for a line, then becomes another program
    # (a redirect opened by `bash`, then written by the command it execs).
    with subprocess.Popen(
        ["sh", "-c", "echo ready; read x; exec " + sys.executable + " -c "
         "\"import sys; open('/proc/self/comm', 'w').write('renamed'); print('ok', flush=True);"
         " sys.stdin.readline()\""],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE) as p:
        assert p.stdin is not None
        try:
            _wait_for_line(p)
            assert comm(p.pid) == "sh"
            assert comm(p.pid) == "sh"  # asked again: the file kept open is read again
            p.stdin.write(b"go\n")
            p.stdin.flush()
            _wait_for_line(p)  # exec'd, then renamed itself
            assert comm(p.pid) == "renamed"
        finally:
            p.kill()
            p.wait()
    assert comm(p.pid) == "unknown"  # gone: its pid is nobody's (or another process's)
    assert p.pid not in toolevents._comm_files


def test_at_most_comm_files_stay_open(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(toolevents, "COMM_FILES", 2)
    kids = [subprocess.Popen(["sleep", "30"]) for _ in range(4)]
    try:
        before = len(os.listdir("/proc/self/fd"))
        for k in kids:
            # Forked (python) until its exec: the same open file then reads "sleep".
            wait_until(lambda k=k: comm(k.pid) == "sleep", 30)
        assert len(toolevents._comm_files) <= 2
        assert len(os.listdir("/proc/self/fd")) <= before + 2
        assert comm(kids[0].pid) == "sleep"  # closed, opened again
    finally:
        for k in kids:
            k.kill()
            k.wait()
