"""Dreams (API.md §5, issue 13): the store's rows and status changes on both backends, the
HTTP API driven by the SDK's ``client.beta.dreams``, and the runner against a scripted
Messages API (tests/support/messages.py's ScriptedModel: no network, no real model)."""

from __future__ import annotations

from typing import Any

import pytest

from memfs import errors
from memfs.models import Actor
from memfs.store import Store


def setup_inputs(s: Store) -> tuple[str, list[str]]:
    ms = s.stores.create("notes").id
    s.memories.create(ms, "/a.md", "alpha\n", actor=None)
    s.memories.create(ms, "/d/b.md", "beta\n", actor=None)
    sessions = [s.sessions.create([{"type": "memory_store", "memory_store_id": ms}]).id
                for _ in range(2)]
    return ms, sessions


def inputs(ms: str, sessions: list[str]) -> list[dict[str, Any]]:
    return [{"type": "memory_store", "memory_store_id": ms},
            {"type": "sessions", "session_ids": sessions}]


def test_a_dream_is_created_pending_and_shown_as_the_sdk_shows_it(backend: Any) -> None:
    s = backend.open()
    ms, sessions = setup_inputs(s)
    d = s.dreams.create(inputs(ms, sessions[::-1]), "claude-test")
    body = d.to_dict()
    assert body["type"] == "dream" and body["id"].startswith("drm_")
    assert body["status"] == "pending"
    assert body["inputs"] == inputs(ms, sorted(sessions))
    assert body["model"] == {"id": "claude-test", "speed": "standard"}
    assert body["output_behavior"] == {"type": "create_new"}
    assert body["outputs"] == [] and body["session_id"] is None and body["error"] is None
    assert body["usage"] == {"input_tokens": 0, "output_tokens": 0,
                             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    assert body["ended_at"] is None and body["archived_at"] is None
    assert s.dreams.get(d.id) == d


@pytest.mark.parametrize(("change", "error"), [
    (lambda i, m: ([i[0]], m), "exactly one"),
    (lambda i, m: ([i[0], i[0], i[1]], m), "exactly one"),
    (lambda i, m: ([i[0], {"type": "sessions", "session_ids": []}], m), "1 to 100"),
    (lambda i, m: ([i[0], {"type": "sessions", "session_ids": ["a"] * 2}], m), "twice"),
    (lambda i, m: ([i[0], {"type": "sessions", "session_ids": [f"s{n}" for n in range(101)]}],
                   m), "1 to 100"),
    (lambda i, m: (i, ""), "1 to 256"),
    (lambda i, m: (i, "x" * 257), "1 to 256"),
    (lambda i, m: (i, {"id": "m", "speed": "fast"}), "standard"),
    (lambda i, m: (i, 5), "model"),
    (lambda i, m: ("nope", m), "list"),
])
def test_bad_input_is_a_clear_error(store: Store, change: Any, error: str) -> None:
    ms, sessions = setup_inputs(store)
    i, m = change(inputs(ms, sessions), "claude-test")
    with pytest.raises(errors.InvalidRequest, match=error):
        store.dreams.create(i, m)
    assert store.dreams.list().data == []


def test_instructions_output_behavior_and_missing_inputs(store: Store) -> None:
    ms, sessions = setup_inputs(store)
    i = inputs(ms, sessions)
    with pytest.raises(errors.InvalidRequest, match="4096"):
        store.dreams.create(i, "m", instructions="x" * 4097)
    with pytest.raises(errors.InvalidRequest, match="4096"):
        store.dreams.create(i, "m", instructions="")
    assert store.dreams.create(i, "m", instructions="x" * 4096).instructions == "x" * 4096
    with pytest.raises(errors.InvalidRequest, match="input memory store"):
        store.dreams.create(i, "m", output_behavior={"type": "update_existing",
                                                    "memory_store_id": "memstore_other"})
    with pytest.raises(errors.InvalidRequest, match="output_behavior"):
        store.dreams.create(i, "m", output_behavior={"type": "elsewhere"})
    with pytest.raises(errors.NotFound, match="sesn_missing"):
        store.dreams.create(inputs(ms, [sessions[0], "sesn_missing"]), "m")
    with pytest.raises(errors.NotFound):
        store.dreams.create(inputs("memstore_missing", sessions), "m")
    other = store.stores.create("old").id
    store.stores.archive(other)
    with pytest.raises(errors.StoreArchived):
        store.dreams.create(inputs(other, sessions), "m")
    # One update_existing dream per store at a time (409), create_new ones are free.
    update = {"type": "update_existing", "memory_store_id": ms}
    d = store.dreams.create(i, "m", output_behavior=update)
    assert d.output_behavior == update
    with pytest.raises(errors.Conflict):
        store.dreams.create(i, "m", output_behavior=update)
    store.dreams.create(i, "m")
    store.dreams.cancel(d.id)
    store.dreams.create(i, "m", output_behavior=update)


def test_start_copies_the_input_into_a_new_store_of_the_dreams_session(backend: Any) -> None:
    s = backend.open()
    ms, sessions = setup_inputs(s)
    before = [(m.path, m.content, m.memory_version_id) for m in s.memories.tree(ms)]
    d = s.dreams.start(s.dreams.create(inputs(ms, sessions), "m").id)
    assert d is not None and d.status == "running" and d.session_id is not None
    out = d.output_store_id
    assert out is not None and out != ms
    assert [(m.path, m.content) for m in s.memories.tree(out)] == [(p, c) for p, c, _ in before]
    assert {v.created_by for v in s.versions.list(out).data} == {Actor.session(d.session_id)}
    assert [(m.path, m.content, m.memory_version_id) for m in s.memories.tree(ms)] == before
    session = s.sessions.get(d.session_id)
    assert session.status == "running"
    assert [(r.memory_store_id, r.access) for r in session.resources] == [
        (out, "read_write"), (ms, "read_only")]
    assert s.stores.get(out).metadata == {"memfs_dream_id": d.id, "memfs_dream_status": "running"}
    assert s.dreams.start(d.id) is None  # started once
    s.dreams.add_usage(d.id, {"input_tokens": 10, "output_tokens": 5})
    s.dreams.add_usage(d.id, {"input_tokens": 1, "cache_read_input_tokens": 2})
    done = s.dreams.finish(d.id, "failed", {"type": "api_error", "message": "overloaded"})
    assert done.status == "failed" and done.ended_at is not None
    assert done.error == {"type": "api_error", "message": "overloaded"}
    assert done.usage == {"input_tokens": 11, "output_tokens": 5,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2}
    s.dreams.add_usage(d.id, {"input_tokens": 100})  # frozen once failed
    assert s.dreams.get(d.id).usage == done.usage
    assert s.stores.get(out).metadata == {"memfs_dream_id": d.id, "memfs_dream_status": "failed",
                                         "memfs_dream_error": "api_error: overloaded"}
    assert s.sessions.get(d.session_id).status == "terminated"
    # A final status never changes.
    assert s.dreams.finish(d.id, "completed").status == "failed"


def test_update_existing_writes_the_input(store: Store) -> None:
    ms, sessions = setup_inputs(store)
    d = store.dreams.start(store.dreams.create(
        inputs(ms, sessions), "m",
        output_behavior={"type": "update_existing", "memory_store_id": ms}).id)
    assert d is not None and d.output_store_id == ms
    assert [(r.memory_store_id, r.access) for r in store.sessions.get(d.session_id).resources] == [
        (ms, "read_write")]
    assert len(store.versions.list(ms).data) == 2  # nothing copied


def test_cancel_and_archive_follow_the_status(backend: Any) -> None:
    s = backend.open()
    ms, sessions = setup_inputs(s)
    d = s.dreams.create(inputs(ms, sessions), "m")
    with pytest.raises(errors.InvalidRequest, match="cancel it first"):
        s.dreams.archive(d.id)
    c = s.dreams.cancel(d.id)
    assert c.status == "canceled" and c.ended_at is not None
    assert s.dreams.cancel(d.id) == c  # unchanged
    assert s.dreams.start(d.id) is None  # a canceled dream never starts
    a = s.dreams.archive(d.id)
    assert a.archived_at is not None and s.dreams.archive(d.id) == a
    done = s.dreams.start(s.dreams.create(inputs(ms, sessions), "m").id)
    assert done is not None
    s.dreams.finish(done.id, "completed")
    with pytest.raises(errors.InvalidRequest, match="completed"):
        s.dreams.cancel(done.id)
    with pytest.raises(errors.NotFound):
        s.dreams.get("drm_missing")
    with pytest.raises(errors.NotFound):
        s.dreams.cancel("drm_missing")


def test_list_pages_newest_first_with_filters(backend: Any) -> None:
    s = backend.open()
    ms, sessions = setup_inputs(s)
    ids = [s.dreams.create(inputs(ms, sessions), "m").id for _ in range(5)]
    s.dreams.cancel(ids[0])
    s.dreams.archive(ids[0])
    s.dreams.cancel(ids[1])
    seen, page = [], None
    while True:
        p = s.dreams.list(limit=2, page=page)
        seen += [d.id for d in p.data]
        if p.next_page is None:
            break
        page = p.next_page
    assert seen == ids[:0:-1]
    assert [d.id for d in s.dreams.list(include_archived=True).data] == ids[::-1]
    assert [d.id for d in s.dreams.list(statuses=["canceled"]).data] == [ids[1]]
    assert [d.id for d in s.dreams.list(statuses=["canceled"], include_archived=True).data] == [
        ids[1], ids[0]]
    created = s.dreams.get(ids[2]).created_at
    assert ids[2] not in [d.id for d in s.dreams.list(created_at_gt=created).data]
    assert ids[2] not in [d.id for d in s.dreams.list(created_at_lt=created).data]
    with pytest.raises(errors.InvalidRequest):
        s.dreams.list(statuses=["sleeping"])
    with pytest.raises(errors.InvalidCursor):
        s.dreams.list(page=p.next_page or "garbage")


def test_stale_dreams_are_found(store: Store) -> None:
    ms, sessions = setup_inputs(store)
    d = store.dreams.create(inputs(ms, sessions), "m", runner={"host": "h", "pid": 1})
    assert store.dreams.stale(older_than=3600) == []
    assert store.dreams.stale(older_than=-1) == [(d.id, {"host": "h", "pid": 1})]
    assert store.dreams.live() == [(d.id, {"host": "h", "pid": 1})]


# --------------------------------------------------------------------------------------------
# the runner, against a scripted Messages API

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import anthropic  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from memfs.api import create_app  # noqa: E402
from memfs.dreams import runner  # noqa: E402
from memfs.dreams.dreamer import Dreamer, dreamer_for  # noqa: E402
from tests.support import wait_until  # noqa: E402
from tests.support.messages import DREAM_TURNS, ScriptedModel, SlowModel  # noqa: E402


@pytest.fixture
def api_env(monkeypatch) -> Iterator[None]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    yield


def seeded(s: Store) -> tuple[str, list[str]]:
    ms, sessions = setup_inputs(s)
    s.events.add(sessions[0], [
        {"type": "user.message", "content": [{"type": "text", "text": "I drink coffee black"}]},
        {"type": "agent.message", "content": [{"type": "text", "text": "Noted."}]}])
    return ms, sessions


def snapshot(s: Store, ms: str) -> list[tuple[str, str | None, str]]:
    return [(m.path, s.memories.get(ms, m.id).content,
             m.memory_version_id) for m in s.memories.tree(ms)]


def test_a_dream_consolidates_into_the_output_and_never_writes_the_input(
    backend: Any, monkeypatch: Any, api_env: None,
) -> None:
    s = backend.open()
    ms, sessions = seeded(s)
    before = snapshot(s, ms)
    versions_before = len(s.versions.list(ms, limit=100).data)
    with ScriptedModel(DREAM_TURNS) as model:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model.url)
        d = s.dreams.create(inputs(ms, sessions), "claude-test", instructions="Merge it all.")
        done = runner.DreamRun(s, d.id).run()
    assert done.status == "completed", done.error
    assert done.error is None and done.ended_at is not None
    assert done.usage == {"input_tokens": 40, "output_tokens": 20,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    # The input store: untouched, although the model edited and deleted its /memories/a.md.
    assert snapshot(s, ms) == before
    assert len(s.versions.list(ms, limit=100).data) == versions_before
    out = done.output_store_id
    assert out is not None and out != ms
    assert [(m.path, s.memories.get(out, m.id).content) for m in s.memories.tree(out)] == [
        ("/all.md", "ALPHA\nbeta\ncoffee: black\n")]
    assert {v.created_by for v in s.versions.list(out, limit=100).data} == {
        Actor.session(done.session_id)}
    assert s.stores.get(out).metadata["memfs_dream_status"] == "completed"
    r = model.results()
    assert r["toolu_02"][0] is False and r["toolu_03"] == (
        True, "Path /memories/../escape.md would escape /memories directory")
    assert r["toolu_05"] == (False, "Successfully deleted /memories/a.md")
    # What the model was given: the instructions, the input store, the transcripts.
    first = model.requests[0]
    assert first["model"] == "claude-test"
    assert first["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    prompt = first["messages"][0]["content"]
    for text in ("Merge it all.", "alpha", "/memories/d/b.md", "I drink coffee black",
                 sessions[1]):
        assert text in prompt
    # The dream is a session: its prompt, tool event pairs and replies are its events.
    evs = [e.body for e in s.events.list(done.session_id, limit=100).data]
    kinds = [e["type"] for e in evs]
    assert kinds.count("agent.tool_use") == kinds.count("agent.tool_result") == 6
    assert kinds[0] == "user.message" and kinds[1] == "agent.message"
    assert kinds[-1] == "session.status_terminated"
    assert [e["content"][0]["text"] for e in evs if e["type"] == "agent.message"] == [
        "Reading the store.", "Merged everything into /all.md."]


def test_update_existing_rewrites_the_input_as_new_versions(
    store: Store, monkeypatch: Any, api_env: None,
) -> None:
    ms, sessions = seeded(store)
    with ScriptedModel(DREAM_TURNS) as model:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model.url)
        d = store.dreams.create(inputs(ms, sessions), "claude-test", output_behavior={
            "type": "update_existing", "memory_store_id": ms})
        done = runner.DreamRun(store, d.id).run()
    assert done.status == "completed" and done.output_store_id == ms
    assert [m.path for m in store.memories.tree(ms)] == ["/all.md"]
    new = [v for v in store.versions.list(ms, limit=100).data
           if v.created_by == Actor.session(done.session_id)]
    assert sorted(v.operation for v in new) == ["created", "deleted", "deleted", "modified"]


def test_a_model_error_fails_the_dream_with_the_reason(
    store: Store, monkeypatch: Any, api_env: None,
) -> None:
    ms, sessions = seeded(store)
    with ScriptedModel(DREAM_TURNS[:1]) as model:  # then answers 400
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model.url)
        d = store.dreams.create(inputs(ms, sessions), "claude-test")
        done = runner.DreamRun(store, d.id).run()
    assert done.status == "failed"
    assert done.error is not None and done.error["type"] == "model_error"
    assert "400" in done.error["message"]
    assert done.usage["input_tokens"] == 10  # the first turn's, kept
    meta = store.stores.get(done.output_store_id).metadata
    assert meta["memfs_dream_status"] == "failed"
    assert meta["memfs_dream_error"].startswith("model_error: ")
    assert store.sessions.get(done.session_id).status == "terminated"


