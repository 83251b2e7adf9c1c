"""``.sessions/`` in a live mount (memfs.fuse.sessionlog): one folder per session the store was
attached to, read with ls, cat and grep -r; read-only; a session sees its own folder only
unless the store's ``memfs_sessions_visibility`` is ``workspace``; a person's mount sees every
session of the store; a session of another store is never shown."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from memfs import errors
from memfs.fuse.sessionlog import MAX_FILE_BYTES, folder_name
from memfs.launcher.prompt import render_memory_prompt
from memfs.store import Store
from tests.support import wait_until
from tests.support.mount import Mount, errno_of, sh
from tests.support.session import ISOLATIONS, Run, needs_root

pytestmark = pytest.mark.fuse


def _say(store: Store, sid: str, text: str) -> None:
    store.events.send(sid, [{"type": "user.message",
                             "content": [{"type": "text", "text": text}]}])


def _session(store: Store, *store_ids: str, says: str) -> str:
    s = store.sessions.create([{"type": "memory_store", "memory_store_id": i}
                               for i in store_ids])
    _say(store, s.id, says)
    return s.id


@pytest.fixture
def three(open_store: Callable[..., Store]) -> tuple[Store, str, list[str], str]:
    """A store with two sessions (the older says "alpha words", the newer "beta words") and
    a session of another store only ("gamma words")."""
    store = open_store()
    a = store.stores.create("team notes").id
    b = store.stores.create("other").id
    first = _session(store, a, says="alpha words")
    second = _session(store, a, b, says="beta words")
    other = _session(store, b, says="gamma words")
    return store, a, [first, second], other


def _folders(store: Store, *sids: str) -> list[str]:
    return [folder_name(store.sessions.get(s)) for s in sids]


def test_a_session_sees_its_own_folder_read_with_ls_cat_and_grep(three, mounter):
    store, a, (first, second), _ = three
    m = mounter(a, "--session", first)
    sessions = m.root / ".sessions"
    own, = _folders(store, first)
    assert os.listdir(sessions) == [own]
    assert ".sessions" not in os.listdir(m.root)  # hidden, like .history
    assert os.listdir(sessions / own) == ["transcript.md", "events.jsonl", "prompt.md"]
    lines = (sessions / own / "events.jsonl").read_text().splitlines()
    said = [json.loads(line) for line in lines]
    assert [e["content"][0]["text"] for e in said if e["type"] == "user.message"] == [
        "alpha words"]
    assert (sessions / own / "prompt.md").read_text() == render_memory_prompt(
        store.sessions.get(first))
    # the size stat gives is the content's (ls -l, wc -c)
    data = (sessions / own / "prompt.md").read_bytes()
    assert os.stat(sessions / own / "prompt.md").st_size == len(data)
    out = sh("cat .sessions/*/events.jsonl | grep -c 'alpha words'", m.root)
    assert out.stdout.strip() == "1"
    found = sh("grep -rl 'alpha words' .sessions", m.root).stdout.split()
    assert sorted(found) == [f".sessions/{own}/events.jsonl", f".sessions/{own}/transcript.md"]
    # another session's folder is not there, even by name
    theirs, = _folders(store, second)
    assert errno_of(lambda: os.stat(sessions / theirs)) == errno.ENOENT
    # reads and listings are tool events of the session
    m.wait_pair("read", m.root / ".sessions" / own / "events.jsonl")


def test_the_transcript_has_the_messages_whole_and_each_tool_call_on_a_line(three, mounter):
    store, a, (first, _), _ = three
    m = mounter(a, "--session", first)
    store.events.add(first, [{"type": "agent.message",
                              "content": [{"type": "text", "text": "noted:\nsecond line"}]}])
    (m.root / "todo.md").write_text("buy tea\n")
    m.wait_pair("create", m.root / "todo.md")
    own, = _folders(store, first)
    f = m.root / ".sessions" / own / "transcript.md"
    text = wait_until(lambda: t if "todo.md" in (t := f.read_text()) else None, 5.0)
    assert "alpha words" in text and "> noted:\n> second line" in text
    assert "**user**" in text and "**agent**" in text
    tool, = [line for line in text.splitlines() if "todo.md" in line]
    assert "create" in tool
    assert os.stat(f).st_size >= len(text.encode())


def test_every_change_under_sessions_is_erofs(three, mounter):
    store, a, (first, _), _ = three
    m = mounter(a, "--session", first)
    sessions = m.root / ".sessions"
    own, = _folders(store, first)
    f = sessions / own / "events.jsonl"
    before = f.read_bytes()
    for change in (
        lambda: f.write_text("x"),
        lambda: open(f, "a").close(),
        lambda: (sessions / own / "new.md").write_text("x"),
        lambda: (sessions / "new.md").write_text("x"),
        lambda: os.mkdir(sessions / own / "d"),
        lambda: os.unlink(f),
        lambda: os.rmdir(sessions / own),
        lambda: os.rename(f, sessions / own / "moved.jsonl"),
        lambda: os.rename(sessions / own, m.root / "taken"),
        lambda: os.chmod(f, 0o600),
        lambda: os.setxattr(f, "user.x", b"1"),
        lambda: os.truncate(f, 0),
        lambda: os.rmdir(sessions),
    ):
        assert errno_of(change) == errno.EROFS
    assert f.read_bytes()[:len(before)] == before
    _, res = m.wait_pair("delete", f)
    assert res["is_error"] is True and "EROFS" in res["content"][0]["text"]
    assert store.memories.tree(a) == []


def test_the_store_setting_widens_to_every_session_of_the_store(three, mounter):
    store, a, (first, second), other = three
    m = mounter(a, "--session", first)
    sessions = m.root / ".sessions"
    store.stores.update(a, metadata={"memfs_sessions_visibility": "workspace"})
    older, newer = _folders(store, first, second)
    # newest first as listed (ls -U); a name starts with the start time, so ls -r agrees
    wait_until(lambda: os.listdir(sessions) == [newer, older], 5.0)
    assert sh("ls -r .sessions", m.root).stdout.split() == [newer, older]
    found = sorted(sh("grep -rh 'words' .sessions --include=events.jsonl", m.root)
                   .stdout.splitlines())
    texts = [json.loads(line)["content"][0]["text"] for line in found]
    assert texts == ["alpha words", "beta words"]  # never gamma: another store's session
    assert _folders(store, other)[0] not in os.listdir(sessions)
    # and back: its own only
    store.stores.update(a, metadata={"memfs_sessions_visibility": "session"})
    wait_until(lambda: os.listdir(sessions) == [older], 5.0)
    assert errno_of(lambda: os.stat(sessions / newer / "events.jsonl")) == errno.ENOENT


def test_a_descriptor_kept_from_the_wider_view_reads_nothing_new_once_narrowed(three, mounter):
    """Review 43, finding 6: a file or a folder opened while the store showed every session
    read the other session's new words after the setting went back to its own (only a
    lookup asked again; an open through /proc, a listing or an openat of a kept folder did
    not)."""
    store, a, (first, second), _ = three
    m = mounter(a, "--session", first)
    sessions = m.root / ".sessions"
    store.stores.update(a, metadata={"memfs_sessions_visibility": "workspace"})
    _, newer = _folders(store, first, second)
    wait_until(lambda: newer in os.listdir(sessions), 5.0)
    fd = os.open(sessions / newer / "transcript.md", os.O_RDONLY)
    dfd = os.open(sessions / newer, os.O_RDONLY | os.O_DIRECTORY)
    try:
        store.stores.update(a, metadata={"memfs_sessions_visibility": "session"})
        _say(store, second, "NEW words after narrowing")
        wait_until(lambda: newer not in os.listdir(sessions), 5.0)
        assert errno_of(lambda: Path(f"/proc/self/fd/{fd}").read_text()) == errno.ENOENT
        assert errno_of(lambda: os.fstat(fd)) == errno.ENOENT
        assert os.listdir(dfd) == []  # ENOENT, which glibc's readdir takes as the end
        assert errno_of(lambda: os.open("events.jsonl", os.O_RDONLY, dir_fd=dfd)) == \
            errno.ENOENT
    finally:
        os.close(fd)
        os.close(dfd)


def test_a_mount_of_no_session_shows_every_session_of_its_store(three, mounter):
    store, a, (first, second), other = three
    m = mounter(a)
    assert os.listdir(m.root / ".sessions") == _folders(store, second, first)


def test_a_file_grows_with_its_session_and_its_size_follows(three, mounter):
    store, a, (first, _), _ = three
    m = mounter(a, "--session", first)
    own, = _folders(store, first)
    f = m.root / ".sessions" / own / "events.jsonl"
    assert "later words" not in f.read_text()
    _say(store, first, "later words")
    wait_until(lambda: "later words" in f.read_text(), 5.0)
    text = f.read_bytes()
    assert os.stat(f).st_size >= len(text)


def test_a_huge_session_shows_a_bounded_file_that_says_it_was_cut(three, mounter):
    store, a, (first, _), _ = three
    big = "y" * 60_000
    for _ in range(2 * MAX_FILE_BYTES // len(big)):
        _say(store, first, big)
    m = mounter(a, "--session", first)
    own, = _folders(store, first)
    data = (m.root / ".sessions" / own / "events.jsonl").read_bytes()
    assert len(data) <= MAX_FILE_BYTES
    last = json.loads(data.splitlines()[-1])
    assert last["type"] == "memfs.truncated" and f"memfs session events {first}" in last["note"]
    text = (m.root / ".sessions" / own / "transcript.md").read_bytes()
    assert len(text) <= MAX_FILE_BYTES
    assert text.splitlines()[-1].startswith(b"*(cut here") and first.encode() in text[-300:]


def test_the_setting_takes_only_a_value_it_knows(three):
    store, a, _, _ = three
    with pytest.raises(errors.InvalidMetadata):
        store.stores.update(a, metadata={"memfs_sessions_visibility": "everyone"})
    with pytest.raises(errors.InvalidMetadata):
        store.stores.create("x", metadata={"memfs_sessions_visibility": "all"})


def test_a_snapshot_mount_has_no_sessions_dir(three, mounter):
    store, a, (first, _), _ = three
    store.memories.create(a, "/a.md", "x", actor=None)
    m = mounter(a, "--at", store.versions.list(a).data[0].id, name="snap")
    assert errno_of(lambda: os.listdir(m.root / ".sessions")) == errno.ENOENT


def test_a_remote_mount_shows_the_sessions_the_server_lets_it_see(sdk, mounts, server):
    s = sdk.beta.memory_stores.create(name="remote sessions")
    sess = [sdk.beta.sessions.create(agent="agent_opaque", environment_id="env_opaque",
                                     resources=[{"type": "memory_store",
                                                 "memory_store_id": s.id}])
            for _ in range(2)]
    for x, text in zip(sess, ("remote one", "remote two"), strict=True):
        sdk.beta.sessions.events.send(x.id, events=[{
            "type": "user.message", "content": [{"type": "text", "text": text}]}])
    mine = mounts(s.id, "--session", sess[0].id)
    person = mounts(s.id, name="person")
    assert [n.split("-", 1)[1] for n in os.listdir(person.root / ".sessions")] == [
        sess[1].id, sess[0].id]
    own, = os.listdir(mine.root / ".sessions")
    assert own.endswith(sess[0].id)
    text = subprocess.run(["grep", "-rh", "remote", str(mine.root / ".sessions")],
                          capture_output=True, text=True).stdout
    assert "remote one" in text and "remote two" not in text
    assert errno_of(lambda: (mine.root / ".sessions" / own / "prompt.md").write_text("x")) == (
        errno.EROFS)


def test_sessions_is_reserved_in_the_root(three, mounter):
    store, a, (first, _), _ = three
    m: Mount = mounter(a, "--session", first)
    (m.root / "a.md").write_text("x")
    assert errno_of(lambda: os.mkdir(m.root / ".sessions")) == errno.EEXIST
    into = m.root / ".sessions" / "a.md"
    assert errno_of(lambda: os.rename(m.root / "a.md", into)) == errno.EROFS
    assert errno_of(lambda: os.rename(m.root / ".sessions", m.root / "b")) == errno.EROFS
    assert [x.path for x in store.memories.tree(a)] == ["/a.md"]


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_running_session_reads_its_own_folder_and_its_prompt_file(
        isolation: str, launch: Callable[..., Run], three, tmp_path: Path):
    """In ``memfs run`` (one daemon per store, or the session's one daemon in a namespace):
    the session's own folder, its prompt.md the very file the launcher wrote."""
    needs_root(isolation)
    store, a, (first, _), _ = three
    root = tmp_path / "root"
    r = launch(["--store", a, "--root", str(root), "--isolation", isolation], r"""
        ls "$ROOT/team-notes/.sessions" > "$T/ls"
        cat "$ROOT"/team-notes/.sessions/*/prompt.md > "$T/prompt"
        cp "$MEMFS_SYSTEM_PROMPT_FILE" "$T/written"
        grep -rl "Memory" "$ROOT/team-notes/.sessions" > "$T/grep"
        for f in "$ROOT"/team-notes/.sessions/*/prompt.md; do (echo x > "$f") 2> "$T/erofs" || true
        done
        """, env={"ROOT": str(root)})
    assert r.wait() == 0, r.err
    sid = r.sid
    assert (tmp_path / "ls").read_text().split() == _folders(store, sid)  # not `first`
    assert (tmp_path / "prompt").read_bytes() == (tmp_path / "written").read_bytes()
    assert (tmp_path / "grep").read_text().split() == [
        f"{root}/team-notes/.sessions/{_folders(store, sid)[0]}/prompt.md"]
    assert "Read-only file system" in (tmp_path / "erofs").read_text()
