"""Group commit: Store.batch (several writes, one transaction, a savepoint each) and the API's
WriteBatcher (concurrent write requests committed together, each answered after its commit)."""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from memfs import api, errors
from memfs.api import create_app
from memfs.backends.scopes import session_scope, store_scope
from memfs.models import Actor, Memory
from memfs.rules import Limits
from memfs.store import Store
from tests.support import async_wait_until

KEY = "group-key"
ACTOR = Actor.api("apikey_group")


def commits(store: Store) -> list[str]:
    """The COMMITs the store's writer connection runs from now on."""
    seen: list[str] = []
    store.conn.set_trace_callback(lambda sql: seen.append(sql) if sql == "COMMIT" else None)
    return seen


# -- Store.batch ----------------------------------------------------------------------------


def test_batch_commits_every_write_once_and_durably(store, db_path):
    sid = store.stores.create("s").id
    seen = commits(store)
    calls = [partial(store.memories.create, sid, f"/m{i}.md", f"c{i}", actor=ACTOR)
             for i in range(20)]
    out = store.batch(calls)
    assert len(seen) == 1
    assert [m.path for m in out] == [f"/m{i}.md" for i in range(20)]
    with Store(db_path) as other:  # another connection: committed, not just visible to us
        assert sorted(m.path for m in other.memories.list(sid, limit=100).data) == sorted(
            f"/m{i}.md" for i in range(20))


def test_a_refused_write_fails_alone(backend):
    store = backend.open()  # on SQLite and on PostgreSQL
    sid = store.stores.create("s").id
    taken = store.memories.create(sid, "/taken.md", "old", actor=ACTOR)
    out = store.batch([
        partial(store.memories.create, sid, "/a.md", "a", actor=ACTOR),
        partial(store.memories.create, sid, "/taken.md", "dup", actor=ACTOR),  # PathConflict
        partial(store.memories.create, "memstore_nope", "/x.md", "x", actor=ACTOR),  # NotFound
        partial(store.memories.update, sid, taken.id, content="new",
                precondition_sha256="0" * 64, actor=ACTOR),  # PreconditionFailed
        partial(store.memories.create, sid, "/b.md", "b", actor=ACTOR),
    ])
    assert isinstance(out[1], errors.PathConflict)
    assert isinstance(out[2], errors.NotFound)
    assert isinstance(out[3], errors.PreconditionFailed)
    assert out[0].path == "/a.md" and out[4].path == "/b.md"
    assert store.memories.get(sid, taken.id).content == "old"
    assert sorted(m.path for m in store.memories.list(sid).data) == ["/a.md", "/b.md",
                                                                     "/taken.md"]


def test_a_batch_of_creates_keeps_every_rule_of_one_by_one(backend, caplog):
    """On PostgreSQL each create of a batch sends its write ahead, with the next create's look
    (Core.record_ahead): the next look sees it, so the path, overlap and limit rules decide as
    one by one; each memory's seq is its change's, in order, without running each alone."""
    caplog.set_level("INFO", logger="memfs.store.base")
    store = backend.open(limits=Limits(max_memories=5))
    sid = store.stores.create("s").id
    store.memories.create(sid, "/old.md", "o", actor=ACTOR)
    seen: list[int] = []

    def create_and_read_seq() -> Any:  # a seq read inside the batch is the change's too
        m = store.memories.create(sid, "/read.md", "r", actor=ACTOR)
        seen.append(m.seq)
        return m

    paths = ["/a.md", "/a.md", "/a.md/b.md", "/d", "/d/e.md", "/f.md", "/g.md"]
    calls = [partial(store.memories.create, sid, p, "x", actor=ACTOR) for p in paths]
    out = store.batch([*calls[:4], create_and_read_seq, *calls[4:]], [store_scope(sid)])
    assert "running each alone" not in caplog.text
    assert [type(o).__name__ for o in out] == [
        "Memory", "PathConflict", "PathConflict", "Memory", "Memory", "PathConflict",
        "Memory", "LimitExceeded"]
    made = [o for o in out if isinstance(o, Memory)]
    feed = store.feed.since(sid, 0)
    assert [(c.seq, c.path) for c in feed[1:]] == [(m.seq, m.path) for m in made]
    assert seen == [made[2].seq] and made[2].path == "/read.md"
    assert sorted(m.path for m in store.memories.list(sid, limit=10).data) == [
        "/a.md", "/d", "/f.md", "/old.md", "/read.md"]


