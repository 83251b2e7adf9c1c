"""memfs.store.schema: both backends know the same steps of the schema (VERSIONS), each made by
a migration of each backend or said not to need one, so that a migration added to one backend
and not the other fails here; and the filtered listings find an index of their own in each
backend's schema (issue 8)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memfs import Actor
from memfs.store import Limits, Store, schema
from memfs.store.schema import VERSIONS, Version

DIALECTS = ("sqlite", "postgresql")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_each_backend_s_migrations_are_the_steps_of_versions_in_order(dialect: str) -> None:
    named = [v.migration(dialect) for v in VERSIONS]
    # A migration making several steps makes consecutive ones.
    runs = [name for name, _ in itertools.groupby(named) if name is not None]
    assert len(runs) == len(set(runs)), f"{dialect}: a migration named by steps apart: {runs}"
    assert schema.migration_names(dialect) == runs, (
        f"the {dialect} migrations and the steps of memfs.store.schema.VERSIONS disagree: "
        "a migration needs its row, naming what each backend does")


def test_a_step_names_a_migration_of_both_backends_or_says_why_not() -> None:
    for v in VERSIONS:
        for dialect in DIALECTS:
            assert v.migration(dialect) is not None or v.none_because, (v, dialect)
    assert VERSIONS[0].sqlite == VERSIONS[0].postgresql == "m001_initial"
    assert VERSIONS[-1].migration("sqlite") == schema.migration_names("sqlite")[-1]
    with pytest.raises(ValueError, match="no reason"):
        Version("a table", sqlite="m099_table", postgresql=None)


def test_both_backends_record_their_migrations_in_one_set() -> None:
    from memfs.store.schema import postgresql, sqlite

    assert schema.MIGRATION_SET == "memfs"
    assert sqlite.migration_set().name == postgresql.MIGRATION_SET == schema.MIGRATION_SET


# ============================================================================================
# indexes for the filtered listings (issue 8)


def _plans(store: Store, fn: Callable[[], Any]) -> list[str]:
    """The query plans of the SELECTs ``fn`` runs (traced with their bound values)."""
    seen: list[str] = []
    # Reads go through this thread's reader connection, writes through the writer.
    conns = {id(c): c for c in (store.conn, store.database.reader())}.values()
    for c in conns:
        c.set_trace_callback(seen.append)
    try:
        fn()
    finally:
        for c in conns:
            c.set_trace_callback(None)
    return [
        " | ".join(r[3] for r in store.conn.execute("EXPLAIN QUERY PLAN " + sql))
        for sql in seen if sql.lstrip().upper().startswith("SELECT")
    ]


class TestIndexes:
    @pytest.fixture
    def store(self, db_path: Any) -> Iterator[Store]:  # SQLite's query plans
        s = Store(db_path, limits=Limits())
        yield s
        s.close()

    def test_filtered_listings_search_an_index_of_their_own(self, store: Store, sid: str) -> None:
        m = store.memories.create(sid, "/a.md", "a", actor=Actor.session("sesn_x"))
        store.sessions.create([])
        store.sessions.create([], launcher={"host": "h", "boot_id": "b", "pid": 1, "start": 2})
        cases = {
            "versions_memory_time": lambda: store.versions.list(sid, memory_id=m.id),
            "versions_actor": lambda: store.versions.list(sid, session_id="sesn_x"),
            "versions_operation": lambda: store.versions.list(sid, operation="deleted"),
            "versions_operation ": lambda: store.versions.list(sid, operation="created"),
            "stores_name": lambda: store.stores.resolve("Notes"),
            "sessions_launched": store.sessions.launched,
        }
        for key, fn in cases.items():
            index = key.strip()
            plans = _plans(store, fn)
            assert any(index in p for p in plans), (index, plans)
            # a scan only of the (partial) index itself: never of a table
            assert not any("SCAN" in p and index not in p for p in plans), (index, plans)

    def test_a_modified_version_writes_no_entry_of_versions_operation(
            self, store: Store, sid: str) -> None:
        """versions_operation holds the created and deleted versions alone (issue 45): the
        modified ones are most of a history, and a walk of versions_store_time finds them,
        so an overwrite or a rename writes one index less."""
        actor = Actor.user("user_x")
        m = store.memories.create(sid, "/a.md", "0", actor=actor)
        for i in range(30):
            store.memories.update(sid, m.id, content=str(i + 1), actor=actor)
        store.memories.rename_path(sid, "/a.md", "/b.md", actor=actor)
        store.memories.delete_path(sid, "/b.md", actor=actor)

        def entries(index: str) -> int:
            # An index b-tree holds each entry once, in a leaf or an interior page.
            return int(store.conn.execute(
                "SELECT sum(ncell) FROM dbstat WHERE name = ?", (index,)).fetchone()[0])

        assert entries("versions_store_time") == 33
        assert entries("versions_operation") == 2  # created, deleted
        by_op = {op: [v.operation for v in store.versions.list(sid, operation=op,
                                                                limit=100).data]
                 for op in ("created", "modified", "deleted")}
        assert by_op == {"created": ["created"], "modified": ["modified"] * 31,
                         "deleted": ["deleted"]}


class TestIndexesPostgreSQL:
    """The same listings on PostgreSQL find the same indexes in its schema (with sequential
    scans disabled, as on a table far larger than a test's, the planner uses one if it
    applies)."""

    def test_filtered_listings_search_an_index_of_their_own(self, pg_cluster: Any,
                                                            monkeypatch: Any) -> None:
        from memfs.backends.postgresql import PgConnection, translate_sql

        pg_cluster.empty_database(pg_cluster.shared)
        store = Store(pg_cluster.url(pg_cluster.shared), limits=Limits())
        try:
            sid = store.stores.create("Notes").id
            m = store.memories.create(sid, "/a.md", "a", actor=Actor.session("sesn_x"))
            # A store of many memories, and fresh statistics: the planner's choice then
            # follows selectivity, not whatever statistics earlier tests left behind.
            for i in range(60):
                other = store.memories.create(sid, f"/o/{i}.md", "x", actor=Actor.api("apikey_y"))
                store.memories.update(sid, other.id, content="y", actor=Actor.api("apikey_y"))
            store.sessions.create([])
            store.sessions.create([], launcher={"host": "h", "boot_id": "b", "pid": 1,
                                               "start": 2})
            with store.database.write() as c:
                c.raw.execute("ANALYZE")
            seen: list[tuple[str, Any]] = []
            execute = PgConnection.execute

            def tracing(self: PgConnection, sql: str, params: Any = ()) -> Any:
                seen.append((sql, params))
                return execute(self, sql, params)

            cases = {
                "versions_memory_time": lambda: store.versions.list(sid, memory_id=m.id),
                "versions_actor": lambda: store.versions.list(sid, session_id="sesn_x"),
                "versions_operation": lambda: store.versions.list(sid, operation="deleted"),
                "versions_operation ": lambda: store.versions.list(sid, operation="created"),
                "stores_name": lambda: store.stores.resolve("Notes"),
                "sessions_launched": store.sessions.launched,
            }
            for key, fn in cases.items():
                index = key.strip()
                seen.clear()
                monkeypatch.setattr(PgConnection, "execute", tracing)
                fn()
                monkeypatch.setattr(PgConnection, "execute", execute)
                plans = []
                with store.database.write() as c:  # one transaction: SET LOCAL holds in it
                    c.raw.execute("SET LOCAL enable_seqscan = off")
                    for sql, params in seen:
                        if sql.lstrip().upper().startswith("SELECT"):
                            rows = c.raw.execute("EXPLAIN " + translate_sql(sql),
                                                 params or None).fetchall()
                            plans.append(" | ".join(r[0] for r in rows))
                assert any(index in p for p in plans), (index, plans)
        finally:
            store.close()
