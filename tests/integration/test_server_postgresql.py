"""``memfs serve --db postgresql://…``: two server processes (replicas) on one PostgreSQL
database, driven by ``anthropic==2.14.0`` and raw HTTP (issue 12). The database is a fresh
one in the test session's throwaway cluster (tests/conftest.py ``pg_cluster``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import anthropic
import httpx
import pytest

from tests.integration.test_server import Server, start_server, stop_server

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
        yield started[0], started[1]
    finally:
        for s in started:
            assert stop_server(s) == 0
        pg_cluster.drop_database(name)


def test_two_replicas_serve_one_database(replicas):
    a, b = replicas
    for s in (a, b):
        assert "postgresql://" in s.stderr.read_text()
    ca = anthropic.Anthropic(base_url=a.url, api_key=KEY, max_retries=0)
    cb = anthropic.Anthropic(base_url=b.url, api_key=KEY, max_retries=0)
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


def test_a_write_through_one_replica_reaches_a_change_stream_of_the_other(replicas):
    """The change feed is in the database: a follower of replica B sees what was written
    through replica A (each server polls it; LISTEN/NOTIFY is a later step of issue 12).
    Prints the latency from the write's answer to the change's arrival."""
    import json
    import time

    a, b = replicas
    h = {"x-api-key": KEY}
    sid = httpx.post(a.url + "/v1/memory_stores", headers=h, json={"name": "live"}).json()["id"]
    arrived: dict[str, float] = {}
    ready = threading.Event()

    def follow() -> None:
        with httpx.stream("GET", f"{b.url}/v1/memory_stores/{sid}/changes/stream",
                          headers=h, timeout=30) as r:
            ready.set()
            for line in r.iter_lines():
                if line.startswith("data: "):
                    data = json.loads(line[6:])
                    if isinstance(data, dict) and data.get("path"):
                        arrived[data["path"]] = time.monotonic()
                if len(arrived) == 20:
                    return

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    assert ready.wait(10)
    time.sleep(0.3)
    sent: dict[str, float] = {}
    with httpx.Client(base_url=a.url, headers=h) as c:
        for i in range(20):
            path = f"/w{i}.md"
            c.post(f"/v1/memory_stores/{sid}/memories", json={"path": path, "content": "x"})
            sent[path] = time.monotonic()
            time.sleep(0.05)
    t.join(10)
    assert set(arrived) == set(sent)
    lat = sorted(arrived[p] - sent[p] for p in sent)
    print(f"\ncross-replica change latency: p50 {lat[10] * 1000:.0f} ms, "
          f"max {lat[-1] * 1000:.0f} ms (20 writes)")
    assert lat[-1] < 1.0
