"""The correctness target of issue 44, on a fleet: four ``memfs serve`` replicas on one
PostgreSQL database, eight stores, writers through the API (many threads, each request to a
replica picked at random) and through remote FUSE mounts of different replicas, all at once,
checked against a model of what each writer did and was answered:

- every store holds exactly what the model says (each path its last content, no path twice),
  and its ``memory_count`` is its number of memories;
- a path created by several writers at once through different replicas is created once (the
  others are refused with ``memory_path_conflict_error``);
- the 2,000-memory limit is exact: a store seeded with 1,990 memories and hammered by
  concurrent creates through every replica ends at 2,000, every other create refused with the
  limit's error;
- a follower of each store's change stream (and of each session's event stream), each on a
  replica, saw every change (event) of it once and in order: what the database's feed holds,
  and replaying its changes gives the store's final tree.

Writes of different stores no longer wait for one another (the per-store locks of issue 44,
``MEMFS_PG_LOCKS``): the test holds in both lock modes. Nothing acknowledged lost across
``pg_ctl stop -m immediate`` is test_pg_crash.py's; revocation reaching every replica within
1 s, test_key_revocation.py's. On the test session's throwaway cluster
(tests/conftest.py ``pg_cluster``) and FUSE: both fail when CI=true."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from memfs.store import Store
from tests.support import wait_until
from tests.support.feedlocks import lock_key, pg_lock_parts
from tests.support.mount import Mount, require_fuse
from tests.support.remote import remote_env
from tests.support.server import Server, start_server, stop_server
from tests.support.storekit import API

KEY = "sk-memfs-fleet"
HEADERS = {"x-api-key": KEY}
REPLICAS = 4
#: Stores written at random (the eighth is the one at the limit).
STORES = 7
LIMIT = 2000
SEEDED = 1990
#: Threads writing through the API, and each one's random operations.
API_WRITERS = 8
OPS = 30
#: Paths every API writer tries to create at once.
RACED = 8
#: Threads creating in the store at the limit (spread over the replicas), and creates each.
LIMIT_WRITERS = 8
LIMIT_CREATES = 10
#: Remote mounts (each of another store, on another replica) and their operations.
MOUNTS = 2
MOUNT_OPS = 25
#: Sessions, each sent events by two threads through two replicas at once.
SESSIONS = 3
EVENTS = 10


@pytest.fixture
def fleet(pg_cluster: Any, tmp_path: Path) -> Iterator[tuple[str, list[Server]]]:
    """Four replicas on a fresh database (started side by side), stopped cleanly at the end,
    none having logged a traceback."""
    name = pg_cluster.new_database(pg_cluster.template)
    url = pg_cluster.url(name)
    servers: list[Server | None] = [None] * REPLICAS
    failed: list[BaseException] = []

    def start(i: int) -> None:
        d = tmp_path / f"replica{i}"
        d.mkdir()
        try:
            servers[i] = start_server(d, "--api-key", KEY, db=url,
                                      env={"MEMFS_EMBEDDINGS": "none"})
        except BaseException as e:  # noqa: BLE001 - raised below
            failed.append(e)

    starting = [threading.Thread(target=start, args=(i,)) for i in range(REPLICAS)]
    for t in starting:
        t.start()
    for t in starting:
        t.join()
    started = [s for s in servers if s is not None]
    try:
        if failed:
            raise failed[0]
        yield url, started
    finally:
        for s in started:
            assert stop_server(s) == 0
        for s in started:
            log = s.stderr.read_text()
            assert "Traceback" not in log, log[-4000:]
        pg_cluster.drop_database(name)


class Follower:
    """An SSE stream (``path`` on the replica ``base``) read in a thread: its frames as
    ``(event, data)``."""

    def __init__(self, base: str, path: str) -> None:
        self.frames: list[tuple[str, dict[str, Any]]] = []
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self._stop = False
        self.thread = threading.Thread(target=self._read, args=(base + path,), daemon=True)
        self.thread.start()
        assert self.ready.wait(20)

    def _read(self, url: str) -> None:
        try:
            with httpx.stream("GET", url, headers=HEADERS, timeout=60) as r:
                r.raise_for_status()
                event = ""
                for line in r.iter_lines():
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: "):
                        self.frames.append((event, json.loads(line[6:])))
                        self.ready.set()  # the first frame: a ping, the stream is open
                    if self._stop:
                        return
        except BaseException as e:  # noqa: BLE001 - the test reports it
            self.error = e
        finally:
            self.ready.set()

    def of(self, event: str) -> list[dict[str, Any]]:
        return [d for e, d in list(self.frames) if e == event]

    def stop(self) -> None:
        self._stop = True


@dataclass
class Model:
    """What one writer made of a store: path -> (memory id, or None from a mount, content)."""

    files: dict[str, dict[str, tuple[str | None, str]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def api_writer(n: int, urls: list[str], stores: list[str], start: threading.Barrier,
               raced: list[list[tuple[int, str]]], model: Model) -> None:
    """Random creates, updates, renames and deletes of its own paths (``/w<n>/``) in every
    store, each through a replica picked at random; first the race: every writer creates
    the same paths of the first store at once."""
    rnd = random.Random(n)
    clients = [httpx.Client(base_url=u, headers=HEADERS, timeout=60) for u in urls]
    try:
        start.wait(30)
        for k in range(RACED):
            content = f"race {k} by {n}"
            r = rnd.choice(clients).post(f"/v1/memory_stores/{stores[0]}/memories",
                                         json={"path": f"/race/{k}.md", "content": content})
            raced[k].append((r.status_code, r.json().get("id") or r.json()["error"]["type"]))
        made = 0
        for i in range(OPS):
            sid = rnd.choice(stores)
            mine = model.files.setdefault(sid, {})
            c = rnd.choice(clients)
            base = f"/v1/memory_stores/{sid}/memories"
            op = "create" if not mine or rnd.random() < 0.35 else rnd.choice(
                ["update", "rename", "delete"])
            content = f"{n}:{i}"
            if op == "create":
                path = f"/w{n}/f{made}.md"
                made += 1
                r = c.post(base, json={"path": path, "content": content})
            else:
                path = rnd.choice(sorted(mine))
                mid = mine[path][0]
                if op == "update":
                    r = c.post(f"{base}/{mid}", json={"content": content})
                elif op == "rename":
                    new = f"/w{n}/f{made}.md"
                    made += 1
                    r = c.post(f"{base}/{mid}", json={"path": new})
                else:
                    r = c.delete(f"{base}/{mid}")
            if r.status_code != 200:
                model.errors.append(f"{op} {path}: {r.status_code} {r.text[:200]}")
                continue
            if op == "create":
                mine[path] = (r.json()["id"], content)
            elif op == "update":
                mine[path] = (mine[path][0], content)
            elif op == "rename":
                mine[new] = mine.pop(path)
            else:
                del mine[path]
    finally:
        for c in clients:
            c.close()


def limit_writer(n: int, url: str, sid: str, start: threading.Barrier,
                 answers: list[tuple[int, dict[str, Any]]]) -> None:
    with httpx.Client(base_url=url, headers=HEADERS, timeout=60) as c:
        start.wait(30)
        for i in range(LIMIT_CREATES):
            r = c.post(f"/v1/memory_stores/{sid}/memories",
                       json={"path": f"/lim/{n}-{i}.md", "content": f"{n} {i}"})
            answers.append((r.status_code, r.json()))


def mount_writer(n: int, root: Path, start: threading.Barrier, model: Model) -> None:
    """Files of its own (``m<n>-*.md`` at the mount's root) made, rewritten, renamed and
    removed by plain file operations."""
    rnd = random.Random(1000 + n)
    mine = model.files.setdefault("", {})
    start.wait(30)
    made = 0
    for i in range(MOUNT_OPS):
        op = "create" if not mine or rnd.random() < 0.4 else rnd.choice(
            ["update", "rename", "delete"])
        content = f"mount {n}:{i}\n"
        try:
            if op == "create":
                path = f"/m{n}-{made}.md"
                made += 1
                (root / path[1:]).write_text(content)
                mine[path] = (None, content)
            else:
                path = rnd.choice(sorted(mine))
                if op == "update":
                    (root / path[1:]).write_text(content)
                    mine[path] = (None, content)
                elif op == "rename":
                    new = f"/m{n}-{made}.md"
                    made += 1
                    os.rename(root / path[1:], root / new[1:])
                    mine[new] = mine.pop(path)
                else:
                    os.unlink(root / path[1:])
                    del mine[path]
        except OSError as e:
            model.errors.append(f"{op} {path}: {e!r}")


def check_feed_locks(url: str, scopes: dict[str, str]) -> None:
    """From now on the database refuses a change of a store (an event of a session) of
    ``scopes`` inserted by a transaction that holds neither that scope's advisory lock nor
    the global write lock, both exclusive: what keeps one store's feed (one session's events)
    in commit order. A write that broke the rule fails (and the test with it)."""
    from memfs.backends.postgresql import WRITE_LOCK_KEY

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE test_feed_locks (id TEXT PRIMARY KEY, classid OID, objid OID)")
        for i, scope in [*scopes.items(), ("*", "")]:
            classid, objid = pg_lock_parts(lock_key(scope) if scope else WRITE_LOCK_KEY)
            conn.execute("INSERT INTO test_feed_locks VALUES (%s, %s, %s)", (i, classid, objid))
        conn.execute("""
            CREATE FUNCTION test_check_feed_lock() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE owner TEXT := to_jsonb(NEW) ->> CASE TG_TABLE_NAME
                                      WHEN 'changes' THEN 'store_id' ELSE 'session_id' END;
            BEGIN
                IF owner IS NULL OR NOT EXISTS (SELECT 1 FROM test_feed_locks WHERE id = owner)
                THEN RETURN NEW; END IF;
                IF NOT EXISTS (SELECT 1 FROM pg_locks l JOIN test_feed_locks k
                        ON l.classid = k.classid AND l.objid = k.objid
                        WHERE l.pid = pg_backend_pid() AND l.locktype = 'advisory'
                        AND l.granted AND l.mode = 'ExclusiveLock' AND k.id IN (owner, '*'))
                THEN RAISE EXCEPTION 'a row of % for % without its lock', TG_TABLE_NAME, owner;
                END IF;
                RETURN NEW;
            END $$""")
        for table in ("changes", "events"):
            conn.execute(f"CREATE TRIGGER test_feed_lock BEFORE INSERT ON {table} "
                         "FOR EACH ROW EXECUTE FUNCTION test_check_feed_lock()")


def replay(changes: list[dict[str, Any]]) -> dict[str, str]:
    """A store's tree (path -> memory id) that its changes make from an empty store."""
    tree: dict[str, str] = {}
    for ch in changes:
        if ch["op"] == "put":
            for p in [p for p, m in tree.items() if m == ch["memory_id"]]:
                del tree[p]
            tree[ch["path"]] = ch["memory_id"]
        elif ch["op"] == "delete":
            tree.pop(ch["path"], None)
        else:
            raise AssertionError(f"a change no writer of this test makes: {ch}")
    return tree


