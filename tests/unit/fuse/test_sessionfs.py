"""memfs.fuse.session: one filesystem over several stores, handlers called directly (no kernel)."""

from __future__ import annotations

import errno
import json
import os

import pyfuse3
import pytest

from memfs import Actor
from memfs.fuse.ops import Operations
from memfs.fuse.session import INODE_SHIFT, Member, SessionOperations
from memfs.fuse.toolevents import EventSink
from memfs.store import Store
from tests.support.fsops import CTX, raises, read_file, write_file

ROOT = pyfuse3.ROOT_INODE
ACTOR = Actor.user("user_test")


@pytest.fixture
def session(store: Store, tmp_path):
    """Three stores: notes (read-write), docs (read-only), extra (read-write)."""
    members, sinks = [], []
    for name, ro in (("notes", False), ("docs", True), ("extra", False)):
        s = store.stores.create(name)
        store.memories.create(s.id, "/seed.md", f"seed of {name}", actor=ACTOR)
        sink = EventSink(store, s.id, None, tmp_path / f"{name}.jsonl")
        sinks.append(sink)
        ops = Operations(store, s.id, actor=ACTOR, read_only=ro, events=sink,
                         display_root=f"/mnt/memory/{name}")
        members.append(Member(name, ops, sink))
    sops = SessionOperations(members)
    for i, m in enumerate(members):
        m.ops.load()
        sops.mark_loaded(i)
    yield sops
    for sink in sinks:
        sink.close()


def events(m: Member) -> list[dict]:
    assert m.sink is not None
    m.sink.flush()
    with open(m.sink._file.name) as f:  # type: ignore[union-attr]
        return [json.loads(line) for line in f]


async def listing(sops: SessionOperations, ino: int) -> list[tuple[bytes, int]]:
    got: list[tuple[bytes, int]] = []
    orig = pyfuse3.readdir_reply

    def reply(token, name, attrs, next_id):  # noqa: ANN001
        got.append((bytes(name), attrs.st_ino))
        return True

    fh = await sops.opendir(ino, CTX)
    pyfuse3.readdir_reply = reply
    try:
        await sops.readdir(fh, 0, None)  # type: ignore[arg-type]
    finally:
        pyfuse3.readdir_reply = orig
    await sops.releasedir(fh)
    return got


async def test_the_root_lists_the_stores_each_with_its_own_inode_range(session):
    sops = session
    root = await sops.getattr(ROOT, CTX)
    assert root.st_ino == ROOT and root.st_mode & 0o170000 == 0o040000
    got = await listing(sops, ROOT)
    assert got[:2] == [(b".", ROOT), (b"..", ROOT)]
    got = got[2:]
    assert [n for n, _ in got] == [b"notes", b"docs", b"extra"]
    # A store's root: its ".." is the session's root.
    assert (await listing(sops, got[0][1]))[:2] == [(b".", got[0][1]), (b"..", ROOT)]
    for i, (name, ino) in enumerate(got):
        assert ino == (i + 1) << INODE_SHIFT
        assert (await sops.lookup(ROOT, name, CTX)).st_ino == ino
        seed = await sops.lookup(ino, b"seed.md", CTX)
        assert seed.st_ino >> INODE_SHIFT == i + 1
        assert await read_file(sops, seed.st_ino) == f"seed of {name.decode()}".encode()
    await raises(errno.ENOENT, sops.lookup(ROOT, b"nope", CTX))
    assert (await sops.lookup((1 << INODE_SHIFT), b"..", CTX)).st_ino == ROOT


async def test_writes_in_one_store_never_appear_in_another(session, store):
    sops = session
    notes, extra = sops.members[0], sops.members[2]
    ino = await write_file(sops, notes.ops.root.ino, b"a.md", b"in notes")
    assert ino >> INODE_SHIFT == 1
    assert store.memories.get_by_path(notes.ops.store_id, "/a.md").content == "in notes"
    await raises(errno.ENOENT, sops.lookup(extra.ops.root.ino, b"a.md", CTX))
    assert [n for n, _ in await listing(sops, extra.ops.root.ino)][2:] == [b"seed.md"]
    # Same name in the other store: its own memory, its own content.
    other = await write_file(sops, extra.ops.root.ino, b"a.md", b"in extra")
    assert other != ino and other >> INODE_SHIFT == 3
    assert await read_file(sops, ino) == b"in notes"
    assert await read_file(sops, other) == b"in extra"
    # Moving between stores is refused like a rename between two mounts.
    await raises(errno.EXDEV, sops.rename(notes.ops.root.ino, b"a.md", extra.ops.root.ino,
                                          b"b.md", 0, CTX))
    # The event paths are those of each store's mount path.
    paths = [e["input"]["file_path"] for e in events(notes) if e["type"] == "agent.tool_use"]
    assert "/mnt/memory/notes/a.md" in paths
    paths = [e["input"]["file_path"] for e in events(extra) if e["type"] == "agent.tool_use"]
    assert "/mnt/memory/extra/a.md" in paths and not any("notes" in p for p in paths)


