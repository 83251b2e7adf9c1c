"""memfs.tools: the SDK's client-side memory tool (memory_20250818) on a memfs store.

The model must see what the SDK's own filesystem tool shows, so most tests run the same
commands on both and compare the texts. The end-to-end tests drive the real SDK's
``run_tools`` against a scripted Messages API server (tests/support/messages.py: a local HTTP
server replaying recorded tool-use turns), streaming and not, and check what the SDK sent back
and what the store holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.lib.tools import ToolError
from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool

from memfs import errors
from memfs.models import Actor
from memfs.store import Limits, Store
from memfs.tools import AsyncMemoryTool, MemoryTool, format_file_size
from tests.support.messages import TURNS, ScriptedModel, check_conversation, events, run
from tests.support.server import sdk

# --------------------------------------------------------------------------------------------
# helpers


def normalize_dir_sizes(text: str) -> str:
    """A local filesystem's directory sizes depend on the filesystem (ext4: 4K, tmpfs:
    anything); memfs shows 4K like ext4 and a mount."""
    return re.sub(r"^[0-9.]+[BKMG]\t(.*/)$|^[0-9.]+[BKMG]\t(/memories[^\n]*)$",
                  lambda m: "DIR\t" + (m.group(1) or m.group(2)), text, flags=re.M)


@pytest.fixture
def ms(store: Store) -> str:
    return store.stores.create(name="notes").id


@pytest.fixture
def tool(store: Store, ms: str) -> MemoryTool:
    return MemoryTool(store, ms)


# --------------------------------------------------------------------------------------------
# the same texts as the SDK's own tool

SCRIPT: list[dict[str, Any]] = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/notes.md", "file_text": "one\ntwo\nthree\n"},
    {"command": "create", "path": "/memories/notes.md", "file_text": "again"},
    {"command": "create", "path": "/memories/a/b/c/deep.md", "file_text": "x" * 1536},
    {"command": "create", "path": "/memories/a/top.md", "file_text": ""},
    {"command": "create", "path": "/memories/.hidden/secret.md", "file_text": "s"},
    {"command": "create", "path": "/memories/big.md", "file_text": "y" * 5000},
    {"command": "view", "path": "/memories"},
    {"command": "view", "path": "/memories/a"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "view", "path": "/memories/notes.md", "view_range": [2, 3]},
    {"command": "view", "path": "/memories/notes.md", "view_range": [2, -1]},
    {"command": "view", "path": "/memories/missing.md"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "two", "new_str": "2"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "nope", "new_str": "x"},
    {"command": "create", "path": "/memories/dup.md", "file_text": "ab\nab\nc\nab"},
    {"command": "str_replace", "path": "/memories/dup.md", "old_str": "ab", "new_str": "x"},
    {"command": "str_replace", "path": "/memories/missing.md", "old_str": "a", "new_str": "b"},
    {"command": "str_replace", "path": "/memories/a", "old_str": "a", "new_str": "b"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "zero\n"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 4, "insert_text": "end"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 9, "insert_text": "x"},
    {"command": "insert", "path": "/memories/a", "insert_line": 0, "insert_text": "x"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/n/notes.md"},
    {"command": "rename", "old_path": "/memories/a", "new_path": "/memories/z"},
    {"command": "rename", "old_path": "/memories/big.md", "new_path": "/memories/dup.md"},
    {"command": "rename", "old_path": "/memories/gone.md", "new_path": "/memories/x.md"},
    {"command": "rename", "old_path": "/memories", "new_path": "/memories/x"},
    {"command": "view", "path": "/memories"},
    {"command": "delete", "path": "/memories/z"},
    {"command": "delete", "path": "/memories/dup.md"},
    {"command": "delete", "path": "/memories/dup.md"},
    {"command": "delete", "path": "/memories"},
    {"command": "view", "path": "/memories/"},
    {"command": "view", "path": "/etc/passwd"},
    {"command": "view", "path": "/memories/../etc/passwd"},
]


def test_every_text_is_the_sdks_own(tool: MemoryTool, tmp_path: Path) -> None:
    reference = BetaLocalFilesystemMemoryTool(str(tmp_path / "fs"))
    for step in SCRIPT:
        ours = run(tool, **step)
        theirs = run(reference, **step)
        assert ours[0] == theirs[0], (step, ours, theirs)
        assert normalize_dir_sizes(ours[1]) == normalize_dir_sizes(theirs[1]), step


def test_a_listing_shows_sizes_like_a_mount(tool: MemoryTool) -> None:
    run(tool, command="create", path="/memories/a/b.md", file_text="x" * 2048)
    run(tool, command="create", path="/memories/c.md", file_text="héllo")
    assert run(tool, command="view", path="/memories") == (False, (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden "
        "items:\n4K\t/memories\n4K\t/memories/a/\n2K\t/memories/a/b.md\n"
        "6B\t/memories/c.md"))
    assert [format_file_size(n) for n in (0, 1, 1024, 1536, 1048576)] == [
        "0B", "1B", "1K", "1.5K", "1M"]


# --------------------------------------------------------------------------------------------
# versions, actors and events


def test_every_change_is_a_version_of_the_actor_and_an_event_pair(
    store: Store, ms: str
) -> None:
    actor = Actor.user("user_dreamer")
    tool = MemoryTool(store, "notes", actor=actor)  # by name
    run(tool, command="create", path="/memories/p.md", file_text="a\nb\n")
    run(tool, command="str_replace", path="/memories/p.md", old_str="a", new_str="A")
    run(tool, command="insert", path="/memories/p.md", insert_line=2, insert_text="c")
    run(tool, command="rename", old_path="/memories/p.md", new_path="/memories/q.md")
    run(tool, command="view", path="/memories/q.md")
    run(tool, command="delete", path="/memories/q.md")
    vs = store.versions.list(ms, limit=100).data
    assert sorted(v.operation for v in vs) == ["created", "deleted", "modified", "modified",
                                               "modified"]
    assert {v.created_by for v in vs} == {actor}
    evs = events(store, ms)
    assert [e["type"] for e in evs] == ["agent.tool_use", "agent.tool_result"] * 6
    uses = evs[0::2]
    results = evs[1::2]
    assert [u["input"]["command"] for u in uses] == [
        "create", "str_replace", "insert", "rename", "view", "delete"]
    assert [u["input"]["operation"] for u in uses] == [
        "create", "write", "write", "rename", "read", "delete"]
    assert uses[3]["input"]["new_path"] == "/memories/q.md"
    assert all(u["name"] == "memory" for u in uses)
    assert all(r["tool_use_id"] == u["id"] and not r["is_error"]
               for u, r in zip(uses, results, strict=True))
    # Each write's result names the version it made: the join from a version to its call.
    written = {r["memory_version_id"] for r in results if "memory_version_id" in r}
    assert written == {v.id for v in vs if v.operation != "deleted"}
    assert results[4]["content"][0]["text"].startswith("Here's the content of /memories/q.md")


def test_deleting_a_directory_is_one_transaction_with_its_events(store: Store, ms: str) -> None:
    # issue 42: a directory goes at once (memories.delete_prefix), not memory by memory, and
    # its event pair is recorded in the same transaction, attributed to the session.
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}])
    for p in ("/d/a.md", "/d/b.md", "/d/e/c.md", "/d.md"):
        store.memories.create(ms, p, "x", actor=None)
    tool = MemoryTool(store, ms, session_id=session.id)
    assert run(tool, command="delete", path="/memories/d") == (
        False, "Successfully deleted /memories/d")
    assert [m.path for m in store.memories.tree(ms)] == ["/d.md"]
    deleted = store.versions.list(ms, operation="deleted").data
    assert len(deleted) == 3 and {v.created_by for v in deleted} == {Actor.session(session.id)}
    assert len({v.created_at for v in deleted}) == 1  # one transaction's time
    evs = [e.body for e in store.events.list(session.id, limit=100).data]
    assert [(e["type"], e["input"]["command"] if "input" in e else e["is_error"])
            for e in evs] == [("agent.tool_use", "delete"), ("agent.tool_result", False)]
    assert evs[0]["input"]["operation"] == "delete"
    assert evs[0]["input"]["file_path"] == "/memories/d"
    # a directory that is not there any more is still the SDK's answer
    assert run(tool, command="delete", path="/memories/d") == (
        True, "The path /memories/d does not exist")


def test_a_session_owns_the_versions_and_events(store: Store, ms: str) -> None:
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}])
    tool = MemoryTool(store, ms, session_id=session.id)
    run(tool, command="create", path="/memories/s.md", file_text="hi")
    assert run(tool, command="view", path="/memories/nope.md")[0]
    v = store.versions.list(ms).data[0]
    assert v.created_by == Actor.session(session.id)
    evs = store.events.list(session.id, limit=100).data
    assert [e.type for e in evs] == ["agent.tool_use", "agent.tool_result"] * 2
    assert evs[3].body["is_error"] is True
    assert "does not exist" in evs[3].body["content"][0]["text"]


def test_a_read_only_session_cannot_write(store: Store, ms: str) -> None:
    session = store.sessions.create(
        [{"type": "memory_store", "memory_store_id": ms, "access": "read_only"}])
    tool = MemoryTool(store, ms, session_id=session.id)
    err, text = run(tool, command="create", path="/memories/s.md", file_text="hi")
    assert err and "read-only" in text
    assert store.memories.tree(ms) == []
    assert run(tool, command="view", path="/memories") [0] is False


# --------------------------------------------------------------------------------------------
# rules and errors


@pytest.mark.parametrize(("step", "message"), [
    ({"command": "view", "path": "/memories/../secret"}, "would escape /memories directory"),
    ({"command": "create", "path": "/memories/a/../../x", "file_text": ""},
     "would escape /memories directory"),
    ({"command": "create", "path": "/memories/a/../x", "file_text": ""}, "contains '..'"),
    ({"command": "create", "path": "/tmp/x", "file_text": ""},
     "Path must start with /memories, got: /tmp/x"),
    ({"command": "create", "path": "/memoriesx", "file_text": ""},
     "Path must start with /memories"),
    ({"command": "rename", "old_path": "/memories/a.md", "new_path": "/elsewhere/a.md"},
     "Path must start with /memories"),
    ({"command": "create", "path": "/memories/x.md", "file_text": "x" * 102_401},
     "Creating /memories/x.md failed: content is 102401 bytes; the limit is 102400 bytes"),
    ({"command": "create", "path": "/memories/" + "d/" * 20 + "x.md", "file_text": ""},
     "segments; the limit is 20"),
    ({"command": "create", "path": "/memories/bad\x07.md", "file_text": ""},
     "control or format character"),
    ({"command": "create", "path": "/memories/a.md/b.md", "file_text": ""},
     "Cannot write /memories/a.md/b.md: /memories/a.md is a file, not a directory"),
    ({"command": "create", "path": "/memories/x.md"}, "Parameter `file_text` is required"),
    ({"command": "view"}, "Parameter `path` is required for command: view"),
    ({"command": "insert", "path": "/memories/a.md", "insert_line": "one", "insert_text": "x"},
     "Invalid `insert_line` parameter"),
    ({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/d/e"},
     "Cannot move /memories/d into itself"),
    ({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/a.md/e"},
     "/memories/a.md is a file, not a directory"),
    ({"command": "frobnicate", "path": "/memories"}, "Unknown command: frobnicate"),
])
def test_refusals_are_clear_strings(tool: MemoryTool, store: Store, ms: str,
                                    step: dict[str, Any], message: str) -> None:
    run(tool, command="create", path="/memories/a.md", file_text="a\n")
    run(tool, command="create", path="/memories/d/x.md", file_text="x")
    before = [(m.path, m.content_sha256) for m in store.memories.tree(ms)]
    err, text = run(tool, **step)
    assert err and message in text, text
    assert "Traceback" not in text
    assert [(m.path, m.content_sha256) for m in store.memories.tree(ms)] == before


def test_the_store_limit_and_an_archived_store(db_path: Path) -> None:
    with Store(db_path, limits=Limits(max_memories=1)) as store:
        ms = store.stores.create(name="s").id
        tool = MemoryTool(store, ms)
        assert not run(tool, command="create", path="/memories/a.md", file_text="a")[0]
        err, text = run(tool, command="create", path="/memories/b.md", file_text="b")
        assert err and "already holds 1 memories; the limit is 1" in text
        store.stores.archive(ms)
        err, text = run(tool, command="str_replace", path="/memories/a.md", old_str="a",
                        new_str="b")
        assert err and "archived" in text
        assert store.memories.get_by_path(ms, "/a.md").content == "a"


def test_an_unknown_store_is_a_clear_error(store: Store) -> None:
    err, text = run(MemoryTool(store, "no-such-store"), command="view", path="/memories")
    assert err and text.startswith("The memory store is not available")


# --------------------------------------------------------------------------------------------
# concurrency: a change made meanwhile is never overwritten


class InterleavedMemories:
    """A store's memories whose next update is preceded by another writer's change."""

    def __init__(self, store: Store, times: int = 1) -> None:
        self.store, self.times = store, times

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store.memories, name)

    def update(self, store_id: str, memory_id: str, **kw: Any) -> Any:
        if self.times:
            self.times -= 1
            m = self.store.memories.get(store_id, memory_id)
            self.store.memories.update(store_id, memory_id, content=m.content + "other\n",
                                       actor=Actor.user("user_other"))
        return self.store.memories.update(store_id, memory_id, **kw)


class Interleaved:
    """A store whose memories are ``memories`` (default :class:`InterleavedMemories`)."""

    def __init__(self, store: Store, ms: str, times: int = 1,
                 memories: type[InterleavedMemories] = InterleavedMemories) -> None:
        self.store, self.ms = store, ms
        self.memories = memories(store, times)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_str_replace_reads_again_after_a_concurrent_change(store: Store, ms: str) -> None:
    store.memories.create(ms, "/c.md", "alpha\n", actor=None)
    tool = MemoryTool(Interleaved(store, ms), ms)
    err, text = run(tool, command="str_replace", path="/memories/c.md", old_str="alpha",
                    new_str="beta")
    assert not err, text
    assert store.memories.get_by_path(ms, "/c.md").content == "beta\nother\n"


def test_str_replace_gives_up_on_a_file_that_keeps_changing(store: Store, ms: str) -> None:
    store.memories.create(ms, "/c.md", "alpha\n", actor=None)
    tool = MemoryTool(Interleaved(store, ms, times=99), ms)
    err, text = run(tool, command="str_replace", path="/memories/c.md", old_str="alpha",
                    new_str="beta")
    assert err and "kept changing" in text
    assert "beta" not in (store.memories.get_by_path(ms, "/c.md").content or "")


def test_insert_refuses_after_a_concurrent_change(store: Store, ms: str) -> None:
    store.memories.create(ms, "/c.md", "alpha\n", actor=None)
    tool = MemoryTool(Interleaved(store, ms), ms)
    err, text = run(tool, command="insert", path="/memories/c.md", insert_line=1,
                    insert_text="new")
    assert err and "changed by someone else" in text
    assert store.memories.get_by_path(ms, "/c.md").content == "alpha\nother\n"


def test_create_never_overwrites_a_memory_created_meanwhile(store: Store, ms: str) -> None:
    class Racing(InterleavedMemories):
        def tree(self, store_id: str) -> Any:
            return []  # what the tool saw before the other writer's create

    store.memories.create(ms, "/r.md", "theirs", actor=None)
    err, text = run(MemoryTool(Interleaved(store, ms, memories=Racing), ms), command="create",
                    path="/memories/r.md",
                    file_text="mine")
    assert err and text == "File /memories/r.md already exists"
    assert store.memories.get_by_path(ms, "/r.md").content == "theirs"


def test_a_storage_failure_is_a_tool_error(store: Store, ms: str) -> None:
    class Broken(InterleavedMemories):
        def tree(self, store_id: str) -> Any:
            raise errors.StorageError("disk I/O error")

    err, text = run(MemoryTool(Interleaved(store, ms, memories=Broken), ms), command="view",
                    path="/memories")
    assert err and "unavailable (disk I/O error)" in text


# --------------------------------------------------------------------------------------------
# the async tool


async def test_the_async_tool_on_a_sync_store(store: Store, ms: str) -> None:
    tool = AsyncMemoryTool(store, ms)
    assert await tool.call({"command": "create", "path": "/memories/a.md", "file_text": "x\n"})
    text = await tool.call({"command": "view", "path": "/memories/a.md"})
    assert text == "Here's the content of /memories/a.md with line numbers:\n     1\tx\n     2\t"
    with pytest.raises(ToolError, match="already exists"):
        await tool.call({"command": "create", "path": "/memories/a.md", "file_text": "y"})
    assert len(events(store, ms)) == 6


# --------------------------------------------------------------------------------------------
# run_tools end to end, against a scripted Messages API


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel(TURNS) as m:
        yield m


@pytest.mark.parametrize(("streaming", "eagerly"), [(False, False), (True, False), (True, True)])
def test_run_tools_keeps_versioned_memory(store: Store, ms: str, model: ScriptedModel,
                                          streaming: bool, eagerly: bool) -> None:
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}])
    client = sdk(model.url, "test-key")
    runner = client.beta.messages.tool_runner(
        model="claude-test", max_tokens=1024, stream=streaming, run_tools_eagerly=eagerly,
        messages=[{"role": "user", "content": "I take my coffee with milk, and no tea."}],
        tools=[MemoryTool(store, ms, session_id=session.id)],
    )
    if streaming:  # the application reads each streamed reply
        for stream in runner:
            for _event in stream:
                pass
    final = runner.until_done()
    assert all(r.get("stream", False) is streaming for r in model.requests)
    check_conversation(model, store, ms, final, session.id)


async def test_async_run_tools_keeps_versioned_memory(store: Store, ms: str,
                                                      model: ScriptedModel) -> None:
    async with anthropic.AsyncAnthropic(api_key="test-key", base_url=model.url,
                                        max_retries=0) as client:
        runner = client.beta.messages.tool_runner(
            model="claude-test", max_tokens=1024,
            messages=[{"role": "user", "content": "I take my coffee with milk, and no tea."}],
            tools=[AsyncMemoryTool(store, ms)],
        )
        final = await runner.until_done()
    check_conversation(model, store, ms, final)


# --------------------------------------------------------------------------------------------
# a read-only tool (a store a model may consult), and clearing a store


def test_a_read_only_tool_only_views(store: Store, ms: str) -> None:
    store.memories.create(ms, "/a.md", "a\n", actor=None)
    tool = MemoryTool(store, ms, read_only=True)
    assert run(tool, command="view", path="/memories/a.md")[0] is False
    for step in ({"command": "create", "path": "/memories/b.md", "file_text": "b"},
                 {"command": "str_replace", "path": "/memories/a.md", "old_str": "a",
                  "new_str": "b"},
                 {"command": "insert", "path": "/memories/a.md", "insert_line": 0,
                  "insert_text": "x"},
                 {"command": "delete", "path": "/memories/a.md"},
                 {"command": "rename", "old_path": "/memories/a.md",
                  "new_path": "/memories/c.md"}):
        err, text = run(tool, **step)
        assert err and text == f"The {step['command']} command is not allowed: /memories is " \
                               "read-only here"
    with pytest.raises(ToolError):
        tool.clear_all_memory()
    assert [(m.path, m.content_sha256) for m in store.memories.tree(ms)] == [
        ("/a.md", store.memories.get_by_path(ms, "/a.md").content_sha256)]
    assert len(store.versions.list(ms).data) == 1
    assert [e["is_error"] for e in events(store, ms)[1::2]] == [False] + [True] * 5


async def test_clear_all_memory_deletes_every_memory_as_versions(store: Store, ms: str) -> None:
    for p in ("/a.md", "/d/b.md", "/d/e/c.md"):
        store.memories.create(ms, p, "x", actor=None)
    assert MemoryTool(store, ms, actor=Actor.user("user_x")).clear_all_memory() == (
        "All memory cleared")
    assert store.memories.tree(ms) == []
    deleted = store.versions.list(ms, operation="deleted").data
    assert len(deleted) == 3 and {v.created_by for v in deleted} == {Actor.user("user_x")}
    store.memories.create(ms, "/z.md", "z", actor=None)
    assert await AsyncMemoryTool(store, ms).clear_all_memory() == "All memory cleared"
    assert store.memories.tree(ms) == []
