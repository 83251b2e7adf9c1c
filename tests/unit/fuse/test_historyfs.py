"""memfs.fuse.history alone (a Store, no kernel), and the ``.history`` handlers of
memfs.fuse.ops."""

from __future__ import annotations

import errno
import os
import stat
from datetime import UTC, datetime, timedelta
from typing import Any

import pyfuse3

from memfs import Actor
from memfs.fuse.history import HISTORY, History, HNode, version_name, version_xattrs
from memfs.fuse.tree import Tree
from memfs.models import MemoryVersion
from memfs.store import Limits, Store
from tests.support.fsops import (  # noqa: F401 - _close_sinks: an autouse fixture
    CTX,
    ROOT,
    Fields,
    _close_sinks,
    events,
    listdir,
    make_ops,
    raises,
    read_file,
    replies,
    write_file,
)

ACTOR = Actor.user("user_test")


async def direct(fn: Any, *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)


def history_of(store: Store, sid: str) -> History:
    tree = Tree()
    tree.load(store.memories.tree(sid), store.feed.last(sid), False)
    return History(tree, store, sid, direct)


def api_versions(store: Store, sid: str, memory_id: str) -> list[MemoryVersion]:
    return list(reversed(store.versions.list(sid, memory_id=memory_id, limit=100).data))


async def names(h: History, path: str) -> list[str]:
    node = h.root
    for part in [p for p in path.split("/") if p]:
        found = await h.lookup(node, part)
        assert found is not None, (path, part)
        node = found
    return [e.name for e in await h.listing(node)]


def test_version_name_is_fixed_width_and_sorts_by_time() -> None:
    v = MemoryVersion("memver_0123456789abcdef", "mem_1", "ms_1", "modified",
                      "2026-12-01T11:16:29.000123Z", "/a.md", None, None, 3, None, None, None)
    assert version_name(v) == "20261201T111629.000123Z-modified-89abcdef"
    assert version_xattrs(v)[b"user.memfs.operation"] == b"modified"
    assert b"user.memfs.redacted" not in version_xattrs(v)


async def test_a_memory_dir_lists_its_versions_oldest_first(store: Store) -> None:
    sid = store.stores.create("h").id
    m = store.memories.write_path(sid, "/notes.md", "one", actor=ACTOR)
    for i in range(4):
        store.memories.write_path(sid, "/notes.md", f"v{i}", actor=ACTOR)
    store.memories.write_path(sid, "/a/b.md", "b", actor=ACTOR)
    h = history_of(store, sid)
    assert await names(h, "/") == ["a", "notes.md"]
    assert await names(h, "/a") == ["b.md"]
    want = [version_name(v) for v in api_versions(store, sid, m.id)]
    assert want == sorted(want) and len(want) == 5
    assert await names(h, "/notes.md") == want
    # content of each version
    d = await h.lookup(h.root, "notes.md")
    assert d is not None
    files = await h.listing(d)
    assert [await h.content(f) for f in files] == [b"one", b"v0", b"v1", b"v2", b"v3"]
    calls = h.calls
    assert await names(h, "/notes.md") == want
    assert h.calls == calls  # warm: no store call
    assert await h.lookup(h.root, "nothing") is None
    assert await h.lookup(d, "20261201T111629.000123Z-modified-89abcdef") is None


async def test_deleted_renamed_and_both_file_and_directory(store: Store) -> None:
    sid = store.stores.create("h").id
    gone = store.memories.write_path(sid, "/a", "was a file", actor=ACTOR)
    store.memories.delete_path(sid, "/a", actor=ACTOR)
    store.memories.write_path(sid, "/a/b.md", "b", actor=ACTOR)
    moved = store.memories.write_path(sid, "/old.md", "x", actor=ACTOR)
    store.memories.rename_path(sid, "/old.md", "/new.md", actor=ACTOR)
    h = history_of(store, sid)
    assert await names(h, "/") == ["a", "new.md"]
    a = await names(h, "/a")
    assert a == [version_name(v) for v in api_versions(store, sid, gone.id)] + ["b.md"]
    assert a[-2].split("-")[1] == "deleted"
    new = await names(h, "/new.md")
    assert new == [version_name(v) for v in api_versions(store, sid, moved.id)]
    assert len(new) == 2  # created at /old.md, then renamed: all under the final path
    assert await h.lookup(h.root, "old.md") is None
    d = await h.lookup(h.root, "a")
    assert d is not None
    deleted = [f for f in await h.listing(d) if not f.is_dir][-1]
    assert deleted.size == 0 and await h.content(deleted) == b""
    assert version_xattrs(deleted.version)[b"user.memfs.path"] == b"/a"  # type: ignore[arg-type]