def test_a_write_sent_ahead_that_fails_fails_alone(pg_cluster, caplog):
    """A create's write sent ahead (PostgreSQL only) fails only when the next statement
    carries it: the batch is then run again each alone, so the failure is that create's, and
    no other's."""
    caplog.set_level("INFO", logger="memfs.store.base")
    name = pg_cluster.new_database(pg_cluster.template)
    store = Store(pg_cluster.url(name))
    try:
        sid = store.stores.create("s").id
        with store.database.write() as c:
            c.execute("ALTER TABLE changes ADD CONSTRAINT no_boom CHECK (path <> '/boom.md')")
        out = store.batch([partial(store.memories.create, sid, p, "x", actor=ACTOR)
                           for p in ("/a.md", "/boom.md", "/c.md")], [store_scope(sid)])
        assert "running each alone" in caplog.text
        assert isinstance(out[1], Exception)
        assert [m.path for m in (out[0], out[2])] == ["/a.md", "/c.md"]
        assert sorted(m.path for m in store.memories.list(sid).data) == ["/a.md", "/c.md"]
    finally:
        store.close()
        pg_cluster.drop_database(name)


def test_a_refused_write_leaves_no_half_of_itself(backend):
    """A call refused after it changed rows is rolled back to its savepoint: the batch's other
    writes stay, nothing of it does."""
    store = backend.open()  # on SQLite and on PostgreSQL
    sid = store.stores.create("s").id

    def half() -> None:
        store.memories.create(sid, "/half.md", "x", actor=ACTOR)
        raise errors.LimitExceeded("refused after writing")

    out = store.batch([partial(store.memories.create, sid, "/a.md", "a", actor=ACTOR), half])
    assert isinstance(out[1], errors.LimitExceeded)
    assert [m.path for m in store.memories.list(sid).data] == ["/a.md"]
    assert [v.path for v in store.versions.list(sid).data] == ["/a.md"]


def test_writes_applied_once_in_a_batch_keep_their_own_savepoints(backend):
    """Store.idempotency.write_once in a batch (the API's writes with an Idempotency-Key or a
    deadline): a deadline passed rolls back its own write only, first, between and last (on
    PostgreSQL its SAVEPOINT and RELEASE ride with the next statement)."""
    store = backend.open()  # on SQLite and on PostgreSQL
    sid = store.stores.create("s").id

    def once(path: str, deadline: float | None, key: str | None = None) -> Any:
        return partial(store.idempotency.write_once, "ws", key, path, deadline, partial(
            store.memories.create, sid, path, "x", actor=ACTOR), lambda m: m.path)

    out = store.batch([once("/late1.md", 1.0), once("/a.md", None, "k1"),
                       once("/late2.md", 1.0), once("/b.md", None),
                       once("/late3.md", 1.0, "k2")])
    assert [o[0] for o in out] == [408, 200, 408, 200, 408]
    assert sorted(m.path for m in store.memories.list(sid).data) == ["/a.md", "/b.md"]
    again = store.batch([once("/a.md", None, "k1"), once("/late3.md", None, "k2")])
    assert [o[0] for o in again] == [200, 408]
    assert sorted(m.path for m in store.memories.list(sid).data) == ["/a.md", "/b.md"]


def test_later_writes_see_earlier_ones_in_order(store):
    sid = store.stores.create("s").id
    m = store.memories.create(sid, "/m.md", "v0", actor=ACTOR)
    out = store.batch([
        partial(store.memories.update, sid, m.id, content=f"v{i}", actor=ACTOR)
        for i in range(1, 6)])
    assert [x.content for x in out] == [f"v{i}" for i in range(1, 6)]
    versions = store.versions.list(sid, memory_id=m.id, view="full", limit=10).data
    assert [v.content for v in versions] == [f"v{i}" for i in range(5, -1, -1)]  # newest first