def test_no_api_key_or_no_endpoint_fails_clearly(store: Store, monkeypatch: Any) -> None:
    ms, sessions = seeded(store)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    d = store.dreams.create(inputs(ms, sessions), "claude-test")
    done = runner.DreamRun(store, d.id).run()
    assert done.status == "failed" and done.error is not None
    assert done.error["type"] == "configuration_error"
    assert "ANTHROPIC_API_KEY" in done.error["message"]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens
    d = store.dreams.create(inputs(ms, sessions), "claude-test")
    done = runner.DreamRun(store, d.id, client_factory=lambda: anthropic.Anthropic(
        api_key="k", base_url="http://127.0.0.1:9", max_retries=0)).run()
    assert done.status == "failed" and done.error["type"] == "model_unreachable"


@pytest.fixture
def slow_model(monkeypatch: Any, api_env: None) -> Iterator[SlowModel]:
    m = SlowModel()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", m.url)
    yield m
    m.close()


@pytest.mark.parametrize("where", ["this process", "the database"])
def test_cancel_stops_a_call_in_flight_within_a_second(
    store: Store, slow_model: SlowModel, where: str,
) -> None:
    ms, sessions = seeded(store)
    dreamer = Dreamer(store)
    d = store.dreams.create(inputs(ms, sessions), "claude-test")
    dreamer.start(d.id)
    wait_until(lambda: slow_model.calls == 1, 10)
    t0 = time.monotonic()
    c = store.dreams.cancel(d.id)
    if where == "this process":
        dreamer.cancel(d.id)
    dreamer.wait(d.id, 5)
    took = time.monotonic() - t0
    assert took < 1.0, took
    assert not dreamer.threads
    done = store.dreams.get(d.id)
    assert c.status == done.status == "canceled" and done.error is None
    assert done.output_store_id is not None  # keeps what it wrote (the copy)
    assert store.stores.get(done.output_store_id).metadata["memfs_dream_status"] == "canceled"
    assert store.sessions.get(done.session_id).status == "terminated"


