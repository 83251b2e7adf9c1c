"""``MOUNT/.history/`` on real mounts: a local ``memfs mount``, a remote one (``memfs serve``),
and a session daemon (``memfs run``), checked against the store's versions (the API's view).

FUSE missing: the tests skip locally and fail when CI=true (the conftest's fixtures).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from memfs import Actor, errors
from memfs.fuse.history import VERSION_NAME, version_name
from memfs.models import MemoryVersion
from memfs.store import Store
from tests.support import need, wait_until

pytestmark = pytest.mark.fuse

#: How soon a change must show in .history (measured from the write's return).
VISIBLE_WITHIN = 1.0
A = Actor.user("user_a")
B = Actor.user("user_b")


def sh(cmd: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True,
                          check=check, timeout=30)


def versions_of(store: Store, sid: str, memory_id: str) -> list[MemoryVersion]:
    out: list[MemoryVersion] = []
    page = None
    while True:
        got = store.versions.list(sid, memory_id=memory_id, limit=100, page=page)
        out += got.data
        if not got.next_page:
            return list(reversed(out))
        page = got.next_page


def files_in(d: Path) -> list[str]:
    return [n for n in sorted(os.listdir(d)) if VERSION_NAME.match(n)]


def _errno(fn: Callable[[], object]) -> int:
    try:
        fn()
    except OSError as e:
        return e.errno or 0
    return 0


def test_ls_cat_diff_grep_and_hidden_from_the_root(setup):
    store, sid, m = setup
    r = m.root
    for text in ("one needle\n", "two needle\n", "three needle\n"):
        sh(f"echo -n '{text}' > notes.md", r)
    mem = store.memories.get_by_path(sid, "/notes.md")
    want = versions_of(store, sid, mem.id)
    names = sh("ls .history/notes.md/", r).stdout.split()
    assert names == [version_name(v) for v in want] and names == sorted(names)
    assert [n.split("-")[1] for n in names] == ["created", "modified", "modified"]
    for name, v in zip(names, want, strict=True):
        f = r / ".history" / "notes.md" / name
        assert sh(f"cat .history/notes.md/{name}", r).stdout == store.versions.get(sid,
                                                                                   v.id).content
        st_ = f.stat()
        assert st_.st_size == v.content_size_bytes and st_.st_mode & 0o777 == 0o644
        assert abs(st_.st_mtime - _epoch(v.created_at)) < 1e-3
        assert os.getxattr(f, "user.memfs.memory_version_id") == v.id.encode()
        assert os.getxattr(f, "user.memfs.path") == b"/notes.md"
        assert os.getxattr(f, "user.memfs.created_by").startswith(b"user_actor:")
    d = sh(f"diff .history/notes.md/{names[0]} .history/notes.md/{names[2]}", r, check=False)
    assert d.returncode == 1 and "< one needle" in d.stdout and "> three needle" in d.stdout
    # Hidden from listings and recursive tools of the root, found by name.
    assert ".history" not in sh("ls -a", r).stdout.split()
    assert sh("grep -rl needle .", r).stdout.split() == ["./notes.md"]
    assert sh("find . -name '*needle*' -o -name '.history' -print", r).stdout == ""
    assert sh("ls .history", r).stdout.split() == ["notes.md"]
    assert sh("cd .history/notes.md && ls | wc -l", r).stdout.strip() == "3"
    assert sh("grep -rl three .history", r).stdout.split() == [f".history/notes.md/{names[2]}"]
    # Reads are tool events like any other, at the path the agent used.
    m.wait_pair("list", r / ".history" / "notes.md", name="ls")
    m.wait_pair("read", r / ".history" / "notes.md" / names[0], name="cat")


def _epoch(t: str) -> float:
    from memfs.rules import parse_time
    return parse_time(t).timestamp()


def test_deleted_renamed_redacted_and_fresh_within_a_second(setup, open_store):
    store, sid, m = setup
    r = m.root
    other = open_store()  # another Store: its writes reach the mount through the feed only
    gone = other.memories.write_path(sid, "/gone.md", "bye", actor=A)
    other.memories.delete_path(sid, "/gone.md", actor=B)
    moved = other.memories.write_path(sid, "/old.md", "x", actor=A)
    other.memories.write_path(sid, "/old.md", "x2", actor=A)
    other.memories.rename_path(sid, "/old.md", "/sub/new.md", actor=B)
    hist = r / ".history"
    wait_until(lambda: (hist / "sub" / "new.md").is_dir())
    assert sorted(os.listdir(hist)) == ["gone.md", "sub"]
    g = files_in(hist / "gone.md")
    assert g == [version_name(v) for v in versions_of(store, sid, gone.id)]
    assert g[-1].split("-")[1] == "deleted"
    dele = hist / "gone.md" / g[-1]
    assert dele.read_bytes() == b"" and os.getxattr(dele, "user.memfs.operation") == b"deleted"
    n = files_in(hist / "sub" / "new.md")
    assert n == [version_name(v) for v in versions_of(store, sid, moved.id)] and len(n) == 3
    assert os.getxattr(hist / "sub" / "new.md" / n[0], "user.memfs.path") == b"/old.md"
    assert not (hist / "old.md").exists()
    # A redaction (by another process): empty, with the xattr, within a second.
    first = hist / "sub" / "new.md" / n[0]
    assert first.read_text() == "x"
    t0 = time.monotonic()
    other.versions.redact(sid, versions_of(store, sid, moved.id)[0].id, actor=A)
    wait_until(lambda: first.stat().st_size == 0, timeout=VISIBLE_WITHIN)
    assert first.read_bytes() == b""
    assert os.getxattr(first, "user.memfs.redacted")
    took_redact = time.monotonic() - t0
    # A write in the mount, and one through another Store, each within a second.
    t0 = time.monotonic()
    (r / "sub" / "new.md").write_text("in the mount")
    wait_until(lambda: len(files_in(hist / "sub" / "new.md")) == 4, timeout=VISIBLE_WITHIN)
    took_mount = time.monotonic() - t0
    t0 = time.monotonic()
    other.memories.write_path(sid, "/sub/new.md", "elsewhere", actor=B)
    wait_until(lambda: len(files_in(hist / "sub" / "new.md")) == 5, timeout=VISIBLE_WITHIN)
    took_other = time.monotonic() - t0
    last = hist / "sub" / "new.md" / files_in(hist / "sub" / "new.md")[-1]
    assert last.read_text() == "elsewhere"
    print(f"\n.history freshness: redaction {took_redact * 1000:.0f} ms, own write "
          f"{took_mount * 1000:.0f} ms, another process {took_other * 1000:.0f} ms")


def test_every_change_under_history_is_erofs_and_logged(setup):
    store, sid, m = setup
    r = m.root
    (r / "n.md").write_text("x")
    hist = r / ".history"
    d = hist / "n.md"
    f = d / files_in(d)[0]
    checks = {
        "create": lambda: open(d / "new", "w").close(),  # noqa: SIM115
        "write": lambda: open(f, "w").close(),  # noqa: SIM115
        "append": lambda: open(f, "a").close(),  # noqa: SIM115
        "mkdir": lambda: os.mkdir(d / "x"),
        "mkdir-root": lambda: os.mkdir(r / ".history"),
        "unlink": lambda: os.unlink(f),
        "rmdir": lambda: os.rmdir(d),
        "rmdir-root": lambda: os.rmdir(hist),
        "rename-out": lambda: os.rename(f, r / "out.md"),
        "rename-in": lambda: os.rename(r / "n.md", d / "in"),
        "rename-within": lambda: os.rename(d, hist / "m.md"),
        "rename-root": lambda: os.rename(hist, r / "h"),
        "truncate": lambda: os.truncate(f, 0),
        "chmod": lambda: os.chmod(f, 0o644),
        "setxattr": lambda: os.setxattr(f, "user.memfs.operation", b"x"),
        "symlink": lambda: os.symlink("n.md", d / "s"),
    }
    got = {name: _errno(fn) for name, fn in checks.items()}
    # mkdir of the root's .history: the kernel answers EEXIST itself (the name exists).
    assert got == {n: errno.EEXIST if n == "mkdir-root" else errno.EROFS for n in checks}
    assert store.memories.get_by_path(sid, "/n.md").content == "x"
    assert len(store.versions.list(sid).data) == 1
    use, res = m.wait_pair("create", d / "new")
    assert res["is_error"] and "EROFS" in res["content"][0]["text"]
    use, res = m.wait_pair("rename", f, new_path=str(r / "out.md"))
    assert res["is_error"]
    m.wait_pair("truncate", f)


# -- model-based: random writes by two actors, .history against the API ---------------------

NAMES = ["a.md", "b.md", "c", "c/d.md"]


def expected_history(store: Store, sid: str, memory_ids: set[str]
                     ) -> dict[str, dict[str, MemoryVersion]]:
    """final path -> version file name -> version, from the API's versions."""
    out: dict[str, dict[str, MemoryVersion]] = {}
    for mid in memory_ids:
        vs = versions_of(store, sid, mid)
        if not vs:
            continue
        try:
            final: str | None = store.memories.get(sid, mid, view="basic").path
        except errors.NotFound:
            final = vs[-1].path if vs[-1].operation == "deleted" else None
        if final is None:
            continue  # its deletion was redacted: no final path left
        for v in vs:
            out.setdefault(final, {})[version_name(v)] = v
    return out