def test_a_failure_that_is_not_a_refusal_reruns_the_others_alone(store):
    sid = store.stores.create("s").id

    def bug() -> None:
        store.memories.create(sid, "/bug.md", "x", actor=ACTOR)
        raise RuntimeError("a bug")

    out = store.batch([partial(store.memories.create, sid, "/a.md", "a", actor=ACTOR), bug,
                       partial(store.memories.create, sid, "/b.md", "b", actor=ACTOR)])
    assert isinstance(out[1], RuntimeError)
    assert out[0].path == "/a.md" and out[2].path == "/b.md"
    # each write happened once: the batch's were rolled back, then each call ran alone (the
    # bug's create commits before it raises, as it would have without batching)
    assert sorted(v.path for v in store.versions.list(sid).data) == ["/a.md", "/b.md",
                                                                     "/bug.md"]


def test_a_busy_first_write_once_the_lock_is_held_reruns_the_others_alone(backend):
    """Busy raised by the batch's first write, after the lock was granted (a deadlock or a
    serialization failure on PostgreSQL, a row lock's timeout): the others never ran, but
    not because the lock never came. Each runs alone, so none fails for another's reason."""
    store = backend.open()
    sid = store.stores.create("s").id
    tries: list[int] = []

    def busy() -> None:
        tries.append(1)
        raise errors.Busy("the database is busy; try again")

    out = store.batch([busy, partial(store.memories.create, sid, "/a.md", "a", actor=ACTOR),
                       partial(store.memories.create, sid, "/b.md", "b", actor=ACTOR)],
                      [store_scope(sid)])
    assert isinstance(out[0], errors.Busy) and len(tries) == 2  # in the batch, then alone
    assert [o.path for o in out[1:]] == ["/a.md", "/b.md"]


def test_a_memory_made_in_a_batch_pickles_as_itself_wherever_it_is_returned(backend):
    """A create's seq is read after its write was sent ahead (PostgreSQL): a memory returned
    inside another object (not settled by the batch) still pickles and copies as the Memory
    it is, its seq included."""
    import copy
    import pickle

    store = backend.open()
    sid = store.stores.create("s").id

    def wrapped(path: str) -> dict[str, Memory]:
        return {"m": store.memories.create(sid, path, "x", actor=ACTOR)}

    out = store.batch([partial(wrapped, "/a.md"), partial(wrapped, "/b.md")],
                      [store_scope(sid)])
    feed = [c.seq for c in store.feed.since(sid, 0)][-2:]
    for o, seq in zip(out, feed, strict=True):
        back = pickle.loads(pickle.dumps(o))["m"]
        assert type(back) is Memory and back.seq == seq and back == o["m"]
        assert copy.deepcopy(o)["m"].seq == seq


def test_a_write_joined_to_a_batch_asks_only_for_the_scopes_it_holds(store):
    """Issue 44: a batch's transaction holds the scopes it was given (on PostgreSQL, a lock
    each): a write joining it that serialises on another (another store's, or every write's)
    would not be serialised at all, so it is a bug, raised as AssertionError, not run."""
    a, b = store.stores.create("a").id, store.stores.create("b").id
    mine = [partial(store.memories.create, a, f"/{i}.md", "x", actor=ACTOR) for i in range(2)]
    assert [m.path for m in store.batch(mine, scopes=(store_scope(a),))] == ["/0.md", "/1.md"]
    other = partial(store.memories.create, b, "/b.md", "x", actor=ACTOR)
    with pytest.raises(AssertionError, match=f"store:{b}"):
        store.batch([mine[0], other], scopes=(store_scope(a),))
    def unscoped() -> str:  # serialised with every write (an administrative one)
        with store.write() as c:
            c.execute("SELECT 1")
        return "done"

    with pytest.raises(AssertionError, match="every write"):
        store.batch([other, unscoped], scopes=(store_scope(b),))
    # Nothing of those batches was written (nor run again alone).
    assert [m.path for m in store.memories.tree(b)] == []
    with pytest.raises(AssertionError), store.joined_write(store_scope(a)):
        store.memories.create(b, "/b.md", "x", actor=ACTOR)
    # A batch without scopes holds every write's; one with more than a write asks, too.
    out = store.batch([other, unscoped])
    assert [type(o).__name__ for o in out] == ["Memory", "str"]
    events = [{"type": "agent.tool_use", "id": "sevt_1", "name": "memory",
               "input": {"command": "create", "path": "/s.md"},
               "processed_at": "2025-01-01T00:00:00Z"}]
    session = store.sessions.create([{"type": "memory_store", "memory_store_id": a}])
    as_session = Actor.session(session.id)
    write = partial(store.memories.write_path, a, "/s.md", "x", actor=as_session, events=events)
    assert store.memories.scopes(a, as_session, events) == (
        store_scope(a), session_scope(session.id))
    with pytest.raises(AssertionError, match=f"session:{session.id}"):
        store.batch([write, mine[0]], scopes=(store_scope(a),))
    out = store.batch([write, partial(store.memories.create, a, "/t.md", "x", actor=ACTOR)],
                      scopes=store.memories.scopes(a, as_session, events))
    assert [type(o).__name__ for o in out] == ["Memory", "Memory"]