def test_a_stopping_server_fails_its_dreams(store: Store, slow_model: SlowModel) -> None:
    ms, sessions = seeded(store)
    dreamer = Dreamer(store)
    d = store.dreams.create(inputs(ms, sessions), "claude-test")
    dreamer.start(d.id)
    wait_until(lambda: slow_model.calls == 1, 10)
    dreamer.close()
    done = store.dreams.get(d.id)
    assert done.status == "failed" and "stopped" in done.error["message"]


def test_dreams_of_a_dead_runner_fail_at_startup(store: Store, monkeypatch: Any) -> None:
    ms, sessions = seeded(store)
    dead = subprocess.Popen(["true"])
    dead.wait()
    me = runner.identity()
    orphan = store.dreams.create(inputs(ms, sessions), "m", runner={**me, "pid": dead.pid})
    assert store.dreams.start(orphan.id, runner={**me, "pid": dead.pid}) is not None
    store.dreams.add_usage(orphan.id, {"input_tokens": 7, "output_tokens": 3})  # it answered
    # One whose model never answered (no usage): its output is a bare copy of the input.
    unanswered = store.dreams.create(inputs(ms, sessions), "m", runner={**me, "pid": dead.pid})
    copy = store.dreams.start(unanswered.id, runner={**me, "pid": dead.pid})
    assert copy is not None and copy.output_store_id is not None
    alive = store.dreams.create(inputs(ms, sessions), "m", runner={**me, "pid": os.getpid()})
    elsewhere = store.dreams.create(inputs(ms, sessions), "m",
                                   runner={"host": "elsewhere", "pid": 1, "token": "x"})
    dreamer = Dreamer(store)
    assert sorted(dreamer.recover()) == sorted([orphan.id, unanswered.id])
    failed = store.dreams.get(orphan.id)
    assert failed.status == "failed" and failed.error["type"] == "internal_error"
    assert f"pid {dead.pid}" in failed.error["message"]
    assert store.stores.get(failed.output_store_id).metadata["memfs_dream_status"] == "failed"
    gone = store.dreams.get(unanswered.id)
    assert gone.status == "failed" and gone.outputs == []
    with pytest.raises(errors.NotFound):
        store.stores.get(copy.output_store_id)
    # A runner that stays silent is dead wherever it runs.
    monkeypatch.setattr("memfs.dreams.dreamer.STALE_SECONDS", -1.0)
    assert sorted(dreamer.recover()) == sorted([alive.id, elsewhere.id])
    assert store.dreams.live() == []


