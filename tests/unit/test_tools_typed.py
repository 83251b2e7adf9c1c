"""memfs.tools: describe and typed memories (issue 41 item 5, SPEC §8).

The SDK's memory tool has six commands and no room for a seventh: the model sees what is
stored by viewing ``/memories/.describe`` (a file computed at each view, as a mount's
``.describe``), and an application calls :meth:`MemoryTool.describe` (the store's describe
object) and :meth:`MemoryTool.add` (a memory under its type's directory, with front matter).
"""

from __future__ import annotations

import json

import pytest
from anthropic.lib.tools import ToolError

from memfs.models import Actor
from memfs.store import Store
from memfs.tools import AsyncMemoryTool, MemoryTool
from tests.support.messages import events, run


@pytest.fixture
def ms(store: Store) -> str:
    return store.stores.create(name="notes").id


@pytest.fixture
def tool(store: Store, ms: str) -> MemoryTool:
    return MemoryTool(store, ms)


def write(store: Store, ms: str, path: str, content: str) -> None:
    store.memories.create(ms, path, content, actor=Actor.user("u"))


# -- add ------------------------------------------------------------------------------------


def test_add_writes_a_typed_memory_under_its_directory(tool: MemoryTool, store: Store,
                                                       ms: str) -> None:
    path = tool.add("Deploys go out on Tuesdays.", type="decision", name="deploy-day",
                    tags=("deploy", "release plan"), importance="high",
                    description="When we deploy")
    assert path == "/memories/decisions/deploy-day.md"
    memory = store.memories.get_by_path(ms, "/decisions/deploy-day.md")
    assert memory.content == (
        "---\n"
        "type: decision\n"
        "importance: high\n"
        "tags: [deploy, release plan]\n"
        "description: When we deploy\n"
        "---\n"
        "Deploys go out on Tuesdays.\n")
    meta = memory.memfs_meta
    assert meta is not None and meta.warnings == ()
    assert (meta.type, meta.importance, meta.tags, meta.description) == (
        "decision", 0.8, ("deploy", "release plan"), "When we deploy")


def test_add_names_a_memory_from_its_text_and_never_overwrites(tool: MemoryTool,
                                                               store: Store, ms: str) -> None:
    first = tool.add("Today: fix the flaky login test!\nthen lunch", type="context")
    assert first == "/memories/context/today-fix-the-flaky-login-test.md"
    again = tool.add("Today: fix the flaky login test!", type="context")
    assert again == "/memories/context/today-fix-the-flaky-login-test-2.md"
    meta = store.memories.get_by_path(ms, "/context/today-fix-the-flaky-login-test.md").memfs_meta
    assert meta is not None and meta.type == "context" and meta.expires_at is not None
    with pytest.raises(ToolError, match="already exists"):
        tool.add("other", type="context", name="today-fix-the-flaky-login-test")


@pytest.mark.parametrize("kwargs,message", [
    ({"type": "mood"}, "unknown type 'mood' (this store's types: preference, context, "
                       "knowledge, decision)"),
    ({"type": "context", "name": "../x"}, "contains '..'"),
])
def test_add_refuses_what_it_cannot_write(tool: MemoryTool, store: Store, ms: str,
                                          kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ToolError) as e:
        tool.add("text", **kwargs)  # type: ignore[arg-type]
    assert message in str(e.value.content)
    assert store.memories.tree(ms) == []


def test_add_writes_values_as_the_store_reads_them(tool: MemoryTool, store: Store,
                                                    ms: str) -> None:
    """Quoted where YAML would read another type; a value the store cannot use is its to
    report (a warning, never a failed write); a description is one line."""
    path = tool.add("x", type="knowledge", name="k", tags=("yes", "2024", "a, b"),
                    importance="huge", description="two\nlines ")
    memory = store.memories.get_by_path(ms, path.removeprefix("/memories"))
    assert 'tags: ["yes", "2024", "a, b"]\n' in (memory.content or "")
    meta = memory.memfs_meta
    assert meta is not None and meta.tags == ("yes", "2024", "a, b")
    assert meta.description == "two lines" and meta.importance == 0.5  # the type's own
    assert [w for w in meta.warnings if "huge" in w]
    with pytest.raises(ToolError, match="front matter of its own"):
        tool.add("---\ntype: decision\n---\nx", type="knowledge")


