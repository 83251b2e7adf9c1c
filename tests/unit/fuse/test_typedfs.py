"""Typed memories in a real mount (issue 41 item 5, SPEC §8): what a memory says about itself as
read-only xattrs (``user.memfs.type``, ``importance``, ``expires_at``, ``tags``, ``warnings``,
``description``, ``pinned``), and ``MOUNT/.describe``, the store's description computed at each
read. ``memfs mount`` in a subprocess (:class:`tests.support.mount.Mount`), written with the
shell as an agent does.

FUSE missing: the tests skip locally and fail when CI=true.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memfs.rules import local_user_actor
from memfs.store import Store
from tests.support import wait_until
from tests.support.mount import Mount, errno_of, require_fuse, sh

pytestmark = pytest.mark.fuse

META = ("user.memfs.type", "user.memfs.importance", "user.memfs.expires_at", "user.memfs.tags",
        "user.memfs.warnings", "user.memfs.description", "user.memfs.pinned")
FRONT = ("---\ntype: knowledge\nimportance: very\ntags: [ops, paging]\n"
         "description: who is paged at night\npinned: true\n---\nDana is paged first.\n")


@dataclass
class Mounted:
    store: Store
    sid: str
    mount: Mount

    @property
    def root(self) -> Path:
        return self.mount.root


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Mounted]:
    require_fuse()
    db = tmp_path / "memfs.db"
    store = Store(db)
    sid = store.stores.create("typed").id
    m = Mount(db, sid, tmp_path / "mnt", [], {"MEMFS_EMBEDDINGS": "none"})
    try:
        m.wait_mounted()
        yield Mounted(store, sid, m)
    finally:
        m.stop()
        store.close()


def meta_names(f: Path) -> list[str]:
    return [n for n in os.listxattr(f) if n in META]


def xattr(f: Path, name: str) -> bytes | None:
    try:
        return os.getxattr(f, name)
    except OSError as e:
        assert e.errno == errno.ENODATA, e
        return None


def described(r: Path) -> dict[str, Any]:
    data = (r / ".describe").read_bytes()
    assert data.endswith(b"}\n")
    out: dict[str, Any] = json.loads(data)
    return out


def without_at(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != "at"}


# -- xattrs -----------------------------------------------------------------------------------


def test_a_context_memory_by_its_directory_shows_its_type_at_once(mounted: Mounted) -> None:
    r = mounted.root
    sh("mkdir context && echo 'standup at 10' > context/today.md", r)
    f = r / "context" / "today.md"
    # At once: the xattrs come from the mount's own write, not from the feed.
    assert os.getxattr(f, "user.memfs.type") == b"context"
    assert os.getxattr(f, "user.memfs.importance") == b"0.2"
    m = mounted.store.memories.get(mounted.sid, os.getxattr(f, "user.memfs.memory_id").decode())
    assert m.memfs_meta is not None and m.memfs_meta.expires_at is not None
    assert os.getxattr(f, "user.memfs.expires_at") == m.memfs_meta.expires_at.encode()
    assert meta_names(f) == ["user.memfs.type", "user.memfs.importance",
                             "user.memfs.expires_at"]
    for absent in ("user.memfs.tags", "user.memfs.warnings", "user.memfs.description",
                   "user.memfs.pinned"):
        assert errno_of(lambda n=absent: os.getxattr(f, n)) == errno.ENODATA
    # getfattr, as an agent reads them.
    out = sh("getfattr --absolute-names -n user.memfs.type --only-values context/today.md", r,
             check=False)
    if out.returncode != 127:  # getfattr installed
        assert out.stdout == "context"


def test_front_matter_tags_description_pinned_and_a_bad_importance(mounted: Mounted) -> None:
    r = mounted.root
    (r / "oncall.md").write_text(FRONT)
    f = r / "oncall.md"
    assert os.getxattr(f, "user.memfs.type") == b"knowledge"
    assert os.getxattr(f, "user.memfs.tags") == b"ops,paging"
    assert os.getxattr(f, "user.memfs.description") == b"who is paged at night"
    assert os.getxattr(f, "user.memfs.pinned") == b"true"
    # A bad value never fails the write: the type's importance, and a warning, one a line.
    assert os.getxattr(f, "user.memfs.importance") == b"0.5"
    warnings = os.getxattr(f, "user.memfs.warnings").decode().split("\n")
    assert len(warnings) == 1 and "importance" in warnings[0] and "'very'" in warnings[0]
    assert "user.memfs.expires_at" not in os.listxattr(f)  # knowledge never expires
    assert f.read_text() == FRONT  # the text stays the truth
    # Read-only, as the other xattrs: EPERM, logged nowhere as a change.
    for name in ("user.memfs.type", "user.memfs.tags"):
        assert errno_of(lambda n=name: os.setxattr(f, n, b"decision")) == errno.EPERM
        assert errno_of(lambda n=name: os.removexattr(f, n)) == errno.EPERM
    assert os.getxattr(f, "user.memfs.type") == b"knowledge"


def test_an_untyped_memory_has_none_of_them(mounted: Mounted) -> None:
    r = mounted.root
    sh("echo 'plain text' > plain.md && mkdir notes && echo x > notes/n.md", r)
    for f in (r / "plain.md", r / "notes" / "n.md"):
        assert os.listxattr(f) == ["user.memfs.memory_id", "user.memfs.memory_version_id",
                                   "user.memfs.content_sha256"]
        for name in META:
            assert errno_of(lambda n=name, f=f: os.getxattr(f, n)) == errno.ENODATA
    assert os.listxattr(r / "notes") == []


def test_a_change_made_elsewhere_shows_once_the_feed_brings_it(mounted: Mounted) -> None:
    r, store, sid = mounted.root, mounted.store, mounted.sid
    sh("echo 'plain text' > plain.md && mkdir context && echo 'standup' > context/today.md", r)
    f = r / "plain.md"
    store.memories.write_path(sid, "/plain.md", "---\ntype: decision\ntags: adr\n---\nchosen\n",
                              actor=local_user_actor())
    wait_until(lambda: xattr(f, "user.memfs.type") == b"decision", what="type from the feed")
    assert os.getxattr(f, "user.memfs.tags") == b"adr"
    assert os.getxattr(f, "user.memfs.importance") == b"0.8"
    # Types turned off in the store's metadata: every memory is derived again, without a new
    # version (no put in the feed): the mount still shows it.
    today = r / "context" / "today.md"
    assert os.getxattr(today, "user.memfs.type") == b"context"
    store.stores.update(sid, metadata={"memfs_types": "off"})
    wait_until(lambda: xattr(today, "user.memfs.type") is None, what="types off")
    assert meta_names(today) == []
    assert today.read_text() == "standup\n"


# -- .describe --------------------------------------------------------------------------------


def test_describe_is_the_stores_description_fresh_at_each_read(mounted: Mounted) -> None:
    r, store, sid = mounted.root, mounted.store, mounted.sid
    sh("mkdir context && echo 'standup at 10' > context/today.md", r)
    (r / "oncall.md").write_text(FRONT)
    first = described(r)
    assert without_at(first) == without_at(store.typed.describe(sid))
    assert first["type"] == "memfs_store_description" and first["memories"] == 2
    # Pretty JSON, in the store's order, as `memfs stores describe --json` prints it.
    text = (r / ".describe").read_text()
    assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n"
    assert list(json.loads(text)) == list(store.typed.describe(sid))
    # A write shows at the next read.
    sh("echo 'chose sqlite' > decision.md && mkdir decisions && echo y > decisions/db.md", r)
    second = described(r)
    assert second["memories"] == 4 and second["by_type"]["decision"] == 1
    assert without_at(second) == without_at(store.typed.describe(sid))
    # ... and one made elsewhere too (nothing waits for the feed: it asks the store).
    store.memories.write_path(sid, "/context/more.md", "more\n", actor=local_user_actor())
    assert described(r)["by_type"]["context"] == 2
    # stat, cat, jq-like reads agree.
    assert sh("cat .describe | python3 -c 'import json,sys; print(json.load(sys.stdin)"
              "[\"memories\"])'", r).stdout == "5\n"
    assert (r / ".describe").stat().st_size == len((r / ".describe").read_bytes())
    # Each read is a tool event.
    use, res = mounted.mount.wait_pair("read", r / ".describe")
    assert not res["is_error"]


def test_describe_is_hidden_and_read_only(mounted: Mounted) -> None:
    r = mounted.root
    sh("echo 'hello there' > a.md", r)
    f = r / ".describe"
    assert ".describe" not in os.listdir(r)
    assert sh("ls -a", r).stdout.split() == [".", "..", "a.md"]
    assert sh("grep -rl hello .", r).stdout == "./a.md\n"
    assert f.is_file() and not f.is_dir()
    before = f.read_bytes()
    assert errno_of(lambda: f.write_text("{}")) == errno.EROFS
    assert errno_of(lambda: open(f, "ab")) == errno.EROFS
    assert errno_of(lambda: os.truncate(f, 0)) == errno.EROFS
    assert errno_of(lambda: f.unlink()) == errno.EROFS
    assert errno_of(lambda: os.rename(f, r / "d.json")) == errno.EROFS
    assert errno_of(lambda: os.rename(r / "a.md", f)) == errno.EROFS
    assert errno_of(lambda: os.setxattr(f, "user.x", b"1")) == errno.EROFS
    assert errno_of(lambda: os.listdir(f)) == errno.ENOTDIR
    assert errno_of(lambda: (f / "x").stat()) == errno.ENOTDIR
    assert json.loads(f.read_bytes())["memories"] == json.loads(before)["memories"] == 1
    assert (r / "a.md").read_text() == "hello there\n"
    use, res = mounted.mount.wait_pair("write", f)
    assert res["is_error"]
    assert "read-only (the store's description)" in json.dumps(res["content"])


def test_a_time_travel_mount_has_no_describe(mounted: Mounted, tmp_path: Path) -> None:
    """A snapshot's store does not describe (the description is of the live store): no
    ``.describe`` there, rather than today's counts under yesterday's files."""
    r, store, sid = mounted.root, mounted.store, mounted.sid
    sh("mkdir context && echo 'standup' > context/today.md", r)
    at = store.memories.tree(sid)[0].memory_version_id
    m = Mount(mounted.mount.db, sid, tmp_path / "at", ["--at", at], {"MEMFS_EMBEDDINGS": "none"})
    try:
        m.wait_mounted()
        assert (m.root / "context" / "today.md").read_text() == "standup\n"
        assert errno_of(lambda: (m.root / ".describe").stat()) == errno.ENOENT
        assert errno_of(lambda: (m.root / ".describe").read_bytes()) == errno.ENOENT
    finally:
        m.stop()


# -- .search's @type --------------------------------------------------------------------------


def test_search_by_type_from_a_path(mounted: Mounted) -> None:
    r = mounted.root
    sh("mkdir context knowledge && echo 'the deploy runs at noon' > context/deploy.md && "
       "echo 'the deploy script lives in ops' > knowledge/deploy.md", r)
    out = sh("cat '.search/@threshold=0/@type=context/deploy'", r).stdout
    assert [line.split("\t")[0] for line in out.splitlines()] == [f"{r}/context/deploy.md"]
