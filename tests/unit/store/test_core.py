"""The store's Core (base.py): its transactions keep the rules exact with several processes on one
database (PostgreSQL: replicas of `memfs serve`, issue 12)."""

from __future__ import annotations

import pytest

from memfs import (
    LimitExceeded,
    PreconditionFailed,
)
from memfs.store import Limits, Store
from tests.support.backend import Backend
from tests.support.storekit import API, all_pages


@pytest.fixture
def store(backend: Backend) -> Store:
    """Every test of this module runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend.open()


class TestReplicas:
    """Two Store objects on one database, each with connections of its own (on PostgreSQL a
    pool each, as two servers have), written from many threads at once."""

    def test_the_memory_limit_is_exact_across_replicas(self, backend: Backend) -> None:
        import threading

        limit, threads, tries = 40, 8, 12  # 96 creates race for 40 places
        a = backend.open(limits=Limits(max_memories=limit))
        b = backend.open(limits=Limits(max_memories=limit))
        sid = a.stores.create("shared").id
        created: list[str] = []
        refused: list[Exception] = []
        unexpected: list[BaseException] = []
        start = threading.Barrier(threads)

        def creator(n: int) -> None:
            s = (a, b)[n % 2]
            start.wait()
            for i in range(tries):
                try:
                    created.append(s.memories.create(sid, f"/t{n}/{i}.md", f"{n}.{i}",
                                                   actor=API).id)
                except LimitExceeded as e:
                    refused.append(e)
                except BaseException as e:  # noqa: BLE001  (reported below)
                    unexpected.append(e)

        pool = [threading.Thread(target=creator, args=(n,)) for n in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        assert not unexpected, unexpected
        assert len(created) == limit and len(refused) == threads * tries - limit
        for s in (a, b):
            assert s.memories.count(sid) == limit
            assert len(s.memories.tree(sid)) == limit
        assert len(set(created)) == limit

    def test_preconditions_lose_no_version_across_replicas(self, backend: Backend) -> None:
        import threading

        a, b = backend.open(), backend.open()
        sid = a.stores.create("shared").id
        m = a.memories.create(sid, "/counter.md", "0", actor=API)
        threads, rounds = 6, 15
        won: list[str] = []
        unexpected: list[BaseException] = []
        start = threading.Barrier(threads)

        def incrementer(n: int) -> None:
            s = (a, b)[n % 2]
            start.wait()
            done = 0
            while done < rounds:
                try:
                    cur = s.memories.get(sid, m.id)
                    new = str(int(cur.content) + 1)
                    s.memories.update(sid, m.id, content=new,
                                    precondition_sha256=cur.content_sha256, actor=API)
                except PreconditionFailed:
                    continue
                except BaseException as e:  # noqa: BLE001  (reported below)
                    unexpected.append(e)
                    return
                won.append(new)
                done += 1

        pool = [threading.Thread(target=incrementer, args=(n,)) for n in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        assert not unexpected, unexpected
        total = threads * rounds
        # every increment that succeeded is one version, none lost, none twice
        assert sorted(int(w) for w in won) == list(range(1, total + 1))
        assert b.memories.get(sid, m.id).content == str(total)
        history, _ = all_pages(b.versions.list, store_id=sid, memory_id=m.id, view="full")
        assert [v.content for v in history] == [str(i) for i in range(total, -1, -1)]