def test_batch_in_nowait_mode_raises_wouldblock_when_the_lock_is_taken(store):
    sid = store.stores.create("s").id
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.write():
            entered.set()
            release.wait(5)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert entered.wait(5)
        with pytest.raises(errors.WouldBlock), store.nowait():
            store.batch([partial(store.memories.create, sid, f"/m{i}.md", "x", actor=ACTOR)
                         for i in range(2)])
    finally:
        release.set()
        t.join()
    assert store.memories.list(sid).data == []


def test_batch_takes_its_calls_once_the_write_lock_is_held(store):
    sid = store.stores.create("s").id
    taken: list[bool] = []

    def take():
        taken.append(store.conn.in_transaction)  # BEGIN IMMEDIATE: the write lock is held
        return [partial(store.memories.create, sid, f"/m{i}.md", "x", actor=ACTOR)
                for i in range(3)] + [partial(store.memories.create, sid, "/m0.md", "y",
                                              actor=ACTOR)]

    out = store.batch(take)
    assert taken == [True]  # called once
    assert [m.path for m in out[:3]] == ["/m0.md", "/m1.md", "/m2.md"]
    assert isinstance(out[3], errors.PathConflict)
    assert store.memories.count(sid) == 3


def test_a_batch_that_fails_before_taking_its_calls_still_answers_each(store, monkeypatch):
    sid = store.stores.create("s").id
    calls = [partial(store.memories.create, sid, f"/m{i}.md", "x", actor=ACTOR) for i in range(2)]
    asked: list[int] = []

    def busy():
        raise errors.Busy("the database is busy; try again")

    monkeypatch.setattr(store, "write", busy)
    out = store.batch(lambda: asked.append(1) or calls)
    assert asked == [1]
    assert len(out) == 2 and all(isinstance(e, errors.Busy) for e in out)


# -- the API --------------------------------------------------------------------------------


def recording(store: Store) -> list[int]:
    """Batch sizes the API commits from now on."""
    sizes: list[int] = []
    batch = store.batch

    def spy(calls, scopes=()):
        def take():
            taken = calls() if callable(calls) else calls
            sizes.append(len(taken))
            return taken
        return batch(take, scopes)

    store.batch = spy  # type: ignore[method-assign]
    return sizes


async def test_concurrent_api_creates_are_grouped_correct_and_durable(store, db_path):
    sizes = recording(store)
    app = create_app(store, [KEY])
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t",
                                 headers={"x-api-key": KEY}) as c:
        sid = (await c.post("/v1/memory_stores", json={"name": "s"})).json()["id"]
        results: dict[str, httpx.Response] = {}

        async def create(i: int) -> None:
            for j in range(5):
                path = f"/c{i}/m{j}.md"
                results[path] = await c.post(f"/v1/memory_stores/{sid}/memories",
                                             json={"path": path, "content": path})

        async with trio.open_nursery() as n:
            for i in range(32):
                n.start_soon(create, i)
    assert len(results) == 160
    assert all(r.status_code == 200 for r in results.values())
    assert {r.json()["path"] for r in results.values()} == set(results)
    assert max(sizes) > 1 and sum(sizes) == 160  # grouped, and every write committed once
    with Store(db_path) as other:  # committed (another connection sees them)
        assert other.memories.count(sid) == 160
        for path, r in results.items():
            assert other.memories.get(sid, r.json()["id"]).content == path