def mount_matches(root: Path, store: Store, sid: str, prefix: str,
                  want: dict[str, dict[str, MemoryVersion]]) -> str | None:
    """None if ``root/.history`` shows ``want`` exactly, else what differs (the caller
    retries: the mount catches up with the change feed meanwhile, so a name it listed a moment
    ago can be gone for a moment, ENOENT, when a memory was renamed away and back)."""
    try:
        return _mount_differs(root, store, sid, prefix, want)
    except OSError as e:
        return f"{e.filename}: {e.strerror}"


def _mount_differs(root: Path, store: Store, sid: str, prefix: str,
                   want: dict[str, dict[str, MemoryVersion]]) -> str | None:
    hist = root / ".history"
    for path, files in want.items():
        d = hist / path.lstrip("/")
        try:
            have = files_in(d)
        except OSError as e:
            return f"{path}: {e}"
        if have != sorted(files):
            return f"{path}: {have} != {sorted(files)}"
        for name, v in files.items():
            f = d / name
            full = store.versions.get(sid, v.id)
            body = b"" if v.operation == "deleted" or full.redacted_at else (
                full.content or "").encode()
            if f.read_bytes() != body:
                return f"{path}/{name}: content"
            if os.getxattr(f, "user.memfs.memory_version_id") != v.id.encode():
                return f"{path}/{name}: id"
            if os.getxattr(f, "user.memfs.memory_id") != v.memory_id.encode():
                return f"{path}/{name}: memory id"
            redacted = "user.memfs.redacted" in os.listxattr(f)
            if redacted != (full.redacted_at is not None):
                return f"{path}/{name}: redacted xattr"
    for name in NAMES:
        p = f"{prefix}/{name}"
        shown = p in want or any(q.startswith(p + "/") for q in want)
        if (hist / p.lstrip("/")).exists() != shown:
            return f"{p}: shown {not shown}, expected {shown}"
    return None