# --------------------------------------------------------------------------------------------
# the HTTP API, driven by the SDK's client.beta.dreams

KEY = "test-key-dreams"


@pytest.fixture
def sdk(store: Store) -> Iterator[anthropic.Anthropic]:
    with TestClient(create_app(store, [KEY])) as http:
        yield anthropic.Anthropic(api_key=KEY, base_url="http://testserver", http_client=http,
                                  max_retries=0)


def test_the_sdk_creates_retrieves_lists_cancels_and_archives(
    store: Store, sdk: anthropic.Anthropic, slow_model: SlowModel,
) -> None:
    ms, sessions = seeded(store)
    d = sdk.beta.dreams.create(inputs=inputs(ms, sessions), model="claude-test",
                               instructions="Be brief.")
    assert d.status in ("pending", "running") and d.id.startswith("drm_")
    assert d.model.id == "claude-test" and d.model.speed == "standard"
    assert d.output_behavior.type == "create_new" and d.instructions == "Be brief."
    wait_until(lambda: slow_model.calls == 1, 10)
    got = sdk.beta.dreams.retrieve(d.id)
    assert got.status == "running" and got.session_id and got.outputs
    assert got.outputs[0].memory_store_id != ms
    with pytest.raises(anthropic.BadRequestError, match="cancel it first"):
        sdk.beta.dreams.archive(d.id)
    t0 = time.monotonic()
    c = sdk.beta.dreams.cancel(d.id)
    assert c.status == "canceled" and c.ended_at is not None
    dreamer_for(store).wait(d.id, 5)
    assert time.monotonic() - t0 < 1.0
    assert sdk.beta.dreams.cancel(d.id).status == "canceled"
    a = sdk.beta.dreams.archive(d.id)
    assert a.archived_at is not None
    assert [x.id for x in sdk.beta.dreams.list()] == []
    assert [x.id for x in sdk.beta.dreams.list(include_archived=True, statuses=["canceled"])] == [
        d.id]
    assert [x.id for x in sdk.beta.dreams.list(include_archived=True,
                                               statuses=["running", "failed"])] == []
    with pytest.raises(anthropic.NotFoundError):
        sdk.beta.dreams.retrieve("drm_missing")
    with pytest.raises(anthropic.BadRequestError, match="exactly one"):
        sdk.beta.dreams.create(inputs=inputs(ms, sessions)[:1], model="claude-test")
    with pytest.raises(anthropic.NotFoundError):
        sdk.beta.dreams.create(inputs=inputs(ms, ["sesn_missing"]), model="claude-test")
    upd = {"type": "update_existing", "memory_store_id": ms}
    first = sdk.beta.dreams.create(inputs=inputs(ms, sessions), model={"id": "m"},
                                   output_behavior=upd)
    with pytest.raises(anthropic.ConflictError):
        sdk.beta.dreams.create(inputs=inputs(ms, sessions), model="m", output_behavior=upd)
    sdk.beta.dreams.cancel(first.id)
    dreamer_for(store).wait(first.id, 5)


