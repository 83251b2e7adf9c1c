"""A change made elsewhere that lands between a mount's writes and their close (issue 19 A).

A remote mount whose server was killed and restarted acknowledged two closes and stored
neither: the change feed (or the reload after the stream reconnected) had taken the written
file's node out of the tree between the write and the close, so the close found nothing to
save and its event said "unchanged", naming a memory deleted before. Here the interleaving is
made deterministic: the change is made in the store and applied to the mount (as its watcher
or its change subscriber would) between ``write`` and ``flush``, for a local mount and for a
remote one (:class:`memfs.client.Client` over the in-process server).

What must hold: a close that returns 0 has stored its bytes at the file's path (re-creating
the memory, or over the memory now there: the last close wins, SPEC §2); the mount shows that
file afterwards, under the inode the writer holds; "unchanged" only when nothing was written.
A file unlinked or renamed over by this mount itself while open keeps POSIX semantics: its
unsaved writes are dropped, and its event says so.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

import pytest
from pyfuse3 import FUSEError
from starlette.testclient import TestClient

from memfs import errors
from memfs.api import create_app
from memfs.client import Client
from memfs.fuse.ops import Operations
from memfs.fuse.toolevents import EventSink
from memfs.store import Store
from tests.support.asgi import through
from tests.support.fsops import ACTOR, CTX, ROOT, events, raises, read_file, write_file

KEY = "elsewhere-key"


@dataclass
class Mounted:
    """A mount's Operations, and the store behind it as another writer sees it."""

    ops: Operations
    sid: str
    store: Store
    #: Applies the changes made since the mount's position, as its feed service does.
    feed: Callable[[], Awaitable[None]]
    #: Reloads the whole tree, as after a pruned feed position or a server reset.
    reload: Callable[[], Awaitable[None]]


@pytest.fixture(params=["local", "remote"])
def mounted(request, store: Store, tmp_path) -> Iterator[Mounted]:
    sid = store.stores.create("elsewhere").id
    if request.param == "local":
        sink = EventSink(store, sid, None, tmp_path / "events.jsonl")
        ops = Operations(store, sid, actor=ACTOR, events=sink, display_root="/mnt/memory/t")
        ops.load()

        async def feed() -> None:
            await ops.feed.poll_changes()

        async def reload() -> None:
            seq, tree, archived = ops.feed._read_all()
            await ops.feed.reload(tree, seq, archived)

        yield Mounted(ops, sid, store, feed, reload)
        sink.close()
        return
    with TestClient(create_app(store, [KEY])) as tc, \
            Client("http://memfs", KEY, transport=through(tc)) as client:
        client.limits = store.limits  # what the daemon asks the server for
        sink = EventSink(client, sid, None, tmp_path / "events.jsonl")
        ops = Operations(client, sid, actor=ACTOR, events=sink, display_root="/mnt/memory/t")
        ops.load()

        async def remote_feed() -> None:
            # What ChangeSubscriber does with each frame of /changes/stream: the change, and
            # the memory as the server sends it along.
            for ch in client.feed.since(sid, ops.seq):
                memory = None
                if ch.op == "put" and ch.memory_id is not None:
                    try:
                        memory = client.memories.get(sid, ch.memory_id, view="basic")
                    except errors.NotFound:
                        memory = None  # deleted since: the stream sends none either
                await ops.feed.apply_feed(ch, memory)

        async def remote_reload() -> None:
            # A `memfs.reset` frame: the whole tree again.
            seq = client.feed.last(sid)
            await ops.feed.reload(client.memories.tree(sid), seq, False)

        yield Mounted(ops, sid, store, remote_feed, remote_reload)
        sink.close()


async def _open_and_write(m: Mounted, name: bytes, data: bytes, flags: int) -> tuple[int, int]:
    ino = (await m.ops.lookup(ROOT, name, CTX)).st_ino
    info = await m.ops.open(ino, flags, CTX)
    if data:
        await m.ops.write(info.fh, 0, data)
    return ino, info.fh


async def _close(m: Mounted, fh: int) -> None:
    await m.ops.flush(fh)
    await m.ops.release(fh)


def _last_result(m: Mounted) -> dict:
    return events(m.ops)[-1]


async def _shows(m: Mounted, name: bytes, ino: int, content: bytes) -> None:
    """The mount shows ``name`` as ``ino`` with ``content``, as the store does."""
    entry = await m.ops.lookup(ROOT, name, CTX)
    assert entry.st_ino == ino
    assert entry.st_size == len(content)
    assert await read_file(m.ops, ino) == content
    node = m.ops.tree.nodes[ino]
    mem = m.store.memories.get_by_path(m.sid, "/" + name.decode())
    assert node.attached and node.memory is not None and node.memory.id == mem.id
    assert m.ops.tree.by_memory[mem.id] is node


