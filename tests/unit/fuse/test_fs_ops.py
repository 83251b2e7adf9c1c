"""memfs.fuse.ops handlers called directly with a duck-typed request context (no kernel)."""

from __future__ import annotations

import errno
import json
import os
import stat
from datetime import UTC, datetime

import pyfuse3
import pytest
import trio

from memfs import Actor
from memfs.fuse.kernel import errno_for
from memfs.fuse.ops import Operations
from memfs.fuse.toolevents import EventSink, comm
from memfs.rules import parse_time
from tests.support import async_wait_until
from tests.support.fsops import (  # noqa: F401 - _close_sinks: an autouse fixture
    ACTOR,
    CTX,
    ROOT,
    SINKS,
    Ctx,
    Fields,
    _close_sinks,
    events,
    make_limited_ops,
    make_ops,
    raises,
    read_file,
    versions,
    write_file,
)


@pytest.fixture
def fs(store, tmp_path):
    return make_ops(store, tmp_path)


def test_errno_for_reads_the_table_of_errors():
    """Every class's errno is its row's in memfs.errors.WIRE (tests/unit/test_errors.py checks
    that every class has one)."""
    import memfs.errors as E

    assert errno_for(E.MemfsError("x")) == errno.EIO
    assert errno_for(E.StoreArchived("x")) == errno.EROFS
    assert errno_for(E.PathTooLong("x")) == errno.ENAMETOOLONG
    assert errno_for(E.InvalidContent("x")) == errno.EILSEQ


async def test_create_write_close_makes_one_version_and_an_event_pair(fs, store):
    ops, sid = fs
    ino = await write_file(ops, ROOT, b"a.md", b"hello")
    vs = versions(store, sid)
    assert [(v.operation, v.path, v.created_by) for v in vs] == [("created", "/a.md", ACTOR)]
    assert store.memories.get_by_path(sid, "/a.md").content == "hello"
    assert (await ops.getattr(ino, CTX)).st_size == 5
    assert await read_file(ops, ino) == b"hello"
    evs = events(ops)
    use, res = evs[0], evs[1]
    assert use["type"] == "agent.tool_use" and res["type"] == "agent.tool_result"
    assert use["input"] == {"operation": "create", "file_path": "/mnt/memory/t/a.md",
                            "pid": os.getpid()}
    assert res["tool_use_id"] == use["id"] and res["is_error"] is False
    assert res["memory_version_id"] == vs[0].id and res["memory_id"] == vs[0].memory_id
    assert evs[2]["input"]["operation"] == "read"
    # In the database too.
    rows = store.conn.execute("SELECT type FROM events WHERE store_id = ?", (sid,)).fetchall()
    assert [r[0] for r in rows] == ["agent.tool_use", "agent.tool_result"] * 2


class _Descriptors:
    """Stands in for /proc: how many descriptors the opener still holds at each flush."""

    def __init__(self, monkeypatch, ops: Operations) -> None:
        self.held = 0
        ops.mount.mountpoint = "/mnt/test"
        monkeypatch.setattr("memfs.fuse.buffers.fds_on", lambda pid, mountpoint, ino: self.held)


async def test_a_close_with_nothing_to_save_reads_no_descriptors(fs, store, monkeypatch):
    """A writable close that has nothing to save or refuse (nothing written, or saved by an
    earlier close) does not read /proc: whoever holds the file, it does nothing. One that has
    something to save still asks."""
    ops, sid = fs
    asked: list[int] = []
    ops.mount.mountpoint = "/mnt/test"
    monkeypatch.setattr("memfs.fuse.buffers.fds_on",
                        lambda pid, mountpoint, ino: asked.append(ino) or 0)
    ino = await write_file(ops, ROOT, b"c.md", b"saved\n")
    assert asked == [ino]  # the create's close: something to save
    info = await ops.open(ino, os.O_WRONLY | os.O_APPEND, CTX)
    await ops.flush(info.fh)
    await ops.release(info.fh)
    assert asked == [ino]
    assert len(versions(store, sid)) == 1


