"""Undo a session (memfs.store.revert, store.undo.revert): every case of the plan, on SQLite and
PostgreSQL, through the Store; and the pure plan on hand-made rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memfs import Actor, LimitExceeded, NotFound, StoreArchived
from memfs.store import Limits, Store
from memfs.store.revert import Version, plan, render
from tests.support.backend import Backend

USER = Actor.user("user_alice")
OTHER = Actor.user("user_bob")
REVERTER = Actor.user("user_carol")


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.open()


class World:
    """A store, a session attached to it, and helpers to write as the session or a user."""

    def __init__(self, store: Store, *others: str) -> None:
        self.s = store
        self.sid = store.stores.create("notes").id
        #: The ids of more stores attached to the session (named ``others``).
        self.others = [store.stores.create(name).id for name in others]
        self.session = store.sessions.create(
            [{"type": "memory_store", "memory_store_id": sid}
             for sid in (self.sid, *self.others)]).id
        self.S = Actor.session(self.session)

    def state(self) -> dict[str, tuple[str, str]]:
        """path -> (memory id, content) of every live memory."""
        return {m.path: (m.id, self.s.memories.get(self.sid, m.id).content or "")
                for m in self.s.memories.tree(self.sid)}

    def contents(self) -> dict[str, str]:
        return {p: c for p, (_, c) in self.state().items()}

    def versions(self) -> list[Any]:
        return self.s.versions.list(self.sid, limit=100).data


def revert(w: World, target: str | None = None, **kw: Any) -> dict[str, Any]:
    return w.s.undo.revert(target or w.session, actor=REVERTER, **kw)


def test_created_memory_is_deleted_and_the_revert_is_recorded(store: Store) -> None:
    w = World(store)
    store.memories.write_path(w.sid, "/keep.md", "k", actor=USER)
    store.memories.write_path(w.sid, "/new.md", "n", actor=w.S)
    r = revert(w)
    assert w.contents() == {"/keep.md": "k"}
    assert [a["action"] for a in r["actions"]] == ["delete"]
    assert r["id"].startswith("memrevert_") and r["complete"] and not r["conflicts"]
    assert r["undo"] == f"memfs session revert {r['id']}"
    newest = w.versions()[0]
    assert newest.operation == "deleted" and newest.created_by == REVERTER
    assert newest.id == r["actions"][0]["memory_version_id"]


def test_modified_memory_gets_its_content_back(store: Store) -> None:
    w = World(store)
    m = store.memories.write_path(w.sid, "/a.md", "before", actor=USER)
    store.memories.write_path(w.sid, "/a.md", "during 1", actor=w.S)
    store.memories.write_path(w.sid, "/a.md", "during 2", actor=w.S)
    r = revert(w)
    assert w.state() == {"/a.md": (m.id, "before")}
    assert r["actions"][0]["action"] == "restore" and r["actions"][0]["content_changed"]


def test_rename_is_undone_as_a_path_change_of_the_same_memory(store: Store) -> None:
    w = World(store)
    m = store.memories.write_path(w.sid, "/a.md", "x", actor=USER)
    store.memories.rename_path(w.sid, "/a.md", "/dir/b.md", actor=w.S)
    r = revert(w)
    assert w.state() == {"/a.md": (m.id, "x")}
    a = r["actions"][0]
    assert (a["action"], a["old_path"], a["path"], a["content_changed"]) == (
        "restore", "/dir/b.md", "/a.md", False)
    assert "rename    /dir/b.md -> /a.md" in render(r)


def test_rename_over_restores_both_memories(store: Store) -> None:
    # rename_path over /b keeps /b's memory (new content) and deletes /a's.
    w = World(store)
    ma = store.memories.write_path(w.sid, "/a.md", "A", actor=USER)
    mb = store.memories.write_path(w.sid, "/b.md", "B", actor=USER)
    store.memories.rename_path(w.sid, "/a.md", "/b.md", actor=w.S)
    assert w.contents() == {"/b.md": "A"}
    r = revert(w)
    assert w.state() == {"/a.md": (ma.id, "A"), "/b.md": (mb.id, "B")}
    assert sorted(a["action"] for a in r["actions"]) == ["recreate", "restore"]


def test_deleted_memory_comes_back_with_its_id_and_one_history(store: Store) -> None:
    w = World(store)
    m = store.memories.write_path(w.sid, "/d.md", "old", actor=USER)
    store.memories.write_path(w.sid, "/d.md", "changed", actor=w.S)
    store.memories.delete_path(w.sid, "/d.md", actor=w.S)
    r = revert(w)
    assert w.state() == {"/d.md": (m.id, "old")}
    ops = [v.operation for v in store.versions.list(w.sid, memory_id=m.id).data]
    assert ops == ["created", "deleted", "modified", "created"]  # newest first
    assert r["actions"][0]["action"] == "recreate"


def test_swap_and_rename_chain_within_the_session(store: Store) -> None:
    w = World(store)
    ma = store.memories.write_path(w.sid, "/a.md", "A", actor=USER)
    mb = store.memories.write_path(w.sid, "/b.md", "B", actor=USER)
    mc = store.memories.write_path(w.sid, "/c.md", "C", actor=USER)
    store.memories.rename_path(w.sid, "/a.md", "/tmp.md", actor=w.S)   # swap a and b
    store.memories.rename_path(w.sid, "/b.md", "/a.md", actor=w.S)
    store.memories.rename_path(w.sid, "/tmp.md", "/b.md", actor=w.S)
    store.memories.rename_path(w.sid, "/c.md", "/c2.md", actor=w.S)    # chain c -> c2 -> c3
    store.memories.rename_path(w.sid, "/c2.md", "/c3.md", actor=w.S)
    r = revert(w)
    assert w.state() == {"/a.md": (ma.id, "A"), "/b.md": (mb.id, "B"), "/c.md": (mc.id, "C")}
    assert r["complete"] and len(r["actions"]) == 3


def test_directory_rename_is_undone(store: Store) -> None:
    w = World(store)
    m1 = store.memories.write_path(w.sid, "/dir/a.md", "a", actor=USER)
    m2 = store.memories.write_path(w.sid, "/dir/sub/b.md", "b", actor=USER)
    store.memories.rename_prefix(w.sid, "/dir/", "/moved/", actor=w.S)
    store.memories.write_path(w.sid, "/dir", "a file where the directory was", actor=w.S)
    r = revert(w)
    assert w.state() == {"/dir/a.md": (m1.id, "a"), "/dir/sub/b.md": (m2.id, "b")}
    assert r["complete"] and len(r["actions"]) == 3


def test_a_directory_deleted_at_once_comes_back_under_its_ids(store: Store) -> None:
    # issue 42: an MCP client's memory_delete of a directory (memories.delete_prefix)
    w = World(store)
    m1 = store.memories.write_path(w.sid, "/dir/a.md", "a", actor=USER)
    m2 = store.memories.write_path(w.sid, "/dir/sub/b.md", "b", actor=USER)
    store.memories.delete_prefix(w.sid, "/dir/", actor=w.S)
    assert w.state() == {}
    r = revert(w)
    assert w.state() == {"/dir/a.md": (m1.id, "a"), "/dir/sub/b.md": (m2.id, "b")}
    assert r["complete"] and len(r["actions"]) == 2


def test_change_by_another_actor_is_a_conflict_with_both_sides(store: Store) -> None:
    w = World(store)
    m = store.memories.write_path(w.sid, "/a.md", "before", actor=USER)
    store.memories.write_path(w.sid, "/a.md", "session", actor=w.S)
    store.memories.write_path(w.sid, "/a.md", "bob", actor=OTHER)
    store.memories.write_path(w.sid, "/s.md", "only the session", actor=w.S)
    r = revert(w)
    assert w.contents() == {"/a.md": "bob"}  # /s.md reverted, /a.md left
    (c,) = r["conflicts"]
    assert (c["memory_id"], c["reason"], c["path"], c["pre_path"]) == (
        m.id, "changed", "/a.md", "/a.md")
    assert c["reverted_version"]["created_by"] == w.S.to_dict()
    assert c["current_version"]["created_by"] == OTHER.to_dict()
    assert c["current_version"]["content_size_bytes"] == 3
    assert "-session" in c["diff"] and "+bob" in c["diff"]
    assert not r["complete"] and len(r["actions"]) == 1
    text = render(r)
    assert "CONFLICT  /a.md: changed" in text and "user_actor:user_bob" in text


def test_force_overwrites_the_other_actors_change(store: Store) -> None:
    w = World(store)
    store.memories.write_path(w.sid, "/a.md", "before", actor=USER)
    store.memories.write_path(w.sid, "/a.md", "session", actor=w.S)
    store.memories.write_path(w.sid, "/a.md", "bob", actor=OTHER)
    r = revert(w, force=True)
    assert w.contents() == {"/a.md": "before"}
    assert r["complete"] and r["actions"][0]["forced"] and r["force"]


def test_deleted_by_another_actor_after_a_session_create_is_unchanged(store: Store) -> None:
    w = World(store)
    store.memories.write_path(w.sid, "/a.md", "session", actor=w.S)
    store.memories.delete_path(w.sid, "/a.md", actor=OTHER)
    r = revert(w)
    assert r["complete"] and not r["actions"] and r["id"] is None
    assert [u["memory_id"] for u in r["unchanged"]] and "nothing was written" in render(r)


def test_pre_session_path_taken_by_another_memory(store: Store) -> None:
    w = World(store)
    m = store.memories.write_path(w.sid, "/a.md", "A", actor=USER)
    store.memories.rename_path(w.sid, "/a.md", "/b.md", actor=w.S)
    squatter = store.memories.write_path(w.sid, "/a.md", "new one", actor=OTHER)
    for force in (False, True):  # --force never deletes an unrelated memory
        r = revert(w, force=force)
        (c,) = r["conflicts"]
        assert (c["reason"], c["conflicting_memory_id"], c["conflicting_path"]) == (
            "path_taken", squatter.id, "/a.md")
    assert w.state() == {"/a.md": (squatter.id, "new one"), "/b.md": (m.id, "A")}


def test_overlap_rule_blocks_a_recreate(store: Store) -> None:
    w = World(store)
    store.memories.write_path(w.sid, "/a", "file", actor=USER)
    store.memories.delete_path(w.sid, "/a", actor=w.S)
    blocker = store.memories.write_path(w.sid, "/a/inner.md", "dir now", actor=OTHER)
    r = revert(w)
    (c,) = r["conflicts"]
    assert c["reason"] == "path_taken" and c["conflicting_memory_id"] == blocker.id
    assert "overlap" in c["message"]


def test_a_blocked_memory_that_stays_blocks_the_next(store: Store) -> None:
    # m1 /x -> /y (session), m2 /y... : m1 cannot go back (squatter at /x), so it stays at /y,
    # and m2, which the session moved from /y to /z, cannot go back either.
    w = World(store)
    m1 = store.memories.write_path(w.sid, "/x", "1", actor=USER)
    m2 = store.memories.write_path(w.sid, "/y", "2", actor=USER)
    store.memories.rename_path(w.sid, "/y", "/z", actor=w.S)
    store.memories.rename_path(w.sid, "/x", "/y", actor=w.S)
    store.memories.write_path(w.sid, "/x", "squat", actor=OTHER)
    r = revert(w)
    assert {c["memory_id"]: c["reason"] for c in r["conflicts"]} == {
        m1.id: "path_taken", m2.id: "path_taken"}
    assert w.contents() == {"/x": "squat", "/y": "1", "/z": "2"}


def test_a_memory_refused_for_a_path_another_gives_up_gets_it(store: Store) -> None:
    # Two memories the session moved away from /d both want it back. m1 (first in the plan)
    # is placed at /d, so m2 (staying at /d/e) is refused; m2 then blocks m1 (/d/e is under
    # /d), so m1 stays at /a too: /d is free after all and m2 goes back to it. Found by the
    # model test (test_revert_model.py), which left both where they were.
    w = World(store)
    other = Actor.session(store.sessions.create(
        [{"type": "memory_store", "memory_store_id": w.sid}]).id)
    first = store.memories.write_path(w.sid, "/d", "x", actor=other)
    store.memories.rename_path(w.sid, "/d", "/a", actor=w.S)
    second = store.memories.write_path(w.sid, "/d", "x", actor=other)
    store.memories.rename_path(w.sid, "/d", "/d/e", actor=w.S)
    for dry_run in (True, False):
        r = revert(w, force=True, dry_run=dry_run)
        (c,) = r["conflicts"]
        assert (c["memory_id"], c["reason"], c["conflicting_memory_id"]) == (
            first.id, "path_taken", second.id)
        assert [(a["memory_id"], a["path"]) for a in r["actions"]] == [(second.id, "/d")]
    assert w.state() == {"/a": (first.id, "x"), "/d": (second.id, "x")}


def test_redacted_pre_state_is_unrecoverable(store: Store) -> None:
    w = World(store)
    v1 = store.memories.write_path(w.sid, "/a.md", "secret", actor=USER)
    store.memories.write_path(w.sid, "/a.md", "public", actor=USER)
    store.memories.write_path(w.sid, "/a.md", "session", actor=w.S)
    store.versions.redact(w.sid, store.versions.list(w.sid, limit=10).data[1].id, actor=USER)
    assert v1  # the redacted one is the version just before the session's
    r = revert(w, force=True)
    (c,) = r["conflicts"]
    assert c["reason"] == "unrecoverable" and "redacted" in c["message"]
    assert w.contents() == {"/a.md": "session"}


def test_pruned_pre_state_is_unrecoverable(backend: Backend) -> None:
    store = backend.open(limits=Limits(retention_days=1, retention_keep=1))
    w = World(store)
    store.memories.write_path(w.sid, "/a.md", "before", actor=USER)
    store.memories.write_path(w.sid, "/a.md", "session", actor=w.S)
    assert store.versions.prune(now=datetime.now(UTC) + timedelta(days=3)) == 1
    r = revert(w)
    (c,) = r["conflicts"]
    assert c["reason"] == "unrecoverable" and "pruned" in c["message"]


def test_dry_run_writes_nothing_and_shows_the_same_plan(store: Store) -> None:
    w = World(store)
    store.memories.write_path(w.sid, "/a.md", "before", actor=USER)
    store.memories.write_path(w.sid, "/a.md", "session", actor=w.S)
    store.memories.write_path(w.sid, "/b.md", "b", actor=w.S)
    seq = store.feed.last(w.sid)
    before = (w.state(), [v.id for v in w.versions()])
    dry = revert(w, dry_run=True)
    assert (w.state(), [v.id for v in w.versions()]) == before
    assert store.feed.last(w.sid) == seq and dry["id"] is None and dry["dry_run"]
    assert "dry run: would revert" in render(dry)
    # no version ids of the rolled-back transaction (they do not exist)
    assert dry["actions"] and all(a["memory_version_id"] is None for a in dry["actions"])
    real = revert(w)
    strip = ("memory_version_id",)
    assert [{k: v for k, v in a.items() if k not in strip} for a in dry["actions"]] == [
        {k: v for k, v in a.items() if k not in strip} for a in real["actions"]]


def test_nothing_to_do(store: Store) -> None:
    w = World(store)
    r = revert(w)
    assert r == {**r, "actions": [], "conflicts": [], "unchanged": [], "id": None,
                 "complete": True}
    # Reverting twice: the second finds everything already in its pre-session state.
    store.memories.write_path(w.sid, "/a.md", "s", actor=w.S)
    assert revert(w)["id"]
    again = revert(w)
    assert again["id"] is None and not again["actions"] and len(again["unchanged"]) == 1


def test_revert_of_a_revert_restores_the_session_result(store: Store) -> None:
    w = World(store)
    ma = store.memories.write_path(w.sid, "/a.md", "A", actor=USER)
    md = store.memories.write_path(w.sid, "/d.md", "D", actor=USER)
    store.memories.write_path(w.sid, "/a.md", "A2", actor=w.S)
    store.memories.rename_path(w.sid, "/a.md", "/moved.md", actor=w.S)
    store.memories.delete_path(w.sid, "/d.md", actor=w.S)
    new = store.memories.write_path(w.sid, "/n.md", "N", actor=w.S)
    after_session = w.state()
    r1 = revert(w)
    assert w.state() == {"/a.md": (ma.id, "A"), "/d.md": (md.id, "D")}
    r2 = revert(w, r1["id"])
    assert w.state() == after_session and r2["target"] == {"type": "revert", "id": r1["id"]}
    assert after_session["/n.md"][0] == new.id
    r3 = revert(w, r2["id"])
    assert w.state() == {"/a.md": (ma.id, "A"), "/d.md": (md.id, "D")} and r3["complete"]


def test_several_stores_in_one_transaction(backend: Backend) -> None:
    store = backend.open(limits=Limits(max_memories=2))
    w = World(store, "other")
    other = w.others[0]
    store.memories.write_path(other, "/o.md", "o", actor=USER)
    store.memories.delete_path(other, "/o.md", actor=w.S)
    store.memories.write_path(w.sid, "/a.md", "a", actor=w.S)
    # The other store filled up meanwhile: re-creating /o.md is refused, and nothing changes.
    store.memories.write_path(other, "/1.md", "1", actor=OTHER)
    store.memories.write_path(other, "/2.md", "2", actor=OTHER)
    before = w.contents()
    with pytest.raises(LimitExceeded, match="nothing was changed"):
        revert(w)
    with pytest.raises(LimitExceeded):
        revert(w, dry_run=True)  # a dry run says so too
    assert w.contents() == before
    store.memories.delete_path(other, "/2.md", actor=OTHER)
    r = revert(w)
    assert r["complete"] and {a["memory_store_id"] for a in r["actions"]} == {w.sid, other}
    assert w.contents() == {} and store.memories.get_by_path(other, "/o.md").content == "o"
    # With several stores, the text names each path's store.
    text = render(r)
    assert f"  delete    {w.sid}:/a.md" in text and f"  recreate  {other}:/o.md" in text


def test_archived_store_refuses_and_unknown_targets(store: Store) -> None:
    w = World(store)
    store.memories.write_path(w.sid, "/a.md", "a", actor=USER)
    store.memories.write_path(w.sid, "/a.md", "b", actor=w.S)
    store.stores.archive(w.sid)
    with pytest.raises(StoreArchived):
        revert(w)
    with pytest.raises(NotFound, match="sesn_nope"):
        store.undo.revert("sesn_nope", actor=REVERTER)
    with pytest.raises(NotFound, match="memrevert_nope"):
        store.undo.revert("memrevert_nope", actor=REVERTER)


def test_archived_store_refuses_a_delete_too(store: Store) -> None:
    # A memory the session created in a store archived since is not deleted from it (before,
    # a delete step skipped the archived check that restores and recreates make).
    w = World(store, "other")
    other = w.others[0]
    store.memories.write_path(w.sid, "/a.md", "a", actor=w.S)
    store.memories.write_path(other, "/o.md", "o", actor=w.S)
    store.stores.archive(other)
    for dry in (True, False):
        with pytest.raises(StoreArchived, match="nothing was changed"):
            revert(w, dry_run=dry)
    assert w.contents() == {"/a.md": "a"}
    assert [m.path for m in store.memories.tree(other)] == ["/o.md"]


def test_only_the_stores_attached_to_the_session(store: Store) -> None:
    # A copy of the store (memfs import --name) keeps its versions' authors: the session's
    # versions are in a store it never had attached. Before, the revert deleted /agent.md
    # from that copy too.
    import io

    from memfs import transfer

    w = World(store)
    store.memories.write_path(w.sid, "/keep.md", "k", actor=USER)
    store.memories.write_path(w.sid, "/agent.md", "by the agent", actor=w.S)
    out = io.BytesIO()
    transfer.write_archive(store, w.sid, out, history=True)
    copy = transfer.import_archive(store, io.BytesIO(out.getvalue()), name="backup")
    backup = copy["store"]["id"]
    r = revert(w)
    assert [(a["action"], a["memory_store_id"]) for a in r["actions"]] == [("delete", w.sid)]
    assert w.contents() == {"/keep.md": "k"}
    assert sorted(m.path for m in store.memories.tree(backup)) == ["/agent.md", "/keep.md"]


def test_the_change_feed_reports_every_step(store: Store) -> None:
    w = World(store)
    store.memories.write_path(w.sid, "/a.md", "A", actor=USER)
    store.memories.rename_path(w.sid, "/a.md", "/b.md", actor=w.S)
    store.memories.write_path(w.sid, "/n.md", "n", actor=w.S)
    seq = store.feed.last(w.sid)
    revert(w)
    changes = {(c.op, c.path, c.old_path) for c in store.feed.since(w.sid, seq)}
    assert changes == {("put", "/a.md", "/b.md"), ("delete", "/n.md", None)}


# -- the pure plan, on hand-made rows -------------------------------------------------------------


def _v(vid: str, op: str, path: str | None, content: str | None, who: str = "sesn_1",
       mid: str = "mem_1", redacted: bool = False) -> Version:
    return Version(vid, mid, "memstore_1", op, f"2026-01-01T00:00:0{vid[-1]}.000000Z", path,
                   content, None if content is None else "sha:" + content,
                   "2026" if redacted else None,
                   "session_actor" if who.startswith("sesn") else "user_actor", who)


def test_plan_on_rows() -> None:
    hist = [_v("v1", "created", "/a", "x", "user_1"), _v("v2", "modified", "/b", "y"),
            _v("v3", "modified", "/c", "z", "user_2")]
    (s,) = plan({"v2"}, {"mem_1": hist}, {"memstore_1": {"mem_1": "/c"}}, force=False)
    assert (s.action, s.reason, s.current and s.current.id) == ("conflict", "changed", "v3")
    (s,) = plan({"v2"}, {"mem_1": hist}, {"memstore_1": {"mem_1": "/c"}}, force=True)
    assert (s.action, s.path, s.old_path, s.content, s.forced) == ("restore", "/a", "/c", "x",
                                                                   True)
    # the first retained version is not a 'created' and nothing before it: pruned
    (s,) = plan({"v2"}, {"mem_1": hist[1:]}, {}, force=True)
    assert (s.action, s.reason) == ("conflict", "unrecoverable")
