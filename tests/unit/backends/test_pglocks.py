"""What a PostgreSQL write serialises on (issue 44): its scopes (memfs/backends/scopes.py), one
advisory lock each, taken with the shared global lock; a write without scopes (and every
write in mode ``global``) takes the global lock exclusively.

A write that must wait is given a short patience: it fails with Busy instead of waiting, so
"it waited" is seen without timing anything, and a write that must NOT wait is given a long
one (it would fail with Busy if it waited)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest

from memfs.backends.scopes import key_scope, lock_key, session_scope, store_scope
from memfs.errors import Busy, DatabaseUnavailable

#: Long enough for a write that need not wait, on a loaded machine.
LONG = 20.0
#: How long a write that must wait tries before Busy.
SHORT = 0.3


def test_lock_keys_are_signed_64_bit_and_stable():
    assert store_scope("memstore_1") == "store:memstore_1"
    assert session_scope("s") == "session:s" and key_scope("k") == "key:k"
    k = lock_key("store:memstore_1")
    assert -2**63 <= k < 2**63 and k == lock_key("store:memstore_1")
    assert lock_key("store:a") != lock_key("store:b")
    # blake2b(digest_size=8), big-endian, signed: the same key in every process and release
    assert lock_key("store:a") == int.from_bytes(
        __import__("hashlib").blake2b(b"store:a", digest_size=8).digest(), "big", signed=True)


@pytest.fixture
def pg(pg_cluster) -> Iterator[Callable[..., Any]]:
    """Opens PgDatabases on a fresh database (closed, and the database dropped, at the end)."""
    from memfs.backends.postgresql import PgDatabase

    name = pg_cluster.new_database(pg_cluster.template)
    opened: list[PgDatabase] = []

    def open_(**kwargs: Any) -> PgDatabase:
        db = PgDatabase(pg_cluster.url(name), **kwargs)
        opened.append(db)
        return db

    first = open_()
    with first.write() as c:
        c.execute("CREATE TABLE t (who TEXT)")
    try:
        yield open_
    finally:
        for db in opened:
            db.close()
        pg_cluster.drop_database(name)


@contextmanager
def held(write: AbstractContextManager[Any], mark: bool = True) -> Iterator[None]:
    """A write transaction held open in another thread (another replica, mid-write) for the
    block (``mark``: it inserts a row in ``t``); committed when it ends."""
    taken, done = threading.Event(), threading.Event()
    failed: list[BaseException] = []

    def hold() -> None:
        try:
            with write as c:
                if mark:
                    c.execute("INSERT INTO t VALUES ('holder')")
                taken.set()
                done.wait(60)
        except BaseException as e:
            failed.append(e)
            taken.set()

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert taken.wait(60) and not failed, failed
        yield
    finally:
        done.set()
        t.join()
    assert not failed, failed


def committed(db: Any, *scopes: str, patience: float = LONG) -> None:
    """A write with ``scopes`` that commits (or raises Busy after ``patience``)."""
    with db.patience(patience), db.write(*scopes) as c:
        c.execute("INSERT INTO t VALUES ('writer')")


def test_writes_of_two_stores_commit_side_by_side(pg):
    a, b = pg(), pg()  # two replicas
    with held(a.write(store_scope("A"))):
        committed(b, store_scope("B"))  # would be Busy if it waited for A's commit
        n = b.one("SELECT count(*) FROM t WHERE who = 'writer'")
        assert n is not None and n[0] == 1  # committed while A is still open


def test_writes_of_one_store_are_serialised(pg):
    a, b = pg(), pg()
    with held(a.write(store_scope("A"), session_scope("s"))):
        with pytest.raises(Busy):
            committed(b, store_scope("A"), patience=SHORT)
        with pytest.raises(Busy):  # any scope in common
            committed(b, session_scope("s"), store_scope("C"), patience=SHORT)
    committed(b, store_scope("A"))
    assert b.one("SELECT count(*) FROM t")[0] == 2  # the holder's and the last one


def test_a_write_without_scopes_excludes_every_other(pg):
    a, b = pg(), pg()
    with held(a.write()), pytest.raises(Busy):
        committed(b, store_scope("B"), patience=SHORT)
    with held(a.write(store_scope("A"))):
        with pytest.raises(Busy):
            committed(b, patience=SHORT)
        committed(b, store_scope("B"))


def test_mode_global_serialises_every_write(pg, monkeypatch):
    a = pg(locks="global")
    assert pg().locks == "store"  # the default
    monkeypatch.setenv("MEMFS_PG_LOCKS", "global")
    b = pg()
    assert b.locks == "global"
    for holder, writer in [(a, pg(locks="store")), (pg(locks="store"), b)]:
        with held(holder.write(store_scope("A"))), pytest.raises(Busy):
            committed(writer, store_scope("B"), patience=SHORT)


def test_an_unknown_lock_mode_is_a_clear_error(pg, monkeypatch):
    with pytest.raises(DatabaseUnavailable, match="MEMFS_PG_LOCKS must be one of store, global"):
        pg(locks="table")
    monkeypatch.setenv("MEMFS_PG_LOCKS", "stores")
    with pytest.raises(DatabaseUnavailable, match="not 'stores'"):
        pg()


def test_scopes_are_locked_in_one_order(pg):
    """Two writers taking {A, B} and {B, A} over and over: taken in the order given, they
    would deadlock (PostgreSQL would fail one of them). Sorted, they never do."""
    db = pg()
    # given in the wrong order by the first writer
    first, second = sorted([store_scope("A"), store_scope("B")], key=lock_key, reverse=True)
    failed: list[BaseException] = []

    def writer(scopes: tuple[str, ...]) -> None:
        try:
            for _ in range(150):
                with db.write(*scopes) as c:
                    c.execute("SELECT pg_sleep(0.001)")
        except BaseException as e:
            failed.append(e)

    threads = [threading.Thread(target=writer, args=(s,))
               for s in [(first, second), (second, first)] * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failed, failed
    sql = db.locks_sql([first, second, first])
    assert sql == (f"SELECT pg_advisory_xact_lock_shared({0x6D656D6673}), "
                   f"pg_advisory_xact_lock({lock_key(second)}), "
                   f"pg_advisory_xact_lock({lock_key(first)})")


def test_patience_and_a_dead_connection_still_hold_for_scoped_writes(pg, pg_cluster):
    """The lock_timeout of patience() is this transaction's only, and a pooled connection
    found dead is replaced before a scoped write begins."""
    import psycopg

    a, b = pg(max_size=2), pg()
    with held(b.write(store_scope("A"))), pytest.raises(Busy):
        committed(a, store_scope("A"), patience=SHORT)
    with a.write(store_scope("A")) as c:
        assert c.execute("SHOW lock_timeout").fetchone()[0] != f"{int(SHORT * 1000)}ms"
    dbname = a.path.rsplit("/", 1)[1]
    with psycopg.connect(pg_cluster.url(), autocommit=True) as admin:
        assert admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s "
            "AND pid <> pg_backend_pid()", (dbname,)).fetchone()[0] >= 1
    committed(a, store_scope("A"))


def test_a_stores_writes_wait_only_for_that_store(pg_cluster):
    """Through the store (two replicas): a transaction held open on store A holds back the
    writes of A (memories, its words' catch-up) and those recording events of a session
    whose scope is held, and nothing else: B's memories, its words, another session."""
    from memfs.models import Actor
    from memfs.recall.wordsqueue import catch_up
    from memfs.store import Limits, Store

    name = pg_cluster.new_database(pg_cluster.template)
    one, two = (Store(pg_cluster.url(name), limits=Limits()) for _ in range(2))
    try:
        a, b = one.stores.create("a").id, one.stores.create("b").id
        s = one.sessions.create([{"type": "memory_store", "memory_store_id": b}])
        other = one.sessions.create([{"type": "memory_store", "memory_store_id": b}])
        events = [{"type": "agent.tool_use", "id": "sevt_1", "name": "memory",
                   "input": {"command": "create", "path": "/e.md"},
                   "processed_at": "2025-01-01T00:00:00Z"}]
        with held(one.joined_write(store_scope(a), session_scope(s.id)), mark=False):
            with two.patience(LONG):
                two.memories.create(b, "/b.md", "x", actor=None)
                assert catch_up(two.database, b) == 1
                two.sessions.update(other.id, title="t")
                two.memories.write_path(b, "/o.md", "x", actor=Actor.session(other.id),
                                        events=[{**events[0], "id": "sevt_2"}])
            for write in [
                lambda: two.memories.create(a, "/a.md", "x", actor=None),
                lambda: two.memories.write_path(b, "/e.md", "x", actor=Actor.session(s.id),
                                                events=events),
                lambda: two.sessions.update(s.id, title="t"),
            ]:
                with two.patience(SHORT), pytest.raises(Busy):
                    write()
        two.memories.create(a, "/a.md", "x", actor=None)
        assert [m.path for m in two.memories.tree(a)] == ["/a.md"]
        assert sorted(m.path for m in two.memories.tree(b)) == ["/b.md", "/o.md"]
    finally:
        one.close()
        two.close()
        pg_cluster.drop_database(name)


def _wait_for(db: Any, sql: str, params: tuple[Any, ...] = ()) -> None:
    """Poll a second connection's view (pg_locks, pg_stat_activity) until ``sql`` is true."""
    import time

    deadline = time.monotonic() + 60
    while not db.one(sql, params)[0]:
        assert time.monotonic() < deadline, f"never true: {sql}"
        time.sleep(0.01)


def test_a_waiting_write_without_scopes_queues_no_scoped_write(pg):
    """An unscoped write waiting for the global lock while store A's transaction is open:
    PostgreSQL would queue every later shared request behind an exclusive one waiting, so
    one admin write would hold back store B's writes until A commits. It tries instead,
    and B's write commits at once (it would be Busy after LONG if it queued)."""
    from memfs.backends.postgresql import WRITE_LOCK_KEY

    a, b, admin, watch = pg(), pg(), pg(), pg()
    done: list[BaseException | None] = []

    def unscoped() -> None:
        try:
            committed(admin, patience=60)
            done.append(None)
        except BaseException as e:
            done.append(e)

    with held(a.write(store_scope("A"))):
        t = threading.Thread(target=unscoped)
        t.start()
        # the unscoped write has asked for the global lock (waiting, or trying)
        _wait_for(watch, "SELECT count(*) > 0 FROM pg_stat_activity "
                  "WHERE query LIKE ? AND pid <> pg_backend_pid()",
                  (f"%advisory_xact_lock({WRITE_LOCK_KEY})%",))
        committed(b, store_scope("B"))
        assert not done  # the unscoped write still waits for A
    t.join()
    assert done == [None]
    assert b.one("SELECT count(*) FROM t WHERE who = 'writer'")[0] == 2


def test_a_write_without_scopes_gets_the_lock_under_overlapping_scoped_writes(pg):
    """Scoped writers whose transactions overlap keep the global lock (shared) held without
    a gap: trying it alone never succeeds. After trying for half its patience, an unscoped
    write (a migration at a rolling upgrade under load) queues for what is left, and gets
    the lock once the transactions open then end (it was Busy after its whole patience)."""
    import time

    db = pg(max_size=8)
    stop = threading.Event()

    def load(k: int) -> None:
        time.sleep(k * 0.01)
        while not stop.is_set():
            with db.write(store_scope(f"S{k}")):
                time.sleep(0.06)

    # Six writers of 60 ms each, started 10 ms apart: one always holds the lock.
    threads = [threading.Thread(target=load, args=(k,), daemon=True) for k in range(6)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.2)
        committed(pg(), patience=4.0)  # Busy if it only tried
    finally:
        stop.set()
        for t in threads:
            t.join()


def test_patience_bounds_all_the_lock_waits_of_a_write_together(pg):
    """A write of two scopes within patience(P): the first lock is released at 0.75 P, the
    second only at 1.35 P. A lock_timeout alone bounds each wait (P each: it would get both
    and commit); the lock statement's own timeout ends the whole wait at P, with Busy.
    (The margins, 0.35 P either side, are for a loaded machine: nothing is timed finer.)"""
    import time

    patience = 2.0
    first, second = sorted([store_scope("A"), store_scope("B")], key=lock_key)
    h1, h2, w, watch = pg(), pg(), pg(), pg()
    release = [threading.Event(), threading.Event()]
    started = threading.Event()
    failed: list[BaseException] = []

    def hold(db: Any, scope: str, until: threading.Event) -> None:
        try:
            with db.write(scope):
                started.set()
                until.wait(60)
        except BaseException as e:
            failed.append(e)

    holders = [threading.Thread(target=hold, args=(h1, first, release[0])),
               threading.Thread(target=hold, args=(h2, second, release[1]))]
    for t in holders:
        started.clear()
        t.start()
        assert started.wait(60)
    t0 = time.monotonic()

    def releaser() -> None:
        _wait_for(watch, "SELECT count(*) > 0 FROM pg_locks "
                  "WHERE locktype = 'advisory' AND NOT granted")
        time.sleep(max(0.0, t0 + 0.75 * patience - time.monotonic()))
        release[0].set()
        time.sleep(max(0.0, t0 + 1.35 * patience - time.monotonic()))
        release[1].set()

    r = threading.Thread(target=releaser)
    r.start()
    try:
        with pytest.raises(Busy), w.patience(patience), w.write(first, second) as c:
            c.execute("INSERT INTO t VALUES ('writer')")
    finally:
        r.join()
        for e in release:
            e.set()
        for t in holders:
            t.join()
    assert not failed, failed
    # the statement's timeout was the lock statement's only: the rest is not cut short
    with w.patience(patience), w.write(first) as c:
        assert c.execute("SHOW statement_timeout").fetchone()[0] == "0"


def test_two_stores_expiring_idempotency_keys_at_once_never_deadlock(pg_cluster, monkeypatch):
    """Every write sent with an Idempotency-Key also deletes the expired keys, whatever their
    store. Two transactions of two stores: A deletes the expired key Q and goes on; the
    keys' age limit passes for P too; B deletes P, then wants Q (A's); A's next write wants
    P (B's): a deadlock (one rolled back after deadlock_timeout). Rows another transaction
    is deleting are skipped instead: it deletes them."""
    from datetime import UTC, datetime, timedelta

    from memfs.rules import format_time
    from memfs.store import Limits, Store, idempotency

    name = pg_cluster.new_database(pg_cluster.template)
    one, two, watch = (Store(pg_cluster.url(name), limits=Limits()) for _ in range(3))
    try:
        x, y = one.stores.create("x").id, one.stores.create("y").id
        now = datetime.now(UTC)
        with one.write() as c:  # P first in the table, Q after it, older
            for key, age in [("P", 23), ("Q", 25)]:
                c.execute("INSERT INTO idempotency_keys VALUES ('w', ?, 'f', 200, '{}', ?)",
                          (key, format_time(now - timedelta(hours=age))))

        def once(store: Store, sid: str, key: str) -> None:
            status, _ = store.idempotency.write_once(
                "w", key, "fp", None,
                lambda: store.memories.create(sid, f"/{key}.md", "x", actor=None),
                lambda m: m.id, (store_scope(sid),))
            assert status == 200

        failed: list[BaseException] = []
        a_deleted, go_on, b_done = threading.Event(), threading.Event(), threading.Event()

        def a() -> None:
            try:
                with one.joined_write(store_scope(x)):
                    once(one, x, "a1")  # deletes Q (P is 23 h old: kept 24 h)
                    a_deleted.set()
                    go_on.wait(60)
                    once(one, x, "a2")  # P has expired too now
            except BaseException as e:
                failed.append(e)

        def b() -> None:
            try:
                once(two, y, "b1")
            except BaseException as e:
                failed.append(e)
            b_done.set()

        ta = threading.Thread(target=a)
        ta.start()
        assert a_deleted.wait(60)
        monkeypatch.setattr(idempotency, "KEEP_KEYS", timedelta(hours=22))
        tb = threading.Thread(target=b)
        tb.start()
        # B waits for A's row Q (before the fix), or is done (it skipped Q)
        deadline = time.monotonic() + 60
        while not b_done.is_set() and not watch.database.one(
                "SELECT count(*) > 0 FROM pg_locks WHERE NOT granted")[0]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        go_on.set()
        ta.join()
        tb.join()
        assert not failed, failed
        keys = [r[0] for r in watch.database.all("SELECT key FROM idempotency_keys")]
        assert sorted(keys) == ["a1", "a2", "b1"]  # P and Q were deleted, by one or the other
    finally:
        for s in (one, two, watch):
            s.close()
        pg_cluster.drop_database(name)


def test_administrative_writes_wait_only_for_what_they_change(pg_cluster):
    """While store A's transaction is held open, the administrative writes that change
    nothing of A commit (each would be Busy after LONG if it waited for every write): a key
    made (of store B) and revoked, a session's writes undone, a dream's output store
    discarded; the retention prune prunes every other store and waits only for A."""
    from datetime import UTC, datetime, timedelta

    from memfs.models import Actor
    from memfs.store import Limits, Store

    name = pg_cluster.new_database(pg_cluster.template)
    limits = Limits(retention_days=1, retention_keep=1)
    one, two = (Store(pg_cluster.url(name), limits=limits) for _ in range(2))
    try:
        b = one.stores.create("b").id
        a = one.stores.create("a").id
        assert b < a  # the prune goes in the order of ids: B before A
        mems = {}
        for sid in (a, b):
            mems[sid] = one.memories.create(sid, "/m.md", "v0", actor=None).id
            one.memories.update(sid, mems[sid], content="v1", actor=None)
        s = one.sessions.create([{"type": "memory_store", "memory_store_id": b}])
        one.memories.write_path(b, "/s.md", "x", actor=Actor.session(s.id))
        dream = one.dreams.create([{"type": "memory_store", "memory_store_id": b},
                                   {"type": "sessions", "session_ids": [s.id]}], "m")
        started = one.dreams.start(dream.id)
        assert started is not None and started.outputs
        with held(one.joined_write(store_scope(a)), mark=False):
            with two.patience(LONG):
                key = two.keys.create("k", store_ids=[b])
                two.keys.revoke(key.id)
                assert two.undo.revert(s.id, actor=None)
                ended = two.dreams.finish(dream.id, "failed", {"type": "x", "message": "y"},
                                          discard_output=True)
                assert not ended.outputs
            pruned: list[int] = []
            t = threading.Thread(target=lambda: pruned.append(two.versions.prune(
                now=datetime.now(UTC) + timedelta(days=2))))
            t.start()
            _wait_for(two.database, "SELECT count(*) > 0 FROM pg_locks WHERE NOT granted")
            # B was pruned (committed) while the prune waits for A
            assert len(two.versions.list(b, memory_id=mems[b]).data) == 1
            assert len(two.versions.list(a, memory_id=mems[a]).data) == 2
        t.join()
        assert pruned and pruned[0] >= 2
        assert len(two.versions.list(a, memory_id=mems[a]).data) == 1
    finally:
        one.close()
        two.close()
        pg_cluster.drop_database(name)
