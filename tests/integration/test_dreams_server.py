"""Dreams end to end on a real `memfs serve` (SQLite and PostgreSQL): the SDK's
``client.beta.dreams`` and ``memfs --url … dream`` against it, the model a scripted Messages
API (tests/support/messages.py), and a server killed or stopped while a dream runs."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from tests.support import wait_until
from tests.support.messages import DREAM_TURNS, ScriptedModel, SlowModel
from tests.support.server import KEY, sdk, start_server, stop_server


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: Any, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "memfs.db")
        return
    cluster = request.getfixturevalue("pg_cluster")
    name = cluster.new_database(cluster.template)
    yield cluster.url(name)


def seed(api: anthropic.Anthropic) -> tuple[str, list[str], dict[str, str]]:
    ms = api.beta.memory_stores.create(name="notes").id
    api.beta.memory_stores.memories.create(ms, path="/a.md", content="alpha\n")
    api.beta.memory_stores.memories.create(ms, path="/d/b.md", content="beta\n")
    agent = api.beta.agents.create(name="a", model="claude-test",
                                   tools=[{"type": "agent_toolset_20260401"}])
    env = api.beta.environments.create(name="e")
    sessions = [api.beta.sessions.create(
        agent=agent.id, environment_id=env.id,
        resources=[{"type": "memory_store", "memory_store_id": ms}]).id for _ in range(2)]
    contents = {m.path: m.content for m in (
        api.beta.memory_stores.memories.retrieve(x.id, memory_store_id=ms)
        for x in api.beta.memory_stores.memories.list(ms) if x.type == "memory")}
    return ms, sessions, contents


def final(api: anthropic.Anthropic, dream_id: str, timeout: float = 20) -> Any:
    """The dream once it has ended."""

    def ended() -> Any:
        d = api.beta.dreams.retrieve(dream_id)
        return d if d.status not in ("pending", "running") else None

    return wait_until(ended, timeout, interval=0.05, what=f"{dream_id} ended")


def inputs(ms: str, sessions: list[str]) -> list[dict[str, Any]]:
    return [{"type": "memory_store", "memory_store_id": ms},
            {"type": "sessions", "session_ids": sessions}]


def test_a_dream_on_a_real_server(db: str, tmp_path: Path) -> None:
    with ScriptedModel(DREAM_TURNS + DREAM_TURNS) as model:
        server = start_server(tmp_path, "--api-key", KEY, db=db, env={
            "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": model.url})
        try:
            api = sdk(server.url, KEY)
            ms, sessions, before = seed(api)
            d = api.beta.dreams.create(inputs=inputs(ms, sessions), model="claude-test")
            done = final(api, d.id)
            assert done.status == "completed", done.error
            assert done.usage.input_tokens == 40 and done.usage.output_tokens == 20
            out = done.outputs[0].memory_store_id
            assert [m.path for m in api.beta.memory_stores.memories.list(out)] == ["/all.md"]
            assert seed_contents(api, ms) == before  # the input, untouched
            events = list(api.beta.sessions.events.list(done.session_id))
            assert sum(e.type == "agent.tool_use" for e in events) == 6
            versions = list(api.beta.memory_stores.memory_versions.list(out))
            assert {v.created_by.session_id for v in versions} == {done.session_id}
            # The CLI through the server: the server runs it, the CLI waits.
            r = subprocess.run(
                [sys.executable, "-m", "memfs", "--url", server.url, "--api-key", KEY, "dream",
                 "notes", "-s", sessions[0], "--model", "claude-test"],
                capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            assert "completed" in r.stdout
            assert len(list(api.beta.dreams.list())) == 2
        finally:
            assert stop_server(server) == 0


def seed_contents(api: anthropic.Anthropic, ms: str) -> dict[str, str]:
    return {m.path: m.content for m in (
        api.beta.memory_stores.memories.retrieve(x.id, memory_store_id=ms)
        for x in api.beta.memory_stores.memories.list(ms) if x.type == "memory")}


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_a_server_that_dies_never_leaves_a_dream_running(db: str, tmp_path: Path,
                                                         how: str) -> None:
    slow = SlowModel()
    env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": slow.url}
    try:
        server = start_server(tmp_path, "--api-key", KEY, db=db, env=env)
        api = sdk(server.url, KEY)
        ms, sessions, _ = seed(api)
        d = api.beta.dreams.create(inputs=inputs(ms, sessions), model="claude-test")
        wait_until(lambda: slow.calls, 10, interval=0.02)
        assert api.beta.dreams.retrieve(d.id).status == "running"
        if how == "SIGKILL":
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait()
        else:
            assert stop_server(server) == 0
        again = start_server(tmp_path, "--api-key", KEY, db=db, env=env)
        try:
            api = sdk(again.url, KEY)
            got = api.beta.dreams.retrieve(d.id)
            assert got.status == "failed" and got.error is not None
            assert got.error.type == "internal_error"
            assert ("stopped before it finished" if how == "SIGKILL"
                    else "server stopped") in got.error.message
            # The model never answered, so the dream wrote nothing: no copy is left behind,
            # whichever server ended it (issue 19 §6).
            assert got.outputs == []
            assert not [s for s in api.beta.memory_stores.list(include_archived=True)
                        if "(dream" in s.name]
        finally:
            assert stop_server(again) == 0
    finally:
        slow.close()
