"""Time-travel mounts (README "Time travel"): ``memfs mount STORE DIR --at AT``, local and
remote, at several boundaries of a history: every file read equals a model of the history,
every write is EROFS, and the mount never changes afterwards. (``memfs run --store NAME@AT``:
tests/integration/test_session.py.)"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memfs.models import Actor
from memfs.rules import format_time
from memfs.store import Store
from tests.support import wait_until
from tests.support.mount import Mount, in_proc_mounts, require_fuse
from tests.support.server import Server, start_server, stop_server
from tests.support.session import needs_root

KEY = "sk-memfs-timetravel"


def _tick() -> str:
    t = format_time(datetime.now(UTC))
    wait_until(lambda: format_time(datetime.now(UTC)) != t, interval=0.00001)
    return t


def make_history(store: Store) -> tuple[str, list[tuple[str, dict[str, str]]]]:
    """A store with a history by two sessions (creates, modifies, renames, a rename over
    another memory, a directory rename, deletes); returns its id and the boundaries to mount,
    each with the model's state (path -> content) there."""
    sid = store.stores.create("time travel").id
    s1, s2 = (store.sessions.create([{"type": "memory_store", "memory_store_id": sid}]).id
              for _ in range(2))
    a, b = Actor.session(s1), Actor.session(s2)
    model: dict[str, str] = {}
    cuts: list[tuple[str, dict[str, str]]] = [(_tick(), {})]

    def cut_after(m_version: str) -> None:
        cuts.append((m_version, dict(model)))

    def write(actor: Actor, path: str, text: str) -> str:
        model[path] = text
        return store.memories.write_path(sid, path, text, actor=actor).memory_version_id

    cut_after(write(a, "/notes.md", "first\n"))
    write(a, "/d/one.md", "one\n")
    before_s2 = dict(model)
    write(b, "/d/two.md", "two\n")
    cut_after(write(a, "/notes.md", "second\n"))
    store.memories.rename_path(sid, "/d/one.md", "/d/uno.md", actor=b)
    model["/d/uno.md"] = model.pop("/d/one.md")
    cuts.append((_tick(), dict(model)))
    # over another memory: it takes the content, the renamed one is deleted (the cut: after
    # the deletion, the transaction's last version)
    store.memories.rename_path(sid, "/d/two.md", "/notes.md", actor=a)
    model["/notes.md"] = model.pop("/d/two.md")
    cut_after(store.versions.list(sid, limit=1).data[0].id)
    store.memories.rename_prefix(sid, "/d/", "/e/", actor=b)
    model["/e/uno.md"] = model.pop("/d/uno.md")
    store.memories.delete_path(sid, "/notes.md", actor=a)
    del model["/notes.md"]
    cut_after(store.versions.list(sid, limit=1).data[0].id)
    cuts.append((s2, before_s2))  # a session: just before its first write
    write(a, "/later.md", "after every cut\n")
    return sid, cuts


def read_all(root: Path) -> dict[str, str]:
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = Path(d) / f
            out["/" + str(p.relative_to(root))] = p.read_text()
    return out


def errno_of(fn: Callable[[], object]) -> int:
    try:
        fn()
    except OSError as e:
        return e.errno or 0
    raise AssertionError("no error")


def check_mount(m: Mount, state: dict[str, str], store: Store, sid: str) -> None:
    assert read_all(m.root) == state
    assert errno_of(lambda: (m.root / "new.md").write_text("x")) == errno.EROFS
    assert errno_of(lambda: os.mkdir(m.root / "newdir")) == errno.EROFS
    for path in state:
        f = m.root / path.lstrip("/")
        assert errno_of(lambda f=f: open(f, "a")) == errno.EROFS
        assert errno_of(lambda f=f: os.unlink(f)) == errno.EROFS
        assert errno_of(lambda f=f: os.rename(f, m.root / "moved.md")) == errno.EROFS
        assert os.getxattr(f, "user.memfs.memory_version_id").startswith(b"memver_")
    # A change made now never shows in the snapshot.
    store.memories.write_path(sid, "/later.md", f"changed {time.time()}\n", actor=Actor.user("u"))
    time.sleep(0.3)  # the point: the change does not show, however long one waits
    assert read_all(m.root) == state


def test_local_mounts_at_every_cut(fuse, open_store, mounter) -> None:
    store = open_store()
    sid, cuts = make_history(store)
    assert len(cuts) >= 6
    for i, (at, state) in enumerate(cuts):
        m = mounter(sid, "--at", at, name=f"at{i}")
        check_mount(m, state, store, sid)
        assert "as it was at" in m.log()
        m.stop()
        assert not in_proc_mounts(m.root)