def test_the_sdk_pages_through_dreams(store: Store, sdk: anthropic.Anthropic,
                                      monkeypatch: Any) -> None:
    ms, sessions = seeded(store)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)  # each fails at once
    ids = [sdk.beta.dreams.create(inputs=inputs(ms, sessions), model="m").id for _ in range(5)]
    for i in ids:
        dreamer_for(store).wait(i, 5)
    page = sdk.beta.dreams.list(limit=2)
    assert len(page.data) == 2 and page.next_page
    assert [d.id for d in page] == ids[::-1]  # auto-pagination
    failed = sdk.beta.dreams.retrieve(ids[0])
    assert failed.status == "failed" and failed.error.type == "configuration_error"
    t = failed.created_at
    assert ids[0] not in [d.id for d in sdk.beta.dreams.list(created_at_gt=t)]
    assert [d.id for d in sdk.beta.dreams.list(created_at_lt=t)] == []


def test_a_dream_runs_to_completion_through_the_api(
    store: Store, sdk: anthropic.Anthropic, monkeypatch: Any, api_env: None,
) -> None:
    ms, sessions = seeded(store)
    before = snapshot(store, ms)
    with ScriptedModel(DREAM_TURNS) as model:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model.url)
        d = sdk.beta.dreams.create(inputs=inputs(ms, sessions), model="claude-test")
        dreamer_for(store).wait(d.id, 10)
    done = sdk.beta.dreams.retrieve(d.id)
    assert done.status == "completed" and done.usage.output_tokens == 20
    out = done.outputs[0].memory_store_id
    assert [m.path for m in store.memories.tree(out)] == ["/all.md"]
    assert snapshot(store, ms) == before
    evs = list(sdk.beta.sessions.events.list(done.session_id))
    assert sum(e.type == "agent.tool_use" for e in evs) == 6
    json.dumps(done.model_dump(mode="json"))


