"""memfs.fuse.search alone, and the ``.search/`` handlers of memfs.fuse.ops (no kernel): a
question as a file name, the store's best hits as its content."""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from typing import Any

import pyfuse3
import pytest
import trio

from memfs import Actor
from memfs.daemons.mount import start_indexer
from memfs.daemons.snapshot import SnapshotStore
from memfs.fuse.ops import Operations
from memfs.fuse.search import REUSE_SECONDS, SEARCH, Refused, question_of, render
from memfs.fuse.toolevents import EventSink
from memfs.fuse.watch import WordsCatchUp
from memfs.launcher.prompt import SNAPSHOT_KEY, render_memory_prompt
from memfs.models import Session, SessionResource
from memfs.recall import wordsqueue
from memfs.recall.search import Hit, Result
from memfs.store import Store
from tests.support import wait_until
from tests.support.backend import Backend
from tests.support.fsops import (  # noqa: F401 - _close_sinks: an autouse fixture
    CTX,
    ROOT,
    SINKS,
    Ctx,
    Fields,
    _close_sinks,
    events,
    listdir,
    make_ops,
    raises,
    read_file,
    write_file,
)

ACTOR = Actor.user("user_test")
W = os.O_WRONLY | os.O_CREAT


@pytest.fixture(autouse=True)
def _words_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Words alone, unless a test asks for the local model (it says so)."""
    monkeypatch.setenv("MEMFS_EMBEDDINGS", "none")


async def ask(ops: Operations, question: str | bytes) -> tuple[pyfuse3.EntryAttributes, bytes]:
    """``cat MOUNT/.search/QUESTION``: the lookups, then open, read and release."""
    d = await ops.lookup(ROOT, SEARCH.encode(), CTX)
    name = question.encode() if isinstance(question, str) else question
    attrs = await ops.lookup(d.st_ino, name, CTX)
    return attrs, await read_file(ops, attrs.st_ino)


def lines(data: bytes) -> list[list[str]]:
    text = data.decode()
    assert text == "" or text.endswith("\n")
    return [line.split("\t") for line in text.splitlines()]


def results(ops: Operations, operation: str = "search") -> list[tuple[dict, dict]]:
    evs = events(ops)
    by_use = {e["tool_use_id"]: e for e in evs if e["type"] == "agent.tool_result"}
    return [(e, by_use[e["id"]]) for e in evs
            if e["type"] == "agent.tool_use" and e["input"]["operation"] == operation]


async def memories(ops: Operations) -> None:
    await write_file(ops, ROOT, b"oncall.md",
                     b"Nights and weekends: Dana is paged first, then Lee.\n")
    d = await ops.mkdir(ROOT, b"prefs", 0o40755, CTX)
    await write_file(ops, d.st_ino, b"editor.md", b"Use vim, tabs of four.\n")
    await write_file(ops, ROOT, b"lunch.md", b"Friday lunch is at noon, pizza.\n")


async def indexed_by_meaning(store: Store, tmp_path: Any, monkeypatch: Any) -> Operations:
    """A mount's operations over :func:`memories`, with the local model, indexed."""
    monkeypatch.setenv("MEMFS_EMBEDDINGS", "local")
    store.search.use_embeddings(None)
    ops, sid = make_ops(store, tmp_path)
    await memories(ops)
    assert store.search.index(sid).pending == 0
    return ops


# -- searchfs alone ---------------------------------------------------------------------------


def test_questions_are_file_names() -> None:
    assert question_of(b"who gets paged at night") == "who gets paged at night"
    assert question_of("où est la réunion ?".encode()) == "où est la réunion ?"
    assert question_of(b"x" * 255) == "x" * 255
    with pytest.raises(Refused) as e:
        question_of(b"x" * 256)
    assert e.value.errno == errno.ENAMETOOLONG
    with pytest.raises(Refused) as e:
        question_of(b"caf\xe9")
    assert e.value.errno == errno.EILSEQ