async def test_changes_keep_it_current(store: Store) -> None:
    sid = store.stores.create("h").id
    m = store.memories.write_path(sid, "/n.md", "1", actor=ACTOR)
    h = history_of(store, sid)
    assert len(await names(h, "/n.md")) == 1
    seq = h.tree.seq

    def feed() -> None:
        nonlocal seq
        changes = store.feed.since(sid, seq)
        seq = changes[-1].seq
        h.tree.apply_changes(changes, {c.memory_id: store.memories.get(sid, c.memory_id)
                                       for c in changes if c.op == "put"})
        h.apply_changes(changes)

    store.memories.write_path(sid, "/n.md", "2", actor=ACTOR)
    feed()
    assert len(await names(h, "/n.md")) == 2
    store.memories.delete_path(sid, "/n.md", actor=ACTOR)
    feed()
    listed = await names(h, "/n.md")
    assert len(listed) == 3 and listed[-1].split("-")[1] == "deleted"
    first = api_versions(store, sid, m.id)[0]
    store.versions.redact(sid, first.id, actor=ACTOR)
    feed()
    d = await h.lookup(h.root, "n.md")
    assert d is not None
    red = (await h.listing(d))[0]
    assert red.size == 0 and await h.content(red) == b""
    assert b"user.memfs.redacted" in version_xattrs(red.version)  # type: ignore[arg-type]
    # A redacted deletion: the final path is gone, and so is the directory.
    store.versions.redact(sid, api_versions(store, sid, m.id)[-1].id, actor=ACTOR)
    feed()
    assert await names(h, "/") == []


async def test_redaction_and_pruning_write_a_history_change(store: Store) -> None:
    sid = store.stores.create("h").id
    m = store.memories.write_path(sid, "/n.md", "1", actor=ACTOR)
    store.memories.write_path(sid, "/n.md", "2", actor=ACTOR)
    old = api_versions(store, sid, m.id)[0]
    seq = store.feed.last(sid)
    store.versions.redact(sid, old.id, actor=ACTOR)
    assert [(c.op, c.memory_id) for c in store.feed.since(sid, seq)] == [("history", m.id)]
    seq = store.feed.last(sid)
    store.versions.redact(sid, old.id, actor=ACTOR)  # idempotent: no change
    assert store.feed.since(sid, seq) == []


def test_pruning_writes_a_history_change(backend) -> None:
    s = backend.open(limits=Limits(retention_days=1, retention_keep=1))
    sid = s.stores.create("p").id
    m = s.memories.write_path(sid, "/n.md", "1", actor=ACTOR)
    s.memories.write_path(sid, "/n.md", "2", actor=ACTOR)
    s.memories.write_path(sid, "/n.md", "3", actor=ACTOR)
    one = s.memories.write_path(sid, "/one.md", "1", actor=ACTOR)
    seq = s.feed.last(sid)
    assert s.versions.prune(now=datetime.now(UTC) + timedelta(days=2)) == 2
    assert [(c.op, c.memory_id) for c in s.feed.since(sid, seq)] == [("history", m.id)]
    assert one.id != m.id


async def test_inodes_come_from_the_tree_allocator(store: Store) -> None:
    sid = store.stores.create("h").id
    store.memories.write_path(sid, "/n.md", "1", actor=ACTOR)
    h = history_of(store, sid)
    before = h.tree._next_ino  # noqa: SLF001
    d = await h.lookup(h.root, "n.md")
    assert d is not None and before <= h.root.ino < h.tree._next_ino  # noqa: SLF001
    assert d.ino not in h.tree.nodes


# -- the handlers ----------------------------------------------------------------------------