# --------------------------------------------------------------------------------------------
# memfs dream

from click.testing import CliRunner  # noqa: E402

from memfs.cli import cli  # noqa: E402


def memfs(db: str, *args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(cli, ["--db", db, *args], env=env)


def test_memfs_dream_runs_a_dream_and_manages_them(db_path: Any, monkeypatch: Any,
                                                   api_env: None) -> None:
    s = Store(db_path)
    ms, sessions = seeded(s)
    before = snapshot(s, ms)
    db = str(db_path)
    with ScriptedModel(DREAM_TURNS) as model:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model.url)
        r = memfs(db, "dream", "notes", "--session", sessions[0], "-s", sessions[1],
                  "--instructions", "Merge it all.", "--model", "claude-test")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert "completed" in r.stdout and "next: attach" in r.stdout
    assert model.requests[0]["model"] == "claude-test"
    assert snapshot(s, ms) == before
    [d] = s.dreams.list().data
    assert d.status == "completed"
    assert [m.path for m in s.memories.tree(d.output_store_id)] == ["/all.md"]
    listed = json.loads(memfs(db, "--json", "dream", "list").stdout)
    assert [x["id"] for x in listed] == [d.id]
    shown = memfs(db, "dream", "show", d.id)
    assert shown.exit_code == 0 and d.output_store_id in shown.stdout
    # One-line errors, no traceback.
    for args, text in ((("dream", "cancel", d.id), "completed"),
                       (("dream", "show", "drm_missing"), "no dream"),
                       (("dream", "notes", "--session", "sesn_missing"), "sesn_missing"),
                       (("dream", "missing-store", "-s", sessions[0]), "missing-store")):
        r = memfs(db, *args)
        assert r.exit_code != 0 and r.stderr.count("\n") == 1 and text in r.stderr, (args,
                                                                                    r.stderr)
    # A failed dream says why, in one line, and exits non-zero.
    with ScriptedModel([]) as model:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model.url)
        r = memfs(db, "dream", "notes", "-s", sessions[0], "--model", "claude-test")
    last = r.stderr.strip().splitlines()[-1]
    assert r.exit_code == 1 and last.startswith("memfs: dream drm_")
    assert "failed: model_error: the Messages API answered 400" in last