def test_render_one_line_a_hit_path_first() -> None:
    hits = [Hit("mem_1", "/people/on call.md", 0.93121, "paged\tat\nnight", ("words",), "t"),
            Hit("mem_2", "/.history/x.md", 0.5, "shadowed", ("words",), "t"),
            Hit("mem_4", "/.sessions/x.md", 0.5, "shadowed too", ("words",), "t"),
            Hit("mem_3", "/a.md", 0.25, "", ("meaning",), "t")]
    data, shown = render(Result(hits, False), lambda p: "/mnt/n" + p)
    assert data == b"/mnt/n/people/on call.md\t0.9312\tpaged at night\n/mnt/n/a.md\t0.2500\t\n"
    assert shown == [("/mnt/n/people/on call.md", 0.93121), ("/mnt/n/a.md", 0.25)]
    assert render(Result([], False), str) == (b"", [])


# -- through the handlers ---------------------------------------------------------------------


async def test_cat_a_question_prints_hits_best_first(store: Store, tmp_path) -> None:
    ops, sid = make_ops(store, tmp_path)
    await memories(ops)
    attrs, data = await ask(ops, "who gets paged at night and on weekends")
    assert stat.S_ISREG(attrs.st_mode) and stat.S_IMODE(attrs.st_mode) == 0o644
    assert attrs.st_size == len(data) > 0  # the size the kernel is told is the content's
    assert attrs.entry_timeout == 0 and attrs.attr_timeout == 0  # asked again every time
    rows = lines(data)
    assert rows[0][0] == "/mnt/memory/t/oncall.md"  # the path as the agent sees it
    assert all(len(r) == 3 for r in rows)
    assert 0 < float(rows[0][1]) <= 1 and "Dana is paged" in rows[0][2]
    assert [float(r[1]) for r in rows] == sorted((float(r[1]) for r in rows), reverse=True)
    # What meaning could not do is in the xattrs (the file holds hits only).
    xattrs = await ops.listxattr(attrs.st_ino, CTX)
    assert b"user.memfs.search.meaning" in xattrs
    assert await ops.getxattr(attrs.st_ino, b"user.memfs.search.meaning", CTX) == b"false"
    note = await ops.getxattr(attrs.st_ino, b"user.memfs.search.note", CTX)
    assert b"meaning is off" in note
    assert await ops.getxattr(attrs.st_ino, b"user.memfs.search.indexed", CTX) == b"0/3"
    await raises(pyfuse3.ENOATTR, ops.getxattr(attrs.st_ino, b"user.memfs.search.model", CTX))
    await raises(pyfuse3.ENOATTR, ops.getxattr(attrs.st_ino, b"security.selinux", CTX))
    # One tool event per search, with the hits and why words alone answered.
    [(use, res)] = results(ops)
    assert use["input"]["file_path"] == \
        "/mnt/memory/t/.search/who gets paged at night and on weekends"
    text = res["content"][0]["text"]
    assert res["is_error"] is False
    assert text.startswith("searched for 'who gets paged at night and on weekends': ")
    assert "by words only (meaning is off" in text
    assert "/mnt/memory/t/oncall.md\t" in text


async def test_no_hit_is_an_empty_file(store: Store, tmp_path) -> None:
    ops, _ = make_ops(store, tmp_path)
    await memories(ops)
    attrs, data = await ask(ops, "xylophone")
    assert data == b"" and attrs.st_size == 0


async def test_found_by_its_words_as_soon_as_its_write_returns(store: Store, tmp_path) -> None:
    ops, sid = make_ops(store, tmp_path)
    await memories(ops)
    assert (await ask(ops, "quokka"))[1] == b""
    await write_file(ops, ROOT, b"zoo.md", b"The quokka lives on Rottnest.")
    assert lines((await ask(ops, "quokka"))[1])[0][0] == "/mnt/memory/t/zoo.md"
    store.memories.write_path(sid, "/elsewhere.md", "a quokka here too",
                              actor=ACTOR)  # not the mount
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))  # what the change watcher does
    assert len(lines((await ask(ops, "quokka"))[1])) == 2
    d = await ops.lookup(ROOT, SEARCH.encode(), CTX)
    await ops.unlink(ROOT, b"zoo.md", CTX)
    assert [r[0] for r in lines((await ask(ops, "quokka"))[1])] == ["/mnt/memory/t/elsewhere.md"]
    assert (await ops.lookup(d.st_ino, b"..", CTX)).st_ino == ROOT


async def taken_in(catch_up: WordsCatchUp, batches: int) -> None:
    """Wait until the service has indexed ``batches`` batches (each counted once its
    transaction committed, when its thread hands the result back)."""
    with trio.fail_after(10):
        while catch_up.batches < batches:  # noqa: ASYNC110 - no event to wait on
            await trio.sleep(0.02)