async def test_root_hides_history_and_lookup_finds_it(store, tmp_path, monkeypatch) -> None:
    ops, sid = make_ops(store, tmp_path)
    await write_file(ops, ROOT, b"notes.md", b"hello")
    store.memories.write_path(sid, "/notes.md", "hello again", actor=ACTOR)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    assert await listdir(ops, ROOT, monkeypatch) == ["notes.md"]
    hist = await ops.lookup(ROOT, HISTORY.encode(), CTX)
    assert stat.S_ISDIR(hist.st_mode) and stat.S_IMODE(hist.st_mode) == 0o755
    assert hist.entry_timeout == ops.mount.timeout
    assert await listdir(ops, hist.st_ino, monkeypatch) == ["notes.md"]
    d = await ops.lookup(hist.st_ino, b"notes.md", CTX)
    files = await listdir(ops, d.st_ino, monkeypatch)
    assert len(files) == 2 and files == sorted(files)
    f = await ops.lookup(d.st_ino, files[0].encode(), CTX)
    assert stat.S_IMODE(f.st_mode) == 0o644 and f.st_size == 5
    assert await read_file(ops, f.st_ino) == b"hello"
    assert (await ops.lookup(d.st_ino, b"..", CTX)).st_ino == hist.st_ino
    assert (await ops.lookup(hist.st_ino, b"..", CTX)).st_ino == ROOT
    xattrs = await ops.listxattr(f.st_ino, CTX)
    assert b"user.memfs.operation" in xattrs
    assert await ops.getxattr(f.st_ino, b"user.memfs.operation", CTX) == b"created"
    await raises(pyfuse3.ENOATTR, ops.getxattr(f.st_ino, b"user.memfs.redacted", CTX))
    texts = [e["content"][0]["text"] for e in events(ops) if e["type"] == "agent.tool_result"]
    assert "listed /mnt/memory/t/.history/notes.md: 2 entries" in texts
    assert f"read /mnt/memory/t/.history/notes.md/{files[0]}" in texts


async def test_every_change_under_history_is_erofs_and_logged(store, tmp_path,
                                                                monkeypatch) -> None:
    ops, sid = make_ops(store, tmp_path)
    await write_file(ops, ROOT, b"n.md", b"x")
    hist = (await ops.lookup(ROOT, b".history", CTX)).st_ino
    d = (await ops.lookup(hist, b"n.md", CTX)).st_ino
    seen = [n.encode() for n in await listdir(ops, d, monkeypatch)]
    f = (await ops.lookup(d, seen[0], CTX)).st_ino
    w = os.O_WRONLY | os.O_CREAT
    await raises(errno.EROFS, ops.create(d, b"new", 0o100644, w, CTX))
    await raises(errno.EROFS, ops.create(ROOT, b".history", 0o100644, w, CTX))
    await raises(errno.EROFS, ops.open(f, os.O_WRONLY, CTX))
    await raises(errno.EROFS, ops.open(f, os.O_RDONLY | os.O_TRUNC, CTX))
    await raises(errno.EROFS, ops.mkdir(hist, b"x", 0o40755, CTX))
    await raises(errno.EROFS, ops.mkdir(ROOT, b".history", 0o40755, CTX))
    await raises(errno.EROFS, ops.unlink(d, seen[0], CTX))
    await raises(errno.EROFS, ops.rmdir(hist, b"n.md", CTX))
    await raises(errno.EROFS, ops.rmdir(ROOT, b".history", CTX))
    await raises(errno.EROFS, ops.rename(d, seen[0], ROOT, b"out", 0, CTX))
    await raises(errno.EROFS, ops.rename(ROOT, b"n.md", d, b"in", 0, CTX))
    await raises(errno.EROFS, ops.rename(hist, b"n.md", hist, b"m.md", 0, CTX))
    await raises(errno.EROFS, ops.rename(ROOT, b".history", ROOT, b"h", 0, CTX))
    await raises(errno.EROFS, ops.rename(ROOT, b"n.md", ROOT, b".history", 0, CTX))
    attr = pyfuse3.EntryAttributes()
    attr.st_size = 0
    await raises(errno.EROFS, ops.setattr(f, attr, Fields(size=True), None, CTX))
    await raises(errno.EROFS, ops.setattr(d, attr, Fields(mode=True), None, CTX))
    await raises(errno.EROFS, ops.setxattr(f, b"user.memfs.operation", b"x", CTX))
    await raises(errno.EROFS, ops.removexattr(f, b"user.x", CTX))
    await raises(errno.EROFS, ops.symlink(d, b"s", b"t", CTX))
    await raises(errno.EROFS, ops.mknod(d, b"p", stat.S_IFIFO | 0o644, 0, CTX))
    await raises(errno.EROFS, ops.link(f, d, b"l", CTX))
    failed = [e for e in events(ops) if e["type"] == "agent.tool_result" and e["is_error"]]
    assert len(failed) == 21 and all("EROFS" in e["content"][0]["text"] for e in failed)
    assert store.memories.get_by_path(sid, "/n.md").content == "x"
    assert len(store.versions.list(sid).data) == 1
    # nothing under .history counts in statfs
    st = await ops.statfs(CTX)
    assert st.f_blocks - st.f_bfree == 0


