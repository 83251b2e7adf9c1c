"""The memory limit under a real race (issue 2, item 3), and many writer processes on one file.

Every worker is a separate OS process (multiprocessing ``forkserver``) with its own :class:`Store`
on the same database file, released at the same moment by a barrier. SPEC §1: the limit is
enforced in the insert's own transaction, so racing writers can never exceed it, and no
"database is locked" ever reaches a caller.
"""

from __future__ import annotations

import multiprocessing
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from memfs import Actor, LimitExceeded, PathConflict
from memfs.store import Limits, Store, migrations

# forkserver: every worker is a fresh process forked from a clean server that has imported
# memfs once (no state inherited from pytest, as with spawn, but much faster to start).
CTX = multiprocessing.get_context("forkserver")
CTX.set_forkserver_preload(["memfs.store"])
BARRIER_TIMEOUT = 60
JOIN_TIMEOUT = 120


def _create_until_full(
    db: str, store_id: str, max_memories: int, worker: int, barrier: Any, out: Any
) -> None:
    """Create memories as fast as possible until the store is full, then a few more tries.

    Puts ``(worker, created_paths, limit_errors, other_errors)`` on ``out``.
    """
    created: list[str] = []
    limit_errors = 0
    other: list[str] = []
    try:
        store = Store(db, limits=Limits(max_memories=max_memories))
        actor = Actor.session(f"sesn_worker{worker}")
        barrier.wait(BARRIER_TIMEOUT)
        i = 0
        while limit_errors < 3:
            path = f"/w{worker}/m{i}"
            i += 1
            try:
                store.memories.create(store_id, path, f"{worker}:{i}", actor=actor)
                created.append(path)
            except LimitExceeded:
                limit_errors += 1
            except Exception as e:  # noqa: BLE001 - reported to the parent, which fails
                other.append(f"{type(e).__module__}.{type(e).__name__}: {e}")
                if len(other) > 5:
                    break
        store.close()
    except Exception:  # noqa: BLE001
        other.append(traceback.format_exc())
    out.put((worker, created, limit_errors, other))


def _mixed_writer(db: str, shared_store: str | None, worker: int, rounds: int, barrier: Any,
                  out: Any) -> None:
    """Every kind of write, interleaved with reads, on a store of its own and (unless
    ``shared_store`` is None) on a store all workers share. The worker opens the database only
    after the barrier, so on a fresh file the schema migration races too.

    Puts ``(worker, operations_done, errors)`` on ``out``.
    """
    errors: list[str] = []
    done = 0
    try:
        barrier.wait(BARRIER_TIMEOUT)
        store = Store(db, limits=Limits())
        actor = Actor.session(f"sesn_w{worker}")
        own = store.stores.create(f"own-{worker}").id
        targets = [own] if shared_store is None else [own, shared_store]
        for r in range(rounds):
            for sid in targets:
                base = f"/w{worker}/r{r}"
                m = store.memories.create(sid, f"{base}/a.md", "a" * 100, actor=actor)
                store.memories.update(sid, m.id, content="b" * 200, actor=actor)
                store.memories.write_path(sid, f"{base}/b.md", f"{r}", actor=actor)
                store.memories.rename_path(sid, f"{base}/b.md", f"{base}/c.md", actor=actor)
                store.memories.rename_prefix(sid, f"{base}/", f"/moved/w{worker}/r{r}/",
                                             actor=actor)
                store.memories.list(sid, path_prefix=f"/moved/w{worker}/", depth=1)
                store.versions.list(sid, limit=5)
                store.memories.delete_path(sid, f"/moved/w{worker}/r{r}/c.md", actor=actor)
                done += 8
            store.stores.update(own, metadata={"round": str(r)})
        sess = store.sessions.create([{"type": "memory_store", "memory_store_id": own}])
        store.events.add(sess.id, [{"type": "agent.tool_use", "n": i} for i in range(3)])
        store.sessions.set_status(sess.id, "running")
        store.versions.prune()
        store.close()
    except Exception:  # noqa: BLE001 - reported to the parent, which fails
        errors.append(traceback.format_exc())
    out.put((worker, done, errors))


