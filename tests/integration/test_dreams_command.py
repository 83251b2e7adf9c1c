"""``memfs dream STORE --session ID -- CMD``: an agent program consolidates the store, launched
like ``memfs run`` with the input mounted read-only and the output read-write (real FUSE
mounts; FUSE missing: skipped locally, failed when CI=true)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memfs.models import Actor
from memfs.store import Limits, Store
from tests.support import wait_until

MEMFS = [sys.executable, "-m", "memfs"]


@pytest.fixture
def dreamdb(fuse: None, tmp_path: Path) -> tuple[Path, str, str]:
    db = tmp_path / "memfs.db"
    s = Store(db, limits=Limits())
    ms = s.stores.create("notes").id
    s.memories.create(ms, "/a.md", "alpha\n", actor=None)
    s.memories.create(ms, "/d/b.md", "beta\n", actor=None)
    sid = s.sessions.create([{"type": "memory_store", "memory_store_id": ms}]).id
    s.events.add(sid, [{"type": "user.message",
                        "content": [{"type": "text", "text": "I take my coffee black"}]}])
    s.close()
    return db, ms, sid


def dream(db: Path, sid: str, script: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MEMFS, "--db", str(db), "dream", "notes", "-s", sid, "-i", "merge it", "--",
         "bash", "-c", script], capture_output=True, text=True, timeout=60,
        env={**os.environ, "MEMFS_DB": str(db)}, **kw)  # type: ignore[call-overload]


def test_a_command_consolidates_into_the_output_and_cannot_write_the_input(
    dreamdb: tuple[Path, str, str],
) -> None:
    db, ms, sid = dreamdb
    r = dream(db, sid, """
        set -e
        grep -q 'merge it' "$MEMFS_DREAM_PROMPT_FILE"
        grep -q 'coffee black' "$MEMFS_DREAM_PROMPT_FILE"
        grep -q 'merge it' "$MEMFS_SYSTEM_PROMPT_FILE"
        if echo x > "$MEMFS_DREAM_INPUT/a.md"; then exit 9; fi
        cat "$MEMFS_DREAM_INPUT/a.md" "$MEMFS_DREAM_INPUT/d/b.md" > "$MEMFS_DREAM_OUTPUT/all.md"
        rm -r "$MEMFS_DREAM_OUTPUT/a.md" "$MEMFS_DREAM_OUTPUT/d"
    """)
    assert r.returncode == 0, r.stderr
    s = Store(db, limits=Limits())
    [d] = s.dreams.list().data
    assert d.status == "completed" and d.model["id"] == "command:bash", (r.stdout, r.stderr)
    out = d.output_store_id
    assert [(m.path, s.memories.get(out, m.id).content) for m in s.memories.tree(out)] == [
        ("/all.md", "alpha\nbeta\n")]
    assert {v.created_by for v in s.versions.list(out, limit=100).data} == {
        Actor.session(d.session_id)}
    assert [(m.path, s.memories.get(ms, m.id).content) for m in s.memories.tree(ms)] == [
        ("/a.md", "alpha\n"), ("/d/b.md", "beta\n")]
    assert len(s.versions.list(ms, limit=100).data) == 2
    assert s.sessions.get(d.session_id).status == "terminated"


def test_a_failing_command_fails_the_dream_and_a_cancel_stops_it(
    dreamdb: tuple[Path, str, str],
) -> None:
    db, _, sid = dreamdb
    r = dream(db, sid, "exit 3")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1].endswith(
        "failed: command_failed: bash exited with status 3")
    proc = subprocess.Popen(
        [*MEMFS, "--db", str(db), "dream", "notes", "-s", sid, "--", "sleep", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    s = Store(db, limits=Limits())

    def running_dream() -> bool:
        assert proc.poll() is None, proc.communicate()
        return any(d.status == "running" for d in s.dreams.list().data)

    wait_until(running_dream, 20, interval=0.05)
    [running] = [d for d in s.dreams.list().data if d.status == "running"]
    t0 = time.monotonic()
    c = subprocess.run([*MEMFS, "--db", str(db), "dream", "cancel", running.id],
                       capture_output=True, text=True, timeout=30)
    assert c.returncode == 0, c.stderr
    _, err = proc.communicate(timeout=30)
    took = time.monotonic() - t0
    assert s.dreams.get(running.id).status == "canceled"
    assert proc.returncode == 1 and err.strip().splitlines()[-1] == (
        f"memfs: dream {running.id} was canceled"), err
    assert took < 5, took  # the command was stopped, not waited for (sleep 30)


def test_a_command_that_never_started_leaves_no_output_store(
    dreamdb: tuple[Path, str, str],
) -> None:
    """The command is the dream's model: when it cannot even start, the output store (a copy
    of the input nothing wrote to) goes with the failure; one that ran keeps its output."""
    db, ms, sid = dreamdb
    r = subprocess.run(
        [*MEMFS, "--db", str(db), "dream", "notes", "-s", sid, "--", "/nonexistent/agent"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "MEMFS_DB": str(db)})
    assert r.returncode == 1 and "command not found" in r.stderr, r.stderr
    s = Store(db, limits=Limits())
    [d] = s.dreams.list().data
    assert d.status == "failed" and d.outputs == []
    assert [x.id for x in s.stores.list(include_archived=True).data] == [ms]
    r = dream(db, sid, "exit 3")
    assert r.returncode == 1
    kept = [x for x in s.dreams.list().data if x.id != d.id]
    assert kept[0].outputs and len(s.stores.list().data) == 2


#: `memfs dream` in a child process whose launcher cancels the dream (through the database,
#: as `memfs dream cancel` does) after the mounts started and before the command starts, and
#: gives the watcher up to 5 s to see it: the interleaving of a cancel that comes early.
EARLY_CANCEL = """
import sys, time
from memfs.launcher import mounts
from memfs.cli import cli
from memfs.store import Store

db, sid = sys.argv[1], sys.argv[2]
real = mounts.start_mounts

def mounted_then_canceled(st):
    real(st)
    with Store(db) as s:
        [d] = s.dreams.list().data
        s.dreams.cancel(d.id)
    deadline = time.monotonic() + 5
    while st.stop_signal is None and time.monotonic() < deadline:
        time.sleep(0.05)

mounts.start_mounts = mounted_then_canceled
cli(["--db", db, "dream", "notes", "-s", sid, "--", "sleep", "30"])
"""


def test_a_cancel_before_the_command_started_is_not_lost(
    dreamdb: tuple[Path, str, str],
) -> None:
    db, ms, sid = dreamdb
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", EARLY_CANCEL, str(db), sid], capture_output=True,
                       text=True, timeout=90, env={**os.environ, "MEMFS_DB": str(db)})
    took = time.monotonic() - t0
    s = Store(db, limits=Limits())
    [d] = s.dreams.list().data
    assert d.status == "canceled", (r.stdout, r.stderr)
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1] == (
        f"memfs: dream {d.id} was canceled"), r.stderr
    assert took < 20, took  # not the 30 s of a command the cancel missed
