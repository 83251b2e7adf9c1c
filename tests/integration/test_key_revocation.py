"""Issue 22: "Two replicas: a key revoked on one is refused on the other within 1 s, and its
open stream ends", and a key's expiry likewise, on every server. Two real ``memfs serve``
processes on one database: a PostgreSQL database of the test session's throwaway cluster, and
one SQLite file (any number of processes may open one: memfs/store/__init__.py). The measurements
are tests/support/revocation.py's, which ``scripts/revocation_latency`` repeats."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memfs.api.streams import GRANT_RECHECK_SECONDS
from tests.support.revocation import Replicas, expire_and_measure, revoke_and_measure
from tests.support.server import Server, start_server, stop_server

KEY = "sk-memfs-revocation"
#: Issue 22: revocation and expiry take effect within this, across replicas (seconds).
WITHIN = 1.0


@pytest.fixture(params=["sqlite", "postgresql"])
def replicas(request, tmp_path) -> Iterator[Replicas]:
    """Two servers on one database, and a store and a session made through the first."""
    dropped = None
    if request.param == "postgresql":
        cluster = request.getfixturevalue("pg_cluster")
        name = cluster.new_database(cluster.template)
        db, dropped = cluster.url(name), (cluster, name)
    else:
        db = str(tmp_path / "memfs.db")
    started: list[Server] = []
    r = None
    try:
        for i in range(2):
            d = tmp_path / f"replica{i}"
            d.mkdir()
            started.append(start_server(d, "--api-key", KEY, db=db))
        r = Replicas(started[0].url, started[1].url, KEY)
        yield r
    finally:
        if r is not None:
            r.close()
        for s in started:
            assert stop_server(s) == 0
        for s in started:
            log = s.stderr.read_text()
            assert "Traceback" not in log, log[-4000:]
        if dropped is not None:
            dropped[0].drop_database(dropped[1])


def test_a_key_revoked_through_one_replica_is_refused_by_the_other_within_1s(replicas):
    """A key's plain requests and its two open streams (a store's changes, a session's
    events) on replica B; the key revoked through replica A, at a random moment of the
    streams' recheck period. B's next requests are refused (401, saying revoked) and both
    streams end cleanly, each within 1 s of the revocation."""
    got = revoke_and_measure(replicas, jitter=GRANT_RECHECK_SECONDS)
    print(f"\nrevoked through A: B refused the key after {got.refused * 1000:.0f} ms "
          f"({got.ok_before} requests still let in), its streams ended after "
          + ", ".join(f"{n} {t * 1000:.0f} ms" for n, t in got.streams.items()))
    assert got.refused < WITHIN
    assert set(got.streams) == {"changes", "events"}
    assert all(t < WITHIN for t in got.streams.values()), got.streams


def test_an_expired_key_stops_on_every_replica_within_1s(replicas):
    """A key that expires in 3 s, with both kinds of stream open on each replica (opened at a
    random moment of their recheck period): each replica lets it in until its expiry, refuses
    it (401, saying expired) after, within 1 s, and ends its streams within 1 s of it; none
    before."""
    got = expire_and_measure(replicas, expires_in=3, jitter=GRANT_RECHECK_SECONDS)
    name = {replicas.a: "A", replicas.b: "B"}
    print("\nafter the expiry: refused by "
          + ", ".join(f"{name[u]} after {t * 1000:.0f} ms" for u, t in got.refused.items())
          + "; streams ended after "
          + ", ".join(f"{n.replace(replicas.a, 'A').replace(replicas.b, 'B')} "
                      f"{t * 1000:.0f} ms" for n, t in got.streams.items()))
    assert set(got.refused) == {replicas.a, replicas.b}
    assert all(t < WITHIN for t in got.refused.values()), got.refused
    assert len(got.streams) == 4
    assert all(t < WITHIN for t in got.streams.values()), got.streams