def _run(target: Any, args_for: list[tuple[Any, ...]]) -> list[Any]:
    """Start one process per args tuple (barrier and queue appended), collect every result."""
    barrier = CTX.Barrier(len(args_for))
    out = CTX.Queue()
    procs = [CTX.Process(target=target, args=(*a, barrier, out)) for a in args_for]
    for p in procs:
        p.start()
    results = []
    deadline = time.monotonic() + JOIN_TIMEOUT
    try:
        for _ in procs:
            results.append(out.get(timeout=max(1.0, deadline - time.monotonic())))
    finally:
        for p in procs:
            p.join(timeout=max(1.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    return results


def _race(db_path: Path, max_memories: int, workers: int) -> tuple[Store, str, list[Any]]:
    store = Store(db_path, limits=Limits(max_memories=max_memories))
    sid = store.stores.create("race").id
    results = _run(
        _create_until_full, [(str(db_path), sid, max_memories, w) for w in range(workers)]
    )
    return store, sid, results


def _check_race(store: Store, sid: str, results: list[Any], max_memories: int) -> None:
    errors = [e for r in results for e in r[3]]
    assert errors == [], errors  # never "database is locked", OperationalError or Busy
    assert all(r[2] == 3 for r in results), "every worker must end on LimitExceeded"
    created = [p for r in results for p in r[1]]
    assert len(created) == max_memories == len(set(created))
    assert store.memories.count(sid) == max_memories
    listed, page = [], None
    while True:
        p = store.memories.list(sid, limit=100, page=page)
        listed += [m.path for m in p.data]
        if not (page := p.next_page):
            break
    assert sorted(listed) == sorted(created)
    # exactly one 'created' version per live memory, nothing else
    assert store.one("SELECT count(*) FROM versions WHERE store_id = ?", (sid,))[0] == len(
        created
    )


def _work_at_limit(store: Store, sid: str, some_path: str) -> None:
    actor = Actor.user("user_race")
    with pytest.raises(LimitExceeded):
        store.memories.create(sid, "/one-more", "x", actor=actor)
    m = store.memories.get_by_path(sid, some_path)
    e = store.memories.update(sid, m.id, content="edited at the limit", actor=actor)
    assert e.content == "edited at the limit"
    r = store.memories.update(sid, m.id, path="/renamed-at-limit", actor=actor)
    assert (r.id, r.path) == (m.id, "/renamed-at-limit")
    assert store.memories.write_path(sid, "/renamed-at-limit", "via write_path",
                                     actor=actor).id == m.id
    store.memories.delete(sid, m.id, actor=actor)
    n = store.memories.create(sid, "/after-delete", "x", actor=actor)
    assert n.id != m.id
    with pytest.raises(LimitExceeded):
        store.memories.create(sid, "/and-one-more", "x", actor=actor)
    with pytest.raises(PathConflict):  # a taken path still says so
        store.memories.create(sid, "/after-delete", "x", actor=actor)


@pytest.mark.parametrize(("max_memories", "workers"), [(1, 4), (25, 6)])
def test_race_small_limit(db_path: Path, max_memories: int, workers: int) -> None:
    store, sid, results = _race(db_path, max_memories, workers)
    try:
        _check_race(store, sid, results, max_memories)
        _work_at_limit(store, sid, results[0][1][0] if results[0][1] else
                       next(p for r in results for p in r[1]))
    finally:
        store.close()


def test_race_real_limit(db_path: Path) -> None:
    """The real 2,000 limit (Limits() defaults), 4 processes from an empty store."""
    assert Limits().max_memories == 2000
    started = time.monotonic()
    store, sid, results = _race(db_path, 2000, 4)
    try:
        elapsed = time.monotonic() - started
        _check_race(store, sid, results, 2000)
        assert sum(1 for r in results if r[1]) >= 2, "the workers did not actually race"
        _work_at_limit(store, sid, next(p for r in results for p in r[1]))
    finally:
        store.close()
    assert elapsed < 60, f"2,000 racing creates took {elapsed:.1f}s"


def test_fresh_database_opened_by_many_at_once(tmp_path: Path) -> None:
    """Six processes open a database that does not exist yet at the same moment (WAL switch and
    schema migration race) and write at once; none of them sees an error."""
    db = tmp_path / "fresh" / "memfs.db"
    results = _run(_mixed_writer, [(str(db), None, w, 1) for w in range(6)])
    errors = [e for r in results for e in r[2]]
    assert errors == [], "\n".join(errors)
    with Store(db, limits=Limits()) as store:
        own = store.stores.list(limit=100).data
        assert sorted(s.name for s in own) == [f"own-{w}" for w in range(6)]
        for s in own:
            assert [m.path for m in store.memories.tree(s.id)] == [f"/moved/w{s.name[4:]}/r0/a.md"]
        names = [r[0] for r in store.all("SELECT name FROM _sqlite_migrations")]
        assert len(names) == len(set(names)) and migrations.pending(store.db) == []  # once each
        assert store.integrity_check() == "ok"


def test_many_writers_never_see_locked(db_path: Path) -> None:
    """Six processes write every way there is to one shared store and their own ones."""
    rounds = 4
    with Store(db_path, limits=Limits()) as store:
        shared = store.stores.create("shared").id
    results = _run(_mixed_writer, [(str(db_path), shared, w, rounds) for w in range(6)])
    errors = [e for r in results for e in r[2]]
    assert errors == [], "\n".join(errors)
    assert all(r[1] == rounds * 16 for r in results)
    with Store(db_path, limits=Limits()) as store:
        tree = [m.path for m in store.memories.tree(shared)]
        assert tree == sorted(f"/moved/w{w}/r{r}/a.md" for w in range(6) for r in range(rounds))
        # a.md: created, modified, moved; b.md: created, renamed, moved, deleted
        assert store.one("SELECT count(*) FROM versions WHERE store_id = ?", (shared,))[0] == (
            6 * rounds * (3 + 4)
        )
        assert len(store.sessions.list(limit=100).data) == 6
        assert store.integrity_check() == "ok"