def test_memfs_dream_show_fails_the_dream_of_a_dead_memfs_dream(db_path: Any) -> None:
    s = Store(db_path)
    ms, sessions = seeded(s)
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = {**runner.identity(), "pid": dead.pid}
    d = s.dreams.create(inputs(ms, sessions), "m", runner=gone)
    s.dreams.start(d.id, runner=gone)
    r = memfs(str(db_path), "dream", "show", d.id)
    assert r.exit_code == 0 and "failed" in r.stdout and "stopped before it finished" in r.stdout
    assert s.dreams.get(d.id).status == "failed"


def test_the_sweeper_of_a_closed_store_stops_quietly(
    backend: Any, monkeypatch: Any, caplog: Any,
) -> None:
    """A Dreamer whose store was closed without closing it (an embedding program, a test)
    stops sweeping instead of logging a traceback every SWEEP_SECONDS forever."""
    monkeypatch.setattr("memfs.dreams.dreamer.SWEEP_SECONDS", 0.02)
    store = backend.open()
    real, sweeps = store.dreams.stale, []

    def counted(**kw: Any) -> Any:
        sweeps.append(1)
        return real(**kw)

    monkeypatch.setattr(store.dreams, "stale", counted)
    dreamer = Dreamer(store)
    dreamer.watch()
    sweeper = dreamer._sweeper
    assert sweeper is not None
    wait_until(lambda: len(sweeps) >= 3)
    assert sweeper.is_alive()  # sweeping while the store is open
    store.close()
    sweeper.join(2)
    assert not sweeper.is_alive()
    assert not [r for r in caplog.records if r.name == "memfs.dreams"]


def test_a_store_closed_during_a_sweep_stops_the_sweeper_quietly(
    backend: Any, monkeypatch: Any, caplog: Any,
) -> None:
    """The store closes after the sweeper's check and before its read (the interleaving made
    deterministic): the read fails, and the sweeper stops without a traceback."""
    monkeypatch.setattr("memfs.dreams.dreamer.SWEEP_SECONDS", 0.02)
    store = backend.open()
    real = store.dreams.stale

    def closing(**kw: Any) -> Any:
        store.close()
        return real(**kw)

    monkeypatch.setattr(store.dreams, "stale", closing)
    dreamer = Dreamer(store)
    dreamer.watch()
    sweeper = dreamer._sweeper
    assert sweeper is not None
    sweeper.join(2)
    assert not sweeper.is_alive() and store.closed
    assert not [r for r in caplog.records if r.name == "memfs.dreams"]


def test_a_sweep_the_database_refuses_is_one_line_per_streak(
    backend: Any, monkeypatch: Any, caplog: Any,
) -> None:
    """A database that fails every sweep (its file replaced under the server: DatabaseGone,
    or PostgreSQL away) is one warning line, not a traceback every 15 s, and the sweeper goes
    on (it sweeps again once the database answers)."""
    from memfs.errors import DatabaseGone

    monkeypatch.setattr("memfs.dreams.dreamer.SWEEP_SECONDS", 0.01)
    store = backend.open()
    real, calls = store.dreams.stale, []

    def failing(**kw: Any) -> Any:
        calls.append(1)
        if len(calls) <= 5:
            raise DatabaseGone("the database file x.db was replaced while in use")
        return real(**kw)

    monkeypatch.setattr(store.dreams, "stale", failing)
    dreamer = Dreamer(store)
    dreamer.watch()
    wait_until(lambda: len(calls) >= 8)
    dreamer.close()
    logged = [r for r in caplog.records if r.name == "memfs.dreams"]
    assert len(logged) == 1 and logged[0].exc_info is None, logged
    assert "was replaced while in use" in logged[0].getMessage()


# --------------------------------------------------------------------------------------------
# a dream that fails before its model ran leaves nothing behind (issue 19 §6)


def store_names(s: Store) -> list[str]:
    return sorted(x.name for x in s.stores.list(include_archived=True, limit=100).data)


def test_no_api_key_fails_the_dream_before_its_store_or_session_is_made(
    backend: Any, monkeypatch: Any,
) -> None:
    """What the model needs is checked first: a dream without a key fails as it is, with no
    output store and no session (on a server: the message names the server's environment)."""
    s = backend.open()
    ms, sessions = seeded(s)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for _ in range(4):
        d = s.dreams.create(inputs(ms, sessions), "claude-test")
        done = runner.DreamRun(s, d.id).run()
        assert done.status == "failed" and done.error["type"] == "configuration_error"
        assert "ANTHROPIC_API_KEY" in done.error["message"]
        assert "memfs server's environment" in done.error["message"]
        assert done.outputs == [] and done.session_id is None
    assert store_names(s) == ["notes"]  # no "notes (dream drm_…)" copies
    assert len(s.sessions.list(limit=100).data) == len(sessions)