def test_a_fleet_of_replicas_keeps_every_rule_of_every_store(
        fleet: tuple[str, list[Server]], tmp_path: Path) -> None:
    require_fuse()
    url, servers = fleet
    urls = [s.url for s in servers]
    db = Store(url)
    mounts: list[Mount] = []
    followers: list[Follower] = []
    try:
        stores = [db.stores.create(f"s{i}").id for i in range(STORES)]
        full = db.stores.create("full").id
        for i in range(0, SEEDED, 500):
            seeded = db.batch([partial(db.memories.write_path, full, f"/seed/{j}.md", "x",
                                       actor=API) for j in range(i, min(i + 500, SEEDED))])
            assert not [e for e in seeded if isinstance(e, BaseException)]
        sessions = [db.sessions.create([]).id for _ in range(SESSIONS)]
        check_feed_locks(url, {**{sid: f"store:{sid}" for sid in [*stores, full]},
                               **{s: f"session:{s}" for s in sessions}})
        # Remote mounts of stores 1 and 2, through replicas 1 and 2.
        for n in range(MOUNTS):
            m = Mount(tmp_path / "unused.db", stores[1 + n], tmp_path / f"mnt{n}", [],
                      remote_env(urls[1 + n], KEY))
            mounts.append(m)
        for m in mounts:
            m.wait_mounted()
        # A follower of each store's changes, and of each session's events, each on a replica.
        starts = {sid: db.feed.last(sid) for sid in [*stores, full]}
        changes = {sid: Follower(urls[i % REPLICAS], f"/v1/memory_stores/{sid}/changes/stream"
                                 f"?after={starts[sid]}")
                   for i, sid in enumerate([*stores, full])}
        first_event = {s: db.events.last_seq(s) for s in sessions}
        events = {s: Follower(urls[(i + 1) % REPLICAS], f"/v1/sessions/{s}/events/stream")
                  for i, s in enumerate(sessions)}
        followers += [*changes.values(), *events.values()]

        # All at once: API writers, the race at the limit, mount writers, session events.
        workers = API_WRITERS + LIMIT_WRITERS + MOUNTS + 2 * SESSIONS
        start = threading.Barrier(workers)
        models = [Model() for _ in range(API_WRITERS + MOUNTS)]
        raced: list[list[tuple[int, str]]] = [[] for _ in range(RACED)]
        limited: list[tuple[int, dict[str, Any]]] = []
        sent: dict[str, list[str]] = {s: [] for s in sessions}

        def send(i: int, session: str) -> None:
            with httpx.Client(base_url=urls[i % REPLICAS], headers=HEADERS, timeout=60) as c:
                start.wait(30)
                for k in range(EVENTS):
                    r = c.post(f"/v1/sessions/{session}/events", json={"events": [
                        {"type": "user.message",
                         "content": [{"type": "text", "text": f"{i}:{k}"}]}]})
                    assert r.status_code == 200, r.text
                    sent[session] += [e["id"] for e in r.json()["data"]]

        threads = [threading.Thread(target=api_writer,
                                    args=(n, urls, stores, start, raced, models[n]))
                   for n in range(API_WRITERS)]
        threads += [threading.Thread(target=limit_writer,
                                     args=(n, urls[n % REPLICAS], full, start, limited))
                    for n in range(LIMIT_WRITERS)]
        threads += [threading.Thread(target=mount_writer,
                                     args=(n, mounts[n].root, start, models[API_WRITERS + n]))
                    for n in range(MOUNTS)]
        threads += [threading.Thread(target=send, args=(i, sessions[i // 2]))
                    for i in range(2 * SESSIONS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
        for m in models:
            assert not m.errors, m.errors

        # The model: every path of every store as its writer last left it.
        want: dict[str, dict[str, tuple[str | None, str]]] = {sid: {} for sid in stores}
        for n, m in enumerate(models):
            for sid, files in m.files.items():
                want[stores[1 + n - API_WRITERS] if sid == "" else sid].update(files)
        for answers in raced:
            won = [a for a in answers if a[0] == 200]
            assert len(won) == 1, answers
            assert sorted(a[1] for a in answers if a[0] != 200) == [
                "memory_path_conflict_error"] * (API_WRITERS - 1), answers
        for sid in stores:
            rows = db.all("SELECT id, path, content FROM memories WHERE store_id = ?", (sid,))
            held = {r["path"]: (r["id"], r["content"]) for r in rows}
            assert len(held) == len(rows)  # no path twice
            raced_here = {p: v for p, v in held.items() if p.startswith("/race/")}
            if sid == stores[0]:
                assert sorted(raced_here) == [f"/race/{k}.md" for k in range(RACED)]
            assert {p: v for p, v in held.items() if not p.startswith("/race/")} == {
                p: (mid or held.get(p, ("", ""))[0], c) for p, (mid, c) in want[sid].items()}
        counts = {r[0]: (r[1], r[2]) for r in db.all(
            "SELECT s.id, s.memory_count, (SELECT count(*) FROM memories m "
            "WHERE m.store_id = s.id) FROM stores s")}
        assert all(kept == real for kept, real in counts.values()), counts

        # The limit, exactly.
        assert counts[full] == (LIMIT, LIMIT)
        made = [a for a in limited if a[0] == 200]
        refused = [a for a in limited if a[0] != 200]
        assert len(made) == LIMIT - SEEDED
        assert len(refused) == LIMIT_WRITERS * LIMIT_CREATES - (LIMIT - SEEDED)
        for status, body in refused:
            assert status == 400 and body["error"]["type"] == "invalid_request_error", body
            assert f"the limit is {LIMIT}" in body["error"]["message"], body

        # Every follower saw every change (event) of its store (session) once, in order.
        for sid, f in changes.items():
            feed = [dataclasses.asdict(c) for c in _whole_feed(db, sid, starts[sid])]
            last = feed[-1]["seq"] if feed else starts[sid]
            wait_until(lambda f=f, last=last: f.of("memfs.change") and
                       f.of("memfs.change")[-1]["seq"] >= last, 30, what=f"{sid}'s follower")
            seen = [{k: d[k] for k in ("seq", "op", "memory_id", "path", "old_path")}
                    for d in f.of("memfs.change")]
            assert not f.of("memfs.reset") and f.error is None
            assert seen == [{k: c[k] for k in ("seq", "op", "memory_id", "path", "old_path")}
                            for c in feed]
            if sid != full:
                held_ids = {r["path"]: r["id"] for r in db.all(
                    "SELECT id, path FROM memories WHERE store_id = ?", (sid,))}
                assert replay(seen) == held_ids
        for s, f in events.items():
            stored = [e.id for _, e in db.events.after(s, first_event[s], 10_000)]
            assert sorted(stored) == sorted(sent[s]) and len(stored) == 2 * EVENTS
            n = len(stored)
            wait_until(lambda f=f, n=n: len(f.of("user.message")) >= n, 30)
            assert [d["id"] for d in f.of("user.message")] == stored
    finally:
        for f in followers:
            f.stop()
        for m in mounts:
            m.stop()
        db.close()


def _whole_feed(db: Store, sid: str, after: int) -> list[Any]:
    out: list[Any] = []
    while batch := db.feed.since(sid, after, 1000):
        out += batch
        after = batch[-1].seq
    return out
