"""A store's pinned memories (SPEC §9, issue 43) are one block, from one builder
(memfs.launcher.pinned), wherever they reach a model: ``memory_pinned`` over MCP, the MCP
server's instructions after the store's note, :meth:`memfs.tools.MemoryTool.pinned`, and a
session's prompt (the block of a session started now)."""

from __future__ import annotations

from memfs.launcher.pinned import FRAMING, version_reader
from memfs.launcher.prompt import render_memory_prompt
from memfs.mcp import Reach
from memfs.models import Actor
from memfs.store import Store
from memfs.tools import AsyncMemoryTool, MemoryTool
from tests.support.mcp import call, connected, ok, text_of

U = Actor.user("u")


async def test_memory_pinned_the_instructions_the_tool_and_the_prompt_agree(
        store: Store) -> None:
    ms = store.stores.create(name="profile").id
    store.memories.create(ms, "/pinned/profile.md", "Name: Ada\n", actor=U)
    store.memories.create(ms, "/big.md", "---\npinned: true\n---\n" + "b" * 5000, actor=U)
    store.memories.create(ms, "/other.md", "not pinned", actor=U)
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}])
    prompt = render_memory_prompt(session, version_reader(store))
    block = MemoryTool(store, ms).pinned()
    assert block.startswith("### Pinned memories\n\n" + FRAMING)
    assert "```\nName: Ada\n```" in block and "- `/big.md` (5,021 characters): over" in block
    assert "not pinned" not in block
    assert prompt.endswith("\n" + block)  # after the store's note, the last one
    assert await AsyncMemoryTool(store, ms).pinned() == block
    async with connected(Reach(store, session_id=session.id)) as client:
        instructions = (await client.initialize()).instructions
        result = await call(client, "memory_pinned", store="profile")
        smaller = await call(client, "memory_pinned", store=ms, budget=5)
    assert instructions is not None and instructions.endswith("\n" + block)
    assert text_of(result) == block
    assert [e["path"] for e in ok(result)["pinned"]] == ["/big.md", "/pinned/profile.md"]
    assert "- `/pinned/profile.md` (10 characters): over this store's budget of 5" in \
        text_of(smaller)
    # Nothing pinned: nothing added, and the tool says so.
    empty = store.stores.create(name="empty").id
    assert MemoryTool(store, empty).pinned() == ""
    async with connected(Reach(store)) as client:
        assert text_of(await call(client, "memory_pinned", store=empty)) == \
            "No memory of this store is pinned."


async def test_a_sessions_instructions_hold_what_it_recorded_and_a_keys_none(
        store: Store) -> None:
    # The instructions are the session's memory section: its pinned memories as it recorded
    # them when it started (what its prompt file holds), not the store's now; a reach of no
    # session (a key over every store it sees) names none, so that an initialize does not read
    # every store's tree (memory_pinned gives a store's).
    ms = store.stores.create(name="profile").id
    m = store.memories.create(ms, "/pinned/profile.md", "Name: Ada\n", actor=U)
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}])
    store.memories.update(ms, m.id, content="Name: Grace\n", actor=U)
    prompt = render_memory_prompt(store.sessions.get(session.id), version_reader(store))
    async with connected(Reach(store, session_id=session.id)) as client:
        instructions = (await client.initialize()).instructions
    assert instructions is not None and "Name: Ada" in instructions
    assert "Name: Grace" not in instructions and "Name: Ada" in prompt
    async with connected(Reach(store)) as client:
        instructions = (await client.initialize()).instructions
    assert instructions is not None and "Pinned memories" not in instructions
    assert "Name: Grace" not in instructions