def test_a_model_that_never_answered_leaves_no_output_store(
    backend: Any, monkeypatch: Any, api_env: None,
) -> None:
    """A first call refused (400) or unreachable: the model never ran, so its output store (a
    copy of the input nothing wrote to) goes; the dream says why, its session stays ended."""
    s = backend.open()
    ms, sessions = seeded(s)
    with ScriptedModel([]) as model:  # answers 400 at once
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model.url)
        d = s.dreams.create(inputs(ms, sessions), "claude-test")
        done = runner.DreamRun(s, d.id).run()
    assert done.status == "failed" and done.error["type"] == "model_error"
    assert done.outputs == [] and store_names(s) == ["notes"]
    assert s.sessions.get(done.session_id).status == "terminated"
    d = s.dreams.create(inputs(ms, sessions), "claude-test")
    done = runner.DreamRun(s, d.id, client_factory=lambda: anthropic.Anthropic(
        api_key="k", base_url="http://127.0.0.1:9", max_retries=0)).run()
    assert done.error["type"] == "model_unreachable" and done.outputs == []
    assert store_names(s) == ["notes"]
    # update_existing: the output is the input, which stays whatever happens.
    d = s.dreams.create(inputs(ms, sessions), "claude-test",
                       output_behavior={"type": "update_existing", "memory_store_id": ms})
    done = runner.DreamRun(s, d.id, client_factory=lambda: anthropic.Anthropic(
        api_key="k", base_url="http://127.0.0.1:9", max_retries=0)).run()
    assert done.status == "failed" and done.output_store_id == ms
    assert store_names(s) == ["notes"] and len(s.memories.tree(ms)) == 2


def test_a_server_dream_without_a_key_leaves_no_output_store(
    store: Store, sdk: anthropic.Anthropic, monkeypatch: Any,
) -> None:
    ms, sessions = seeded(store)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    d = sdk.beta.dreams.create(inputs=inputs(ms, sessions), model="claude-test")
    dreamer_for(store).wait(d.id, 5)
    done = sdk.beta.dreams.retrieve(d.id)
    assert done.status == "failed" and done.error.type == "configuration_error"
    assert "memfs server's environment" in done.error.message
    assert done.outputs == []
    assert [x.name for x in sdk.beta.memory_stores.list()] == ["notes"]


def test_memfs_dream_without_a_key_says_to_set_it_in_this_shell(
    db_path: Any, monkeypatch: Any,
) -> None:
    """On a local database the dream runs in the command: its own environment is what
    counts. Nothing is created, however many tries."""
    s = Store(db_path)
    ms, sessions = seeded(s)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for _ in range(4):
        r = memfs(str(db_path), "dream", "notes", "-s", sessions[0], "--model", "claude-test")
        assert r.exit_code != 0
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("memfs: "), r.stderr
        assert "ANTHROPIC_API_KEY" in lines[0] and "this shell" in lines[0], lines[0]
        assert "server" not in lines[0]
    assert s.dreams.list(include_archived=True).data == []
    assert store_names(s) == ["notes"]


def test_memfs_dream_whose_model_never_answered_leaves_no_output_store(
    db_path: Any, monkeypatch: Any, api_env: None,
) -> None:
    s = Store(db_path)
    ms, sessions = seeded(s)
    with ScriptedModel([]) as model:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model.url)
        r = memfs(str(db_path), "dream", "notes", "-s", sessions[0], "--model", "claude-test")
    assert r.exit_code == 1 and "model_error" in r.stderr
    assert store_names(s) == ["notes"]


def test_a_dream_s_new_store_has_its_source_s_types_and_expiry(backend: Any) -> None:
    """SPEC §8, never by surprise: a store whose types are off and whose expiry only reports
    gives a dream a store whose /context/ memories neither have a type nor expire."""
    s = backend.open()
    ms, sessions = setup_inputs(s)
    s.memories.create(ms, "/context/today.md", "standup\n", actor=None)
    s.stores.update(ms, metadata={"memfs_types": "off", "memfs_expiry": "report"})
    d = s.dreams.start(s.dreams.create(inputs(ms, sessions), "m").id)
    assert d is not None
    out = d.outputs[0]["memory_store_id"]
    assert {k: v for k, v in s.stores.get(out).metadata.items() if k.startswith("memfs_")
            and k not in ("memfs_dream_id", "memfs_dream_status")} == {
        "memfs_types": "off", "memfs_expiry": "report"}
    copied = s.memories.get_by_path(out, "/context/today.md")
    assert copied.memfs_meta is not None and copied.memfs_meta.type is None
    assert s.typed.describe(out)["expiry"] == "report"