async def test_a_refused_api_write_in_a_group_gets_its_own_4xx(store):
    sizes = recording(store)
    app = create_app(store, [KEY])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t",
                                 headers={"x-api-key": KEY}) as c:
        sid = (await c.post("/v1/memory_stores", json={"name": "s"})).json()["id"]
        out: list[httpx.Response] = []

        async def create(path: str) -> None:
            out.append(await c.post(f"/v1/memory_stores/{sid}/memories",
                                    json={"path": path, "content": "x"}))

        async with trio.open_nursery() as n:
            for i in range(16):
                n.start_soon(create, "/same.md" if i % 2 else f"/own{i}.md")
    assert max(sizes) > 1
    ok = [r for r in out if r.status_code == 200]
    refused = [r for r in out if r.status_code != 200]
    assert len(ok) == 9 and len(refused) == 7  # 8 distinct paths + one of the 8 /same.md
    for r in refused:
        assert r.status_code == 409
        body = r.json()
        assert body["type"] == "error" and body["request_id"] == r.headers["request-id"]
        assert body["error"]["type"] == "memory_path_conflict_error"
        assert body["error"]["conflicting_path"] == "/same.md"
        assert r.headers["x-should-retry"] == "false"


class _SlowStore:
    """A store whose batches wait for a signal (to hold a commit under way)."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.taken = threading.Event()
        self.batches: list[list[str]] = []

    def batch(self, calls, scopes=()):
        calls = calls() if callable(calls) else calls  # taken, then held under way
        self.taken.set()
        self.go.wait(5)
        out = [fn() for fn in calls]
        self.batches.append(out)
        return out

    async def first_batch_taken(self) -> None:
        """Until the first batch has taken its writes (in its worker thread: a fixed sleep
        is not enough on a busy machine, and a later write would join it)."""
        await async_wait_until(self.taken.is_set)


async def test_a_request_cancelled_while_waiting_never_writes_and_blocks_nobody():
    store = _SlowStore()
    writes = api.WriteBatcher(store)  # type: ignore[arg-type]
    got: dict[str, str] = {}

    async def write(name: str) -> None:
        got[name] = await writes.run(lambda: name)

    waiting = trio.CancelScope()

    async def cancelled() -> None:
        with waiting:
            await writes.run(lambda: "cancelled")

    async with trio.open_nursery() as n:
        n.start_soon(write, "first")  # commits a batch, held by store.go
        await store.first_batch_taken()
        n.start_soon(cancelled)
        await trio.testing.wait_all_tasks_blocked()
        n.start_soon(write, "third")
        await trio.testing.wait_all_tasks_blocked()
        waiting.cancel()
        await trio.testing.wait_all_tasks_blocked()
        store.go.set()
    assert got == {"first": "first", "third": "third"}
    assert store.batches == [["first"], ["third"]]


async def test_the_next_batch_goes_on_when_a_waiting_request_is_cancelled_as_it_ends():
    """The request that would commit the next batch is cancelled just as the commit before
    ends (either side of its promotion): the batch after still gets committed."""
    store = _SlowStore()
    writes = api.WriteBatcher(store)  # type: ignore[arg-type]
    got: dict[str, str] = {}
    scope = trio.CancelScope()

    def first() -> str:
        trio.from_thread.run_sync(scope.cancel)  # the commit holding "first" is ending
        return "first"

    async def write(name: str, fn=None) -> None:
        got[name] = await writes.run(fn or (lambda: name))

    async def second() -> None:
        with scope:
            got["second"] = await writes.run(lambda: "second")

    with trio.fail_after(5):
        async with trio.open_nursery() as n:
            n.start_soon(write, "first", first)
            await store.first_batch_taken()
            n.start_soon(second)
            await trio.testing.wait_all_tasks_blocked()
            n.start_soon(write, "third")
            await trio.testing.wait_all_tasks_blocked()
            store.go.set()
    assert got == {"first": "first", "third": "third"}
    assert store.batches == [["first"], ["third"]]


# -- reads on the event loop ----------------------------------------------------------------


def counting_threads(monkeypatch) -> list[object]:
    """The calls the API hands to a worker thread from now on."""
    calls: list[object] = []
    run_sync = api.call.anyio.to_thread.run_sync

    async def spy(fn, *args, **kwargs):
        calls.append(fn)
        return await run_sync(fn, *args, **kwargs)

    monkeypatch.setattr(api.call.anyio.to_thread, "run_sync", spy)
    return calls


async def test_short_reads_run_without_a_worker_thread(store, monkeypatch):
    sid = store.stores.create("s").id
    m = store.memories.create(sid, "/a/b.md", "x", actor=ACTOR)
    threads = counting_threads(monkeypatch)
    app = create_app(store, [KEY])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t",
                                 headers={"x-api-key": KEY}) as c:
        got = await c.get(f"/v1/memory_stores/{sid}/memories/{m.id}")
        page = await c.get(f"/v1/memory_stores/{sid}/memories", params={"depth": 2})
        assert threads == []
        assert got.json()["content"] == "x"
        assert [x["path"] for x in page.json()["data"] if x["type"] == "memory"] == ["/a/b.md"]
        # a long page, or the full view, still goes to a thread
        await c.get(f"/v1/memory_stores/{sid}/memories", params={"limit": 500})
        assert len(threads) == 1


async def test_a_read_that_would_wait_goes_to_a_worker_thread(store, monkeypatch):
    sid = store.stores.create("s").id
    m = store.memories.create(sid, "/a.md", "x", actor=ACTOR)
    get_memory = store.memories.get

    def would_wait(*args, **kwargs):
        if not store.database._waiting_allowed():
            raise errors.WouldBlock()
        return get_memory(*args, **kwargs)

    monkeypatch.setattr(store.memories, "get", would_wait)
    threads = counting_threads(monkeypatch)
    app = create_app(store, [KEY])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t",
                                 headers={"x-api-key": KEY}) as c:
        got = await c.get(f"/v1/memory_stores/{sid}/memories/{m.id}")
        missing = await c.get(f"/v1/memory_stores/{sid}/memories/mem_nope")
    assert got.status_code == 200 and got.json()["content"] == "x"
    assert missing.status_code == 404 and missing.json()["type"] == "error"
    assert len(threads) == 2


class _LockedStore:
    """A store whose batches first wait for the write lock (held by another process)."""

    def __init__(self) -> None:
        self.unlocked = threading.Event()
        self.batches: list[list[str]] = []

    def batch(self, calls, scopes=()):
        self.unlocked.wait(5)
        out = [fn() for fn in (calls() if callable(calls) else calls)]
        self.batches.append(out)
        return out


async def test_writes_arriving_while_a_batch_waits_for_the_write_lock_join_it():
    """With several processes, a batch may wait a while for the lock another's commit holds:
    the requests arriving meanwhile are committed in it, not in a batch of their own after
    (on PostgreSQL with 2 replicas, batches went 1, 15, 1, 15, ...)."""
    store = _LockedStore()
    writes = api.WriteBatcher(store)  # type: ignore[arg-type]
    got: dict[str, str] = {}

    async def write(name: str) -> None:
        got[name] = await writes.run(lambda: name)

    with trio.fail_after(5):
        async with trio.open_nursery() as n:
            for name in ("first", "second", "third"):
                n.start_soon(write, name)
                await trio.testing.wait_all_tasks_blocked()
            store.unlocked.set()
    assert got == {"first": "first", "second": "second", "third": "third"}
    assert store.batches == [["first", "second", "third"]]


class _ScopedStore:
    """A store whose batches of the scopes in ``held`` wait for ``go`` (a transaction of that
    store held open), the others commit at once."""

    def __init__(self, held: tuple[str, ...], dialect: str = "postgresql") -> None:
        self.held, self.dialect = held, dialect
        self.go = threading.Event()
        self.taken = threading.Event()
        self.batches: list[tuple[tuple[str, ...], list[str]]] = []

    def batch(self, calls, scopes=()):
        calls = calls() if callable(calls) else calls
        if tuple(scopes) == self.held:
            self.taken.set()
            assert self.go.wait(30)
        out = [fn() for fn in calls]
        self.batches.append((tuple(scopes), out))
        return out


async def test_batches_of_different_stores_commit_side_by_side():
    """Issue 44: one queue per scopes. A batch of store A under way (its commit held) does
    not hold back the writes of store B, which commit in batches of their own meanwhile;
    those of A that arrive meanwhile wait for A's next batch."""
    a, b = ("store:A",), ("store:B",)
    store = _ScopedStore(held=a)
    writes = api.WriteBatcher(store)  # type: ignore[arg-type]
    got: dict[str, str] = {}

    async def write(name: str, scopes: tuple[str, ...]) -> None:
        got[name] = await writes.run(lambda: name, scopes)

    with trio.fail_after(30):
        async with trio.open_nursery() as n:
            n.start_soon(write, "a1", a)
            await async_wait_until(store.taken.is_set, timeout=20)
            n.start_soon(write, "a2", a)
            await trio.testing.wait_all_tasks_blocked()
            for name in ("b1", "b2"):
                n.start_soon(write, name, b)
            await async_wait_until(lambda: {"b1", "b2"} <= set(got), timeout=20)
            assert "a1" not in got and "a2" not in got  # A's batch is still held
            store.go.set()
    assert got == {"a1": "a1", "a2": "a2", "b1": "b1", "b2": "b2"}
    assert [x for x in store.batches if x[0] == a] == [(a, ["a1"]), (a, ["a2"])]
    assert sorted(n for x in store.batches if x[0] == b for n in x[1]) == ["b1", "b2"]
    assert writes._queues == {}  # an idle store's queue goes


