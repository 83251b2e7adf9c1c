"""What the Console asks of the keys kept in the database (issue 22), on SQLite and on
PostgreSQL: a key by its id with the digest its sign-ins are signed under and whether it is
refused now (:meth:`Store.keys.check`), and key names within a workspace
(:meth:`Store.keys.names`)."""

from __future__ import annotations

import pytest

from memfs.store import sha256_hex
from tests.support import wait_until


@pytest.fixture
def store(backend):
    return backend.open()


def test_key_check_gives_the_digest_and_the_grant_or_why_not(store):
    sid = store.stores.create("s", workspace="team-a").id
    key = store.keys.create("k", workspace="team-a", role="read_only", store_ids=[sid])
    check = store.keys.check(key.id)
    assert check is not None and check.secret_sha256 == sha256_hex(key.key.encode())
    assert check.grant == store.keys.grant(key.key) and check.refused == ""
    assert (check.grant.workspace_id, check.grant.role, check.grant.access) == (
        "team-a", "read_only", {sid: "read_only"})
    assert store.keys.get(key.id).last_used_at is not None  # a sign-in is a use
    assert store.keys.check("apikey_01" + "1" * 22) is None
    store.keys.revoke(key.id)
    check = store.keys.check(key.id)
    assert check is not None and check.grant is None and "was revoked" in check.refused
    assert check.secret_sha256 == sha256_hex(key.key.encode())  # still: to check a cookie
    short = store.keys.create("short", expires_in=1)
    check = wait_until(lambda: (c := store.keys.check(short.id)) and c.grant is None and c,
                       what="the key expires")
    assert f"API key {short.id} expired at" in check.refused


def test_key_names_within_a_workspace(store):
    a = store.keys.create("alpha", workspace="team-a")
    b = store.keys.create("beta", workspace="team-b")
    ids = [a.id, b.id, "apikey_nope"]
    assert store.keys.names(ids) == {a.id: "alpha", b.id: "beta"}
    assert store.keys.names(ids, workspace="team-a") == {a.id: "alpha"}
    assert store.keys.names([], workspace="team-a") == {}
