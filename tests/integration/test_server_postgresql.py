"""``memfs serve --db postgresql://…``: two server processes (replicas) on one PostgreSQL
database, driven by ``anthropic==2.14.0`` and raw HTTP (issue 12). The database is a fresh
one in the test session's throwaway cluster (tests/conftest.py ``pg_cluster``)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from memfs.store import Store
from tests.support import wait_until
from tests.support.mount import Mount, require_fuse
from tests.support.remote import remote_env
from tests.support.server import Server, sdk, start_server, stop_server

KEY = "sk-memfs-replicas"


@pytest.fixture
def replicas(pg_cluster, tmp_path) -> Iterator[tuple[Server, Server]]:
    name = pg_cluster.new_database(pg_cluster.template)
    url = pg_cluster.url(name)
    started: list[Server] = []
    try:
        for i in range(2):
            d = tmp_path / f"replica{i}"
            d.mkdir()
            # MEMFS_DB for one, --db for the other: both name the database
            if i == 0:
                started.append(start_server(d, "--api-key", KEY, db=url))
            else:
                started.append(start_server(d, "--api-key", KEY, db="",
                                            env={"MEMFS_DB": url}))
        for s in started:
            s.db_url = url  # type: ignore[attr-defined]
        yield started[0], started[1]
    finally:
        for s in started:
            assert stop_server(s) == 0
        pg_cluster.drop_database(name)


def test_two_replicas_serve_one_database(replicas):
    a, b = replicas
    for s in (a, b):
        assert "postgresql://" in s.stderr.read_text()
    ca = sdk(a.url, KEY)
    cb = sdk(b.url, KEY)
    store = ca.beta.memory_stores.create(name="Shared")
    assert cb.beta.memory_stores.retrieve(store.id).name == "Shared"
    m = ca.beta.memory_stores.memories.create(store.id, path="/a.md", content="from a")
    got = cb.beta.memory_stores.memories.retrieve(m.id, memory_store_id=store.id)
    assert got.content == "from a"
    # a precondition written through one replica is checked by the other
    cb.beta.memory_stores.memories.update(
        m.id, memory_store_id=store.id, content="from b",
        precondition={"type": "content_sha256", "content_sha256": m.content_sha256})
    with pytest.raises(anthropic.APIStatusError) as e:
        ca.beta.memory_stores.memories.update(
            m.id, memory_store_id=store.id, content="stale",
            precondition={"type": "content_sha256", "content_sha256": m.content_sha256})
    assert e.value.status_code == 409
    versions = ca.beta.memory_stores.memory_versions.list(store.id, memory_id=m.id)
    assert [v.operation for v in versions.data] == ["modified", "created"]


def test_the_memory_limit_holds_across_replicas(pg_cluster, tmp_path):
    """MEMFS_MAX_MEMORIES per server; creates race through both at once."""
    name = pg_cluster.new_database(pg_cluster.template)
    url = pg_cluster.url(name)
    servers = []
    try:
        for i in range(2):
            d = tmp_path / f"r{i}"
            d.mkdir()
            servers.append(start_server(d, "--api-key", KEY, db=url,
                                        env={"MEMFS_MAX_MEMORIES": "25"}))
        h = {"x-api-key": KEY}
        sid = httpx.post(servers[0].url + "/v1/memory_stores", headers=h,
                         json={"name": "race"}).json()["id"]
        codes: list[int] = []

        def create(n: int) -> None:
            with httpx.Client(base_url=servers[n % 2].url, headers=h, timeout=30) as c:
                for i in range(10):
                    r = c.post(f"/v1/memory_stores/{sid}/memories",
                               json={"path": f"/t{n}/{i}.md", "content": "x"})
                    codes.append(r.status_code)

        threads = [threading.Thread(target=create, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(set(codes)) == [200, 400] or sorted(set(codes)) == [201, 400], codes
        assert len([c for c in codes if c < 300]) == 25
        listed = httpx.get(servers[1].url + f"/v1/memory_stores/{sid}/memories",
                           headers=h, params={"limit": 100}).json()["data"]
        assert len(listed) == 25
    finally:
        for s in servers:
            assert stop_server(s) == 0
        pg_cluster.drop_database(name)


class _Follower:
    """Follows replica ``url``'s change stream of ``sid`` in a thread: when each path arrived
    (monotonic clock)."""

    def __init__(self, url: str, sid: str) -> None:
        self.arrived: dict[str, float] = {}
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._follow, args=(url, sid), daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _follow(self, url: str, sid: str) -> None:
        with httpx.stream("GET", f"{url}/v1/memory_stores/{sid}/changes/stream",
                          headers={"x-api-key": KEY}, timeout=30) as r:
            self.ready.set()
            for line in r.iter_lines():
                if line.startswith("data: "):
                    data = json.loads(line[6:])
                    if isinstance(data, dict) and data.get("path"):
                        self.arrived[data["path"]] = time.monotonic()
                        if data["path"] == "/end.md":
                            return


def _listeners(url: str) -> int:
    """How many LISTEN connections (memfs.backends.pgwatch, one a process) the database has."""
    import psycopg

    dbname = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(url, autocommit=True) as c:
        row = c.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                        "AND query = 'LISTEN memfs_changes'", (dbname,)).fetchone()
    return int(row[0]) if row else 0


def _percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[max(0, math.ceil(p / 100 * len(values)) - 1)]


def test_a_write_through_one_replica_reaches_a_change_stream_of_the_other(replicas):
    """The change feed is in the database and every change NOTIFYs its store on commit: a
    follower of replica B sees what was written through replica A as soon as B's LISTEN
    connection hears of it (memfs.backends.pgwatch), not at B's next poll (the safety poll is 2 s).
    Prints the latency from each write's request (and from its answer) to its arrival."""
    a, b = replicas
    h = {"x-api-key": KEY}
    sid = httpx.post(a.url + "/v1/memory_stores", headers=h, json={"name": "live"}).json()["id"]
    listening = _listeners(a.db_url)  # type: ignore[attr-defined]
    follower = _Follower(b.url, sid)
    # B's LISTEN connection is up (else the first latencies would include connecting it).
    wait_until(lambda: _listeners(a.db_url) > listening)  # type: ignore[attr-defined]
    n = 120
    started: dict[str, float] = {}
    answered: dict[str, float] = {}
    with httpx.Client(base_url=a.url, headers=h) as c:
        for i in range(n):
            path = f"/w{i}.md"
            started[path] = time.monotonic()
            r = c.post(f"/v1/memory_stores/{sid}/memories", json={"path": path, "content": "x"})
            answered[path] = time.monotonic()
            assert r.status_code < 300, r.text
            time.sleep(0.02)  # the point: writes a moment apart, each one's latency its own
        c.post(f"/v1/memory_stores/{sid}/memories", json={"path": "/end.md", "content": "x"})
    follower.thread.join(10)
    assert set(started) <= set(follower.arrived)
    from_request = [follower.arrived[p] - started[p] for p in started]
    from_answer = [max(0.0, follower.arrived[p] - answered[p]) for p in started]
    print(f"\ncross-replica change latency over {n} writes, from the request: "
          f"p50 {_percentile(from_request, 50) * 1000:.1f} ms, "
          f"p99 {_percentile(from_request, 99) * 1000:.1f} ms, "
          f"max {max(from_request) * 1000:.1f} ms; from the answer: "
          f"p50 {_percentile(from_answer, 50) * 1000:.1f} ms, "
          f"p99 {_percentile(from_answer, 99) * 1000:.1f} ms")
    assert _percentile(from_request, 99) < 1.0