async def test_a_quiet_mount_indexes_the_words_its_writes_queued(store: Store, tmp_path) -> None:
    """Issue 23: a write only queues its words; the mount takes the queue in once no change
    has come for a moment, and not while they come."""
    ops, sid = make_ops(store, tmp_path)
    catch_up = WordsCatchUp(ops, store.search, interval=1.0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(catch_up.run)
        await trio.sleep(0.01)
        assert catch_up.batches == 0  # no change yet: asleep
        start = trio.current_time()
        for i in range(100):  # a write every 20 ms or so, for longer than the interval
            await write_file(ops, ROOT, f"n{i}.md".encode(), b"the quokka %d" % i)
            await trio.sleep(0.02)
        assert trio.current_time() - start > catch_up.interval
        assert wordsqueue.queued(store.database, sid) == 100 and catch_up.batches == 0
        catch_up.interval = 0.05
        await taken_in(catch_up, 1)  # one batch (wordsqueue.BATCH: 256)
        assert wordsqueue.queued(store.database, sid) == 0
        await trio.sleep(0.3)
        assert catch_up.batches == 1  # nothing changed: nothing more
        store.memories.write_path(sid, "/elsewhere.md", "a quokka too",
                                  actor=ACTOR)  # not the mount
        ops.feed.apply_changes(store.feed.since(sid, ops.seq))  # what the change watcher does
        await taken_in(catch_up, 2)
        assert wordsqueue.queued(store.database, sid) == 0
        catch_up.stop()
    assert store.database.one("SELECT count(*) FROM memory_words")[0] == 101


async def test_the_open_after_a_lookup_reads_its_answer(store: Store, tmp_path) -> None:
    """Size and content agree: the kernel reads up to the size the lookup gave."""
    ops, sid = make_ops(store, tmp_path)
    await memories(ops)
    d = await ops.lookup(ROOT, SEARCH.encode(), CTX)
    attrs = await ops.lookup(d.st_ino, b"pizza", CTX)
    store.memories.write_path(sid, "/more.md", "more pizza, more pizza", actor=ACTOR)
    info = await ops.open(attrs.st_ino, os.O_RDONLY, CTX)
    assert not info.direct_io and not info.keep_cache
    data = await ops.read(info.fh, 0, 1 << 16)
    await ops.release(info.fh)
    assert len(data) == attrs.st_size and len(lines(data)) == 1
    assert (await ops.getattr(attrs.st_ino, CTX)).st_size == attrs.st_size
    # An open long after its lookup asks again; a size the kernel was not told is read
    # without the page cache (direct_io), past the old size.
    assert ops.search is not None
    node = ops.search.nodes[attrs.st_ino]
    assert node.answer is not None
    node.answer.at -= REUSE_SECONDS
    info = await ops.open(attrs.st_ino, os.O_RDONLY, CTX)
    assert info.direct_io
    data = await ops.read(info.fh, 0, 1 << 16)
    await ops.release(info.fh)
    assert len(lines(data)) == 2
    assert len(results(ops)) == 2  # each search is a tool event


async def test_one_process_looking_a_question_up_again_gets_the_same_answer(
        store: Store, tmp_path) -> None:
    """``ls -l`` looks a name up three times (statx, then two getxattr): one search, while
    the mount sees no change; another process, or a change, asks again."""
    ops, sid = make_ops(store, tmp_path)
    await memories(ops)
    assert ops.search is not None
    d = (await ops.lookup(ROOT, SEARCH.encode(), CTX)).st_ino
    for _ in range(3):
        await ops.lookup(d, b"pizza", CTX)
    assert ops.search.searches == 1 and len(results(ops)) == 1
    other = Ctx()
    other.pid = 1  # another process (its command name is read from /proc)
    await ops.lookup(d, b"pizza", other)
    assert ops.search.searches == 2
    await ops.lookup(d, b"pizza", CTX)
    assert ops.search.searches == 3  # the last answer was another process's
    await ops.lookup(d, b"pizza", CTX)
    assert ops.search.searches == 3
    await write_file(ops, ROOT, b"more.md", b"pizza again")  # this mount's change
    assert len(lines((await ask(ops, "pizza"))[1])) == 2
    store.memories.write_path(sid, "/api.md", "pizza by the API", actor=ACTOR)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))  # the change feed's
    assert len(lines((await ask(ops, "pizza"))[1])) == 3
    n = ops.search.searches
    node = next(iter(x for x in ops.search.nodes.values() if x.question == "pizza"))
    assert node.answer is not None
    node.answer.at -= REUSE_SECONDS  # a second later
    await ops.lookup(d, b"pizza", CTX)
    assert ops.search.searches == n + 1