async def test_a_close_after_a_delete_elsewhere_stores_its_writes(mounted):
    m = mounted
    await write_file(m.ops, ROOT, b"r.md", b"old")
    old = m.store.memories.get_by_path(m.sid, "/r.md")
    ino, fh = await _open_and_write(m, b"r.md", b"new bytes", os.O_WRONLY | os.O_TRUNC)
    m.store.memories.delete(m.sid, old.id, actor=None)
    await m.feed()
    await _close(m, fh)
    now = m.store.memories.get_by_path(m.sid, "/r.md")
    assert now.content == "new bytes"
    res = _last_result(m)
    assert res["content"][0]["text"] == "wrote 9 bytes to /mnt/memory/t/r.md"
    assert res["memory_id"] == now.id and res["memory_version_id"] == now.memory_version_id
    await _shows(m, b"r.md", ino, b"new bytes")
    assert (ROOT, "r.md", 0) in m.ops.stale_entries  # the kernel looks the name up again
    await m.feed()  # the commit read back from the feed changes nothing
    await _shows(m, b"r.md", ino, b"new bytes")


async def test_a_close_after_a_reload_without_the_memory_stores_its_writes(mounted):
    m = mounted
    await write_file(m.ops, ROOT, b"r.md", b"old")
    old = m.store.memories.get_by_path(m.sid, "/r.md")
    ino, fh = await _open_and_write(m, b"r.md", b"after reload", os.O_WRONLY | os.O_TRUNC)
    m.store.memories.delete(m.sid, old.id, actor=None)
    await m.reload()
    await _close(m, fh)
    assert m.store.memories.get_by_path(m.sid, "/r.md").content == "after reload"
    assert _last_result(m)["content"][0]["text"] == "wrote 12 bytes to /mnt/memory/t/r.md"
    await _shows(m, b"r.md", ino, b"after reload")


async def test_a_close_after_another_memory_took_the_path_overwrites_it(mounted):
    """Deleted and made again elsewhere (a new memory at the same path) while written here:
    the last close wins, as a new version of the memory now at the path."""
    m = mounted
    await write_file(m.ops, ROOT, b"r.md", b"old")
    old = m.store.memories.get_by_path(m.sid, "/r.md")
    ino, fh = await _open_and_write(m, b"r.md", b"mine", os.O_WRONLY | os.O_TRUNC)
    m.store.memories.delete(m.sid, old.id, actor=None)
    theirs = m.store.memories.create(m.sid, "/r.md", "theirs", actor=None)
    await m.feed()
    await _close(m, fh)
    now = m.store.memories.get_by_path(m.sid, "/r.md")
    assert (now.id, now.content) == (theirs.id, "mine")
    res = _last_result(m)
    assert res["memory_id"] == theirs.id and res["memory_version_id"] == now.memory_version_id
    await _shows(m, b"r.md", ino, b"mine")
    assert m.store.memories.count(m.sid) == 1


async def test_a_write_after_the_delete_elsewhere_is_stored_too(mounted):
    m = mounted
    await write_file(m.ops, ROOT, b"r.md", b"old")
    old = m.store.memories.get_by_path(m.sid, "/r.md")
    ino, fh = await _open_and_write(m, b"r.md", b"", os.O_RDWR)
    m.store.memories.delete(m.sid, old.id, actor=None)
    await m.feed()
    await m.ops.write(fh, 0, b"late")
    await _close(m, fh)
    assert m.store.memories.get_by_path(m.sid, "/r.md").content == "late"
    await _shows(m, b"r.md", ino, b"late")


async def test_fsync_after_a_delete_elsewhere_stores_the_writes(mounted):
    m = mounted
    await write_file(m.ops, ROOT, b"r.md", b"old")
    old = m.store.memories.get_by_path(m.sid, "/r.md")
    ino, fh = await _open_and_write(m, b"r.md", b"synced", os.O_WRONLY | os.O_TRUNC)
    m.store.memories.delete(m.sid, old.id, actor=None)
    await m.feed()
    await m.ops.fsync(fh, False)
    assert m.store.memories.get_by_path(m.sid, "/r.md").content == "synced"
    await _close(m, fh)
    await _shows(m, b"r.md", ino, b"synced")
    # created, deleted, created again; the close after the fsync adds none
    assert len(m.store.versions.list(m.sid, limit=10).data) == 3


