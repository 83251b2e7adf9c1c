"""Dreams (API.md §5, issue 13): the store's rows and status changes on both backends, the
HTTP API driven by the SDK's ``client.beta.dreams``, and the runner against a scripted
Messages API (tests/unit/test_tools.py's ScriptedModel: no network, no real model)."""

from __future__ import annotations

from typing import Any

import pytest

from memfs import errors
from memfs.models import Actor
from memfs.store import Store


def setup_inputs(s: Store) -> tuple[str, list[str]]:
    ms = s.create_store("notes").id
    s.create_memory(ms, "/a.md", "alpha\n", actor=None)
    s.create_memory(ms, "/d/b.md", "beta\n", actor=None)
    sessions = [s.create_session([{"type": "memory_store", "memory_store_id": ms}]).id
                for _ in range(2)]
    return ms, sessions


def inputs(ms: str, sessions: list[str]) -> list[dict[str, Any]]:
    return [{"type": "memory_store", "memory_store_id": ms},
            {"type": "sessions", "session_ids": sessions}]


def test_a_dream_is_created_pending_and_shown_as_the_sdk_shows_it(backend: Any) -> None:
    s = backend.open()
    ms, sessions = setup_inputs(s)
    d = s.create_dream(inputs(ms, sessions[::-1]), "claude-test")
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
    assert s.get_dream(d.id) == d


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
        store.create_dream(i, m)
    assert store.list_dreams().data == []


def test_instructions_output_behavior_and_missing_inputs(store: Store) -> None:
    ms, sessions = setup_inputs(store)
    i = inputs(ms, sessions)
    with pytest.raises(errors.InvalidRequest, match="4096"):
        store.create_dream(i, "m", instructions="x" * 4097)
    with pytest.raises(errors.InvalidRequest, match="4096"):
        store.create_dream(i, "m", instructions="")
    assert store.create_dream(i, "m", instructions="x" * 4096).instructions == "x" * 4096
    with pytest.raises(errors.InvalidRequest, match="input memory store"):
        store.create_dream(i, "m", output_behavior={"type": "update_existing",
                                                    "memory_store_id": "memstore_other"})
    with pytest.raises(errors.InvalidRequest, match="output_behavior"):
        store.create_dream(i, "m", output_behavior={"type": "elsewhere"})
    with pytest.raises(errors.NotFound, match="sesn_missing"):
        store.create_dream(inputs(ms, [sessions[0], "sesn_missing"]), "m")
    with pytest.raises(errors.NotFound):
        store.create_dream(inputs("memstore_missing", sessions), "m")
    other = store.create_store("old").id
    store.archive_store(other)
    with pytest.raises(errors.StoreArchived):
        store.create_dream(inputs(other, sessions), "m")
    # One update_existing dream per store at a time (409), create_new ones are free.
    update = {"type": "update_existing", "memory_store_id": ms}
    d = store.create_dream(i, "m", output_behavior=update)
    assert d.output_behavior == update
    with pytest.raises(errors.Conflict):
        store.create_dream(i, "m", output_behavior=update)
    store.create_dream(i, "m")
    store.cancel_dream(d.id)
    store.create_dream(i, "m", output_behavior=update)


def test_start_copies_the_input_into_a_new_store_of_the_dreams_session(backend: Any) -> None:
    s = backend.open()
    ms, sessions = setup_inputs(s)
    before = [(m.path, m.content, m.memory_version_id) for m in s.tree(ms)]
    d = s.start_dream(s.create_dream(inputs(ms, sessions), "m").id)
    assert d is not None and d.status == "running" and d.session_id is not None
    out = d.output_store_id
    assert out is not None and out != ms
    assert [(m.path, m.content) for m in s.tree(out)] == [(p, c) for p, c, _ in before]
    assert {v.created_by for v in s.list_versions(out).data} == {Actor.session(d.session_id)}
    assert [(m.path, m.content, m.memory_version_id) for m in s.tree(ms)] == before
    session = s.get_session(d.session_id)
    assert session.status == "running"
    assert [(r.memory_store_id, r.access) for r in session.resources] == [
        (out, "read_write"), (ms, "read_only")]
    assert s.get_store(out).metadata == {"memfs_dream_id": d.id, "memfs_dream_status": "running"}
    assert s.start_dream(d.id) is None  # started once
    s.add_dream_usage(d.id, {"input_tokens": 10, "output_tokens": 5})
    s.add_dream_usage(d.id, {"input_tokens": 1, "cache_read_input_tokens": 2})
    done = s.finish_dream(d.id, "failed", {"type": "api_error", "message": "overloaded"})
    assert done.status == "failed" and done.ended_at is not None
    assert done.error == {"type": "api_error", "message": "overloaded"}
    assert done.usage == {"input_tokens": 11, "output_tokens": 5,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2}
    s.add_dream_usage(d.id, {"input_tokens": 100})  # frozen once failed
    assert s.get_dream(d.id).usage == done.usage
    assert s.get_store(out).metadata == {"memfs_dream_id": d.id, "memfs_dream_status": "failed",
                                         "memfs_dream_error": "api_error: overloaded"}
    assert s.get_session(d.session_id).status == "terminated"
    # A final status never changes.
    assert s.finish_dream(d.id, "completed").status == "failed"