async def test_questions_that_cannot_be_asked(store: Store, tmp_path) -> None:
    ops, _ = make_ops(store, tmp_path)
    await memories(ops)
    d = (await ops.lookup(ROOT, SEARCH.encode(), CTX)).st_ino
    await raises(errno.ENAMETOOLONG, ops.lookup(d, b"why " * 64, CTX))
    await raises(errno.EILSEQ, ops.lookup(d, b"caf\xe9 au lait", CTX))
    await raises(errno.EINVAL, ops.lookup(d, b"   ", CTX))  # no word
    assert (await ops.lookup(d, b"?!", CTX)).st_size == 0  # no word, but a question
    f = (await ops.lookup(d, b"pizza", CTX)).st_ino
    await raises(errno.ENOTDIR, ops.lookup(f, b"deeper", CTX))  # .search/pizza/deeper
    await raises(errno.ENOTDIR, ops.opendir(f, CTX))
    await raises(errno.EISDIR, ops.open(d, os.O_RDONLY, CTX))
    failed = [r for _, r in results(ops) if r["is_error"]]
    assert [r["content"][0]["text"].split(":")[0] for r in failed] == [
        "ENAMETOOLONG", "EILSEQ", "EINVAL"]
    assert ops.search is not None and len(ops.search.nodes) == 3  # no refused question kept


async def test_every_change_under_search_is_erofs_and_logged(store: Store, tmp_path) -> None:
    ops, sid = make_ops(store, tmp_path)
    await write_file(ops, ROOT, b"n.md", b"pizza")
    d = (await ops.lookup(ROOT, SEARCH.encode(), CTX)).st_ino
    f = (await ops.lookup(d, b"pizza", CTX)).st_ino
    await raises(errno.EROFS, ops.create(d, b"new", 0o100644, W, CTX))
    await raises(errno.EROFS, ops.create(ROOT, b".search", 0o100644, W, CTX))
    await raises(errno.EROFS, ops.open(f, os.O_WRONLY, CTX))
    await raises(errno.EROFS, ops.open(f, os.O_RDWR, CTX))
    await raises(errno.EROFS, ops.open(f, os.O_RDONLY | os.O_TRUNC, CTX))
    await raises(errno.EROFS, ops.mkdir(d, b"x", 0o40755, CTX))
    await raises(errno.EROFS, ops.mkdir(ROOT, b".search", 0o40755, CTX))
    await raises(errno.EROFS, ops.unlink(d, b"pizza", CTX))
    await raises(errno.EROFS, ops.rmdir(ROOT, b".search", CTX))
    await raises(errno.EROFS, ops.rename(d, b"pizza", ROOT, b"out", 0, CTX))
    await raises(errno.EROFS, ops.rename(ROOT, b"n.md", d, b"in", 0, CTX))
    await raises(errno.EROFS, ops.rename(ROOT, b".search", ROOT, b"s", 0, CTX))
    attr = pyfuse3.EntryAttributes()
    attr.st_size = 0
    await raises(errno.EROFS, ops.setattr(f, attr, Fields(size=True), None, CTX))
    await raises(errno.EROFS, ops.setattr(d, attr, Fields(mtime=True), None, CTX))
    await raises(errno.EROFS, ops.setxattr(f, b"user.memfs.search.note", b"x", CTX))
    await raises(errno.EROFS, ops.removexattr(f, b"user.x", CTX))
    await raises(errno.EROFS, ops.symlink(d, b"s", b"t", CTX))
    await raises(errno.EROFS, ops.mknod(d, b"p", stat.S_IFIFO | 0o644, 0, CTX))
    await raises(errno.EROFS, ops.link(f, d, b"l", CTX))
    failed = [e for e in events(ops) if e["type"] == "agent.tool_result" and e["is_error"]]
    assert len(failed) == 19
    assert all("EROFS" in e["content"][0]["text"] and "(search results)" in
               e["content"][0]["text"] for e in failed)
    assert [m.path for m in store.memories.tree(sid)] == ["/n.md"]


