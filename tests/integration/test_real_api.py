"""Opt-in: one short dream and one memory-tool conversation against the real Messages API.

Runs only with ``MEMFS_REAL_API_TESTS=1`` and ``ANTHROPIC_API_KEY`` set (``ANTHROPIC_BASE_URL``
and ``MEMFS_REAL_API_MODEL`` optional): it costs tokens and needs the network, so CI never
runs it; the scripted Messages API (tests/unit/dreams/test_dreams.py, test_tools.py) is what CI
checks.
"""

from __future__ import annotations

import os

import anthropic
import pytest

from memfs.dreams import runner
from memfs.store import Store
from memfs.tools import MemoryTool

pytestmark = pytest.mark.skipif(
    os.environ.get("MEMFS_REAL_API_TESTS") != "1" or not os.environ.get("ANTHROPIC_API_KEY"),
    reason="opt-in: MEMFS_REAL_API_TESTS=1 and ANTHROPIC_API_KEY",
)
MODEL = os.environ.get("MEMFS_REAL_API_MODEL", "claude-haiku-4-5")


def test_a_real_model_keeps_versioned_memory(store: Store) -> None:
    ms = store.stores.create("real").id
    with anthropic.Anthropic() as client:
        client.beta.messages.tool_runner(
            model=MODEL, max_tokens=1024, tools=[MemoryTool(store, ms)],
            messages=[{"role": "user", "content": "Remember in your memory directory that I "
                       "take my coffee black. Save it as a file, then reply 'done'."}],
        ).until_done()
    texts = [store.memories.get(ms, m.id).content or "" for m in store.memories.tree(ms)]
    assert any("black" in t.lower() for t in texts), texts
    assert store.versions.list(ms).data


def test_a_real_dream_consolidates_without_touching_the_input(store: Store) -> None:
    ms = store.stores.create("fragments").id
    for i, text in enumerate(["coffee: black", "Coffee is taken black.", "likes tea? no",
                              "prefers no tea"]):
        store.memories.create(ms, f"/notes/{i}.md", text + "\n", actor=None)
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": ms}])
    store.events.add(session.id, [{"type": "user.message", "content": [
        {"type": "text", "text": "Actually I now take my coffee with milk."}]}])
    before = [(m.path, m.memory_version_id) for m in store.memories.tree(ms)]
    d = store.dreams.create([{"type": "memory_store", "memory_store_id": ms},
                            {"type": "sessions", "session_ids": [session.id]}], MODEL,
                           instructions="Merge these into as few files as make sense.")
    done = runner.DreamRun(store, d.id).run()
    assert done.status == "completed", done.error
    assert done.usage["input_tokens"] > 0 and done.usage["output_tokens"] > 0
    assert [(m.path, m.memory_version_id) for m in store.memories.tree(ms)] == before
    out = [store.memories.get(done.output_store_id, m.id).content or ""
           for m in store.memories.tree(done.output_store_id)]
    assert out and any("milk" in t.lower() for t in out), out