def test_add_follows_the_store_s_own_types(store: Store, ms: str) -> None:
    types = {"lesson": {"directory": "/lessons/", "importance": "medium"}}
    store.stores.update(ms, metadata={"memfs_types": json.dumps(types)})
    tool = MemoryTool(store, ms)
    path = tool.add("Always pin versions.", type="lesson")
    assert path == "/memories/lessons/always-pin-versions.md"
    store.stores.update(ms, metadata={"memfs_types": "off"})
    with pytest.raises(ToolError, match="this store has no types"):
        tool.add("x", type="lesson")


def test_add_is_refused_on_a_read_only_tool(store: Store, ms: str) -> None:
    with pytest.raises(ToolError, match="read-only"):
        MemoryTool(store, ms, read_only=True).add("x", type="context")
    assert store.memories.tree(ms) == []


def test_a_session_owns_what_add_writes(store: Store, ms: str) -> None:
    sess = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}],
                                 status="running")
    MemoryTool(store, ms, session_id=sess.id).add("x", type="knowledge", name="k")
    [version] = store.versions.list(ms).data
    assert version.created_by == Actor.session(sess.id)


# -- describe -------------------------------------------------------------------------------


def test_describe_is_the_store_s_description(tool: MemoryTool, store: Store, ms: str) -> None:
    tool.add("black coffee", type="preference", tags=("food",))
    write(store, ms, "/notes.md", "untyped")
    d = tool.describe()
    assert d["type"] == "memfs_store_description" and d["memories"] == 2
    assert d["by_type"] == store.typed.describe(ms)["by_type"] == {"(none)": 1,
                                                                    "preference": 1}


def test_the_model_views_the_description(tool: MemoryTool, store: Store, ms: str) -> None:
    tool.add("Fix the login test", type="context", name="today", tags=("tests",))
    tool.add("We use PostgreSQL 16", type="decision", name="db", tags=("tests", "db"))
    write(store, ms, "/bad.md", "---\nimportance: huge\n---\nx\n")
    before = len(events(store, ms))
    error, text = run(tool, command="view", path="/memories/.describe")
    assert not error
    assert text.startswith("Memory store notes: 3 memories")
    assert "By type: (none) 1, context 1, decision 1" in text
    assert "Tags: tests 2, db 1" in text
    assert "Expiring within 7 days: 1\n  /memories/context/today.md (context) at " in text
    assert "Oldest change: /memories/" in text and "Newest change: /memories/" in text
    assert "Warnings: 1\n  /memories/bad.md: " in text
    assert "Types (default): preference in /memories/preferences/" in text
    # It is a read like any other: one event pair.
    pair = events(store, ms)[before:]
    assert [e["type"] for e in pair] == ["agent.tool_use", "agent.tool_result"]
    assert pair[0]["input"]["file_path"] == "/memories/.describe"
    # Hidden from listings, as the SDK's tool hides every dot name; never written.
    assert ".describe" not in run(tool, command="view", path="/memories")[1]
    for step in ({"command": "create", "path": "/memories/.describe", "file_text": "x"},
                 {"command": "str_replace", "path": "/memories/.describe", "old_str": "a",
                  "new_str": "b"},
                 {"command": "delete", "path": "/memories/.describe"},
                 {"command": "rename", "old_path": "/memories/db.md",
                  "new_path": "/memories/.describe"}):
        error, text = run(tool, **step)
        assert error and "computed by memfs" in text, (step, text)
    assert store.memories.tree(ms).__len__() == 3


async def test_the_async_tool_describes_and_adds(store: Store, ms: str) -> None:
    tool = AsyncMemoryTool(store, ms)
    assert await tool.add("tea", type="preference", name="drink") == (
        "/memories/preferences/drink.md")
    assert (await tool.describe())["by_type"] == {"preference": 1}
    text = await tool.call({"command": "view", "path": "/memories/.describe"})
    assert "By type: preference 1" in text