def test_update_existing_writes_the_input(store: Store) -> None:
    ms, sessions = setup_inputs(store)
    d = store.start_dream(store.create_dream(
        inputs(ms, sessions), "m",
        output_behavior={"type": "update_existing", "memory_store_id": ms}).id)
    assert d is not None and d.output_store_id == ms
    assert [(r.memory_store_id, r.access) for r in store.get_session(d.session_id).resources] == [
        (ms, "read_write")]
    assert len(store.list_versions(ms).data) == 2  # nothing copied


def test_cancel_and_archive_follow_the_status(backend: Any) -> None:
    s = backend.open()
    ms, sessions = setup_inputs(s)
    d = s.create_dream(inputs(ms, sessions), "m")
    with pytest.raises(errors.InvalidRequest, match="cancel it first"):
        s.archive_dream(d.id)
    c = s.cancel_dream(d.id)
    assert c.status == "canceled" and c.ended_at is not None
    assert s.cancel_dream(d.id) == c  # unchanged
    assert s.start_dream(d.id) is None  # a canceled dream never starts
    a = s.archive_dream(d.id)
    assert a.archived_at is not None and s.archive_dream(d.id) == a
    done = s.start_dream(s.create_dream(inputs(ms, sessions), "m").id)
    assert done is not None
    s.finish_dream(done.id, "completed")
    with pytest.raises(errors.InvalidRequest, match="completed"):
        s.cancel_dream(done.id)
    with pytest.raises(errors.NotFound):
        s.get_dream("drm_missing")
    with pytest.raises(errors.NotFound):
        s.cancel_dream("drm_missing")


def test_list_pages_newest_first_with_filters(backend: Any) -> None:
    s = backend.open()
    ms, sessions = setup_inputs(s)
    ids = [s.create_dream(inputs(ms, sessions), "m").id for _ in range(5)]
    s.cancel_dream(ids[0])
    s.archive_dream(ids[0])
    s.cancel_dream(ids[1])
    seen, page = [], None
    while True:
        p = s.list_dreams(limit=2, page=page)
        seen += [d.id for d in p.data]
        if p.next_page is None:
            break
        page = p.next_page
    assert seen == ids[:0:-1]
    assert [d.id for d in s.list_dreams(include_archived=True).data] == ids[::-1]
    assert [d.id for d in s.list_dreams(statuses=["canceled"]).data] == [ids[1]]
    assert [d.id for d in s.list_dreams(statuses=["canceled"], include_archived=True).data] == [
        ids[1], ids[0]]
    created = s.get_dream(ids[2]).created_at
    assert ids[2] not in [d.id for d in s.list_dreams(created_at_gt=created).data]
    assert ids[2] not in [d.id for d in s.list_dreams(created_at_lt=created).data]
    with pytest.raises(errors.InvalidRequest):
        s.list_dreams(statuses=["sleeping"])
    with pytest.raises(errors.InvalidCursor):
        s.list_dreams(page=p.next_page or "garbage")


def test_stale_dreams_are_found(store: Store) -> None:
    ms, sessions = setup_inputs(store)
    d = store.create_dream(inputs(ms, sessions), "m", runner={"host": "h", "pid": 1})
    assert store.stale_dreams(older_than=3600) == []
    assert store.stale_dreams(older_than=-1) == [(d.id, {"host": "h", "pid": 1})]
    assert store.live_dreams() == [(d.id, {"host": "h", "pid": 1})]