async def test_a_file_unlinked_here_while_open_drops_its_writes_and_says_so(mounted):
    """POSIX, unchanged: this mount's own unlink wins over the writes of an open descriptor."""
    m = mounted
    await write_file(m.ops, ROOT, b"r.md", b"old")
    _, fh = await _open_and_write(m, b"r.md", b"lost", os.O_WRONLY | os.O_TRUNC)
    await m.ops.unlink(ROOT, b"r.md", CTX)
    await m.ops.write(fh, 4, b" too")
    await _close(m, fh)
    assert m.store.memories.count(m.sid) == 0
    assert _last_result(m)["content"][0]["text"] == (
        "/mnt/memory/t/r.md was removed before it was saved")


async def test_a_close_fails_when_a_directory_took_the_path_elsewhere(mounted):
    """What cannot be saved at its path any more fails the close (never a silent 0)."""
    m = mounted
    await write_file(m.ops, ROOT, b"r.md", b"old")
    old = m.store.memories.get_by_path(m.sid, "/r.md")
    _, fh = await _open_and_write(m, b"r.md", b"mine", os.O_WRONLY | os.O_TRUNC)
    m.store.memories.delete(m.sid, old.id, actor=None)
    m.store.memories.create(m.sid, "/r.md/inside.md", "a directory now", actor=None)
    await m.feed()
    await raises(errno.EEXIST, m.ops.flush(fh))
    await m.ops.release(fh)
    assert [x.path for x in m.store.memories.tree(m.sid)] == ["/r.md/inside.md"]
    res = _last_result(m)
    assert res["is_error"] is True and res["content"][0]["text"].startswith("EEXIST")
    assert (await m.ops.lookup(ROOT, b"r.md", CTX)).st_mode & 0o170000 == 0o040000


async def test_a_reload_keeps_a_file_this_mount_saved_after_the_tree_was_read(mounted):
    """A reload applies a tree read a moment before: a file this mount committed meanwhile is
    not in it, and must not leave the mount (nor its memory stay unknown to the tree)."""
    m = mounted
    seq, tree = m.store.feed.last(m.sid), m.store.memories.tree(m.sid)
    ino = await write_file(m.ops, ROOT, b"new.md", b"saved meanwhile")
    await m.ops.feed.reload(tree, seq, False)
    await _shows(m, b"new.md", ino, b"saved meanwhile")


# -- the feed bringing back this mount's own earlier changes (issue 38 N1) -------------------


def _frames_now(m: Mounted) -> list:
    """The frames a change stream would push now: each change since the mount's position,
    with the memory as the server reads it now (it polls its feed, then the mount applies the
    frames later: after its own later changes)."""
    store = m.ops.store
    frames = []
    for ch in store.feed.since(m.sid, m.ops.seq):
        memory = None
        if ch.op == "put" and ch.memory_id is not None:
            try:
                memory = store.memories.get(m.sid, ch.memory_id, view="basic")
            except errors.NotFound:
                memory = None
        frames.append((ch, memory))
    return frames


async def test_a_late_frame_never_brings_back_a_file_unlinked_here(mounted):
    m = mounted
    await write_file(m.ops, ROOT, b"r.md", b"v1")
    late = _frames_now(m)  # read by the server before the unlink below
    await m.ops.unlink(ROOT, b"r.md", CTX)
    for ch, memory in late:
        await m.ops.feed.apply_feed(ch, memory)
    await raises(errno.ENOENT, m.ops.lookup(ROOT, b"r.md", CTX))
    ino = await write_file(m.ops, ROOT, b"r.md", b"v2")  # a create: never EEXIST
    await _shows(m, b"r.md", ino, b"v2")


async def test_touch_after_an_unlink_stores_the_file_whatever_the_feed_brings(mounted):
    """``touch; unlink; touch``: the second touch opens the name if the mount shows it, else
    creates it (touch(1)'s O_CREAT), and its close returns 0: the file must be stored. A late
    frame that brought the unlinked file back made that close save nothing."""
    m = mounted
    old = await write_file(m.ops, ROOT, b"r.md", b"v1")
    late = _frames_now(m)
    await m.ops.unlink(ROOT, b"r.md", CTX)
    await m.ops.forget([(old, m.ops.tree.nodes[old].lookups)])  # the kernel drops it
    for ch, memory in late:
        await m.ops.feed.apply_feed(ch, memory)
    try:
        ino = (await m.ops.lookup(ROOT, b"r.md", CTX)).st_ino
        fh = (await m.ops.open(ino, os.O_WRONLY, CTX)).fh
    except FUSEError:
        info, attrs = await m.ops.create(ROOT, b"r.md", 0o100644, os.O_WRONLY | os.O_CREAT,
                                         CTX)
        ino, fh = attrs.st_ino, info.fh
    await _close(m, fh)
    for ch, memory in _frames_now(m):  # the delete, and the new file's write
        await m.ops.feed.apply_feed(ch, memory)
    assert m.store.memories.get_by_path(m.sid, "/r.md").content == ""
    await _shows(m, b"r.md", ino, b"")