async def test_hidden_from_the_root_listing_and_listed_empty(store, tmp_path, monkeypatch) -> None:
    ops, sid = make_ops(store, tmp_path)
    store.memories.write_path(sid, "/.search/x.md", "pizza from the API", actor=ACTOR)  # shadowed
    store.memories.write_path(sid, "/y.md", "pizza", actor=ACTOR)
    ops.feed.apply_changes(store.feed.since(sid, ops.seq))
    assert await listdir(ops, ROOT, monkeypatch) == ["y.md"]
    d = await ops.lookup(ROOT, SEARCH.encode(), CTX)
    assert stat.S_ISDIR(d.st_mode) and d.entry_timeout == ops.mount.timeout
    assert await listdir(ops, d.st_ino, monkeypatch) == []
    assert [r[0] for r in lines((await ask(ops, "pizza"))[1])] == ["/mnt/memory/t/y.md"]
    texts = [r["content"][0]["text"] for _, r in results(ops, "list")]
    assert "listed /mnt/memory/t/.search: 0 entries" in texts


async def test_private_mount_modes(store, tmp_path) -> None:
    ops, _ = make_ops(store, tmp_path, private=True)
    attrs, _ = await ask(ops, "anything")
    assert stat.S_IMODE(attrs.st_mode) == 0o600
    assert stat.S_IMODE((await ops.lookup(ROOT, b".search", CTX)).st_mode) == 0o700


async def test_questions_are_forgotten(store, tmp_path) -> None:
    ops, _ = make_ops(store, tmp_path)
    attrs, _ = await ask(ops, "anything")
    assert ops.search is not None and attrs.st_ino in ops.search.nodes
    await ops.forget([(attrs.st_ino, 1)])
    assert attrs.st_ino not in ops.search.nodes
    again, _ = await ask(ops, "anything")
    assert again.st_ino != attrs.st_ino


async def test_searches_run_in_a_worker_thread(store, tmp_path, monkeypatch) -> None:
    seen: list[threading.Thread] = []
    real = store.search.in_store

    def search(*args: Any, **kwargs: Any) -> Result:
        seen.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(store.search, "in_store", search)
    ops, _ = make_ops(store, tmp_path)
    await memories(ops)
    await ask(ops, "pizza")
    assert seen and all(t is not threading.main_thread() for t in seen)


async def test_a_snapshot_mount_has_no_search(store, tmp_path) -> None:
    ops, sid = make_ops(store, tmp_path)
    await memories(ops)
    snap = SnapshotStore(store, store.versions.snapshot(sid, "2999-01-01T00:00:00Z"))
    sink = EventSink(store, sid, None, None)
    SINKS.append(sink)
    past = Operations(snap, sid, actor=ACTOR, read_only=True, events=sink)
    past.load()
    assert past.search is None
    await raises(errno.ENOENT, past.lookup(ROOT, SEARCH.encode(), CTX))
    assert (await past.lookup(ROOT, b".history", CTX)).st_ino  # still there


async def test_meaning_finds_a_memory_without_its_words(store, tmp_path, monkeypatch) -> None:
    """The local model: once indexed, a question sharing no word with the memory finds it."""
    ops = await indexed_by_meaning(store, tmp_path, monkeypatch)
    question = "which engineer handles emergencies after hours"
    attrs, data = await ask(ops, question)
    assert lines(data) == []  # in three memories, too far for the default threshold...
    attrs = await walk(ops, "@threshold=0", question)  # ...but the first of them
    data = await read_file(ops, attrs.st_ino)
    rows = lines(data)
    assert rows[0][0] == "/mnt/memory/t/oncall.md"
    assert await ops.getxattr(attrs.st_ino, b"user.memfs.search.meaning", CTX) == b"true"
    assert await ops.getxattr(attrs.st_ino, b"user.memfs.search.indexed", CTX) == b"3/3"
    assert (await ops.getxattr(attrs.st_ino, b"user.memfs.search.model", CTX)).startswith(
        b"local:")
    [_, (_, res)] = results(ops)
    assert "by words and meaning" in res["content"][0]["text"]


# -- any question, options from the path (issue 39) -------------------------------------------


async def walk(ops: Operations, *names: str | bytes) -> pyfuse3.EntryAttributes:
    """The lookups of ``MOUNT/.search/NAME/NAME/...``: the last one's attributes."""
    attrs = await ops.lookup(ROOT, SEARCH.encode(), CTX)
    for name in names:
        attrs = await ops.lookup(attrs.st_ino,
                                 name.encode() if isinstance(name, str) else name, CTX)
    return attrs


