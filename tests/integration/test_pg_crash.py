"""PostgreSQL crashing under a fleet (issue 44's target: "nothing is lost across ``pg_ctl stop
-m immediate``"): two ``memfs serve`` replicas on a durable cluster (fsync and synchronous
commits on, as in production), writers through both into four stores at once; the cluster is
stopped as by a crash in the middle and started again (crash recovery from its WAL). Every
create a replica acknowledged is in the database afterwards, with its change in its store's
feed, and a follower of each store's change stream, kept open across the outage, saw every
change of its store once and in order. A cluster of the test's own (the session's is not
durable): fails without PostgreSQL when CI=true."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memfs.store import Store
from tests.support import need, wait_until
from tests.support.pgcluster import Cluster, start_cluster
from tests.support.server import Server, start_server, stop_server

KEY = "sk-memfs-crash"
HEADERS = {"x-api-key": KEY}
STORES = 4
WRITERS = 6


@pytest.fixture
def durable() -> Iterator[Cluster]:
    cluster = start_cluster(durable=True)
    need(cluster is not None,
         "PostgreSQL is not installed (Debian's postgresql package: scripts/_setup.sh)")
    assert cluster is not None
    try:
        yield cluster
    finally:
        cluster.stop()


class Changes:
    """A store's change stream on a replica, read in a thread (``memfs.change`` data)."""

    def __init__(self, url: str) -> None:
        self.changes: list[dict[str, Any]] = []
        self.resets = 0
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self.stopping = False
        threading.Thread(target=self._read, args=(url,), daemon=True).start()
        assert self.ready.wait(20)

    def _read(self, url: str) -> None:
        try:
            with httpx.stream("GET", url, headers=HEADERS, timeout=120) as r:
                event = ""
                for line in r.iter_lines():
                    self.ready.set()
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: "):
                        if event == "memfs.change":
                            self.changes.append(json.loads(line[6:]))
                        elif event == "memfs.reset":
                            self.resets += 1
                    if self.stopping:
                        return
        except BaseException as e:  # noqa: BLE001 - the test reports it
            self.error = e
        finally:
            self.ready.set()


def test_no_acknowledged_write_is_lost_when_postgresql_crashes(durable: Cluster,
                                                               tmp_path: Path) -> None:
    url = durable.url()
    Store(url).close()  # the schema
    servers: list[Server] = []
    db = Store(url)
    try:
        for i in range(2):
            d = tmp_path / f"replica{i}"
            d.mkdir()
            servers.append(start_server(d, "--api-key", KEY, db=url,
                                        env={"MEMFS_EMBEDDINGS": "none"}))
        stores = [db.stores.create(f"s{i}").id for i in range(STORES)]
        streams = {sid: Changes(f"{servers[i % 2].url}/v1/memory_stores/{sid}/changes/stream"
                                "?after=0") for i, sid in enumerate(stores)}
        acknowledged: list[tuple[str, str, str, str]] = []  # store, path, content, memory id
        phase = {"crashed": False, "back": False}
        after_back = [0] * WRITERS

        def write(n: int) -> None:
            sid = stores[n % STORES]
            with httpx.Client(base_url=servers[n % 2].url, headers=HEADERS, timeout=30) as c:
                i = 0
                while after_back[n] < 10:
                    path, content = f"/w{n}/{i}.md", f"{n} {i}"
                    i += 1
                    try:
                        r = c.post(f"/v1/memory_stores/{sid}/memories",
                                   json={"path": path, "content": content})
                    except httpx.HTTPError:
                        continue  # not acknowledged
                    if r.status_code == 200:
                        acknowledged.append((sid, path, content, r.json()["id"]))
                        if phase["back"]:
                            after_back[n] += 1
                    elif phase["crashed"]:
                        time.sleep(0.05)  # the database is away: refused, not acknowledged
                    else:
                        raise AssertionError(f"{r.status_code} {r.text[:300]}")

        threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
        for t in threads:
            t.start()
        wait_until(lambda: len(acknowledged) >= 60, 30)
        phase["crashed"] = True
        durable.crash()
        crashed_with = len(acknowledged)
        time.sleep(1.0)  # the point: writes arrive while the database is away
        durable.restart()
        phase["back"] = True
        for t in threads:
            t.join(90)
        assert not any(t.is_alive() for t in threads)
        print(f"\n{crashed_with} creates acknowledged before the crash, "
              f"{len(acknowledged)} in all")
        # Every acknowledged create is there, with its change in its store's feed.
        rows = {(r["store_id"], r["path"]): (r["content"], r["id"]) for r in db.all(
            "SELECT store_id, path, content, id FROM memories")}
        lost = [a for a in acknowledged if rows.get((a[0], a[1])) != (a[2], a[3])]
        assert not lost, f"{len(lost)} acknowledged creates lost: {lost[:5]}"
        for sid, f in streams.items():
            feed: list[Any] = []
            while batch := db.feed.since(sid, feed[-1].seq if feed else 0, 1000):
                feed += batch
            assert {c.memory_id for c in feed} >= {a[3] for a in acknowledged if a[0] == sid}
            wait_until(lambda f=f, last=feed[-1].seq: f.changes and
                       f.changes[-1]["seq"] >= last, 30, what="the follower caught up")
            f.stopping = True
            assert f.error is None and f.resets == 0
            assert [(d["seq"], d["memory_id"], d["path"]) for d in f.changes] == [
                (c.seq, c.memory_id, c.path) for c in feed]
        for s in servers:
            assert stop_server(s) == 0
            log = s.stderr.read_text()
            assert "Traceback" not in log, log[-4000:]
    finally:
        for s in servers:
            if s.proc.poll() is None:
                stop_server(s)
        db.close()