async def test_a_late_frame_never_undoes_a_rename_here(mounted):
    """Write t, rename it over target, write t again: the late frame of the first t does not
    take the second t's place (the rename after its close would find nothing)."""
    m = mounted
    await write_file(m.ops, ROOT, b"target.md", b"old target")
    await write_file(m.ops, ROOT, b"t.md", b"first")
    late = _frames_now(m)
    await m.ops.rename(ROOT, b"t.md", ROOT, b"target.md", 0, CTX)
    ino = await write_file(m.ops, ROOT, b"t.md", b"second")
    for ch, memory in late:
        await m.ops.feed.apply_feed(ch, memory)
    await _shows(m, b"t.md", ino, b"second")
    await m.ops.rename(ROOT, b"t.md", ROOT, b"target.md", 0, CTX)
    assert [(x.path, m.store.memories.get(m.sid,
                                          x.id).content) for x in m.store.memories.tree(m.sid)
            ] == [("/target.md", "second")]


async def test_a_late_frame_never_brings_back_a_file_renamed_over_its_twin(mounted):
    """A rename over a file of the same content changes one thing in the store: the renamed
    memory is deleted. The late frame of that memory's write must not bring it back."""
    m = mounted
    await write_file(m.ops, ROOT, b"b.md", b"same")
    await write_file(m.ops, ROOT, b"a.md", b"same")
    late = _frames_now(m)
    await m.ops.rename(ROOT, b"a.md", ROOT, b"b.md", 0, CTX)
    for ch, memory in late:
        await m.ops.feed.apply_feed(ch, memory)
    await raises(errno.ENOENT, m.ops.lookup(ROOT, b"a.md", CTX))
    assert [x.path for x in m.store.memories.tree(m.sid)] == ["/b.md"]


async def test_a_late_frame_never_brings_back_a_file_unlinked_after_a_delete_elsewhere(
        mounted):
    """unlink of a file deleted elsewhere a moment before (not applied yet) returns 0; the
    late frame of its write must not bring it back."""
    m = mounted
    await write_file(m.ops, ROOT, b"a.md", b"v1")
    late = _frames_now(m)
    m.store.memories.delete(m.sid, m.store.memories.get_by_path(m.sid, "/a.md").id, actor=None)
    await m.ops.unlink(ROOT, b"a.md", CTX)
    for ch, memory in late:
        await m.ops.feed.apply_feed(ch, memory)
    await raises(errno.ENOENT, m.ops.lookup(ROOT, b"a.md", CTX))


# -- a database found down (issue 38: outages seen by shells) ---------------------------------


@pytest.mark.allow_error_logs  # each refusal, as a refused commit is
async def test_opening_for_writing_fails_while_the_database_is_known_down(mounted,
                                                                          monkeypatch):
    """A shell's ``echo x > f`` ignores its close's error: once a store call found the
    database down, opening a file for writing fails (EIO) until a call finds it back."""
    m = mounted
    await write_file(m.ops, ROOT, b"a.md", b"before")
    store = m.ops.store

    def down(*args, **kwargs):
        raise errors.StorageError("the PostgreSQL database cannot be reached")

    monkeypatch.setattr(store.memories, "write_path", down)
    monkeypatch.setattr(store.feed, "last", down)
    info, _ = await m.ops.create(ROOT, b"lost.md", 0o100644, os.O_WRONLY | os.O_CREAT, CTX)
    await m.ops.write(info.fh, 0, b"x")
    await raises(errno.EIO, m.ops.flush(info.fh))  # how the mount learns it
    await m.ops.release(info.fh)
    await raises(errno.EIO, m.ops.create(ROOT, b"b.md", 0o100644, os.O_WRONLY | os.O_CREAT,
                                         CTX))
    ino = (await m.ops.lookup(ROOT, b"a.md", CTX)).st_ino
    await raises(errno.EIO, m.ops.open(ino, os.O_WRONLY | os.O_TRUNC, CTX))
    assert await read_file(m.ops, ino) == b"before"  # reading needs no database call here
    monkeypatch.undo()  # back
    await write_file(m.ops, ROOT, b"b.md", b"after")
    assert m.store.memories.get_by_path(m.sid, "/b.md").content == "after"
    assert m.ops.mount.outage is None
