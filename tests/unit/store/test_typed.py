"""``store.typed`` (typed.py, SPEC §8): a store described, expired memories swept as versions by
the expiry actor and brought back, a memory rewritten during a sweep left alone, a store made
before typed memories only reported, a type cleared and undone, and the memories written before
the index derived when the database is opened. On SQLite and on PostgreSQL."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memfs import InvalidRequest, NotFound
from memfs.store import EXPIRY_ACTOR, Limits, Store
from memfs.store import frontmatter as fm
from tests.support.backend import Backend
from tests.support.storekit import API, USER

LATER = datetime.now(UTC) + timedelta(days=8)


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.open()


def paths(store: Store, sid: str) -> list[str]:
    return [m.path for m in store.memories.tree(sid)]


def test_a_context_memory_is_swept_after_7_days_as_a_version_and_restored(store: Store) -> None:
    sid = store.stores.create("notes").id
    m = store.memories.write_path(sid, "/context/today.md", "standup at 10", actor=API)
    store.memories.write_path(sid, "/knowledge/api.md", "v2 is live", actor=API)
    assert store.typed.sweep(sid)["deleted"] == []  # nothing has expired yet
    assert store.typed.describe(sid, now=LATER)["expired"]["count"] == 1
    assert store.typed.describe(sid, now=LATER)["memories"] == 1  # out of the counts at once

    report = store.typed.sweep(sid, now=LATER)
    assert [d["path"] for d in report["deleted"]] == ["/context/today.md"]
    assert paths(store, sid) == ["/knowledge/api.md"]
    versions = store.versions.list(sid, memory_id=m.id).data
    deleted = [v for v in versions if v.operation == "deleted"]
    assert len(deleted) == 1 and deleted[0].created_by == EXPIRY_ACTOR
    # versions restore brings it back, as a new change: it lives 7 more days
    [created] = [v for v in versions if v.operation == "created"]
    store.versions.restore(sid, created.id, actor=USER)
    assert paths(store, sid) == ["/context/today.md", "/knowledge/api.md"]
    assert store.typed.sweep(sid)["deleted"] == []


def test_a_sweep_is_undone_by_its_revert(store: Store) -> None:
    sid = store.stores.create("notes").id
    for i in range(3):
        store.memories.write_path(sid, f"/context/{i}.md", f"note {i}", actor=API)
    report = store.typed.sweep(sid, now=LATER, batch=2)
    assert len(report["deleted"]) == 3 and len(report["reverts"]) == 2  # bounded batches
    for revert_id in report["reverts"]:
        store.undo.revert(revert_id, actor=USER)
    assert paths(store, sid) == [f"/context/{i}.md" for i in range(3)]


def test_a_memory_rewritten_during_a_sweep_is_left_alone(store: Store) -> None:
    sid = store.stores.create("notes").id
    store.memories.write_path(sid, "/context/a.md", "a", actor=API)
    store.memories.write_path(sid, "/context/b.md", "b", actor=API)
    seen = store.typed.expired(sid, now=LATER)
    assert [s["path"] for s in seen] == ["/context/a.md", "/context/b.md"]
    # Another writer, between the sweep's read and its delete: a new version of a. (Its new
    # expiry is still before LATER: the version, not the time, is what spares it.)
    store.memories.write_path(sid, "/context/a.md", "a, again", actor=API)
    report = store.typed.delete_expired(seen, now=LATER)
    assert [s["path"] for s in report.deleted] == ["/context/b.md"]
    assert [s["path"] for s in report.skipped] == ["/context/a.md"]
    assert paths(store, sid) == ["/context/a.md"]


def test_a_store_made_before_typed_memories_is_only_reported(store: Store) -> None:
    sid = store.stores.create("old").id
    store.memories.write_path(sid, "/context/a.md", "a", actor=API)
    with store.write() as c:  # as the migration leaves a store made before it
        c.execute("UPDATE stores SET expiry = 'report' WHERE id = ?", (sid,))
    d = store.typed.describe(sid, now=LATER)
    assert d["expiry"] == "report" and d["expired"]["count"] == 1 and d["memories"] == 1
    for dry_run in (True, False):
        report = store.typed.sweep(sid, now=LATER, dry_run=dry_run)
        assert report["deleted"] == [] and [r["path"] for r in report["reported"]] == [
            "/context/a.md"]
    assert store.typed.sweep(None, now=LATER)["deleted"] == []  # a sweep of every store too
    assert paths(store, sid) == ["/context/a.md"]
    store.stores.update(sid, metadata={fm.EXPIRY_KEY: "on"})  # a person turns it on
    assert [d["path"] for d in store.typed.sweep(None, now=LATER)["deleted"]] == [
        "/context/a.md"]
    assert paths(store, sid) == []


def test_a_dry_run_deletes_nothing_and_an_archived_store_is_not_swept(store: Store) -> None:
    sid = store.stores.create("n").id
    store.memories.write_path(sid, "/a.md", "---\nexpires: 2020-01-01\n---\nold", actor=API)
    assert [d["path"] for d in store.typed.sweep(sid, dry_run=True)["deleted"]] == ["/a.md"]
    assert paths(store, sid) == ["/a.md"]
    store.stores.archive(sid)
    assert store.typed.sweep(sid)["deleted"] == [] and paths(store, sid) == ["/a.md"]
    with pytest.raises(NotFound):
        store.typed.sweep("memstore_nope")


def test_describe(store: Store) -> None:
    sid = store.stores.create("n").id
    w = store.memories.write_path
    w(sid, "/preferences/style.md", "---\ntags: [style, go]\n---\nshort", actor=API)
    w(sid, "/context/today.md", "today", actor=API)
    w(sid, "/decisions/db.md", "---\ntags: [db]\npinned: true\n---\npostgres", actor=API)
    w(sid, "/loose.md", "---\nimportance: huge\ntags: [go]\n---\n", actor=API)
    d = store.typed.describe(sid)
    assert d["memories"] == 4 and d["pinned"] == 1
    assert d["by_type"] == {"(none)": 1, "context": 1, "decision": 1, "preference": 1}
    assert d["by_directory"] == {"/": 1, "/context/": 1, "/decisions/": 1, "/preferences/": 1}
    assert d["by_tag"] == {"go": 2, "db": 1, "style": 1}
    assert d["expiring_soon"]["count"] == 1 and d["expired"]["count"] == 0
    assert d["oldest_change"]["path"] == "/preferences/style.md"
    assert d["newest_change"]["path"] == "/loose.md"
    assert d["warnings"]["count"] == 1 and d["warnings"]["memories"][0]["path"] == "/loose.md"
    assert d["expiry"] == "on" and [t["name"] for t in d["types"]["types"]] == [
        "preference", "context", "knowledge", "decision"]
    with pytest.raises(NotFound):
        store.typed.describe("memstore_nope")


def test_a_type_is_cleared_in_one_transaction_and_undone(store: Store) -> None:
    sid = store.stores.create("n").id
    for i in range(3):
        store.memories.write_path(sid, f"/context/{i}.md", str(i), actor=API)
    store.memories.write_path(sid, "/x.md", "---\ntype: context\n---\nx", actor=API)
    store.memories.write_path(sid, "/knowledge/k.md", "k", actor=API)
    dry = store.typed.clear_type(sid, "context", actor=USER, dry_run=True)
    assert len(dry["deleted"]) == 4 and dry["revert_id"] is None
    assert len(paths(store, sid)) == 5
    done = store.typed.clear_type(sid, "context", actor=USER)
    assert done["deleted"] == ["/context/0.md", "/context/1.md", "/context/2.md", "/x.md"]
    assert paths(store, sid) == ["/knowledge/k.md"]
    store.undo.revert(done["revert_id"], actor=USER)
    assert len(paths(store, sid)) == 5
    with pytest.raises(InvalidRequest, match="not a type"):
        store.typed.clear_type(sid, "todo", actor=USER)


def test_memories_before_the_index_are_derived_when_the_database_opens(backend: Backend) -> None:
    s = backend.open()
    sid = s.stores.create("n").id
    m = s.memories.write_path(sid, "/context/a.md", "---\ntags: [x]\n---\na", actor=API)
    with s.write() as c:  # as the migration leaves the memories written before it
        c.execute("UPDATE memories SET mtype = NULL, importance = NULL, expires_at = NULL, "
                  "meta = NULL, meta_rev = NULL")
    again = backend.open()
    assert again.memories.get(sid, m.id).memfs_meta == m.memfs_meta


def test_the_migration_leaves_old_stores_reporting_and_derives_their_memories(
        tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Store(path, limits=Limits()) as s:
        sid = s.stores.create("n").id
        s.memories.write_path(sid, "/context/a.md", "a", actor=API)
    conn = sqlite3.connect(path)  # back to m018: no typed columns (nor what pins on them)
    conn.executescript("""
        DROP INDEX versions_operation;
        CREATE INDEX versions_operation ON versions(store_id, operation, created_at, id);
        DELETE FROM _sqlite_migrations WHERE name = 'm023_versions_operation_partial';
        ALTER TABLE session_resources DROP COLUMN pinned_more;
        DELETE FROM _sqlite_migrations WHERE name = 'm022_session_pinned_more';
        DROP INDEX memories_pinned; DROP TABLE session_pinned;
        ALTER TABLE session_resources DROP COLUMN pinned_budget;
        DELETE FROM _sqlite_migrations WHERE name = 'm021_session_pinned';
        DROP INDEX memories_expiry; DROP INDEX memories_meta_pending;
        ALTER TABLE memories DROP COLUMN mtype; ALTER TABLE memories DROP COLUMN importance;
        ALTER TABLE memories DROP COLUMN expires_at; ALTER TABLE memories DROP COLUMN pinned;
        ALTER TABLE memories DROP COLUMN meta; ALTER TABLE memories DROP COLUMN meta_rev;
        ALTER TABLE stores DROP COLUMN expiry;
        DELETE FROM _sqlite_migrations WHERE name = 'm019_typed_memories';
    """)
    conn.close()
    with Store(path, limits=Limits()) as s:  # migrates
        [m] = s.memories.tree(sid)
        assert m.memfs_meta is not None and m.memfs_meta.type == "context"
        assert s.typed.describe(sid)["expiry"] == "report"
        assert s.typed.sweep(sid, now=LATER)["deleted"] == []
        assert s.stores.create("new").id and s.typed.describe(
            s.stores.list().data[0].id)["expiry"] == "on"


@pytest.mark.parametrize("change", ["report", "archive"])
def test_a_store_turned_to_report_or_archived_mid_sweep_keeps_its_memories(
        store: Store, change: str) -> None:
    sid = store.stores.create("notes").id
    store.memories.write_path(sid, "/context/a.md", "a", actor=API)
    seen = store.typed.expired(sid, now=LATER)
    if change == "report":
        store.stores.update(sid, metadata={fm.EXPIRY_KEY: "report"})
    else:
        store.stores.archive(sid)
    report = store.typed.delete_expired(seen, now=LATER)
    assert report.deleted == [] and [s["path"] for s in report.skipped] == ["/context/a.md"]
    assert paths(store, sid) == ["/context/a.md"]