async def test_shell_redirect_pattern_makes_one_version(fs, store, monkeypatch):
    """bash: open, dup2, close (flush before any write; the opener still holds the copy),
    write, close."""
    ops, sid = fs
    fds = _Descriptors(monkeypatch, ops)
    info, attrs = await ops.create(ROOT, b"r.md", 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    fds.held = 1
    await ops.flush(info.fh)  # the dup2'd original descriptor closed
    assert versions(store, sid) == []
    await ops.write(info.fh, 0, b"hi\n")
    # A reader in the same mount sees the buffered data before the commit.
    r = await ops.open(attrs.st_ino, os.O_RDONLY, CTX)
    assert await ops.read(r.fh, 0, 100) == b"hi\n"
    await ops.release(r.fh)
    fds.held = 0
    await ops.flush(info.fh)
    assert [v.operation for v in versions(store, sid)] == ["created"]  # before close returns
    await ops.release(info.fh)
    assert [v.operation for v in versions(store, sid)] == ["created"]
    # Truncating re-open (echo > existing): still one version.
    info = await ops.open(attrs.st_ino, os.O_WRONLY | os.O_TRUNC, CTX)
    fds.held = 1
    await ops.flush(info.fh)
    await ops.write(info.fh, 0, b"bye\n")
    fds.held = 0
    await ops.flush(info.fh)
    await ops.release(info.fh)
    assert [v.operation for v in versions(store, sid)] == ["created", "modified"]
    assert store.memories.get_by_path(sid, "/r.md").content == "bye\n"


async def test_touch_new_file_commits_empty_at_release_and_unchanged_close_is_no_version(
    fs, store
):
    ops, sid = fs
    info, attrs = await ops.create(ROOT, b"t.md", 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    await ops.flush(info.fh)
    await ops.release(info.fh)
    assert [(v.operation, v.content_size_bytes) for v in versions(store, sid)] == [("created", 0)]
    info = await ops.open(attrs.st_ino, os.O_WRONLY, CTX)
    await ops.write(info.fh, 0, b"")
    await ops.flush(info.fh)
    await ops.release(info.fh)
    assert len(versions(store, sid)) == 1


async def test_partial_writes_and_seek(fs, store):
    ops, sid = fs
    ino = await write_file(ops, ROOT, b"p.md", b"0123456789")
    info = await ops.open(ino, os.O_RDWR, CTX)
    await ops.write(info.fh, 3, b"abc")
    await ops.write(info.fh, 12, b"Z")  # a hole becomes NUL bytes (valid UTF-8)
    await ops.fsync(info.fh, False)
    assert store.memories.get_by_path(sid, "/p.md").content == "012abc6789\0\0Z"
    await ops.flush(info.fh)
    await ops.release(info.fh)
    assert len(versions(store, sid)) == 2  # fsync committed; the close changed nothing more


async def test_efbig_at_the_write_that_exceeds_the_limit(store, tmp_path):
    ops, sid, small = make_limited_ops(store, tmp_path, max_content_bytes=10)
    info, _ = await ops.create(ROOT, b"big.md", 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    await ops.write(info.fh, 0, b"12345678")
    await raises(errno.EFBIG, ops.write(info.fh, 8, b"abc"))
    # An open->close in which a write failed commits nothing, and close() says why.
    await raises(errno.EFBIG, ops.flush(info.fh))
    await ops.release(info.fh)
    assert versions(small, sid) == []
    await raises(errno.ENOENT, ops.lookup(ROOT, b"big.md", CTX))
    res = events(ops)[1]
    assert res["is_error"] is True and "EFBIG" in res["content"][0]["text"]
    assert "memory_version_id" not in res


async def test_failed_write_keeps_the_previous_version(store, tmp_path):
    """Overwriting a memory with too much (tr, cp): the memory keeps its version."""
    ops, sid, small = make_limited_ops(store, tmp_path, max_content_bytes=10)
    ino = await write_file(ops, ROOT, b"m.md", b"old")
    info = await ops.open(ino, os.O_WRONLY | os.O_TRUNC, CTX)
    await ops.write(info.fh, 0, b"0123456789")
    await raises(errno.EFBIG, ops.write(info.fh, 10, b"x"))
    await raises(errno.EFBIG, ops.flush(info.fh))
    await ops.release(info.fh)
    assert [v.operation for v in versions(small, sid)] == ["created"]
    assert small.memories.get_by_path(sid, "/m.md").content == "old"
    assert await read_file(ops, ino) == b"old"
    # A single write over the limit (cp of a big file): nothing, not an empty version.
    info = await ops.open(ino, os.O_WRONLY | os.O_TRUNC, CTX)
    await raises(errno.EFBIG, ops.write(info.fh, 0, b"x" * 11))
    await raises(errno.EFBIG, ops.flush(info.fh))
    await ops.release(info.fh)
    assert small.memories.get_by_path(sid, "/m.md").content == "old"


async def test_invalid_utf8_fails_close_and_commits_nothing(fs, store):
    ops, sid = fs
    info, _ = await ops.create(ROOT, b"bad.md", 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    # Bytes that can never be UTF-8 are refused at write() (a shell ignores close errors).
    await raises(errno.EILSEQ, ops.write(info.fh, 0, b"\xff\xfe"))
    await raises(errno.EILSEQ, ops.flush(info.fh))
    await ops.release(info.fh)
    assert versions(store, sid) == []
    await raises(errno.ENOENT, ops.lookup(ROOT, b"bad.md", CTX))
    res = events(ops)[1]
    assert res["is_error"] is True and res["content"][0]["text"].startswith("EILSEQ")
    # An existing file keeps its content.
    ino = await write_file(ops, ROOT, b"ok.md", b"fine")
    info = await ops.open(ino, os.O_WRONLY | os.O_TRUNC, CTX)
    await ops.write(info.fh, 0, b"\xc3")
    await raises(errno.EILSEQ, ops.fsync(info.fh, False))
    await raises(errno.EILSEQ, ops.flush(info.fh))
    await ops.release(info.fh)
    assert await read_file(ops, ino) == b"fine"
    assert store.memories.get_by_path(sid, "/ok.md").content == "fine"


@pytest.mark.parametrize(
    ("name", "code"),
    [
        (b"\xff.md", errno.EILSEQ),
        ("e\u0301.md".encode(), errno.EILSEQ),  # not NFC
        (b"a\x01b.md", errno.EINVAL),
        (b"x" * 1100, errno.ENAMETOOLONG),
    ],
)
async def test_bad_names(fs, name, code):
    ops, _ = fs
    await raises(code, ops.create(ROOT, name, 0o100644, os.O_WRONLY | os.O_CREAT, CTX))
    await raises(code, ops.mkdir(ROOT, name, 0o40755, CTX))


async def test_too_many_segments(fs):
    ops, _ = fs
    parent = ROOT
    for i in range(19):
        parent = (await ops.mkdir(parent, f"d{i}".encode(), 0o40755, CTX)).st_ino
    await write_file(ops, parent, b"ok.md", b"x")  # the 20th segment
    deep = (await ops.mkdir(parent, b"d19", 0o40755, CTX)).st_ino
    await raises(errno.ENAMETOOLONG, ops.create(deep, b"no.md", 0o100644, os.O_WRONLY, CTX))
    await raises(errno.ENAMETOOLONG, ops.mkdir(deep, b"d20", 0o40755, CTX))


async def test_enospc_at_create_when_the_store_is_full(store, tmp_path):
    ops, sid, small = make_limited_ops(store, tmp_path, max_memories=2)
    await write_file(ops, ROOT, b"1.md", b"1")
    ino = await write_file(ops, ROOT, b"2.md", b"2")
    await raises(errno.ENOSPC, ops.create(ROOT, b"3.md", 0o100644, os.O_WRONLY, CTX))
    # Existing memories stay editable at the limit.
    info = await ops.open(ino, os.O_WRONLY | os.O_TRUNC, CTX)
    await ops.write(info.fh, 0, b"22")
    await ops.flush(info.fh)
    await ops.release(info.fh)
    assert small.memories.get_by_path(sid, "/2.md").content == "22"
    st = await ops.statfs(CTX)
    assert (st.f_files, st.f_ffree) == (2, 0)


async def test_read_only_and_archived_refuse_changes(store, tmp_path):
    ops, sid = make_ops(store, tmp_path, read_only=True)
    store.memories.create(sid, "/a.md", "a", actor=ACTOR)
    ops.load()
    ino = (await ops.lookup(ROOT, b"a.md", CTX)).st_ino
    await raises(errno.EROFS, ops.create(ROOT, b"n.md", 0o100644, os.O_WRONLY, CTX))
    await raises(errno.EROFS, ops.open(ino, os.O_WRONLY, CTX))
    await raises(errno.EROFS, ops.mkdir(ROOT, b"d", 0o40755, CTX))
    await raises(errno.EROFS, ops.unlink(ROOT, b"a.md", CTX))
    await raises(errno.EROFS, ops.rename(ROOT, b"a.md", ROOT, b"b.md", 0, CTX))
    assert await read_file(ops, ino) == b"a"

    ops2, sid2 = make_ops(store, tmp_path)
    store.memories.create(sid2, "/a.md", "a", actor=ACTOR)
    store.stores.archive(sid2)
    ops2.load()
    await raises(errno.EROFS, ops2.create(ROOT, b"n.md", 0o100644, os.O_WRONLY, CTX))
    await raises(errno.EROFS, ops2.unlink(ROOT, b"a.md", CTX))


async def test_store_archived_while_mounted(fs, store):
    ops, sid = fs
    ino = await write_file(ops, ROOT, b"a.md", b"a")
    info = await ops.open(ino, os.O_WRONLY, CTX)
    await ops.write(info.fh, 0, b"b")
    store.stores.archive(sid)
    await raises(errno.EROFS, ops.flush(info.fh))
    await ops.release(info.fh)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    await raises(errno.EROFS, ops.open(ino, os.O_WRONLY, CTX))


async def test_unlink_mkdir_rmdir(fs, store):
    ops, sid = fs
    d = (await ops.mkdir(ROOT, b"d", 0o40755, CTX)).st_ino
    await raises(errno.EEXIST, ops.mkdir(ROOT, b"d", 0o40755, CTX))
    assert versions(store, sid) == []  # empty directories live in the mount only
    await write_file(ops, d, b"f.md", b"x")
    await raises(errno.ENOTEMPTY, ops.rmdir(ROOT, b"d", CTX))
    await ops.unlink(d, b"f.md", CTX)
    assert [v.operation for v in versions(store, sid)] == ["created", "deleted"]
    # The directory stays (emptied here), so `rm -r` can rmdir it.
    assert (await ops.lookup(ROOT, b"d", CTX)).st_ino == d
    await ops.rmdir(ROOT, b"d", CTX)
    await raises(errno.ENOENT, ops.lookup(ROOT, b"d", CTX))
    ops_list = [e["input"]["operation"] for e in events(ops) if e["type"] == "agent.tool_use"]
    assert ops_list == ["mkdir", "mkdir", "create", "rmdir", "delete", "rmdir"]


async def test_rename_file_over_existing_and_flags(fs, store):
    ops, sid = fs
    a = await write_file(ops, ROOT, b"a.md", b"A")
    await write_file(ops, ROOT, b"b.md", b"B")
    mid_b = store.memories.get_by_path(sid, "/b.md").id
    await raises(errno.EEXIST, ops.rename(ROOT, b"a.md", ROOT, b"b.md",
                                          pyfuse3.RENAME_NOREPLACE, CTX))
    await raises(errno.EINVAL, ops.rename(ROOT, b"a.md", ROOT, b"b.md",
                                          pyfuse3.RENAME_EXCHANGE, CTX))
    await ops.rename(ROOT, b"a.md", ROOT, b"b.md", 0, CTX)
    # The path keeps its memory (its history goes on) with the new content.
    m = store.memories.get_by_path(sid, "/b.md")
    assert (m.id, m.content) == (mid_b, "A")
    assert store.memories.count(sid) == 1
    assert (await ops.lookup(ROOT, b"b.md", CTX)).st_ino == a  # POSIX: the moved inode
    assert await ops.getxattr(a, b"user.memfs.memory_id", CTX) == mid_b.encode()
    await raises(errno.ENOENT, ops.lookup(ROOT, b"a.md", CTX))
    use, res = events(ops)[-2:]
    assert use["input"]["operation"] == "rename"
    assert use["input"]["new_path"] == "/mnt/memory/t/b.md"
    assert res["memory_id"] == mid_b
    # A file never saved, renamed over a memory (an editor's temp file still open): one
    # modified version of that memory, no memory for the temp file.
    info, _ = await ops.create(ROOT, b"tmp~", 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    await ops.write(info.fh, 0, b"C")
    await ops.rename(ROOT, b"tmp~", ROOT, b"b.md", 0, CTX)
    await ops.flush(info.fh)
    await ops.release(info.fh)
    assert store.memories.get_by_path(sid, "/b.md").content == "C"
    assert [v.operation for v in versions(store, sid) if v.memory_id == mid_b] == [
        "created", "modified", "modified"]
    assert store.memories.count(sid) == 1


async def test_rename_directory_moves_every_memory_atomically(fs, store):
    ops, sid = fs
    d = (await ops.mkdir(ROOT, b"d", 0o40755, CTX)).st_ino
    e = (await ops.mkdir(d, b"e", 0o40755, CTX)).st_ino
    f = await write_file(ops, e, b"f.md", b"f")
    await write_file(ops, d, b"g.md", b"g")
    await ops.rename(ROOT, b"d", ROOT, b"x", 0, CTX)
    paths = sorted(m.path for m in store.memories.tree(sid))
    assert paths == ["/x/e/f.md", "/x/g.md"]
    x = await ops.lookup(ROOT, b"x", CTX)
    assert x.st_ino == d
    assert (await ops.lookup(e, b"f.md", CTX)).st_ino == f
    await raises(errno.EINVAL, ops.rename(ROOT, b"x", e, b"y", 0, CTX))
    # Over an empty directory: fine; over a non-empty one: ENOTEMPTY.
    await ops.mkdir(ROOT, b"empty", 0o40755, CTX)
    await ops.rename(ROOT, b"x", ROOT, b"empty", 0, CTX)
    assert sorted(m.path for m in store.memories.tree(sid)) == ["/empty/e/f.md", "/empty/g.md"]
    y = (await ops.mkdir(ROOT, b"y", 0o40755, CTX)).st_ino
    await write_file(ops, y, b"h.md", b"h")
    await raises(errno.ENOTEMPTY, ops.rename(ROOT, b"empty", ROOT, b"y", 0, CTX))


async def test_truncate_by_path_commits_and_logs(fs, store):
    ops, sid = fs
    ino = await write_file(ops, ROOT, b"a.md", b"hello")
    attr = pyfuse3.EntryAttributes()
    attr.st_size = 2
    out = await ops.setattr(ino, attr, Fields(size=True), None, CTX)
    assert out.st_size == 2
    assert store.memories.get_by_path(sid, "/a.md").content == "he"
    assert events(ops)[-2]["input"]["operation"] == "truncate"
    # chmod/chown/utimes: accepted, not stored, no version.
    attr.st_mode = 0o100600
    await ops.setattr(ino, attr, Fields(mode=True, uid=True, gid=True, mtime=True), None, CTX)
    assert len(versions(store, sid)) == 2
    assert stat.S_IMODE((await ops.getattr(ino, CTX)).st_mode) == 0o644


async def test_xattrs_and_refused_node_types(fs, store):
    ops, sid = fs
    ino = await write_file(ops, ROOT, b"a.md", b"hello")
    m = store.memories.get_by_path(sid, "/a.md")
    assert await ops.getxattr(ino, b"user.memfs.memory_id", CTX) == m.id.encode()
    assert await ops.getxattr(ino, b"user.memfs.memory_version_id", CTX) == (
        m.memory_version_id.encode())
    assert await ops.getxattr(ino, b"user.memfs.content_sha256", CTX) == (
        m.content_sha256.encode())
    assert len(await ops.listxattr(ino, CTX)) == 3
    await raises(pyfuse3.ENOATTR, ops.getxattr(ino, b"user.other", CTX))
    await raises(errno.EPERM, ops.setxattr(ino, b"user.memfs.memory_id", b"x", CTX))
    await raises(errno.ENOTSUP, ops.setxattr(ino, b"user.other", b"x", CTX))
    await raises(errno.EPERM, ops.symlink(ROOT, b"s", b"a.md", CTX))
    await raises(errno.EPERM, ops.link(ino, ROOT, b"l", CTX))
    await raises(errno.EPERM, ops.mknod(ROOT, b"p", stat.S_IFIFO | 0o644, 0, CTX))


async def test_readdir_lists_children(fs, monkeypatch):
    """Every directory lists "." and ".." first (with their inode numbers; the kernel counts
    no lookup for them, so neither does the mount), then its entries; offsets stay stable and
    the event counts the real entries only."""
    ops, _ = fs
    b = await write_file(ops, ROOT, b"b.md", b"b")
    a = (await ops.mkdir(ROOT, b"a", 0o40755, CTX)).st_ino
    inner = await write_file(ops, a, b"c.md", b"c")
    seen = []
    room = [99]

    def reply(token, name, attr, next_id):
        if not room[0]:
            return False  # the kernel's buffer is full: this entry is not sent
        room[0] -= 1
        seen.append((name, attr.st_ino, stat.S_ISDIR(attr.st_mode), next_id))
        return True

    monkeypatch.setattr(pyfuse3, "readdir_reply", reply)
    lookups = {ino: ops.tree.nodes[ino].lookups for ino in (ROOT, a, b, inner)}
    fh = await ops.opendir(ROOT, CTX)
    await ops.readdir(fh, 0, None)
    assert seen == [(b".", ROOT, True, 1), (b"..", ROOT, True, 2), (b"a", a, True, 3),
                    (b"b.md", b, False, 4)]
    seen.clear()
    room[0] = 1
    await ops.readdir(fh, 1, None)  # resumed after "."; one entry fits
    room[0] = 99
    await ops.readdir(fh, 2, None)
    await ops.readdir(fh, 4, None)  # at the end
    assert [(n, i) for n, i, _, _ in seen] == [(b"..", ROOT), (b"a", a), (b"b.md", b)]
    await ops.releasedir(fh)
    assert events(ops)[-1]["content"][0]["text"] == "listed /mnt/memory/t: 2 entries"
    seen.clear()
    fh = await ops.opendir(a, CTX)
    await ops.readdir(fh, 0, None)
    await ops.releasedir(fh)
    assert [(n, i, off) for n, i, _, off in seen] == [
        (b".", a, 1), (b"..", ROOT, 2), (b"c.md", inner, 3)]
    assert events(ops)[-1]["content"][0]["text"] == "listed /mnt/memory/t/a: 1 entry"
    # Each entry the kernel was sent counts as a lookup (READDIRPLUS); "." and ".." do not.
    after = {ino: ops.tree.nodes[ino].lookups for ino in lookups}
    assert after == {ROOT: lookups[ROOT], a: lookups[a] + 2, b: lookups[b] + 2,
                     inner: lookups[inner] + 1}


async def test_changes_made_elsewhere_update_the_tree(fs, store):
    ops, sid = fs
    a = await write_file(ops, ROOT, b"a.md", b"A")
    ops.feed.apply_changes(store.feed.since(sid, 0))  # our own: nothing to invalidate
    assert ops.stale_entries == [] and ops.stale_inodes == []
    other = ACTOR
    store.memories.write_path(sid, "/a.md", "A2", actor=other)
    store.memories.create(sid, "/n/new.md", "N", actor=other)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    assert a in ops.stale_inodes
    assert await read_file(ops, a) == b"A2"
    n = (await ops.lookup(ROOT, b"n", CTX)).st_ino
    new = (await ops.lookup(n, b"new.md", CTX)).st_ino
    assert await read_file(ops, new) == b"N"
    m = store.memories.get_by_path(sid, "/a.md")
    store.memories.update(sid, m.id, path="/n/moved.md", actor=other)
    store.memories.delete_path(sid, "/n/new.md", actor=other)
    ops.stale_entries.clear()
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    assert (await ops.lookup(n, b"moved.md", CTX)).st_ino == a  # same memory, same inode
    await raises(errno.ENOENT, ops.lookup(ROOT, b"a.md", CTX))
    await raises(errno.ENOENT, ops.lookup(n, b"new.md", CTX))
    names = {(p, name) for p, name, _ in ops.stale_entries}
    assert (ROOT, "a.md") in names and (n, "new.md") in names
    store.memories.delete_path(sid, "/n/moved.md", actor=other)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    # A directory emptied elsewhere goes away with its last memory.
    await raises(errno.ENOENT, ops.lookup(ROOT, b"n", CTX))


async def test_a_stale_state_from_the_feed_does_not_undo_a_newer_one(fs, store):
    """A remote feed sends each memory as it was when its change was sent: the put of a
    file's creation can arrive after this mount renamed the file, and must not move it back
    (nor hide it at its new path) until the rename's own put arrives."""
    ops, sid = fs
    d = (await ops.mkdir(ROOT, b"dir", 0o755, CTX)).st_ino
    await write_file(ops, d, b"f.md", b"F")
    created = store.memories.get_by_path(sid, "/dir/f.md", view="basic")
    first = store.feed.since(sid, 0)
    await ops.rename(ROOT, b"dir", ROOT, b"moved", 0, CTX)
    ops.feed.apply_changes(first, {created.id: created})  # late, with the state before the rename
    moved = (await ops.lookup(ROOT, b"moved", CTX)).st_ino
    ino = (await ops.lookup(moved, b"f.md", CTX)).st_ino
    assert await read_file(ops, ino) == b"F"
    await raises(errno.ENOENT, ops.lookup(ROOT, b"dir", CTX))
    now = store.memories.get(sid, created.id, view="basic")
    ops.feed.apply_changes(store.feed.since(sid, ops.seq), {created.id: now})
    assert (await ops.lookup(moved, b"f.md", CTX)).st_ino == ino


async def test_a_bug_answers_eio_instead_of_crashing(fs, monkeypatch, error_logs):
    ops, _ = fs

    def boom(*a, **kw):
        raise RuntimeError("bug")

    monkeypatch.setattr(ops.store.memories, "write_path", boom)
    info, _ = await ops.create(ROOT, b"x.md", 0o100644, os.O_WRONLY, CTX)
    await ops.write(info.fh, 0, b"x")
    await raises(errno.EIO, ops.flush(info.fh))
    [logged] = error_logs  # with its traceback, in the mount's log
    assert logged.getMessage() == "bug in flush; answering EIO" and logged.exc_info


async def test_session_actor_attribution(store, tmp_path):
    s = store.stores.create("sess")
    sess = store.sessions.create([{"type": "memory_store", "memory_store_id": s.id}])
    sink = EventSink(store, s.id, sess.id, None)
    SINKS.append(sink)
    ops = Operations(store, s.id, actor=Actor.session(sess.id), events=sink)
    ops.load()
    await write_file(ops, ROOT, b"a.md", b"a")
    sink.flush()
    v = store.versions.list(s.id, session_id=sess.id).data
    assert len(v) == 1
    evs = store.events.list(sess.id).data
    assert [e.type for e in evs][-2:] == ["agent.tool_use", "agent.tool_result"]


async def test_a_directory_moved_after_the_kernel_forgot_its_subdirectory_still_opens(fs, store):
    """Regression: a directory rename forgot (lookup count 0) the subdirectories and files the
    kernel no longer knew, yet put them back in the tree: lookup found them, opendir/open
    said ENOENT."""
    ops, sid = fs
    d = (await ops.mkdir(ROOT, b"d", 0o40755, CTX)).st_ino
    e = (await ops.mkdir(d, b"e", 0o40755, CTX)).st_ino
    f = await write_file(ops, e, b"f.md", b"f")
    await ops.forget([(e, 1), (f, 1)])  # the kernel dropped both from its caches
    await ops.rename(ROOT, b"d", ROOT, b"x", 0, CTX)
    x = (await ops.lookup(ROOT, b"x", CTX)).st_ino
    e2 = (await ops.lookup(x, b"e", CTX)).st_ino
    fh = await ops.opendir(e2, CTX)
    await ops.releasedir(fh)
    f2 = (await ops.lookup(e2, b"f.md", CTX)).st_ino
    assert (e2, f2) == (e, f)  # the same inodes, still known
    assert await read_file(ops, f2) == b"f"
    assert ops.stale_entries == []  # nothing to make the kernel forget


async def test_a_failed_rename_over_a_new_file_keeps_its_data(fs, store):
    ops, sid = fs
    await write_file(ops, ROOT, b"src.md", b"S")
    info, _ = await ops.create(ROOT, b"dst.md", 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    await ops.write(info.fh, 0, b"pending")
    store.memories.delete_path(sid, "/src.md", actor=ACTOR)  # elsewhere; this mount has not seen it
    await raises(errno.ENOENT, ops.rename(ROOT, b"src.md", ROOT, b"dst.md", 0, CTX))
    await ops.flush(info.fh)
    await ops.release(info.fh)
    assert store.memories.get_by_path(sid, "/dst.md").content == "pending"


async def test_ftruncate_over_the_limit_is_in_the_event_log(store, tmp_path):
    ops, sid, small = make_limited_ops(store, tmp_path, max_content_bytes=10)
    info, attrs = await ops.create(ROOT, b"t.md", 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    await ops.write(info.fh, 0, b"1234")
    attr = pyfuse3.EntryAttributes()
    attr.st_size = 11
    await raises(errno.EFBIG, ops.setattr(attrs.st_ino, attr, Fields(size=True), info.fh, CTX))
    await raises(errno.EFBIG, ops.flush(info.fh))  # a failed write: nothing is committed
    await ops.release(info.fh)
    assert versions(small, sid) == []
    res = events(ops)[1]
    assert res["is_error"] is True and res["content"][0]["text"].startswith("EFBIG")


async def test_a_directory_removed_while_listed_is_forgotten_at_releasedir(fs):
    ops, _ = fs
    d = (await ops.mkdir(ROOT, b"d", 0o40755, CTX)).st_ino
    fh = await ops.opendir(d, CTX)
    await ops.rmdir(ROOT, b"d", CTX)
    await ops.forget([(d, 1)])  # the kernel forgets it; the listing is still open
    await ops.releasedir(fh)
    await raises(errno.ENOENT, ops.getattr(d, CTX))


async def test_every_result_text_names_the_path_the_agent_sees(fs):
    ops, _ = fs
    d = (await ops.mkdir(ROOT, b"d", 0o40755, CTX)).st_ino
    await write_file(ops, d, b"a.md", b"a")
    await ops.rename(d, b"a.md", d, b"b.md", 0, CTX)
    await ops.unlink(d, b"b.md", CTX)
    await ops.rmdir(ROOT, b"d", CTX)
    evs = events(ops)
    texts = {u["input"]["operation"]: r["content"][0]["text"]
             for u, r in zip(evs[::2], evs[1::2], strict=True)}
    assert texts["rename"] == "renamed /mnt/memory/t/d/a.md to /mnt/memory/t/d/b.md"
    assert texts["delete"] == "deleted /mnt/memory/t/d/b.md"
    assert texts["rmdir"] == "removed directory /mnt/memory/t/d"


async def test_truncate_by_path_while_open_for_writing_is_logged_and_saved_at_close(fs, store):
    ops, sid = fs
    info, attrs = await ops.create(ROOT, b"a.md", 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    await ops.write(info.fh, 0, b"hello world")
    attr = pyfuse3.EntryAttributes()
    attr.st_size = 5
    await ops.setattr(attrs.st_ino, attr, Fields(size=True), None, CTX)  # truncate(2)
    assert versions(store, sid) == []
    use, res = events(ops)
    assert use["input"]["operation"] == "truncate" and res["is_error"] is False
    await ops.flush(info.fh)
    await ops.release(info.fh)
    assert store.memories.get_by_path(sid, "/a.md").content == "hello"
    assert len(versions(store, sid)) == 1


# -- the remote mount's change subscriber (memfs.daemons.mount) -----------------------------------


async def test_change_subscriber_backs_off_while_failing_and_starts_over_once_heard(
    fs, autojump_clock, caplog
):
    import trio

    from memfs.client import FeedEvent
    from memfs.errors import MemfsError
    from memfs.fuse.watch import ChangeSubscriber

    ops, _ = fs
    drop = MemfsError("link dropped")
    script = [[drop], [drop], [FeedEvent("ping", ops.seq), drop], ["stop"]]
    started: list[float] = []

    class Feed:
        async def stream_changes(self, store_id, after=None):
            started.append(trio.current_time())
            for frame in script.pop(0):
                if frame == "stop":
                    sub.stop()
                    return
                if isinstance(frame, Exception):
                    raise frame
                yield frame

    sub = ChangeSubscriber(ops, Feed())  # type: ignore[arg-type]
    t0 = trio.current_time()
    with caplog.at_level("DEBUG", logger="memfs.fuse.watch"):
        await sub.run()
    waits = [round(b - a, 3) for a, b in zip([t0, *started], started, strict=False)]
    assert waits == [0.0, 0.05, 0.1, 0.05]  # doubled while failing, short again once heard
    levels = [r.levelname for r in caplog.records if "link dropped" in r.getMessage()]
    assert levels == ["WARNING", "DEBUG", "WARNING"]


async def test_event_flusher_records_events_every_interval_until_stopped(fs, store):
    import trio
    import trio.testing

    from memfs.fuse.watch import EventFlusher

    ops, sid = fs
    sink = ops.events
    assert sink is not None

    def recorded() -> int:
        rows = store.conn.execute("SELECT COUNT(*) FROM events WHERE store_id = ?", (sid,))
        return rows.fetchone()[0]

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            flusher = EventFlusher(sink, interval=0.02)
            nursery.start_soon(flusher.run)
            ino = await write_file(ops, ROOT, b"a.md", b"a")
            # A write's events are recorded with its version, in its transaction.
            assert sink.pending == 0 and recorded() == 2
            await read_file(ops, ino)
            assert sink.pending == 2 and recorded() == 2  # a read's: queued on the request path
            # The flush runs in a worker thread: its signal is the queue emptied.
            await async_wait_until(lambda: not sink.pending)
            assert recorded() == 4
            flusher.stop()
    slow = EventFlusher(sink, interval=60)
    with trio.fail_after(5):  # stop() ends run() at once, not after the interval
        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow.run)
            await trio.testing.wait_all_tasks_blocked()
            slow.stop()


async def test_an_idle_event_flusher_sleeps_until_an_event_is_queued(fs, store):
    """No timer while nothing is queued (issue 12: no CPU spent while nothing changes); the
    first queued event starts a batch, written ``interval`` seconds later."""
    import trio

    from memfs.fuse.watch import EventFlusher

    ops, _ = fs
    sink = ops.events
    flusher = EventFlusher(sink, interval=0.02)
    ticks = []
    real_tick = flusher.tick

    async def counted() -> None:
        ticks.append(trio.current_time())
        await real_tick()

    flusher.tick = counted
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(flusher.run)
            await trio.sleep(0.3)  # the point: no tick within 0.3 s while nothing is queued
            assert ticks == []  # was one every 0.02 s
            t0 = trio.current_time()
            sink.emit([{"type": "agent.custom", "text": "x"}])
            await async_wait_until(lambda: not sink.pending)  # flushed, in a worker thread
            assert len(ticks) == 1 and 0.015 <= ticks[0] - t0 < 0.5
            await trio.sleep(0.2)  # the point: no tick after the batch, with nothing queued
            assert len(ticks) == 1
            flusher.stop()
    assert sink.on_queued is None


def test_directory_rename_errors_map_to_enotempty_and_enotdir():
    import memfs.errors as E

    kw = {"conflicting_memory_id": "mem_x", "conflicting_path": "/b/x"}
    assert errno_for(E.DirectoryNotEmpty("not empty", **kw)) == errno.ENOTEMPTY
    assert errno_for(E.NotADirectory("a file", **kw)) == errno.ENOTDIR
    assert errno_for(E.PathConflict("taken", **kw)) == errno.EEXIST


async def test_states_are_ordered_by_the_feed_not_by_the_clock(fs, store):
    """Finding 12: after the clock steps back, a newer version has an older updated_at; the
    mount must still show it."""
    ops, sid = fs
    ino = await write_file(ops, ROOT, b"c.md", b"first")
    m = store.memories.get_by_path(sid, "/c.md")
    store.memories.update(sid, m.id, content="second", actor=None)
    # What a clock stepped back by an hour writes: an updated_at before the first version's.
    store.conn.execute("UPDATE memories SET updated_at = '2001-01-01T00:00:00.000000Z' "
                       "WHERE id = ?", (m.id,))
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    assert await read_file(ops, ino) == b"second"
    assert (await ops.getattr(ino, CTX)).st_size == len(b"second")


async def test_a_pruned_feed_position_reloads_the_tree(fs, store):
    ops, sid = fs
    await write_file(ops, ROOT, b"a.md", b"a")
    store.memories.create(sid, "/elsewhere.md", "e", actor=None)
    store.conn.execute("UPDATE stores SET changes_pruned_seq = ? WHERE id = ?",
                       (store.feed.last(sid), sid))
    await ops.feed.poll_changes()
    assert (await ops.lookup(ROOT, b"elsewhere.md", CTX)).st_size == 1
    assert ops.seq == store.feed.last(sid)


async def test_a_directory_emptied_elsewhere_while_listed_goes_at_releasedir(fs, store):
    """The stateful test found it: RELEASEDIR comes after closedir returns, so a directory
    emptied by another mount meanwhile was skipped by the prune and stayed forever."""
    ops, sid = fs
    m = store.memories.create(sid, "/d/a.md", "a", actor=None)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    d = (await ops.lookup(ROOT, b"d", CTX)).st_ino
    fh = await ops.opendir(d, CTX)
    store.memories.delete(sid, m.id, actor=None)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    assert "d" in (ops.root.children or {})  # still listed: kept for now
    await ops.releasedir(fh)
    assert "d" not in (ops.root.children or {})
    assert any(name == "d" for _, name, _ in ops.stale_entries)


async def test_a_sessions_events_stay_in_the_order_they_happened(fs, store):
    """A write's events are recorded in its transaction, the others in batches: the batch
    queued before a write goes first."""
    ops, sid = fs
    a = await write_file(ops, ROOT, b"a.md", b"a")
    await read_file(ops, a)
    await ops.opendir(ROOT, CTX)
    await write_file(ops, ROOT, b"b.md", b"b")
    rows = store.conn.execute(
        "SELECT body FROM events WHERE store_id = ? AND type = 'agent.tool_use' ORDER BY seq",
        (sid,)).fetchall()
    ops_in_order = [json.loads(r[0])["input"]["operation"] for r in rows]
    assert ops_in_order == ["create", "read", "create"]


async def test_the_feed_does_not_read_back_this_mounts_own_commits(fs, store, monkeypatch):
    """A close's commit is in the tree already: polling the feed skips reading that memory
    again (one read per own write saved), and still reads the ones written elsewhere, or
    written elsewhere after this mount's commit."""
    ops, sid = fs
    await write_file(ops, ROOT, b"mine.md", b"mine")
    await write_file(ops, ROOT, b"both.md", b"mine")
    other = store.memories.create(sid, "/other.md", "other", actor=None)
    both = store.memories.get_by_path(sid, "/both.md")
    store.memories.update(sid, both.id, content="theirs", actor=None)
    read: list[str] = []
    get_memory = store.memories.get

    def counting(store_id, memory_id, **kw):
        read.append(memory_id)
        return get_memory(store_id, memory_id, **kw)

    monkeypatch.setattr(store.memories, "get", counting)
    assert await ops.feed.poll_changes() == 4
    assert sorted(read) == sorted([other.id, both.id])
    assert ops.seq == store.feed.last(sid)
    assert await read_file(ops, (await ops.lookup(ROOT, b"both.md", CTX)).st_ino) == b"theirs"
    assert (await ops.lookup(ROOT, b"other.md", CTX)).st_size == len(b"other")
    assert (await ops.lookup(ROOT, b"mine.md", CTX)).st_size == len(b"mine")


async def test_a_read_through_the_mount_records_its_event_pair(store, tmp_path):
    """A read-only open→close queues only what its pair says (no JSON-lines file: the
    flusher builds the pair); once flushed, the session has the same pair as before."""
    s = store.stores.create("reads")
    sess = store.sessions.create([{"type": "memory_store", "memory_store_id": s.id}])
    sink = EventSink(store, s.id, sess.id, None)
    SINKS.append(sink)
    ops = Operations(store, s.id, actor=Actor.session(sess.id), events=sink,
                     display_root="/mnt/memory/r")
    ops.load()
    ino = await write_file(ops, ROOT, b"a.md", b"hello")
    sink.flush()
    before = len(store.events.list(sess.id).data)
    t0 = datetime.now(UTC)
    assert await read_file(ops, ino) == b"hello"
    assert sink.pending == 1
    sink.flush()
    assert sink.pending == 0
    evs = store.events.list(sess.id).data[before:]
    assert [e.type for e in evs] == ["agent.tool_use", "agent.tool_result"]
    use, result = (e.body for e in evs)
    assert use["name"] == comm(os.getpid()) and use["id"] == evs[0].id
    assert use["input"] == {"operation": "read", "file_path": "/mnt/memory/r/a.md",
                            "pid": os.getpid()}
    assert use["evaluated_permission"] == "allow"
    assert result["tool_use_id"] == use["id"] and result["is_error"] is False
    assert result["content"] == [{"type": "text", "text": "read /mnt/memory/r/a.md"}]
    assert use["processed_at"] == result["processed_at"] == evs[0].processed_at
    assert t0 <= parse_time(use["processed_at"]) <= datetime.now(UTC)


async def test_a_read_with_an_event_file_writes_the_pair_at_close(fs, store, tmp_path):
    ops, sid = fs
    ino = await write_file(ops, ROOT, b"a.md", b"x")
    assert await read_file(ops, ino) == b"x"
    lines = (tmp_path / f"events-{sid}.jsonl").read_text().splitlines()
    use, result = (json.loads(line) for line in lines[-2:])
    assert use["input"]["operation"] == "read" and result["tool_use_id"] == use["id"]
    ops.events.flush()
    with store.read() as c:
        stored = [json.loads(r["body"]) for r in c.execute(
            "SELECT body FROM events WHERE store_id = ? ORDER BY seq", (sid,))]
    assert stored[-2:] == [use, result]


def test_tool_pair_rows_are_the_json_of_tool_pair(monkeypatch):
    """The flusher's template makes exactly what tool_pair's events encode to."""
    from memfs.fuse import toolevents

    for args in [("cat", 12, "read", "/mnt/memory/a/é \"q\"\\.md", None, "read é"),
                 ("sh", 3, "read", "/m/x.md", "No such file: \u2028", "")]:
        us = 1_764_577_938_123_456
        rows = toolevents.tool_pair_rows(*args, us)
        ids = [r[0] for r in rows]
        monkeypatch.setattr(toolevents, "new_ids", lambda prefix, n, ids=ids: ids)
        pair = toolevents.tool_pair(*args[:4], failure=args[4], text=args[5], us=us)
        monkeypatch.undo()
        assert [r[3] for r in rows] == [json.dumps(e, ensure_ascii=False) for e in pair]
        assert [r[:3] for r in rows] == [(e["id"], e["type"], e["processed_at"]) for e in pair]
        assert rows[0][2] == "2025-12-01T08:32:18.123456Z"


async def test_an_unlink_or_rename_gives_up_on_a_foreign_write_lock(fs, store, db_path):
    """Issue 19 B: the kernel runs unlink and rename with the directory locked, so they wait
    for another process's write lock only DIRECTORY_PATIENCE seconds: then EBUSY, the file
    where it was, the failure logged; and a close waiting for the lock keeps the mutex only
    that long from them too."""
    import sqlite3
    import time

    import trio

    from memfs.fuse.core import DIRECTORY_PATIENCE

    ops, sid = fs
    ino = await write_file(ops, ROOT, b"a.md", b"a")
    await ops.mkdir(ROOT, b"d", 0o40755, CTX)
    await write_file(ops, (await ops.lookup(ROOT, b"d", CTX)).st_ino, b"b.md", b"b")
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        for attempt in (ops.unlink(ROOT, b"a.md", CTX),
                        ops.rename(ROOT, b"a.md", ROOT, b"moved.md", 0, CTX),
                        ops.rename(ROOT, b"d", ROOT, b"e", 0, CTX)):
            t = time.monotonic()
            await raises(errno.EBUSY, attempt)
            assert DIRECTORY_PATIENCE <= time.monotonic() - t < DIRECTORY_PATIENCE + 0.5
        info = await ops.open(ino, os.O_WRONLY | os.O_TRUNC, CTX)
        await ops.write(info.fh, 0, b"a2")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ops.flush, info.fh)  # waits for the lock, holding the mutex
            await async_wait_until(ops.mount.mutex.locked)
            t = time.monotonic()
            await raises(errno.EBUSY, ops.unlink(ROOT, b"a.md", CTX))
            assert time.monotonic() - t < DIRECTORY_PATIENCE + 0.5
            other.execute("ROLLBACK")
        await ops.release(info.fh)
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()
    assert sorted(m.path for m in store.memories.tree(sid)) == ["/a.md", "/d/b.md"]
    assert store.memories.get_by_path(sid, "/a.md").content == "a2"  # the close waited
    assert (await ops.lookup(ROOT, b"a.md", CTX)).st_ino == ino
    failed = [r["content"][0]["text"] for r in events(ops) if r.get("is_error")]
    assert len(failed) == 4 and all(t.startswith("EBUSY") for t in failed), failed
    await ops.unlink(ROOT, b"a.md", CTX)  # the lock is gone: it works again
    assert [m.path for m in store.memories.tree(sid)] == ["/d/b.md"]


async def test_a_descriptor_that_did_not_write_commits_nothing_while_another_is_open(fs, store):
    """SPEC §2: a close commits for a descriptor that wrote, and the last close commits a
    pending create or O_TRUNC. Here one descriptor truncates at open, another (opened for
    writing, never written) closes first: nothing is committed until the truncating one
    closes (test_stateful's model found the close of the second committing the first's
    O_TRUNC)."""
    ops, sid = fs
    ino = await write_file(ops, ROOT, b"a.md", b"old")
    trunc = await ops.open(ino, os.O_RDWR | os.O_TRUNC, CTX)
    idle = await ops.open(ino, os.O_RDWR, CTX)
    await ops.flush(idle.fh)
    await ops.release(idle.fh)
    assert store.memories.get_by_path(sid, "/a.md").content == "old"
    assert len(versions(store, sid)) == 1
    await ops.flush(trunc.fh)  # the last one: its O_TRUNC is saved now
    await ops.release(trunc.fh)
    assert store.memories.get_by_path(sid, "/a.md").content == ""
    # And one that wrote commits at its own close, whoever else holds the file.
    writer = await ops.open(ino, os.O_RDWR, CTX)
    other = await ops.open(ino, os.O_RDWR, CTX)
    await ops.write(writer.fh, 0, b"new")
    await ops.flush(writer.fh)
    await ops.release(writer.fh)
    assert store.memories.get_by_path(sid, "/a.md").content == "new"
    await ops.flush(other.fh)
    await ops.release(other.fh)
    assert [v.operation for v in versions(store, sid)] == ["created", "modified", "modified"]


async def test_an_o_trunc_commits_at_its_close_whoever_else_writes(fs, store):
    """`: > f` (an O_TRUNC that empties the file, no write) while another process holds it
    open for writing: its close returned 0 and logged "unchanged", the emptied file was saved
    only at the other's close, or never if that one was killed first. An O_TRUNC that empties
    a file and a create are changes of their own descriptor: saved at its close."""
    ops, sid = fs
    ino = await write_file(ops, ROOT, b"a.md", b"old")
    holder = await ops.open(ino, os.O_RDWR, CTX)
    trunc = await ops.open(ino, os.O_WRONLY | os.O_TRUNC, CTX)
    await ops.flush(trunc.fh)
    await ops.release(trunc.fh)
    assert store.memories.get_by_path(sid, "/a.md").content == ""
    await ops.flush(holder.fh)
    await ops.release(holder.fh)
    assert [v.operation for v in versions(store, sid)] == ["created", "modified"]
    # A create, while another descriptor of the new file is open for writing.
    info, attrs = await ops.create(ROOT, b"new.md", 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    other = await ops.open(attrs.st_ino, os.O_RDWR, CTX)
    await ops.flush(info.fh)
    await ops.release(info.fh)
    assert store.memories.get_by_path(sid, "/new.md").content == ""
    await ops.flush(other.fh)
    await ops.release(other.fh)
    texts = [r["content"][0]["text"] for r in events(ops) if "content" in r]
    assert texts[1:] == ["wrote 0 bytes to /mnt/memory/t/a.md", "read /mnt/memory/t/a.md",
                         "wrote 0 bytes to /mnt/memory/t/new.md", "read /mnt/memory/t/new.md"]


async def test_a_close_that_waited_for_an_unlink_of_its_file_drops_it_cleanly(fs, store):
    """A close finds its file still there, then waits for the mount's mutex behind an unlink
    of that file: by the time it commits, this mount removed the file (POSIX: its unsaved
    writes are dropped). The commit asserted that the file still had a path and the close
    answered EIO; it is a clean close, its event says the file was removed before it was
    saved."""
    import trio
    import trio.testing

    ops, sid = fs
    ino = await write_file(ops, ROOT, b"a.md", b"old")
    info = await ops.open(ino, os.O_WRONLY | os.O_TRUNC, CTX)
    await ops.write(info.fh, 0, b"new")
    # ops.mount.mutex: a request running now; the unlink, then the flush, queue behind it.
    async with trio.open_nursery() as nursery, ops.mount.mutex:
        nursery.start_soon(ops.unlink, ROOT, b"a.md", CTX)
        await trio.testing.wait_all_tasks_blocked()  # the unlink waits for the mutex
        nursery.start_soon(ops.flush, info.fh)  # the file is there: it will commit
        await trio.testing.wait_all_tasks_blocked()  # and the flush, behind the unlink
    await ops.release(info.fh)
    assert store.memories.tree(sid) == []
    rows = events(ops)
    assert not any(r.get("is_error") for r in rows), rows
    texts = [r["content"][0]["text"] for r in rows if "content" in r]
    assert texts[-2:] == ["deleted /mnt/memory/t/a.md",
                          "/mnt/memory/t/a.md was removed before it was saved"], texts


async def test_a_directorys_link_count_follows_its_subdirectories(fs, store):
    """st_nlink of a directory is 2 + its subdirectories (kept as a count, not counted at each
    getattr: the kernel asks for the directory's attributes at every create in it), through
    mkdir, rmdir, renames here and changes made elsewhere."""
    ops, sid = fs

    async def check() -> None:
        for node in list(ops.tree.nodes.values()):
            if node.is_dir and node.attached:
                subdirs = sum(1 for c in (node.children or {}).values() if c.is_dir)
                got = (await ops.getattr(node.ino, CTX)).st_nlink
                assert got == 2 + subdirs, (node.path, got, subdirs)

    await check()
    d = (await ops.mkdir(ROOT, b"d", 0o40755, CTX)).st_ino
    e = (await ops.mkdir(d, b"e", 0o40755, CTX)).st_ino
    await ops.mkdir(d, b"f", 0o40755, CTX)
    await write_file(ops, e, b"x.md", b"x")
    await check()
    await ops.rename(d, b"f", ROOT, b"g", 0, CTX)  # a directory moves to another parent
    await check()
    await raises(errno.ENOTEMPTY, ops.rename(ROOT, b"g", d, b"e", 0, CTX))
    await check()
    await ops.rmdir(ROOT, b"g", CTX)
    await ops.rename(ROOT, b"d", ROOT, b"h", 0, CTX)
    await check()
    other = ACTOR
    store.memories.create(sid, "/h/e/deep/y.md", "y", actor=other)
    store.memories.create(sid, "/k/l/z.md", "z", actor=other)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    await check()
    store.memories.delete_path(sid, "/h/e/deep/y.md", actor=other)
    store.memories.delete_path(sid, "/k/l/z.md", actor=other)
    m = store.memories.get_by_path(sid, "/h/e/x.md")
    store.memories.update(sid, m.id, path="/h2/x.md", actor=other)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    await check()
    await ops.unlink((await ops.lookup(ROOT, b"h2", CTX)).st_ino, b"x.md", CTX)
    await check()


async def test_a_refused_commit_in_a_group_leaves_the_others_saved(store, tmp_path):
    """Closes committed together (one transaction): the one the store refuses (the store is
    full) fails alone, with its own errno, and the others are saved."""
    ops, sid, limited = make_limited_ops(store, tmp_path, max_memories=3)
    handles = []
    for i in range(4):
        info, _ = await ops.create(ROOT, f"f{i}.md".encode(), 0o100644,
                                   os.O_WRONLY | os.O_CREAT, CTX)
        await ops.write(info.fh, 0, f"content {i}".encode())
        handles.append(info.fh)
    outcomes: dict[int, int | None] = {}

    async def close(i: int, fh: int) -> None:
        try:
            await ops.flush(fh)
            outcomes[i] = None
        except pyfuse3.FUSEError as e:
            outcomes[i] = e.errno
        await ops.release(fh)

    async with trio.open_nursery() as nursery:
        for i, fh in enumerate(handles):
            nursery.start_soon(close, i, fh)
    (refused,) = [i for i, e in outcomes.items() if e is not None]  # trio's order decides
    assert outcomes[refused] == errno.ENOSPC and len(outcomes) == 4
    saved = [i for i in range(4) if i != refused]
    assert sorted(m.path for m in limited.memories.tree(sid)) == [f"/f{i}.md" for i in saved]
    for i in saved:
        assert limited.memories.get_by_path(sid, f"/f{i}.md").content == f"content {i}"
    # Discarded, as it would have been alone.
    await raises(errno.ENOENT, ops.lookup(ROOT, f"f{refused}.md".encode(), CTX))
    results = [e for e in events(ops) if e["type"] == "agent.tool_result"]
    assert sorted(e["is_error"] for e in results) == [False, False, False, True]


async def test_two_closes_of_one_file_in_a_group_save_one_version(fs, store):
    ops, sid = fs
    ino = await write_file(ops, ROOT, b"a.md", b"one")
    first = await ops.open(ino, os.O_WRONLY | os.O_TRUNC, CTX)
    second = await ops.open(ino, os.O_WRONLY, CTX)
    await ops.write(first.fh, 0, b"two")
    await ops.write(second.fh, 3, b"!")

    async def close(fh: int) -> None:
        await ops.flush(fh)
        await ops.release(fh)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(close, first.fh)
        nursery.start_soon(close, second.fh)
    assert [v.operation for v in versions(store, sid)] == ["created", "modified"]
    assert store.memories.get_by_path(sid, "/a.md").content == "two!"


async def test_a_mount_writes_events_are_stored_and_logged_as_before(store, tmp_path,
                                                                      monkeypatch):
    """A write hands the store its pair as a ToolPair, which the store encodes from a
    template: the session gets the same events as when the mount handed it dicts (ids and
    times aside), and the JSON-lines log has what was stored, ids of the version included."""
    from memfs.fuse.core import Mount

    handed: list[str] = []  # what the mount hands each write as its events

    def spy(method):
        def call(*a, **kw):
            handed.append(type(kw["events"]).__name__)
            return method(*a, **kw)
        return call

    for name in ("write_path", "rename_path", "delete_path"):
        monkeypatch.setattr(store.memories, name, spy(getattr(store.memories, name)))

    async def run(name: str) -> tuple[list[str], list[dict]]:
        s = store.stores.create(name)
        sess = store.sessions.create([{"type": "memory_store", "memory_store_id": s.id}])
        sink = EventSink(store, s.id, sess.id, tmp_path / f"{name}.jsonl")
        SINKS.append(sink)
        ops = Operations(store, s.id, actor=Actor.session(sess.id), events=sink,
                         display_root="/mnt/memory/é \"q\"")
        ops.load()
        await write_file(ops, ROOT, "a é.md".encode(), b"one")
        ino = (await ops.lookup(ROOT, "a é.md".encode(), CTX)).st_ino
        info = await ops.open(ino, os.O_WRONLY | os.O_TRUNC, CTX)
        await ops.write(info.fh, 0, b"two")
        await ops.flush(info.fh)
        await ops.release(info.fh)
        await ops.rename(ROOT, "a é.md".encode(), ROOT, b"b.md", 0, CTX)
        await ops.unlink(ROOT, b"b.md", CTX)
        sink.flush()
        with store.read() as c:
            bodies = [r["body"] for r in c.execute(
                "SELECT body FROM events WHERE session_id = ? ORDER BY seq", (sess.id,))]
        return bodies, events(ops)

    bodies, logged = await run("pairs")
    assert handed == ["ToolPair"] * 4
    assert bodies == [json.dumps(e, ensure_ascii=False) for e in logged]
    ops_ = [e["input"]["operation"] for e in logged if e["type"] == "agent.tool_use"]
    assert ops_ == ["create", "write", "rename", "delete"]
    results = logged[1::2]
    assert all(r["memory_id"] == results[0]["memory_id"] for r in results)
    assert [("memory_version_id" in r) for r in results] == [True, True, True, False]
    assert logged[4]["input"] == {"operation": "rename",
                                  "file_path": "/mnt/memory/é \"q\"/a é.md",
                                  "new_path": "/mnt/memory/é \"q\"/b.md", "pid": os.getpid()}
    # The same writes with the pair as dicts, as the mount made it before.
    pair = Mount.pair
    monkeypatch.setattr(Mount, "pair", lambda self, *a, **kw: (
        None if (p := pair(self, *a, **kw)) is None else p.events()))
    before, logged_before = await run("dicts")
    assert handed[4:] == ["list"] * 4

    def normal(bodies: list[str]) -> list[str]:
        seen: dict[str, str] = {}
        out = []
        for raw in bodies:
            e = json.loads(raw)
            for k in ("id", "tool_use_id", "memory_id", "memory_version_id", "processed_at"):
                if k in e:
                    e[k] = seen.setdefault(e[k], f"<{len(seen)}>")
            out.append(json.dumps(e, ensure_ascii=False))
        return out

    assert normal(bodies) == normal(before)
    assert normal([json.dumps(e, ensure_ascii=False) for e in logged]) == normal(
        [json.dumps(e, ensure_ascii=False) for e in logged_before])