async def cat(ops: Operations, *names: str | bytes) -> bytes:
    return await read_file(ops, (await walk(ops, *names)).st_ino)


async def test_a_question_with_a_slash_is_asked_with_percent_2f(store: Store, tmp_path) -> None:
    ops, _ = make_ops(store, tmp_path)
    await write_file(ops, ROOT, b"gigs.md", b"Melanie saw the bands Muse and Coldplay.\n")
    await write_file(ops, ROOT, b"lunch.md", b"Friday lunch is at noon, pizza.\n")
    data = await cat(ops, "@threshold=0", "What musical artists%2Fbands has Melanie seen?")
    assert lines(data)[0][0] == "/mnt/memory/t/gigs.md"
    [(use, res)] = results(ops)  # the event names the file as it was written
    assert use["input"]["file_path"] == (
        "/mnt/memory/t/.search/@threshold=0/What musical artists%2Fbands has Melanie seen?")
    assert "'What musical artists/bands has Melanie seen?'" in res["content"][0]["text"]


async def test_options_are_directories_above_the_question(store: Store, tmp_path,
                                                          monkeypatch) -> None:
    ops, _ = make_ops(store, tmp_path)
    for i in range(4):
        await write_file(ops, ROOT, f"tea{i}.md".encode(), f"tea note {i}\n".encode())
    d = await ops.mkdir(ROOT, b"people", 0o40755, CTX)
    await write_file(ops, d.st_ino, b"dana.md", b"Dana drinks tea at four.\n")
    every = lines(await cat(ops, "@threshold=0", "tea"))
    assert len(every) == 5
    assert len(lines(await cat(ops, "@limit=2", "@threshold=0", "tea"))) == 2
    assert len(lines(await cat(ops, "@threshold=0", "@limit=2", "tea"))) == 2  # any order
    [only] = lines(await cat(ops, "@threshold=0", "@prefix=people", "tea"))
    assert only[0] == "/mnt/memory/t/people/dana.md"
    [only] = lines(await cat(ops, "@prefix=people%2F", "@words", "tea"))
    assert only[0] == "/mnt/memory/t/people/dana.md"
    # A threshold above a hit's score leaves it out (the scores shown, not their values).
    top = float(every[0][1])
    assert all(float(r[1]) >= top
               for r in lines(await cat(ops, f"@threshold={top}", "tea")))
    # An option is a directory: listed empty, its ".." the one above, not a file.
    opt = await walk(ops, "@limit=2", "@words")
    assert stat.S_ISDIR(opt.st_mode)
    await raises(errno.EISDIR, ops.open(opt.st_ino, os.O_RDONLY, CTX))
    assert await listdir(ops, opt.st_ino, monkeypatch) == []
    up = await ops.lookup(opt.st_ino, b"..", CTX)
    assert up.st_ino == (await walk(ops, "@limit=2")).st_ino
    ev = [u["input"]["file_path"] for u, _ in results(ops)]
    assert "/mnt/memory/t/.search/@threshold=0/@prefix=people/tea" in ev


async def test_options_refused_are_errnos_and_logged(store: Store, tmp_path) -> None:
    ops, _ = make_ops(store, tmp_path)
    await memories(ops)
    d = (await walk(ops)).st_ino
    await raises(errno.ENOENT, ops.lookup(d, b"@limt=3", CTX))
    await raises(errno.ENOENT, ops.lookup(d, b"@session", CTX))  # this mount has no session
    await raises(errno.EINVAL, ops.lookup(d, b"@limit=x", CTX))
    lim = (await ops.lookup(d, b"@limit=1000", CTX)).st_ino  # a number: the store says no
    await raises(errno.EINVAL, ops.lookup(lim, b"pizza", CTX))
    await raises(errno.EINVAL, ops.lookup(lim, b"@limit=3", CTX))  # twice
    failed = [(u["input"]["file_path"], r["content"][0]["text"])
              for u, r in results(ops) if r["is_error"]]
    assert [(p.rsplit("/.search/", 1)[1], t.split(":")[0]) for p, t in failed] == [
        ("@limt=3", "ENOENT"), ("@session", "ENOENT"), ("@limit=x", "EINVAL"),
        ("@limit=1000/pizza", "EINVAL"), ("@limit=1000/@limit=3", "EINVAL")]
    assert "limit must be between 1 and 100" in failed[3][1]


