"""Which credentials of the open live streams are refused now, asked in one query per kind
(Store.keys.refused, refused_session_tokens, ended_signins: what memfs.api.grants.GrantWatch asks
every interval), on SQLite and PostgreSQL: the same refusals, with the same reasons, as a
request's own look-up (key_grant, session_grant, the Console's sign-in check)."""

from __future__ import annotations

import pytest

from memfs import errors
from memfs.store import Store
from memfs.store.common import IDS_PER_QUERY

from ...support import wait_until
from ...support.backend import Backend


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.open()


def queries(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements the store runs through its read helper from now on."""
    seen: list[str] = []
    read = store.all

    def counted(sql: str, *args: object, **kwargs: object) -> object:
        seen.append(sql)
        return read(sql, *args, **kwargs)

    monkeypatch.setattr(store, "all", counted)
    return seen


def test_refused_keys_says_which_and_why_in_one_query(store: Store, monkeypatch) -> None:
    live, revoked = store.keys.create("live"), store.keys.create("revoked")
    expiring = store.keys.create("expiring", expires_in=1)
    store.keys.revoke(revoked.id)
    gone = "apikey_01" + "0" * 22
    assert store.keys.refused([]) == {}  # no "IN ()", which PostgreSQL refuses
    seen = queries(store, monkeypatch)
    got = store.keys.refused([live.id, revoked.id, gone, live.id])
    assert len(seen) == 1
    assert got == {revoked.id: f"API key {revoked.id} was revoked at "
                               f"{store.keys.get(revoked.id).revoked_at}",
                   gone: f"API key {gone} is gone"}
    # The same words as a request's look-up.
    with pytest.raises(errors.Unauthorized) as e:
        store.keys.grant(revoked.key or "")
    assert e.value.message == got[revoked.id]
    why = wait_until(lambda: store.keys.refused([expiring.id]), 5, what="expired")
    assert why == {expiring.id: f"API key {expiring.id} expired at "
                                f"{store.keys.get(expiring.id).expires_at}"}


def test_refused_keys_notes_the_use_of_the_live_ones(store: Store) -> None:
    """A key that only holds a stream open is in use: its last use is noted, as a
    request's is."""
    key = store.keys.create("streaming")
    assert store.keys.get(key.id).last_used_at is None
    assert store.keys.refused([key.id]) == {}
    assert store.keys.get(key.id).last_used_at is not None


def test_refused_session_tokens_says_which_and_why_in_one_query(store: Store,
                                                                 monkeypatch) -> None:
    sid = store.stores.create("s").id

    def token(status: str = "running", ttl: float | None = None) -> tuple[str, str]:
        s = store.sessions.create([{"type": "memory_store", "memory_store_id": sid}],
                                 status="running").id
        t = store.sessions.create_token(s, ttl_seconds=ttl)
        if status != "running":
            store.sessions.set_status(s, status)
        return s, t.id

    (_, running), (idle_s, idle) = token(), token("idle")
    (_, ended), (deleted_s, deleted) = token("terminated"), token()
    store.sessions.delete(deleted_s)
    _, short = token(ttl=1)
    assert store.sessions.refused_tokens(()) == {}
    seen = queries(store, monkeypatch)
    got = store.sessions.refused_tokens([running, idle, ended, deleted])
    assert len(seen) == 1
    assert got.keys() == {idle, ended, deleted}
    assert got[idle] == (f"the session token of {idle_s} is valid only while the session runs "
                         "(it is idle)")
    assert "the session ended" in got[ended]
    assert got[deleted] == (f"the session token {deleted} is no longer valid: its session was "
                            "deleted")
    why = wait_until(lambda: store.sessions.refused_tokens([short]), 5, what="expired")
    assert "expired at" in why[short]


def test_ended_signins_are_those_signed_out_or_no_longer_recorded(store: Store,
                                                                  monkeypatch) -> None:
    key = store.keys.create("console")
    server_in, server_out = "a" * 64, "b" * 64
    stored_in, stored_out, never = "c" * 64, "d" * 64, "e" * 64
    for s in (stored_in, stored_out):
        store.keys.record_signin(s, key.id, 2**40)
    for s in (server_out, stored_out):
        store.keys.revoke_signin(s, 2**40)
    assert store.keys.ended_signins([]) == set()
    seen = queries(store, monkeypatch)
    got = store.keys.ended_signins([server_in, server_out],
                              recorded=[stored_in, stored_out, never])
    assert len(seen) == 1
    assert got == {server_out, stored_out, never}


def test_more_ids_than_one_statement_holds_take_a_query_per_so_many(store: Store,
                                                                     monkeypatch) -> None:
    key = store.keys.create("one")
    store.keys.revoke(key.id)
    ids = [f"apikey_{i:026d}" for i in range(IDS_PER_QUERY + 5)] + [key.id]
    seen = queries(store, monkeypatch)
    got = store.keys.refused(ids)
    assert len(seen) == 2 and len(got) == len(ids) and "revoked" in got[key.id]
