"""Session scratch (memfs.fuse.scratch, docs/mounts.md): editors' and tools' temporary files
are files of the mount only, never versions, memories or events; a memory renamed onto a
scratch name is parked until the store has to delete or move it."""

from __future__ import annotations

import errno
import os

import pyfuse3
import pytest

from memfs.fuse import scratch
from memfs.fuse.scratch import is_scratch
from tests.support.fsops import (  # noqa: F401 - _close_sinks: an autouse fixture
    ACTOR,
    CTX,
    ROOT,
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


@pytest.mark.parametrize("name", [
    ".x.md.swp", ".x.md.swx", ".x.md.swo", ".notes.swp", "x.md~", "#x.md#", ".#x.md",
    "sedAb12Cd", "sed000000", "4913", "5036"])
def test_scratch_names(name):
    assert is_scratch(name)


@pytest.mark.parametrize("name", [
    "x.md", ".x.md", "x.swp", ".swp", "sed.md", "sedAb12C", "sedAb12Cde", "4912", "4914",
    "1", "~x", ".a.swift", "a#", "#a"])
def test_names_that_are_not_scratch(name):
    assert not is_scratch(name)


async def test_a_scratch_file_holds_any_bytes_and_never_reaches_the_store(fs, store):
    ops, sid = fs
    ino = await write_file(ops, ROOT, b".x.md.swp", b"b0VIM\x00\xff\xfe")
    assert await read_file(ops, ino) == b"b0VIM\x00\xff\xfe"
    assert (await ops.getattr(ino, CTX)).st_size == 8
    info = await ops.open(ino, os.O_RDWR | os.O_TRUNC, CTX)
    await ops.write(info.fh, 0, b"\xff")
    await ops.fsync(info.fh, False)
    await ops.flush(info.fh)
    await ops.release(info.fh)
    assert await read_file(ops, ino) == b"\xff"
    await ops.unlink(ROOT, b".x.md.swp", CTX)
    await raises(errno.ENOENT, ops.lookup(ROOT, b".x.md.swp", CTX))
    assert versions(store, sid) == [] and store.memories.count(sid) == 0
    assert events(ops) == []


async def test_scratch_files_are_not_counted_in_the_memory_limit(store, tmp_path):
    ops, sid, small = make_limited_ops(store, tmp_path, max_memories=1)
    await write_file(ops, ROOT, b"1.md", b"1")
    await write_file(ops, ROOT, b"1.md~", b"1")
    await write_file(ops, ROOT, b".1.md.swp", b"\0")
    await raises(errno.ENOSPC, ops.create(ROOT, b"2.md", 0o100644, os.O_WRONLY, CTX))
    assert small.memories.count(sid) == 1


async def test_scratch_files_hold_their_budget_at_most(fs):
    ops, _ = fs
    assert ops.tree.scratch_budget == scratch.SCRATCH_BUDGET
    ops.tree.scratch_budget = 10
    await write_file(ops, ROOT, b"a~", b"12345678")
    info, _ = await ops.create(ROOT, b"b~", 0o100644, os.O_WRONLY, CTX)
    await ops.write(info.fh, 0, b"12")
    await raises(errno.ENOSPC, ops.write(info.fh, 2, b"3"))
    attr = pyfuse3.EntryAttributes()
    attr.st_size = 9
    a = (await ops.lookup(ROOT, b"a~", CTX)).st_ino
    await raises(errno.ENOSPC, ops.setattr(a, attr, Fields(size=True), None, CTX))
    await ops.release(info.fh)
    await ops.unlink(ROOT, b"a~", CTX)  # room again
    info = await ops.open((await ops.lookup(ROOT, b"b~", CTX)).st_ino, os.O_WRONLY, CTX)
    await ops.write(info.fh, 2, b"345678")
    await ops.release(info.fh)


async def test_scratch_files_are_bounded_in_number_and_a_memory_parked_counts(fs):
    """Empty scratch files cost no bytes: their number is bounded too (each is a node in the
    daemon's memory). A memory renamed onto a scratch name brings its content into the
    budget, and is refused past it."""
    ops, _ = fs
    ops.tree.scratch_files = 3
    for n in range(3):
        await write_file(ops, ROOT, f"{n}~".encode(), b"")
    await raises(errno.ENOSPC, ops.create(ROOT, b"3~", 0o100644, os.O_WRONLY, CTX))
    await ops.unlink(ROOT, b"0~", CTX)  # room again
    await write_file(ops, ROOT, b"3~", b"")
    ops.tree.scratch_files = 100
    ops.tree.scratch_budget = 10
    await write_file(ops, ROOT, b"big.md", b"0123456789AB")
    await raises(errno.ENOSPC, ops.rename(ROOT, b"big.md", ROOT, b"big.md~", 0, CTX))
    assert (await ops.lookup(ROOT, b"big.md", CTX)).st_size == 12  # left as it was


async def test_a_scratch_file_renamed_over_a_memory_is_one_version_of_it(fs, store):
    """sed -i: write sedXXXXXX, rename it over the file."""
    ops, sid = fs
    await write_file(ops, ROOT, b"a.md", b"old")
    before = store.memories.get_by_path(sid, "/a.md")
    ino = await write_file(ops, ROOT, b"sedAb12Cd", b"new")
    await ops.rename(ROOT, b"sedAb12Cd", ROOT, b"a.md", 0, CTX)
    after = store.memories.get_by_path(sid, "/a.md")
    assert (after.id, after.content) == (before.id, "new")
    assert [(v.operation, v.path) for v in versions(store, sid)] == [
        ("created", "/a.md"), ("modified", "/a.md")]
    assert (await ops.lookup(ROOT, b"a.md", CTX)).st_ino == ino
    assert await ops.getxattr(ino, b"user.memfs.memory_id", CTX) == before.id.encode()
    use, res = events(ops)[-2:]
    assert use["input"]["operation"] == "rename" and res["memory_id"] == before.id
    # Binary bytes cannot become a memory: the rename fails, the scratch file stays.
    await write_file(ops, ROOT, b"a.md~", b"\xff")
    await raises(errno.EILSEQ, ops.rename(ROOT, b"a.md~", ROOT, b"a.md", 0, CTX))
    assert store.memories.get_by_path(sid, "/a.md").content == "new"


async def test_a_backup_by_rename_then_a_save_is_one_version_of_the_same_memory(fs, store):
    """vim and emacs: rename x.md to x.md~, write a new x.md, delete x.md~."""
    ops, sid = fs
    await write_file(ops, ROOT, b"x.md", b"old")
    before = store.memories.get_by_path(sid, "/x.md")
    await ops.rename(ROOT, b"x.md", ROOT, b"x.md~", 0, CTX)
    await raises(errno.ENOENT, ops.lookup(ROOT, b"x.md", CTX))
    backup = (await ops.lookup(ROOT, b"x.md~", CTX)).st_ino
    assert await read_file(ops, backup) == b"old"
    assert store.memories.get_by_path(sid, "/x.md").content == "old"  # the store: unchanged
    await write_file(ops, ROOT, b"x.md", b"new")
    await ops.unlink(ROOT, b"x.md~", CTX)
    after = store.memories.get_by_path(sid, "/x.md")
    assert (after.id, after.content) == (before.id, "new")
    assert [v.operation for v in versions(store, sid)] == ["created", "modified"]


async def test_a_parked_memory_put_back_is_unchanged(fs, store):
    """A save that failed: vim renames its backup back."""
    ops, sid = fs
    await write_file(ops, ROOT, b"x.md", b"old")
    await ops.rename(ROOT, b"x.md", ROOT, b"x.md~", 0, CTX)
    await ops.rename(ROOT, b"x.md~", ROOT, b"x.md", 0, CTX)
    assert [v.operation for v in versions(store, sid)] == ["created"]
    assert (await ops.lookup(ROOT, b"x.md", CTX)).st_size == 3


async def test_a_parked_memory_is_deleted_with_its_scratch_file(fs, store):
    """mv x.md x.md~; rm x.md~: the memory is deleted (when the scratch file is)."""
    ops, sid = fs
    await write_file(ops, ROOT, b"x.md", b"old")
    mid = store.memories.get_by_path(sid, "/x.md").id
    await ops.rename(ROOT, b"x.md", ROOT, b"x.md~", 0, CTX)
    assert store.memories.count(sid) == 1
    await ops.unlink(ROOT, b"x.md~", CTX)
    assert store.memories.count(sid) == 0
    assert [(v.operation, v.memory_id) for v in versions(store, sid)] == [
        ("created", mid), ("deleted", mid)]


async def test_a_parked_memory_moves_where_its_scratch_file_is_renamed(fs, store):
    ops, sid = fs
    await write_file(ops, ROOT, b"x.md", b"old")
    mid = store.memories.get_by_path(sid, "/x.md").id
    await ops.rename(ROOT, b"x.md", ROOT, b"x.md~", 0, CTX)
    await ops.rename(ROOT, b"x.md~", ROOT, b"y.md", 0, CTX)
    m = store.memories.get_by_path(sid, "/y.md")
    assert (m.id, m.content) == (mid, "old")
    assert [m.path for m in store.memories.tree(sid)] == ["/y.md"]


async def test_a_parked_memory_changed_elsewhere_comes_back_and_is_not_deleted(fs, store):
    ops, sid = fs
    await write_file(ops, ROOT, b"x.md", b"old")
    await ops.rename(ROOT, b"x.md", ROOT, b"x.md~", 0, CTX)
    store.memories.write_path(sid, "/x.md", "changed elsewhere", actor=ACTOR)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    assert (await ops.lookup(ROOT, b"x.md", CTX)).st_size == len("changed elsewhere")
    await ops.unlink(ROOT, b"x.md~", CTX)
    assert store.memories.get_by_path(sid, "/x.md").content == "changed elsewhere"