async def test_private_mount_modes(store, tmp_path) -> None:
    ops, _ = make_ops(store, tmp_path, private=True)
    await write_file(ops, ROOT, b"n.md", b"x")
    hist = await ops.lookup(ROOT, b".history", CTX)
    assert stat.S_IMODE(hist.st_mode) == 0o700


async def test_a_memory_named_history_is_shadowed(store, tmp_path, monkeypatch) -> None:
    ops, sid = make_ops(store, tmp_path)
    store.memories.write_path(sid, "/.history/x.md", "api", actor=ACTOR)
    store.memories.write_path(sid, "/y.md", "y", actor=ACTOR)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    assert await listdir(ops, ROOT, monkeypatch) == ["y.md"]
    hist = (await ops.lookup(ROOT, b".history", CTX)).st_ino
    assert await listdir(ops, hist, monkeypatch) == [".history", "y.md"]


async def test_history_nodes_are_forgotten(store, tmp_path) -> None:
    ops, _ = make_ops(store, tmp_path)
    await write_file(ops, ROOT, b"n.md", b"x")
    h = ops.history
    assert h is not None
    d = await ops.lookup(ROOT, b".history", CTX)
    n = await ops.lookup(d.st_ino, b"n.md", CTX)
    assert n.st_ino in h.nodes
    await ops.forget([(n.st_ino, 1)])
    assert n.st_ino not in h.nodes
    assert isinstance(h.nodes[d.st_ino], HNode)


async def test_redaction_and_rename_queue_kernel_invalidations(store, tmp_path,
                                                               monkeypatch) -> None:
    ops, sid = make_ops(store, tmp_path)
    store.memories.write_path(sid, "/a/n.md", "1", actor=ACTOR)
    store.memories.write_path(sid, "/a/n.md", "2", actor=ACTOR)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    hist = (await ops.lookup(ROOT, b".history", CTX)).st_ino
    a = (await ops.lookup(hist, b"a", CTX)).st_ino
    d = (await ops.lookup(a, b"n.md", CTX)).st_ino
    names = await listdir(ops, d, monkeypatch)
    files = [(await ops.lookup(d, n.encode(), CTX)).st_ino for n in names]
    assert (await ops.getattr(files[0], CTX)).st_size == 1
    ops.stale_entries.clear()
    ops.stale_inodes.clear()
    first = store.versions.list(sid, limit=10).data[-1]
    store.versions.redact(sid, first.id, actor=ACTOR)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    assert set(files) <= set(ops.stale_inodes)
    assert {(d, n, 0) for n in names} <= set(ops.stale_entries)
    assert (await ops.getattr(files[0], CTX)).st_size == 0
    ops.stale_entries.clear()
    store.memories.rename_path(sid, "/a/n.md", "/b.md", actor=ACTOR)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    # The old directories may be gone: the kernel looks them up again.
    assert {(hist, "a", 0), (a, "n.md", 0)} <= set(ops.stale_entries)
    await raises(errno.ENOENT, ops.lookup(hist, b"a", CTX))
    assert len(await listdir(ops, (await ops.lookup(hist, b"b.md", CTX)).st_ino,
                             monkeypatch)) == 3