async def test_a_read_only_store_refuses_and_logs_while_the_others_write(session, store):
    sops = session
    docs = sops.members[1]
    await raises(errno.EROFS, sops.create(docs.ops.root.ino, b"x.md", 0o100644,
                                          os.O_WRONLY | os.O_CREAT, CTX))
    seed = await sops.lookup(docs.ops.root.ino, b"seed.md", CTX)
    await raises(errno.EROFS, sops.open(seed.st_ino, os.O_WRONLY, CTX))
    await raises(errno.EROFS, sops.unlink(docs.ops.root.ino, b"seed.md", CTX))
    results = [e for e in events(docs) if e["type"] == "agent.tool_result"]
    assert len(results) == 3 and all(r["is_error"] for r in results)
    assert all("EROFS" in r["content"][0]["text"] for r in results)
    assert [m.path for m in store.memories.list(docs.ops.store_id).data] == ["/seed.md"]
    await write_file(sops, sops.members[0].ops.root.ino, b"ok.md", b"fine")


async def test_the_session_root_is_fixed(session):
    sops = session
    await raises(errno.EPERM, sops.mkdir(ROOT, b"new", 0o755, CTX))
    await raises(errno.EPERM, sops.create(ROOT, b"x.md", 0o100644, os.O_WRONLY, CTX))
    await raises(errno.EPERM, sops.unlink(ROOT, b"notes", CTX))
    await raises(errno.EPERM, sops.rename(ROOT, b"notes", ROOT, b"n2", 0, CTX))
    await raises(errno.ENOENT, sops.getattr((9 << INODE_SHIFT) + 5, CTX))
    await raises(errno.EBADF, sops.read((9 << INODE_SHIFT) + 5, 0, 10))


async def test_handles_and_forget_reach_the_owning_store(session):
    sops = session
    notes, extra = sops.members[0], sops.members[2]
    a = await sops.lookup(notes.ops.root.ino, b"seed.md", CTX)
    b = await sops.lookup(extra.ops.root.ino, b"seed.md", CTX)
    fa = await sops.open(a.st_ino, os.O_RDONLY, CTX)
    fb = await sops.open(b.st_ino, os.O_RDONLY, CTX)
    assert fa.fh != fb.fh  # both stores count their handles from 1
    assert await sops.read(fb.fh, 0, 100) == b"seed of extra"
    assert await sops.read(fa.fh, 0, 100) == b"seed of notes"
    await sops.release(fa.fh)
    await sops.release(fb.fh)
    before = notes.ops.tree.nodes[a.st_ino].lookups
    await sops.forget([(a.st_ino, 1), (ROOT, 1)])
    node = notes.ops.tree.nodes.get(a.st_ino)
    assert node is None or node.lookups == before - 1
    assert extra.ops.tree.nodes[b.st_ino].lookups >= 1
    total = await sops.statfs(CTX)
    assert total.f_files == 3 * store_limit(sops)


def store_limit(sops: SessionOperations) -> int:
    return sops.members[0].ops.store.limits.max_memories


def test_only_fresh_trees_can_be_composed(store: Store, tmp_path):
    s = store.stores.create("late")
    store.memories.create(s.id, "/a.md", "a", actor=ACTOR)
    ops = Operations(store, s.id, actor=ACTOR)
    ops.load()
    with pytest.raises(ValueError):
        SessionOperations([Member("late", ops)])


async def test_requests_to_a_store_wait_until_its_tree_is_loaded(store: Store, tmp_path):
    import trio
    import trio.testing

    s = store.stores.create("slow")
    store.memories.create(s.id, "/a.md", "a", actor=ACTOR)
    ops = Operations(store, s.id, actor=ACTOR)
    sops = SessionOperations([Member("slow", ops)])
    base = 1 << INODE_SHIFT
    # The root can show the store (the launcher's bind mount looks it up) before the load.
    assert (await sops.lookup(ROOT, b"slow", CTX)).st_ino == base
    got = []

    async def lookup() -> None:
        got.append(await sops.lookup(base, b"a.md", CTX))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lookup)
        await trio.testing.wait_all_tasks_blocked()  # the lookup is parked
        assert got == []  # waiting, not answering ENOENT from an empty tree
        await sops.load(0)
    assert got[0].st_ino >> INODE_SHIFT == 1
    assert ops.tree.stale_inodes == [base]  # the kernel refreshes the root's attributes
