"""Remote mounts: ``memfs --url URL mount`` against a real ``memfs serve`` subprocess, driven
by the anthropic SDK (2.14.0) and by plain file operations on the mount.

Same semantics as a local mount: versions attributed to the session, the store's errors as
errno, the server's limits, tool events recorded on the server, and changes made elsewhere
pushed by the server's change stream into every mount of the store.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memfs.client import Client
from tests.support import wait_until
from tests.support.mount import Mount, in_proc_mounts, require_fuse
from tests.support.remote import KEY, MAX_MEMORIES, remote_env
from tests.support.server import sdk, start_server, stop_server

#: What "visible within a second" means, measured from the API call's return.
VISIBLE_WITHIN = 1.0


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def _until(fn: Callable[[], bool], deadline: float = VISIBLE_WITHIN) -> float:
    """Seconds until ``fn()`` is true; fails after ``deadline``."""
    t0 = time.monotonic()
    wait_until(fn, deadline, interval=0.005)
    return time.monotonic() - t0


def _errno_of(fn: Callable[[], object]) -> int:
    try:
        fn()
    except OSError as e:
        return e.errno
    raise AssertionError("expected an OSError")


# -- visibility ---------------------------------------------------------------------------------


def test_api_changes_are_pushed_to_remote_and_local_mounts(sdk, mounts, capsys):
    """Creates, updates, renames and deletes made through the SDK reach a remote mount and a
    local mount of the same database within a second (the latencies are printed)."""
    s = sdk.beta.memory_stores.create(name="pushed")
    mems = sdk.beta.memory_stores.memories
    remote = mounts(s.id, name="remote")
    local = mounts(s.id, name="local", remote=False)
    roots = {"remote": remote.root, "local": local.root}
    latency: dict[str, list[float]] = {"remote": [], "local": []}

    def visible(check: Callable[[Path], bool]) -> None:
        """Poll both mounts together; record when each one first shows the change."""
        t0 = time.monotonic()
        seen: dict[str, float] = {}
        while len(seen) < len(roots):
            for kind, root in roots.items():
                if kind not in seen and check(root):
                    seen[kind] = time.monotonic() - t0
            if time.monotonic() - t0 > VISIBLE_WITHIN:
                missing = sorted(set(roots) - set(seen))
                raise AssertionError(f"not visible within {VISIBLE_WITHIN} s in {missing}: "
                                     f"{sorted(os.walk(roots[missing[0]]))}")
            time.sleep(0.002)  # a measurement: polls often, each mount's time its own
        for kind, took in seen.items():
            latency[kind].append(took)

    made = []
    for i in range(4):
        m = mems.create(s.id, path=f"/lat/{i}.md", content=f"v{i}")
        made.append(m)
        visible(lambda root, i=i: _read(root / "lat" / f"{i}.md") == f"v{i}")
    # content changes reach cached pages too (read first so the kernel caches them)
    for root in roots.values():
        assert (root / "lat" / "0.md").read_text() == "v0"
    mems.update(made[0].id, memory_store_id=s.id, content="changed, and longer")
    visible(lambda root: _read(root / "lat" / "0.md") == "changed, and longer")
    mems.update(made[1].id, memory_store_id=s.id, path="/moved/1.md")
    visible(lambda root: _read(root / "moved" / "1.md") == "v1"
            and not (root / "lat" / "1.md").exists())
    mems.delete(made[2].id, memory_store_id=s.id)
    visible(lambda root: not (root / "lat" / "2.md").exists())
    # and what one mount writes, the other one sees
    (remote.root / "from-remote.md").write_text("r")
    visible(lambda root: _read(root / "from-remote.md") == "r")
    (local.root / "from-local.md").write_text("l")
    visible(lambda root: _read(root / "from-local.md") == "l")
    with capsys.disabled():
        for kind, values in latency.items():
            print(f"\n{kind} mount: API->visible latency max {max(values) * 1000:.0f} ms, "
                  f"mean {sum(values) / len(values) * 1000:.0f} ms over {len(values)} changes")
    assert max(latency["remote"]) < VISIBLE_WITHIN


def test_a_close_after_a_delete_elsewhere_stores_the_file(sdk, mounts):
    """Issue 19 A on real mounts, made deterministic: between a descriptor's write and its
    close, the memory is deleted through the API and the mount shows it gone. The close that
    returns 0 has stored the bytes (the memory made again: the last close wins), and the mount
    shows the file again."""
    s = sdk.beta.memory_stores.create(name="deleted-while-written")
    mems = sdk.beta.memory_stores.memories
    for kind, remote in (("remote", True), ("local", False)):
        mnt = mounts(s.id, name=kind, remote=remote)
        old = mems.create(s.id, path=f"/{kind}.md", content="old")
        f = mnt.root / f"{kind}.md"
        _until(lambda f=f: _read(f) == "old", deadline=5)
        fd = os.open(f, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, b"written before the delete")
            mems.delete(old.id, memory_store_id=s.id)
            _until(lambda f=f: not f.exists(), deadline=5)  # the feed took it out of the mount
            os.write(fd, b", and after")
        finally:
            os.close(fd)  # raises if the close failed
        now = {x.path: x for x in mems.list(s.id)}
        assert f"/{kind}.md" in now, kind
        got = mems.retrieve(now[f"/{kind}.md"].id, memory_store_id=s.id)
        assert got.content == "written before the delete, and after", kind
        assert _read(f) == got.content, kind
        use, res = mnt.wait_pair("write", f)
        assert res["content"][0]["text"] == f"wrote 36 bytes to {f}", kind
        assert res["memory_id"] == got.id, kind


def test_remote_mount_latency_of_changes_made_by_another_process(sdk, mounts):
    """What a local mount (another process) writes reaches a remote mount through the
    server, which wakes on the database changing (issue 12): p50/p99 over 200 changes."""
    s = sdk.beta.memory_stores.create(name="latency")
    remote = mounts(s.id, name="remote")
    local = mounts(s.id, name="local", remote=False)
    latencies = []
    for i in range(200):
        t0 = time.monotonic()
        (local.root / f"f{i}.md").write_text(f"v{i}")
        while _read(remote.root / f"f{i}.md") != f"v{i}":
            if time.monotonic() - t0 > VISIBLE_WITHIN:
                raise AssertionError(f"change {i} not visible within {VISIBLE_WITHIN} s")
            time.sleep(0.0005)  # a measurement: polls every 0.5 ms
        latencies.append(time.monotonic() - t0)
    latencies.sort()
    p50, p99 = latencies[100], latencies[198]
    print(f"\nlocal mount -> server -> remote mount over 200 changes: p50 {p50 * 1000:.1f} ms,"
          f" p99 {p99 * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms")
    assert p99 < 0.15  # 0.2 s when the server polled every 0.05 s


def test_a_mount_survives_a_server_restart(tmp_path):
    """The server goes away: calls fail with EIO (nothing hangs); it comes back on the same
    port: the mount reconnects from where it was and sees the changes made meanwhile."""
    require_fuse()
    (tmp_path / "own").mkdir()
    own = start_server(tmp_path / "own", "--api-key", KEY)
    port = own.url.rsplit(":", 1)[1]
    api = sdk(own.url, KEY)
    s = api.beta.memory_stores.create(name="restart")
    api.beta.memory_stores.memories.create(s.id, path="/a.md", content="before")
    m = Mount(tmp_path / "unused.db", s.id, tmp_path / "mnt", [], remote_env(own.url))
    try:
        m.wait_mounted()
        assert (m.root / "a.md").read_text() == "before"
        assert stop_server(own) == 0
        t0 = time.monotonic()
        assert _errno_of(lambda: (m.root / "b.md").write_text("x")) == errno.EIO
        assert time.monotonic() - t0 < 5
        assert (m.root / "a.md").read_text() == "before"  # cached content still reads
        again = start_server(tmp_path / "own", "--api-key", KEY, "--port", port)
        try:
            api = sdk(again.url, KEY)
            api.beta.memory_stores.memories.create(s.id, path="/c.md", content="after")
            _until(lambda: _read(m.root / "c.md") == "after", deadline=10)
            (m.root / "d.md").write_text("d")
            got = [x.path for x in api.beta.memory_stores.memories.list(s.id)]
            assert sorted(got) == ["/a.md", "/c.md", "/d.md"]
        finally:
            stop_server(again)
    finally:
        m.stop()


def test_a_hung_server_never_freezes_the_mount(tmp_path):
    """The server stops answering (SIGSTOP): a write waits for it in a worker thread, while
    cached reads and listings answer at once; the mount carries on when the server does."""
    require_fuse()
    (tmp_path / "own").mkdir()
    own = start_server(tmp_path / "own", "--api-key", KEY)
    api = sdk(own.url, KEY)
    s = api.beta.memory_stores.create(name="hung")
    api.beta.memory_stores.memories.create(s.id, path="/a.md", content="cached")
    m = Mount(tmp_path / "unused.db", s.id, tmp_path / "mnt", [], remote_env(own.url))
    writer: threading.Thread | None = None
    try:
        m.wait_mounted()
        assert (m.root / "a.md").read_text() == "cached"
        own.proc.send_signal(signal.SIGSTOP)
        outcome: list[object] = []

        def write() -> None:
            try:
                (m.root / "b.md").write_text("while hung")
                outcome.append("saved")
            except OSError as e:
                outcome.append(e.errno)

        writer = threading.Thread(target=write)
        writer.start()
        # The write's close is now waiting for the server (stopped: nothing of it shows).
        time.sleep(0.5)
        worst = 0.0
        for _ in range(10):
            t = time.monotonic()
            assert (m.root / "a.md").read_text() == "cached"
            assert "a.md" in os.listdir(m.root)
            worst = max(worst, time.monotonic() - t)
            time.sleep(0.05)  # the point: reads spread over the half second the server hangs
        print(f"\ncached read + ls while the server hangs: worst {worst * 1000:.1f} ms")
        assert worst < 0.5
        assert writer.is_alive()
        own.proc.send_signal(signal.SIGCONT)
        writer.join(timeout=30)
        assert outcome and outcome[0] in ("saved", errno.EIO)
        (m.root / "c.md").write_text("after")
        got = [x.path for x in api.beta.memory_stores.memories.list(s.id)]
        assert "/c.md" in got
    finally:
        own.proc.send_signal(signal.SIGCONT)
        if writer is not None:
            writer.join(timeout=30)
        m.stop()
        stop_server(own)


# -- sessions -----------------------------------------------------------------------------------


def test_session_writes_are_session_actor_and_tool_events_reach_the_server(sdk, mounts):
    s = sdk.beta.memory_stores.create(name="Session Notes")
    sess = sdk.beta.sessions.create(agent="agent_opaque", environment_id="env_opaque",
                                    resources=[{"type": "memory_store", "memory_store_id": s.id,
                                                "access": "read_write"}])
    mount_path = sess.resources[0].mount_path
    m = mounts(s.id, "--session", sess.id, "--display-root", mount_path)
    subprocess.run(["bash", "-c", f"echo 'likes tea' > {m.root}/prefs.md"], check=True)
    versions = list(sdk.beta.memory_stores.memory_versions.list(s.id, session_id=sess.id))
    assert [v.operation for v in versions] == ["created"]
    assert versions[0].created_by.type == "session_actor"
    assert versions[0].created_by.session_id == sess.id

    def pair():
        evs = list(sdk.beta.sessions.events.list(
            sess.id, types=["agent.tool_use", "agent.tool_result"], limit=100))
        uses = [e for e in evs if e.type == "agent.tool_use"
                and e.input.get("file_path") == f"{mount_path}/prefs.md"]
        results = {e.tool_use_id: e for e in evs if e.type == "agent.tool_result"}
        return [(u, results[u.id]) for u in uses if u.id in results]

    (use, result), = wait_until(pair, 5.0)
    assert use.name == "bash" and use.input["operation"] == "create"
    assert result.is_error is False
    assert result.model_extra["memory_version_id"] == versions[0].id
    # the JSON-lines log has the very same events
    assert use.id in {e["id"] for e in m.events()}


def test_read_only_attachment_refuses_writes_with_erofs(sdk, mounts):
    s = sdk.beta.memory_stores.create(name="ro attached")
    sdk.beta.memory_stores.memories.create(s.id, path="/a.md", content="keep")
    sess = sdk.beta.sessions.create(agent="agent_opaque", environment_id="env_opaque",
                                    resources=[{"type": "memory_store", "memory_store_id": s.id,
                                                "access": "read_only"}])
    m = mounts(s.id, "--session", sess.id)
    assert (m.root / "a.md").read_text() == "keep"
    assert _errno_of(lambda: (m.root / "a.md").write_text("x")) == errno.EROFS
    assert _errno_of(lambda: (m.root / "new.md").write_text("x")) == errno.EROFS
    assert _errno_of(lambda: os.unlink(m.root / "a.md")) == errno.EROFS
    _, res = m.wait_pair("write", m.root / "a.md")
    assert res["is_error"] is True and "EROFS" in res["content"][0]["text"]
    assert len(list(sdk.beta.memory_stores.memory_versions.list(s.id))) == 1


# -- errors -------------------------------------------------------------------------------------


def test_errors_through_a_remote_mount(sdk, mounts):
    s = sdk.beta.memory_stores.create(name="errors")
    mems = sdk.beta.memory_stores.memories
    m = mounts(s.id)
    root = m.root
    # EFBIG at the write() that goes over 102,400 bytes
    assert _errno_of(lambda: (root / "big.md").write_bytes(b"x" * 102_401)) == errno.EFBIG
    # An open->close in which a write failed commits nothing: the new file never existed.
    assert not (root / "big.md").exists()
    # EILSEQ at close for content that is not UTF-8
    assert _errno_of(lambda: (root / "bin.md").write_bytes(b"\xff\xfe")) == errno.EILSEQ
    # ENAMETOOLONG: more than 20 segments
    deep = root.joinpath(*["d"] * 21)
    assert _errno_of(lambda: deep.mkdir(parents=True)) == errno.ENAMETOOLONG
    # EEXIST: rename with RENAME_NOREPLACE over an existing file
    (root / "a.md").write_text("a")
    (root / "b.md").write_text("b")
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, noreplace = -100, 1
    rc = libc.renameat2(at_fdcwd, str(root / "a.md").encode(), at_fdcwd,
                        str(root / "b.md").encode(), noreplace)
    assert rc == -1 and ctypes.get_errno() == errno.EEXIST
    # rename over an existing file: the target keeps its memory (a modified version) and
    # the renamed one is deleted, in the same transaction
    source = next(x for x in mems.list(s.id) if x.path == "/a.md")
    target = next(x for x in mems.list(s.id) if x.path == "/b.md")
    os.rename(root / "a.md", root / "b.md")
    assert (root / "b.md").read_text() == "a"
    vers = sdk.beta.memory_stores.memory_versions
    (gone,) = list(vers.list(s.id, memory_id=source.id, operation="deleted"))
    kept = next(x for x in mems.list(s.id) if x.path == "/b.md")
    assert kept.id == target.id
    (renamed,) = list(vers.list(s.id, memory_id=kept.id, operation="modified"))
    assert gone.created_at == renamed.created_at
    # a directory rename moves every memory in one transaction
    (root / "dir" / "sub").mkdir(parents=True)
    for name in ("dir/1.md", "dir/sub/2.md"):
        (root / name).write_text(name)
    os.rename(root / "dir", root / "moved")
    paths = sorted(x.path for x in mems.list(s.id))
    assert paths == ["/b.md", "/moved/1.md", "/moved/sub/2.md"]
    stamps = {v.created_at for v in vers.list(s.id, operation="modified")
              if v.path.startswith("/moved/")}
    assert len(stamps) == 1
    assert (root / "moved" / "sub" / "2.md").read_text() == "dir/sub/2.md"
    # ENOSPC: the server's limit (MEMFS_MAX_MEMORIES), at open(O_CREAT); editing still works
    room = MAX_MEMORIES - len(list(mems.list(s.id)))
    for i in range(room):
        mems.create(s.id, path=f"/fill/{i}.md", content="")
    wait_until(lambda: (root / "fill").is_dir() and len(os.listdir(root / "fill")) == room)
    assert _errno_of(lambda: (root / "one-too-many.md").write_text("x")) == errno.ENOSPC
    (root / "b.md").write_text("still editable")
    assert os.statvfs(root).f_ffree == 0 and os.statvfs(root).f_files == MAX_MEMORIES
    _, res = m.wait_pair("create", root / "one-too-many.md")
    assert res["is_error"] is True and "ENOSPC" in res["content"][0]["text"]


def test_read_only_mount_and_archived_store(sdk, mounts):
    s = sdk.beta.memory_stores.create(name="ro")
    sdk.beta.memory_stores.memories.create(s.id, path="/a.md", content="a")
    ro = mounts(s.id, "--read-only", name="ro")
    assert _errno_of(lambda: (ro.root / "a.md").write_text("x")) == errno.EROFS
    rw = mounts(s.id, name="rw")
    sdk.beta.memory_stores.archive(s.id)
    # the archive is pushed too: the mount refuses writes from then on
    _until(lambda: _errno_of(lambda: (rw.root / "b.md").write_text("x")) == errno.EROFS)
    assert (rw.root / "a.md").read_text() == "a"


def test_server_down_at_mount_time_is_one_clean_error(tmp_path):
    require_fuse()
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    target = tmp_path / "mnt"
    target.mkdir()
    r = subprocess.run(
        [sys.executable, "-m", "memfs", "mount", "memstore_x", str(target)],
        env={**os.environ, **remote_env(f"http://127.0.0.1:{port}")},
        capture_output=True, text=True, timeout=30,
    )
    assert r.returncode != 0
    assert r.stderr.count("\n") == 1 and "cannot reach" in r.stderr, r.stderr
    assert not in_proc_mounts(target)


def test_wrong_key_or_unknown_store_is_one_clean_error(server, tmp_path):
    require_fuse()
    target = tmp_path / "mnt"
    target.mkdir()
    for env, words in ((remote_env(server.url, "wrong"), "API key"),
                       (remote_env(server.url), "no memory store")):
        r = subprocess.run([sys.executable, "-m", "memfs", "mount", "nothing", str(target)],
                           env={**os.environ, **env}, capture_output=True, text=True,
                           timeout=30)
        assert r.returncode != 0 and words in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert not in_proc_mounts(target)


# -- memfs run --url -----------------------------------------------------------------------------


@pytest.mark.parametrize("isolation", ["none", "namespace"])
def test_run_against_a_server(server, sdk, tmp_path, isolation):
    """``memfs --url … run``: the session is created on the server with the launcher's root,
    every store is a remote mount, writes are session_actor versions, a read_only store gives
    EROFS with a failed tool event, and the session ends terminated on the server. In the
    private namespace one daemon (memfs.daemons.sessionfs) serves both remote stores."""
    from tests.support.session import MEMFS, mounts_under, needs_root

    needs_root(isolation)

    rw = sdk.beta.memory_stores.create(name="Remote Notes")
    ro = sdk.beta.memory_stores.create(name="Remote Docs")
    sdk.beta.memory_stores.memories.create(ro.id, path="/guide.md", content="read me")
    root = tmp_path / "root"
    script = r"""
    set -u
    echo "$MEMFS_SESSION_ID" > "$T/sid"
    cat "$R/remote-docs/guide.md" > "$T/guide"
    echo 'tea, no sugar' > "$R/remote-notes/drinks.md"
    if echo nope 2> "$T/ro.err" > "$R/remote-docs/guide.md"; then exit 3; fi
    memfs versions list "$REMOTE_NOTES" --session "$MEMFS_SESSION_ID" > "$T/versions"
    """
    env = {**os.environ, **remote_env(server.url), "T": str(tmp_path), "R": str(root),
           "REMOTE_NOTES": rw.id, "MEMFS_DB": str(tmp_path / "unused.db")}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    proc = subprocess.run(
        [*MEMFS, "run", "--store", rw.id, "--store", f"{ro.id}:read_only", "--root", str(root),
         "--isolation", isolation, "--", "bash", "-c", script],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    sid = (tmp_path / "sid").read_text().strip()
    assert (tmp_path / "guide").read_text() == "read me"
    assert "Read-only file system" in (tmp_path / "ro.err").read_text()
    assert "drinks.md" in (tmp_path / "versions").read_text()  # the CLI inside used the server
    assert not (tmp_path / "unused.db").exists()  # nothing touched a local database
    assert not mounts_under(root)
    assert not root.exists() if isolation == "none" else os.listdir(root) == []

    session = sdk.beta.sessions.retrieve(sid)
    assert session.status == "terminated"
    assert sorted(r.mount_path for r in session.resources) == [
        f"{root}/remote-docs", f"{root}/remote-notes"]
    versions = list(sdk.beta.memory_stores.memory_versions.list(rw.id, session_id=sid))
    assert [v.operation for v in versions] == ["created"]
    assert versions[0].created_by.type == "session_actor"
    assert versions[0].created_by.session_id == sid
    assert list(sdk.beta.memory_stores.memory_versions.list(ro.id, session_id=sid)) == []

    def tool_events() -> list:
        return list(sdk.beta.sessions.events.list(
            sid, types=["agent.tool_use", "agent.tool_result"], limit=100))

    events = tool_events()
    uses = {e.id: e for e in events if e.type == "agent.tool_use"}
    results = [e for e in events if e.type == "agent.tool_result"]
    assert len(uses) == len(results) and all(r.tool_use_id in uses for r in results)
    failed = [r for r in results if r.is_error]
    assert any(uses[r.tool_use_id].input["file_path"] == f"{root}/remote-docs/guide.md"
               for r in failed), [(uses[r.tool_use_id].input, r.content) for r in results]
    wrote = [r for r in results if not r.is_error
             and uses[r.tool_use_id].input["file_path"] == f"{root}/remote-notes/drinks.md"
             and uses[r.tool_use_id].input["operation"] in ("create", "write")]
    assert wrote and wrote[0].model_extra.get("memory_version_id") == versions[0].id


def test_a_remote_mount_shows_typed_memories_and_describes_its_store(sdk, mounts):
    """Issue 41 over the network: a remote mount's files have their user.memfs.* attributes
    (from memfs_meta in the server's answers) and its .describe is the server's description."""
    s = sdk.beta.memory_stores.create(name="typed remote")
    remote = mounts(s.id, name="remote")
    (remote.root / "context").mkdir()
    (remote.root / "context" / "today.md").write_text("standup at 10")
    assert os.getxattr(remote.root / "context" / "today.md", "user.memfs.type") == b"context"
    sdk.beta.memory_stores.memories.create(
        s.id, path="/k.md", content="---\ntags: [a, b]\nimportance: urgent\n---\nk")
    _until(lambda: (remote.root / "k.md").exists())
    assert os.getxattr(remote.root / "k.md", "user.memfs.tags") == b"a,b"
    assert b"urgent" in os.getxattr(remote.root / "k.md", "user.memfs.warnings")
    described = json.loads((remote.root / ".describe").read_text())
    with Client(str(sdk.base_url).rstrip("/"), KEY) as client:
        expected = client.typed.describe(s.id)
    assert {k: v for k, v in described.items() if k != "at"} == {
        k: v for k, v in expected.items() if k != "at"}
    assert described["by_type"] == {"(none)": 1, "context": 1}
