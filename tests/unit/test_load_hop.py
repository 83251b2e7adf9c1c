"""scripts/load_hop.py (issue 44): how ``scripts/load --db-rtt-ms`` points the servers at the
delaying proxy, and the lock a held transaction takes on a store."""

from __future__ import annotations

import hashlib

import pytest

from tests.support.repo import load_script

load_hop = load_script("load_hop")


def test_the_url_through_the_proxy_keeps_the_user_the_database_and_the_options() -> None:
    url = "postgresql://memfs:secret@db.example:6432/fleet?sslmode=disable"
    assert load_hop.tcp_target(url) == ("db.example", 6432)
    assert load_hop.via(url, 40001) == (
        "postgresql://memfs:secret@127.0.0.1:40001/fleet?sslmode=disable")
    assert load_hop.tcp_target("postgresql://localhost/fleet") == ("localhost", 5432)
    assert load_hop.via("postgresql://localhost/fleet", 5) == "postgresql://127.0.0.1:5/fleet"


@pytest.mark.parametrize("url", ["postgresql://postgres@%2Ftmp%2Fpg:5432/x",
                                 "postgresql:///x?host=/tmp/pg"])
def test_a_database_on_a_unix_socket_cannot_be_delayed(url: str) -> None:
    with pytest.raises(SystemExit, match="over TCP"):
        load_hop.tcp_target(url)


def test_a_stores_lock_key_is_the_one_memfs_writes_take() -> None:
    """The backends' own function where it exists; else the design's: blake2b-8 of the scope,
    a signed 64-bit integer (what pg_advisory_xact_lock takes)."""
    key = load_hop.lock_key("store:memstore_01abc")
    assert -(2 ** 63) <= key < 2 ** 63
    assert key != load_hop.lock_key("store:memstore_01abd")
    try:
        from memfs.backends.scopes import lock_key  # type: ignore[import-not-found]
    except ImportError:
        digest = hashlib.blake2b(b"store:memstore_01abc", digest_size=8).digest()
        assert key == int.from_bytes(digest, "big", signed=True)
    else:
        assert key == lock_key("store:memstore_01abc")