def test_a_follower_gets_every_change_across_a_lost_listen_connection(pg_cluster, replicas):
    """Replica B's LISTEN connection is killed (as by a server restart or a network cut)
    while its follower waits: B reconnects, polls the feed, and the changes written through A
    meanwhile and after still arrive, well before the 2 s safety poll."""
    a, b = replicas
    h = {"x-api-key": KEY}
    sid = httpx.post(a.url + "/v1/memory_stores", headers=h, json={"name": "cut"}).json()["id"]
    listening = _listeners(a.db_url)  # type: ignore[attr-defined]
    follower = _Follower(b.url, sid)
    wait_until(lambda: _listeners(a.db_url) > listening)  # type: ignore[attr-defined]
    import psycopg

    url = a.db_url  # type: ignore[attr-defined]
    dbname = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(url, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND query = 'LISTEN memfs_changes'", (dbname,)).fetchall()
        killed = [(pid,) for pid, _ in killed]
        assert killed, "no LISTEN connection found"
        t0 = time.monotonic()
        with httpx.Client(base_url=a.url, headers=h) as c:
            c.post(f"/v1/memory_stores/{sid}/memories", json={"path": "/during.md",
                                                                "content": "x"})
            wait_until(lambda: "/during.md" in follower.arrived)
            during = follower.arrived["/during.md"] - t0
            relistening = admin.execute(  # B's follower is on: B listens again
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                "AND query = 'LISTEN memfs_changes' AND pid <> ALL(%s)",
                (dbname, [pid for pid, in killed])).fetchone()[0]
            t1 = time.monotonic()
            c.post(f"/v1/memory_stores/{sid}/memories", json={"path": "/end.md",
                                                                "content": "x"})
        follower.thread.join(5)
        assert "/end.md" in follower.arrived
        after = follower.arrived["/end.md"] - t1
    print(f"\nacross a killed LISTEN connection: {during * 1000:.0f} ms, "
          f"then {after * 1000:.0f} ms")
    assert relistening == 1
    assert during < 1.5 and after < 0.5


def test_a_local_mount_on_postgresql_sees_another_process_write_at_once(pg_cluster,
                                                                         tmp_path):
    """``memfs mount`` on a postgresql:// database: its ChangeWatcher is woken by the
    database's notifications (memfs.backends.pgwatch), not by its safety poll (2 s). Prints the
    delay from a write by another process to the file being listed in the mount."""
    from tests.support.mount import Mount, require_fuse

    require_fuse()
    name = pg_cluster.new_database(pg_cluster.template)
    url = pg_cluster.url(name)
    writer = Store(url)
    mount = None
    try:
        sid = writer.stores.create("mounted").id
        listening = _listeners(url)
        mount = Mount(url, sid, tmp_path / "mnt", [])  # type: ignore[arg-type]
        mount.wait_mounted()
        wait_until(lambda: _listeners(url) > listening)  # its LISTEN connection is up
        delays = []
        for i in range(30):
            writer.memories.write_path(sid, f"/m{i}.md", "x", actor=None)
            t0 = time.monotonic()
            deadline = t0 + 3
            while f"m{i}.md" not in os.listdir(mount.root):
                assert time.monotonic() < deadline, f"/m{i}.md never appeared: {mount.log()}"
                time.sleep(0.002)  # a measurement: polls every 2 ms
            delays.append(time.monotonic() - t0)
        print(f"\nlocal mount on PostgreSQL, another process's write listed after: "
              f"p50 {_percentile(delays, 50) * 1000:.1f} ms, "
              f"p99 {_percentile(delays, 99) * 1000:.1f} ms (30 writes)")
        assert _percentile(delays, 99) < 1.0
    finally:
        if mount is not None:
            mount.stop()
        writer.close()
        pg_cluster.drop_database(name)


def test_a_console_sign_out_on_one_replica_signs_out_everywhere(replicas):
    """The Console's cookie is checked by any replica; signing out through one must make
    every replica refuse it (issue 19: it stayed valid for 12 hours)."""
    a, b = replicas
    host = {"host": a.url.removeprefix("http://")}
    r = httpx.post(a.url + "/signin", data={"api_key": KEY}, headers=host)
    assert r.status_code == 303
    cookie = {"memfs_console": r.cookies["memfs_console"]}
    page = httpx.get(b.url + "/stores", cookies=cookie)
    assert page.status_code == 200
    csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    r = httpx.post(b.url + "/signout", data={"csrf": csrf}, cookies=cookie,
                   headers={"host": b.url.removeprefix("http://")})
    assert r.status_code == 303
    for s in (a, b):
        r = httpx.get(s.url + "/stores", cookies=cookie)
        assert r.status_code == 303 and r.headers["location"].startswith("/signin"), s.url


class _Frames:
    """Every frame of an SSE stream (``url``), read in a thread: (monotonic time, event,
    data), and whether (and when) the stream ended."""

    def __init__(self, url: str) -> None:
        self.frames: list[tuple[float, str, dict]] = []
        self.ended: float | None = None
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(url,), daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _read(self, url: str) -> None:
        try:
            with httpx.stream("GET", url, headers={"x-api-key": KEY}, timeout=30) as r:
                self.ready.set()
                event = ""
                for line in r.iter_lines():
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: "):
                        self.frames.append((time.monotonic(), event, json.loads(line[6:])))
        except BaseException as e:  # noqa: BLE001 - the test reports it
            self.error = e
        finally:
            self.ended = time.monotonic()
            self.ready.set()

    def paths(self) -> list[str]:
        return [d["path"] for _, e, d in self.frames if e == "memfs.change"]

    def texts(self) -> list[str]:
        return [d["content"][0]["text"] for _, e, d in self.frames if e == "user.message"]

    def wait_for(self, what: str, got: Any, timeout: float) -> None:
        try:
            wait_until(lambda: what in got(), timeout, interval=0.02)
        except TimeoutError:
            raise AssertionError((what, got(), self.error)) from None


def test_live_streams_wait_through_a_database_outage(pg_cluster, tmp_path):
    """The database refuses connections for a while (a restart, a failover): a change stream
    was cut with a 40-line traceback and hypercorn's "Error in ASGI Framework" on every
    outage (PoolTimeout -> StorageError, issue 19). Now the change stream and a session's
    event stream keep their pings going, the server says once that the database cannot be
    reached, and both bring what is written once it is back."""
    import psycopg

    name = pg_cluster.new_database(pg_cluster.template)
    url = pg_cluster.url(name)
    d = tmp_path / "server"
    d.mkdir()
    server = start_server(d, "--api-key", KEY, db=url)
    stopped = False
    writer = Store(url)
    try:
        h = {"x-api-key": KEY}
        sid = httpx.post(server.url + "/v1/memory_stores", headers=h,
                         json={"name": "outage"}).json()["id"]
        session = writer.sessions.create([]).id
        changes = _Frames(f"{server.url}/v1/memory_stores/{sid}/changes/stream")
        events = _Frames(f"{server.url}/v1/sessions/{session}/events/stream")

        def message(text: str) -> None:
            writer.events.send(session, [{"type": "user.message",
                                          "content": [{"type": "text", "text": text}]}])

        writer.memories.write_path(sid, "/before.md", "x", actor=None)
        message("before")
        changes.wait_for("/before.md", changes.paths, 5)
        events.wait_for("before", events.texts, 5)
        with psycopg.connect(pg_cluster.url(), autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = %s", (name,))
            began = time.monotonic()
            time.sleep(8)  # the point: an outage longer than a ping interval (5 s) and polls
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            back = time.monotonic()
        for stream in (changes, events):
            assert stream.ended is None, f"a stream ended in the outage: {stream.error!r}"
        pings = [t for t, e, _ in changes.frames if e == "ping" and began < t < back]
        assert pings, "no keepalive during the outage"
        writer.memories.write_path(sid, "/after.md", "x", actor=None)
        message("after")
        written = time.monotonic()  # (the writer's own pool may take a while to reconnect)
        changes.wait_for("/after.md", changes.paths, 10)
        events.wait_for("after", events.texts, 10)
        assert changes.paths() == ["/before.md", "/after.md"]
        assert events.texts() == ["before", "after"]
        assert changes.ended is None and events.ended is None
        print(f"\nafter the outage: written {written - back:.2f} s after the database was "
              f"back; the change arrived {changes.frames[-1][0] - written:.2f} s and the event "
              f"{events.frames[-1][0] - written:.2f} s after that")
        assert stop_server(server) == 0
        stopped = True
        log = server.stderr.read_text()
        assert "Traceback" not in log and "Error in ASGI" not in log, log[-4000:]
        waits = [line for line in log.splitlines()
                 if line.startswith("memfs: warning: ") and "cannot be reached" in line]
        print("the server's own lines about it:\n" + "\n".join(waits))
        # one line per kind of waiter (the two kinds of stream, the background indexer and,
        # since PostgreSQL's words are queued too, the words' catch-up), not one per stream or
        # per failed poll (the indexer said it at every poll, 2 s apart)
        kinds = ("memfs: warning: change streams wait:",
                 "memfs: warning: session event streams wait:",
                 "memfs: warning: the indexer waits:",
                 "memfs: warning: the words index catch-up waits:")
        assert sorted(k for line in waits for k in kinds if line.startswith(k)) == sorted(kinds)
        assert len(waits) == 4, log[-4000:]
    finally:
        writer.close()
        if not stopped:
            stop_server(server)
        pg_cluster.drop_database(name)


def test_a_shell_write_on_a_remote_mount_fails_in_a_database_outage(pg_cluster, tmp_path):
    """bash ignores the error of a close: ``echo x > f`` on a remote mount returned 0 in a
    PostgreSQL outage and the write was lost. Once the mount found the database down, the
    open fails (bash says so, status 1) until the database is back; then it saves again."""
    import psycopg

    require_fuse()
    name = pg_cluster.new_database(pg_cluster.template)
    d = tmp_path / "server"
    d.mkdir()
    server = start_server(d, "--api-key", KEY, db=pg_cluster.url(name))
    api = sdk(server.url, KEY)
    sid = api.beta.memory_stores.create(name="outage").id
    m = Mount(tmp_path / "unused.db", sid, tmp_path / "mnt", [], remote_env(server.url, KEY))
    try:
        m.wait_mounted()

        def echo(n: str) -> int:
            return subprocess.run(["bash", "-c", f"echo {n} > {m.root}/{n}.md"],
                                  capture_output=True).returncode

        assert echo("before") == 0
        with psycopg.connect(pg_cluster.url(), autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = %s", (name,))
            # How the mount learns it: a close that fails (python reports it; bash would not).
            with pytest.raises(OSError):
                (m.root / "learns.md").write_text("x")
            assert echo("during") == 1
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        wait_until(lambda: echo("after") == 0, 30, interval=0.5)
        stored = sorted(x.path for x in api.beta.memory_stores.memories.list(sid))
        assert stored == ["/after.md", "/before.md"]
    finally:
        m.stop()
        stop_server(server)