class HistoryMachine(RuleBasedStateMachine):
    root: Path
    store: Store
    sid: str
    counter = 0

    def __init__(self) -> None:
        super().__init__()
        HistoryMachine.counter += 1
        self.prefix = f"/x{HistoryMachine.counter}"
        self.memories: set[str] = set()

    def _path(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    @rule(actor=st.sampled_from([A, B]), name=st.sampled_from(NAMES),
          text=st.sampled_from(["", "x", "hello\n", "ünïcode"]))
    def write(self, actor: Actor, name: str, text: str) -> None:
        # Refused: a file where a directory is, or the other way round.
        with contextlib.suppress(errors.MemfsError):
            self.memories.add(self.store.memories.write_path(self.sid, self._path(name), text,
                                                    actor=actor).id)

    @rule(actor=st.sampled_from([A, B]), src=st.sampled_from(NAMES),
          dst=st.sampled_from(NAMES))
    def rename(self, actor: Actor, src: str, dst: str) -> None:
        with contextlib.suppress(errors.MemfsError):
            self.store.memories.rename_path(self.sid, self._path(src), self._path(dst), actor=actor)

    @rule(actor=st.sampled_from([A, B]), name=st.sampled_from(NAMES))
    def delete(self, actor: Actor, name: str) -> None:
        with contextlib.suppress(errors.MemfsError):
            self.store.memories.delete_path(self.sid, self._path(name), actor=actor)

    @rule(pick=st.integers(0, 1000))
    def redact(self, pick: int) -> None:
        vs = [v for mid in sorted(self.memories) for v in versions_of(self.store, self.sid, mid)]
        if vs:
            with contextlib.suppress(errors.InvalidRequest):  # the head of a live memory
                self.store.versions.redact(self.sid, vs[pick % len(vs)].id, actor=A)

    @rule()
    def look(self) -> None:
        """Compare now too (the mount caches what it listed: later changes must show)."""
        self.teardown()

    def teardown(self) -> None:
        want = expected_history(self.store, self.sid, self.memories)
        why: list[str | None] = []

        def matches() -> bool:
            why[:] = [mount_matches(self.root, self.store, self.sid, self.prefix, want)]
            return why[0] is None

        try:
            wait_until(matches, 3.0, interval=0.02)
        except TimeoutError:
            raise AssertionError(why[0]) from None


def test_model_history_equals_the_api_for_every_memory(setup, open_store):
    _, sid, m = setup
    HistoryMachine.root = m.root
    HistoryMachine.store = open_store()  # another Store than the mount's
    HistoryMachine.sid = sid
    run_state_machine_as_test(HistoryMachine, settings=settings(
        max_examples=int(os.environ.get("MEMFS_HISTORY_EXAMPLES", "25")),
        stateful_step_count=int(os.environ.get("MEMFS_HISTORY_STEPS", "15")),
        deadline=None, suppress_health_check=list(HealthCheck)))


# -- a remote mount ---------------------------------------------------------------------------


def test_remote_mount_history(sdk, mounts, server):  # noqa: F811
    s = sdk.beta.memory_stores.create(name="history")
    mems = sdk.beta.memory_stores.memories
    mem = mems.create(s.id, path="/notes.md", content="v0")
    for i in range(1, 4):
        mems.update(mem.id, memory_store_id=s.id, content=f"v{i}")
    remote = mounts(s.id, name="remote")
    db = Store(Path(server.stderr).parent / "memfs.db")
    try:
        d = remote.root / ".history" / "notes.md"
        want = versions_of(db, s.id, mem.id)
        assert files_in(d) == [version_name(v) for v in want]
        assert [(d / n).read_text() for n in files_in(d)] == ["v0", "v1", "v2", "v3"]
        assert ".history" not in os.listdir(remote.root)
        t0 = time.monotonic()
        mems.update(mem.id, memory_store_id=s.id, content="v4")
        wait_until(lambda: len(files_in(d)) == 5, timeout=VISIBLE_WITHIN)
        took = time.monotonic() - t0
        first = d / files_in(d)[0]
        db.versions.redact(s.id, want[0].id, actor=A)  # the server's feed carries it
        wait_until(lambda: first.stat().st_size == 0, timeout=VISIBLE_WITHIN)
        assert os.getxattr(first, "user.memfs.redacted")
        mems.delete(mem.id, memory_store_id=s.id)
        wait_until(lambda: files_in(d)[-1].split("-")[1] == "deleted", timeout=VISIBLE_WITHIN)
        assert _errno(lambda: open(d / "x", "w").close()) == errno.EROFS  # noqa: SIM115
        assert mount_matches(remote.root, db, s.id, "/none",
                             expected_history(db, s.id, {mem.id})) is None
        print(f"\nremote .history: a new version listed {took * 1000:.0f} ms after the API")
    finally:
        db.close()


def ls_l(d: Path) -> tuple[float, int]:
    """One ``ls -l`` of ``d`` (listdir + lstat of each entry): seconds, entries."""
    t0 = time.perf_counter()
    names = os.listdir(d)
    for n in names:
        os.lstat(d / n)
    return time.perf_counter() - t0, len(names)


def test_remote_listing_of_100_versions_warm(sdk, mounts, server):  # noqa: F811
    s = sdk.beta.memory_stores.create(name="history-100")
    mems = sdk.beta.memory_stores.memories
    mem = mems.create(s.id, path="/notes.md", content="v0")
    for i in range(1, 100):
        mems.update(mem.id, memory_store_id=s.id, content=f"v{i}")
    remote = mounts(s.id, name="remote100")
    local = mounts(s.id, name="local100", remote=False)
    figures = {}
    for kind, m in (("remote", remote), ("local", local)):
        d = m.root / ".history" / "notes.md"
        cold, n = ls_l(d)
        assert n == 100
        warm = sorted(ls_l(d)[0] for _ in range(21))[10]
        figures[kind] = (cold, warm)
    print("\n.history listing of 100 versions (ls -l): " + ", ".join(
        f"{k} cold {c * 1000:.1f} ms, warm median {w * 1000:.2f} ms"
        for k, (c, w) in figures.items()))
    assert max(w for _, w in figures.values()) < 0.010


# -- a session daemon ----------------------------------------------------------------------

SESSION_SCRIPT = r"""
R=$ROOT
ls -a "$R/s0" > "$T/la"
ls "$R/s0/.history/seed.md/" > "$T/h1"
cat "$R/s0/.history/seed.md/"* > "$T/c1"
echo new > "$R/s0/seed.md"
for _ in $(seq 200); do
    [ "$(ls "$R/s0/.history/seed.md/" | wc -l)" -ge 2 ] && break; sleep 0.005
done
ls "$R/s0/.history/seed.md/" > "$T/h2"
ls "$R/s1/.history/" > "$T/h-s1"
if echo x 2> "$T/err" > "$R/s0/.history/seed.md/x"; then echo bad > "$T/wrote"; fi
"""


def test_session_daemon_history(launch, open_store, tmp_path):  # noqa: F811
    need(os.geteuid() == 0, "the namespace mode needs root")
    store = open_store()
    ids = []
    for i in range(2):
        s = store.stores.create(f"s{i}")
        store.memories.create(s.id, "/seed.md", f"seed {i}", actor=None)
        store.memories.create(s.id, f"/only{i}.md", "o", actor=None)
        ids.append(s.id)
    root = tmp_path / "root"
    r = launch(["--store", ids[0], "--store", ids[1], "--root", str(root),
                "--isolation", "namespace"], SESSION_SCRIPT, env={"ROOT": str(root)})
    assert r.wait() == 0, r.err
    assert ".history" not in (tmp_path / "la").read_text().split()
    h1 = (tmp_path / "h1").read_text().split()
    assert len(h1) == 1 and h1[0].split("-")[1] == "created"
    assert (tmp_path / "c1").read_text() == "seed 0"
    mem = store.memories.get_by_path(ids[0], "/seed.md")
    assert (tmp_path / "h2").read_text().split() == [
        version_name(v) for v in versions_of(store, ids[0], mem.id)]
    assert (tmp_path / "h-s1").read_text().split() == ["only1.md", "seed.md"]
    assert "Read-only file system" in (tmp_path / "err").read_text()
    assert not (tmp_path / "wrote").exists()