async def test_nothing_over_the_threshold_is_empty_with_the_best_in_an_xattr(
        store, tmp_path, monkeypatch) -> None:
    ops = await indexed_by_meaning(store, tmp_path, monkeypatch)
    question = "which engineer handles emergencies after hours"
    attrs = await walk(ops, "@threshold=0", question)
    best = await ops.getxattr(attrs.st_ino, b"user.memfs.search.best", CTX)
    assert float(best) == float(lines(await read_file(ops, attrs.st_ino))[0][1])
    if float(best) < 1:
        attrs = await walk(ops, "@threshold=1", question)
        assert attrs.st_size == 0 and await read_file(ops, attrs.st_ino) == b""
        assert await ops.getxattr(attrs.st_ino, b"user.memfs.search.best", CTX) == best
        note = await ops.getxattr(attrs.st_ino, b"user.memfs.search.note", CTX)
        assert note.startswith(b"nothing scored 1 or more (best ")
    # No candidate at all: no best.
    attrs = await walk(ops, "@words", "xylophone")
    await raises(pyfuse3.ENOATTR, ops.getxattr(attrs.st_ino, b"user.memfs.search.best", CTX))


async def test_session_searches_every_store_of_the_session(store: Store, tmp_path) -> None:
    from memfs.fuse.core import actor_for

    notes = store.stores.create("notes").id
    docs = store.stores.create("docs").id
    other = store.stores.create("other").id
    for sid, path in ((notes, "/tea.md"), (docs, "/tea-policy.md"), (other, "/tea.md")):
        store.memories.create(sid, path, "green tea at four", actor=ACTOR)
    sess = store.sessions.create([{"type": "memory_store", "memory_store_id": notes},
                                 {"type": "memory_store", "memory_store_id": docs,
                                  "access": "read_only"}])
    sink = EventSink(store, notes, sess.id, tmp_path / "events.jsonl")
    SINKS.append(sink)
    ops = Operations(store, notes, actor=actor_for(sess.id), events=sink,
                     display_root="/mnt/memory/notes")
    ops.load()
    rows = lines(await cat(ops, "@session", "@threshold=0", "tea"))
    assert {r[0] for r in rows} == {"/mnt/memory/notes/tea.md",
                                    "/mnt/memory/docs/tea-policy.md"}  # never "other"
    assert [float(r[1]) for r in rows] == sorted((float(r[1]) for r in rows), reverse=True)
    rows = lines(await cat(ops, "@threshold=0", "@prefix=tea-", "@session", "tea"))
    assert [r[0] for r in rows] == ["/mnt/memory/docs/tea-policy.md"]
    # A mount of no session has none.
    plain, _ = make_ops(store, tmp_path)
    await raises(errno.ENOENT, walk(plain, "@session"))


# -- both backends ----------------------------------------------------------------------------


async def test_on_both_backends_deleted_is_never_found(backend: Backend, tmp_path) -> None:
    store = backend.open()
    ops, sid = make_ops(store, tmp_path)
    await memories(ops)
    t0 = time.monotonic()
    rows = lines((await ask(ops, "Friday pizza lunch"))[1])
    assert time.monotonic() - t0 < 2
    assert rows[0][0] == "/mnt/memory/t/lunch.md"
    await ops.unlink(ROOT, b"lunch.md", CTX)
    assert "/mnt/memory/t/lunch.md" not in [
        r[0] for r in lines((await ask(ops, "Friday pizza lunch"))[1])]
    SINKS.remove(ops.events)  # type: ignore[arg-type]
    ops.events.close()  # type: ignore[union-attr] - before the backend closes its store


# -- the system prompt ------------------------------------------------------------------------


def _res(i: int, mount: str) -> SessionResource:
    return SessionResource(f"sesrsc_{i}", "sesn_1", f"memstore_{i}", "read_write", None,
                           f"S{i}", "", mount)


def _session(*resources: SessionResource, metadata: dict[str, str] | None = None) -> Session:
    return Session("sesn_1", "idle", tuple(resources), None, None, metadata or {}, None, "t",
                   "t", None)