def test_a_bad_at_is_one_line_and_mounts_nothing(fuse, open_store, db, tmp_path) -> None:
    store = open_store()
    sid = store.stores.create("tt").id
    for at, what in [("yesterday", "invalid at"), ("memver_01nothere", "not found"),
                     ("sesn_01nothere", "not found")]:
        target = tmp_path / "mnt"
        r = subprocess.run([sys.executable, "-m", "memfs", "--db", str(db), "mount", sid,
                            str(target), "--at", at], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode != 0 and what in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
        assert not target.exists()  # the mount point it made is removed again


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    require_fuse()
    s = start_server(tmp_path_factory.mktemp("timetravel"), "--api-key", KEY)
    yield s
    assert stop_server(s) == 0


def test_remote_mounts_at_cuts(server, tmp_path) -> None:
    db = Path(server.stderr).parent / "memfs.db"
    store = Store(db)
    started: list[Mount] = []
    try:
        sid, cuts = make_history(store)
        for i, (at, state) in enumerate(cuts):
            m = Mount(db, sid, tmp_path / f"r{i}", ["--at", at],
                      {"MEMFS_URL": server.url, "MEMFS_API_KEY": KEY})
            started.append(m)
            m.wait_mounted()
            check_mount(m, state, store, sid)
            m.stop()
    finally:
        for m in started:
            m.stop()
        store.close()


# -- memfs run --store NAME@AT ---------------------------------------------------------------


RUN_SCRIPT = r"""
D=$(ls -d "$ROOT"/*/ | head -1)
cat "$D/a.md" > "$T/cat-a"
ls "$D" > "$T/ls"
cp "$MEMFS_SYSTEM_PROMPT_FILE" "$T/prompt.md"
if (echo nope > "$D/b.md") 2> "$T/erofs"; then exit 99; fi
if (echo nope >> "$D/a.md") 2>> "$T/erofs"; then exit 98; fi
exit 0
"""


@pytest.mark.parametrize("isolation", ["namespace", "none"])
def test_run_with_a_store_as_it_was(fuse, isolation, launch, db, tmp_path) -> None:  # noqa: F811
    needs_root(isolation)
    store = Store(db)
    try:
        # A name with '@' in it: the whole ref is tried as a store first.
        sid = store.stores.create("team@home").id
        first = store.memories.write_path(sid, "/a.md", "old\n", actor=None).memory_version_id
        store.memories.write_path(sid, "/a.md", "new\n", actor=None)
        store.memories.write_path(sid, "/later.md", "later\n", actor=None)
        root = tmp_path / "root"
        r = launch(["--store", f"team@home@{first}:ro", "--root", str(root),
                    "--isolation", isolation], RUN_SCRIPT, env={"ROOT": str(root)})
        assert r.wait() == 0, r.err
        assert (tmp_path / "cat-a").read_text() == "old\n"
        assert (tmp_path / "ls").read_text().split() == ["a.md"]
        assert (tmp_path / "erofs").read_text().count("Read-only file system") == 2
        prompt = (tmp_path / "prompt.md").read_text()
        assert f"a snapshot of this store as it was at {first}" in prompt, prompt
        s = store.sessions.get(r.sid)
        assert [res.access for res in s.resources] == ["read_only"]
        assert s.metadata[f"memfs_at.{sid}"].startswith(first)
        shown = subprocess.run([sys.executable, "-m", "memfs", "--db", str(db), "session",
                                "show", r.sid], capture_output=True, text=True, timeout=30)
        assert f"memfs_at.{sid}={first}" in shown.stdout
        assert store.memories.get_by_path(sid, "/a.md").content == "new\n"  # untouched
        # ':read_write' with '@AT', a bad AT: one line, no session.
        for ref, what in [(f"team@home@{first}:rw", "read-only snapshot"),
                          ("team@home@yesterday", "invalid at")]:
            bad = launch(["--store", ref, "--root", str(tmp_path / "r2"),
                          "--isolation", isolation], "exit 0", env={"ROOT": str(root)})
            assert bad.wait() != 0
            lines = bad.err.strip().splitlines()
            assert len(lines) == 1 and what in lines[0], bad.err
        assert len(store.sessions.list(include_archived=True).data) == 1
    finally:
        store.close()


def test_a_redacted_version_in_effect_and_history_in_a_snapshot(fuse, open_store,
                                                                mounter) -> None:
    """A file whose version in effect was redacted since reads empty and says so in
    ``user.memfs.redacted``; ``.history/`` inside a snapshot mount ends at its boundary."""
    store = open_store()
    sid = store.stores.create("redacted then").id
    user = Actor.user("u")
    old = store.memories.write_path(sid, "/secret.md", "the password\n", actor=user)
    kept = store.memories.write_path(sid, "/kept.md", "v1\n", actor=user)
    store.memories.write_path(sid, "/secret.md", "nothing to see\n", actor=user)
    store.memories.write_path(sid, "/kept.md", "v2 (after the boundary)\n", actor=user)
    store.versions.redact(sid, old.memory_version_id, actor=user)
    m = mounter(sid, "--at", kept.memory_version_id, name="redacted")
    secret = m.root / "secret.md"
    assert secret.read_text() == ""
    assert os.getxattr(secret, "user.memfs.redacted").startswith(b"20")
    assert "user.memfs.redacted" in os.listxattr(secret)
    assert "user.memfs.redacted" not in os.listxattr(m.root / "kept.md")
    assert (m.root / "kept.md").read_text() == "v1\n"
    # The history of kept.md inside the snapshot: its first version only.
    names = sorted(os.listdir(m.root / ".history" / "kept.md"))
    assert len(names) == 1 and names[0].endswith(kept.memory_version_id[-8:])
    assert (m.root / ".history" / "kept.md" / names[0]).read_text() == "v1\n"
    m.stop()
