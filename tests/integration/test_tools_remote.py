"""memfs.tools over a real ``memfs serve``: the memory tool on :class:`memfs.client.Client`
(and :class:`memfs.client.AsyncClient`), driven by the SDK's tool runner against the scripted
Messages API of tests/support/messages.py. What the server stored is read back from its
database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from memfs.client import AsyncClient, Client
from memfs.models import Actor
from memfs.rules import api_key_id
from memfs.store import Store
from memfs.tools import AsyncMemoryTool, MemoryTool
from tests.support.messages import TURNS, ScriptedModel, check_conversation, events, run
from tests.support.server import Server, sdk, start_server, stop_server

KEY = "sk-memfs-tools"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Server, Store]]:
    server = start_server(tmp_path, "--api-key", KEY)
    try:
        with Store(tmp_path / "memfs.db") as db:  # the server's database, to look at
            yield server, db
    finally:
        assert stop_server(server) == 0


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel(TURNS) as m:
        yield m


def test_tool_runner_on_a_server_as_a_session(served: tuple[Server, Store],
                                              model: ScriptedModel) -> None:
    server, db = served
    with Client(server.url, KEY) as admin:
        ms = admin.stores.create(name="remote notes").id
        session = admin.sessions.create([{"type": "memory_store", "memory_store_id": ms}])
    with Client(server.url, KEY, session_id=session.id) as remote:
        client = sdk(model.url, "test-key")
        final = client.beta.messages.tool_runner(
            model="claude-test", max_tokens=1024, stream=True,
            messages=[{"role": "user", "content": "I take my coffee with milk, and no tea."}],
            tools=[MemoryTool(remote, ms)],
        ).until_done()
    check_conversation(model, db, ms, final, session.id)


def test_without_a_session_the_api_key_writes_and_the_store_keeps_the_events(
    served: tuple[Server, Store]
) -> None:
    server, db = served
    with Client(server.url, KEY) as remote:
        ms = remote.stores.create(name="plain").id
        tool = MemoryTool(remote, "plain")  # by name
        assert run(tool, command="create", path="/memories/a.md", file_text="a\nb\n") == (
            False, "File created successfully at: /memories/a.md")
        assert run(tool, command="str_replace", path="/memories/a.md", old_str="b",
                   new_str="B")[0] is False
        assert run(tool, command="create", path="/memories/a.md", file_text="x") == (
            True, "File /memories/a.md already exists")
        err, text = run(tool, command="create", path="/memories/big.md",
                        file_text="x" * 102_401)
        assert err and "the limit is 102400 bytes" in text
        assert run(tool, command="rename", old_path="/memories/a.md",
                   new_path="/memories/d/a.md")[0] is False
        assert run(tool, command="delete", path="/memories/d")[0] is False
    versions = db.versions.list(ms, limit=100).data
    assert sorted(v.operation for v in versions) == ["created", "deleted", "modified",
                                                     "modified"]
    assert {v.created_by for v in versions} == {Actor.api(api_key_id(KEY))}
    evs = events(db, ms)
    assert [e["input"]["command"] for e in evs[0::2]] == [
        "create", "str_replace", "create", "create", "rename", "delete"]
    assert [e["is_error"] for e in evs[1::2]] == [False, False, True, True, False, False]


def test_a_concurrent_edit_through_the_api_is_not_overwritten(
    served: tuple[Server, Store]
) -> None:
    server, db = served

    class Interleaved(Client):
        """Another writer changes the memory right before each of the tool's updates."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            update = self.memories.update

            def interleaved(store_id: str, memory_id: str, **kw: Any) -> Any:
                m = db.memories.get(store_id, memory_id)
                db.memories.update(store_id, memory_id, content=m.content + "other\n",
                                   actor=None)
                return update(store_id, memory_id, **kw)

            self.memories.update = interleaved  # type: ignore[method-assign]

    with Interleaved(server.url, KEY) as remote:
        ms = remote.stores.create(name="race").id
        remote.memories.create(ms, "/c.md", "alpha\n")
        tool = MemoryTool(remote, ms)
        err, text = run(tool, command="insert", path="/memories/c.md", insert_line=0,
                        insert_text="first")
        assert err and "changed by someone else" in text
        err, text = run(tool, command="str_replace", path="/memories/c.md", old_str="alpha",
                        new_str="beta")
        assert err and "kept changing" in text
    assert db.memories.get_by_path(ms, "/c.md").content == "alpha\n" + "other\n" * 6


async def test_the_async_tool_on_an_async_client(served: tuple[Server, Store],
                                                 model: ScriptedModel) -> None:
    server, db = served
    with Client(server.url, KEY) as admin:
        ms = admin.stores.create(name="async notes").id
        session = admin.sessions.create([{"type": "memory_store", "memory_store_id": ms}])
    remote = AsyncClient(server.url, KEY, session_id=session.id)
    try:
        async with anthropic.AsyncAnthropic(api_key="test-key", base_url=model.url,
                                            max_retries=0) as client:
            final = await client.beta.messages.tool_runner(
                model="claude-test", max_tokens=1024,
                messages=[{"role": "user", "content": "I take my coffee with milk, and no tea."}],
                tools=[AsyncMemoryTool(remote, ms)],
            ).until_done()
    finally:
        await remote.aclose()
    check_conversation(model, db, ms, final, session.id)