def test_the_system_prompt_says_search_exists_in_one_line() -> None:
    text = render_memory_prompt(_session(_res(1, "/mnt/memory/notes")))
    [line] = [ln for ln in text.splitlines() if ".search/" in ln]
    assert 'cat "/mnt/memory/notes/.search/who gets paged at night"' in line
    assert "path<TAB>score<TAB>snippet" in line and "every mount has" in line
    # What an empty answer means, that words answer at once, options and a "/".
    assert "Nothing printed means that nothing stored scored above the relevance threshold" in (
        line)
    assert "meaning catches up" in line and "write each / as %2F" in line
    assert ".search/@limit=3/@threshold=0.5/@prefix=people/@words/QUESTION" in line
    assert "@session" not in line  # one mount: nothing to search at once
    # A snapshot has no .search/: the line says so, and names a mount that has one.
    both = render_memory_prompt(_session(
        _res(1, "/mnt/memory/then"), _res(2, "/mnt/memory/now"),
        metadata={SNAPSHOT_KEY + "memstore_1": "2026-01-01T00:00:00Z"}))
    [line] = [ln for ln in both.splitlines() if ".search/" in ln]
    assert "/mnt/memory/now/.search/" in line and "every mount but a snapshot" in line
    assert "@session" not in line  # one live mount
    two = render_memory_prompt(_session(_res(1, "/mnt/memory/a"), _res(2, "/mnt/memory/b")))
    [line] = [ln for ln in two.splitlines() if ".search/" in ln]
    assert "@session asks every mount at once" in line
    only = render_memory_prompt(_session(
        _res(1, "/mnt/memory/then"), metadata={SNAPSHOT_KEY + "memstore_1": "x"}))
    assert ".search" not in only


# -- the mount daemon's indexer ---------------------------------------------------------------


def test_a_mount_daemon_indexes_its_stores_while_mounted(store, monkeypatch) -> None:
    monkeypatch.setenv("MEMFS_EMBEDDINGS", "local")
    store.search.use_embeddings(None)
    sids = [store.stores.create(f"s{i}").id for i in range(2)]
    for sid in sids:
        store.memories.write_path(sid, "/a.md", "the on-call rota", actor=ACTOR)
    indexer = start_indexer(store, sids)
    assert indexer is not None
    try:
        wait_until(lambda: all(store.search.status(s)["indexed"] >= 1 for s in sids), 30,
                   interval=0.05, what="both stores indexed")
    finally:
        indexer.stop()
    assert not indexer._thread.is_alive()  # noqa: SLF001


def test_no_indexer_without_a_provider_a_local_store_or_a_live_store(
        store, monkeypatch, error_logs) -> None:
    sid = store.stores.create("s").id
    store.memories.write_path(sid, "/a.md", "the on-call rota", actor=ACTOR)
    assert start_indexer(store, [sid]) is None  # MEMFS_EMBEDDINGS=none
    store.search.use_embeddings("local")
    assert start_indexer(store, []) is None  # only snapshots: nothing to index
    snap = SnapshotStore(store, store.versions.snapshot(sid, "2999-01-01T00:00:00Z"))
    assert start_indexer(snap, [sid]) is None  # a snapshot's (or a server's) store
    # A setting that names no provider never brings the mount down: words answer alone.
    monkeypatch.setenv("MEMFS_EMBEDDINGS", "bogus")
    fresh = Store(store.path)
    try:
        assert start_indexer(fresh, [sid]) is None
        assert [r.getMessage() for r in error_logs if "names no provider" in r.getMessage()]
        result = fresh.search.in_store(sid, "rota")
        assert [h.path for h in result.hits] == ["/a.md"] and not result.meaning
    finally:
        fresh.close()


def test_a_local_mount_takes_its_words_in_and_a_remote_or_past_one_does_not(store) -> None:
    """The runtime starts WordsCatchUp over a local store's search part, never over a client
    (its server takes its own words in) or a snapshot (nothing to take in)."""
    from memfs.client import Client
    from memfs.daemons.snapshot import SnapshotStore
    from memfs.fuse.runtime import words_index

    assert words_index(store) is store.search
    with Client("http://127.0.0.1:9") as client:
        assert words_index(client) is None
    sid = store.stores.create("past").id
    store.memories.create(sid, "/a.md", "x", actor=ACTOR)
    past = SnapshotStore(store, store.versions.snapshot(sid, store.versions.list(sid).data[0].id))
    assert words_index(past) is None