async def test_this_mounts_own_changes_show_at_once(store, tmp_path, monkeypatch) -> None:
    """Read-your-writes: no wait for the change feed to bring this mount's write back."""
    ops, sid = make_ops(store, tmp_path)
    ino = await write_file(ops, ROOT, b"n.md", b"1")
    hist = (await ops.lookup(ROOT, b".history", CTX)).st_ino
    d = (await ops.lookup(hist, b"n.md", CTX)).st_ino
    assert len(await listdir(ops, d, monkeypatch)) == 1  # now cached
    info = await ops.open(ino, os.O_WRONLY | os.O_TRUNC, CTX)
    await ops.write(info.fh, 0, b"2")
    await ops.flush(info.fh)
    await ops.release(info.fh)
    assert len(await listdir(ops, d, monkeypatch)) == 2
    await ops.rename(ROOT, b"n.md", ROOT, b"m.md", 0, CTX)
    await raises(errno.ENOENT, ops.lookup(hist, b"n.md", CTX))
    m = (await ops.lookup(hist, b"m.md", CTX)).st_ino
    assert len(await listdir(ops, m, monkeypatch)) == 3
    await ops.unlink(ROOT, b"m.md", CTX)
    assert [n.split("-")[1] for n in await listdir(ops, m, monkeypatch)] == [
        "created", "modified", "modified", "deleted"]


async def test_versions_and_deletions_are_read_page_by_page(tmp_path) -> None:
    s = Store(tmp_path / "pages.db", limits=Limits(max_page_size=3))
    try:
        sid = s.stores.create("p").id
        m = s.memories.write_path(sid, "/n.md", "0", actor=ACTOR)
        for i in range(1, 8):
            s.memories.write_path(sid, "/n.md", str(i), actor=ACTOR)
        for i in range(5):
            s.memories.write_path(sid, f"/d/{i}.md", "x", actor=ACTOR)
            s.memories.delete_path(sid, f"/d/{i}.md", actor=ACTOR)
        h = history_of(s, sid)
        assert await names(h, "/") == ["d", "n.md"]
        assert await names(h, "/d") == [f"{i}.md" for i in range(5)]
        listed = await names(h, "/n.md")
        assert len(listed) == 8 and listed == sorted(listed)
        assert h.calls == 2 + 3  # deletions: 5 in 2 pages; versions: 8 in 3 pages
        assert listed[0].endswith(m.memory_version_id[-8:])  # the first, on the last page
        d = await h.lookup(h.root, "n.md")
        assert d is not None
        files = await h.listing(d)
        assert [await h.content(f) for f in files] == [str(i).encode() for i in range(8)]
    finally:
        s.close()


async def test_history_listings_have_dot_and_dotdot(store, tmp_path, monkeypatch) -> None:
    """``.history`` and each directory in it list "." and ".." first, with their inode numbers
    (``.history``'s ".." is the mount root), counted as no lookup; the event counts the
    versions and directories only."""
    ops, _ = make_ops(store, tmp_path)
    await write_file(ops, ROOT, b"n.md", b"x")
    assert ops.history is not None
    hist = (await ops.lookup(ROOT, HISTORY.encode(), CTX)).st_ino
    d = (await ops.lookup(hist, b"n.md", CTX)).st_ino
    nodes = ops.history.nodes
    before = (nodes[hist].lookups, nodes[d].lookups, ops.root.lookups)
    seen = replies(monkeypatch)
    fh = await ops.opendir(hist, CTX)
    await ops.readdir(fh, 0, None)
    await ops.releasedir(fh)
    assert [(n, a.st_ino) for n, a in seen] == [(b".", hist), (b"..", ROOT), (b"n.md", d)]
    seen.clear()
    fh = await ops.opendir(d, CTX)
    await ops.readdir(fh, 0, None)
    await ops.readdir(fh, 2, None)  # resumed after "..": the version again, nothing else
    await ops.releasedir(fh)
    names = [n for n, _ in seen]
    assert names[:2] == [b".", b".."] and len(names) == 4 and names[2] == names[3]
    assert [a.st_ino for _, a in seen[:2]] == [d, hist]
    assert (nodes[hist].lookups, nodes[d].lookups, ops.root.lookups) == (
        before[0], before[1] + 1, before[2])
    texts = [e["content"][0]["text"] for e in events(ops) if e["type"] == "agent.tool_result"]
    assert "listed /mnt/memory/t/.history: 1 entry" in texts
    assert "listed /mnt/memory/t/.history/n.md: 1 entry" in texts
