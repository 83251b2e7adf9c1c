"""``memfs run`` in its private namespace: ONE mount daemon (memfs.daemons.sessionfs) for all the
session's stores, each store still at its own mount path with its own access mode.

Needs root (the namespace mode); FUSE missing fails under CI=true (the ``fuse`` fixture).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memfs.store import Store
from tests.support import need, wait_until
from tests.support.session import SESSION_DEADLINE, Run, cmd_pid

pytestmark = [pytest.mark.fuse, pytest.mark.usefixtures("fuse")]

N = 8


@pytest.fixture(autouse=True)
def _root() -> None:
    need(os.geteuid() == 0, "the namespace mode needs root")


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (scans /proc)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent[int(entry)] = int(stat.rpartition(")")[2].split()[1])
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        found += kids
        todo += kids
    return found


def memfs_daemons(pid: int) -> list[int]:
    """The mount daemons among ``pid``'s descendants (``memfs mount`` or the session's)."""
    out = []
    for p in descendants(pid):
        try:
            argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mount" in argv and any(b"memfs" in a for a in argv):
            out.append(p)
    return out


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


EIGHT_SCRIPT = r"""
R=$ROOT
grep " $R/" /proc/self/mounts | cut -d' ' -f2 | sort > "$T/mounts-inside"
ls "$R" > "$T/ls-root"
for d in "$R"/*; do
    s=$(basename "$d")
    if echo "from $s" 2> "$T/err-$s" > "$d/own.md"; then echo ok > "$T/w-$s"; fi
done
for d in "$R"/*; do
    s=$(basename "$d"); ls "$d" > "$T/ls-$s"; cat "$d/seed.md" > "$T/seed-$s"
done
touch "$T/ready"
wait_for "$T/go" || exit 98
"""


def eight_stores(st: Store) -> list[str]:
    ids = []
    for i in range(N):
        s = st.stores.create(f"s{i}")
        st.memories.create(s.id, "/seed.md", f"seed {i}", actor=None)
        ids.append(s.id)
    return ids


def test_one_daemon_serves_eight_stores_each_at_its_path_with_its_mode(
    launch: Callable[..., Run], store: Store, tmp_path: Path,  # noqa: F811
) -> None:
    ids = eight_stores(store)
    root = tmp_path / "root"
    # The last store is read-only.
    args = [a for i, sid in enumerate(ids)
            for a in ("--store", sid + (":read_only" if i == N - 1 else ""))]
    r = launch([*args, "--root", str(root), "--isolation", "namespace"], EIGHT_SCRIPT,
               env={"ROOT": str(root)})
    r.wait_file("ready")
    daemons = memfs_daemons(r.proc.pid)
    assert len(daemons) == 1, daemons
    print(f"\nsession daemon RSS with {N} stores: {rss_kib(daemons[0]) / 1024:.1f} MiB")
    # Its stores' change watchers share one inotify watch of the database.
    fds = Path(f"/proc/{daemons[0]}/fd")
    assert [os.readlink(fds / fd) for fd in os.listdir(fds)].count("anon_inode:inotify") == 1
    (tmp_path / "go").touch()
    assert r.wait() == 0, r.err
    assert r.err == ""

    slugs = [f"s{i}" for i in range(N)]
    assert (tmp_path / "mounts-inside").read_text().split() == [str(root / s) for s in slugs]
    assert (tmp_path / "ls-root").read_text().split() == slugs
    for i, s in enumerate(slugs):
        assert (tmp_path / f"seed-{s}").read_text() == f"seed {i}"
        if i == N - 1:
            assert not (tmp_path / f"w-{s}").exists()
            assert "Read-only file system" in (tmp_path / f"err-{s}").read_text()
            assert (tmp_path / f"ls-{s}").read_text().split() == ["seed.md"]
        else:
            # Its own file only: nothing written in another store shows up here.
            assert (tmp_path / f"ls-{s}").read_text().split() == ["own.md", "seed.md"]
        paths = sorted(m.path for m in store.memories.list(ids[i]).data)
        assert paths == (["/seed.md"] if i == N - 1 else ["/own.md", "/seed.md"])
        if i < N - 1:
            assert store.memories.get_by_path(ids[i], "/own.md").content == f"from {s}\n"

    # The refused write is logged as a failed tool call, at the path the agent used.
    events = store.events.list(r.sid, limit=1000).data
    uses = {e.body["id"]: e.body for e in events if e.type == "agent.tool_use"}
    refused = [e.body for e in events if e.type == "agent.tool_result" and e.body["is_error"]]
    assert [uses[x["tool_use_id"]]["input"]["file_path"] for x in refused] == [
        f"{root}/s{N - 1}/own.md"]
    created = {u["input"]["file_path"] for u in uses.values()
               if u["input"]["operation"] == "create"}
    assert created == {f"{root}/{s}/own.md" for s in slugs}


def test_session_start_with_eight_stores(
    launch: Callable[..., Run], store: Store, tmp_path: Path,  # noqa: F811
) -> None:
    """From `memfs run` to the command running (the bench measures it properly)."""
    ids = eight_stores(store)
    took = {}
    for n in (1, N):
        args = [a for sid in ids[:n] for a in ("--store", sid)]
        started = time.time()
        r = launch([*args, "--root", str(tmp_path / f"root{n}"), "--isolation", "namespace"],
                   f'date +%s.%N > "$T/started{n}"')
        assert r.wait() == 0, r.err
        took[n] = float((tmp_path / f"started{n}").read_text()) - started
    print(f"\nsession start: 1 store {took[1]:.2f} s, {N} stores {took[N]:.2f} s")
    assert took[N] < 2.0


def test_a_killed_launcher_takes_the_session_daemon_and_its_mounts(
    launch: Callable[..., Run], store: Store, tmp_path: Path,  # noqa: F811
) -> None:
    ids = eight_stores(store)
    root = tmp_path / "root"
    args = [a for sid in ids for a in ("--store", sid)]
    r = launch([*args, "--root", str(root), "--isolation", "namespace"],
               'echo hi > "$ROOT/s3/x.md"; touch "$T/ready"; exec sleep 60',
               env={"ROOT": str(root)})
    r.wait_file("ready")
    (daemon,) = memfs_daemons(r.proc.pid)
    pid = cmd_pid(tmp_path)
    ns = os.readlink(f"/proc/{daemon}/ns/mnt")
    r.proc.send_signal(signal.SIGKILL)
    r.wait()
    wait_until(lambda: not os.path.exists(f"/proc/{daemon}"), SESSION_DEADLINE)
    wait_until(lambda: not os.path.exists(f"/proc/{pid}"), SESSION_DEADLINE)
    # Nobody is left in the session's namespace: it is gone, and its mounts with it.
    assert not any(os.readlink(f"/proc/{p}/ns/mnt") == ns
                   for p in os.listdir("/proc") if p.isdigit() and _readable_ns(p))
    assert store.memories.get_by_path(ids[3], "/x.md").content == "hi\n"


def _readable_ns(pid: str) -> bool:
    try:
        os.readlink(f"/proc/{pid}/ns/mnt")
        return True
    except OSError:
        return False