async def test_on_sqlite_the_writes_of_every_store_share_one_batch():
    """SQLite's one writer would commit the batches of two stores in turn, an fsync each:
    there the writes of every store are committed together, in batches holding every
    write's lock."""
    store = _ScopedStore(held=(), dialect="sqlite")
    writes = api.WriteBatcher(store)  # type: ignore[arg-type]
    got: dict[str, str] = {}

    async def write(name: str, scopes: tuple[str, ...]) -> None:
        got[name] = await writes.run(lambda: name, scopes)

    with trio.fail_after(30):
        async with trio.open_nursery() as n:
            n.start_soon(write, "a1", ("store:A",))
            await async_wait_until(store.taken.is_set, timeout=20)
            for name, scopes in [("a2", ("store:A",)), ("b1", ("store:B",))]:
                n.start_soon(write, name, scopes)
                await trio.testing.wait_all_tasks_blocked()
            store.go.set()
    assert store.batches == [((), ["a1"]), ((), ["a2", "b1"])]


async def test_a_batch_that_fails_before_taking_its_writes_answers_them():
    class Broken:
        def batch(self, calls, scopes=()):
            raise RuntimeError("a bug")

    writes = api.WriteBatcher(Broken())  # type: ignore[arg-type]
    with trio.fail_after(5), pytest.raises(RuntimeError):
        await writes.run(lambda: "x")
    with trio.fail_after(5), pytest.raises(RuntimeError):  # and the next one is not stuck
        await writes.run(lambda: "y")


async def test_a_request_cancelled_just_after_it_is_woken_to_commit_still_commits_its_batch():
    """Woken to commit the next batch, then cancelled before it runs: the batch (its own write
    and those queued behind it) is committed all the same, and everyone gets their answer."""
    store = _SlowStore()
    writes = api.WriteBatcher(store)  # type: ignore[arg-type]
    got: dict[str, str] = {}
    scope = trio.CancelScope()

    async def first() -> None:
        got["first"] = await writes.run(lambda: "first")
        scope.cancel()  # "second" was just woken to commit; it has not run yet

    async def second() -> None:
        with scope:
            got["second"] = await writes.run(lambda: "second")

    async def third() -> None:
        got["third"] = await writes.run(lambda: "third")

    with trio.fail_after(5):
        async with trio.open_nursery() as n:
            n.start_soon(first)
            await store.first_batch_taken()
            n.start_soon(second)
            await trio.testing.wait_all_tasks_blocked()
            n.start_soon(third)
            await trio.testing.wait_all_tasks_blocked()
            store.go.set()
    assert got["first"] == "first" and got["third"] == "third"
    assert store.batches == [["first"], ["second", "third"]]
