"""Time travel (README "Time travel"): store.versions.snapshot on both backends, its API
extension and client, the read-only SnapshotStore a mount serves, and a model-based check that
a snapshot at every version boundary equals replaying the history up to it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from memfs import errors
from memfs.api import create_app
from memfs.client import Client
from memfs.daemons.snapshot import SnapshotStore
from memfs.models import Actor, Snapshot
from memfs.rules import format_time
from memfs.store import EMPTY_SHA256, Limits, Store
from tests.support import wait_until

KEY = "snapshot-test-key"
USER = Actor.user("user_tt")


def _state(snap: Snapshot) -> dict[str, tuple[str, str | None]]:
    return {m.path: (m.id, m.content) for m in snap.memories}


def _tick() -> str:
    """Now, as the store writes times, once the clock has moved past it (so that the next
    write is strictly later than the time returned)."""
    t = format_time(datetime.now(UTC))
    wait_until(lambda: format_time(datetime.now(UTC)) != t, interval=0.00001)
    return t


@pytest.fixture
def store(backend):
    return backend.open()


# -- the store ---------------------------------------------------------------------------------


def test_each_kind_of_at(store: Store) -> None:
    sid = store.stores.create("tt").id
    empty_time = _tick()
    sess = store.sessions.create([{"type": "memory_store", "memory_store_id": sid}])
    idle = store.sessions.create([{"type": "memory_store", "memory_store_id": sid}])
    a = store.memories.write_path(sid, "/a.md", "a1", actor=USER)
    t1 = _tick()
    me = Actor.session(sess.id)
    store.memories.write_path(sid, "/a.md", "a2", actor=me)
    b = store.memories.write_path(sid, "/b.md", "b1", actor=me)
    store.memories.rename_path(sid, "/a.md", "/c.md", actor=USER)
    store.memories.delete_path(sid, "/b.md", actor=USER)

    assert store.versions.snapshot(sid, empty_time).memories == []
    at_t1 = store.versions.snapshot(sid, t1, view="full")
    assert _state(at_t1) == {"/a.md": (a.id, "a1")}
    assert at_t1.time == t1 and at_t1.at == t1 and at_t1.after_version_id is None
    m = at_t1.memories[0]
    assert m.memory_version_id == a.memory_version_id and m.created_at == a.created_at
    assert m.updated_at == a.updated_at and m.content_size_bytes == 2

    # A version: right after it; basic view has no content.
    at_b = store.versions.snapshot(sid, b.memory_version_id)
    assert {x.path for x in at_b.memories} == {"/a.md", "/b.md"}
    assert all(x.content is None for x in at_b.memories)
    assert at_b.after_version_id == b.memory_version_id and at_b.time == b.updated_at

    # A session: just before its first write here.
    at_s = store.versions.snapshot(sid, sess.id, view="full")
    assert _state(at_s) == {"/a.md": (a.id, "a1")}
    assert at_s.session_id == sess.id and at_s.before_version_id is not None
    # A session that wrote nothing here: the state when it was created.
    assert store.versions.snapshot(sid, idle.id).memories == []
    assert store.versions.snapshot(sid, idle.id).time == idle.created_at

    # A future time is now.
    later = store.versions.snapshot(sid, "2999-01-01T00:00:00Z", view="full")
    assert _state(later) == {"/c.md": (a.id, "a2")}
    assert later.time <= format_time(datetime.now(UTC))
    # datetimes and offsets are the same instant.
    plus2 = datetime.fromisoformat(t1.replace("Z", "+00:00")).astimezone(
        timezone(timedelta(hours=2)))
    assert store.versions.snapshot(sid, plus2.isoformat()).time == t1
    assert store.versions.snapshot(sid, plus2).time == t1


def test_bad_at_is_a_clear_error(store: Store) -> None:
    sid = store.stores.create("tt").id
    other = store.stores.create("other").id
    v = store.memories.write_path(other, "/x.md", "x", actor=USER).memory_version_id
    for bad in ["", "  ", "yesterday", "memver", "2026-13-01T00:00:00Z", "x" * 10_000,
                "memver_\x00", "0001-01-01T00:00:00+14:00", "\ud800"]:
        with pytest.raises(errors.InvalidRequest):
            store.versions.snapshot(sid, bad)
    with pytest.raises(errors.InvalidRequest, match="another store"):
        store.versions.snapshot(sid, v)
    # RFC 3339 times have a zone: a local-looking time is refused, not taken as UTC.
    for naive in ["2026-12-01T09:00:00", "2026-12-01", "2026-12-01 09:00"]:
        with pytest.raises(errors.InvalidRequest, match="time zone"):
            store.versions.snapshot(sid, naive)
    at = "2026-12-01T09:00:00+01:00"
    assert store.versions.snapshot(sid, at).time == "2026-12-01T08:00:00.000000Z"
    for missing in ["memver_01zzzzzzzzzzzzzzzzzzzzzz", "sesn_01nothere"]:
        with pytest.raises(errors.NotFound):
            store.versions.snapshot(sid, missing)
    with pytest.raises(errors.NotFound):
        store.versions.snapshot("memstore_01nothere", "2026-01-01T00:00:00Z")
    with pytest.raises(errors.InvalidRequest):
        store.versions.snapshot(sid, "2026-01-01T00:00:00Z", view="everything")


def test_a_redacted_version_in_effect_is_empty_and_said(store: Store) -> None:
    sid = store.stores.create("tt").id
    m = store.memories.write_path(sid, "/secret.md", "password=hunter2", actor=USER)
    store.memories.write_path(sid, "/secret.md", "nothing here", actor=USER)
    store.versions.redact(sid, m.memory_version_id, actor=USER)
    snap = store.versions.snapshot(sid, m.memory_version_id, view="full")
    (only,) = snap.memories
    assert only.path == "/secret.md" and only.content == ""  # path: from the next version
    assert only.content_sha256 == EMPTY_SHA256 and only.content_size_bytes == 0
    assert set(snap.redacted) == {m.memory_version_id}
    assert snap.redacted[m.memory_version_id]


def test_retention_pruned_history_is_reported(backend) -> None:
    s = backend.open(limits=Limits(retention_days=1, retention_keep=2))
    sid = s.stores.create("tt").id
    early = _tick()
    old = s.memories.write_path(sid, "/old.md", "v0", actor=USER)
    then = _tick()  # old.md existed (v0)
    for i in range(1, 4):
        s.memories.write_path(sid, "/old.md", f"v{i}", actor=USER)
    kept = s.memories.write_path(sid, "/kept.md", "k", actor=USER)
    assert s.versions.snapshot(sid, then).unknown_memory_ids == []
    s.versions.prune(now=datetime.now(UTC) + timedelta(days=2))
    snap = s.versions.snapshot(sid, then)
    assert snap.memories == [] and snap.unknown_memory_ids == [old.id]
    # Before old.md was created (its live row says when) nothing is unknown.
    assert s.versions.snapshot(sid, early).unknown_memory_ids == []
    # After the oldest retained version the memory is known again.
    now = s.versions.snapshot(sid, _tick(), view="full")
    assert snap.unknown_memory_ids != now.unknown_memory_ids == []
    assert _state(now) == {"/old.md": (old.id, "v3"), "/kept.md": (kept.id, "k")}
    # created_at is the oldest retained version's time.
    assert next(m for m in now.memories if m.id == old.id).created_at > old.created_at


def test_a_memory_created_after_the_boundary_is_not_unknown(backend) -> None:
    """Pruning took a live memory's first versions, but its creation time is known: at a
    boundary before it, the memory did not exist (no "may have existed" warning)."""
    s = backend.open(limits=Limits(retention_days=1, retention_keep=1))
    sid = s.stores.create("tt").id
    before = _tick()
    m = s.memories.write_path(sid, "/late.md", "v0", actor=USER)
    then = _tick()
    s.memories.write_path(sid, "/late.md", "v1", actor=USER)
    s.versions.prune(now=datetime.now(UTC) + timedelta(days=2))
    assert s.versions.snapshot(sid, before).unknown_memory_ids == []
    assert s.versions.snapshot(sid, then).unknown_memory_ids == [m.id]


# -- the read-only view a mount serves ---------------------------------------------------------


def test_snapshot_store_is_read_only_and_ends_at_the_boundary(store: Store) -> None:
    sid = store.stores.create("tt").id
    a = store.memories.write_path(sid, "/a.md", "a1", actor=USER)
    later = store.memories.write_path(sid, "/a.md", "a2", actor=USER)
    view = SnapshotStore(store, store.versions.snapshot(sid, a.memory_version_id))
    assert [m.path for m in view.memories.tree(sid)] == ["/a.md"]
    assert view.memories.get(sid, a.id).content == "a1"
    assert view.memories.get(sid, a.id, view="basic").content is None
    assert view.memories.count(sid) == 1
    assert view.feed.last(sid) == 0 and view.feed.since(sid, 0) == []
    assert [v.id for v in view.versions.list(sid, limit=10).data] == [a.memory_version_id]
    assert view.versions.get(sid, a.memory_version_id).content == "a1"
    with pytest.raises(errors.NotFound):
        view.versions.get(sid, later.memory_version_id)
    with pytest.raises(errors.NotFound):
        view.memories.get(sid, "mem_01nothere")
    for write in (lambda: view.memories.write_path(sid, "/b.md", "b", actor=USER),
                  lambda: view.memories.delete_path(sid, "/a.md", actor=USER),
                  lambda: view.memories.rename_path(sid, "/a.md", "/b.md", actor=USER),
                  lambda: view.memories.rename_prefix(sid, "/x/", "/y/", actor=USER),
                  lambda: view.memories.delete_prefix(sid, "/x/", actor=USER),
                  lambda: view.memories.check_can_create(sid)):
        with pytest.raises(errors.ReadOnly):
            write()
    assert store.memories.get(sid, a.id).content == "a2"  # nothing changed


# -- the API extension and the client ----------------------------------------------------------


def test_api_hostile_input_is_4xx(store: Store) -> None:
    sid = store.stores.create("tt").id
    store.memories.write_path(sid, "/a.md", "a", actor=USER)
    with TestClient(create_app(store, [KEY])) as tc:
        h = {"x-api-key": KEY}
        url = f"/v1/memory_stores/{sid}/memfs/snapshot"
        for q, status in [("", 400), ("?at=", 400), ("?at=nope", 400), ("?at=" + "9" * 8000, 400),
                          ("?at=%00", 400), ("?at=%ED%A0%80", 400), ("?at=memver_01x", 404),
                          ("?at=sesn_01x", 404), ("?at=9999-12-31T23:59:59-23:00", 200),
                          ("?at=0001-01-01T00:00:00%2B14:00", 400), ("?at[]=x&at=y", 400)]:
            r = tc.get(url + q, headers=h)
            assert r.status_code == status, (q, r.text)
            if status != 200:
                assert r.json()["type"] == "error", q
        r = tc.get("/v1/memory_stores/memstore_01x/memfs/snapshot?at=2026-01-01T00:00:00Z",
                   headers=h)
        assert r.status_code == 404
        assert tc.get(url + "?at=2026-01-01T00:00:00Z").status_code == 401
        assert "/v1/memory_stores/{memory_store_id}/memfs/snapshot" in tc.get(
            "/openapi.json", headers=h).json()["paths"]


def test_client_round_trip(store: Store) -> None:
    sid = store.stores.create("tt").id
    a = store.memories.write_path(sid, "/a.md", "a1", actor=USER)
    store.memories.write_path(sid, "/b.md", "b1", actor=USER)
    store.memories.write_path(sid, "/a.md", "a2", actor=USER)
    store.versions.redact(sid, a.memory_version_id, actor=USER)
    with TestClient(create_app(store, [KEY])) as tc:
        def handler(request: httpx.Request) -> httpx.Response:
            r = tc.request(request.method, str(request.url), headers=dict(request.headers),
                           content=request.content)
            return httpx.Response(r.status_code, headers=r.headers, content=r.content)

        with Client("http://memfs", KEY, transport=httpx.MockTransport(handler)) as c:
            for at in [a.memory_version_id, _tick(), "2020-01-01T00:00:00Z"]:
                for view in ("basic", "full"):
                    want = store.versions.snapshot(sid, at, view=view)
                    assert c.versions.snapshot(sid, at, view=view) == want
            with pytest.raises(errors.InvalidRequest):
                c.versions.snapshot(sid, "nope")
            with pytest.raises(errors.NotFound):
                c.versions.snapshot(sid, "memver_01x")
            remote = SnapshotStore(c, c.versions.snapshot(sid, a.memory_version_id))
            (m,) = remote.memories.tree(sid)
            assert remote.memories.get(sid, m.id).content == ""  # redacted in effect
            assert remote.redacted_at(m.memory_version_id)


# -- model-based: every boundary equals replaying the history ----------------------------------

PATHS = ["/a.md", "/b.md", "/c.md", "/d/x.md"]
_write = st.tuples(st.just("write"), st.sampled_from(PATHS), st.text("xyz", max_size=3))
_op = st.one_of(
    _write, _write,
    st.tuples(st.just("rename"), st.sampled_from(PATHS), st.sampled_from(PATHS)),
    st.tuples(st.just("delete"), st.sampled_from(PATHS), st.just("")),
)
_history = st.lists(st.tuples(st.integers(0, 1), _op), min_size=8, max_size=40)
#: What the model-based tests covered (printed by -s; the closing note's figures).
COVERED = {"examples": 0, "version_boundaries": 0, "time_boundaries": 0, "session_boundaries": 0}


def _replay(versions: list, upto: int) -> dict[str, tuple[str, str]]:
    """The naive replay: each memory's newest version among the first ``upto``, unless
    deleted."""
    last: dict[str, object] = {}
    for v in versions[:upto]:
        last[v.memory_id] = v
    return {v.path: (v.memory_id, v.content) for v in last.values()  # type: ignore[attr-defined]
            if v.operation != "deleted"}  # type: ignore[attr-defined]


def check_history(store: Store, history: list) -> None:
    sid = store.stores.create("model").id
    sessions = [store.sessions.create([{"type": "memory_store", "memory_store_id": sid}]).id
                for _ in range(2)]
    model: dict[str, tuple[str, str]] = {}  # path -> (memory id, content)
    states = [(_tick(), dict(model))]  # (a time right after, the state then)
    first_write: dict[str, dict[str, tuple[str, str]]] = {}  # session -> state before it
    op_last: list[tuple[str, dict[str, tuple[str, str]]]] = []  # (its last version, state)
    for who, (kind, p, q) in history:
        actor = Actor.session(sessions[who])
        before = dict(model)
        try:
            if kind == "write":
                m = store.memories.write_path(sid, p, q, actor=actor)
                model[p] = (m.id, q)
            elif kind == "rename":
                m = store.memories.rename_path(sid, p, q, actor=actor)
                if p != q:
                    moved = model.pop(p)
                    model[q] = (model[q][0], moved[1]) if q in model else moved
            else:
                store.memories.delete_path(sid, p, actor=actor)
                del model[p]
        except errors.NotFound:
            assert p not in model
            continue
        newest = store.versions.list(sid, limit=1).data
        if newest and (not op_last or newest[0].id != op_last[-1][0]):
            op_last.append((newest[0].id, dict(model)))
            first_write.setdefault(sessions[who], before)
        states.append((_tick(), dict(model)))
    versions = []  # every version, oldest first (a page of view=full holds at most 20)
    page = None
    while True:
        got = store.versions.list(sid, limit=20, view="full", page=page)
        versions += got.data
        if not (page := got.next_page):
            break
    versions.reverse()
    for i, v in enumerate(versions, 1):
        assert _state(store.versions.snapshot(sid, v.id, view="full")) == _replay(versions, i), v
    for vid, state in op_last:
        assert _state(store.versions.snapshot(sid, vid, view="full")) == {
            p: (mid, c) for p, (mid, c) in state.items()}
    for t, state in states:
        assert _state(store.versions.snapshot(sid, t, view="full")) == state, t
    for s in sessions:
        assert _state(store.versions.snapshot(sid, s, view="full")) == first_write.get(s, {}), s
    COVERED["examples"] += 1
    COVERED["version_boundaries"] += len(versions)
    COVERED["time_boundaries"] += len(states)
    COVERED["session_boundaries"] += len(sessions)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(history=_history)
def test_model_every_boundary_sqlite(tmp_path_factory, history) -> None:
    s = Store(tmp_path_factory.mktemp("model") / "m.db")
    try:
        check_history(s, history)
    finally:
        s.close()


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(history=_history)
def test_model_every_boundary_both_backends(backend, history) -> None:
    check_history(backend.open(), history)


def test_model_coverage_report(capsys) -> None:
    """Say what the model-based tests covered (run after them: -s shows it)."""
    with capsys.disabled():
        print(f"\nsnapshot model coverage: {COVERED}")


def test_the_pruned_warning_counts_in_words() -> None:
    from dataclasses import replace

    from memfs.models import Snapshot

    snap = Snapshot.from_dict({"memory_store_id": "memstore_x", "at": "2026-01-01T00:00:00Z",
                               "time": "2026-01-01T00:00:00.000000Z"})
    assert snap.pruned_warning() is None
    snap = replace(snap, unknown_memory_ids=["mem_1"])
    assert snap.pruned_warning() == (
        "1 memory may have existed then but its versions before it were pruned (retention), "
        "so it is not shown: mem_1")
    w = replace(snap, unknown_memory_ids=[f"mem_{i}" for i in range(7)]).pruned_warning()
    assert w is not None and w.startswith("7 memories may have existed then but their ")
    assert w.endswith("mem_0, mem_1, mem_2, mem_3, mem_4 and 2 more")


def test_run_store_ref_with_at_and_no_name_is_a_clear_error(store: Store) -> None:
    from memfs.launcher.plan import Attachment

    store.stores.create("notes")
    with pytest.raises(errors.InvalidRequest, match="no store name before '@'"):
        Attachment.parse("@2099-01-01T00:00:00Z").resolve(store)
    a = Attachment.parse("notes@2099-01-01T00:00:00Z")
    assert a.resolve(store).name == "notes" and a.at == "2099-01-01T00:00:00Z"
    assert a.access == "read_only"
